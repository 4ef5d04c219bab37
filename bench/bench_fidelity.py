"""Fidelity benchmark: the workbench gauge's replay of one session; `eval` of one preset at 1k, 4k
and 16k generated messages beside `simulate` of the same session (the growth ratio printed: linear
is 4x the time for 4x the messages); the facts gauge on the 20,000-message bench session;
`breakwater eval` as a user runs it on a corpus holding one large session, every preset, 1 and 2
workers and a 2-worker Dask LocalCluster (issue 29 item 2: >= 1.7x with 2).

Prints figures; asserts nothing.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from fresh import installed  # noqa: E402
from synth import session_messages, write_session  # noqa: E402

from breakwater.core.policy import DEFAULT_PRESET, PRESETS
from breakwater.fidelity.runner import Corpus, evaluate_path, policy_for, replay, run_dask, run_local, task

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_sessions"
GAUGE_SESSIONS = (SAMPLES / "long-refactor.jsonl", ROOT / "tests/fixtures/real/pi/large-session.jsonl")
SESSIONS = 200


def make_variants(folder: Path, n: int) -> list[str]:
    """Each sample in turn, cut after 50-100% of its lines, with its own id: 200 different sessions."""
    samples = sorted(SAMPLES.glob("*.jsonl"))
    lines = {p: p.read_text(encoding="utf-8").splitlines() for p in samples}
    out = []
    for i in range(n):
        src = samples[i % len(samples)]
        head, *body = lines[src]
        header = json.loads(head)
        header["id"] = f"{header.get('id', 'session')}-{i:03d}"
        keep = len(body) * (50 + (i * 37) % 51) // 100
        path = folder / f"{i:03d}-{src.name}"
        path.write_text("\n".join([json.dumps(header, ensure_ascii=False), *body[:keep]]) + "\n", encoding="utf-8")
        out.append(str(path))
    return out


def timed(results) -> tuple[float, Corpus]:
    corpus = Corpus((DEFAULT_PRESET,))
    t0 = time.perf_counter()
    for s in results:
        corpus.add(s)
    return time.perf_counter() - t0, corpus


def gauge() -> None:
    """The workbench's fidelity gauge: one replay of a session under the default preset, in a worker."""
    from breakwater.formats import load_session

    for path in GAUGE_SESSIONS:
        log = load_session(path)
        policy = policy_for(DEFAULT_PRESET, log, None)
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            run = replay(log, policy)
            times.append(time.perf_counter() - t0)
        print(f"fidelity gauge, {path.name} ({len(log.messages):,} messages, {run.turns} turns, "
              f"{len(run.probes)} facts): median {statistics.median(times) * 1000:.0f} ms of 5")


def eval_command(args: list[str], cache: str) -> tuple[float, str]:
    """Wall seconds and output of one `breakwater eval` in a fresh process, as an installed package
    runs (`fresh.installed`)."""
    env = installed(cache)
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "breakwater", "eval", *args], capture_output=True, text=True,
                         check=True, env=env).stdout
    return time.perf_counter() - t0, out


def small_corpus(folder: Path) -> str:
    """7 sessions: the samples, pi's large real session and one of 6,000 generated messages."""
    write_session(folder / "large.jsonl", session_messages(6000, avg_tool_chars=3000, seed=7), header={"window": 32000})
    for path in [*SAMPLES.glob("*.jsonl"), ROOT / "tests/fixtures/real/pi/large-session.jsonl"]:
        shutil.copy(path, folder / path.name)
    return "one of 6,000 messages (9 MB)"


