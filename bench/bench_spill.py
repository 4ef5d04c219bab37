"""Spill pane on a 1 GiB spill file: open at the tail, memory, full index, search, follow latency.

Prints figures, asserts nothing (STYLE §16). Targets (issue 6): the tail is on screen in
under a second and memory stays flat (the file is never read whole; the line index costs
8 bytes a line). Each UI run is a fresh process so its RSS figures are its own.

    python bench/bench_spill.py
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
try:
    import breakwater  # noqa: F401
except ImportError:  # run from a checkout without the package installed
    sys.path.insert(0, str(HERE.parent / "app"))
sys.path.insert(0, str(HERE))

from bench_tools import log_chunks  # noqa: E402

from breakwater.tools.spill import SPILL_DIR  # noqa: E402
from breakwater.tools.spill_index import open_spill, scan_line_ends, tail_origin  # noqa: E402
from breakwater.tools.spill_search import Query, find_forward  # noqa: E402

MB = 1_000_000
SIZE = 1024 * 1024 * 1024
RUNS = 3
APPENDS = 5
PAGES = 20
SESSION = "bench"


def make_file(path: Path) -> int:
    block = b"".join(log_chunks(seed=1))
    written = 0
    with path.open("wb") as f:
        while written < SIZE:
            piece = block[:SIZE - written]
            f.write(piece)
            written += len(piece)
        f.write(b"\nLAST LINE OF THE SPILL\n")
    return path.stat().st_size


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024 / MB
    return float("nan")


def one_ui_run(workspace: Path, path: Path) -> dict:
    """In this process: a host app mounts the pane, which opens `path`; times and RSS at each step."""
    from textual.app import App

    from breakwater.ui.spill import SpillPane, SpillView

    class Host(App):
        pass

    def screen(app) -> str:
        return "\n".join(strip.text for strip in app.screen._compositor.render_strips())

    async def run() -> dict:
        app = Host()
        out: dict = {}
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.pause()
            base = _rss_mb()
            start = time.perf_counter()
            await app.mount(SpillPane(workspace, SESSION))
            view = app.query_one(SpillView)
            while "LAST LINE OF THE SPILL" not in screen(app):
                await asyncio.sleep(0.001)
            out["tail_s"] = time.perf_counter() - start
            out["tail_rss_mb"] = _rss_mb() - base
            while not (view.index is not None and view.index.has_head):
                await asyncio.sleep(0.005)
            out["index_s"] = time.perf_counter() - start
            out["index_rss_mb"] = _rss_mb() - base
            out["lines"] = len(view.index)
            view.focus()
            await pilot.pause()
            pages = []
            for _ in range(PAGES):
                before = screen(app)
                t0 = time.perf_counter()
                app.simulate_key("pageup")
                while screen(app) == before:
                    await asyncio.sleep(0.001)
                pages.append(time.perf_counter() - t0)
            out["page_s"] = statistics.median(pages)
            await pilot.press("end")
            latencies = []
            with path.open("ab") as f:
                for i in range(APPENDS):
                    await asyncio.sleep(0.3)
                    marker = f"APPENDED {i} {time.time_ns()}"
                    t0 = time.perf_counter()
                    f.write(marker.encode() + b"\n")
                    f.flush()
                    while marker not in screen(app):
                        await asyncio.sleep(0.001)
                    latencies.append(time.perf_counter() - t0)
            out["follow_s"] = statistics.median(latencies)
        return out

    return asyncio.run(run())


def bench_headless(path: Path, size: int) -> None:
    fd = open_spill(path)
    try:
        times = []
        for _ in range(RUNS):
            t0 = time.perf_counter()
            origin = tail_origin(fd, size, 2000)
            sum(len(e) for _, e in scan_line_ends(fd, origin, size))
            times.append(time.perf_counter() - t0)
        print(f"index the last 2000 lines of 1 GiB: {statistics.median(times) * 1000:.1f} ms (median of {RUNS})")
        times = []
        for _ in range(RUNS):
            t0 = time.perf_counter()
            lines = sum(len(e) for _, e in scan_line_ends(fd, 0, size))
            times.append(time.perf_counter() - t0)
        print(f"index every line of 1 GiB ({lines:,} lines): {statistics.median(times):.2f} s "
              f"= {size / statistics.median(times) / MB:.0f} MB/s (median of {RUNS}); the index holds "
              f"{lines * 8 / MB:.0f} MB (8 B a line)")
        for text in ("no such text", "No Such Text"):
            times = []
            for _ in range(RUNS):
                t0 = time.perf_counter()
                find_forward(fd, Query.parse(text), 0, size)
                times.append(time.perf_counter() - t0)
            kind = "ignoring case" if Query.parse(text).fold else "exact case"
            print(f"search 1 GiB for an absent string ({kind}): {statistics.median(times):.2f} s "
                  f"(median of {RUNS})")
    finally:
        os.close(fd)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / SPILL_DIR / SESSION / "call_big.log"
        path.parent.mkdir(parents=True)
        size = make_file(path)
        bench_headless(path, size)
        runs = []
        for _ in range(RUNS):
            out = subprocess.run([sys.executable, __file__, "--ui-run", tmp, str(path)], capture_output=True,
                                 text=True, timeout=600)
            if out.returncode != 0:
                print(f"spill pane run failed: {out.stderr.strip().splitlines()[-1:]}")
                return
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))

        def med(key: str) -> float:
            return statistics.median(r[key] for r in runs)
        print(f"spill pane, 1 GiB file: tail on screen in {med('tail_s') * 1000:.0f} ms, "
              f"RSS +{med('tail_rss_mb'):.1f} MB (median of {RUNS})")
        print(f"spill pane, 1 GiB file: whole file indexed in the background in {med('index_s'):.2f} s, "
              f"RSS +{med('index_rss_mb'):.0f} MB for {runs[0]['lines']:,} lines (median of {RUNS})")
        print(f"spill pane, 1 GiB file: page up repainted in {med('page_s') * 1000:.0f} ms "
              f"(median of {RUNS} runs x {PAGES} keys)")
        print(f"spill pane follow latency, append to on screen: {med('follow_s') * 1000:.0f} ms "
              f"(median of {RUNS} runs x {APPENDS} appends)")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--ui-run":
        print(json.dumps(one_ui_run(Path(sys.argv[2]), Path(sys.argv[3]))))
    else:
        main()
