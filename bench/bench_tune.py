"""Tuning benchmarks on a 5,000-message session (native, 31 MB): a threshold change in the workbench,
from the key to the repainted screen, back to back and with a pause before each key (while the
facts gauge is measured), and how fast keys are answered meanwhile; what A/B costs against two
plain simulations.

Prints figures; asserts nothing (targets live in issue 9, medians are quoted in notes).
"""

from __future__ import annotations

import asyncio
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
CHANGES = 7
PAUSE = 1.5   # issue 29 item 3: ≤ 0.5 s with back-to-back keys and with this pause between them


def big_session(tmp: Path):
    msgs = session_messages(5000, avg_tool_chars=15000, seed=42)
    return load_session(write_session(tmp / "big.jsonl", msgs, header={"window": WINDOW}))


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


async def until(pilot, condition, timeout: float = 120.0) -> None:
    # polled with a plain sleep: pilot.pause() queues a callback on every widget, which costs the
    # app more CPU than the polling is meant to measure
    t0 = time.perf_counter()
    while not condition():
        if time.perf_counter() - t0 > timeout:
            raise RuntimeError("the workbench did not get there in time")
        await asyncio.sleep(0.005)


async def threshold_changes(log, counter: str, pause: float = 0.0) -> tuple[list[float], list[float], list[float],
                                                                          list[float]]:
    """(seconds from a window key to the repainted screen, seconds to answer a key meanwhile,
    CPU seconds of the process over the same span, and of its main thread: the rest is the worker's).
    `pause`: seconds the user looks at the screen before each key (the facts gauge's measurement
    starts a second after a repaint, so a key after a pause meets it running)."""
    from breakwater.ui.app import make_app
    from breakwater.ui.config import UISettings
    from breakwater.ui.widgets.policy_panel import PolicyPanel

    app = make_app(log, PRESETS["breakwater"].with_changes(window=WINDOW), counter=counter, settings=UISettings())
    changes, answers, cpu, main_cpu = [], [], [], []
    async with app.run_test(size=(160, 50)) as pilot:
        screen = app.screen

        def repainted(window: int) -> bool:
            return (screen.replay.policy.window == window and screen.replay.simulation is not None
                    and screen.query_one("#timeline").simulation is screen.replay.simulation
                    and not screen.query_one("#controls").pending and screen.detail is not None)

        await until(pilot, lambda: repainted(WINDOW))
        await pilot.press("p")
        panel = screen.query_one(PolicyPanel)
        for _ in range(CHANGES):
            panel.select("window")
            await pilot.pause()
            await asyncio.sleep(pause)
            before = panel.policy.window
            # keys are posted as a terminal would send them: pilot.press() waits for the whole
            # process to go idle (up to 1 s twice), which a running worker never lets happen
            t0, c0, m0 = time.perf_counter(), time.process_time(), time.thread_time()
            app.simulate_key("left")
            await until(pilot, lambda: panel.policy.window != before)
            want = panel.policy.window
            await until(pilot, lambda: screen.replay.policy.window == want)  # the re-simulation has started
            row = panel.table.cursor_row
            t1 = time.perf_counter()
            app.simulate_key("down")  # a key while the session is re-simulated
            await until(pilot, lambda: panel.table.cursor_row == row + 1)
            answers.append(time.perf_counter() - t1)
            await until(pilot, lambda: repainted(want))
            await pilot.pause(0)
            changes.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
            main_cpu.append(time.thread_time() - m0)
    return changes, answers, cpu, main_cpu


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        log = big_session(Path(tmp))
    for counter, pause in (("heuristic", 0.0), ("exact", 0.0), ("heuristic", PAUSE), ("exact", PAUSE)):
        changes, answers, cpu, main_cpu = asyncio.run(threshold_changes(log, counter, pause))
        print(f"workbench, --counter {counter}, {pause:.1f} s between keys: window key -> list, gauges, inspector, "
              f"timeline repainted "
              f"{statistics.median(changes):.3f} s median of {CHANGES} ({statistics.median(cpu):.3f} s CPU, main thread "
              f"{statistics.median(main_cpu):.3f} s; "
              f"max {max(changes):.3f} s); a key answered during the re-simulation "
              f"{statistics.median(answers) * 1000:.0f} ms median (max {max(answers) * 1000:.0f} ms)")
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
