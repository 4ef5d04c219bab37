"""What a fidelity replay found, per session and over a corpus.

`FidelityRun` keeps, per probe, the set of turns where it could be recovered (a bit mask),
which is all the workbench needs for a gauge (`recall_at`) and the probes lost at a turn
(`lost_at`). `Tally` is the additive summary that workers send back and `eval` adds up.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Iterable, NamedTuple

from breakwater.fidelity.probes import CATEGORIES, PINNED_KINDS, Probe

PINNED = "pinned_categories"


@dataclass(slots=True)
class Tally:
    """Probe-turn pairs kept and live, per category, for the pinned categories and overall (a probe of
    weight w counts as w probes)."""

    kept: dict[str, int] = field(default_factory=dict)
    live: dict[str, int] = field(default_factory=dict)

    def add(self, key: str, kept: int, live: int) -> None:
        self.kept[key] = self.kept.get(key, 0) + kept
        self.live[key] = self.live.get(key, 0) + live

    def merge(self, other: "Tally") -> None:
        for key in other.live:
            self.add(key, other.kept.get(key, 0), other.live[key])

    def recall(self, key: str = "all") -> float | None:
        live = self.live.get(key, 0)
        return self.kept.get(key, 0) / live if live else None

    def by_category(self) -> dict[str, float | None]:
        return {c: self.recall(c) for c in CATEGORIES}


class FactState(NamedTuple):
    """A fact at the end of a replay: the turn it was lost (None: still carried), and of the turns it
    was live, how many requests carried it."""

    lost: int | None
    kept_turns: int
    live_turns: int


@dataclass(frozen=True, slots=True)
class FidelityRun:
    """One session replayed under one policy."""

    preset: str
    window: int
    turns: int
    probes: tuple[Probe, ...]
    kept: tuple[int, ...]             # per probe: bit k-1 set when it was recoverable at turn k
    billed_raw: int
    billed_sent: int
    compaction_turns: tuple[int, ...]
    reads: tuple[tuple[int, str], ...] = ()   # (turn, path) of every file read, for loop detection
    sent_estimated: bool = True   # any request's sent figure an estimate (≈), as simulate's totals say

    def _live(self, i: int, turn: int) -> bool:
        return self.probes[i].live_at(turn) and turn <= self.turns

    def _is_kept(self, i: int, turn: int) -> bool:
        return bool(self.kept[i] >> (turn - 1) & 1)

    def recall_at(self, turn: int, categories: Iterable[str] | None = None) -> float | None:
        """The share of the facts created so far that turn `turn`'s request still carries (an
        instruction the user insisted on counts as `weight` facts)."""
        cats = set(categories) if categories is not None else None
        live = [i for i, p in enumerate(self.probes) if self._live(i, turn) and (cats is None or p.category in cats)]
        if not live:
            return None
        probes = self.probes
        return sum(probes[i].weight for i in live if self._is_kept(i, turn)) / sum(probes[i].weight for i in live)

    def pinned_counts(self, turn: int) -> tuple[int, int]:
        """(kept, live) of what must not be lost — goal and constraints, modified files, pins, and
        the latest error — at turn `turn`; summed over the turns, `eval`'s pinned recall."""
        if not 1 <= turn <= self.turns:
            return 0, 0
        live = [i for i, p in enumerate(self.probes) if p.kind in PINNED_KINDS and self._live(i, turn)]
        live += [i for i, start, end in self.last_error_spans() if start <= turn < end]
        probes = self.probes
        return sum(probes[i].weight for i in live if self._is_kept(i, turn)), sum(probes[i].weight for i in live)

    def pinned_at(self, turn: int) -> float | None:
        """The share of what must not be lost that turn `turn`'s request still carries."""
        kept, live = self.pinned_counts(turn)
        return kept / live if live else None

    def lost_since(self, i: int, turn: int) -> int | None:
        """Probe i at `turn`: None when its request carries it, else the turn it was lost (the first
        turn of the run of turns, ending at `turn`, where it is missing). The one reading of a
        fact's state: the workbench's list (`missing_at`) and eval's (`fact_states`) both ask it."""
        if self._is_kept(i, turn):
            return None
        lost, first = turn, self.probes[i].turn
        while lost > first and not self._is_kept(i, lost - 1):
            lost -= 1
        return lost

    def missing_at(self, turn: int) -> list[tuple[Probe, int]]:
        """Every probe live at `turn` that its request does not carry, with the turn it was lost."""
        out = []
        for i, p in enumerate(self.probes):
            if self._live(i, turn):
                lost = self.lost_since(i, turn)
                if lost is not None:
                    out.append((p, lost))
        return out

    def fact_states(self) -> list[FactState]:
        """Every probe at the last turn it was live (the session's last, or the one before it was
        unpinned): the turn it was lost there (None: kept), and how many of its live turns kept it."""
        out = []
        end = self.turns + 1
        for i, p in enumerate(self.probes):
            stop = end if p.until is None else min(end, p.until)
            if stop <= p.turn:
                out.append(FactState(None, 0, 0))
                continue
            span = ((1 << (stop - p.turn)) - 1) << (p.turn - 1)
            out.append(FactState(self.lost_since(i, stop - 1), (self.kept[i] & span).bit_count(), stop - p.turn))
        return out

    def series(self) -> list[float | None]:
        """recall_at for every turn, 1..turns."""
        return [self.recall_at(k) for k in range(1, self.turns + 1)]

    def lost_at(self, turn: int) -> list[Probe]:
        """Probes live at `turn` that its request no longer carries, though the one before did
        (or that it drops on the very turn they appear)."""
        out = []
        for i, p in enumerate(self.probes):
            if self._live(i, turn) and not self._is_kept(i, turn) and (p.turn == turn or self._is_kept(i, turn - 1)):
                out.append(p)
        return out

    def lost_turns(self) -> list[tuple[int, int]]:
        """(turn, probes lost there) for every turn that lost something: `lost_at`'s, read off the bit
        masks (a probe is lost at a live turn that does not keep it when the one before did, or
        when it is its first) instead of asking every turn about every probe."""
        lost: dict[int, int] = {}
        end = self.turns + 1
        for p, kept in zip(self.probes, self.kept):
            stop = end if p.until is None else min(end, p.until)
            if stop <= p.turn:
                continue
            first = 1 << (p.turn - 1)
            live = ((1 << (stop - p.turn)) - 1) * first
            bits = live & ~kept & ((kept << 1) | first)
            while bits:
                low = bits & -bits
                turn = low.bit_length()
                lost[turn] = lost.get(turn, 0) + 1
                bits ^= low
        return sorted(lost.items())

    def last_error_spans(self) -> list[tuple[int, int, int]]:
        """(probe index, first turn, end turn): which error is the latest one, turn by turn."""
        errs = [i for i, p in enumerate(self.probes) if p.kind == "error"]
        spans = []
        for j, i in enumerate(errs):
            start = self.probes[i].turn
            end = self.probes[errs[j + 1]].turn if j + 1 < len(errs) else self.turns + 1
            if end > start:
                spans.append((i, start, end))
        return spans

    def tally(self) -> Tally:
        t = Tally()
        end = self.turns + 1
        for i, p in enumerate(self.probes):
            stop = min(end, p.until or end)
            if stop <= p.turn:
                continue
            span = ((1 << (stop - p.turn)) - 1) << (p.turn - 1)
            kept, live = (self.kept[i] & span).bit_count() * p.weight, (stop - p.turn) * p.weight
            t.add("all", kept, live)
            t.add(p.category, kept, live)
            if p.kind in PINNED_KINDS:
                t.add(PINNED, kept, live)
        for i, start, stop in self.last_error_spans():
            span = ((1 << (stop - start)) - 1) << (start - 1)
            t.add(PINNED, (self.kept[i] & span).bit_count(), stop - start)
        return t


