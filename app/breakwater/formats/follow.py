"""Following a transcript while its agent still writes it, and where that agent compacts on its own.

`Follower.read()` gives the session as the file holds it now, or None while nothing complete was
added: a JSONL transcript is read up to its last newline (a half-written last line is waited for,
never reported as broken), a one-document trajectory (SWE-agent, mini-swe-agent rewrite theirs
each step) once it parses whole again.

The file is opened anew at each change, without blocking, and read only while it is a regular file
(core/log/regular_file.py), never past the size it had when opened: a name that becomes a FIFO or a
link to /dev/zero is not read, it is said. What happens to the file other than growing — it was
replaced by another file (a new inode), truncated, removed, or is no longer a regular file — is a
`FileChange` the screen shows (`Follower.changes()`); a transcript its agent appends to is never
rewritten, so its content is then read again from the start.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from breakwater.core.log.json_lines import SessionLogError
from breakwater.core.log.regular_file import RefusedFile, open_regular
from breakwater.core.log.session_log import SessionLog
from breakwater.formats import detect_format, load_session

DOCUMENT_FORMATS = ("swe-agent", "mini-swe-agent", "openai")

REPLACED = "replaced"      # another file is at the name now (another inode): read from its start
TRUNCATED = "truncated"    # the same file, shorter than when last read: read from its start
REFUSED = "refused"        # not a regular file any more (a FIFO, a device, a directory): not read
GONE = "gone"              # nothing at the name: waiting for it to come back


@dataclass(frozen=True, slots=True)
class FileChange:
    """Something that happened to a followed file other than growing, in one line for the screen."""

    kind: str       # REPLACED, TRUNCATED, REFUSED or GONE
    message: str


class Follower:
    def __init__(self, path: str | Path, fmt: str = "auto", session: str | None = None):
        self.path = Path(path)
        self.fmt = fmt
        self.session = session
        self._read_to = -1          # bytes of the file the last session was read from
        self._stamp: tuple[int, ...] | None = None
        self._file: tuple[int, int] | None = None   # (device, inode) of the file last read
        self._size = 0              # the bytes it held then
        self._state = ""            # GONE, or what was said of what is at the name, while nothing is read
        self._changes: list[FileChange] = []
        self._scratch: tempfile.TemporaryDirectory | None = None

    def changes(self) -> list[FileChange]:
        """What happened to the file since the last call (oldest first), each said once."""
        out, self._changes = self._changes, []
        return out

    def _say(self, kind: str, message: str) -> None:
        self._changes.append(FileChange(kind, message))

    def read(self) -> SessionLog | None:
        """The session with everything complete the file holds now; None when that is what the last
        call returned, or when the file is mid-write (a partial line, a document not whole yet), or
        when the name holds no regular file (a `FileChange` says so). SessionLogError when nothing was
        read yet and the name holds something that is not a regular file."""
        try:
            st = os.stat(self.path)   # stat, never open: a FIFO does not block it
        except OSError:
            if self._file is not None and self._state != GONE:
                self._state = GONE
                self._say(GONE, f"{self.path.name} was removed; waiting for it to come back")
            return None
        stamp = (st.st_dev, st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns)
        if stamp == self._stamp:
            return None
        self._stamp = stamp
        try:
            fd = open_regular(self.path)
        except RefusedFile as exc:
            if self._file is None:
                raise SessionLogError(str(exc)) from None
            said = f"{exc}; following stopped until it is a regular file again"
            if self._state != said:   # once for each thing put there: a FIFO after a device is said again
                self._state = said
                self._say(REFUSED, said)
            return None
        except OSError:
            return None   # removed between the stat and the open: the next change says what is there
        with os.fdopen(fd, "rb") as fh:
            info = os.fstat(fd)
            data = fh.read(info.st_size)   # what it held when opened: a file written on is read next time
        self._state = ""
        self._changed(info, len(data))
        if not data.strip():
            return None
        fmt = self._format(data)
        document = fmt in DOCUMENT_FORMATS or (fmt == "openhands" and data.lstrip()[:1] == b"[")
        end = len(data) if document else data.rfind(b"\n") + 1
        if end <= 0 or (end == self._read_to and not document):
            return None
        try:
            # from the bytes read, never the file again: it may have grown by half a line since
            log = load_session(self._copy(data[:end]), fmt, self.session)
        except SessionLogError:
            if document:
                return None   # rewritten in place and not whole yet: the next write completes it
            raise
        log.path = self.path
        self._read_to = end
        return log

    def _changed(self, info: os.stat_result, size: int) -> None:
        """When the file read is another than last time, or shorter, it is read from its start and, for
        a transcript its agent only appends to, the screen is told."""
        was, self._file = self._file, (info.st_dev, info.st_ino)
        before, self._size = self._size, size
        if was is None:
            return
        appended = self.fmt not in DOCUMENT_FORMATS and self.fmt != "openhands"   # documents are rewritten
        if was != self._file:
            what = REPLACED, f"{self.path.name} was replaced by another file; showing that file from its start"
        elif size < before:
            what = TRUNCATED, (f"{self.path.name} was truncated from {before:,} to {size:,} bytes; showing what "
                               f"it holds now")
        else:
            return
        self._read_to = -1
        if appended:
            self._say(*what)

    def _format(self, data: bytes) -> str:
        if self.fmt == "auto":
            self.fmt = detect_format(self._copy(data))   # the bytes read: the name may hold another file now
        return self.fmt

    def _copy(self, data: bytes) -> Path:
        """The complete part in a file of the same name (some formats take the session id from it)."""
        if self._scratch is None:
            self._scratch = tempfile.TemporaryDirectory(prefix="breakwater-follow-")
        target = Path(self._scratch.name) / self.path.name
        target.write_bytes(data)
        return target

    def first(self, say=None, poll: float = 0.05) -> SessionLog:
        """The session once the file holds something complete: an agent may not have written its first
        line yet (or not created the file). `say()` is called once if that means waiting."""
        log = self.read()
        while log is None:
            if say is not None:
                say()
                say = None
            time.sleep(poll)
            log = self.read()
        return log

    def close(self) -> None:
        if self._scratch is not None:
            self._scratch.cleanup()
            self._scratch = None


# -- the agent's own compaction ------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class OwnCompaction:
    """Where the agent that wrote a transcript compacts its context by itself, by its defaults."""

    agent: str
    window: int
    at: int        # request tokens from which it compacts
    rule: str

    def closeness(self, tokens: int) -> str:
        share = tokens / self.at if self.at else 0.0
        if tokens >= self.at:
            return f"{self.agent} would have compacted: {tokens:,} ≥ its auto-compact point {self.at:,} ({self.rule})"
        return (f"{self.agent} auto-compacts at {self.at:,} ({self.rule}): {tokens:,} is {share:.0%} of it, "
                f"{self.at - tokens:,} to go")


CLAUDE_CODE_WINDOW = 200_000
CLAUDE_SUMMARY_RESERVE = 20_000   # autoCompact.ts: min(max output tokens, 20,000) kept for the summary
CLAUDE_BUFFER = 13_000            # AUTOCOMPACT_BUFFER_TOKENS
CODEX_SHARE = 0.9                 # codex-rs: auto_compact_token_limit defaults to 90% of the window
PI_RESERVE = 16_384               # pi settings.json compaction.reserveTokens default


def own_compaction(log: SessionLog, window: int) -> OwnCompaction | None:
    """`window`: the context window the session ran with when its file does not say (the policy's)."""
    fmt = log.source_format
    recorded = log.header.get("window")
    if fmt == "claude-code":
        model = str(log.header.get("model") or "")
        w = 1_000_000 if "[1m]" in model else CLAUDE_CODE_WINDOW
        return OwnCompaction("Claude Code", w, w - CLAUDE_SUMMARY_RESERVE - CLAUDE_BUFFER,
                             "window − 20,000 summary reserve − 13,000 buffer")
    if fmt == "codex":
        w = recorded if isinstance(recorded, int) and recorded > 0 else window
        return OwnCompaction("Codex", w, int(w * CODEX_SHARE), "90% of the window")
    if fmt == "pi":
        return OwnCompaction("pi", window, max(1, window - PI_RESERVE), "window − 16,384 reserve")
    return None   # SWE-agent, mini-swe-agent, OpenHands (no-op condenser): no compaction of their own
