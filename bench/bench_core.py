"""Core benchmarks: pipeline over a 5,000-message ~30 MB session, one more turn, counting speed.

Prints figures; asserts nothing (targets live in the issue, medians are quoted in notes).
"""

from __future__ import annotations

import ast
import gc
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from synth import session_messages, write_session  # noqa: E402

from breakwater.core.log import outcome  # noqa: E402
from breakwater.core.log.message import Message, ToolCall, text_copy  # noqa: E402
from breakwater.core.fold.pipeline import Pipeline  # noqa: E402
from breakwater.core.policy import PRESETS  # noqa: E402
from breakwater.core.stages.sanitize import sanitize  # noqa: E402
from breakwater.core.simulate import make_pipeline, simulate  # noqa: E402
from breakwater.core.log.tokens import TokenCounter, heuristic_message, heuristic_text  # noqa: E402
from breakwater.formats import load_session  # noqa: E402

WINDOW = 128_000


def median_of(fn, runs: int) -> float:
    return statistics.median(fn() for _ in range(runs))


def main() -> None:
    msgs = session_messages(5000, avg_tool_chars=15000, seed=42)
    size = sum(len(m.content.encode()) for m in msgs)
    with tempfile.TemporaryDirectory() as tmp:
        path = write_session(Path(tmp) / "big.jsonl", msgs, header={"window": WINDOW})
        t0 = time.perf_counter()
        log = load_session(path)
        load_s = time.perf_counter() - t0
        turns = log.turn_count()
        print(f"session: {len(msgs):,} messages, {size / 1e6:.1f} MB of content, {turns:,} turns; load {load_s:.2f} s")

        for name, base in PRESETS.items():
            policy = base.with_changes(window=WINDOW)
            runs = []
            for _ in range(6):
                t0 = time.process_time()
                sim = simulate(log, policy, counter="heuristic")
                runs.append((sim.seconds, time.process_time() - t0))
            warm = runs[1:]   # the first fills the caches a re-simulation of the session reuses
            print(f"simulate --counter heuristic --preset {name:<10}: {statistics.median(r[0] for r in warm):.3f} s pipeline, "
                  f"{statistics.median(r[1] for r in warm):.3f} s CPU (median of 5, warm process; "
                  f"{len(sim.compactions)} deep compactions, billed {sim.billed_raw:,} -> {sim.billed_sent:,})")
        print(f"one-shot `breakwater simulate SESSION --counter heuristic --json --preset P`, each in a fresh process "
              f"(median of {FRESH_RUNS}; CPU / wall seconds; start-up: the interpreter and every import, up to the "
              f"moment the command starts reading the session; target: ≤ 0.3 s of pipeline beyond it):")
        for name in PRESETS:
            f = _fresh_command(path, name)
            print(f"  {name:<10}: start-up {f['startup'][0]:.3f} / {f['startup'][1]:.3f}, "
                  f"beyond it {f['beyond'][0]:.3f} / {f['beyond'][1]:.3f} = reading the session "
                  f"{f['read'][0]:.3f} / {f['read'][1]:.3f} + pipeline and output {f['pipeline'][0]:.3f} / "
                  f"{f['pipeline'][1]:.3f} + exit {f['exit'][0]:.3f} / {f['exit'][1]:.3f}; "
                  f"load average {os.getloadavg()[0]:.1f}")

    policy = PRESETS["breakwater"].with_changes(window=WINDOW)
    print(f"entering its {len(msgs):,} messages in the ledger, each counted at every stage level as a first "
          f"simulation does (breakwater): {_ledger_entry(log, policy):.3f} s CPU (median of 5)")
    # the straight recompute a port of the seeds would do: a fresh pipeline over each turn's prefix
    entries = log.entries
    cuts = [i for i, e in enumerate(entries) if isinstance(e, Message) and e.role == "assistant"]
    probe = cuts[:: max(1, len(cuts) // 12)]
    t0 = time.perf_counter()
    for i in probe:
        p = Pipeline(policy)
        p.feed_all(entries[:i])
        p.plan()
    naive = (time.perf_counter() - t0) / len(probe) * len(cuts)
    print(f"straight per-turn recompute (fresh pipeline per turn, breakwater): ~{naive:.1f} s "
          f"(extrapolated from {len(probe)} turns)")
    # the tokenizer's own figures: no count store (bench_counter times first opens and reopens with it)
    sim = simulate(log, policy, counter="exact", tokens=TokenCounter("o200k_base", store=False))  # warm its load
    counter_probe = TokenCounter("o200k_base", store=False)
    t0 = time.perf_counter()
    pipe = make_pipeline(log, policy, "exact", tokens=TokenCounter("o200k_base", store=False))
    for e in log.entries:
        if isinstance(e, Message) and e.role == "assistant":
            pipe.plan()
        pipe.feed(e)
    exact_s = time.perf_counter() - t0
    counted = pipe.counter.tokenized_chars
    sample = "".join(m.content for m in msgs)[:counted] if counted else ""
    t0 = time.perf_counter()
    counter_probe.exact_text(sample) if sample else None
    one_pass = time.perf_counter() - t0
    print(f"simulate --counter exact (breakwater): {exact_s:.3f} s; tiktoken encoded {counted / 1e6:.2f} M chars "
          f"({counted / max(size, 1):.0%} of the content; one tiktoken pass over that much text: {one_pass:.3f} s)")

    # one more turn on the big session
    pipe = Pipeline(policy)
    pipe.feed_all(log.entries)
    pipe.plan()
    samples = []
    for k in range(200):
        call = ToolCall(f"bench_{k}", "bash", '{"command": "pytest -q"}')
        pipe.feed(Message(f"b{k}a", "assistant", "Running the tests again.", (call,)))
        pipe.feed(Message(f"b{k}t", "tool", "collected 212 items\n" + "." * 3000 + "\n212 passed", tool_call_id=call.id))
        t0 = time.perf_counter()
        pipe.plan()
        samples.append(time.perf_counter() - t0)
    print(f"one more turn (plan) on the 5,000-message session: {statistics.median(samples) * 1000:.3f} ms median "
          f"(p95 {sorted(samples)[int(len(samples) * 0.95)] * 1000:.3f} ms)")
    t0 = time.perf_counter()
    view = pipe.materialize(pipe.plan())
    print(f"materialize that request ({len(view.messages)} messages): {(time.perf_counter() - t0) * 1000:.2f} ms")

    # sanitize: a run of same-role messages merges in linear time
    for count in (100_000, 1_000_000):
        run = [Message(f"u{i}", "user", "one more note from the user") for i in range(count)]
        t0 = time.perf_counter()
        out, _ = sanitize(run)
        print(f"sanitize {count:,} same-role messages: {time.perf_counter() - t0:.2f} s ({len(out)} message out)")
        del run, out

    # heuristic counting speed: a long text is measured once and found again by its identity, so each
    # run counts a new copy (the first count of a text, as a session's first simulation makes it)
    mixed = "".join(m.content for m in msgs)
    mixed_mb = len(mixed.encode()) / 1e6
    dt = median_of(lambda: _timed(heuristic_text, text_copy(mixed)), 5)
    print(f"heuristic count, the whole session as one text ({mixed_mb:.0f} MB, mixed ASCII/CJK), first count: "
          f"{mixed_mb / 1e3 / dt:.2f} GB/s")
    dt = median_of(lambda: _timed(lambda ms: [heuristic_message(m) for m in ms],
                                  [replace(m, content=text_copy(m.content)) for m in msgs]), 5)
    print(f"heuristic count, per message over the session, first count: {mixed_mb / 1e3 / dt:.2f} GB/s")
    cjk = ("连接池超时，请检查配置。" * 200_000 + "timeout ok " * 100_000)
    cjk_mb = len(cjk.encode()) / 1e6
    dt = median_of(lambda: _timed(heuristic_text, text_copy(cjk)), 5)
    print(f"heuristic count, CJK-heavy text ({cjk_mb:.0f} MB), first count: {cjk_mb / 1e3 / dt:.2f} GB/s")
    c = TokenCounter("o200k_base")
    m = msgs[5]
    c.exact_message(m)
    hit = median_of(lambda: _timed(c.exact_message, m), 101)
    print(f"exact count of an unchanged message (cache hit): {hit * 1e6:.2f} µs")


FRESH_RUNS = 5
# The command as the console script runs it (`cli.run`: `main()`, then `leave`, which ends a one-shot
# command's process once its output is flushed), marking (CPU, wall) when it starts reading the
# session, when it has read it and when `main()` is done; the wrapper only reads clocks. A tree from
# before `leave` (an A/B against an older commit) ends as its console script did.
FRESH = """import os, sys, time
from breakwater import cli
from breakwater.cli import core as commands
marks = {}
read = commands.read_session
def marked(*args, **kwargs):
    marks["read"] = (time.process_time(), time.time())
    log = read(*args, **kwargs)
    marks["pipeline"] = (time.process_time(), time.time())
    return log
commands.read_session = marked
sys.stdout = open(os.devnull, "w")
code = cli.main()
marks["end"] = (time.process_time(), time.time())
print(repr(marks), file=sys.stderr)
sys.exit(getattr(cli, "leave", int)(code))
"""


def _fresh_command(path: Path, preset: str) -> dict[str, tuple[float, float]]:
    """Median (CPU, wall) seconds of each phase of the one-shot command, over FRESH_RUNS fresh processes:
    start-up (the interpreter and the imports, until the session starts being read), reading it,
    the pipeline and the JSON output, and exit (flushing, and the kernel's freeing of the process's
    memory; the interpreter frees nothing for a one-shot command); `beyond` is all but start-up."""
    phases: dict[str, list[tuple[float, float]]] = {}
    for _ in range(FRESH_RUNS):
        t0 = time.time()
        proc = subprocess.Popen([sys.executable, "-c", FRESH, "simulate", str(path), "--counter", "heuristic",
                                 "--json", "--preset", preset], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True)
        err = proc.stderr.read()
        _, status, usage = os.wait4(proc.pid, 0)
        t_end, cpu_end = time.time(), usage.ru_utime + usage.ru_stime
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError(f"simulate --preset {preset} failed: {err[-500:]}")
        marks = ast.literal_eval(err.strip().splitlines()[-1])
        (c_read, w_read), (c_pipe, w_pipe), (c_done, w_done) = marks["read"], marks["pipeline"], marks["end"]
        for name, value in (("startup", (c_read, w_read - t0)), ("read", (c_pipe - c_read, w_pipe - w_read)),
                            ("pipeline", (c_done - c_pipe, w_done - w_pipe)),
                            ("exit", (cpu_end - c_done, t_end - w_done)),
                            ("beyond", (cpu_end - c_read, t_end - w_read))):
            phases.setdefault(name, []).append(value)
    return {name: (statistics.median(v[0] for v in values), statistics.median(v[1] for v in values))
            for name, values in phases.items()}


def _ledger_entry(log, policy) -> float:
    """CPU seconds of a pipeline's first `sync` over the session, from texts no cache has seen."""
    runs = []
    for _ in range(5):
        # new text objects, so that no cache kept by a text's identity answers (the exit statuses and
        # error lines among them); the parsed arguments are kept by their text
        entries = [e.with_content(e.content[:1] + e.content[1:]) if isinstance(e, Message) else e
                   for e in log.entries]
        outcome._parse_cached.cache_clear()
        pipe = Pipeline(policy)
        pipe.feed_all(entries)
        gc.disable()   # as the command runs
        t0 = time.process_time()
        pipe.sync()
        runs.append(time.process_time() - t0)
        gc.enable()
    return statistics.median(runs)


def _timed(fn, arg) -> float:
    t0 = time.perf_counter()
    fn(arg)
    return time.perf_counter() - t0


if __name__ == "__main__":
    main()
