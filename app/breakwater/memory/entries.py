"""The on-disk shape of session memory: entries, bullets and overflow pointers.

An entry is `---\\n[Turn N | HH:MM:SS]\\n<bullets>\\n` (seed 000 §8.4.1). Once `MEMORY.md` is
full, an entry lives in a fragment file and `MEMORY.md` keeps a one-line pointer to it, so
reading the pointers in file order gives back the order in which entries were written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from breakwater.core.log.visible import visible

RULE = "---"
HEADER_RE = re.compile(r"^\[Turn (-?\d+) \| ([^\]]*)\]$")
POINTER_RE = re.compile(r"^- \[(overflow|archive)\] see (auto-[A-Za-z0-9-]+\.md)\b")
TAG_RE = re.compile(r"^-?\s*\[([A-Z]+)\]\s*")
FRAGMENT_GLOB = "auto-*.md"


@dataclass(frozen=True, slots=True)
class Entry:
    """One memory entry: its header line (empty for text before the first rule) and bullets."""

    header: str
    lines: tuple[str, ...]
    source: str

    @property
    def turn(self) -> int | None:
        m = HEADER_RE.match(self.header)
        return int(m.group(1)) if m else None

    @property
    def text(self) -> str:
        return "\n".join((self.header, *self.lines) if self.header else self.lines)


@dataclass(frozen=True, slots=True)
class Pointer:
    """A `MEMORY.md` line that stands for the entries of one fragment file."""

    kind: str  # "overflow" (one appended entry) or "archive" (older entries moved by consolidation)
    name: str
    line: str


# U+2028 and U+2029 end a line for str.splitlines (and for some editors and viewers) though not for
# "\n"-splitting; visible() draws the other characters that do (CR, VT, FF, FS/GS/RS, NEL)
_SEPARATORS = {0x2028: 0xFFFD, 0x2029: 0xFFFD}


def one_line(text: str) -> str:
    """`text` as one line of a memory file: nothing in it ends a line for any reader, nor acts on a
    terminal. A file name with U+2028 in it (written by the model through write_file) split a
    scribe bullet in two, and the second half read as a line of Breakwater's own (issue 35 item 8)."""
    return visible(text).translate(_SEPARATORS)


def lines_of(text: str) -> list[str]:
    """The lines of a memory file as Breakwater wrote them: split at "\n" only (each line was made
    with `one_line`), a "\r" before it dropped (a checkout may have turned "\n" into "\r\n")."""
    return [line.removesuffix("\r") for line in text.split("\n")]


def clean_bullets(bullets: str) -> list[str]:
    """The lines an entry may hold: each one line (`one_line`), no blank lines, no bare rules that
    would split the entry."""
    lines = (one_line(raw.rstrip()).rstrip() for raw in bullets.split("\n"))
    return [ln for ln in lines if ln.strip() and ln.strip() != RULE]


def format_header(turn: int, when: datetime) -> str:
    return f"[Turn {turn} | {when.strftime('%H:%M:%S')}]"


def format_entry(header: str, lines: list[str] | tuple[str, ...]) -> str:
    return f"{RULE}\n{header}\n" + "".join(f"{ln}\n" for ln in lines)


def overflow_pointer(name: str, turn: int) -> str:
    return f"- [overflow] see {name} (Turn {turn})"


def parse(text: str, source: str) -> list[Entry | Pointer]:
    """Entries (those with at least one line) and pointers of one memory file, in file order."""
    items: list[Entry | Pointer] = []
    header = ""
    lines: list[str] = []
    expect_header = False

    def flush() -> None:
        if lines:
            items.append(Entry(header, tuple(lines), source))
            lines.clear()

    for raw in lines_of(text):
        line = raw.rstrip()
        if line == RULE:
            flush()
            header, expect_header = "", True
            continue
        if not line.strip():
            continue
        if expect_header:
            expect_header = False
            if HEADER_RE.match(line):
                header = line
                continue
        m = POINTER_RE.match(line)
        if m:
            # A pointer ends the entry it follows; later lines continue under the same header.
            flush()
            items.append(Pointer(m.group(1), m.group(2), line))
            continue
        lines.append(line)
    flush()
    return items


def bullet_tag(line: str) -> str:
    m = TAG_RE.match(line)
    return m.group(1) if m else ""


_PUNCT_END = ".。;；,，:：!！ "


def bullet_key(line: str) -> tuple[str, str]:
    """Two bullets with the same key say the same thing: same tag, same text up to case and spacing."""
    tag = bullet_tag(line)
    body = TAG_RE.sub("", line, count=1) if tag else line.lstrip("-* ")
    return tag, " ".join(body.lower().split()).rstrip(_PUNCT_END)
