"""`make bench` (bench/run_all.py) runs every benchmark once, and only when run as a script: dask's
LocalCluster in bench_fidelity spawns its workers, and a spawned process imports the main script
again (as `__mp_main__`); before the guard, each worker ran the benchmarks from the start, beside
the parent's, and the cluster failed to start, so `make bench` ended in a traceback before bench_ui."""

from __future__ import annotations

import runpy
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"


def test_importing_the_runner_as_a_spawned_process_runs_no_benchmark():
    code = f"import runpy; runpy.run_path({str(BENCH / 'run_all.py')!r}, run_name='__mp_main__')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""


def test_the_runner_names_every_benchmark_in_the_folder():
    names = runpy.run_path(str(BENCH / "run_all.py"), run_name="run_all")["NAMES"]
    assert set(names) == {p.stem for p in BENCH.glob("bench_*.py")}


def test_a_benchmark_name_the_runner_does_not_know_is_refused_by_name():
    done = subprocess.run([sys.executable, str(BENCH / "run_all.py"), "bench_core", "bench_nope"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "no benchmark bench_nope" in done.stderr and done.stdout == ""
