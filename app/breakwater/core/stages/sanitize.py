"""Stage 1, sanitize (seed 003 §4): the funnel that makes any history API-valid.

drop invalid messages -> merge consecutive same-role -> strip orphaned tool pairs -> merge again.

It runs incrementally: messages are fed one at a time and earlier decisions
never change, except that the last message may absorb the next one (merge) and
an open tool-call group is closed (unanswered calls stripped) when the next
non-tool message arrives or a request is about to be made.

A run of same-role messages is gathered as parts and joined once, when the run
ends or `out` is read (`take_dirty`), so a run of any length costs linear time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from breakwater.core.log.edits import Edit
from breakwater.core.log.message import Message, ToolCall
from breakwater.core.log.tokens import heuristic_message

STAGE = "sanitize"

LEGACY_PLACEHOLDER = re.compile(r"^\s*\[tool_call:[^\]]*\]\s*$")
FRIENDLY_ERROR = re.compile(
    r"^\s*(the request was (cancelled|canceled|aborted)|request (was )?(cancelled|canceled|aborted)"
    r"|i'?m sorry,? (but )?(something went wrong|an error occurred|i encountered an error)"
    r"|an error occurred while processing|something went wrong\. please try again)",
    re.IGNORECASE,
)
FRIENDLY_ERROR_MAX_CHARS = 300
INVALID_CALL_NAME = "invalid_tool_call"
ACCEPTED_ROLES = frozenset(("system", "user", "assistant", "tool"))


@dataclass(slots=True)
class SanitizedMessage:
    message: Message
    sources: tuple[str, ...]   # ids of the log messages it stands for (several when merged)


def drop_reason(msg: Message) -> str | None:
    """Why a message must not be sent at all, or None. Asked of every message fed: the checks of its
    own role only."""
    role = msg.role
    if role not in ACCEPTED_ROLES:
        return f"role {role!r} is not accepted by the chat-completions API"
    if msg.meta and msg.meta.get("partial"):
        return "partial reply of a cut stream (kept in the log, never sent)"
    if role == "user":
        return None if msg.content.strip() else "empty user message"
    if role == "assistant":
        if msg.tool_calls:
            return None
        text = msg.content
        if not text.strip():
            return "empty assistant message"
        if "[tool_call:" in text and LEGACY_PLACEHOLDER.match(text):
            return "legacy tool-call placeholder"
        if len(text) <= FRIENDLY_ERROR_MAX_CHARS and FRIENDLY_ERROR.match(text):
            return "friendly-error reply, not model output"
        return None
    if role == "tool" and not msg.tool_call_id:
        return "legacy tool message without tool_call_id"
    return None


def _merge(a: Message, b: Message) -> Message:
    content = a.content if not b.content else (b.content if not a.content else f"{a.content}\n\n{b.content}")
    return replace(a, content=content, tool_calls=a.tool_calls + b.tool_calls)


@dataclass(slots=True)
class _Run:
    """The last output message while it absorbs same-role messages: joined on `flush`."""

    base: Message
    parts: list[str]
    calls: list
    sources: list[str]


class Sanitizer:
    def __init__(self) -> None:
        self.out: list[SanitizedMessage] = []
        self.edits: list[Edit] = []
        self.counts: dict[str, int] = {}
        self._group: int | None = None      # index in `out` of the assistant whose results are due
        self._pending: set[str] = set()     # its calls still unanswered
        self._answered: set[str] = set()
        # lowest index of `out` changed since last `take_dirty`; never above len(out), so a message
        # appended is dirty without lowering it
        self.dirty_from: int = 0
        self._run: _Run | None = None       # out[-1] while a same-role run is being merged into it

    # -- bookkeeping ---------------------------------------------------------------------------
    def _edit(self, msg: Message, kind: str, reason: str, before: int, after: int) -> None:
        self.edits.append(Edit(msg.id, STAGE, kind, ((0, len(msg.content)),) if kind == "dropped" else (),
                               before, after, reason))
        self.counts[kind] = self.counts.get(kind, 0) + 1

    def _touch(self, index: int) -> None:
        self.dirty_from = min(self.dirty_from, index)

    def flush(self) -> None:
        """Join the open same-role run into out[-1]."""
        run = self._run
        if run is None:
            return
        self._run = None
        content = "\n\n".join(p for p in run.parts if p)
        self.out[-1] = SanitizedMessage(replace(run.base, content=content, tool_calls=tuple(run.calls)),
                                        tuple(run.sources))

    def take_dirty(self) -> int:
        self.flush()
        d = self.dirty_from
        self.dirty_from = len(self.out)
        return d

    # -- feeding -------------------------------------------------------------------------------
    def feed(self, msg: Message) -> None:
        reason = drop_reason(msg)
        if reason:
            self._edit(msg, "dropped", reason, heuristic_message(msg), 0)
            return
        role = msg.role
        if role == "tool":
            self._feed_tool(msg)
            return
        if self._group is not None:
            self.close_group()
        out = self.out
        if role == "system" and out:
            self._edit(msg, "merged", "system message after the first is sent as a user note",
                       heuristic_message(msg), heuristic_message(msg))
            msg = replace(msg, role="user", content=f"[System note]\n{msg.content}")
            role = "user"
        calls = msg.tool_calls
        # most assistant messages make one call, with an id and a name: nothing to strip or rename
        if calls and role == "assistant" and (len(calls) > 1 or not calls[0].id or not calls[0].name.strip()):
            msg = self._named_calls(self._unique_calls(msg))
            calls = msg.tool_calls
            if not calls and not msg.content.strip():
                return
        if out and out[-1].message.role == role and role in ("user", "assistant"):
            last = out[-1]
            run = self._run
            if run is None:
                run = self._run = _Run(last.message, [last.message.content], list(last.message.tool_calls),
                                       list(last.sources))
            self._edit(msg, "merged", f"consecutive {role} messages merged into {run.base.id}",
                       heuristic_message(msg), 0)
            run.parts.append(msg.content)
            run.calls.extend(calls)
            run.sources.append(msg.id)
            self._touch(len(out) - 1)
        else:
            if self._run is not None:
                self.flush()
            out.append(SanitizedMessage(msg, (msg.id,)))   # an append needs no _touch: see dirty_from
        if calls and role == "assistant":
            if self._run is not None:
                self.flush()
            self._group = len(out) - 1
            self._pending = {c.id for c in out[-1].message.tool_calls}
            self._answered = set()

    def _unique_calls(self, msg: Message) -> Message:
        """A second call with the same id in one message could never get its own result: strip it."""
        seen: set[str] = set()
        kept = []
        for c in msg.tool_calls:
            if c.id and c.id not in seen:
                seen.add(c.id)
                kept.append(c)
        if len(kept) == len(msg.tool_calls):
            return msg
        stripped = replace(msg, tool_calls=tuple(kept))
        gone = len(msg.tool_calls) - len(kept)
        self._edit(msg, "stripped", f"{gone} tool call(s) with a missing or repeated id",
                   heuristic_message(msg), heuristic_message(stripped))
        return stripped

    def _named_calls(self, msg: Message) -> Message:
        """A call without a name is rejected by strict servers, yet it was made and answered (with
        an error): it is sent under a name that says so, so the pair stays and the model learns."""
        if all(c.name.strip() for c in msg.tool_calls):
            return msg
        calls = tuple(c if c.name.strip() else ToolCall(c.id, INVALID_CALL_NAME, c.arguments) for c in msg.tool_calls)
        named = replace(msg, tool_calls=calls)
        self._edit(msg, "stripped", f"tool call(s) without a name sent as {INVALID_CALL_NAME}",
                   heuristic_message(msg), heuristic_message(named))
        return named

    def _feed_tool(self, msg: Message) -> None:
        cid = msg.tool_call_id
        if self._group is None or cid not in self._pending:
            why = "duplicate result for a call already answered" if cid in self._answered else "result without its call"
            self._edit(msg, "stripped", why, heuristic_message(msg), 0)
            return
        self._pending.discard(cid)
        self._answered.add(cid)
        if self._run is not None:
            self.flush()
        self.out.append(SanitizedMessage(msg, (msg.id,)))

    def close_group(self) -> None:
        """Strip calls that never got a result; called before any non-tool message or request."""
        if self._group is None:
            return
        gi, pending = self._group, self._pending
        self._group = None
        if not pending:   # every call answered (the common case): the empty set serves again
            self._answered = set()
            return
        self._pending, self._answered = set(), set()
        entry = self.out[gi]
        msg = entry.message
        kept = tuple(c for c in msg.tool_calls if c.id not in pending)
        stripped = replace(msg, tool_calls=kept)
        self._edit(msg, "stripped", f"{len(pending)} tool call(s) without a result: {', '.join(sorted(pending))}",
                   heuristic_message(msg), heuristic_message(stripped))
        if not kept and not stripped.content.strip():
            # nothing left of it; it is the last message since none of its calls was answered
            del self.out[gi]
            self._touch(gi)
            return
        self.out[gi] = SanitizedMessage(stripped, entry.sources)
        self._touch(gi)
        # merge again: an assistant left with text only may now sit next to another assistant
        if gi > 0 and not kept and self.out[gi - 1].message.role == "assistant" and gi == len(self.out) - 1:
            prev = self.out[gi - 1]
            self.out[gi - 1] = SanitizedMessage(_merge(prev.message, stripped), prev.sources + entry.sources)
            del self.out[gi]
            self._touch(gi - 1)

    def snapshot(self) -> "Sanitizer":
        """An independent copy (for the pipeline's checkpoints): the lists, sets and the open run are
        copied; sanitized messages and edits are replaced, never changed, so they are shared."""
        new = Sanitizer.__new__(Sanitizer)
        run = self._run
        new.__dict__.update(
            out=self.out.copy(), edits=self.edits.copy(), counts=self.counts.copy(), _group=self._group,
            _pending=self._pending.copy(), _answered=self._answered.copy(), dirty_from=self.dirty_from,
            _run=None if run is None else _Run(run.base, run.parts.copy(), run.calls.copy(), run.sources.copy()))
        return new


def sanitize(messages: list[Message]) -> tuple[list[SanitizedMessage], list[Edit]]:
    """The whole funnel over a list, for callers that do not need the incremental form."""
    s = Sanitizer()
    for m in messages:
        s.feed(m)
    s.close_group()
    s.flush()
    return s.out, s.edits
