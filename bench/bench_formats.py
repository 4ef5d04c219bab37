"""Every format beside native JSONL (issue 28 item 1; target: each within 1.2× of the same session as
native JSONL, and import ≥ 20 MB/s, SPEC §9).

1. Each real transcript in tests/fixtures/real, loaded (CPU, median of 9) beside the same session
   as native JSONL (what `breakwater import` writes from it).
2. A 5,000-message ~31 MB session written in each format (bench/format_sessions.py): the loader
   alone, and `breakwater simulate FILE --counter heuristic --json` as a user runs it, a fresh
   process each time (CPU of the child, median of 5, alternating with the native file), as an
   installed package runs: compiled modules kept (`fresh.installed`). Without them each process
   compiled the modules it imports, and a reader imports three or four more than native JSONL needs.

Prints figures; asserts nothing.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]

from format_sessions import WRITERS  # noqa: E402
from fresh import installed  # noqa: E402
from synth import session_messages  # noqa: E402

from breakwater.formats import detect_format, load_sessions  # noqa: E402
from breakwater.cli.formats import write_native  # noqa: E402

REAL = HERE.parent / "tests" / "fixtures" / "real"
RUNS = 9
FRESH_RUNS = 5


def seconds(path: Path) -> float:
    # CPU time of this process: on a machine shared with other jobs, wall time measures them too
    t0 = time.process_time()
    load_sessions(path)
    return time.process_time() - t0


def as_native(path: Path, out: Path) -> Path:
    with open(out, "w", encoding="utf-8") as fh:
        write_native(load_sessions(path)[0], fh)
    return out


def child_cpu(cmd: list[str], env: dict[str, str] | None = None) -> float:
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{cmd} failed")
    return usage.ru_utime + usage.ru_stime


def simulate_pair(path: Path, native: Path, cache: str) -> tuple[float, float]:
    """Median CPU of `simulate` on the file and on its native twin, runs alternating, as an installed
    package runs (its compiled modules in `cache`, made by a first run of each)."""
    cmd = [sys.executable, "-m", "breakwater", "simulate", "--counter", "heuristic", "--json"]
    env = installed(cache)
    for first in (path, native):
        child_cpu(cmd + [str(first)], env)
    runs = [(child_cpu(cmd + [str(path)], env), child_cpu(cmd + [str(native)], env)) for _ in range(FRESH_RUNS)]
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


def real_fixtures(tmp: Path) -> None:
    total_bytes = total_s = 0.0
    files = sorted(p for p in REAL.glob("*/*") if p.name != "SOURCES.md")
    for path in files:
        size = path.stat().st_size
        native = as_native(path, tmp / f"{path.name}.native.jsonl")
        med = statistics.median(seconds(path) for _ in range(RUNS))
        nat = statistics.median(seconds(native) for _ in range(RUNS))
        msgs = sum(len(log.messages) for log in load_sessions(path))
        total_bytes += size
        total_s += med
        print(f"real {detect_format(path):<14} {path.name[:48]:<48} {size / 1e6:6.2f} MB {msgs:5,} msgs: load "
              f"{med * 1000:6.1f} ms ({size / 1e6 / med:5.1f} MB/s), as native {nat * 1000:6.1f} ms: "
              f"{med / nat:4.2f}×")
    print(f"real: all {len(files)} files {total_bytes / 1e6:.2f} MB in {total_s:.3f} s "
          f"(sum of medians of {RUNS}): {total_bytes / 1e6 / total_s:.1f} MB/s")


def generated(tmp: Path) -> None:
    msgs = session_messages(5000, avg_tool_chars=15000, seed=42)
    print(f"generated: one 5,000-message session in each format; loader CPU (median of {RUNS}, in-process) "
          f"and `simulate --counter heuristic --json` CPU (fresh process, compiled modules kept, median of "
          f"{FRESH_RUNS}), each beside "
          f"the same session as native JSONL; target ≤ 1.2×")
    for name, (ext, write) in WRITERS.items():
        path = write(msgs, tmp / f"{name}{ext}")
        native = as_native(path, tmp / f"{name}.native.jsonl")
        load = statistics.median(seconds(path) for _ in range(RUNS))
        load_native = statistics.median(seconds(native) for _ in range(RUNS))
        sim, sim_native = simulate_pair(path, native, str(tmp / "cache"))
        print(f"  {name:<15} {path.stat().st_size / 1e6:5.1f} MB: load {load:.3f} s vs native {load_native:.3f} s "
              f"({load / load_native:4.2f}×); simulate {sim:.2f} s vs native {sim_native:.2f} s "
              f"({sim / sim_native:4.2f}×)")
        path.unlink()
        native.unlink()
    print(f"  (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        real_fixtures(Path(tmp))
        generated(Path(tmp))


if __name__ == "__main__":
    main()
