"""Command-line start-up: each command against `python -c pass` (issue 7 item 14: ≤ 150 ms).

Prints medians of wall time and of CPU time (user + system of the child: the machine is shared,
so wall time mostly measures the wait for a core); asserts nothing.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNS = 7


def median_run(argv: list[str], cwd: str, env: dict[str, str]) -> tuple[float, float]:
    """Median wall and CPU seconds of running argv."""
    wall, cpu = [], []
    for _ in range(RUNS):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        wall.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(wall), statistics.median(cpu)


def main() -> None:
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        session = Path(tmp) / "tiny.jsonl"
        session.write_text("\n".join(json.dumps(r) for r in (
            {"type": "session", "id": "tiny", "window": 32000},
            {"type": "message", "id": "m1", "role": "user", "content": "hello"},
            {"type": "message", "id": "m2", "role": "assistant", "content": "hi"})) + "\n")
        (Path(tmp) / "notes.txt").write_text("a plain text file\n" * 50)
        env = dict(os.environ, BREAKWATER_CACHE_DIR=str(Path(tmp) / "cache"), HOME=tmp)
        bw = [py, "-m", "breakwater"]
        base, base_cpu = median_run([py, "-c", "pass"], tmp, env)
        print(f"python -c pass: {base * 1000:.0f} ms wall, {base_cpu * 1000:.0f} ms CPU (medians of {RUNS})")
        subprocess.run(bw + ["tokens", "notes.txt"], cwd=tmp, env=env, capture_output=True)  # seed the BPE cache
        for label, argv in (
                ("--version", ["--version"]),
                ("simulate (heuristic, tiny session)", ["simulate", str(session), "--counter", "heuristic", "--json"]),
                ("simulate --help", ["simulate", "--help"]),
                ("tokens --model unknown (heuristic only)", ["tokens", "notes.txt", "--model", "unknown"]),
                ("tokens (text file, loads the o200k tokenizer)", ["tokens", "notes.txt", "--json"]),
                ("tool read_file", ["tool", "read_file", "notes.txt", "--workspace", tmp]),
                ("memory show", ["memory", "show", "--workspace", tmp])):
            t, c = median_run(bw + argv, tmp, env)
            print(f"breakwater {label}: {t * 1000:.0f} ms wall, {c * 1000:.0f} ms CPU; "
                  f"{(t - base) * 1000:.0f} / {(c - base_cpu) * 1000:.0f} ms over python -c pass")


if __name__ == "__main__":
    main()
