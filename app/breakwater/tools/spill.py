"""Where full tool output is spilled, and the notice that tells the model how to read it.

Layout (SPEC §3, §11): `<workspace>/.agent/spill/<session_id>/<tool_call_id>.log`.
Both ids come from outside (a session file, the model's tool call), so they are
reduced to one safe file-name component each; the directories are opened beneath the
workspace's descriptor and the file is created exclusively inside them.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
import threading
from pathlib import Path
from typing import BinaryIO

from breakwater.tools.workspace import Workspace

SPILL_DIR = Path(".agent") / "spill"
SUFFIX = ".log"
MAX_COMPONENT = 100
MAX_ATTEMPTS = 1000
SNIFF = 8 * 1024            # how much of a file decides whether it is binary
DEFAULT_HEX_BYTES = 1024    # one hex view: 64 rows
MAX_HEX_BYTES = 4096        # 256 rows, about 20 KB of text
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def safe_component(raw: str, fallback: str) -> str:
    """One path component for `raw`: only `[A-Za-z0-9._-]`, no leading dot, bounded length.

    When anything had to change, a short hash of the original is appended so two
    different ids (`a/b`, `a_b`) never share a file.
    """
    text = raw if isinstance(raw, str) else str(raw)
    safe = _UNSAFE.sub("_", text)
    safe = "_" + safe[1:] if safe.startswith(".") else safe
    if safe == text and 0 < len(safe) <= MAX_COMPONENT:
        return safe
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    stem = safe[:MAX_COMPONENT - len(digest) - 1] or fallback
    return f"{stem}-{digest}"


def spill_rel(session_id: str, tool_call_id: str, attempt: int = 0) -> str:
    """The workspace-relative spill file for one tool call; `attempt` > 0 gives a fresh name."""
    stem = safe_component(tool_call_id, "call")
    name = f"{stem}{SUFFIX}" if attempt == 0 else f"{stem}-{attempt}{SUFFIX}"
    return f"{SPILL_DIR.as_posix()}/{safe_component(session_id, 'session')}/{name}"


def spill_path(workspace: Workspace, session_id: str, tool_call_id: str) -> Path:
    """Where the first spill of one tool call goes, its directory made (inside the workspace);
    for readers and fixtures: the tools themselves create spill files with `Spill.create_in`."""
    rel = spill_rel(session_id, tool_call_id)
    os.close(workspace.open_dir(rel.rsplit("/", 1)[0], create=True, follow=False))
    return workspace.root / rel


class Spill:
    """A spill file created exclusively (O_EXCL), so nothing planted at its path is written through:
    a symlink or a hard link to another file there makes the next free name be used instead.

    It is removed through its directory's descriptor, and only while the name still holds
    the file this object created.
    """

    def __init__(self, fd: int, dir_fd: int, name: str, path: Path, rel: str | None = None):
        self.fd = fd
        self.path = path
        self.rel = rel
        self._dir_fd = dir_fd
        self._name = name
        info = os.fstat(fd)
        self._id = (info.st_dev, info.st_ino)

    @classmethod
    def create_at(cls, path: str | os.PathLike) -> "Spill":
        """Create `path` exclusively; FileExistsError if anything is there."""
        path = Path(path)
        dir_fd = os.open(path.parent, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            fd = os.open(path.name, _CREATE, 0o644, dir_fd=dir_fd)
        except BaseException:
            os.close(dir_fd)
            raise
        return cls(fd, dir_fd, path.name, path)

    @classmethod
    def create_in(cls, workspace: Workspace, session_id: str, tool_call_id: str) -> "Spill":
        """The spill file of one tool call under `.agent/spill/<session>/`, under a fresh name if taken."""
        first = spill_rel(session_id, tool_call_id)
        dir_rel = first.rsplit("/", 1)[0]
        dir_fd = workspace.open_dir(dir_rel, create=True, follow=False)
        try:
            for attempt in range(MAX_ATTEMPTS):
                rel = spill_rel(session_id, tool_call_id, attempt)
                name = rel.rsplit("/", 1)[1]
                try:
                    fd = os.open(name, _CREATE, 0o644, dir_fd=dir_fd)
                except FileExistsError:
                    continue
                return cls(fd, dir_fd, name, workspace.root / rel, rel)
            raise FileExistsError(errno.EEXIST, f"no free spill file name after {MAX_ATTEMPTS} tries", first)
        except BaseException:
            os.close(dir_fd)
            raise

    def open_writer(self, buffering: int) -> BinaryIO:
        """The file object that writes the spill (closing it closes the descriptor)."""
        return os.fdopen(self.fd, "wb", buffering=buffering)

    def discard(self) -> None:
        """Remove the file, if its name still holds it; call it while `fd` is open, so the
        inode cannot have been reused by a file planted in the meantime."""
        try:
            info = os.stat(self._name, dir_fd=self._dir_fd, follow_symlinks=False)
            if (info.st_dev, info.st_ino) == self._id:
                os.unlink(self._name, dir_fd=self._dir_fd)
        except FileNotFoundError:
            pass

    def close(self) -> None:
        if self._dir_fd >= 0:
            os.close(self._dir_fd)
            self._dir_fd = -1


def session_spill_bytes(workspace: Workspace, session_id: str) -> int:
    """What the spill files of one session hold now (0 when it has none); no link is followed."""
    dir_rel = spill_rel(session_id, "x").rsplit("/", 1)[0]
    try:
        path_fd = workspace.open_dir(dir_rel, create=False, follow=False)
    except OSError:
        return 0
    try:
        fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=path_fd)
    except OSError:
        return 0
    finally:
        os.close(path_fd)
    total = 0
    try:
        with os.scandir(fd) as entries:
            for entry in entries:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISREG(info.st_mode):
                    total += info.st_size
    finally:
        os.close(fd)
    return total


class SpillBudget:
    """What one session's spill files may hold together (policy `tool_max_session_spill_mb`): each
    call is granted what is left, up to its own bound, and gives back what it did not keep. Calls
    may run in parallel, so grants are taken under a lock, not read from the disk."""

    def __init__(self, limit: int, used: int = 0):
        self.limit = limit
        self.used = used
        self._lock = threading.Lock()

    def take(self, want: int) -> int:
        with self._lock:
            granted = max(0, min(want, self.limit - self.used))
            self.used += granted
            return granted

    def give_back(self, unused: int) -> None:
        with self._lock:
            self.used -= max(0, unused)

    def reached(self) -> str:
        return (f"this session's spill files reached their bound, tool_max_session_spill_mb = "
                f"{self.limit / MIB:,.0f} MiB")


MIB = 1 << 20


def looks_binary(prefix: bytes) -> bool:
    """The rule read_file and the spill notice share: a NUL byte in the first SNIFF bytes."""
    return b"\x00" in prefix[:SNIFF]


def hex_range_hint(rel_path: str, offset: int, length: int) -> str:
    return f'read_file(path="{rel_path}", offset={offset}, length={length})'


def read_range_hint(rel_path: str, start_line: int, end_line: int) -> str:
    return f'read_file(path="{rel_path}", start_line={start_line}, end_line={end_line})'


def spill_notice(rel_path: str, *, total_lines: int, total_bytes: int, dropped_lines: int,
                 cut_lines: int, first_dropped_line: int, read_max_lines: int, binary: bool = False) -> str:
    """The line appended to a truncated tool result; it names the file and how to page it.

    Binary output (a NUL byte near the start) gets the call that works on it, the hex
    view, since read_file does not page a binary file by lines.
    """
    what = []
    if dropped_lines:
        what.append(f"1 line was truncated above (line {first_dropped_line})" if dropped_lines == 1 else
                    f"{dropped_lines} lines were truncated above (lines {first_dropped_line}-"
                    f"{first_dropped_line + dropped_lines - 1})")
    if cut_lines:
        what.append("1 long line was cut" if cut_lines == 1 else f"{cut_lines} long lines were cut")
    saved = (f"[Full output ({total_lines} line{'' if total_lines == 1 else 's'}, {total_bytes} "
             f"byte{'' if total_bytes == 1 else 's'}) saved to {rel_path}; "
             f"{' and '.join(what) or 'nothing was truncated'}.")
    if binary:
        return (f"{saved} It is binary: read it as hex with {hex_range_hint(rel_path, 0, DEFAULT_HEX_BYTES)} "
                f"— up to {MAX_HEX_BYTES} bytes per call; or run a command on it (xxd, strings, file).]")
    start = first_dropped_line if dropped_lines else 1
    end = start + read_max_lines - 1
    if dropped_lines:
        end = min(end, first_dropped_line + dropped_lines - 1)
    return f"{saved} Read any range of it with {read_range_hint(rel_path, start, end)} — up to {read_max_lines} lines per call.]"
