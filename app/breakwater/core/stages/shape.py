"""Shape history (seed 003 §1): the request's frame and its last resort.

`[System][First user][Summary][Last N turns]`: the parts of the frame are
joined where two user messages would follow each other (seed 003's funnel merges
consecutive roles after shaping, and strict chat templates require turns to
alternate). `squeeze` head/tails the largest messages when even the last few
turns do not fit, and only then cuts over-long tool-call arguments outside
working memory (the one exception to "tool calls are never altered").
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from breakwater.core.stages import snip as snip_stage
from breakwater.core.log.edits import Edit
from breakwater.core.log.message import Message, ToolCall
from breakwater.core.policy import Policy
from breakwater.core.log.tokens import heuristic_message
from breakwater.core.stages.summarize import wrapper_spans

WRAPPER_MARKER = "[harness output cut so the request fits the window]"


def join_users(msgs: list[Message]) -> tuple[list[Message], list[str]]:
    """Merge each run of consecutive user messages into its first; returns the list and the absorbed ids."""
    out: list[Message] = []
    absorbed: list[str] = []
    for m in msgs:
        if out and m.role == "user" and out[-1].role == "user":
            a = out[-1]
            meta = dict(a.meta or {})
            meta.update(m.meta or {})
            meta["joined"] = tuple((a.meta or {}).get("joined", ())) + (m.id,)
            out[-1] = Message(a.id, "user", f"{a.content}\n\n{m.content}" if a.content else m.content,
                              turn=a.turn, meta=meta)
            absorbed.append(m.id)
        else:
            out.append(m)
    return out, absorbed


def squeeze(msgs: list[Message], policy: Policy, count) -> tuple[list[Message], list[Edit]]:
    """Last resort: head/tail the largest messages until the request fits under the hard limit.

    Never touches the system prompt or tool calls; user messages keep their first
    `user_keep_chars` characters unless nothing else is left to cut.
    """
    msgs = list(msgs)
    edits: list[Edit] = []
    target = policy.hard_limit
    total = count(msgs)
    for allow_user in (False, True):
        if allow_user and total > target:
            total = _cut_wrappers(msgs, edits, policy, count, total)
        while total > target:
            best, best_room = None, 0
            for i, m in enumerate(msgs):
                if m.role == "system" or (m.role == "user" and not allow_user):
                    continue
                floor = policy.user_keep_chars if m.role == "user" else 200
                room = len(m.content) - floor
                if room > best_room and room > 64:
                    best, best_room = i, room
            if best is None:
                break
            m = msgs[best]
            floor = policy.user_keep_chars if m.role == "user" else 200
            keep = max(floor, len(m.content) - (total - target) * 4 - 256)
            head = max(keep * 3 // 5, min(floor, keep))
            tail = max(0, keep - head)
            new_text, span = snip_stage.head_tail(m.content, head, tail,
                                                  lambda r: f"\n...[{r} chars cut so the request fits the window]...\n")
            new = m.with_content(new_text)
            before, after = heuristic_message(m), heuristic_message(new)
            if after >= before:
                break
            edits.append(Edit(m.id, "shape_history", "snipped", (span,), before, after,
                              f"request over hard limit {target} after keeping {policy.shape_keep_last_min} turns"))
            msgs[best] = new
            total = count(msgs)
    if total > target:
        total = _cut_arguments(msgs, edits, policy, count, total)
    return msgs, edits


def _cut_wrappers(msgs: list[Message], edits: list[Edit], policy: Policy, count, total: int) -> int:
    """Before a user message loses its middle, the harness's wrapping in it goes: a slash command's
    output, reminders, the caveat (Claude Code, Codex) are not the user's words. Where the first user
    message holds them, the goal and the summary joined to it would otherwise be the middle cut."""
    for i, m in enumerate(msgs):
        if total <= policy.hard_limit:
            break
        spans = [(a, b) for a, b in wrapper_spans(m.content) if b - a > len(WRAPPER_MARKER)] if m.role == "user" else []
        if not spans:
            continue
        parts, at = [], 0
        for a, b in spans:
            parts += [m.content[at:a], WRAPPER_MARKER]
            at = b
        new = m.with_content("".join(parts) + m.content[at:])
        before, after = heuristic_message(m), heuristic_message(new)
        edits.append(Edit(m.id, "shape_history", "snipped", tuple(spans), before, after,
                          f"request over hard limit {policy.hard_limit}: harness output in a user message"))
        msgs[i] = new
        total = count(msgs)
    return total


def _argument_marker(removed: int) -> str:
    return f"...[{removed} chars of this argument cut so the request fits the window; the log keeps it whole]..."


def cut_argument(arguments: str, policy: Policy) -> str:
    """Head and tail of each over-long string in the arguments; the JSON keys (and validity) stay.
    When no one string is over the limit but the argument is, the longest give way first (strings
    over half the limit, then a quarter, ...) until it is under the limit."""
    limit, head, tail = policy.argument_max_chars, policy.snip_head_chars, policy.snip_tail_chars
    shortest = head + tail + len(_argument_marker(limit))   # a cut makes nothing shorter than this

    def cut(text: str, over: int) -> str:
        return snip_stage.head_tail(text, head, tail, _argument_marker)[0] if len(text) > over else text

    def walk(value: Any, over: int) -> Any:
        if isinstance(value, str):
            return cut(value, over)
        if isinstance(value, dict):
            return {k: walk(v, over) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, over) for v in value]
        return value

    try:
        parsed = json.loads(arguments)
    except (ValueError, RecursionError):
        return cut(arguments, limit)
    over = limit
    while True:
        text = json.dumps(walk(parsed, over), ensure_ascii=False)
        if len(text) <= limit or over <= shortest:
            return text
        over = max(over // 2, shortest)


def _cut_arguments(msgs: list[Message], edits: list[Edit], policy: Policy, count, total: int) -> int:
    """Largest first, outside working memory: arguments over `argument_max_chars` keep head and tail."""
    target = policy.hard_limit
    far = len(msgs) - policy.working_memory_messages
    sizes = sorted(((max(len(c.arguments) for c in m.tool_calls), i) for i, m in enumerate(msgs[:far])
                    if m.role == "assistant" and m.tool_calls), reverse=True)
    for size, i in sizes:
        if total <= target or size <= policy.argument_max_chars:
            break
        m = msgs[i]
        calls = tuple(ToolCall(c.id, c.name, cut_argument(c.arguments, policy))
                      if len(c.arguments) > policy.argument_max_chars else c for c in m.tool_calls)
        new = replace(m, tool_calls=calls)
        before, after = heuristic_message(m), heuristic_message(new)
        if after >= before:
            continue
        edits.append(Edit(m.id, "shape_history", "truncated-argument", (), before, after,
                          f"request over hard limit {target} with every message cut; "
                          f"tool-call argument over {policy.argument_max_chars} chars"))
        msgs[i] = new
        total = count(msgs)
    return total
