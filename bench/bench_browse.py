"""Session browser benchmarks: listing a home of sessions, and the time from enter on a 5 MB
transcript to the workbench showing it (its message list), then to its last request drawn (the simulation of every turn done).

Prints figures; asserts nothing. The transcript is the real pi session (tests/fixtures/real) with
its messages repeated to 5 MB; the home is a temporary folder laid out as pi's.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from textual import events  # noqa: E402

from breakwater.formats.sessions import find_sessions  # noqa: E402
from breakwater.ui.app import browse_app  # noqa: E402
from breakwater.ui.config import UISettings  # noqa: E402
from breakwater.ui.screens.replay import ReplayScreen  # noqa: E402

PI = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "real" / "pi" / "large-session.jsonl"
TARGET = 5_000_000
RUNS = 3


def five_mb_home(tmp: Path) -> Path:
    lines = PI.read_bytes().splitlines(keepends=True)
    body = b"".join(lines[1:])
    out = [lines[0]]
    size = len(lines[0])
    while size < TARGET:
        out.append(body)
        size += len(body)
    path = tmp / ".pi/agent/sessions/--Users-dev-proj--/2025-11-20_big.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"".join(out))
    for i in range(200):   # a home with many sessions: the listing reads only their ends
        small = tmp / f".pi/agent/sessions/--Users-dev-p{i % 20}--/2025-11-{i:03d}.jsonl"
        small.parent.mkdir(parents=True, exist_ok=True)
        small.write_bytes(b"".join(lines[:400]))
        os.utime(small, (1_700_000_000 + i, 1_700_000_000 + i))
    return path


async def open_once(home: Path) -> tuple[float, float]:
    app = browse_app(find_sessions(home, home), UISettings())
    resumed: list[float] = []

    def hook(message) -> None:
        # the workbench screen becomes the one shown (it is composed and painted in this same turn of
        # the loop; the simulation thread starts after it and would delay a poll, not the paint)
        if isinstance(message, events.ScreenResume) and isinstance(app.screen, ReplayScreen) and not resumed:
            resumed.append(time.perf_counter())

    async with app.run_test(size=(160, 48), message_hook=hook) as pilot:
        await pilot.pause(0.1)
        pressed = time.perf_counter()
        await pilot.press("enter")
        while not resumed:
            await pilot.pause(0.005)
        shown = resumed[0] - pressed
        while not isinstance(app.screen, ReplayScreen) or app.screen.detail is None:
            await pilot.pause(0.01)
        drawn = time.perf_counter() - pressed
    return shown, drawn


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        big = five_mb_home(home)
        t0 = time.perf_counter()
        found = find_sessions(home, home)
        listed = time.perf_counter() - t0
        print(f"bench_browse: listing {len(found)} sessions ({sum(s.size for s in found) / 1e6:.1f} MB): "
              f"{listed * 1000:.0f} ms")
        shown, drawn = zip(*(asyncio.run(open_once(home)) for _ in range(RUNS)))
        print(f"bench_browse: enter on a {big.stat().st_size / 1e6:.1f} MB transcript -> its messages on screen: "
              f"median {statistics.median(shown):.2f} s ({', '.join(f'{s:.2f}' for s in shown)}); "
              f"its last request drawn: median {statistics.median(drawn):.2f} s")


if __name__ == "__main__":
    main()
