"""Where bash runs: inside bubblewrap where the machine allows it (SPEC §3, issue 8 item 1).

Scrubbing the key from the child's environment is not enough: `/proc/$PPID/environ`
still holds breakwater's original environment. Under bubblewrap the command gets

- its own PID namespace, so no other process's `/proc` is visible (its parent is the
  sandbox's init, whose environment is the scrubbed one);
- the workspace read-write, a fresh /tmp, everything else read-only;
- the config file that may hold the key replaced by an unreadable node;
- no network unless the policy allows it, and no capabilities even when run as root;
- `/proc/sys` and the other system-wide files of /proc read-only, which a root without
  capabilities could otherwise still write (core_pattern runs a program as root at a crash);
- without network, no Unix socket either: a seccomp filter refuses `socket(AF_UNIX)` (and
  io_uring, which opens sockets without that call), since a socket file in any host folder
  answers a connect even on a read-only mount. A socket pair between the command's own
  processes still works.

`sandbox = auto` uses bubblewrap when a trial run works (it may be missing, or user
namespaces may be disabled) and otherwise says so once and falls back; `bwrap` insists;
`none` runs bash directly. Without bubblewrap breakwater marks itself non-dumpable
(prctl PR_SET_DUMPABLE 0), so a tool running as the same user cannot read its
`/proc/<pid>/environ`; root, or another process of the user that holds the key, still can.
"""

from __future__ import annotations

import argparse
import errno
import os
import platform
import struct
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, TextIO

from breakwater.tools.workspace import AGENT_STATE

MODES = ("auto", "bwrap", "none")
DEFAULT_MODE = "auto"
PR_SET_DUMPABLE = 4
PROBE_TIMEOUT_S = 10.0

_probe_cache: dict[str, str | None] = {}
_said: set[str] = set()


class SandboxError(ValueError):
    """`sandbox = bwrap` was asked for and bubblewrap cannot run here; one line for the user."""


@dataclass(frozen=True)
class Sandbox:
    """How bash is started. `kind` is what is used ("bwrap" or "none"); `notice` says why
    bubblewrap is not, when it was wanted (auto) and is missing."""

    kind: str
    bwrap: str | None = None
    hide: tuple[Path, ...] = ()
    network: bool = False
    notice: str | None = None
    undumpable: bool = field(default=False, compare=False)
    hide_dirs: tuple[Path, ...] = ()        # shown empty inside

    def command(self, argv: list[str], workspace: Path, seccomp_fd: int | None = None,
                tmp_bytes: int | None = None) -> list[str]:
        """`argv` as it must be started to run in this sandbox with `workspace` as its directory;
        `seccomp_fd` (from `filter_fd`, passed to the child) carries the socket filter, `tmp_bytes`
        bounds the sandbox's /tmp (a tmpfs: memory)."""
        if self.kind != "bwrap":
            return argv
        ws = str(workspace)
        base = list(_BASE_ARGS)
        if tmp_bytes is not None:
            at = base.index("--tmpfs")
            base[at:at] = ["--size", str(tmp_bytes)]
        args = [self.bwrap, *base, "--bind", ws, ws]
        # breakwater's own state in the workspace is read-only inside: a command cannot forge the
        # session log, replace a spill or hold a lock (issue 27 item 8); .agent itself is a mount
        # point (bound onto itself, writable), so it cannot be moved away and replaced by a link
        args += ["--bind-try", f"{ws}/.agent", f"{ws}/.agent"]
        for rel in AGENT_STATE:
            args += ["--ro-bind-try", f"{ws}/{rel}", f"{ws}/{rel}"]
        for lock in sorted(Path(ws, ".agent").glob("*.lock")):
            args += ["--ro-bind-try", str(lock), str(lock)]
        # a folder that holds the workspace stays (the workspace would vanish under the tmpfs), and a
        # file in a hidden folder is hidden with it
        dirs = [d for d in self.hide_dirs if not workspace.is_relative_to(d)]
        for path in dirs:
            args += ["--tmpfs", str(path), "--remount-ro", str(path)]
        for path in self.hide:
            if not any(path.is_relative_to(d) for d in dirs):
                args += ["--ro-bind", "/dev/null", str(path)]
        if not self.network:
            args.append("--unshare-net")
            if seccomp_fd is not None:
                args += ["--seccomp", str(seccomp_fd)]
        return [*args, "--chdir", ws, "--", *argv]

    def filter_fd(self) -> int | None:
        """A fresh descriptor holding the seccomp program bwrap reads (bwrap consumes it, so one
        per run), or None when no filter applies: no bwrap, network allowed, or an unknown CPU."""
        if self.kind != "bwrap" or self.network or _NO_UNIX_SOCKETS is None:
            return None
        fd = os.memfd_create("breakwater-seccomp", 0)
        os.write(fd, _NO_UNIX_SOCKETS)
        os.lseek(fd, 0, os.SEEK_SET)
        return fd


# Order matters: /tmp is a fresh tmpfs, then the workspace (which may live under /tmp) is
# bound over it, then the hidden files over that.
_BASE_ARGS = ("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
              *(arg for name in ("sys", "sysrq-trigger", "irq", "bus", "fs", "acpi", "scsi")
                for arg in ("--ro-bind-try", f"/proc/{name}", f"/proc/{name}")),
              "--tmpfs", "/tmp",
              "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
              "--cap-drop", "ALL", "--die-with-parent")


