"""The incremental index: each sanitized message entered once, when it arrives (again only if the
sanitizer or a pin changes it), so that a request costs a few lookups, not a pass over the history.

`Index` holds the ledger (core/fold/ledger.py: every message's tokens at every stage level, in prefix
sums), the stage forms built when a request asks for them (core/fold/stage_forms.py), the pins (a
pinned message is sent as it is at every level), where each log message id went, the first user
message, the observations, and the exact counts of the far forms. It reads the sanitizer's list;
the pipeline feeds the sanitizer and tells the index to catch up (`sync`).
"""

from __future__ import annotations

import bisect
from typing import Callable

from xxhash import xxh3_128_digest as _digest

from breakwater.core.fold import stage_forms as forms
from breakwater.core.fold.kept_measures import message_key
from breakwater.core.fold.ledger import NEAR, Ledger
from breakwater.core.fold.range_sums import RangeSums
from breakwater.core.log.message import Message, ToolCall
from breakwater.core.log.tokens import TokenCounter, heuristic_message, lower_message
from breakwater.core.policy import Policy
from breakwater.core.stages.sanitize import Sanitizer


# forms kept between the bound's pass over a range and the exact count's, which may come plans later: a
# plan builds a few but the first near the limits (the whole history: ~9,000 at 20,000 messages); a form is
# a message's short version (snipped, masked, microcompacted), ~0.1-4 KB
FORMS_KEPT = 4096


