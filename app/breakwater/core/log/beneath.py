"""Open a path beneath a directory descriptor, never outside it (SPEC §3).

Resolving a path to a string, checking it and then opening the string is a race: a
parent directory swapped for a symlink in between carries the open elsewhere. Here the
kernel resolves the path relative to a descriptor held open on the workspace:

- `openat2(2)` with RESOLVE_BENEATH (Linux 5.6+) follows symlinks only while they stay
  below the descriptor and refuses `..` above it and absolute targets (EXDEV);
- elsewhere (older kernels, seccomp filters that hide the call) each component is
  opened with O_NOFOLLOW relative to the previous one, so any symlink is refused (ELOOP).

Either way the check and the use are the same system call.

Breakwater's own files under a workspace (session log, spill, memory, locks, overlays) are
opened with no symlink followed at all (RESOLVE_NO_SYMLINKS, or the walk), as regular files
with one link and without blocking: a command the agent ran may have planted a link to
`~/.bashrc`, a hard link, a FIFO or a device at any of those names. `OwnedDir` is such a
directory, and every write Breakwater makes there goes through it.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import platform
import secrets
import stat
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from breakwater.core.log.regular_file import RefusedFile

RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
_SYS_OPENAT2 = {"x86_64": 437, "aarch64": 437, "arm64": 437, "riscv64": 437}.get(platform.machine())
# A rename elsewhere in the tree during resolution makes openat2 answer EAGAIN.
_RETRIES = 8


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_libc = None
_have_openat2: bool | None = None if _SYS_OPENAT2 is not None else False


def force_walk(on: bool) -> None:
    """Use the component walk even where openat2 exists (on), or probe for openat2 again; for tests."""
    global _have_openat2
    _have_openat2 = False if on or _SYS_OPENAT2 is None else None


def resolver() -> str:
    """Which mechanism is in use: "openat2" or "walk"."""
    if _have_openat2 is None:
        fd = os.open(".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.close(open_beneath(fd, ".", os.O_PATH | os.O_DIRECTORY))
        finally:
            os.close(fd)
    return "openat2" if _have_openat2 else "walk"


def open_beneath(dir_fd: int, rel: str, flags: int, mode: int = 0o644, *, follow: bool = True) -> int:
    """A descriptor for `rel` (relative, already normalised) below `dir_fd`; OSError otherwise.

    EXDEV means the path leads out of the directory, ELOOP that a symlink was met where
    none may be followed (with `follow` false: any symlink).
    """
    global _have_openat2
    flags |= os.O_CLOEXEC
    if _have_openat2 is not False:
        for _ in range(_RETRIES):
            fd = _openat2(dir_fd, rel, flags, mode, follow)
            if fd >= 0:
                _have_openat2 = True
                return fd
            err = ctypes.get_errno()
            if err == errno.EAGAIN:
                continue
            if err in (errno.ENOSYS, errno.EPERM) and not _have_openat2:
                _have_openat2 = False      # not offered here: walk instead, from now on
                break
            raise OSError(err, os.strerror(err), rel)
        else:
            raise OSError(errno.EAGAIN, "the directory tree kept changing while the path was resolved", rel)
    return _walk(dir_fd, rel, flags, mode)


def _openat2(dir_fd: int, rel: str, flags: int, mode: int, follow: bool = True) -> int:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | (0 if follow else RESOLVE_NO_SYMLINKS)
    how = _OpenHow(flags, mode if flags & os.O_CREAT else 0, resolve)
    return _libc.syscall(_SYS_OPENAT2, dir_fd, os.fsencode(rel), ctypes.byref(how), ctypes.sizeof(how))


def _walk(dir_fd: int, rel: str, flags: int, mode: int) -> int:
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise OSError(errno.EXDEV, "path leads out of the directory", rel)
    if not parts:
        return os.open(".", flags, mode, dir_fd=dir_fd)
    current = dir_fd
    try:
        for part in parts[:-1]:
            try:
                step = os.open(part, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=current)
            except NotADirectoryError:
                # O_NOFOLLOW|O_DIRECTORY on a symlink answers ENOTDIR: say what it really is
                if _is_symlink(current, part):
                    raise OSError(errno.ELOOP, "path goes through a symbolic link", rel) from None
                raise
            if current != dir_fd:
                os.close(current)
            current = step
        return os.open(parts[-1], flags | os.O_NOFOLLOW, mode, dir_fd=current)
    finally:
        if current != dir_fd:
            os.close(current)


def _is_symlink(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


class UnsafePathError(OSError):
    """Something other than Breakwater's own file or directory stands at one of its paths."""


