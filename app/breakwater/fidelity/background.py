"""The workbench's facts gauge, measured in a process of its own.

It replays every request of the session. In a thread it shared the GIL with the screen: a key
pressed while it ran waited for it (a window change repainted in 0.98 s after a pause, 0.47 s back
to back). In a child process at the lowest CPU priority it takes no time from the screen's
process, and it is stopped (SIGSTOP) while the user is at the keys and continued after.

The child is `python -m breakwater.fidelity.background`: the session goes down its stdin as pickled
chunks and the FidelityRun comes back on its stdout (the same objects `replay` returns in-process).
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import subprocess
import sys
from typing import Callable

from breakwater.core.policy import Policy
from breakwater.core.log.session_log import SessionLog
from breakwater.fidelity.results import FidelityRun
from breakwater.fidelity.runner import Stopped, replay

NICE = 19
CHUNK = 256   # entries pickled at a time: the GIL is let go between chunks (≈7 ms each at 15 KB a message)


def replay_in_background(log: SessionLog, policy: Policy, counter: str, model: str | None,
                         cancelled: Callable[[], bool], busy: Callable[[], bool] = lambda: False,
                         poll_s: float = 0.02, nice: int = NICE) -> FidelityRun:
    """`replay` with the offline summarizer, in a child process; call from a thread. Raises Stopped
    once `cancelled()`; the child is paused while `busy()`. `nice`: the child's priority (the
    workbench's yields to the screen; an export, waiting for it, gives it its own)."""
    child = subprocess.Popen([sys.executable, "-m", "breakwater.fidelity.background", str(nice)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    paused = False
    try:
        try:
            pickle.dump((policy, counter, model, dict(log.header)), child.stdin)
            entries = log.entries
            for k in range(0, len(entries), CHUNK):
                if cancelled():
                    raise Stopped
                pickle.dump(entries[k:k + CHUNK], child.stdin)
            pickle.dump(None, child.stdin)
            child.stdin.close()
        except BrokenPipeError:
            pass   # it ended early: its exit status says so below
        while not select.select([child.stdout], [], [], poll_s)[0]:
            if cancelled():
                raise Stopped
            if busy() != paused:
                paused = not paused
                child.send_signal(signal.SIGSTOP if paused else signal.SIGCONT)
        try:
            ok, result = pickle.load(child.stdout)
        except (EOFError, pickle.UnpicklingError):
            raise RuntimeError(f"the measuring process ended (exit status {child.wait()})") from None
        if not ok:
            raise RuntimeError(result)
        return result
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
        for pipe in (child.stdin, child.stdout):
            if not pipe.closed:
                try:
                    pipe.close()
                except BrokenPipeError:
                    pass   # stopped while writing: closing flushes what the killed child no longer reads


def main() -> None:
    os.nice(int(sys.argv[1]) if len(sys.argv) > 1 else NICE)
    source, out = sys.stdin.buffer, sys.stdout.buffer
    policy, counter, model, header = pickle.load(source)
    entries: list = []
    while (chunk := pickle.load(source)) is not None:
        entries.extend(chunk)
    try:
        answer = (True, replay(SessionLog(header, entries), policy, counter, model=model))
    except Exception as exc:   # said by the screen, as a failure in its own thread would be
        answer = (False, f"{type(exc).__name__}: {exc}")
    pickle.dump(answer, out)
    out.flush()


if __name__ == "__main__":
    main()
