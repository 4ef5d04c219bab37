"""The stage forms of a message (SPEC §4, stage 4): what snip, mask and microcompact make of it,
far from the end of the history and in working memory; the counts of those forms the ledger
enters as each message arrives, worked out without building them (a form is built only when a
request that sends it is), and the caches that spare running a stage again.

`StageForms` is a part of `Pipeline` (core/fold/pipeline.py): its methods read the pipeline's policy,
calls, pins and sanitized list.
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
from breakwater.core.policy import Policy
from breakwater.core.stages.snip import head_tail, snip_marker
from breakwater.core.log.tokens import MESSAGE_OVERHEAD, TOOL_CALL_OVERHEAD, heuristic_message, heuristic_text

# The counts of the far forms of long messages, shared by every pipeline of the same policy (a
# re-simulation, the fidelity replays): (id(message), id(call), policy) -> (message, call, counts). An entry
# holds the message and the call, so no other object takes their ids while it is there.
_FORMS: dict[tuple[int, int, int], tuple] = {}
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


class StageForms:
    def _shared_forms(self, msg: Message) -> tuple:
        """`_form_tokens(msg)`, shared by the pipelines of this policy when the message is long."""
        call = self.calls.get(msg.tool_call_id or "") if msg.role == "tool" else None
        key = (id(msg), id(call), self._policy_id)
        hit = _FORMS.get(key)
        if hit is not None and hit[0] is msg and hit[1] is call:
            return hit[2]
        changed = self._form_tokens(msg, call)
        if len(msg.content) > CACHED_FORMS_CHARS:
            if len(_FORMS) >= CACHED_FORMS:
                _FORMS.clear()
            _FORMS[key] = (msg, call, changed)
        return changed

    def _form_tokens(self, msg: Message, call: ToolCall | None) -> tuple[tuple[int, str, int], ...]:
        """(ledger level, kind, heuristic tokens) of what each far stage level and working memory make
        of `msg` (`_far(msg, L)` for L = 1, 2, 3, `_near(msg, 2)`), or () when none changes it.

        Worked out without building a form: the ledger needs every message's counts as it arrives,
        while a form is asked for only when a request is built (or its cache-stable prefix compared)."""
        p = self.policy
        text, role = msg.content, msg.role
        size = len(text)
        extra = MESSAGE_OVERHEAD
        for c in msg.tool_calls:
            extra += heuristic_text(c.name) + heuristic_text(c.arguments) + TOOL_CALL_OVERHEAD
        if role == "assistant" and msg.meta is not None:   # folding the text leaves the reasoning sent
            extra += heuristic_text(msg.resent_reasoning) - 1
        if not (role == "tool" or role == "user" and msg.is_observation):
            if role != "assistant" or size <= p.fold_min_chars or not (p.mask or p.microcompact):
                return ()
            # folded from masking up (microcompact folds as masking does)
            line = fold_placeholder(text)   # ASCII
            folded = len(line) // 4 + 1 + extra
            return ((2, "folded", folded), (3, "folded", folded)) if p.mask else ((3, "folded", folded),)
        snipped = masked = near = None   # tokens at each level
        if p.snip and size > p.snip_threshold_chars:
            snipped = masked = near = _head_tail_tokens(text, p.snip_head_chars, p.snip_tail_chars,
                                                        snip_marker) + extra
        masked_kind = near_kind = "snipped"
        facts = None
        if p.mask:
            if size > p.mask_min_chars:
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

    def _pinned(self, i: int) -> bool:
        return bool(self.pins) and any(s in self.pins for s in self.san.out[i].sources)

    # -- stage transforms (the only place that decides what a message becomes) ----------------------
    def _far(self, msg: Message, level: int):
        p = self.policy
        if level >= 3 and p.microcompact:
            call = self.calls.get(msg.tool_call_id or "") if msg.role == "tool" else None
            res = micro_stage.microcompact(msg, call, p)
            if res:
                return res
        if level >= 2 and p.mask:
            res = mask_stage.mask_far(msg, p)
            if res:
                return res
        return self._snipped(msg, level)

    def _near(self, msg: Message, level: int):
        p = self.policy
        if level >= 2 and p.mask:
            res = mask_stage.head_tail_near(msg, p)
            if res:
                return res
        return self._snipped(msg, level)

    def _snipped(self, msg: Message, level: int):
        if level >= 1 and self.policy.snip:
            res = snip_stage.snip(msg, self.policy)
            if res:
                return res[0], res[1], "snipped"
        return None

    @staticmethod
    def _near_level(level: int) -> int:
        """The ledger level of working memory under stage `level`: from masking up, one form."""
        return NEAR if level >= 2 else level

    def _near_cached(self, i: int, level: int):
        """Working-memory transforms are asked for on every request; compute each once."""
        level = min(level, 2)   # every level from masking up treats working memory alike
        by_level = self._near_cache.get(i)
        if by_level is None:
            if len(self._near_cache) > 256:  # only the last few messages are ever near
                horizon = len(self.ledger) - 4 * self.policy.working_memory_messages
                self._near_cache = {k: v for k, v in self._near_cache.items() if k >= horizon}
            by_level = self._near_cache[i] = {}
        hit = by_level.get(level)
        if hit is None:
            res = self._transform(i, level, near=True)
            hit = by_level[level] = (res, heuristic_message(res[0]) if res else self.ledger.tok0[i])
        return hit

    def _transform(self, i: int, level: int, near: bool):
        if level == 0 or self._pinned(i):
            return None
        msg = self.san.out[i].message
        return self._near(msg, level) if near else self._far(msg, level)
