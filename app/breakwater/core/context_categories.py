"""What a request's context holds, by category, as Claude Code's `/context` shows it: the system
prompt, tool schemas, memory and project files, user messages, assistant messages, tool results
(and how many of them are compacted), summaries, the overhead the transcript does not show, the
free space and the reserve kept before the hard limit.

Counted by the seed's heuristic, message by message, over the request as the policy sends it (the
workbench's heuristic figure, SPEC §2), so the categories add up to it. The overhead is the API's
own count of the request minus that same count of it as the agent logged it: the tool schemas and
whatever else the agent sent that its transcript does not hold (known only when the API's figure is
recorded and no compaction of the agent's own changed the history).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from breakwater.core.stages.deep_compaction import RECORDED
from breakwater.core.log.message import Message
from breakwater.core.log.tokens import heuristic_message, heuristic_text

COMPACTED = frozenset(("snipped", "masked", "microcompacted", "truncated"))
# memory and project files as agents put them in a request: Claude Code's CLAUDE.md reminder, Codex's
# AGENTS.md message, Breakwater's project history and retrieved memory
_MEMORY_BLOCK = re.compile(r"<system-reminder>(?:(?!</system-reminder>).)*?(?:CLAUDE\.md|claudeMd|# memory)"
                           r"(?:(?!</system-reminder>).)*</system-reminder>", re.S | re.I)
_MEMORY_MESSAGE = ("# AGENTS.md instructions", "<user_instructions>")
_MEMORY_SECTION = re.compile(r"\[(?:Project History|Retrieved Memory)\].*?(?=\n\n\[|\Z)", re.S)


@dataclass(frozen=True, slots=True)
class ContextCategories:
    window: int
    hard_limit: int
    system: int
    tools: int | None          # tool schemas, when the session holds them; else in `overhead`
    memory: int
    user: int
    assistant: int
    results: int
    results_n: int
    results_compacted: int
    summaries: int
    overhead: int | None       # unseen: known when the API's figure for this request is recorded

    @property
    def counted(self) -> int:
        return self.system + (self.tools or 0) + self.memory + self.user + self.assistant + self.results \
            + self.summaries

    @property
    def used(self) -> int:
        return self.counted + (self.overhead or 0)

    @property
    def reserve(self) -> int:
        """Kept free before the hard limit: room for the reply and the estimate's error."""
        return self.window - self.hard_limit

    @property
    def free(self) -> int:
        return max(0, self.hard_limit - self.used)

    def rows(self) -> list[tuple[str, int | None, str]]:
        """(category, tokens or None when unknown, a note) in the order /context lists them."""
        share = lambda n: f"{100 * n / self.window:.1f}% of the window" if n is not None else ""  # noqa: E731
        rows = [("system prompt", self.system, share(self.system)),
                ("tool schemas", self.tools, share(self.tools) if self.tools is not None
                 else "not in the transcript: part of the unseen overhead"),
                ("memory / project files", self.memory, share(self.memory)),
                ("user messages", self.user, share(self.user)),
                ("assistant messages", self.assistant, share(self.assistant)),
                ("tool results", self.results, f"{self.results_n:,} results, {self.results_compacted:,} compacted")]
        if self.summaries:
            rows.append(("summaries", self.summaries, share(self.summaries)))
        unseen = ("the API's count minus the transcript's heuristic one: tool schemas, a system prompt not "
                  "logged, the estimate's error") if self.overhead is not None \
            else "unknown: no API figure for this request as logged"
        rows += [("unseen overhead", self.overhead, unseen),
                 ("free space", self.free, f"before the hard limit {self.hard_limit:,}"),
                 ("reserve", self.reserve, "window − hard limit: the reply and the estimate's error")]
        return rows

    def line(self) -> str:
        """The compact form, one line."""
        k = lambda n: f"{n / 1000:.1f}k" if n >= 1000 else str(n)  # noqa: E731
        parts = [f"system {k(self.system)}"]
        if self.tools is not None:
            parts.append(f"tools {k(self.tools)}")
        parts += [f"memory {k(self.memory)}", f"user {k(self.user)}", f"assistant {k(self.assistant)}",
                  f"results {k(self.results)} ({self.results_compacted}/{self.results_n} compacted)"]
        if self.summaries:
            parts.append(f"summaries {k(self.summaries)}")
        parts.append(f"unseen {k(self.overhead)}" if self.overhead is not None else "unseen ?")
        parts += [f"free {k(self.free)}", f"reserve {k(self.reserve)}"]
        return "context: " + " · ".join(parts)


