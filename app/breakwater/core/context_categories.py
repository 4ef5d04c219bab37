"""What a request's context holds, by category, as Claude Code's `/context` shows it: the system
prompt, tool schemas, memory and project files, user messages, assistant messages, tool results
(and how many of them are compacted), summaries, the overhead the transcript does not show, the
free space and the reserve kept before the hard limit.

One accounting with the gauges (core/log/accounting.py): the request's size is the gauge's `sent`
figure, the unseen overhead is the fitted one, and the visible part (sent − overhead) is shared out
between the categories in proportion to the seed's heuristic count of each, message by message, over
the request as the policy sends it. So the categories, the overhead, the free space and the reserve
add up to the window, and each figure is the one the gauge shows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

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
    whole: bool = False        # the log holds the whole request (a proxied session): nothing is unseen

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
        unseen = "none: the log holds the whole request (system prompt and tool schemas)" if self.whole \
            else ("fitted to the recorded usage (the gauge's ▓): tool schemas and a system prompt the "
                  "transcript does not hold") if self.overhead is not None \
            else "none counted: no recorded usage to fit it"
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
        parts.append(f"unseen {k(self.overhead)}" if self.overhead is not None else "unseen —")
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
               sent_tokens: int | None = None, overhead: int | None = None,
               tool_schemas: Sequence[Any] | int | None = None, whole: bool = False) -> ContextCategories:
    """`messages`: the request as sent; `kinds(message_id)`: the edit kinds applied to one;
    `sent_tokens`: the request's size as the gauge states it, `overhead` the unseen part of it (None
    when no usage was recorded to fit it): the categories are scaled to `sent_tokens − overhead`."""
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
    if isinstance(tool_schemas, int):   # their heuristic count (a proxied log's: core/log/accounting.py `whole`)
        tools = tool_schemas or None
    elif tool_schemas:
        import json

        tools = heuristic_text(json.dumps(list(tool_schemas), ensure_ascii=False))
    parts = [system, tools or 0, memory, user, assistant, results, summaries]
    if sent_tokens is not None:
        parts = shared_out(parts, max(0, sent_tokens - (overhead or 0)))
    system, tools_n, memory, user, assistant, results, summaries = parts
    return ContextCategories(window, hard_limit, system, tools_n if tools is not None else None, memory, user,
                             assistant, results, n_results, compacted, summaries, overhead, whole)


def shared_out(weights: list[int], total: int) -> list[int]:
    """`total` split in proportion to `weights`, in whole tokens that add up to it exactly (the
    largest remainders get the odd tokens)."""
    whole = sum(weights)
    if whole <= 0:
        return [total] + [0] * (len(weights) - 1) if weights else []
    exact = [w * total / whole for w in weights]
    out = [int(x) for x in exact]
    by_remainder = sorted(range(len(weights)), key=lambda i: exact[i] - out[i], reverse=True)
    for i in by_remainder[: total - sum(out)]:
        out[i] += 1
    return out


def for_turn(replay, detail) -> ContextCategories:
    """The categories of the request `detail` (core.replay.TurnDetail) of `replay`."""
    view, tools, fit = detail.view, replay.log.header.get("tools"), detail.calibration
    if fit.whole:   # the whole request is in the log: the tool schemas in force, nothing unseen
        return categories(view.messages, detail.kinds, view.window, view.hard_limit, view.sent_tokens, 0,
                          fit.tool_schemas, whole=True)
    return categories(view.messages, detail.kinds, view.window, view.hard_limit, view.sent_tokens,
                      fit.overhead if fit.samples else None, tools if isinstance(tools, list) else None)