@dataclass(slots=True)
class Money:
    """A session's input in USD at its model's prices through the provider's cache, without compaction
    and with it, and the cached tokens compaction made the provider write again (and what that cost
    beyond reading them): `simulate`'s figures (core/log/prompt_cache.py), which eval only adds up."""

    cost_raw: float = 0.0
    cost_sent: float = 0.0
    cache_rewritten: int = 0
    cache_rewrite_cost: float = 0.0

    def add(self, other: "Money") -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def to_json(self) -> dict[str, Any]:
        raw, sent = round(self.cost_raw, 6), round(self.cost_sent, 6)
        return {"cost_raw": raw, "cost_sent": sent, "cost_saving": saving_money(raw, sent), "cache_rewritten": self.cache_rewritten,
                "cache_rewrite_cost": round(self.cache_rewrite_cost, 6)}


def saving_money(raw: float, sent: float) -> float | None:
    """The share of the money compaction saves (negative: it cost more); None with nothing priced."""
    return (raw - sent) / raw if raw else None


@dataclass(slots=True)
class PresetSummary:
    """One session under one preset, as a worker sends it back (no probe texts)."""

    billed_raw: int
    billed_sent: int
    compactions: int
    tally: Tally
    lost_turns: list[tuple[int, int]]
    loops: list[str]
    sent_estimated: bool   # any request's sent figure an estimate (≈)
    facts: list[FactState] = field(default_factory=list)   # per probe, in the session's order
    money: Money | None = None   # None: the session names no model whose prices are known

    def to_json(self) -> dict[str, Any]:
        return {**totals_json(self.billed_raw, self.billed_sent, self.compactions, self.tally, self.sent_estimated),
                **({} if self.money is None else self.money.to_json()),
                "lost_turns": [{"turn": k, "lost": n} for k, n in self.lost_turns], "loops": list(self.loops)}