def memory_tokens(msg: Message) -> int:
    """Heuristic tokens of the memory and project-file text a system or user message carries."""
    text = msg.content
    if msg.role not in ("system", "user") or not text:
        return 0
    if text.lstrip().startswith(_MEMORY_MESSAGE):
        return heuristic_message(msg)
    spans = [m.group(0) for m in _MEMORY_BLOCK.finditer(text)] if "<system-reminder>" in text else []
    if "[" in text:
        spans += [m.group(0) for m in _MEMORY_SECTION.finditer(text)]
    return sum(heuristic_text(s) for s in spans)


def categories(messages: Sequence[Message], kinds, window: int, hard_limit: int,
               api_tokens: int | None = None, logged: Iterable[Message] | None = None,
               tool_schemas: Sequence[Any] | None = None) -> ContextCategories:
    """`messages`: the request as sent; `kinds(message_id)`: the edit kinds applied to one;
    `logged`: the same request as the agent logged it (None when a compaction of its own changed
    it), with `api_tokens` the API's count of it."""
    system = memory = user = assistant = results = summaries = 0
    n_results = compacted = 0
    for m in messages:
        t = heuristic_message(m)
        if m.meta and m.meta.get("compaction") is not None:
            summaries += t
            continue
        if m.is_observation:
            results += t
            n_results += 1
            compacted += bool(COMPACTED.intersection(kinds(m.id)))
            continue
        mem = min(t, memory_tokens(m)) if m.role in ("system", "user") else 0
        memory += mem
        if m.role == "system":
            system += t - mem
        elif m.role == "assistant":
            assistant += t
        else:
            user += t - mem
    tools = None
    if tool_schemas:
        import json

        tools = heuristic_text(json.dumps(list(tool_schemas), ensure_ascii=False))
    overhead = None
    if api_tokens and logged is not None:
        seen = sum(heuristic_message(m) for m in logged) + (tools or 0)
        overhead = max(0, api_tokens - seen)
    return ContextCategories(window, hard_limit, system, tools, memory, user, assistant, results, n_results,
                             compacted, summaries, overhead)


_API_BY_TURN: dict[int, tuple[object, dict[int, int]]] = {}   # id(log) -> (log, turn -> prompt tokens)


def api_tokens_of(log, turn: int) -> int | None:
    """The API's prompt tokens for request `turn`, from the usage event that followed its reply."""
    kept = _API_BY_TURN.get(id(log))
    if kept is None or kept[0] is not log or len(kept[1]) > len(log.events):
        by_turn = {}
        for ev in log.events:
            if ev.type == "usage" and isinstance(ev.get("turn"), int) and isinstance(ev.get("prompt_tokens"), int):
                by_turn[ev.get("turn")] = ev.get("prompt_tokens")
        if len(_API_BY_TURN) > 8:
            _API_BY_TURN.clear()
        kept = _API_BY_TURN[id(log)] = (log, by_turn)
    return kept[1].get(turn)


def for_turn(replay, detail) -> ContextCategories:
    """The categories of the request `detail` (core.replay.TurnDetail) of `replay`."""
    view, log = detail.view, replay.log
    history = log.messages[:detail.history]
    own_compaction = any(ev.type == "compaction" and ev.get("trigger") == RECORDED for ev in log.events
                         if isinstance(ev.get("turn"), int) and ev.get("turn") <= view.turn)
    tools = log.header.get("tools")
    return categories(view.messages, detail.kinds, view.window, view.hard_limit, api_tokens_of(log, view.turn),
                      None if own_compaction else history, tools if isinstance(tools, list) else None)
