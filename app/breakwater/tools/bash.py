"""bash: run one command for the agent, output cut at the source and spilled in full (SPEC §3).

The command runs in its own session (so its own process group); stdout and stderr
share one pipe and stream through a `RollingOutputBuffer` that tees the raw bytes
to the spill file. On timeout the whole group gets SIGTERM, then SIGKILL after a
short grace, so `sleep 100 &` left behind by the command dies with it.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from typing import Mapping

from breakwater.core.log.beneath import UnsafePathError
from breakwater.tools.bounds import MB, Bounds, Confinement
from breakwater.tools.result import ToolResult, error_result
from breakwater.tools.rolling_buffer import CHUNK_SIZE, RollingOutputBuffer
from breakwater.tools.sandbox import Sandbox
from breakwater.tools.spill import Spill, SpillBudget, spill_notice
from breakwater.tools.workspace import Workspace, WorkspaceError, as_workspace

DEFAULT_TIMEOUT_S = 120.0
# What one result may show of the output, head and tail together: about 7,500 tokens, the
# size Claude Code allows (30,000 characters); the 400-line cap alone lets 1.6 MB through.
DEFAULT_MAX_BYTES = 30_000
KILL_GRACE_S = 2.0
# After the shell exits, background jobs it started may keep the pipe open for ever
# (`server &`); read what they write for this long, then stop listening.
DRAIN_S = 1.0


def run_bash(workspace: Workspace | str | os.PathLike, command: str, timeout_s: float = DEFAULT_TIMEOUT_S,
             max_lines: int = 400, session_id: str = "session", tool_call_id: str = "call", *,
             max_line_bytes: int = 4000, read_max_lines: int = 400,
             kill_grace_s: float = KILL_GRACE_S, env: Mapping[str, str] | None = None,
             max_bytes: int = DEFAULT_MAX_BYTES, sandbox: Sandbox | None = None,
             bounds: Bounds | None = None, max_timeout_s: float | None = None,
             max_spill_bytes: int | None = None, spill_budget: SpillBudget | None = None) -> ToolResult:
    """Run `bash -c command` in the workspace (inside `sandbox` if given, within `bounds`); the result
    is what the model sees, and says which bound the command ran into. The spill keeps at most
    `max_spill_bytes` of the output, and no more than the session's `spill_budget` has left."""
    if not isinstance(command, str) or not command.strip():
        return error_result("bash", "command is empty")
    if "\x00" in command:
        return error_result("bash", "command contains a NUL byte")
    if not timeout_s > 0:
        return error_result("bash", f"timeout must be positive, got {timeout_s}")
    asked_s = timeout_s
    if max_timeout_s is not None and timeout_s > max_timeout_s:
        timeout_s = max_timeout_s
    try:
        ws = as_workspace(workspace)
        problem = sandbox.refusal(ws.root) if sandbox else None
        if problem is not None:
            return error_result("bash", f"bash was not run: {problem}")
        ws.prepare_agent_state()    # before the sandbox binds it read-only (issue 27 item 8)
    except WorkspaceError as exc:
        return error_result("bash", str(exc))
    except UnsafePathError as exc:
        return error_result("bash", f"bash was not run: {exc.strerror}")
    except OSError as exc:
        return error_result("bash", f"cannot create the spill folder: {exc.strerror or exc}")
    granted, bound = _spill_grant(max_spill_bytes, spill_budget)
    try:
        spill = Spill.create_in(ws, session_id, tool_call_id) if granted != 0 else None
        try:
            buffer = RollingOutputBuffer(max_lines, max_line_bytes, spill=spill, max_bytes=max_bytes,
                                         max_spill_bytes=granted, spill_bound=bound)
        except ValueError:
            if spill is not None:
                spill.discard()
                spill.close()
            raise
    except (ValueError, OSError) as exc:
        if spill_budget is not None and granted:
            spill_budget.give_back(granted)
        if isinstance(exc, UnsafePathError):
            return error_result("bash", f"bash was not run: {exc.strerror}")
        if isinstance(exc, OSError):
            return error_result("bash", f"cannot create the spill file: {exc.strerror or exc}")
        return error_result("bash", str(exc))
    started = time.monotonic()
    seccomp_fd = sandbox.filter_fd() if sandbox else None
    confinement = Confinement(bounds) if bounds is not None else None
    try:
        argv = ["bash", "-c", command]
        if sandbox:
            argv = sandbox.command(argv, ws.root, seccomp_fd, bounds.max_file_mb * MB if bounds else None)
        if confinement is not None:
            argv = confinement.wrap(argv)
        proc = subprocess.Popen(argv, cwd=ws.root,
                                stdin=subprocess.DEVNULL,
                                env=None if env is None else dict(env),
                                pass_fds=() if seccomp_fd is None else (seccomp_fd,),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    except OSError as exc:
        buffer.close()
        if confinement is not None:
            confinement.close()
        return error_result("bash", f"cannot start bash{' in bubblewrap' if sandbox and sandbox.kind == 'bwrap' else ''}: "
                                    f"{exc.strerror or exc}")
    finally:
        if seccomp_fd is not None:
            os.close(seccomp_fd)
    try:
        timed_out, abandoned = _stream(proc, buffer, timeout_s, kill_grace_s)
    finally:
        proc.stdout.close()
        if proc.poll() is None:         # only on an exception in _stream: never leave a runaway
            _signal_group(proc.pid, signal.SIGKILL)
        proc.wait()
        buffer.close()
    if spill_budget is not None and granted:
        spill_budget.give_back(granted - buffer.spilled_bytes)
    duration = time.monotonic() - started
    body = buffer.render() if buffer.total_bytes else "(no output)"
    hit = []
    if confinement is not None:
        hit = confinement.hit(body[-8192:].encode("utf-8", "replace"), proc.returncode)
        confinement.close()

    rel_spill = spill.rel if buffer.spill_path is not None else None
    trailer = []
    if timed_out:
        trailer.append(f"[timed out after {timeout_s:g}s; the command's process group was killed "
                       f"(exit code {proc.returncode})]")
    else:
        trailer.append(f"[exit code: {proc.returncode}]")
    if asked_s != timeout_s:
        trailer.append(f"[the timeout asked for, {asked_s:g}s, was cut to {timeout_s:g}s (tool_timeout_s)]")
    if hit:
        trailer.append(f"[the command ran into {' and '.join(hit)}]")
    if buffer.spill_stopped and buffer.spill_path is not None:
        trailer.append(f"[the spill file is incomplete: {buffer.spill_stopped}]")
    if granted == 0 and buffer.truncated:
        trailer.append(f"[the lines cut from this result are not kept anywhere: {spill_budget.reached()}; "
                       "send long output to a file in the workspace and read it in slices]")
    if abandoned:
        trailer.append("[the command exited but background processes still hold its output open; "
                       "their later output is not captured]")
    if rel_spill is not None:
        trailer.append(spill_notice(rel_spill, total_lines=buffer.total_lines, total_bytes=buffer.total_bytes,
                                    dropped_lines=buffer.dropped_lines, cut_lines=buffer.cut_lines,
                                    first_dropped_line=buffer.shown_head_lines + 1, read_max_lines=read_max_lines,
                                    binary=buffer.binary))
    meta = {
        "tool": "bash",
        "exit_code": proc.returncode,
        "timed_out": timed_out,
        "total_lines": buffer.total_lines,
        "dropped_lines": buffer.dropped_lines,
        "cut_lines": buffer.cut_lines,
        "total_bytes": buffer.total_bytes,
        "truncated_at_source": buffer.truncated,
        "binary": buffer.binary,
        "spill": rel_spill,
        "duration_s": round(duration, 3),
        "sandbox": sandbox.kind if sandbox else "none",
        "bounds_hit": hit,
        "spill_incomplete": buffer.spill_stopped,
    }
    return ToolResult(body + "\n\n" + "\n".join(trailer), meta)


def _spill_grant(max_spill_bytes: int | None, budget: SpillBudget | None) -> tuple[int | None, str]:
    """(what this call's spill may hold, None for no bound; the bound that sets it, for the notice)."""
    if budget is None:
        return max_spill_bytes, "tool_max_spill_mb"
    want = budget.limit if max_spill_bytes is None else max_spill_bytes
    granted = budget.take(want)
    return granted, "tool_max_spill_mb" if granted == want else budget.reached()


def _stream(proc: subprocess.Popen, buffer: RollingOutputBuffer, timeout_s: float,
            grace_s: float) -> tuple[bool, bool]:
    """Pump the pipe into the buffer until EOF; enforce the timeout. Returns (timed_out, abandoned)."""
    fd = proc.stdout.fileno()
    deadline = time.monotonic() + timeout_s
    timed_out = False
    eof = False             # a command may close its output and keep running: EOF is not the end
    kill_at = None          # when SIGKILL follows the SIGTERM of a timeout
    stop_at = None          # when to stop waiting for EOF
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            now = time.monotonic()
            exited = proc.poll() is not None
            if eof and exited:
                break
            if not timed_out and not exited and now >= deadline:
                timed_out = True
                _signal_group(proc.pid, signal.SIGTERM)
                kill_at = now + grace_s
            if kill_at is not None and now >= kill_at:
                _signal_group(proc.pid, signal.SIGKILL)
                kill_at = None
                stop_at = now + DRAIN_S
            if exited and not timed_out and stop_at is None:
                stop_at = now + DRAIN_S
            if stop_at is not None and now >= stop_at:
                break
            wake = min(t for t in (None if timed_out else deadline, kill_at, stop_at, now + 0.1)
                       if t is not None)
            if eof:
                try:
                    proc.wait(max(0.0, wake - now))
                except subprocess.TimeoutExpired:
                    pass
            elif selector.select(max(0.0, wake - now)):
                data = os.read(fd, CHUNK_SIZE)
                if data:
                    buffer.write(data)
                else:
                    eof = True
                    selector.unregister(fd)
    if timed_out:
        _finish_group(proc, kill_at)
    return timed_out, not eof and not timed_out


def _finish_group(proc: subprocess.Popen, kill_at: float | None) -> None:
    """After a timeout: give the group what is left of its grace, then SIGKILL whatever remains.

    EOF only means nobody holds the pipe; a member that ignores SIGTERM and closed its
    output is still alive, so the group itself is checked.
    """
    while kill_at is not None and time.monotonic() < kill_at:
        proc.poll()
        if not _group_alive(proc.pid):
            return
        time.sleep(0.02)
    _signal_group(proc.pid, signal.SIGKILL)


def _group_alive(pgid: int) -> bool:
    """Whether a process of the group still runs. Zombies do not count: an orphan stays
    one until the init process gets round to reaping it, which may take seconds."""
    try:
        pids = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        # Fields after the command name (which may contain spaces): state ppid pgrp ...
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != b"Z":
            return True
    return False


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
