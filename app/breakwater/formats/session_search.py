"""Searching the sessions `browse` lists (issue 42, 37.7): a query is words and `model:`, `date:`,
`agent:` filters. What a session says of itself (project, title or first prompt, model, agent, file
name) is matched at once; the text of its messages when it is read whole (`message_hits`), with the
turn of each hit, so the browser can say where to look.

Every word must be found (case-insensitive) for a session to match; `date:2026-01` keeps the
sessions whose start or end day begins so, `date:2026-01-05..2026-01-09` those that overlap the range.
"""

from __future__ import annotations

from dataclasses import dataclass

from breakwater.core.log.session_log import SessionLog
from breakwater.formats.sessions import FoundSession, day

FILTERS = ("model", "date", "agent")


@dataclass(frozen=True, slots=True)
class Query:
    words: tuple[str, ...] = ()     # lower-cased
    model: str | None = None
    date: str | None = None
    agent: str | None = None

    @classmethod
    def parse(cls, text: str) -> "Query":
        words: list[str] = []
        found: dict[str, str] = {}
        for token in text.split():
            key, sep, value = token.partition(":")
            if sep and key.lower() in FILTERS and value:
                found[key.lower()] = value.lower()
            else:
                words.append(token.lower())
        return cls(tuple(words), **found)

    @property
    def empty(self) -> bool:
        return not (self.words or self.model or self.date or self.agent)

    def keeps(self, s: FoundSession) -> bool:
        """Whether the filters keep session `s` (the words are matched by `names_match`/`message_hits`)."""
        if self.model and self.model not in (s.model or "").lower():
            return False
        if self.agent and self.agent not in s.agent.lower():
            return False
        if self.date:
            first, last = day(s.started), day(s.ended)
            if first is None:
                return False
            start, sep, end = self.date.partition("..")
            if sep:
                return (not end or first <= end + "~") and (not start or (last or first) >= start)
            return first.startswith(start) or (last or first).startswith(start)
        return True

    def names_match(self, s: FoundSession) -> tuple[str, ...]:
        """The words found in what the session says of itself."""
        said = " ".join(x for x in (s.project, s.title, s.model, s.agent, s.path.name, s.parent) if x).lower()
        return tuple(w for w in self.words if w in said)


def message_hits(log: SessionLog, words: tuple[str, ...], limit: int = 50) -> tuple[list[int], set[str]]:
    """The turns (first `limit`, in order, each once) whose messages hold one of `words`, and the
    words found anywhere in the messages (lower-cased)."""
    turns: list[int] = []
    found: set[str] = set()
    for m in log.messages:
        text = m.content.lower()
        calls = " ".join(f"{tc.name} {tc.arguments}" for tc in m.tool_calls).lower() if m.tool_calls else ""
        here = [w for w in words if w in text or (calls and w in calls)]
        if here:
            found.update(here)
            if len(turns) < limit and (not turns or turns[-1] != m.turn):
                turns.append(m.turn)
    return turns, found
