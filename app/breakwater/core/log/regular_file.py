"""Reading a file Breakwater was given by name (a transcript, an overlay, a policy or config file):
only a regular file, opened without blocking and read with a bound (issue 35 item 4).

Anyone who can write beside a transcript (`~/.claude/projects/…`) can put a FIFO there, which blocks
a plain open for ever, or a link to /dev/zero, which reads without end. Here the file is opened
with O_NONBLOCK, checked with fstat (the very file opened, not a name looked at again) and refused
with one line that says what it is.
"""

from __future__ import annotations

import errno
import os
import stat

# a policy or config file: a few KB of TOML
MAX_CONFIG_BYTES = 1 << 20


class RefusedFile(OSError):
    """What stands at a name Breakwater was asked to read is not a regular file (a FIFO, a device,
    a socket, a directory), or is larger than a reader of it takes. One line for the user."""

    def __str__(self) -> str:
        return self.strerror or super().__str__()


_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


def kind_of(mode: int) -> str:
    """What a file of this mode is, in words ("a FIFO"); "a regular file" for one."""
    return next((name for test, name in _KINDS if test(mode)), "a regular file" if stat.S_ISREG(mode)
                else "not a regular file")


def _not_regular(path: str | os.PathLike, mode: int) -> RefusedFile:
    via = ""
    try:
        if os.path.islink(path):
            via = f" (a symbolic link to {os.readlink(path)})"
    except OSError:
        pass
    return RefusedFile(errno.EINVAL, f"{path}{via} is {kind_of(mode)}, not a regular file; not read")


def open_regular(path: str | os.PathLike) -> int:
    """A read-only descriptor of the regular file at `path` (symlinks followed), or RefusedFile.

    Opened with O_NONBLOCK, so a FIFO at the name cannot hang the open (a plain open waits for a
    writer for ever), then checked with fstat, the very file opened: a FIFO, a device (a link to
    /dev/zero reads without end), a socket or a directory is refused before a byte is read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ENXIO:   # a socket (or a device without its driver)
            try:
                raise _not_regular(path, os.stat(path).st_mode) from None
            except OSError:
                pass
        raise
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise _not_regular(path, mode)
    os.set_blocking(fd, True)
    return fd


def read_regular(path: str | os.PathLike, limit: int, what: str = "file") -> bytes:
    """The bytes of the regular file at `path` (`open_regular`), refused with one line when it holds
    more than `limit` bytes (`what` names the file in that line: "policy file")."""
    fd = open_regular(path)
    with os.fdopen(fd, "rb") as fh:
        size = os.fstat(fd).st_size
        data = fh.read(limit + 1) if size <= limit else b""
        if size > limit or len(data) > limit:
            raise RefusedFile(errno.EFBIG, f"{path} is {max(size, len(data)):,} bytes, more than a {what} may be "
                                              f"({limit:,}); not read")
    return data


def read_so_far(path: str | os.PathLike) -> int | None:
    """How far this process has read the file at `path`: the offset of a descriptor it holds open on
    that very file (same device and inode), from /proc/self/fdinfo — a progress figure for a load
    running in another thread that needs nothing of the reader. None when no descriptor has it open
    (not yet opened, or read and closed) or the system does not say (no /proc)."""
    try:
        wanted = os.stat(path)
        names = os.listdir("/proc/self/fd")
    except OSError:
        return None
    for name in names:
        try:
            held = os.stat(f"/proc/self/fd/{name}")
            if (held.st_dev, held.st_ino) != (wanted.st_dev, wanted.st_ino):
                continue
            with open(f"/proc/self/fdinfo/{name}", encoding="ascii") as fh:
                for line in fh:
                    if line.startswith("pos:"):
                        return int(line.split()[1])
        except (OSError, ValueError, IndexError):
            continue   # closed meanwhile, or not a file
    return None
