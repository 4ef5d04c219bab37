"""`breakwater eval` beside `breakwater simulate` of the same session and policy (issue 24: eval
within 2x simulate): CPU seconds of fresh processes, the two alternating, medians, on the bench
session (tests/synth 5,000 messages of 15,000 chars, seed 42), generated sessions of 1k, 4k and
16k messages and every real transcript of the shared fixtures.

    bench/bench_fidelity_eval.py [--runs N] [--only SUBSTRING] [--old PYTHONPATH] [--bytecode]

`--old DIR` times a second tree too (`git worktree add --detach /tmp/old c656c72`, then
`--old /tmp/old/app`), its runs alternating with this one's. `--bytecode`: the processes keep
compiled modules in a cache of this run's own, as an installed package has them, even where
PYTHONDONTWRITEBYTECODE is set (else each compiles every module it imports, start-up a user does
not pay). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fresh import installed  # noqa: E402
from synth import session_messages, write_session  # noqa: E402

from breakwater.core.policy import DEFAULT_PRESET  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "real"   # the real transcripts the tests use


def child_cpu(args: list[str], pythonpath: str | None, cache: str, bytecode: bool = False) -> float:
    """CPU seconds of one `breakwater` command in a fresh process, as a user runs it. `cache`: a cache
    folder of this run's own (the models' windows; the shared one is rewritten by every install on the
    machine, each with its own key, so a run would find it cold); with `bytecode`, compiled modules are
    kept there too."""
    if bytecode:
        env = installed(cache)
    else:
        env = dict(os.environ, XDG_CACHE_HOME=cache)
        env.pop("BREAKWATER_CACHE_DIR", None)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-m", "breakwater", *args], check=True, capture_output=True, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def sessions(folder: Path) -> list[tuple[str, str]]:
    out = []
    path = write_session(folder / "bench.jsonl", session_messages(5000, avg_tool_chars=15000, seed=42))
    out.append(("bench session (5,000 messages, 15k chars)", str(path)))
    for n in (1_000, 4_000, 16_000):
        path = write_session(folder / f"s{n}.jsonl", session_messages(n, avg_tool_chars=2000, seed=n),
                             header={"window": 128_000})
        out.append((f"generated {n:,} messages", str(path)))
    if FIXTURES.is_dir():
        for f in sorted(FIXTURES.rglob("*")):
            if f.is_file() and f.name.endswith((".jsonl", ".json", ".traj")):
                out.append((f"{f.parent.name}/{f.name}", str(f)))
    return out


def main(argv: list[str] | None = None) -> None:
    """`make bench` calls main() with its own command line: the defaults then, not its arguments."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", default="")
    ap.add_argument("--old", help="PYTHONPATH of an older tree to time alongside")
    ap.add_argument("--bytecode", action="store_true", help="keep compiled modules, as an installed package has them")
    args = ap.parse_args([] if argv is None else argv)
    trees = [("new", None)] + ([("old", args.old)] if args.old else [])
    with tempfile.TemporaryDirectory() as tmp:
        for label, path in sessions(Path(tmp)):
            if args.only not in label:
                continue
            ev = ["eval", path, "--presets", DEFAULT_PRESET, "--counter", "heuristic", "--jobs", "1", "--json"]
            sim = ["simulate", path, "--counter", "heuristic", "--json"]
            times: dict[tuple[str, str], list[float]] = {}
            for tree, pythonpath in trees:   # warm each tree's cache of the session's model (and bytecode)
                for cmd in (sim, ev) if args.bytecode else (sim,):
                    child_cpu(cmd, pythonpath, f"{tmp}/cache-{tree}", args.bytecode)
            for _ in range(args.runs):
                for tree, pythonpath in trees:
                    for name, cmd in (("eval", ev), ("simulate", sim)):
                        times.setdefault((tree, name), []).append(
                            child_cpu(cmd, pythonpath, f"{tmp}/cache-{tree}", args.bytecode))
            med = {k: statistics.median(v) for k, v in times.items()}
            line = f"{label}: "
            line += "; ".join(f"{tree} eval {med[tree, 'eval']:.2f} s, simulate {med[tree, 'simulate']:.2f} s "
                              f"({med[tree, 'eval'] / med[tree, 'simulate']:.2f}x)" for tree, _ in trees)
            print(line + f" (CPU, median of {args.runs}{', bytecode kept' if args.bytecode else ''})", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