DIR_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC
# Regular files only: O_NONBLOCK so a FIFO at the name cannot hang the open, O_NOFOLLOW so a
# symlink there is refused; O_NOCTTY so a terminal cannot become ours.
_OWN = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
LOCK_POLL_S = 0.002
# Breakwater's own files it reads whole (memory, overlays, ledgers, journals) stay far below this
MAX_OWN_BYTES = 256 << 20


def _refused(exc: OSError, where: str) -> OSError:
    if exc.errno in (errno.ELOOP, errno.EXDEV, errno.ENXIO, errno.ENOTDIR):
        return UnsafePathError(exc.errno, f"{where}: refused, a symbolic link or something other than a "
                                          "regular file or folder is in the way (a tool may have put it there)")
    return exc


def _one_name(name: str, where: Path | str) -> str:
    """`name` if it is one file name in the directory; a name with a slash or `..` (read from a file
    a tool may have written) would reach past it."""
    if not name or "/" in name or "\0" in name or name in (".", ".."):
        raise UnsafePathError(errno.EPERM, f"{where}: refused the name {name!r}, which is not one file name")
    return name


def owned_dir_fd(anchor: str | os.PathLike, rel: str, create: bool = True) -> int:
    """An O_PATH descriptor of `anchor/rel`, reached with no symlink followed below `anchor`;
    with `create`, missing directories are made one at a time inside the one opened before."""
    where = str(Path(anchor) / rel)
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise UnsafePathError(errno.EXDEV, f"{where}: leads out of {anchor}")
    current = os.open(anchor, DIR_FLAGS)
    try:
        for part in parts:
            try:
                step = open_beneath(current, part, DIR_FLAGS, follow=False)
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    os.mkdir(part, 0o755, dir_fd=current)
                except FileExistsError:
                    pass
                step = open_beneath(current, part, DIR_FLAGS, follow=False)
            os.close(current)
            current = step
    except OSError as exc:
        os.close(current)
        raise _refused(exc, where) from None
    return current


