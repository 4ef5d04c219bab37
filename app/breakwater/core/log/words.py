"""Counts in words: every figure with its separators, every noun with its number and article."""

from __future__ import annotations

import re

VOWEL_SOUND = ("a", "e", "i", "o", "u")
# words whose first letter misleads: "a user", "a unit", "an hour"
CONSONANT_SOUND = ("user", "unit", "use", "usual", "one", "uni", "eu")
VOWEL_SOUND_WORDS = ("hour", "honest")
_LONG_NUMBER = re.compile(r"(?<![\w.,])\d{4,}(?![\w.,]\d|\w)")


def plural(n: int, word: str, many: str | None = None) -> str:
    """`n` (with separators) and `word` in the number `n` asks for: 1 fact, 2 facts, 1,204 messages."""
    return f"{n:,} {word if n == 1 else many or word + 's'}"


def pct(fraction: float | None) -> str:
    """A share as a whole percent that never says all or none when it is not: 0.996 is ">99%" (a
    recall of "100%" beside "lost at turn 132" read as a contradiction), 0.004 "<1%"."""
    if fraction is None:
        return "—"
    if 0.995 <= fraction < 1:
        return ">99%"
    if 0 < fraction < 0.005:
        return "<1%"
    return f"{100 * fraction:.0f}%"


def grouped(text: str) -> str:
    """`text` with every whole number of four digits or more written with separators ("hard limit
    27200" → "hard limit 27,200"); decimals, ids and numbers already grouped are left alone."""
    return _LONG_NUMBER.sub(lambda m: f"{int(m.group()):,}", text)


def article(word: str) -> str:
    """`word` with its indefinite article: an assistant message, a user message, a tool result."""
    low = word.lower()
    vowel = (low.startswith(VOWEL_SOUND) and not low.startswith(CONSONANT_SOUND)) or low.startswith(VOWEL_SOUND_WORDS)
    return f"{'an' if vowel else 'a'} {word}"
