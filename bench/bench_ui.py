"""Workbench benchmarks: the first screen as a user waits for it, first paint, key-to-repaint
latency, jump to a turn.

Prints figures; asserts nothing. The first screen is the whole process: `breakwater replay FILE`
launched in tmux until its gauges are on screen (issue 28 item 4: ≤ 1.0 s at 100 messages, ≤ 2.0 s
at 20,000). The other figures parse each session first (parsing is not the UI's time); the app is
the real one from `make_app`, run headless at 160×48 by Textual's test driver.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from synth import session_messages, write_session  # noqa: E402

from breakwater.core.policy import preset  # noqa: E402
from breakwater.core.replay import Replay  # noqa: E402
from breakwater.formats import load_session  # noqa: E402
from breakwater.ui.app import make_app  # noqa: E402
from breakwater.ui.config import UISettings  # noqa: E402
from breakwater.ui.widgets.message_list import MessageList  # noqa: E402

WINDOW = 128_000
SIZE = (160, 48)


def rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def make_log(n: int, tmp: Path):
    path = write_session(tmp / f"s{n}.jsonl", session_messages(n, avg_tool_chars=2000, seed=n),
                         header={"window": WINDOW})
    t0 = time.perf_counter()
    log = load_session(path)
    return log, time.perf_counter() - t0


async def first_paint(log) -> tuple[float, float, float]:
    """Seconds from creating the app to the message list's first painted screen (wall, CPU); MB
    added by then."""
    before = rss_mb()
    t0, c0 = time.perf_counter(), time.process_time()
    app = make_app(log, preset("breakwater").with_changes(window=WINDOW), settings=UISettings())
    async with app.run_test(size=SIZE) as pilot:
        lst = app.screen.query_one(MessageList)
        while not lst._strips:          # the list has drawn its rows
            await pilot.pause(0.005)
        took, cpu = time.perf_counter() - t0, time.process_time() - c0
        grown = rss_mb() - before
        app.exit()
    return took, cpu, grown


async def key_latency(log) -> dict[str, tuple[float, float]]:
    """Median ms from a key press to the repainted screen, once the session is simulated: wall
    clock, and the process's CPU time (the machine is shared, so wall time includes waiting)."""
    app = make_app(log, preset("breakwater").with_changes(window=WINDOW), settings=UISettings())
    out: dict[str, list[tuple[float, float]]] = {"down (select)": [], "pagedown (scroll)": [],
                                                  "left (step a turn)": []}
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        lst = screen.query_one(MessageList)
        while screen.detail is None:
            await pilot.pause(0.05)
        await pilot.pause(0.5)

        async def timed_key(key: str, done) -> tuple[float, float]:
            # the key is posted as a terminal sends it (pilot.press() waits for the whole process to
            # go idle, 20 ms at least, twice), and the time runs until it has been drawn
            t0, c0 = time.perf_counter(), time.process_time()
            app.simulate_key(key)
            while not done():
                await asyncio.sleep(0.001)
            await pilot.pause(0)   # the repaint
            return time.perf_counter() - t0, time.process_time() - c0

        for key, label in (("down", "down (select)"), ("pagedown", "pagedown (scroll)")):
            for _ in range(25):
                before = lst.selected_index
                out[label].append(await timed_key(key, lambda: lst.selected_index != before))
                await asyncio.sleep(0.06)   # the inspector follows a selection once keys stop
        for _ in range(25):
            want = screen.turn - 1
            out["left (step a turn)"].append(await timed_key("left", lambda: screen.detail.view.turn == want))
            await asyncio.sleep(0.06)
        app.exit()
    return {k: (1000 * statistics.median(w for w, _ in v), 1000 * statistics.median(c for _, c in v))
            for k, v in out.items()}


async def open_big_output(tmp: Path) -> tuple[float, float]:
    """Seconds from selecting a 10 MB tool result to the inspector showing it (wall, CPU)."""
    from synth import tool_output

    from breakwater.core.log.message import Message
    from breakwater.ui.widgets.inspector import Inspector

    msgs = session_messages(40, avg_tool_chars=500, seed=9)
    big = next(i for i, m in enumerate(msgs) if m.role == "tool")
    m = msgs[big]
    msgs[big] = Message(m.id, "tool", tool_output(random.Random(1), 10_000_000), tool_call_id=m.tool_call_id,
                        turn=m.turn)
    log = load_session(write_session(tmp / "big-output.jsonl", msgs, header={"window": WINDOW}))
    app = make_app(log, preset("breakwater").with_changes(window=WINDOW), settings=UISettings())
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        while screen.detail is None:
            await pilot.pause(0.05)
        inspector = screen.query_one(Inspector)
        t0, c0 = time.perf_counter(), time.process_time()
        screen.query_one(MessageList).select_index(big)
        while inspector.index != big:
            await pilot.pause(0.001)
        await pilot.pause()
        took = (time.perf_counter() - t0, time.process_time() - c0)
        app.exit()
    return took


def jumps(log, count: int = 40) -> tuple[float, float, float]:
    replay = Replay(log, preset("breakwater").with_changes(window=WINDOW))
    t0 = time.perf_counter()
    replay.run()
    run_s = time.perf_counter() - t0
    rng = random.Random(5)
    times = []
    for _ in range(count):
        turn = rng.randrange(1, replay.turns + 2)
        c0 = time.process_time()
        replay.detail(turn)
        times.append(time.process_time() - c0)
    return run_s, 1000 * statistics.median(times), 1000 * max(times)


GAUGES_SHOWN = " of window "    # the gauges' first line: "sent ≈26,092 of window 128,000 · safe zone …"
FIRST_LOOK = "exact counting…"   # in the gauges while their figures are the heuristic's first look


