"""Observation masking (seed 001): old tool output and old reasoning give way.

Outside the protected working memory (the last `working_memory_messages`
messages, or from the `mask_keep_observations`-th last observation on), observations (tool
results, text-mode ones in user messages) over `mask_min_chars` become a one-line placeholder that
still says how the call went (exit status, first error line, the signatures of its errors), and assistant text
over `fold_min_chars` is folded. Inside working memory, tool output over
`working_memory_max_chars` keeps its first and last 500 chars.
Tool calls keep their name and id; their arguments become `{}` far from the end only when the
policy clears tool inputs (`mask_clear_tool_inputs`, Anthropic's clear_tool_inputs).
"""

from __future__ import annotations

from breakwater.core.log.message import Message, ToolCall, utf8_len
from breakwater.core.log.error_signature import cleared_outcome
from breakwater.core.policy import Policy
from breakwater.core.stages.snip import head_tail

STAGE = "mask"
WORKING_MEMORY_STAGE = "working_memory"


def mask_placeholder(original: str, facts: list[str] | None = None, template: str = "") -> str:
    """seed 001's one line; how the call went (`exit 1; first error: …`) stays, as the agent needs it
    to know whether that step worked. A policy's `mask_placeholder` template replaces it (validated by
    the policy: {lines} and {bytes} only), as another agent's rule writes it."""
    if template:
        # lines as str.splitlines counts them, as SWE-agent's LastNObservations does
        return template.format(lines=len(original.splitlines()), bytes=utf8_len(original))
    tail = "".join(f"; {f}" for f in facts or ())
    # a long result's size is worked out once, with its heuristic count (message.text_sizes)
    return f"[early tool output cleared to save context. original length: {utf8_len(original)} bytes{tail}]"


def fold_placeholder(original: str) -> str:
    return f"[earlier reasoning folded to save context: {len(original)} chars]"


def middle_marker(removed_chars: int) -> str:
    return f"\n\n...[{removed_chars} chars in the middle cut to save context]...\n\n"


Result = tuple[Message, tuple[tuple[int, int], ...], str] | None  # (message, spans, kind)


CLEARED_INPUT = "{}"   # what a cleared call's arguments become: still a JSON object, as every wire wants


def excluded(policy: Policy, msg: Message | None, call=None) -> bool:
    """Whether the policy keeps this tool's results (and calls) whatever their age (`mask_exclude_tools`)."""
    if not policy.mask_exclude_tools:
        return False
    name = call.name if call is not None else msg.name
    return name is not None and name in {t.strip() for t in policy.mask_exclude_tools.split(",")}


def cleared_calls(msg: Message, policy: Policy) -> tuple[ToolCall, ...] | None:
    """The calls of a far assistant message with their arguments cleared, when the policy clears
    tool inputs and one of them changes; else None."""
    if not (policy.mask and policy.mask_clear_tool_inputs) or msg.role != "assistant" or not msg.tool_calls:
        return None
    calls = tuple(c if excluded(policy, None, c) or c.arguments == CLEARED_INPUT
                  else ToolCall(c.id, c.name, CLEARED_INPUT) for c in msg.tool_calls)
    return None if calls == msg.tool_calls else calls


def mask_far(msg: Message, policy: Policy, call=None) -> Result:
    """`call`: the call a tool result answers, whose name `mask_exclude_tools` may keep it by."""
    if msg.is_observation and len(msg.content) > policy.mask_min_chars and not excluded(policy, msg, call):
        return msg.with_content(masked_text(msg, template=policy.mask_placeholder)), ((0, len(msg.content)),), "masked"
    return fold(msg, policy)


def masked_text(msg: Message, facts: list[str] | None = None, template: str = "") -> str:
    """What a tool result over `mask_min_chars` becomes far from the end; `facts` are its
    `cleared_outcome` (how it went, its errors' signatures), when the caller has them already; `template` is the policy's `mask_placeholder`,
    written as it is (the rule it reproduces replaces every old observation, however short)."""
    if template:
        return mask_placeholder(msg.content, template=template)
    text = mask_placeholder(msg.content, cleared_outcome(msg) if facts is None else facts)
    return text if len(text) < len(msg.content) else mask_placeholder(msg.content)


def fold(msg: Message, policy: Policy) -> Result:
    """A far assistant message: its long text folded, its calls' arguments cleared if the policy
    clears tool inputs (then "masked" when only they change: the tool use is cleared)."""
    if msg.role != "assistant":
        return None
    calls = cleared_calls(msg, policy)
    if len(msg.content) > policy.fold_min_chars:
        out = msg.with_content(fold_placeholder(msg.content))
        return (out if calls is None else out.with_calls(calls)), ((0, len(msg.content)),), "folded"
    return None if calls is None else (msg.with_calls(calls), (), "masked")


def head_tail_near(msg: Message, policy: Policy) -> Result:
    if msg.is_observation and len(msg.content) > policy.working_memory_max_chars:
        text, span = head_tail(msg.content, policy.working_memory_head_chars, policy.working_memory_tail_chars,
                               middle_marker)
        return msg.with_content(text), (span,), "snipped"
    return None
