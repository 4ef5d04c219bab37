"""Following a transcript while its agent still writes it, and where that agent compacts on its own.

`Follower.read()` gives the session as the file holds it now, or None while nothing complete was
added: a JSONL transcript is read up to its last newline (a half-written last line is waited for,
never reported as broken), a one-document trajectory (SWE-agent, mini-swe-agent rewrite theirs
each step) once it parses whole again.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from breakwater.core.log.json_lines import SessionLogError, open_session_file
from breakwater.core.log.session_log import SessionLog
from breakwater.formats import detect_format, load_session

DOCUMENT_FORMATS = ("swe-agent", "mini-swe-agent", "openai")


class Follower:
    def __init__(self, path: str | Path, fmt: str = "auto", session: str | None = None):
        self.path = Path(path)
        self.fmt = fmt
        self.session = session
        self._read_to = -1          # bytes of the file the last session was read from
        self._stamp: tuple[int, int] | None = None
        self._scratch: tempfile.TemporaryDirectory | None = None
        self._asked = fmt
        self._ino: int | None = None
        # what happened to the file between reads, for the screen to say (issue 37.5): "replaced"
        # (another file now has its name: mv, an editor's save) or "truncated" (shorter than read).
        # Kept small here until the core's event for it lands (harden-files); the reader drains it.
        self.changes: list[str] = []

    def _format(self) -> str:
        if self.fmt == "auto":
            self.fmt = detect_format(self.path)
        return self.fmt

    def read(self) -> SessionLog | None:
        """The session with everything complete the file holds now; None when that is what the last
        call returned, or when the file is mid-write (a partial line, a document not whole yet)."""
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        if self._ino is not None and st.st_ino != self._ino:
            self.changes.append("replaced")
            self._read_to, self.fmt = -1, self._asked   # another file: read whole, its format again
        elif st.st_size < self._read_to:
            self.changes.append("truncated")
            self._read_to = -1
        self._ino = st.st_ino
        stamp = (st.st_size, st.st_mtime_ns)
        if stamp == self._stamp:
            return None
        self._stamp = stamp
        with open_session_file(self.path) as fh:
            data = fh.read()
        if not data.strip():
            return None
        fmt = self._format()
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
