"""The stage forms of a message (SPEC §4, stage 4): what snip, mask and microcompact make of it,
far from the end of the history and in working memory; the counts of those forms the ledger
enters as each message arrives, worked out without building them (a form is built only when a
request that sends it is), and the caches that spare running a stage again.

Functions of the policy, the message and the call it answers: the incremental index
(core/fold/index.py) enters their counts and asks them for the forms.
"""

from __future__ import annotations

import itertools

from breakwater.core.stages import mask as mask_stage
from breakwater.core.stages import microcompact as micro_stage
from breakwater.core.stages import snip as snip_stage
from breakwater.core.fold.ledger import NEAR
from breakwater.core.stages.mask import fold_placeholder, middle_marker
from breakwater.core.log.message import Message, ToolCall
from breakwater.core.log.error_signature import cleared_outcome
from breakwater.core.log.text_cache import forgets
from breakwater.core.policy import Policy
from breakwater.core.stages.snip import head_tail, snip_marker
from breakwater.core.log.tokens import MESSAGE_OVERHEAD, TOOL_CALL_OVERHEAD, heuristic_text

# The counts of the far forms of long messages, shared by every pipeline of the same policy (a
# re-simulation, the fidelity replays): (id(message), id(call), policy) -> (message, call, counts). An entry
# holds the message and the call, so no other object takes their ids while it is there.
_FORMS: dict[tuple[int, int, int], tuple] = {}
forgets(_FORMS.clear)   # emptied in place, never replaced
_POLICY_IDS: dict[Policy, int] = {}   # a small number per policy seen: a key is hashed in a few operations
_NEXT_POLICY_ID = itertools.count()    # atomic: two threads meeting two new policies give them two numbers
CACHED_FORMS = 1 << 13
CACHED_FORMS_CHARS = 2_000   # shorter messages: their forms cost less than remembering them


def _head_tail_tokens(text: str, head: int, tail: int, marker) -> int:
    """`heuristic_text` of `snip.head_tail(text, head, tail, marker)[0]`, from the lengths and the
    ASCII characters of the two ends, without putting the text together."""
    end = len(text) - tail
    if not 0 <= head <= end <= len(text):
        return heuristic_text(head_tail(text, head, tail, marker)[0])
    mark = len(marker(end - head))   # ASCII
    if text.isascii():
        return (head + mark + tail) // 4 + 1
    # new slices, which no cache would find again; `ascii_chars` inlined (two calls for each long result)
    a, b = text[:head], text[end:]
    kept = (len(a) if a.isascii() else len(a.encode("ascii", "ignore"))) \
        + (len(b) if b.isascii() else len(b.encode("ascii", "ignore")))
    return (kept + mark) // 4 + (head + tail - kept) // 2 + 1


def stage_levels(policy: Policy) -> tuple[int, ...]:
    """The far stage levels the policy turns on, in order: 1 snip, 2 mask, 3 microcompact."""
    return tuple(L for L, on in ((1, policy.snip), (2, policy.mask), (3, policy.microcompact)) if on)


def policy_id(policy: Policy) -> int:
    """A small number standing for `policy` in the keys of the shared forms."""
    return _POLICY_IDS.setdefault(policy, next(_NEXT_POLICY_ID))


def shared_forms(policy: Policy, pid: int, msg: Message, call: ToolCall | None) -> tuple:
    """`form_tokens(policy, msg, call)`, shared by the pipelines of this policy (`pid`) when the message is long."""
    key = (id(msg), id(call), pid)
    hit = _FORMS.get(key)
    if hit is not None and hit[0] is msg and hit[1] is call:
        return hit[2]
    changed = form_tokens(policy, msg, call)
    if len(msg.content) > CACHED_FORMS_CHARS:
        if len(_FORMS) >= CACHED_FORMS:
            _FORMS.clear()
        _FORMS[key] = (msg, call, changed)
    return changed


