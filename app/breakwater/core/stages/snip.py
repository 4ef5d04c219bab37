"""Snip (seed 000 snipToolOutputs): long tool output keeps its head and tail.

Observations (tool results, and text-mode ones in user messages) over `snip_threshold_chars`
keep the first `snip_head_chars` and the last `snip_tail_chars`; the middle becomes a marker that says how much went.
"""

from __future__ import annotations

from breakwater.core.log.message import Message
from breakwater.core.policy import Policy

STAGE = "snip"


def snip_marker(removed_chars: int) -> str:
    return f"\n...[snipped {removed_chars} chars for context efficiency]...\n"


def head_tail(content: str, head: int, tail: int, marker) -> tuple[str, tuple[int, int]]:
    """Keep `head` chars and `tail` chars; `marker(removed)` replaces the middle."""
    end = len(content) - tail
    return content[:head] + marker(end - head) + content[end:], (head, end)


def snip(msg: Message, policy: Policy) -> tuple[Message, tuple[tuple[int, int], ...]] | None:
    if not msg.is_observation or len(msg.content) <= policy.snip_threshold_chars:
        return None
    text, span = head_tail(msg.content, policy.snip_head_chars, policy.snip_tail_chars, snip_marker)
    return msg.with_content(text), (span,)


def threshold(policy: Policy) -> str:
    return f"tool output > {policy.snip_threshold_chars} chars"
