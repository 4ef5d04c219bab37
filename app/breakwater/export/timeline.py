"""The timeline as inline SVG: a column per turn (sent tokens solid in its zone's colour, the
request without compaction shaded behind it), the soft and hard limits and the window as lines,
a mark above each deep compaction (decided, or recorded by the transcript's agent) and the chosen
turn. Drawn in turn units and stretched to the page's width; each column's <title> says its figures."""

from __future__ import annotations

from html import escape

from breakwater.export.report import Side

HEIGHT = 100.0   # units of the drawing; the page sets its pixel size
MARK = 6.0       # the band above the bars that holds the compaction marks


def axis_top(side: Side) -> int:
    """The tokens at the top of the drawing: a little above the window (or the largest request sent),
    so the limits and what is sent stay readable; a request without compaction above it is cut there."""
    return int(max([side.header["window"] * 1.15] + [t.sent_tokens for t in side.turns]))


def timeline_svg(side: Side, turn: int, label: str) -> str:
    turns = side.turns
    n = max(1, len(turns))
    h = side.header
    top = axis_top(side)
    scale = (HEIGHT - MARK) / max(1, top)

    def y(v: int) -> float:
        return round(HEIGHT - min(v, top) * scale, 2)

    def height(v: int) -> float:
        return round(min(v, top) * scale, 2)

    out = [f'<svg class="timeline" viewBox="0 0 {n} {HEIGHT:g}" preserveAspectRatio="none" role="img" '
           f'aria-label="{escape(label)}" xmlns="http://www.w3.org/2000/svg">']
    for i, t in enumerate(turns):
        over = "" if t.fits else " · over the window"
        mark = f" · deep compaction ({t.compaction})" if t.compaction else ""
        out.append(f'<g class="turn" data-turn="{t.turn}"><title>turn {t.turn} · sent {t.sent_tokens:,} · without '
                   f'compaction {t.raw_tokens:,} · {t.zone}{over}{mark}</title>'
                   f'<rect class="raw" x="{i}" y="{y(t.raw_tokens)}" width="1" height="{height(t.raw_tokens)}"/>'
                   f'<rect class="sent z-{t.zone}" x="{i}" y="{y(t.sent_tokens)}" width="1" '
                   f'height="{height(t.sent_tokens)}"/>'
                   + (f'<rect class="mark-{t.compaction}" x="{i}" y="0" width="1" height="{MARK:g}"/>' if t.compaction else "")
                   + "</g>")
    for cls, value in (("window", h["window"]), ("hard", h["hard_limit"]), ("soft", h["soft_limit"])):
        out.append(f'<line class="limit {cls}" x1="0" x2="{n}" y1="{y(value)}" y2="{y(value)}" '
                   f'vector-effect="non-scaling-stroke"><title>{cls} limit {value:,}</title></line>')
    at = max(0, min(n - 1, turn - 1)) + 0.5
    out.append(f'<line class="now" x1="{at}" x2="{at}" y1="0" y2="{HEIGHT:g}" vector-effect="non-scaling-stroke">'
               f'<title>turn {turn}, the request shown below</title></line>')
    out.append("</svg>")
    return "".join(out)
