"""Where bash runs: inside bubblewrap where the machine allows it (SPEC §3, issues 8, 27 and 35).

Scrubbing the key from the child's environment is not enough: `/proc/$PPID/environ`
still holds breakwater's original environment. Under bubblewrap the command gets

- its own PID namespace, so no other process's `/proc` is visible (its parent is the
  sandbox's init, whose environment is the scrubbed one);
- an allowlist of the machine (allowlist.py): the system folders, the toolchains on its PATH and
  the user's `tool_read_paths` read-only, the workspace read-write, fresh /tmp and /var/tmp; $HOME
  and the folders on the way to the workspace empty; nothing else. The config file that may hold
  the key (and its backups) is an unreadable node wherever it would be shown;
- no network unless the policy allows it, and no capabilities even when run as root;
- `/proc/sys` and the other system-wide files of /proc read-only, which a root without
  capabilities could otherwise still write (core_pattern runs a program as root at a crash);
- without network, no Unix socket either: a seccomp filter refuses `socket(AF_UNIX)` (and
  io_uring, which opens sockets without that call), since a socket file in any host folder
  answers a connect even on a read-only mount. A socket pair between the command's own
  processes still works.

A workspace that is $HOME itself (or holds it) is refused under bubblewrap: it is bound read-write,
so every credential in $HOME would be open to the model's commands.

`sandbox = auto` uses bubblewrap when a trial run works (it may be missing, or user
namespaces may be disabled) and otherwise says so once and falls back; `bwrap` insists;
`none` runs bash directly. Without bubblewrap breakwater marks itself non-dumpable
(prctl PR_SET_DUMPABLE 0), so a tool running as the same user cannot read its
`/proc/<pid>/environ`; root, or another process of the user that holds the key, still can.
"""

from __future__ import annotations

import argparse
import errno
import functools
import os
import platform
import struct
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, TextIO

from breakwater.tools import allowlist
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
    hide: tuple[Path, ...] = ()             # files shown as an unreadable node (with their backups)
    network: bool = False
    notice: str | None = None
    undumpable: bool = field(default=False, compare=False)
    hide_dirs: tuple[Path, ...] = ()        # shown empty
    read_only: tuple[Path, ...] = ()        # shown read-only besides the system folders
    home: Path | None = None                # shown empty, bar what lies in it of the above

    def refusal(self, workspace: Path) -> str | None:
        """Why bash cannot run in `workspace` in this sandbox, or None."""
        if self.kind != "bwrap":
            return None
        ws = Path(workspace)
        if ws == Path("/"):
            return "the workspace is / : the whole machine would be writable by the model's commands"
        if self.home is not None and any(h.is_relative_to(ws) for h in (self.home, self.home.resolve())):
            what = "is your home folder" if ws in (self.home, self.home.resolve()) else "holds your home folder"
            return (f"the workspace {ws} {what} ($HOME): every credential in it would be open to the model's "
                    "commands; use a project folder")
        return None

    def shown(self, workspace: Path) -> dict[str, list[str]]:
        """What a command sees, for the session log and the user."""
        system = [str(d) for d in allowlist.SYSTEM_DIRS if d.exists()]
        return {"read-write": [str(workspace), "/tmp (private)", "/var/tmp (private)"],
                "read-only": [*system, *(str(p) for p in self.read_only)],
                "empty": [str(self.home)] if self.home is not None else [],
                "hidden": [str(p) for p in (*self.hide, *self.hide_dirs)]}

    def command(self, argv: list[str], workspace: Path, seccomp_fd: int | None = None,
                tmp_bytes: int | None = None) -> list[str]:
        """`argv` as it must be started to run in this sandbox with `workspace` as its directory;
        `seccomp_fd` (from `filter_fd`, passed to the child) carries the socket filter, `tmp_bytes`
        bounds the sandbox's /tmp and /var/tmp (tmpfs: memory). SandboxError if `refusal` says so."""
        if self.kind != "bwrap":
            return argv
        problem = self.refusal(workspace)
        if problem is not None:
            raise SandboxError(problem)
        ws = str(workspace)
        size = ["--size", str(tmp_bytes)] if tmp_bytes is not None else []
        # Order matters: the root is an empty tmpfs; later mounts go over earlier ones
        args = [self.bwrap, *allowlist.system_args(), *_BASE_ARGS,
                *size, "--tmpfs", "/tmp", *size, "--tmpfs", "/var/tmp"]
        if self.home is not None:
            args += ["--dir", str(self.home)]
        for path in sorted(self.read_only, key=lambda p: len(p.parts)):
            args += ["--ro-bind", str(path), str(path)]
        args += ["--bind", ws, ws]
        # breakwater's own state in the workspace is read-only inside: a command cannot forge the
        # session log, replace a spill or hold a lock (issue 27 item 8); .agent itself is a mount
        # point (bound onto itself, writable), so it cannot be moved away and replaced by a link
        args += ["--bind-try", f"{ws}/.agent", f"{ws}/.agent"]
        for rel in AGENT_STATE:
            args += ["--ro-bind-try", f"{ws}/{rel}", f"{ws}/{rel}"]
        for lock in sorted(Path(ws, ".agent").glob("*.lock")):
            args += ["--ro-bind-try", str(lock), str(lock)]
        # a link is not mounted over (bwrap would follow it from its own root): its target, hidden
        # too (`resolve` keeps both ends), is what a command reaching it through the link meets
        shown = (*allowlist.SYSTEM_DIRS, *self.read_only, Path(ws))
        dirs = [d for d in self.hide_dirs if _within(d, shown) and not Path(ws).is_relative_to(d)
                and not d.is_symlink()]
        for path in dirs:
            args += ["--tmpfs", str(path), "--remount-ro", str(path)]
        # a config file's backups are looked for at each run: an editor may have left one since
        files = {f for path in self.hide for f in (allowlist.named_after(path) if not _within(path, (Path("/etc"),))
                                                     else [path])}
        for path in sorted(files):
            if _within(path, shown) and not path.is_symlink() and not any(path.is_relative_to(d) for d in dirs):
                args += ["--ro-bind", "/dev/null", str(path)]
        args += ["--remount-ro", "/"]       # the root tmpfs: no writes outside the workspace and the tmps
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


