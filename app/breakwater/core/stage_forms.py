"""The stage forms of a message (SPEC §4, stage 4): what snip, mask and microcompact make of it,
far from the end of the history and in working memory, and the caches that let a request ask for
them without running a stage again.

`StageForms` is a part of `Pipeline` (core/pipeline.py): its methods read the pipeline's policy,
calls, pins and sanitized list.
"""

from __future__ import annotations

import itertools

from breakwater.core import mask as mask_stage
from breakwater.core import microcompact as micro_stage
from breakwater.core import snip as snip_stage
from breakwater.core.ledger import NEAR
from breakwater.core.message import Message
from breakwater.core.policy import Policy
from breakwater.core.tokens import heuristic_message

UNCHANGED = (None, None, None, None)   # a message no stage level changes: its forms at levels 1-3, near

# The far forms of long messages, shared by every pipeline of the same policy (a re-simulation, the
# fidelity replays): (id(message), id(call), policy) -> (message, call, forms, their tokens). An entry
# holds the message and the call, so no other object takes their ids while it is there.
_FORMS: dict[tuple[int, int, int], tuple] = {}
_POLICY_IDS: dict[Policy, int] = {}   # a small number per policy seen: a key is hashed in a few operations
_NEXT_POLICY_ID = itertools.count()    # atomic: two threads meeting two new policies give them two numbers
CACHED_FORMS = 1 << 13
CACHED_FORMS_CHARS = 2_000   # shorter messages: their forms cost less than remembering them


class StageForms:
    def _shared_forms(self, msg: Message) -> tuple[tuple, tuple]:
        """`_far_forms(msg)` and, when level 3 changes it, `_form_tokens` of them, else ()."""
        call = self.calls.get(msg.tool_call_id or "") if msg.role == "tool" else None
        key = (id(msg), id(call), self._policy_id)
        hit = _FORMS.get(key)
        if hit is not None and hit[0] is msg and hit[1] is call:
            return hit[2], hit[3]
        forms = self._far_forms(msg)
        # level 3 changes whatever 1 and 2 do
        changed = tuple(self._form_tokens(forms)) if forms[2] is not None or forms[3] is not None else ()
        if len(msg.content) > CACHED_FORMS_CHARS:
            if len(_FORMS) >= CACHED_FORMS:
                _FORMS.clear()
            _FORMS[key] = (msg, call, forms, changed)
        return forms, changed

    @staticmethod
    def _form_tokens(forms) -> list[tuple[int, str, int]]:
        """(level, kind, heuristic tokens) of each form; a form shared by two levels is counted once."""
        changed = []
        last, tokens = None, 0
        for L, res in zip((1, 2, 3, NEAR), forms):
            if res is not None:
                if res is not last:
                    last, tokens = res, heuristic_message(res[0])
                changed.append((L, res[2], tokens))
        return changed

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

    def _far_forms(self, msg: Message) -> tuple:
        """`_far(msg, level)` for levels 1, 2 and 3, then `_near(msg, 2)`, each stage run once."""
        p = self.policy
        snipped = self._snipped(msg, 1)
        masked = near = snipped
        if p.mask:
            masked = mask_stage.mask_far(msg, p) or snipped
            near = mask_stage.head_tail_near(msg, p) or snipped
        micro = masked
        if p.microcompact:
            call = self.calls.get(msg.tool_call_id or "") if msg.role == "tool" else None
            micro = micro_stage.microcompact(msg, call, p) or masked
        return snipped, masked, micro, near

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
        forms = self._far_recent.get(i)
        if forms is not None:
            return forms[3] if near and level >= 2 else forms[level - 1]
        msg = self.san.out[i].message
        return self._near(msg, level) if near else self._far(msg, level)
