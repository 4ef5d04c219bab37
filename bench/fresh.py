"""A command as a user runs it: a fresh process, its own CPU time and peak resident memory.

A child's peak resident memory (ru_maxrss) starts from what its parent held when it was forked (Linux
carries the high-water mark across exec): spawned from a benchmark holding a 97 MB file and earlier
outputs, a child that printed one line was reported at 851 MB when the parent held 800. So the command
is started by a small launcher (a bare interpreter, ~10 MB) and its figures are its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

LAUNCHER = ("import os, sys\npid = os.fork()\nif pid == 0:\n    os.execv(sys.argv[2], sys.argv[2:])\n"
            "_, status, ru = os.wait4(pid, 0)\n"
            "open(sys.argv[1], 'w').write(f'{ru.ru_utime + ru.ru_stime} {ru.ru_maxrss}')\n"
            "sys.exit(os.waitstatus_to_exitcode(status))")


def measured(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float, float, str]:
    """(wall seconds, CPU seconds, peak RSS in MB, stdout) of one command, a fresh process."""
    with tempfile.NamedTemporaryFile("r") as figures:
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", LAUNCHER, figures.name, *cmd], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, env=env)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            raise RuntimeError(f"{cmd[:4]} exited {proc.returncode}")
        cpu, peak_kb = figures.read().split()
    return wall, float(cpu), int(peak_kb) / 1024, proc.stdout


def installed(cache: str) -> dict[str, str]:
    """The environment of a command run as an installed package runs it: its modules compiled once and
    kept in `cache` (PYTHONDONTWRITEBYTECODE, set on this machine, has every process compile each module
    it imports: 0.1 s more of start-up, and more for a reader that imports more modules), and a cache of
    the models' windows of its own (the shared one is rewritten by every install on the machine, each
    with its own key, and a process that finds it cold imports the price list: 0.14 s)."""
    env = dict(os.environ, XDG_CACHE_HOME=cache, PYTHONPYCACHEPREFIX=f"{cache}/pyc")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("BREAKWATER_CACHE_DIR", None)
    return env


def breakwater(*args: str) -> list[str]:
    return [sys.executable, "-m", "breakwater", *args]


def load_average() -> str:
    return f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
