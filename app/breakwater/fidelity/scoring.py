"""Scoring: which probes a request still carries, and how that changes request by request.

A probe is carried when one message of the request holds its parts on token boundaries, close
together (`probes.satisfied`). Every term of every probe is found in one Aho-Corasick pass over a
message's normalised text; a message's hits are kept by its text, so a message sent unchanged in a
thousand requests is searched once.

`Tracker` follows a replay without building each request: a request is its head (summary, first
user message kept, pins) and the history from `plan.start` to `plan.n`, each message in the form its
stage level gives it (`materialize.level_of`). Between two requests only the messages whose form
changed (a boundary moved, a message was added or changed) are looked at again, and a probe's
state changes only when the number of messages carrying it goes to or from zero. Eval of a session
is then linear in its length, where building every request was quadratic. A message's form is
searched only while some live probe has no searched message carrying it: on a long session most
never are (of 16,000 generated messages, 367 forms are searched).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from ahocorasick_rs import AhoCorasick

from breakwater.core.log.message import Message
from breakwater.core.stages.summarize import SUMMARY_HEADER
from breakwater.fidelity.probes import Probe, lead_of, matches, message_text, satisfied
from breakwater.fidelity.terms import PREFIX, at_boundary, normalise

if TYPE_CHECKING:
    from breakwater.core.fold.pipeline import Pipeline, Plan

_NONE: frozenset[int] = frozenset()


class Scorer:
    def __init__(self, probes: Sequence[Probe]):
        self.probes = list(probes)
        index: dict[str, int] = {}
        for p in self.probes:
            for t in p.terms():
                index.setdefault(t, len(index))
        # one Aho-Corasick pass per text finds every term, however many probes there are
        self._automaton = AhoCorasick([t.rstrip(PREFIX) for t in index]) if index else None
        self._prefix = [t.endswith(PREFIX) for t in index]
        # term -> [(probe, bit of the part)] where it stands; per probe, its terms and the bits of its
        # required parts
        self._where: list[list[tuple[int, int]]] = [[] for _ in index]
        self._terms: list[frozenset[int]] = []
        self._must = [(1 << p.must) - 1 for p in self.probes]
        for i, p in enumerate(self.probes):
            for k, part in enumerate(p.parts):
                for t in part:
                    self._where[index[t]].append((i, 1 << k))
            self._terms.append(frozenset(index[t] for t in p.terms()))
        # a term no probe needs the distances of is looked for once a text
        self._once = [all(not self.probes[i].near for i, _ in where) for where in self._where]
        self._hits: dict[str, frozenset[int]] = {}

    def text_hits(self, norm: str) -> frozenset[int]:
        """Indices of the probes one normalised text carries."""
        if self._automaton is None or not norm:
            return _NONE
        matches = self._automaton.find_matches_as_indexes(norm, overlapping=True)
        if not matches:
            return _NONE
        # a probe can be carried only if each of its required parts and `need` others have a term in
        # the text: the others are not looked at further (most terms found are common words of probes
        # whose identifiers are not there); the terms of those that can are checked for boundaries
        where, must, probes = self._where, self._must, self.probes
        present: dict[int, int] = {}
        for t in {t for t, _, _ in matches}:
            for i, bit in where[t]:
                present[i] = present.get(i, 0) | bit
        can = [i for i, bits in present.items()
               if bits & must[i] == must[i] and (bits & ~must[i]).bit_count() >= probes[i].need]
        if not can:
            return _NONE
        wanted = frozenset().union(*(self._terms[i] for i in can))
        prefix, once = self._prefix, self._once
        at: dict[int, list[int]] = {}
        for t, start, end in matches:
            if t in wanted and not (once[t] and t in at) and at_boundary(norm, start, end, prefix[t]):
                at.setdefault(t, []).append(start)
        out = []
        for i in can:
            found: dict[int, list[int]] = {}
            for t in self._terms[i] & at.keys():
                for j, bit in where[t]:
                    if j == i:
                        found.setdefault(bit.bit_length() - 1, []).extend(at[t])
            if found and satisfied(probes[i], found, norm):
                out.append(i)
        return frozenset(out) or _NONE

    def hits(self, msg: Message, lead: str | None = None) -> frozenset[int]:
        """Indices of the probes one message carries (a tool result read after `lead`, `probes.lead_of`)."""
        text = message_text(msg, lead)
        hit = self._hits.get(text)
        if hit is None:
            if len(self._hits) > 1 << 16:
                self._hits.clear()
            hit = self._hits[text] = self.text_hits(normalise(text))
        return hit

    def carried(self, messages: Sequence[Message]) -> set[int]:
        """Indices (into `probes`) of every probe some message of `messages` carries."""
        commands = {c.id: c for m in messages if m.tool_calls for c in m.tool_calls}
        out: set[int] = set()
        for m in messages:
            call = commands.get(m.tool_call_id or "") if m.role == "tool" else None
            out |= self.hits(m, lead_of(call, m))
        return out


class Tracker:
    """The probes each request of one replay carries, followed from one request to the next.

    `update(plan)` after each `pipe.plan()`; `kept()` at the end gives, per probe, the bit mask of
    the turns from its first (`Probe.live_at`) whose request carried it (bit k-1 for turn k).

    A message's form is searched only when its answer could change a state: a probe is carried as
    long as one message already searched carries it, so the others are searched only while some live
    probe has none (`_dark`). A long session's facts are mostly carried by a few messages that stay,
    and most of its messages are never searched."""

    def __init__(self, scorer: Scorer, pipe: Pipeline):
        self.scorer, self.pipe = scorer, pipe
        probes = scorer.probes
        n = len(probes)
        self.count = [0] * n           # searched messages of the current request carrying each probe
        self.on = [False] * n          # whether the last request carried it
        self.since = [0] * n           # the turn from which it has been carried, while on
        self.masks = [0] * n
        self._segments: list[tuple[int, int, tuple[int, bool]]] = []
        self._applied: dict[int, frozenset[int]] = {}   # position -> the hits counted for it (searched)
        self._unsearched: dict[int, tuple[int, bool]] = {}   # position -> its form, not searched yet
        self._forms: dict[int, dict[tuple[int, bool], frozenset[int]]] = {}
        self._formed = 0                 # positions below it are the only ones with forms
        self._head: tuple = ()
        self._head_hits: list[frozenset[int]] = []
        self._touched: set[int] = set()
        self._override = False   # the last request was built whole (squeezed): its states are not the counts
        # the probes by the turn they become live and the turn they stop being (an unpinned pin)
        self._live = bytearray(n)
        self._arrivals = sorted(range(n), key=lambda p: probes[p].turn)
        self._departures = sorted((p for p in range(n) if probes[p].until is not None), key=lambda p: probes[p].until)
        self._arrived = self._departed = 0
        self._dark: set[int] = set()   # live probes no searched message of the request carries

    # -- counting ---------------------------------------------------------------------------------
    def _add(self, hits: frozenset[int], step: int) -> None:
        count, touched = self.count, self._touched
        for p in hits:
            count[p] += step
            if count[p] == (1 if step > 0 else 0):
                touched.add(p)

    def _form_hits(self, i: int, key: tuple[int, bool]) -> frozenset[int]:
        by_key = self._forms.get(i)
        if by_key is None:
            by_key = self._forms[i] = {}
            self._formed = max(self._formed, i + 1)
        hit = by_key.get(key)
        if hit is None:
            pipe = self.pipe
            level, near = key
            res = pipe.index.transform(i, level, near) if level else None
            if not res and level:   # the stage leaves it as it is: as carried as the message itself
                hit = by_key[key] = self._form_hits(i, (0, False))
                return hit
            msg = res[0] if res else pipe.san.out[i].message
            call = pipe.calls.get(msg.tool_call_id or "") if msg.role == "tool" else None
            hit = by_key[key] = self.scorer.hits(msg, lead_of(call, msg))
        return hit

    def _known_hits(self, i: int, key: tuple[int, bool]) -> frozenset[int] | None:
        """The hits of message i's form `key` if it has been searched, else None."""
        by_key = self._forms.get(i)
        return by_key.get(key) if by_key is not None else None

    # -- one request -------------------------------------------------------------------------------
    def update(self, plan: Plan, built: Sequence[Message] | None = None) -> None:
        """Follow the pipeline to request `plan.turn` (`built`: its messages, when planning built it)."""
        changed = plan.changed_from
        for i in range(changed, self._formed):   # the forms of messages changed since (new ones have none)
            self._forms.pop(i, None)
        self._formed = min(self._formed, changed)
        self._update_head(plan.head)
        self._update_region(_segments(plan), changed)
        turn = plan.turn
        self._update_dark(turn)
        if built is not None:
            carried = self.scorer.carried(built)
            self._touched = set()
            self._record(turn, range(len(self.count)), lambda p: p in carried)
            self._override = True
            return
        self._search_for_dark()
        if self._override:
            # after a request built whole, every probe's state is the count's again
            self._touched.update(range(len(self.count)))
            self._override = False
        touched, self._touched = self._touched, set()
        self._record(turn, touched, lambda p: self.count[p] > 0)

    def _record(self, turn: int, probes, now) -> None:
        on, since, masks = self.on, self.since, self.masks
        for p in probes:
            state = now(p)
            if state == on[p]:
                continue
            if state:
                since[p] = turn
            else:
                masks[p] |= _span(since[p], turn)
            on[p] = state

    def _update_dark(self, turn: int) -> None:
        """The live probes at `turn` that no searched message carries: those whose count went to zero
        since, those live from this turn on, less those no longer live."""
        count, live, dark, probes = self.count, self._live, self._dark, self.scorer.probes
        for p in self._touched:
            if live[p]:
                if count[p]:
                    dark.discard(p)
                else:
                    dark.add(p)
        arrivals = self._arrivals
        while self._arrived < len(arrivals) and probes[arrivals[self._arrived]].turn <= turn:
            p = arrivals[self._arrived]
            self._arrived += 1
            live[p] = 1
            if not count[p]:
                dark.add(p)
        departures = self._departures
        while self._departed < len(departures) and probes[departures[self._departed]].until <= turn:
            p = departures[self._departed]
            self._departed += 1
            live[p] = 0
            dark.discard(p)

    def _search_for_dark(self) -> None:
        """Search the request's messages not searched yet, the oldest first (their forms are the
        shortest and stay the longest), until every live probe is carried or none is left."""
        dark, unsearched = self._dark, self._unsearched
        if not dark or not unsearched:
            return
        applied = self._applied
        for i in sorted(unsearched):
            hits = applied[i] = self._form_hits(i, unsearched.pop(i))
            if hits:
                self._add(hits, 1)
                dark.difference_update(hits)
                if not dark:
                    return

    def _update_head(self, head: Sequence[Message]) -> None:
        if len(head) == len(self._head) and all(a is b for a, b in zip(head, self._head)):
            return   # the same messages (held here, so no other message can come to have their ids)
        for hits in self._head_hits:
            self._add(hits, -1)
        commands = {c.id: c for m in head if m.tool_calls for c in m.tool_calls}
        self._head_hits = []
        for m in head:
            call = commands.get(m.tool_call_id or "") or self.pipe.calls.get(m.tool_call_id or "") \
                if m.role == "tool" else None
            self._head_hits.append(self.scorer.hits(m, lead_of(call, m)))
        for hits in self._head_hits:
            self._add(hits, 1)
        self._head = tuple(head)

    def _update_region(self, segments: list[tuple[int, int, tuple[int, bool]]], changed: int) -> None:
        old, applied, unsearched = self._segments, self._applied, self._unsearched
        if segments == old and changed >= _end(old):
            return
        for a, b, was, now in _diff(old, segments, changed):
            for i in range(a, b):
                if was is not None:
                    hits = applied.pop(i, None)
                    if hits is None:
                        unsearched.pop(i, None)
                    elif hits:
                        self._add(hits, -1)
                if now is not None:
                    hits = self._known_hits(i, now)
                    if hits is None:
                        unsearched[i] = now
                    else:
                        applied[i] = hits
                        if hits:
                            self._add(hits, 1)
        self._segments = segments

    def kept(self, turns: int) -> list[int]:
        """Per probe, the turns (1..turns) it was live at whose request carried it, as a bit mask."""
        out = []
        for p, probe in enumerate(self.scorer.probes):
            mask = self.masks[p] | (_span(self.since[p], turns + 1) if self.on[p] else 0)
            stop = turns + 1 if probe.until is None else min(turns + 1, probe.until)
            out.append(mask & _span(probe.turn, stop))
        return out