def form_tokens(p: Policy, msg: Message, call: ToolCall | None) -> tuple[tuple[int, str, int], ...]:
    """(ledger level, kind, heuristic tokens) of what each far stage level and working memory make
    of `msg` (`far_form(p, msg, call, L)` for L = 1, 2, 3, `near_form(p, msg, 2)`), or () when none changes it.

    Worked out without building a form: the ledger needs every message's counts as it arrives,
    while a form is asked for only when a request is built (or its cache-stable prefix compared)."""
    text, role = msg.content, msg.role
    size = len(text)
    extra = _frame_tokens(msg, msg.tool_calls)
    if not (role == "tool" or role == "user" and msg.is_observation):
        if role != "assistant" or not (p.mask or p.microcompact):
            return ()
        calls = mask_stage.cleared_calls(msg, p)   # a policy clearing far tool inputs (from masking up)
        if size <= p.fold_min_chars and calls is None:
            return ()
        if calls is not None:
            extra = _frame_tokens(msg, calls)
        # folded from masking up (microcompact folds as masking does); as mask_stage.fold builds it
        if size > p.fold_min_chars:
            kind, body = "folded", len(fold_placeholder(text)) // 4 + 1   # ASCII
        else:
            kind, body = "masked", len(text) // 4 + 1 if text.isascii() else heuristic_text(text)
        return ((2, kind, body + extra), (3, kind, body + extra)) if p.mask else ((3, kind, body + extra),)
    snipped = masked = near = None   # tokens at each level
    if p.snip and size > p.snip_threshold_chars:
        snipped = masked = near = _head_tail_tokens(text, p.snip_head_chars, p.snip_tail_chars,
                                                    snip_marker) + extra
    masked_kind = near_kind = "snipped"
    facts = None
    if p.mask:
        if size > p.mask_min_chars and not mask_stage.excluded(p, msg, call):
            facts = cleared_outcome(msg)
            line = mask_stage.masked_text(msg, facts, p.mask_placeholder)
            masked, masked_kind = (len(line) // 4 + 1 if line.isascii() else heuristic_text(line)) + extra, "masked"
        if size > p.working_memory_max_chars:
            near = _head_tail_tokens(text, p.working_memory_head_chars, p.working_memory_tail_chars,
                                     middle_marker) + extra
    micro, micro_kind = masked, masked_kind
    if p.microcompact and role == "tool":   # a text-mode observation names no call: masked at most
        line = micro_stage.skeleton(msg, call, facts)
        if len(line) < size:
            micro = (len(line) // 4 + 1 if line.isascii() else heuristic_text(line)) + extra
            micro_kind = "microcompacted"
    if micro is None and near is None:   # level 3 changes whatever 1 and 2 do
        return ()
    forms = []
    if snipped is not None:
        forms.append((1, "snipped", snipped))
    if masked is not None:
        forms.append((2, masked_kind, masked))
    if micro is not None:
        forms.append((3, micro_kind, micro))
    if near is not None:
        forms.append((NEAR, near_kind, near))
    return tuple(forms)


def _frame_tokens(msg: Message, calls: tuple[ToolCall, ...]) -> int:
    """A message's heuristic tokens beside its text (core/log/tokens.py `heuristic_message`), with `calls`."""
    extra = MESSAGE_OVERHEAD
    for c in calls:
        extra += heuristic_text(c.name) + heuristic_text(c.arguments) + TOOL_CALL_OVERHEAD
    if msg.role == "assistant" and msg.meta is not None:   # folding the text leaves the reasoning sent
        extra += heuristic_text(msg.resent_reasoning) - 1
    return extra


# -- stage transforms (the only place that decides what a message becomes) --------------------------
def far_form(p: Policy, msg: Message, call: ToolCall | None, level: int):
    """(message, spans, kind) of what far stage `level` makes of `msg`, or None when it leaves it.
    `call`: the call a tool result answers (microcompacting names it)."""
    if level >= 3 and p.microcompact:
        res = micro_stage.microcompact(msg, call, p)
        if res:
            return res
    if level >= 2 and p.mask:
        res = mask_stage.mask_far(msg, p, call)
        if res:
            return res
    return snip_form(p, msg, level)


def near_form(p: Policy, msg: Message, level: int):
    """What stage `level` makes of `msg` in working memory (the last messages), or None."""
    if level >= 2 and p.mask:
        res = mask_stage.head_tail_near(msg, p)
        if res:
            return res
    return snip_form(p, msg, level)


def snip_form(p: Policy, msg: Message, level: int):
    if level >= 1 and p.snip:
        res = snip_stage.snip(msg, p)
        if res:
            return res[0], res[1], "snipped"
    return None


def near_level(level: int) -> int:
    """The ledger level of working memory under stage `level`: from masking up, one form."""
    return NEAR if level >= 2 else level
