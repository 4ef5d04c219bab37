"""The workbench chatting with a live agent (`breakwater chat`).

The session opens first (the client, the session file, the system prompt); then the chat
screen shows its log as it grows. If no model is configured, or the endpoint cannot be
reached, the workbench opens anyway on an empty session and the chat input says why and how
to configure one.
"""

from __future__ import annotations

from textual import events

from breakwater.agent.config import AgentConfig
from breakwater.agent.session import AgentError, AgentSession, resolve_policy
from breakwater.core.replay import Replay
from breakwater.core.log.session_log import SessionLog
from breakwater.ui.app import BreakwaterApp
from breakwater.ui.config import UISettings
from breakwater.ui.screens.chat import ChatScreen


class ChatApp(BreakwaterApp):
    def __init__(self, config: AgentConfig, *, configured: bool = True, settings: UISettings | None = None,
                 counter: str = "exact"):
        self.config = config
        self.agent: AgentSession | None = AgentSession(config) if configured else None
        self.problem: str | None = None
        policy = resolve_policy(config)
        super().__init__(Replay(SessionLog(), policy, counter), workspace=config.workspace, settings=settings)

    async def on_mount(self, event: events.Mount) -> None:
        event.prevent_default()   # not the replay app's first screen: ours, once the session is open
        if self.agent is not None:
            try:
                await self.agent.start()
            except AgentError as exc:
                self.problem = f"The agent could not start: {exc}"
                self.agent = None
        if self.agent is not None:
            self.replay = Replay(self.agent.log, self.agent.policy, self.replay.counter, self.agent.model)
        screen = ChatScreen(self.replay, self.agent, self.problem, workspace=self.workspace,
                            play_interval=self.settings.play_interval)
        await self.push_screen(screen)
        self._report_issues()

    async def action_quit(self) -> None:
        """Close the session first: the scribe and the project memory are written then."""
        if self.agent is not None:
            self.notify("Closing the session (writing memory)…", timeout=2)
            try:
                await self.agent.close()
            except Exception as exc:  # noqa: BLE001 - leaving must always work
                self.notify(f"Closing the session failed: {exc}", severity="error")
        self.exit()