def _span(start: int, stop: int) -> int:
    """Bits start-1 .. stop-2: turns start .. stop-1."""
    return ((1 << (stop - start)) - 1) << (start - 1) if stop > start else 0


def _segments(plan: Plan) -> list[tuple[int, int, tuple[int, bool]]]:
    """The sent region as (start, end, (stage level, near)) runs, as `materialize.level_of` gives them."""
    s, n, boundary, near_start = plan.start, plan.n, plan.boundary, plan.near_start
    near_level = plan.level if boundary >= near_start else plan.lower
    runs = [(s, min(boundary, near_start, n), (plan.level, False)),
            (max(s, boundary), min(near_start, n), (plan.lower, False)),
            (max(s, near_start), n, (near_level, True))]
    out: list[tuple[int, int, tuple[int, bool]]] = []
    for a, b, (level, near) in runs:
        if b <= a:
            continue
        key = (level, near) if level else (0, False)
        if out and out[-1][1] == a and out[-1][2] == key:
            out[-1] = (out[-1][0], b, key)
        else:
            out.append((a, b, key))
    return out


def _end(segments) -> int:
    return segments[-1][1] if segments else 0


def _key_at(segments, i: int):
    for a, b, key in segments:
        if a <= i < b:
            return key
    return None


def _diff(old, new, changed: int):
    """(start, end, form before, form now) of the runs of positions whose form changed, or whose
    message did (from `changed` on)."""
    cuts = sorted({c for a, b, _ in (*old, *new) for c in (a, b)} | {changed})
    for a, b in zip(cuts, cuts[1:]):
        was, now = _key_at(old, a), _key_at(new, a)
        if was is None and now is None:
            continue
        if was != now or a >= changed:
            yield a, b, was, now


def at_risk(scorer: Scorer, before: Sequence[Message], after: Sequence[Message], summary_id: str,
            turn: int) -> list[Probe]:
    """The probes live at `turn` that request `before` carries and request `after` (the same turn
    once a deep compaction is made) carries only if its new summary (the message marked with
    `summary_id`) says them: what the compaction loses unless the summary keeps it, by the very
    measure the fidelity gauge applies to whole requests (an earlier summary it folds in counts too)."""
    rest = [_without_summary(m) if m.meta and m.meta.get("compaction") == summary_id else m for m in after]
    gone = scorer.carried(before) - scorer.carried(rest)
    return [scorer.probes[i] for i in sorted(gone) if scorer.probes[i].live_at(turn)]


def _without_summary(msg: Message) -> Message:
    """The message that holds the new summary without it: the first user message the request keeps
    may be joined with it, and still says what it said."""
    at = msg.content.find(SUMMARY_HEADER)
    return msg.with_content(msg.content[:at] if at >= 0 else "")


def not_carried(probes: Sequence[Probe], text: str) -> list[Probe]:
    """Those of `probes` that `text` (a summary) does not carry."""
    norm = normalise(text)
    return [p for p in probes if not matches(p, norm)]
