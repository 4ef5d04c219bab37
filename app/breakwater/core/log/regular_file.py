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