class OwnedDir:
    """A directory Breakwater writes in (`.agent`, `.agent/sessions`, the workspace root for
    PROJECT_MEMORY.md), reached from `anchor` with no symlink followed. Each operation opens
    it afresh, so a directory swapped for a link between two writes is refused, not followed."""

    def __init__(self, anchor: str | os.PathLike, rel: str = "."):
        self.anchor = Path(anchor)
        self.rel = rel
        self.path = self.anchor / rel if rel not in ("", ".") else self.anchor

    @contextmanager
    def fd(self, create: bool = True) -> Iterator[int]:
        fd = owned_dir_fd(self.anchor, self.rel, create)
        try:
            yield fd
        finally:
            os.close(fd)

    def open(self, name: str, flags: int, mode: int = 0o644, *, dir_fd: int | None = None) -> int:
        """`name` in this directory as a regular file with one link (the caller closes the fd)."""
        _one_name(name, self.path)
        if dir_fd is None:
            with self.fd(create=bool(flags & os.O_CREAT)) as d:
                return self.open(name, flags, mode, dir_fd=d)
        try:
            fd = os.open(name, flags | _OWN, mode, dir_fd=dir_fd)
        except OSError as exc:
            raise _refused(exc, str(self.path / name)) from None
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
            os.close(fd)
            what = "has other hard links" if stat.S_ISREG(info.st_mode) else "is not a regular file"
            raise UnsafePathError(errno.EPERM, f"{self.path / name}: refused, it {what} "
                                               "(a tool may have put it there)")
        if flags & os.O_NONBLOCK == 0:
            os.set_blocking(fd, True)
        return fd

    def read(self, name: str, limit: int | None = None) -> bytes:
        """The file's bytes (at most `limit`), b"" when it or the directory does not exist. Without
        `limit`, a file of more than MAX_OWN_BYTES is refused (RefusedFile), never read whole."""
        try:
            fd = self.open(name, os.O_RDONLY)
        except FileNotFoundError:
            return b""
        with os.fdopen(fd, "rb") as fh:
            if limit is not None:
                return fh.read(limit)
            data = fh.read(MAX_OWN_BYTES + 1) if os.fstat(fd).st_size <= MAX_OWN_BYTES else None
        if data is None or len(data) > MAX_OWN_BYTES:
            raise RefusedFile(errno.EFBIG, f"{self.path / name} is more than {MAX_OWN_BYTES >> 20} MiB, far more "
                                           "than Breakwater writes there; not read")
        return data

    def exists(self, name: str) -> bool:
        _one_name(name, self.path)
        try:
            with self.fd(create=False) as d:
                os.stat(name, dir_fd=d, follow_symlinks=False)
        except FileNotFoundError:
            return False
        return True

    def stat(self, name: str) -> os.stat_result:
        _one_name(name, self.path)
        with self.fd(create=False) as d:
            return os.stat(name, dir_fd=d, follow_symlinks=False)

    def names(self) -> list[str]:
        try:
            with self.fd(create=False) as d:
                listing = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=d)
                try:
                    return os.listdir(listing)
                finally:
                    os.close(listing)
        except FileNotFoundError:
            return []

    def append(self, name: str, data: bytes, durable: bool = True, end_torn: bool = False) -> SetAside | None:
        """Append `data` (whole lines) to `name`, made if missing: all of it or nothing (`append_whole`).
        A torn last line found there first is set aside beside it: what was set aside, or None."""
        with self.fd() as d:
            fd = self.open(name, os.O_RDWR | os.O_APPEND | os.O_CREAT, dir_fd=d)
            try:
                return append_whole(d, name, fd, data, self.path / name, durable, end_torn)
            finally:
                os.close(fd)

    def append_to(self, fd: int, name: str, data: bytes, durable: bool = False) -> SetAside | None:
        """`append` through a descriptor of `name` the caller keeps open (O_RDWR | O_APPEND)."""
        with self.fd() as d:
            return append_whole(d, name, fd, data, self.path / name, durable)

    def create(self, name: str, data: bytes) -> None:
        """Create `name` exclusively with `data`, durably; FileExistsError when anything is there."""
        with self.fd() as d:
            fd = self.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, dir_fd=d)
            try:
                _write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            _fsync_dir(d)

    def replace(self, name: str, data: bytes, temp_prefix: str | None = None,
                before_replace: Callable[[], None] | None = None) -> None:
        """Replace `name` by `data` so that a reader, or a crash, sees the old file or the new one."""
        with self.fd() as d:
            replace_beneath(d, name, data, temp_prefix=temp_prefix, before_rename=before_replace)

    def unlink(self, name: str) -> None:
        _one_name(name, self.path)
        try:
            with self.fd(create=False) as d:
                os.unlink(name, dir_fd=d)
        except FileNotFoundError:
            pass

    def fsync(self) -> None:
        with self.fd() as d:
            _fsync_dir(d)

    @contextmanager
    def lock(self, name: str, timeout: float) -> Iterator[None]:
        """An exclusive flock on `name` (made if missing), held by this open file: threads of one
        process exclude each other as processes do. TimeoutError after `timeout` seconds."""
        fd = self.open(name, os.O_RDWR | os.O_CREAT)
        try:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise TimeoutError(f"{self.path / name} is locked by another process; "
                                           f"gave up after {timeout:g}s") from None
                    time.sleep(LOCK_POLL_S)
            yield
        finally:
            os.close(fd)


def replace_beneath(dir_fd: int, name: str, data: bytes, mode: int | None = None, *,
                    temp_prefix: str | None = None, before_rename: Callable[[], None] | None = None) -> None:
    """Replace `name` in the directory `dir_fd` by `data`, atomically and durably: the bytes go to a
    fresh temporary file made there (O_EXCL, no symlink followed: nothing planted is written through),
    which is renamed over `name`. A reader, or a crash, sees the old file or the new one.

    `mode` is the new file's permission bits (default: 0o644 less the umask); temporary names start
    with `temp_prefix` (default `.<name>.`) so a caller can find those a crash left;
    `before_rename` runs between the write and the rename (crash tests stop there)."""
    _one_name(name, name)
    tmp = _one_name(f"{temp_prefix if temp_prefix is not None else f'.{name[:200]}.'}{secrets.token_hex(6)}.tmp", name)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _OWN, 0o600 if mode is not None else 0o644,
                 dir_fd=dir_fd)
    try:
        try:
            os.set_blocking(fd, True)
            _write_all(fd, data)
            if mode is not None:
                os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        if before_rename is not None:
            before_rename()
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        raise
    _fsync_dir(dir_fd)


