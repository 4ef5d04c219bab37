"""The report as Markdown for a pull request or an issue: the totals table, the compactions with
their summaries and lost facts, the facts missing at the chosen turn and the policy. Link-free and
readable as plain text. Transcript text only ever stands in code (a span or a fenced block with a
fence longer than any run of backticks it holds), so nothing in it is read as Markdown or HTML."""

from __future__ import annotations

import re

from breakwater import __version__
from breakwater.core.log.visible import visible
from breakwater.core.log.words import pct
from breakwater.export.figures import policy_line, totals_rows
from breakwater.export.report import CompactionRow, Fact, Report, Side

FACTS_LISTED = 200   # facts listed per section; the rest are counted
DIFF_ROWS = 200
_TICKS = re.compile(r"`+")


def _plain(text: str) -> str:
    """Our own words in a table cell or a line: one line, no cell break, nothing that is markup."""
    return re.sub(r"([\\`*_\[\]<>|#])", r"\\\1", " ".join(visible(text).split()))


def _code(text: str, limit: int = 300) -> str:
    """Transcript text as an inline code span on one line (used in lists, never in a table)."""
    text = " ".join(visible(text).split())
    if len(text) > limit:
        text = text[:limit] + " …"
    if not text:
        return "(empty)"
    fence = "`" * (max((len(m) for m in _TICKS.findall(text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or fence != "`" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _block(text: str) -> str:
    text = visible(text)
    fence = "`" * max(3, max((len(m) for m in _TICKS.findall(text)), default=0) + 1)
    return f"{fence}text\n{text.rstrip()}\n{fence}"


def _facts(facts: tuple[Fact, ...]) -> list[str]:
    lines = [f"- **{f.kind}**{' (pinned)' if f.pinned else ''}, from turn {f.turn}, lost at turn {f.lost_turn}: "
             f"{_code(f.text)}" for f in facts[:FACTS_LISTED]]
    if len(facts) > FACTS_LISTED:
        lines.append(f"- … and {len(facts) - FACTS_LISTED:,} more")
    return lines


def _totals(sides: list[tuple[str, Side]]) -> list[str]:
    rows = [totals_rows(s) for _, s in sides]
    out = ["| | " + " | ".join(_plain(n) for n, _ in sides) + " |", "|---|" + "---:|" * len(sides)]
    for k, row in enumerate(rows[0]):
        out.append(f"| {_plain(row.label)} | " + " | ".join(_plain(r[k].text) for r in rows) + " |")
    return out


def _compaction(c: CompactionRow) -> list[str]:
    out = [f"#### Turn {c.turn}: {_plain(c.source)} compaction", "",
           f"Trigger {_plain(c.trigger)}, summarizer {_plain(c.summarizer)}; it covers {c.covered:,} messages, "
           f"≈{c.tokens_before:,} → ≈{c.tokens_after:,} tokens. "
           + (f"{len(c.lost)} facts lost at this turn." if c.lost else "No fact lost at this turn."), ""]
    if c.lost:
        out += _facts(c.lost) + [""]
    out += ["Summary sent in their place:", "", _block(c.summary or "(empty)"), ""]
    return out


def _side(name: str, side: Side, report: Report) -> list[str]:
    out = [f"### {_plain(name)}: {_plain(side.header['preset'])}", "", _plain(policy_line(side)), "",
           f"At turn {report.turn}: {pct(side.recall)} of {side.facts:,} facts carried "
           f"(pinned: {pct(side.pinned)}); {len(side.missing):,} not carried.", ""]
    if side.missing:
        out += _facts(side.missing) + [""]
    out += [f"{len(side.compactions)} deep compactions.", ""]
    for c in side.compactions:
        out += _compaction(c)
    out += ["Policy, as a file:", "", _block(side.policy_file), ""]
    return out


def render(report: Report) -> str:
    sides = [("A", report.a), ("B", report.b)] if report.b is not None else [("this policy", report.a)]
    out = [f"# Breakwater replay: {_plain(report.title)}", "",
           f"{_plain(report.source)}, turn {report.turn:,} of {report.turns:,}; exported by breakwater {__version__}.",
           "", "## Totals", ""] + _totals(sides) + [
           "", "Tokens are the provider's input tokens of every request, summed (≈: an estimate); money at the model's "
           "prices with the cache-stable prefix at the cached price.", ""]
    if report.b is not None:
        out += ["## Where A and B differ", "", f"{len(report.differs):,} of {report.turns:,} turns send differently.", ""]
        if report.differs:
            out += ["| turn | A sent | B sent | B − A | A zone | B zone |", "|---:|---:|---:|---:|---|---|"]
            out += [f"| {d.turn} | {d.a.sent_tokens:,} | {d.b.sent_tokens:,} | {d.delta:+,} | {d.a.zone} | {d.b.zone} |"
                    for d in report.differs[:DIFF_ROWS]]
            if len(report.differs) > DIFF_ROWS:
                out.append(f"| … | {len(report.differs) - DIFF_ROWS:,} more | | | | |")
            out.append("")
    out += ["## Compactions, facts and policy", ""]
    for name, side in sides:
        out += _side(name, side, report)
    return "\n".join(out).rstrip() + "\n"