def _seccomp_program() -> bytes | None:
    """Classic BPF: on this CPU's native calls, `socket(AF_UNIX, ...)` and `io_uring_setup` fail with
    EACCES; any call of another ABI (32-bit, x32) fails, as it would pass the numbers by."""
    arch = {"x86_64": (0xC000003E, 41, 425), "aarch64": (0xC00000B7, 198, 425),
            "arm64": (0xC00000B7, 198, 425)}.get(platform.machine())
    if arch is None:
        return None
    audit_arch, nr_socket, nr_io_uring = arch
    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06          # BPF_LD|W|ABS, BPF_JMP|JEQ|K, JGE|K, BPF_RET|K
    allow, refuse = 0x7FFF0000, 0x00050000 | errno.EACCES
    program = [
        (ld, 0, 0, 4), (jeq, 1, 0, audit_arch), (ret, 0, 0, refuse),      # data.arch
        (ld, 0, 0, 0), (jge, 5, 0, 0x40000000),                            # data.nr; x32 calls: refuse
        (jeq, 4, 0, nr_io_uring), (jeq, 0, 2, nr_socket),
        (ld, 0, 0, 16), (jeq, 1, 0, 1),                                    # args[0] == AF_UNIX
        (ret, 0, 0, allow), (ret, 0, 0, refuse),
    ]
    return b"".join(struct.pack("=HBBI", *op) for op in program)


_NO_UNIX_SOCKETS = _seccomp_program()


def resolve(mode: str = DEFAULT_MODE, *, hide: Iterable[str | os.PathLike] = (), network: bool = False) -> Sandbox:
    """The sandbox for `mode`; SandboxError when `bwrap` is demanded and cannot run.

    Hidden paths that do not exist are skipped; a symlink is hidden at both ends.
    """
    if mode not in MODES:
        raise SandboxError(f"sandbox must be one of {', '.join(MODES)}, got {mode!r}")
    if mode != "none":
        bwrap, problem = _usable_bwrap()
        if bwrap is not None:
            files, dirs = _existing(hide)
            return Sandbox("bwrap", bwrap, files, network, hide_dirs=dirs)
        if mode == "bwrap":
            raise SandboxError(f"sandbox = bwrap, but bubblewrap cannot run here: {problem}")
        notice = (f"bubblewrap is not usable here ({problem}); bash runs without a sandbox, and breakwater "
                  "made itself non-dumpable so tools cannot read its environment from /proc")
        return Sandbox("none", notice=notice, undumpable=make_undumpable())
    return Sandbox("none", undumpable=make_undumpable())


def say_once(sandbox: Sandbox, stream: TextIO | None = None, prefix: str = "breakwater") -> None:
    """Print the sandbox's notice, once per process."""
    if sandbox.notice and sandbox.notice not in _said:
        _said.add(sandbox.notice)
        print(f"{prefix}: {sandbox.notice}", file=stream or sys.stderr)


def make_undumpable() -> bool:
    """prctl(PR_SET_DUMPABLE, 0): /proc/<our pid>/environ becomes root's to read. True if it took."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes       # only on this path: every command that registers --sandbox imports this module

    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def add_argument(parser: argparse.ArgumentParser, default: str | None = None) -> None:
    """`--sandbox auto|bwrap|none`, the same on every command that runs tools."""
    parser.add_argument("--sandbox", choices=MODES, default=default,
                        help="where bash runs: bubblewrap when it works here (auto, the default), "
                             "bubblewrap or fail (bwrap), or directly (none)")


def _usable_bwrap() -> tuple[str | None, str | None]:
    """(path to bwrap, None) if a trial sandbox runs, else (None, why not). Probed once."""
    exe = shutil.which("bwrap")
    if exe is None:
        return None, "bwrap is not installed"
    if exe not in _probe_cache:
        trial = Sandbox("bwrap", exe).command(["true"], Path("/"))
        try:
            done = subprocess.run(trial, stdin=subprocess.DEVNULL, capture_output=True, timeout=PROBE_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            _probe_cache[exe] = f"a trial run failed: {exc}"
        else:
            error = done.stderr.decode("utf-8", "replace").strip().splitlines()
            _probe_cache[exe] = None if done.returncode == 0 else \
                f"a trial run failed: {error[-1] if error else f'exit code {done.returncode}'}"
    problem = _probe_cache[exe]
    return (exe, None) if problem is None else (None, problem)


def _existing(paths: Iterable[str | os.PathLike]) -> tuple[tuple[Path, ...], tuple[Path, ...]]:
    """(files, folders) among `paths` that exist, a symlink at both ends."""
    files: list[Path] = []
    dirs: list[Path] = []
    for raw in paths:
        path = Path(raw).expanduser().absolute()
        for each in (path, path.resolve()):
            if not each.exists() or each in files or each in dirs:
                continue
            (dirs if each.is_dir() else files).append(each)
    return tuple(files), tuple(dirs)


# What a command has no business reading: keys, tokens, credentials, shell start-up files (which
# hold exported keys more often than not). Shown empty inside unless the policy allows them.
SECRETS = ("~/.ssh", "~/.aws", "~/.config", "~/.netrc", "~/.npmrc", "~/.pypirc", "~/.git-credentials",
           "~/.gnupg", "~/.docker", "~/.kube", "~/.azure", "~/.bashrc", "~/.bash_profile", "~/.bash_login",
           "~/.bash_history", "~/.profile", "~/.zshrc", "~/.zshenv", "~/.zprofile", "~/.zsh_history",
           "~/.cshrc", "~/.tcshrc", "~/.kshrc", "~/.config/fish", "/etc/shadow", "/etc/gshadow")


def secrets(home: str | os.PathLike | None = None) -> list[Path]:
    """The usual secrets under `home` (default: this user's) and the system's."""
    base = Path(home) if home is not None else Path.home()
    return [base / p[2:] if p.startswith("~/") else Path(p) for p in SECRETS]
