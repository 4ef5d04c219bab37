"""Compaction loops (issue 12): compaction that keeps coming back, and the "death spiral" where
the agent re-reads what a compaction just took away (codex#36665: 74 compactions in 5.9 h,
95% of them followed by re-reads)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Iterator, Sequence

from breakwater.core.log.message import Message
from breakwater.core.log.session_log import SessionLog
from breakwater.core.log.outcome import CHANGE_TOOLS, PATH_KEYS, call_args

if TYPE_CHECKING:
    from breakwater.core.simulate import Simulation

LOOP_MIN_COMPACTIONS = 3
LOOP_GAP_TURNS = 4          # compactions this close together, most of the time, are a loop
REREAD_TURNS = 3            # a read this soon after a compaction, of a file read before it, is a re-read
SPIRAL_MIN_COMPACTIONS = 2
SPIRAL_SHARE = 0.5


NAMES = {"compaction-loop": "compaction loop", "reread-spiral": "re-read spiral"}
MEANINGS = {
    "compaction-loop": "compaction keeps coming back every few turns: each one pays for a summary and loses "
                       "facts, and the context never settles",
    "reread-spiral": "after compactions the agent reads again the files it had read (the death spiral): the "
                     "summary does not carry what it needs, so it pays to read them again",
}


@dataclass(frozen=True, slots=True)
class Loop:
    kind: str                    # a key of MEANINGS
    text: str                    # one line, for tables
    turns: tuple[int, ...]       # the compactions involved
    files: tuple[str, ...] = ()  # re-read ones

    @property
    def meaning(self) -> str:
        return MEANINGS[self.kind]

    def to_json(self) -> dict:
        return {"kind": self.kind, "text": self.text, "meaning": self.meaning, "turns": list(self.turns),
                "files": list(self.files)}


def find(compaction_turns: Sequence[int], reads: Iterable[tuple[int, str]]) -> list[Loop]:
    """The loops of one run: compaction every few turns; re-reads after compactions. `reads` is
    iterated only when there are compactions enough for a spiral (most runs have fewer, and
    `file_reads` reads every call's arguments)."""
    found = []
    turns = sorted(set(compaction_turns))
    gaps = [b - a for a, b in zip(turns, turns[1:])]
    if len(turns) >= LOOP_MIN_COMPACTIONS and sum(g <= LOOP_GAP_TURNS for g in gaps) * 2 > len(gaps):
        found.append(Loop("compaction-loop", f"{NAMES['compaction-loop']}: {len(turns)} compactions, a median of "
                                             f"{statistics.median(gaps):g} turns apart", tuple(turns)))
    if len(turns) < SPIRAL_MIN_COMPACTIONS:
        return found
    reads = sorted(reads)
    followed, files = [], set()
    for t in turns:
        before = {path for k, path in reads if k < t}
        again = {path for k, path in reads if t <= k < t + REREAD_TURNS and path in before}
        if again:
            followed.append(t)
            files |= again
    n = len(followed)
    if n >= SPIRAL_MIN_COMPACTIONS and n >= SPIRAL_SHARE * len(turns):
        shown = ", ".join(sorted(files)[:3]) + (" …" if len(files) > 3 else "")
        found.append(Loop("reread-spiral", f"{NAMES['reread-spiral']}: {n} of {len(turns)} compactions followed by "
                                           f"re-reading {shown}", tuple(followed), tuple(sorted(files))))
    return found


def detect(compaction_turns: Sequence[int], reads: Iterable[tuple[int, str]]) -> list[str]:
    """One line per loop found."""
    return [loop.text for loop in find(compaction_turns, reads)]


def of_simulation(sim: Simulation, log: SessionLog) -> list[Loop]:
    """The loops of a `simulate` run: its compactions (decided or recorded) and the session's reads."""
    return find([t.turn for t in sim.turns if t.compaction], file_reads(log))


def file_reads(log: SessionLog) -> Iterator[tuple[int, str]]:
    """(turn of the request that made the call, path) for every file-reading tool call, as they come."""
    turn = 0
    for m in log.entries:
        if not isinstance(m, Message) or m.role != "assistant":
            continue
        turn += 1
        for call in m.tool_calls:
            if call.name in CHANGE_TOOLS:
                continue
            args = call_args(call)
            path = next((args[k] for k in PATH_KEYS if isinstance(args.get(k), str)), None)
            if path:
                yield turn, path
