"""Open a path beneath a directory descriptor, never outside it (SPEC §3).

Resolving a path to a string, checking it and then opening the string is a race: a
parent directory swapped for a symlink in between carries the open elsewhere. Here the
kernel resolves the path relative to a descriptor held open on the workspace:

- `openat2(2)` with RESOLVE_BENEATH (Linux 5.6+) follows symlinks only while they stay
  below the descriptor and refuses `..` above it and absolute targets (EXDEV);
- elsewhere (older kernels, seccomp filters that hide the call) each component is
  opened with O_NOFOLLOW relative to the previous one, so any symlink is refused (ELOOP).

Either way the check and the use are the same system call.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import stat

RESOLVE_NO_MAGICLINKS = 0x02
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


def open_beneath(dir_fd: int, rel: str, flags: int, mode: int = 0o644) -> int:
    """A descriptor for `rel` (relative, already normalised) below `dir_fd`; OSError otherwise.

    EXDEV means the path leads out of the directory, ELOOP that a symlink was met where
    none may be followed.
    """
    global _have_openat2
    flags |= os.O_CLOEXEC
    if _have_openat2 is not False:
        for _ in range(_RETRIES):
            fd = _openat2(dir_fd, rel, flags, mode)
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


def _openat2(dir_fd: int, rel: str, flags: int, mode: int) -> int:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    how = _OpenHow(flags, mode if flags & os.O_CREAT else 0, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)
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
