"""`breakwater export` of a 5,000-message session (issue 42: ≤ 2 s), as a user runs it: a fresh
process, the modules compiled once (fresh.installed), the page and the Markdown written.

Prints figures; asserts nothing. The facts' replay runs in a child process beside the main one,
so wall time, not CPU time, is the figure a user meets (CPU counts both processes)."""

from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fresh import breakwater, installed, load_average, measured  # noqa: E402
from synth import session_messages, write_session  # noqa: E402

RUNS = 5


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path = write_session(folder / "bench.jsonl", session_messages(5000, avg_tool_chars=15000, seed=42),
                             header={"window": 128_000})
        env = installed(str(folder / "cache"))
        for kind, flag in (("HTML", "--html"), ("Markdown", "--md"), ("HTML, A/B with seed-001", "--html")):
            out = folder / ("page.html" if flag == "--html" else "page.md")
            extra = ["--compare", "seed-001"] if "A/B" in kind else []
            measured(breakwater("export", str(path), flag, str(out), *extra), env)   # compiles the modules once
            runs = [measured(breakwater("export", str(path), flag, str(out), *extra), env) for _ in range(RUNS)]
            print(f"export {kind} of 5,000 messages ({path.stat().st_size / 1e6:.0f} MB): "
                  f"{statistics.median(r[0] for r in runs):.2f} s wall, {statistics.median(r[1] for r in runs):.2f} s CPU, "
                  f"peak {statistics.median(r[2] for r in runs):.0f} MB (median of {RUNS}, fresh processes); "
                  f"{out.stat().st_size / 1e6:.2f} MB written; {load_average()}")
        sim = [measured(breakwater("simulate", str(path), "--json"), env) for _ in range(RUNS)]
        print(f"for scale, simulate --json of the same: {statistics.median(r[0] for r in sim):.2f} s wall "
              f"(median of {RUNS})")