_BASE_ARGS = ("--dev", "/dev", "--proc", "/proc",
              *(arg for name in ("sys", "sysrq-trigger", "irq", "bus", "fs", "acpi", "scsi")
                for arg in ("--ro-bind-try", f"/proc/{name}", f"/proc/{name}")),
              "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
              "--cap-drop", "ALL", "--die-with-parent")


def _within(path: Path, roots: Iterable[Path]) -> bool:
    return any(path.is_relative_to(r) for r in roots)


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


def resolve(mode: str = DEFAULT_MODE, *, hide: Iterable[str | os.PathLike] = (), network: bool = False,
            read_paths: Iterable[str | os.PathLike] = (), show_home: bool = False,
            environ: Mapping[str, str] | None = None) -> Sandbox:
    """The sandbox for `mode`; SandboxError when `bwrap` is demanded and cannot run.

    `environ` is the tools' environment: its HOME is shown empty and its PATH's toolchains
    read-only, with `read_paths` (`tool_read_paths`); `show_home` shows HOME whole, read-only.
    Hidden paths that do not exist are skipped; a symlink is hidden at both ends.
    """
    if mode not in MODES:
        raise SandboxError(f"sandbox must be one of {', '.join(MODES)}, got {mode!r}")
    if mode != "none":
        bwrap, problem = _usable_bwrap()
        if bwrap is not None:
            environ = os.environ if environ is None else environ
            home = _home(environ)
            files, dirs = _existing(hide)
            etc_files, etc_dirs = _etc_secrets()
            shown = [*allowlist.toolchains(environ.get("PATH"), home), *allowlist.read_paths(read_paths, home)]
            if show_home and home is not None:
                shown.append(home)
            resolver = Path("/etc/resolv.conf").resolve()
            if network and resolver.is_file() and not allowlist.shown_by_system(resolver):
                shown.append(resolver)      # systemd-resolved's stub file in /run: names resolve
            return Sandbox("bwrap", bwrap, (*files, *etc_files), network, hide_dirs=(*dirs, *etc_dirs),
                           read_only=tuple(dict.fromkeys(shown)), home=home)
        if mode == "bwrap":
            raise SandboxError(f"sandbox = bwrap, but bubblewrap cannot run here: {problem}")
        notice = (f"bubblewrap is not usable here ({problem}); bash runs without a sandbox, and breakwater "
                  "made itself non-dumpable so tools cannot read its environment from /proc")
        return Sandbox("none", notice=notice, undumpable=make_undumpable())
    return Sandbox("none", undumpable=make_undumpable())


def _home(environ: Mapping[str, str]) -> Path | None:
    """The tools' $HOME, absolute; None when it is / (some service accounts): nothing to keep empty."""
    raw = environ.get("HOME") or str(Path.home())
    home = Path(os.path.normpath(os.path.abspath(raw)))
    return None if home == Path("/") else home


@functools.cache
def _etc_secrets() -> tuple[tuple[Path, ...], tuple[Path, ...]]:
    return allowlist.etc_secrets()


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
                             "bubblewrap or fail (bwrap), or directly (none). In bubblewrap a command sees "
                             "the workspace (read-write), the system folders and the toolchains on PATH "
                             "(read-only), an empty $HOME and nothing else")
    parser.add_argument("--read-path", dest="tool_read_paths", action="append", metavar="PATH",
                        help="also show PATH to bash's commands, read-only (a package cache, a data folder); "
                             "repeatable, added to the config file's tool_read_paths")


def _usable_bwrap() -> tuple[str | None, str | None]:
    """(path to bwrap, None) if a trial sandbox runs, else (None, why not). Probed once."""
    exe = shutil.which("bwrap")
    if exe is None:
        return None, "bwrap is not installed"
    if exe not in _probe_cache:
        trial = Sandbox("bwrap", exe).command(["true"], Path(tempfile.gettempdir()))
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