class Index:
    def __init__(self, policy: Policy, san: Sanitizer, counter: TokenCounter):
        self.policy = policy
        self._policy_id = forms.policy_id(policy)
        self.san = san                          # the sanitized list entered (the pipeline feeds it)
        self.counter = counter
        self.ledger = Ledger()                  # per sanitized message
        self.calls: dict[str, ToolCall] = {}    # every call by id: a result's forms name the call it answers
        self.pins: set[str] = set()             # log message ids sent as they are
        self.pins_version = 0                   # changes with every pin or unpin
        self._ids: dict[str, int] = {}          # log message id -> sanitized index, for out[:_indexed]
        self._indexed = 0
        self._looked = 0                        # messages looked through since (see `index_of`)
        self._exact: dict[int, RangeSums] = {}  # level (NEAR: working memory's) -> the sums of tiktoken's counts
        self._lower: dict[int, RangeSums] = {}  # the same of core/log/tokens.py lower_message
        self._fresh: dict[int, int] = {}        # id(message) -> heuristic tokens, of those fed since `sync`
        self._fu: int | None = None             # index of the first user message, once found
        self._fu_scanned = 0                    # out[:_fu_scanned] holds no user message (when _fu is None)
        self._observations: list[int] = []      # sanitized indices of observations (policy.mask_keep_observations)
        # (i, level, near) -> (message, call, pins version, policy, form) of the forms the sums built last:
        # a plan sums a range's bound, then its exact count, and built each form twice (a third of them)
        self._formed: dict[tuple[int, int, bool], tuple] = {}
        # digests of out[:1], out[:2], ... chained (kept_measures.message_key): what a kept figure was worked
        # out from; filled when asked (only an exact count near the limits asks), cut where messages change
        self._chain: list[bytes] = []
        self.entered = 0                        # how many times messages were entered (a change of content)

    def copy(self, san: Sanitizer) -> Index:
        """An independent copy reading `san` (the sanitizer's copy)."""
        new = Index.__new__(Index)
        new.__dict__.update(
            policy=self.policy, _policy_id=self._policy_id, san=san, counter=self.counter,
            ledger=self.ledger.copy(), calls=self.calls.copy(), pins=self.pins.copy(),
            pins_version=self.pins_version, _ids=self._ids.copy(), _indexed=self._indexed,
            _looked=self._looked, _exact={L: sums.copy() for L, sums in self._exact.items()},
            _lower={L: sums.copy() for L, sums in self._lower.items()},
            _fresh=self._fresh.copy(),
            _fu=self._fu, _fu_scanned=self._fu_scanned, _observations=self._observations.copy(), _formed={},
            _chain=self._chain.copy(), entered=self.entered)
        return new

    def retune(self, policy: Policy) -> None:
        """Index under `policy` (another window) from here on: what was counted against the old limits goes."""
        self.policy = policy
        self._policy_id = forms.policy_id(policy)

    # -- entering messages ---------------------------------------------------------------------------
    def arrive(self, msg: Message) -> int:
        """A log message about to be sanitized: its calls noted, its heuristic tokens counted (returned)
        once, as the sanitized list mostly holds the same objects."""
        if msg.role == "assistant":
            for c in msg.tool_calls:
                self.calls[c.id] = c
        t = self._fresh[id(msg)] = heuristic_message(msg)
        return t

    def sync(self) -> int | None:
        """Enter what the sanitizer changed or added since; the lowest index entered again, if any."""
        d = self.san.take_dirty()
        known = len(self.ledger.tok0)
        changed = None
        if d < known or known < len(self.san.out):
            changed = min(d, known)
            self.enter_from(changed)
        self._fresh.clear()
        return changed

    def set_pin(self, mid: str, pinned: bool) -> None:
        (self.pins.add if pinned else self.pins.discard)(mid)
        self.pins_version += 1

    def enter_from(self, d: int) -> None:
        """Enter the sanitized messages from index d on again (they changed, or were added)."""
        out = self.san.out
        ledger = self.ledger
        del self._chain[d:]
        self.entered += 1
        if d < len(ledger.tok0):   # messages changed, not only added: forget what was derived from them
            ledger.truncate(d)
            for by_level in (self._exact, self._lower):
                for sums in by_level.values():
                    sums.truncate(d)
        if self._fu is not None and self._fu >= d:
            self._fu = None
        if d < self._fu_scanned:
            self._fu_scanned = d
        if d < self._indexed:
            self._indexed = d
        observations = self._observations
        if self.policy.mask_keep_observations:
            del observations[bisect.bisect_left(observations, d):]
        else:
            observations = None
        fresh = self._fresh
        pins, fold_min = self.pins, self.policy.fold_min_chars
        clears_calls = self.policy.mask and self.policy.mask_clear_tool_inputs
        add, shared_forms, calls = ledger.add, forms.shared_forms, self.calls
        policy, pid = self.policy, self._policy_id
        for i in range(d, len(out)):
            entry = out[i]
            msg = entry.message
            t0 = fresh.get(id(msg))
            if t0 is None:
                t0 = heuristic_message(msg)
            role = msg.role
            # the soft-zone stages change observations and assistant text only (SPEC §4), the text
            # only by folding it when it is longer than `fold_min_chars` (most replies of a chat are not)
            if role == "tool" or (role == "assistant" and (len(msg.content) > fold_min or clears_calls and msg.tool_calls)) \
                    or (role == "user" and msg.is_observation):
                if pins and any(s in pins for s in entry.sources):
                    add(t0, role != "tool", ())
                else:
                    call = calls.get(msg.tool_call_id or "") if role == "tool" else None
                    add(t0, role != "tool", shared_forms(policy, pid, msg, call))
                if role == "tool" and msg.meta:
                    src = msg.meta.get("source")
                    if isinstance(src, dict) and src.get("dropped_lines"):
                        ledger.add_truncated(i)
                if observations is not None and role != "assistant":
                    observations.append(i)
            else:
                add(t0, True)

    def content_key(self) -> bytes:
        """A digest of the content of every message entered (with the call each result answers and the
        log messages each stands for): the figures worked out from them are kept under it between runs
        (core/fold/kept_measures.py)."""
        chain, out, calls = self._chain, self.san.out, self.calls
        last = chain[-1] if chain else b""
        for i in range(len(chain), len(self.ledger.tok0)):
            entry = out[i]
            msg = entry.message
            call = calls.get(msg.tool_call_id or "") if msg.role == "tool" else None
            last = _digest(last + message_key(msg, entry.sources, call))
            chain.append(last)
        return last

    # -- looking up -----------------------------------------------------------------------------------
    def index_of(self, mid: str, look: bool = True) -> int | None:
        """Index of the sanitized message that stands for log message `mid` (the last, if several do).

        Ids are entered when asked, not as each message arrives: only pins and compactions ask, and
        a long chat with few would otherwise hold an entry per message (a million cost ~1 s and 60 MB).
        Asked about one not entered yet, it looks at the newest first (a compaction names a message
        near the end), and enters them all once it has looked through as many as that would take."""
        out = self.san.out
        known = min(len(self.ledger.tok0), len(out))
        lo = self._indexed
        room = known - lo - self._looked if look else 0
        if room > 0:
            stop = max(lo, known - room)
            for i in range(known - 1, stop - 1, -1):
                if mid in out[i].sources:
                    self._looked += known - i
                    return i
            if stop == lo:   # none of those not entered yet is it
                self._looked += known - lo
                return self._ids.get(mid)
        ids = self._ids
        for i in range(lo, known):
            for sid in out[i].sources:
                ids[sid] = i
        self._indexed, self._looked = known, 0
        return ids.get(mid)

    def ids_entered(self) -> int:
        """How many log message ids are entered (see `index_of`)."""
        return len(self._ids)

    def base_start(self) -> int:
        """First index of the history: after the system prompt, if there is one."""
        out = self.san.out
        return 1 if out and out[0].message.role == "system" else 0

    def first_user(self) -> int | None:
        if self._fu is None:
            out = self.san.out
            for i in range(self._fu_scanned, len(out)):
                if out[i].message.role == "user":
                    self._fu = i
                    break
            else:
                self._fu_scanned = len(out)
        return self._fu

    def near_start(self, level: int, start: int, n: int) -> int:
        """First index treated as working memory: only masking (level 2 and up) tells near from far.
        Working memory is the last `working_memory_messages` messages, or with `mask_keep_observations`
        (SWE-agent's LastNObservations) everything from the M-th last observation on."""
        if level < 2:
            return n
        keep = self.policy.mask_keep_observations
        if not keep:
            at = max(start, n - self.policy.working_memory_messages)
        else:
            obs = self._observations
            k = bisect.bisect_left(obs, n)
            at = max(start, obs[k - keep]) if k >= keep else start
        if self.policy.mask_clear_tool_inputs:
            # from the call of working memory's first result: a kept result keeps its call's arguments
            out = self.san.out
            while at > start and at < n and out[at].message.role == "tool":
                at -= 1
        return at

    def pinned(self, i: int) -> bool:
        return bool(self.pins) and any(s in self.pins for s in self.san.out[i].sources)

    # -- the stage forms (core/fold/stage_forms.py) ----------------------------------------------------
    def form_tokens(self, msg: Message) -> tuple[tuple[int, str, int], ...]:
        """What the ledger enters for `msg` (see `stage_forms.form_tokens`)."""
        return forms.form_tokens(self.policy, msg, self._call_of(msg))

    def far_form(self, msg: Message, level: int):
        return forms.far_form(self.policy, msg, self._call_for(msg, level), level)

    def _call_for(self, msg: Message, level: int):
        """The call `msg` answers where the far form at `level` reads it: microcompacting names it, and
        masking keeps the results of the tools `mask_exclude_tools` names."""
        return self._call_of(msg) if level >= 3 or (level == 2 and self.policy.mask_exclude_tools) else None

    def near_form(self, msg: Message, level: int):
        return forms.near_form(self.policy, msg, level)

    def transform(self, i: int, level: int, near: bool):
        """(message, spans, kind) of what stage `level` makes of message i, far or in working memory
        (`near`); None when it is sent as it is."""
        if level == 0 or self.pinned(i):
            return None
        msg = self.san.out[i].message
        if near:
            return forms.near_form(self.policy, msg, level)
        return forms.far_form(self.policy, msg, self._call_for(msg, level), level)

    def exact_sum(self, level: int, a: int, b: int) -> int:
        """tiktoken's tokens of out[a:b] at far stage `level`, or in working memory at NEAR (the form
        from masking up; below it working memory's form is the far one)."""
        return self._summed(self._exact, self.counter.exact_message, level, a, b)

    def lower_sum(self, level: int, a: int, b: int) -> int:
        """A lower bound of those tokens (core/log/tokens.py `lower_message`)."""
        return self._summed(self._lower, lower_message, level, a, b)

    def _summed(self, sums: dict, count: Callable[[Message], int], level: int, a: int, b: int) -> int:
        """`count` of messages [a, b) at far stage `level` (or NEAR), each message counted once per level
        (core/fold/range_sums.py)."""
        if a >= b:
            return 0
        if level and not self.ledger.level_changes(level, a, b):
            # the level changes none of them (the ledger holds each message's forms, `stage_forms`
            # builds none): their count as sent, not a second pass over the same messages (a chat of
            # short messages counted every one at level 0 and again at microcompaction's)
            level = 0
        at = sums.get(level)
        if at is None:
            at = sums[level] = RangeSums()
        else:
            known = at.known(a, b)
            if known is not None:
                return known
        out = self.san.out
        if not level:
            return at.total(a, b, lambda i: count(out[i].message))
        formed, rank, sent = self._form, self.ledger.rank[level], sums.get(0)
        # a form's text is made for this count: not kept in the counter's cache of texts (20,000 messages:
        # ~13 MB of forms stayed alive there), its count kept in these sums
        exact = sums is self._exact
        form, near = (2, True) if level == NEAR else (level, False)

        def counted(i: int) -> int:
            if rank[i + 1] == rank[i]:
                # a message the level leaves as sent (the ledger's rank does not step at it: all but a
                # session's long results and replies) counts what it counts at level 0, which that
                # level's sums mostly hold already: its form not looked for, its count not worked out
                # again (the bound and the exact count at each of ~4 levels were each a transform and a
                # count of every message in a band of a long session)
                n = sent.known(i, i + 1) if sent is not None else None
                return count(out[i].message) if n is None else n
            res = formed(i, form, near)
            if res is None:
                return count(out[i].message)
            return count(res[0], False) if exact else count(res[0])
        return at.total(a, b, counted)

    def _form(self, i: int, level: int, near: bool):
        """`transform(i, level, near)`, built once for the bound and the exact count of a range: kept while
        the message, the call it answers, the pins and the policy are those it was built from."""
        msg = self.san.out[i].message
        call, key = self._call_of(msg), (i, level, near)
        hit = self._formed.get(key)
        if hit is not None and hit[0] is msg and hit[1] is call and hit[2] == self.pins_version \
                and hit[3] is self.policy:
            return hit[4]
        res = self.transform(i, level, near)
        if len(self._formed) >= FORMS_KEPT:
            self._formed.clear()
        self._formed[key] = (msg, call, self.pins_version, self.policy, res)
        return res
    def _call_of(self, msg: Message) -> ToolCall | None:
        return self.calls.get(msg.tool_call_id or "") if msg.role == "tool" else None
