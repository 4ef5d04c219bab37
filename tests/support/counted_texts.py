"""Every text an exact counter is asked about in the fixtures and samples (tests of the count store and
of the tokenizers' agreement)."""

from __future__ import annotations

from pathlib import Path

from breakwater.formats import load_sessions

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = sorted(p for p in (ROOT / "tests" / "fixtures" / "real").glob("*/*") if p.name != "SOURCES.md") \
    + sorted((ROOT / "sample_sessions").glob("*.jsonl"))


def texts_of(path: Path) -> list[str]:
    """The contents, tool call names and arguments and resent reasoning of every message, not empty."""
    out = []
    for log in load_sessions(path):
        for m in log.messages:
            out.append(m.content)
            out.extend(t for c in m.tool_calls for t in (c.name, c.arguments))
            out.append(m.resent_reasoning)
    return [t for t in out if t]
