"""The chat screen: the live agent inside the workbench (SPEC §10 "Chat", "Controls").

It is the replay screen on a session that grows: the same list, gauges, inspector, timeline
and spill pane, re-simulated as entries arrive, with an input to talk to the agent. The agent
runs in an async worker on the app's loop; what it reports (`AgentEvent`) is posted as a
message, so only the handlers below change the screen. Approvals and summary reviews are
modals the agent awaits: nothing ever waits on a prompt nobody can see.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message as TMessage
from textual.widgets import Footer, Input, Static

from breakwater.core.log.visible import visible
from breakwater.core.log.json_lines import checked_loads
from breakwater.agent.approval import describe
from breakwater.agent.events import AgentEvent
from breakwater.agent.session import AgentError, AgentSession
from breakwater.core.log.edits import View
from breakwater.core.log.message import ToolCall
from breakwater.core.log.session_log import Event, SessionLog
from breakwater.core.simulate import view_at
from breakwater.core.replay import Replay
from breakwater.core.review import SummaryDecision, SummaryProposal
from breakwater.tools.workspace import Workspace, WorkspaceError
from breakwater.ui.screens.dialogs import DENY, SESSION, ApprovalScreen, SummaryReviewScreen
from breakwater.ui.screens.replay import ReplayScreen
from breakwater.ui.widgets.message_list import MessageList

HOW_TO_CONFIGURE = ("No model is configured. Start with `breakwater chat --base-url URL --model NAME`, or set "
                    "OPENAI_BASE_URL and OPENAI_API_KEY, or write base_url, api_key and model in "
                    "~/.config/breakwater/config.toml ($BREAKWATER_CONFIG). Everything else here works.")
STREAM_TAIL = 400
OLD_CONTENT_LIMIT = 2_000_000


@dataclass
class AgentActivity(TMessage):
    event: AgentEvent


class ChatScreen(ReplayScreen):
    BINDINGS = [
        Binding("ctrl+x", "cancel_request", "Cancel request", id="chat.cancel",
                tooltip="Stop the request or tool run in progress; the log stays valid"),
        Binding("tab", "focus_chat", "Chat", show=False, id="chat.focus", tooltip="Type a message to the agent"),
        # the input keeps q and esc (they are letters and an edit there): the footer says how to leave
        Binding("ctrl+q", "app.quit", "Quit", id="chat.quit", priority=True,
                tooltip="Quit (q works too once the input does not have the focus: tab moves it)"),
    ]

    def __init__(self, replay: Replay, agent: AgentSession | None, problem: str | None = None, **kw):
        super().__init__(replay, **kw)
        self.agent = agent
        self.problem = problem
        self.follow = True            # show the next request while the session grows
        self.allowed: set[str] = set()  # tools the user allowed for the whole session
        self._stream: list[str] = []
        self._busy = False
        if agent is not None:
            agent.approve = self._approve
            agent.review = self._review
            agent.on_event = lambda ev: self.post_message(AgentActivity(ev))

    def compose(self) -> ComposeResult:
        for widget in super().compose():
            if isinstance(widget, Footer):
                yield Static(id="chat-stream")
                # without a model it still takes the focus and the keys (enter says how to configure one):
                # a disabled input left them to the list, where "hello" stepped back and "D" compacted
                yield Input(id="chat-input", placeholder=self._placeholder())
            yield widget

    def _placeholder(self) -> str:
        if self.agent is None:
            return (self.problem or HOW_TO_CONFIGURE) + " ctrl+q quits."
        return f"Message {self.agent.model or 'the agent'} — enter sends, ctrl+x cancels, tab/shift+tab moves focus"

    def on_mount(self, event: events.Mount) -> None:
        event.prevent_default()   # the replay screen's own on_mount runs once, here, before ours
        super().on_mount()
        stream = self.query_one("#chat-stream", Static)
        if self.agent is None:
            stream.update(Text(self.problem or HOW_TO_CONFIGURE, style="bold"))
            self.notify(self.problem or HOW_TO_CONFIGURE, title="Chat is off", severity="warning", timeout=15)
        else:
            stream.update(Text(f"session {self.agent.path} · workspace {self.agent.workspace}", style="dim"))
        self.query_one("#chat-input", Input).focus()

    # -- following the live session -----------------------------------------------------------------
    def turn_to_show(self, turns: int) -> int:
        return turns + 1 if self.follow else super().turn_to_show(turns)

    def action_step(self, delta: int) -> None:
        self.follow = False
        super().action_step(delta)

    def action_jump(self, where: str) -> None:
        self.follow = where == "last"
        if self.follow:
            self._go(self.replay.turns + 1)
        else:
            super().action_jump(where)

    def _refresh_live(self) -> None:
        if not self.is_attached or not self.query(MessageList):
            return   # the app is closing: the agent's last words need no screen
        r = self.replay
        self.reload(Replay(self.agent.log, self.agent.policy, r.counter, r.model, r.summarizer, tokens=r.tokens))
        if self.follow and self.messages:
            self.query_one(MessageList).select_index(len(self.messages) - 1)   # the newest in view

    # -- talking to the agent -----------------------------------------------------------------------
    @on(Input.Submitted, "#chat-input")
    def _submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if not text:
            return
        if self.agent is None:
            self.notify(HOW_TO_CONFIGURE, severity="warning")
            return
        if self._busy:
            self.notify("The agent is still working; wait, or cancel with ctrl+x.", severity="warning")
            return
        event.input.value = ""
        self.follow = True
        self._send(text)

    @work(exclusive=True, group="agent")
    async def _send(self, text: str) -> None:
        self._busy = True
        self._show_stream("…waiting for the model")
        try:
            await self.agent.send(text)
        except AgentError as exc:
            self.notify(str(exc), title="The agent stopped", severity="error", timeout=20)
            self._show_stream(f"stopped: {exc}", "bold")   # not the "sending …" of the request that failed
        except asyncio.CancelledError:
            self.notify("Request cancelled; the partial reply is logged and never sent again.", timeout=5)
            self._show_stream("cancelled")
            raise
        finally:
            self._busy = False
            self._refresh_live()

    def action_cancel_request(self) -> None:
        if not self._busy:
            self.notify("Nothing is running.", timeout=2)
            return
        self.workers.cancel_group(self, "agent")

    def action_focus_chat(self) -> None:
        chat = self.query_one("#chat-input", Input)
        if chat.has_focus:
            self.query_one(MessageList).focus()
        else:
            chat.focus()

    def _show_stream(self, text: str, style: str = "") -> None:
        self.query_one("#chat-stream", Static).update(Text(visible(text[-STREAM_TAIL:].replace("\n", " ⏎ ")),
                                                           style=style))

    @on(AgentActivity)
    def _activity(self, message: AgentActivity) -> None:
        ev = message.event
        if ev.kind == "text":
            self._stream.append(ev.text)
            self._show_stream("assistant ▸ " + "".join(self._stream))
        elif ev.kind == "request":
            self._stream = []
            self._show_stream(f"turn {ev.turn}: sending {ev.view.sent_tokens:,} tokens "
                              f"({ev.view.zone} zone)…", "dim")
        elif ev.kind == "message":
            self._refresh_live()
        elif ev.kind == "tool_start":
            self._show_stream(f"tool ▸ {describe(ev.call, 300)}", "bold")
        elif ev.kind == "tool_end":
            self._show_stream(f"tool ✓ {ev.call.name} finished", "dim")
        elif ev.kind == "compaction":
            e = ev.event
            how = f", {e.get('reviewed')}" if e.get("reviewed") else ""
            self.notify(f"{e.get('covered')} messages summarized ({e.get('summarizer')}, {e.get('trigger')}{how}); "
                        f"{e.get('tokens_before'):,} → {e.get('tokens_after'):,} tokens", title="Deep compaction")
        elif ev.kind == "retry":
            wait = ev.event.get("retry_in_s") if ev.event is not None else None
            action = "compacting and retrying" if ev.event is not None and ev.event.get("kind") == "context_length" \
                else ("retrying" + ("" if wait is None else f" in {wait} s"))
            self.notify(visible(f"{ev.text} — {action}"), title="Request failed", severity="warning", timeout=8)
            self._show_stream(f"turn {ev.turn}: {ev.text} — {action}…", "bold")
        elif ev.kind == "error" and ev.event is not None:
            self.notify(visible(ev.text), title="Error", severity="error", timeout=12)
        elif ev.kind == "final":
            self._show_stream("assistant ✓ " + ev.text, "")

    # -- what the agent asks the user ---------------------------------------------------------------
    async def _approve(self, call: ToolCall) -> bool:
        if call.name in self.allowed:
            return True
        answer = await self.app.push_screen_wait(ApprovalScreen(call, self._current_content(call)))
        if answer == SESSION:
            self.allowed.add(call.name)
        return answer != DENY

    def _current_content(self, call: ToolCall) -> str | None:
        """What write_file would overwrite (for the diff), read through the workspace's own checks."""
        if call.name != "write_file":
            return None
        try:
            path = checked_loads(call.arguments or "{}").get("path")
            old = Workspace(self.agent.workspace).read_regular(path, OLD_CONTENT_LIMIT)
        except (ValueError, AttributeError, TypeError, OSError, WorkspaceError):
            return None
        return old.decode("utf-8", errors="replace")

    async def _review(self, proposal: SummaryProposal) -> SummaryDecision:
        before = self.detail.view if self.detail is not None else None
        at_risk = await self.facts_at_risk(proposal, before, before.turn) if before is not None else None
        return await self.app.push_screen_wait(SummaryReviewScreen(proposal, at_risk))

    # -- control by hand: the agent logs it --------------------------------------------------------
    def record_control(self, type: str, data: dict) -> None:
        if self.agent is None or self.agent.log is None:
            self.notify(HOW_TO_CONFIGURE, severity="warning")
            return
        self._control(type, data)

    def request_with(self, event: Event) -> View | None:
        """The next request were `event` logged now (in a thread)."""
        log = self.replay.log
        if self.agent is None or log is None:
            return None
        r = self.replay
        return view_at(SessionLog(log.header, [*log.entries, event]), r.policy, r.turns + 1, r.counter, r.model)

    @work(group="control")
    async def _control(self, type: str, data: dict) -> None:
        await self.agent.add_event(type, data)
        self.notify(f"{type} {next(iter(data.values()))}: the next request obeys it", title="Logged", timeout=4)
        self.follow = True
        self._refresh_live()

    @work(exclusive=True, group="compact")
    async def compact_now(self) -> None:
        if self.agent is None or self.agent.log is None:
            self.notify(HOW_TO_CONFIGURE, severity="warning")
            return
        if self._busy:
            self.notify("Wait for the agent to finish this step, then compact.", severity="warning")
            return
        comp = await self.agent.compact_now()
        if comp is None:
            self.notify("No deep compaction: nothing to summarize, or you cancelled it.", timeout=4)
        self.follow = True
        self._refresh_live()