def issue_corpus(folder: Path) -> str:
    """43 sessions, as the issue measured on: every real fixture, the samples, sessions of 300, 600 and
    1,200 generated messages in each of the 8 formats the importers read, one of 2,400 and one of 6,000."""
    from format_sessions import WRITERS

    small_corpus(folder)
    (folder / "large-session.jsonl").unlink()   # among the real fixtures below
    for path in sorted((ROOT / "tests/fixtures/real").glob("*/*")):
        if path.is_file() and path.name != "SOURCES.md":
            shutil.copy(path, folder / f"real-{path.parent.name}-{path.name}")
    for k, (name, (suffix, write)) in enumerate(sorted(WRITERS.items())):
        for j, n in enumerate((300, 600, 1200)):
            write(session_messages(n, avg_tool_chars=2000, seed=100 + 3 * k + j), folder / f"{name}-{n}{suffix}")
    write_session(folder / "native-2400.jsonl", session_messages(2400, avg_tool_chars=2000, seed=99))
    return "every format, real and generated, one of 6,000 messages"


def one_large_session(runs: int = 3) -> None:
    """`breakwater eval DIR --json --counter heuristic` (all presets), fresh processes, wall clock
    (parallel work is what is measured), runs alternating between 1 and 2 workers, on a corpus of 7
    sessions and on one of the issue's size (43). The start-up of each way is timed apart: an eval of
    one small session (with --dask, most of it is importing distributed: 0.3 s)."""
    try:
        from distributed import LocalCluster
    except ImportError:
        LocalCluster = None
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, host="127.0.0.1", dashboard_address=":0") \
        if LocalCluster else None
    try:
        for build in (small_corpus, issue_corpus):
            with tempfile.TemporaryDirectory() as tmp:
                folder = Path(tmp) / "corpus"
                folder.mkdir()
                what = build(folder)
                _eval_ways(folder, what, f"{tmp}/cache", cluster, runs)
    finally:
        if cluster is not None:
            cluster.close()


def _eval_ways(folder: Path, what: str, cache: str, cluster, runs: int) -> None:
    small = str(folder / "sanitizer-mess.jsonl")
    n = len(list(folder.iterdir()))
    args = [str(folder), "--json", "--counter", "heuristic"]
    times: dict[str, list[float]] = {"1": [], "2": [], "dask": []}
    starts: dict[str, list[float]] = {"1": [], "dask": []}
    outs = set()
    ways = {"1": ["--jobs", "1"], "2": ["--jobs", "2"]}
    if cluster is not None:
        ways["dask"] = ["--dask", cluster.scheduler_address]
    loads = []
    for flags in ways.values():   # compiles the modules, fills the models' cache, imports in the workers
        eval_command(args + flags, cache)
    for _ in range(runs):
        for way, flags in ways.items():
            loads.append(os.getloadavg()[0])
            seconds, out = eval_command(args + flags, cache)
            times[way].append(seconds)
            outs.add(out)
            if way in starts:
                starts[way].append(eval_command([small, "--json", "--counter", "heuristic", *flags], cache)[0])
    one = statistics.median(times["1"])
    line = (f"eval of {n} sessions ({what}), all {len(PRESETS)} presets, --counter heuristic, fresh process, "
            f"bytecode kept (wall, median of {runs}): --jobs 1 {one:.2f} s, --jobs 2 "
            f"{statistics.median(times['2']):.2f} s ({one / statistics.median(times['2']):.2f}×)")
    if times["dask"]:
        line += (f", --dask LocalCluster of 2 {statistics.median(times['dask']):.2f} s "
                 f"({one / statistics.median(times['dask']):.2f}×)")
    line += f"; start-up (eval of one small session): local {statistics.median(starts['1']):.2f} s"
    if starts["dask"]:
        line += f", --dask {statistics.median(starts['dask']):.2f} s"
    print(line + f"; identical output: {len(outs) == 1}; load average {min(loads):.1f}-{max(loads):.1f}")


def generated(n: int, folder: Path, window: int = 128_000):
    """The bench session of `n` messages (bench_ui's: tool outputs of 2,000 chars on average)."""
    from breakwater.formats import load_session

    path = write_session(folder / f"s{n}.jsonl", session_messages(n, avg_tool_chars=2000, seed=n),
                         header={"window": window})
    return load_session(path)


