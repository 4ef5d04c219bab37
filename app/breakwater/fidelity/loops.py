"""Compaction loops (issue 12): compaction that keeps coming back, and the "death spiral" where
the agent re-reads what a compaction just took away (codex#36665: 74 compactions in 5.9 h,
95% of them followed by re-reads)."""

from __future__ import annotations

import statistics
from typing import Iterable, Sequence

from breakwater.core.session_log import SessionLog
from breakwater.core.summarize import CHANGE_TOOLS
from breakwater.fidelity.probes import PATH_KEYS, call_args

LOOP_MIN_COMPACTIONS = 3
LOOP_GAP_TURNS = 4          # compactions this close together, most of the time, are a loop
REREAD_TURNS = 3            # a read this soon after a compaction, of a file read before it, is a re-read
SPIRAL_MIN_COMPACTIONS = 2
SPIRAL_SHARE = 0.5


def detect(compaction_turns: Sequence[int], reads: Iterable[tuple[int, str]]) -> list[str]:
    """One line per loop found: compaction every few turns; re-reads after compactions."""
    flags = []
    turns = sorted(set(compaction_turns))
    gaps = [b - a for a, b in zip(turns, turns[1:])]
    if len(turns) >= LOOP_MIN_COMPACTIONS and sum(g <= LOOP_GAP_TURNS for g in gaps) * 2 > len(gaps):
        flags.append(f"compaction loop: {len(turns)} compactions, a median of {statistics.median(gaps):g} turns apart")
    reads = sorted(reads)
    followed, files = 0, set()
    for t in turns:
        before = {path for k, path in reads if k < t}
        again = {path for k, path in reads if t <= k < t + REREAD_TURNS and path in before}
        if again:
            followed += 1
            files |= again
    if len(turns) >= SPIRAL_MIN_COMPACTIONS and followed >= SPIRAL_MIN_COMPACTIONS and followed >= SPIRAL_SHARE * len(turns):
        shown = ", ".join(sorted(files)[:3]) + (" …" if len(files) > 3 else "")
        flags.append(f"re-read spiral: {followed} of {len(turns)} compactions followed by re-reading {shown}")
    return flags


def file_reads(log: SessionLog) -> list[tuple[int, str]]:
    """(turn of the request that made the call, path) for every file-reading tool call."""
    out, turn = [], 0
    for m in log.messages:
        if m.role != "assistant":
            continue
        turn += 1
        for call in m.tool_calls:
            if call.name in CHANGE_TOOLS:
                continue
            args = call_args(call)
            path = next((args[k] for k in PATH_KEYS if isinstance(args.get(k), str)), None)
            if path:
                out.append((turn, path))
    return out