@dataclass(slots=True)
class BilledCheck:
    """The accounting model against what the provider billed (issue 23): the agent's own history
    replayed, each request after the first predicted from the usage recorded before it only."""

    input_errors: list[float] = field(default_factory=list)   # |predicted - billed| / billed, per request
    # per request (core/log/prompt_cache.py): |a hit's read - recorded| / recorded where the request read
    # the cache; |predicted write - recorded| / billed; and the read tokens predicted, of the tokens
    # predicted, recorded read, of the tokens billed
    cache_errors: list[float] = field(default_factory=list)
    input_signed: list[float] = field(default_factory=list)   # (predicted - billed) / billed: the bias
    cache_write_errors: list[float] = field(default_factory=list)
    read_share: list[int] = field(default_factory=lambda: [0, 0, 0, 0])
    # the cost of the recorded history predicted against its recorded usage priced: (pred - rec) / rec,
    # one per session, and the USD summed
    cost_errors: list[float] = field(default_factory=list)
    cost_predicted: float = 0.0
    cost_recorded: float = 0.0

    def merge(self, other: "BilledCheck") -> None:
        self.input_errors += other.input_errors
        self.cache_errors += other.cache_errors
        self.input_signed += other.input_signed
        self.cache_write_errors += other.cache_write_errors
        self.read_share = [a + b for a, b in zip(self.read_share, other.read_share)]
        self.cost_errors += other.cost_errors
        self.cost_predicted += other.cost_predicted
        self.cost_recorded += other.cost_recorded

    def to_json(self) -> dict[str, Any]:
        out = {"requests": len(self.input_errors), **spread(self.input_errors),
               "bias": median(self.input_signed),
               "cache_reads": {"requests": len(self.cache_errors), **spread(self.cache_errors)},
               "cache_writes": {"requests": len(self.cache_write_errors), **spread(self.cache_write_errors)}}
        if self.read_share[1] and self.read_share[3]:
            out["cache_read_share"] = {"predicted": round(self.read_share[0] / self.read_share[1], 4),
                                       "recorded": round(self.read_share[2] / self.read_share[3], 4)}
        if self.cost_errors:
            out["cost"] = {"sessions": len(self.cost_errors), "predicted": round(self.cost_predicted, 6),
                           "recorded": round(self.cost_recorded, 6),
                           **spread([abs(e) for e in self.cost_errors]), "bias": median(self.cost_errors)}
        return out


def median(xs: list[float]) -> float | None:
    return sorted(xs)[len(xs) // 2] if xs else None


def spread(xs: list[float]) -> dict[str, float | None]:
    """The median and 90th percentile (nearest rank) of absolute relative errors."""
    s = sorted(xs)
    return {"median_abs_error": median(s), "p90_abs_error": s[min(len(s) - 1, -(-9 * len(s) // 10) - 1)] if s else None}


@dataclass(slots=True)
class SessionSummary:
    path: str
    title: str = ""
    turns: int = 0
    probes: dict[str, int] = field(default_factory=dict)   # per category
    presets: dict[str, PresetSummary] = field(default_factory=dict)
    error: str | None = None     # why the session could not be evaluated
    format: str = ""
    billed: BilledCheck | None = None   # when the session records usage
    facts: list[dict[str, Any]] = field(default_factory=list)   # each probe: what and where (`fact_json`)

    def to_json(self) -> dict[str, Any]:
        if self.error:
            return {"path": self.path, "error": self.error}
        out = {"path": self.path, "title": self.title, "format": self.format, "turns": self.turns,
               "probes": dict(self.probes), "presets": {name: s.to_json() for name, s in self.presets.items()},
               "facts": self.facts_json()}
        if self.billed is not None:
            out["billed_vs_predicted"] = self.billed.to_json()
        return out


    def facts_json(self) -> list[dict[str, Any]]:
        """Each fact, where it came from, and per preset the turn it was lost (null: kept to the end)
        and how many of its live turns kept it."""
        out = []
        for k, fact in enumerate(self.facts):
            states = {name: ps.facts[k] for name, ps in self.presets.items() if k < len(ps.facts)}
            out.append({**fact, "live_turns": next((st.live_turns for st in states.values()), 0),
                        "lost": {name: st.lost for name, st in states.items()},
                        "kept_turns": {name: st.kept_turns for name, st in states.items()}})
        return out


def fact_json(probe: Probe, source_line: Any = None) -> dict[str, Any]:
    """What a fact is and where it came from: its message (and that message's line in the session
    file, when the importer gave one) and the first request that carried it."""
    out = {"id": probe.id, "kind": probe.kind, "category": probe.category, "text": probe.text,
           "message_id": probe.message_id, "turn": probe.turn, "weight": probe.weight}
    if isinstance(source_line, int) and not isinstance(source_line, bool):
        out["source_line"] = source_line
    if probe.until is not None:
        out["unpinned_at"] = probe.until
    return out


def saving(raw: int, sent: int) -> float:
    return (raw - sent) / raw if raw else 0.0


def totals_json(raw: int, sent: int, compactions: int, tally: Tally, sent_estimated: bool) -> dict[str, Any]:
    return {"billed_raw": raw, "billed_sent": sent, "billed_sent_estimated": sent_estimated,
            "saving": saving(raw, sent), "compactions": compactions,
            "recall": tally.recall(), "pinned_recall": tally.recall(PINNED), "by_category": tally.by_category()}
