"""Scoring: which probes one request still carries.

Each distinct message text is normalised and searched once for all anchors; a unit's hits
are the union of its messages' hits, and the probes it carries are found from the anchors it
hit, so a request costs a few set operations per unit rather than a search per probe.
"""

from __future__ import annotations

from typing import Collection, Sequence

from ahocorasick_rs import AhoCorasick

from breakwater.core.log.message import Message
from breakwater.fidelity.probes import Probe, matches, message_text, normalise, units


class Scorer:
    def __init__(self, probes: Sequence[Probe]):
        self.probes = list(probes)
        index: dict[str, int] = {}
        for p in self.probes:
            for a in (*p.anchors, *p.any_of):
                index.setdefault(a, len(index))
        # one Aho-Corasick pass per text finds every anchor, however many probes there are
        self._automaton = AhoCorasick(list(index)) if index else None
        # a probe is looked at only when its first anchor was hit
        self._by_first: dict[int, list[int]] = {}
        self._need: list[tuple[frozenset[int], frozenset[int]]] = []
        for i, p in enumerate(self.probes):
            self._by_first.setdefault(index[p.anchors[0]], []).append(i)
            self._need.append((frozenset(index[a] for a in p.anchors), frozenset(index[a] for a in p.any_of)))
        self._message_hits: dict[tuple, frozenset[int]] = {}
        self._unit_hits: dict[tuple, frozenset[int]] = {}

    def _hits(self, msg: Message) -> frozenset[int]:
        key = (msg.content, msg.tool_calls)
        hit = self._message_hits.get(key)
        if hit is None:
            found = self._automaton.find_matches_as_indexes(normalise(message_text(msg)), overlapping=True) \
                if self._automaton else ()
            hit = self._message_hits[key] = frozenset(i for i, _, _ in found)
        return hit

    def _carried(self, anchors: frozenset[int]) -> frozenset[int]:
        found = self._unit_hits.get(anchors)
        if found is None:
            out = []
            for a in anchors:
                for i in self._by_first.get(a, ()):
                    need, one_of = self._need[i]
                    if need <= anchors and (not one_of or not one_of.isdisjoint(anchors)):
                        out.append(i)
            found = self._unit_hits[anchors] = frozenset(out)
        return found

    def carried(self, messages: Sequence[Message]) -> set[int]:
        """Indices (into `probes`) of every probe some unit of `messages` carries."""
        out: set[int] = set()
        for unit in units(messages):
            hits = self._hits(unit[0])
            for m in unit[1:]:
                hits = hits | self._hits(m)
            out |= self._carried(hits)
        return out


def at_risk(scorer: Scorer, request: Sequence[Message], replaced: Collection[str], turn: int) -> list[Probe]:
    """The probes live at `turn` that `request` carries only in the messages a compaction would
    replace (`replaced`: message ids; a replaced assistant message takes its tool results along)."""
    gone = set(replaced)
    calls = {c.id for m in request if m.id in gone for c in m.tool_calls}
    kept = [m for m in request if m.id not in gone and not (m.role == "tool" and m.tool_call_id in calls)]
    elsewhere = scorer.carried(kept)
    return [scorer.probes[i] for i in sorted(scorer.carried(request) - elsewhere) if scorer.probes[i].live_at(turn)]


def not_carried(probes: Sequence[Probe], text: str) -> list[Probe]:
    """Those of `probes` that `text` (a summary) does not carry."""
    norm = normalise(text)
    return [p for p in probes if not matches(p, norm)]
