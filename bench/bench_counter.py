"""The default counter and the memory of loading, as a user meets them (issue 29 items 1 and 5, issue 28
item 5): every figure a fresh process, the file as given.

1. `breakwater simulate FILE --json` with the default counter (exact counts wherever a verdict could
   change) beside `--counter heuristic`, on each bench input and the largest real transcript of each
   agent: on a first open (an empty count store) and a reopen (the store the first open filled); CPU
   medians, runs alternating; targets ≤ 1.5× and ≤ 1.1×. `breakwater tokens` of a one-line file: what
   loading the tokenizer costs a command. The floor under the default counter's first open on each
   input: the heuristic's time, plus counting once each text the default counter counts (the texts
   near a limit, as they are sent), plus loading the tokenizer.
2. Peak resident memory of `simulate --counter heuristic --json` on one 64,000-message session written
   as native JSONL, an OpenAI message array and a pi session, beside the file's size.

With BENCH_BASELINE=/path/to/an/older/checkout/app each figure is also taken from that tree (alternating
with this one), for a before/after table.

Prints figures; asserts nothing.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]

from format_sessions import openai, pi  # noqa: E402
from fresh import breakwater, installed, load_average, measured  # noqa: E402
from synth import session_messages, write_session  # noqa: E402

RUNS = 3


def trees() -> list[tuple[str, dict[str, str] | None]]:
    base = os.environ.get("BENCH_BASELINE")
    if not base:
        return [("", None)]
    return [("now ", None), ("before ", dict(os.environ, PYTHONPATH=base))]


def medians(cmds: list[list[str]], runs: int = RUNS, base: dict[str, str] | None = None
            ) -> list[dict[str, tuple[float, float]]]:
    """For each tree, for each command: (CPU, peak MB) medians over `runs`, every command and tree
    taking its turn in each round (`base`: the environment, the tree's PYTHONPATH added)."""
    got: dict[tuple[int, int], list[tuple[float, float, float, str]]] = {}
    for _ in range(runs):
        for t, (_, env) in enumerate(trees()):
            if base is not None:
                env = dict(base, **({"PYTHONPATH": env["PYTHONPATH"]} if env else {}))
            for c, cmd in enumerate(cmds):
                got.setdefault((t, c), []).append(measured(cmd, env))
    return [{str(c): (statistics.median(r[1] for r in got[t, c]), statistics.median(r[2] for r in got[t, c]))
             for c in range(len(cmds))} for t in range(len(trees()))]


REAL = HERE.parent / "tests" / "fixtures" / "real"


def real_transcripts() -> list[Path]:
    """The largest real transcript of each agent in the fixtures."""
    return [max((p for p in d.iterdir()), key=lambda p: p.stat().st_size) for d in sorted(REAL.iterdir()) if d.is_dir()]


def opens(path: Path, tmp: Path, runs: int = RUNS) -> list[dict[str, tuple[float, float]]]:
    """For each tree: CPU and peak MB medians of `simulate FILE --json` with the heuristic, with the default
    counter on a first open (an empty count store) and on a reopen (the store the first open filled).
    Fresh processes as an installed package runs them (compiled modules kept: fresh.installed), each
    tree and kind taking its turn in every round."""
    got: dict[tuple[int, str], list] = {}
    for _ in range(runs):
        for t, (_, tree_env) in enumerate(trees()):
            env = installed(str(tmp / f"cache-{t}"))
            if tree_env is not None:
                env["PYTHONPATH"] = tree_env["PYTHONPATH"]
            store = tmp / f"cache-{t}" / "breakwater"
            for kind, args in (("heuristic", ["--counter", "heuristic"]), ("first", []), ("reopen", [])):
                if kind == "first":
                    for old in store.glob("counts.sqlite3*"):
                        old.unlink()
                got.setdefault((t, kind), []).append(measured(breakwater("simulate", str(path), "--json", *args), env))
    return [{kind: (statistics.median(r[1] for r in got[t, kind]), statistics.median(r[2] for r in got[t, kind]))
             for kind in ("heuristic", "first", "reopen")} for t in range(len(trees()))]


def counters(tmp: Path) -> None:
    print(f"simulate FILE --json, the default counter beside --counter heuristic: CPU s (peak MB), medians of {RUNS}, "
          f"fresh processes alternating; first open (empty count store) target ≤ 1.5×, reopen ≤ 1.1×")
    bench = session_messages(5000, avg_tool_chars=15000, seed=42)
    inputs = [write_session(tmp / "bench-5k.jsonl", bench), openai(bench, tmp / "bench-5k.openai.json"),
              write_session(tmp / "chat-20k.jsonl", session_messages(20000, avg_tool_chars=2000, seed=7))]
    inputs += real_transcripts()
    floors = []
    for path in inputs:
        size = path.stat().st_size / 1e6
        figures = opens(path, tmp)
        floors.append((path, figures[0]["heuristic"][0]))
        for (label, _), f in zip(trees(), figures):
            (heur, heur_mb), (first, first_mb), (again, again_mb) = f["heuristic"], f["first"], f["reopen"]
            print(f"  {label}{path.name[:44]} ({size:.1f} MB): heuristic {heur:.2f} s ({heur_mb:.0f} MB); default "
                  f"first open {first:.2f} s ({first_mb:.0f} MB) {first / heur:.2f}×, reopen {again:.2f} s "
                  f"({again_mb:.0f} MB) {again / heur:.2f}×")
    small = tmp / "one-line.txt"
    small.write_text("hello world\n", encoding="utf-8")
    env = dict(os.environ, BREAKWATER_COUNT_CACHE="off")
    for (label, _), f in zip(trees(), medians([breakwater("tokens", str(small))], 5, env)):
        print(f"  {label}breakwater tokens of a one-line file (loading the tokenizer): {f['0'][0]:.2f} s CPU "
              f"(median of 5)")
    print("  the floor under the default counter on a first open: the heuristic's time, plus counting once each "
          "text it must count (near a limit, sent), plus loading the tokenizer")
    for path, heuristic in floors[:3]:
        chars, encoding, load = encoded(path)
        low = heuristic + encoding + load
        print(f"    {path.name}: {heuristic:.2f} + {encoding:.2f} s ({chars / 1e6:.1f} M chars) + {load:.2f} s = "
              f"{low:.2f} s CPU, {low / heuristic:.2f}× the heuristic")


# In one process, with no count store: simulate with the default counter, keeping each text the tokenizer
# counted; then the CPU time of counting those texts alone, medians of 3
ENCODED = """
import contextlib, io, os, statistics, sys, time
os.environ["BREAKWATER_COUNT_CACHE"] = "off"
from breakwater.cli import build_parser, wanted_command
from breakwater.core.log import tokens
texts, counts, tokenized = [], [], tokens.TokenCounter._tokenized
def keeping(self, text):
    texts.append(text)
    counts[:] = [self._counter()]
    return tokenized(self, text)
tokens.TokenCounter._tokenized = keeping
loading, get_count = [], tokens.get_count
def timed(name):
    t = time.process_time()
    try:
        return get_count(name)
    finally:
        loading.append(time.process_time() - t)
tokens.get_count = timed
argv = ["simulate", sys.argv[1], "--json"]
args = build_parser(wanted_command(argv)).parse_args(argv)
with contextlib.redirect_stdout(io.StringIO()):
    args.func(args)
runs = []
for _ in range(3):
    t = time.process_time()
    for text in texts:
        for piece in tokens.pieces(text):
            counts[0](piece)
    runs.append(time.process_time() - t)
print(sum(map(len, texts)), statistics.median(runs), loading[0] if loading else 0.0)
"""


def encoded(path: Path) -> tuple[int, float, float]:
    """(characters, CPU seconds) of encoding once each text `simulate` with the default counter encodes,
    and the CPU seconds its tokenizer took to load (imports included)."""
    chars, seconds, load = measured([sys.executable, "-c", ENCODED, str(path)])[3].split()
    return int(chars), float(seconds), float(load)


def footprint(tmp: Path) -> None:
    msgs = session_messages(64000, avg_tool_chars=1500, seed=5)
    files = [write_session(tmp / "s64k.jsonl", msgs), openai(msgs, tmp / "s64k.openai.json"),
             pi(msgs, tmp / "s64k.pi.jsonl")]
    print(f"simulate --counter heuristic --json, one 64,000-message session in three formats: peak resident "
          f"memory (median of {RUNS}) beside the file; target ≤ ~2× the file")
    figures = medians([breakwater("simulate", str(p), "--json", "--counter", "heuristic") for p in files])
    for (label, _), f in zip(trees(), figures):
        for c, path in enumerate(files):
            size = path.stat().st_size / 1e6
            cpu, peak = f[str(c)]
            print(f"  {label}{path.name:<17} {size:5.1f} MB: peak {peak:4.0f} MB ({peak / size:.1f}× the file), "
                  f"{cpu:.2f} s CPU")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        counters(Path(tmp))
        footprint(Path(tmp))
    print(f"  ({load_average()})")


if __name__ == "__main__":
    main()
