"""Tuning benchmarks: what A/B costs against two plain simulations, on a 5,000-message session.

Prints figures; asserts nothing (targets live in issue 9, medians are quoted in notes).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from synth import session_messages, write_session  # noqa: E402

from breakwater.core.compare import compare  # noqa: E402
from breakwater.core.policy import PRESETS  # noqa: E402
from breakwater.core.simulate import simulate  # noqa: E402
from breakwater.formats import load_session  # noqa: E402

WINDOW = 128_000
RUNS = 3


def big_session(tmp: Path):
    msgs = session_messages(5000, avg_tool_chars=15000, seed=42)
    return load_session(write_session(tmp / "big.jsonl", msgs, header={"window": WINDOW}))


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        log = big_session(Path(tmp))
    a = PRESETS["breakwater"].with_changes(window=WINDOW)
    b = PRESETS["seed-001"].with_changes(window=WINDOW)
    print(f"session: {len(log.messages):,} messages, {log.turn_count():,} turns")
    for counter in ("heuristic", "exact"):
        simulate(log, a, counter)  # warm caches and the tokenizer out of the figures
        two = [timed(lambda: (simulate(log, a, counter), simulate(log, b, counter))) for _ in range(RUNS)]
        ab = [timed(lambda: compare(log, a, b, counter)) for _ in range(RUNS)]
        c = compare(log, a, b, counter)
        print(f"A/B breakwater vs seed-001, --counter {counter}: compare {statistics.median(ab):.3f} s, "
              f"two simulations {statistics.median(two):.3f} s (ratio {statistics.median(ab) / statistics.median(two):.2f}; "
              f"median of {RUNS}; {len(c.messages)} messages differ at the last turn)")


if __name__ == "__main__":
    main()
