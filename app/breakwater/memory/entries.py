"""The on-disk shape of session memory: entries, bullets and overflow pointers.

An entry is `---\\n[Turn N | HH:MM:SS]\\n<bullets>\\n` (seed 000 §8.4.1). Once `MEMORY.md` is
full, an entry lives in a fragment file and `MEMORY.md` keeps a one-line pointer to it, so
reading the pointers in file order gives back the order in which entries were written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

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


def clean_bullets(bullets: str) -> list[str]:
    """The lines an entry may hold: no blank lines, no bare rules that would split the entry."""
    return [ln.rstrip() for ln in bullets.splitlines() if ln.strip() and ln.strip() != RULE]


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

    for raw in text.splitlines():
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
