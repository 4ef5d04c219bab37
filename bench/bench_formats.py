"""Import speed of every real transcript in tests/fixtures/real (SPEC §9; target ≥ 20 MB/s).

Prints figures; asserts nothing. Each file is imported 9 times; the median CPU time is quoted.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from breakwater.formats import detect_format, load_sessions

REAL = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "real"
RUNS = 9


def seconds(path: Path) -> float:
    # CPU time of this process: on a machine shared with other jobs, wall time measures them too
    t0 = time.process_time()
    load_sessions(path)
    return time.process_time() - t0


def main() -> None:
    total_bytes = total_s = 0.0
    files = sorted(REAL.glob("*/*"))
    for path in files:
        size = path.stat().st_size
        med = statistics.median(seconds(path) for _ in range(RUNS))
        logs = load_sessions(path)
        msgs = sum(len(log.messages) for log in logs)
        total_bytes += size
        total_s += med
        print(f"import {detect_format(path):<14} {path.name[:52]:<52} {size / 1e6:6.2f} MB  {msgs:5,} msgs  "
              f"{med * 1000:7.1f} ms  {size / 1e6 / med:6.1f} MB/s")
    print(f"import all {len(files)} files: {total_bytes / 1e6:.2f} MB in {total_s:.3f} s "
          f"(sum of medians of {RUNS}): {total_bytes / 1e6 / total_s:.1f} MB/s")


if __name__ == "__main__":
    main()