# -- appending whole lines ---------------------------------------------------------------------------
class AppendError(OSError):
    """A line could not be appended whole; the file still ends as it did before (with its last whole line)."""

    def __str__(self) -> str:
        return self.strerror or super().__str__()


@dataclass(frozen=True, slots=True)
class SetAside:
    """A torn last line (no newline at the end: a write cut short by a crash or a full disk, or someone
    else's edit) found before appending, copied into `kept` beside the file: moved out of it, or, with
    `ended`, left in place and ended with a newline (a text file a person edits: MEMORY.md)."""

    file: Path
    kept: Path
    size: int
    ended: bool = False

    def __str__(self) -> str:
        done = ("it was ended there with a newline" if self.ended
                else "it was taken out, and the file ends with its last whole line again")
        return (f"{self.file} ended with a torn line of {self.size:,} bytes: a copy is kept in {self.kept.name} "
                f"beside it; {done}, so nothing appended extends it")


_SCAN_BACK = 1 << 16


def append_whole(dir_fd: int, name: str, fd: int, data: bytes, where: Path | str,
                 durable: bool = True, end_torn: bool = False) -> SetAside | None:
    """Append `data` to the file `fd` (`name` in the directory `dir_fd`, opened O_RDWR | O_APPEND):
    all of it or nothing. A write cut short (ENOSPC, EDQUOT, EFBIG) or an fsync that fails is taken
    back, the file cut to its length before, and AppendError says why: a full disk never leaves half
    a line for the next append to extend. A torn last line already there (no newline at the end) is
    never extended either: it is copied beside the file first and taken out of it (with `end_torn`,
    ended with a newline in place instead), and said (`SetAside`, returned); when it cannot be copied
    (the disk is full), nothing is appended. Every append-only file Breakwater writes comes here."""
    where = Path(where)
    start = os.fstat(fd).st_size
    aside = None
    if start and os.pread(fd, 1, start - 1) != b"\n":
        aside = _set_aside(dir_fd, name, fd, start, where, end_torn)
        if end_torn:
            data = b"\n" + data
        else:
            start = os.fstat(fd).st_size
    try:
        _write_all(fd, data)
        if durable:
            os.fsync(fd)
    except OSError as exc:
        try:
            os.ftruncate(fd, start)
        except OSError:
            pass
        raise AppendError(exc.errno, f"cannot append to {where}: {_why(exc)}; nothing of it was written "
                                     f"(the file ends as it did)") from None
    if durable:
        _fsync_dir(dir_fd)
    return aside


def _why(exc: OSError) -> str:
    return "the disk is full" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else (exc.strerror or str(exc))


def _set_aside(dir_fd: int, name: str, fd: int, size: int, where: Path, keep: bool) -> SetAside:
    """Copy the bytes after the last newline of `fd` to a new file beside it, then (unless `keep`) cut
    them off."""
    end = size
    while end > 0:
        begin = max(0, end - _SCAN_BACK)
        nl = os.pread(fd, end - begin, begin).rfind(b"\n")
        if nl >= 0:
            end = begin + nl + 1
            break
        end = begin
    kept = _one_name(f"{name[:200]}.torn-{time.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(3)}", where)
    out = os.open(kept, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _OWN, 0o600, dir_fd=dir_fd)
    try:
        os.set_blocking(out, True)
        at = end
        while at < size:
            chunk = os.pread(fd, min(_SCAN_BACK, size - at), at)
            if not chunk:
                break
            _write_all(out, chunk)
            at += len(chunk)
        os.fsync(out)
    except OSError as exc:
        os.close(out)
        try:
            os.unlink(kept, dir_fd=dir_fd)
        except OSError:
            pass
        raise AppendError(exc.errno, f"cannot append to {where}: it ends with a torn line of {size - end:,} bytes, "
                                     f"which could not be set aside ({_why(exc)}); nothing was written") from None
    os.close(out)
    _fsync_dir(dir_fd)
    if not keep:
        os.ftruncate(fd, end)
        os.fsync(fd)
    return SetAside(where, where.with_name(kept), size - end, keep)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _fsync_dir(dir_fd: int) -> None:
    fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
