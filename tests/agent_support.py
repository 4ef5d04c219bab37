"""Helpers for the agent's tests: a scripted model behind the fake server, and log checks.

`Script` is a responder for `FakeOpenAIServer`: it answers the agent's requests from one
script and deep-compaction summary requests from another, and checks that every agent
request's system message starts with the static prompt layer (the summary requests carry
the summarizer's own system prompt, so the server-wide `static_prefix` check cannot be used).
"""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from support.fake_openai import FakeOpenAIServer, Reply
from support.request_checks import message_text

from breakwater.agent.config import AgentConfig
from breakwater.core.fold.pipeline import Pipeline
from breakwater.core.policy import Policy
from breakwater.core.stages.prompt import RETRIEVED_FOOTER, VOLATILE_HEADER, static_system
from breakwater.core.log.session_log import SessionLog, load_native
from breakwater.core.simulate import view_at
from breakwater.core.stages.summarize import SUMMARY_SYSTEM_PROMPT
from breakwater.core.log.tokens import TokenCounter
from breakwater.core.log.validity import api_problems
from breakwater.tools.registry import tool_schemas

KEY = "sk-test-breakwater-0123456789abcdef"
MODEL = "fake-model"
STATIC = static_system(tool_schemas())

VALID_SUMMARY = """<analysis>The user asked for work on the project; tools ran; files were read.</analysis>
<summary>
## Goal
- Finish the scripted task in the workspace.
## Constraints
- (none)
## Progress
- Several steps are done.
## Decisions
- Read large outputs in slices from the spill file instead of printing them again.
## Next steps
- Continue with the next scripted step.
## Critical context
- (none)
## Errors
- (none)
## Files modified
- notes/report.md (modified)
## Files read
- (none)
</summary>"""

Step = Reply | Callable[[dict[str, Any]], Reply]


def is_summary_request(body: Mapping[str, Any]) -> bool:
    messages = body.get("messages") or []
    return bool(messages) and messages[0].get("role") == "system" and \
        message_text(messages[0].get("content")).startswith(SUMMARY_SYSTEM_PROMPT[:60])


class Script:
    """Responder: agent requests take the next step, summary requests the next summary reply."""

    def __init__(self, steps: Iterable[Step] = (), summaries: Iterable[Step] = (),
                 summary_default: Reply | None = Reply(text=VALID_SUMMARY), static: str | None = STATIC):
        self.steps: collections.deque[Step] = collections.deque(steps)
        self.summaries: collections.deque[Step] = collections.deque(summaries)
        self.summary_default = summary_default
        self.static = static
        self.agent_bodies: list[dict[str, Any]] = []
        self.summary_bodies: list[dict[str, Any]] = []
        self.problems: list[str] = []

    def __call__(self, body: dict[str, Any]) -> Reply:
        if is_summary_request(body):
            self.summary_bodies.append(body)
            item = self.summaries.popleft() if self.summaries else self.summary_default
            if item is None:
                return Reply.server_error("Script: no summary reply scripted")
            return item(body) if callable(item) else item
        self.agent_bodies.append(body)
        if self.static is not None:
            system = message_text(body["messages"][0].get("content")) if body.get("messages") else ""
            if not system.startswith(self.static):
                problem = f"agent request {len(self.agent_bodies) - 1}: system message lacks the static layer"
                self.problems.append(problem)
                return Reply(status=400, error={"message": problem, "type": "invalid_request_error",
                                                "param": None, "code": "invalid_request_shape"})
        if not self.steps:
            return Reply.server_error("Script: the agent script is exhausted")
        item = self.steps.popleft()
        return item(body) if callable(item) else item


def serve(script: Script, window: int | None = None, **kw: Any) -> FakeOpenAIServer:
    return FakeOpenAIServer(responder=script, strict=True, window=window, api_key=KEY, **kw)


def agent_config(server: FakeOpenAIServer, workspace: Path, **kw: Any) -> AgentConfig:
    settings: dict[str, Any] = dict(base_url=server.base_url, api_key=KEY, model=MODEL, workspace=workspace,
                                    auto_approve=True, retry_base_s=0.01, retry_cap_s=0.2)
    settings.update(kw)
    return AgentConfig(**settings)


def agent_requests(server: FakeOpenAIServer):
    """The chat requests that came from the agent loop (not summaries), in order."""
    return [r for r in server.chat_requests if not is_summary_request(r.body)]


def answered(server: FakeOpenAIServer):
    """Agent requests that got a 200 (each produced one assistant message, partial or not)."""
    return [r for r in agent_requests(server) if r.reply is not None and not r.reply.is_error]


def strip_volatile(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The request without the per-turn layers: each user message keeps the one it first went out with."""
    out = [dict(m) for m in messages]
    for m in out:
        if m.get("role") == "user":
            text = m.get("content") or ""
            if text.startswith(VOLATILE_HEADER):
                head_end = text.find(RETRIEVED_FOOTER)
                start = head_end + len(RETRIEVED_FOOTER) if head_end >= 0 else 0
                cut = text.find("\n\n", start)
                m["content"] = text[cut + 2:]
    return out


def volatile_of(messages: list[dict[str, Any]]) -> str:
    for m in reversed(messages):
        if m.get("role") == "user":
            text = m.get("content") or ""
            return text[: len(text) - len(strip_volatile([m])[0]["content"])]
    return ""


def load(path: Path) -> SessionLog:
    log = load_native(path)
    assert log.issues == [], log.issues
    return log


def events(log: SessionLog, type_: str, **match: Any) -> list:
    return [e for e in log.events if e.type == type_ and all(e.get(k) == v for k, v in match.items())]


def assert_log_valid(log: SessionLog, policy: Policy) -> None:
    """Every line loads, and the log replays into an API-valid request at every turn."""
    for line in Path(log.path).read_text(encoding="utf-8").splitlines():
        json.loads(line)
    for turn in range(1, log.turn_count() + 2):
        view = view_at(log, policy, turn)
        assert api_problems(view.to_api()) == [], (turn, api_problems(view.to_api()))


def replayed_requests(log: SessionLog, policy: Policy) -> list[list[dict[str, Any]]]:
    """The request of every turn (as sent on the wire), rebuilt from the log alone."""
    return [view_at(log, policy, turn).to_api() for turn in range(1, log.turn_count() + 1)]


def fresh_pipeline(log: SessionLog, policy: Policy) -> Pipeline:
    pipe = Pipeline(policy, TokenCounter.for_model(log.header.get("model")), mode="exact")
    pipe.feed_all(log.entries)
    return pipe


def files_containing(root: Path, needle: str) -> list[Path]:
    data = needle.encode()
    return [p for p in root.rglob("*") if p.is_file() and data in p.read_bytes()]