def tmux(server: str, *args: str, **kwargs) -> subprocess.CompletedProcess:
    # a server of its own: the benchmark's sessions and the machine's other ones leave each other alone
    return subprocess.run(["tmux", "-L", server, *args], capture_output=True, text=True, **kwargs)


def first_screen(path: Path, cache: Path, first_open: bool, runs: int = 5,
                 env: str = "") -> list[tuple[float, float, float, float]]:
    """For each of `runs` launches of `breakwater replay FILE` in a 160×48 tmux window: seconds to its
    gauges on screen (the heuristic first look) and to the exact figures, and the CPU seconds the
    process had used by each. A session kept open keeps the server up between runs (started afresh
    each time, its start-up would be timed, and it races the last one's exit). The count store is in
    `cache`: emptied before each run for a `first_open`, else kept from the runs before."""
    server = f"bw-bench-{os.getpid()}-{time.monotonic_ns()}"   # a new one each time: the last one may be exiting
    tmux(server, "new-session", "-d", "-s", "keep", check=True)
    times = []
    try:
        for k in range(runs):
            name = f"first-screen-{k}"
            if first_open:
                for old in cache.glob("counts.sqlite3*"):
                    old.unlink()
            t0 = time.perf_counter()
            tmux(server, "new-session", "-d", "-s", name, "-x", "160", "-y", "48",
                 f"env BREAKWATER_CACHE_DIR={cache} {env} {sys.executable} -m breakwater replay {path}", check=True)
            try:
                pid = first = None
                while True:
                    screen = tmux(server, "capture-pane", "-p", "-t", name).stdout
                    if GAUGES_SHOWN in screen:
                        pid = pid or tmux(server, "display-message", "-p", "-t", name, "#{pane_pid}").stdout.strip()
                        if first is None:
                            first = (time.perf_counter() - t0, cpu_seconds(pid))
                        if FIRST_LOOK not in screen:
                            times.append((*first, time.perf_counter() - t0, cpu_seconds(pid)))
                            break
                    if time.perf_counter() - t0 > 120:
                        raise RuntimeError(f"no exact gauges after 120 s:\n{screen}")
                    time.sleep(0.02)
            finally:
                tmux(server, "kill-session", "-t", name)
    finally:
        tmux(server, "kill-server")
    return times


def cpu_seconds(pid: str) -> float:
    """CPU the process has used so far (its own: the machine is shared, so its wall time is not)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def first_screens(tmp: Path) -> None:
    if shutil.which("tmux") is None:
        print("first screen: tmux not installed")
        return
    for n in (100, 20_000):
        path = write_session(tmp / f"first-{n}.jsonl", session_messages(n, avg_tool_chars=2000, seed=n),
                             header={"window": WINDOW})
        # BENCH_BASELINE=/path/to/an/older/checkout/app: the same figures from that tree too
        base = os.environ.get("BENCH_BASELINE")
        for label, env, first_open in [("", "", True), ("", "", False)] + \
                ([("before ", f"PYTHONPATH={base}", True)] if base else []):
            runs = first_screen(path, tmp / f"cache{len(env)}", first_open, env=env)
            med = lambda i: statistics.median(r[i] for r in runs)  # noqa: E731
            print(f"{label}first screen, `breakwater replay` of {path.name} ({n:,} messages, native, "
                  f"{path.stat().st_size / 1e6:.1f} MB, default counter, {'first open' if first_open else 'reopen'}), "
                  f"launch to gauges on screen (heuristic first look): {med(0):.2f} s median, "
                  f"{max(r[0] for r in runs):.2f} s worst of {len(runs)} ({med(1):.2f} s CPU; target ≤ "
                  f"{1.0 if n == 100 else 2.0:.1f} s); to the exact figures {med(2):.2f} s ({med(3):.2f} s CPU; "
                  f"target ≤ 2 s after the first look) (wall, tmux 160×48; load average {os.getloadavg()[0]:.1f} on "
                  f"{os.cpu_count()} cores)")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        first_screens(Path(tmp))
        small, _ = make_log(100, Path(tmp))
        big, parse_s = make_log(20_000, Path(tmp))
        mid, _ = make_log(5_000, Path(tmp))
        output_wall, output_cpu = asyncio.run(open_big_output(Path(tmp)))
    asyncio.run(first_paint(small))          # warm imports and the CSS once
    paint_small, cpu_small, mem_small = asyncio.run(first_paint(small))
    paint_big, cpu_big, mem_big = asyncio.run(first_paint(big))
    print(f"first paint, 100 messages: {paint_small:.3f} s ({cpu_small:.3f} s CPU, +{mem_small:.0f} MB)")
    print(f"first paint, 20,000 messages (parsed in {parse_s:.2f} s beforehand): {paint_big:.3f} s "
          f"({cpu_big:.3f} s CPU, +{mem_big:.0f} MB), {paint_big / paint_small:.2f}× the 100-message paint "
          f"({cpu_big / cpu_small:.2f}× in CPU)")
    for label, (wall, cpu) in asyncio.run(key_latency(big)).items():
        print(f"key → repaint at 20,000 messages, {label}: {wall:.1f} ms median of 25 ({cpu:.1f} ms CPU)")
    print(f"inspector opens a 10 MB tool output: {output_wall * 1000:.0f} ms ({output_cpu * 1000:.0f} ms CPU)")
    run_s, med, worst = jumps(mid)
    print(f"jump to a random turn of 5,000 messages: {med:.1f} ms CPU median, {worst:.1f} ms worst of 40 "
          f"(after the one simulation pass with checkpoints: {run_s:.2f} s, in a worker)")


if __name__ == "__main__":
    main()