def cpu(fn) -> float:
    c0 = time.process_time()
    fn()
    return time.process_time() - c0


def child_cpu(*args: str) -> float:
    """CPU seconds of one `breakwater` command in a fresh process, as a user runs it."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-m", "breakwater", *args], check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def eval_growth() -> None:
    """`breakwater eval` of one preset at 1k, 4k and 16k generated messages beside `breakwater
    simulate` of the same file, heuristic counter, fresh processes, CPU seconds (median of 3)."""
    with tempfile.TemporaryDirectory() as tmp:
        before = None
        for n in (1_000, 4_000, 16_000):
            path = str(write_session(Path(tmp) / f"s{n}.jsonl", session_messages(n, avg_tool_chars=2000, seed=n),
                                     header={"window": 128_000}))
            ev = statistics.median(child_cpu("eval", path, "--presets", DEFAULT_PRESET, "--counter", "heuristic",
                                             "--jobs", "1", "--json") for _ in range(3))
            sim = statistics.median(child_cpu("simulate", path, "--counter", "heuristic", "--json") for _ in range(3))
            growth = f"; {ev / before:.2f}x the time of 4x fewer messages" if before else ""
            print(f"eval --presets {DEFAULT_PRESET} --counter heuristic, generated {n:,} messages (native JSONL): "
                  f"{ev:.2f} s CPU, {ev / sim:.2f}x simulate's {sim:.2f} s{growth}")
            before = ev


def facts_gauge() -> None:
    """The workbench's facts gauge on the 20,000-message bench session (bench_ui's), as its worker
    measures it: the default preset at the session's window, the exact counter."""
    with tempfile.TemporaryDirectory() as tmp:
        log = generated(20_000, Path(tmp))
        policy = policy_for(DEFAULT_PRESET, log, None)
        t0 = time.perf_counter()
        took = cpu(lambda: replay(log, policy, "exact"))
        wall = time.perf_counter() - t0
        print(f"facts gauge, generated 20,000 messages (native JSONL, window {policy.window:,}): {wall:.1f} s "
              f"({took:.1f} s CPU) to the figure")


def main() -> None:
    gauge()
    one_large_session()
    eval_growth()
    facts_gauge()
    fn = task([DEFAULT_PRESET])
    with tempfile.TemporaryDirectory() as tmp:
        paths = make_variants(Path(tmp), SESSIONS)
        per_session = []
        for p in paths[:25]:
            t0 = time.perf_counter()
            evaluate_path(p, sorted(PRESETS))
            per_session.append(time.perf_counter() - t0)
        print(f"one session, all {len(PRESETS)} presets: median {statistics.median(per_session) * 1000:.0f} ms "
              f"(of 25; max {max(per_session) * 1000:.0f} ms, the 177-turn long refactor); "
              f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        figures = {}
        for jobs in (1, 2):
            seconds, corpus = timed(run_local(paths, fn, jobs))
            figures[jobs] = corpus
            turns = sum(s.turns for s in corpus.sessions)
            print(f"eval --presets {DEFAULT_PRESET} --jobs {jobs}: {SESSIONS} sessions ({turns:,} turns) in {seconds:.1f} s = "
                  f"{SESSIONS / seconds:.1f} sessions/s")
        same = figures[1].to_json(paths) == figures[2].to_json(paths)
        print(f"--jobs 1 and --jobs 2 give identical figures: {same}")
        try:
            from distributed import LocalCluster
        except ImportError:
            print("dask: distributed not installed (pip install 'breakwater[cluster]')")
            return
        with LocalCluster(n_workers=2, threads_per_worker=1, host="127.0.0.1", dashboard_address=":0") as cluster:
            seconds, corpus = timed(run_dask(paths, fn, cluster.scheduler_address))
        print(f"eval --dask (LocalCluster, 2 workers): {SESSIONS / seconds:.1f} sessions/s; "
              f"identical figures: {corpus.to_json(paths) == figures[1].to_json(paths)}")


if __name__ == "__main__":
    main()
