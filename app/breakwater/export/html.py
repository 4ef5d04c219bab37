"""The report as one self-contained HTML page: inline CSS and SVG, no script, nothing fetched
(a Content-Security-Policy says so to the browser too), light or dark by the reader's preference,
long parts collapsed. Every text from the transcript goes through `visible` (control characters
drawn, bidirectional overrides neutralised) and is then escaped: it is shown, never read as markup."""

from __future__ import annotations

import tomllib
from html import escape
from importlib import resources

from breakwater import __version__
from breakwater.core.log.edits import ALL_KINDS, kind_label, kind_meaning
from breakwater.core.log.visible import visible
from breakwater.core.log.words import pct
from breakwater.export.figures import policy_line, totals_rows
from breakwater.export.report import CompactionRow, Fact, MessageRow, Part, Report, Side
from breakwater.export.timeline import axis_top, timeline_svg

DIFF_ROWS = 400   # turns listed where A and B differ; the rest are counted


def _t(text: str) -> str:
    return escape(visible(text), quote=True)


def _palette(name: str) -> dict[str, str]:
    data = tomllib.loads((resources.files("breakwater.themes") / name).read_text(encoding="utf-8"))
    colours = {k: v for k, v in data.items() if isinstance(v, str) and v.startswith("#")}
    colours.update({k: str(v) for k, v in (data.get("variables") or {}).items()})
    return colours


def _variables(colours: dict[str, str]) -> str:
    return "".join(f"--{k}:{v};" for k, v in sorted(colours.items()))


CSS = """
*{box-sizing:border-box}
body{margin:0 auto;max-width:1400px;padding:1rem 1.5rem;background:var(--background);color:var(--foreground);
 font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif}
h1{font-size:1.4rem;margin:.2rem 0}h2{font-size:1.15rem;margin:1.6rem 0 .5rem;border-bottom:1px solid var(--panel)}
.meta{color:var(--muted)}
table{border-collapse:collapse;margin:.4rem 0}td,th{padding:.2rem .7rem;border-bottom:1px solid var(--panel);text-align:left;vertical-align:top}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
pre{white-space:pre-wrap;word-break:break-word;margin:.3rem 0;padding:.5rem;background:var(--surface);
 font:13px/1.4 ui-monospace,"SFMono-Regular",Menlo,monospace;max-height:32rem;overflow:auto}
details{margin:.25rem 0}summary{cursor:pointer}
details.msg>summary{font:13px/1.5 ui-monospace,Menlo,monospace;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.later{opacity:.55}
.sides{display:grid;grid-template-columns:1fr 1fr;gap:.6rem}@media (max-width:900px){.sides{grid-template-columns:1fr}}
.badge{display:inline-block;padding:0 .3rem;margin-right:.2rem;border-radius:3px;color:var(--background);font-size:12px}
mark{color:inherit;background:transparent;border-bottom:2px solid;padding:0 1px}
.omitted{color:var(--muted);font-style:italic}
.role-system{color:var(--role-system)}.role-user{color:var(--role-user)}
.role-assistant{color:var(--role-assistant)}.role-tool{color:var(--role-tool)}
svg.timeline{width:100%;height:180px;background:var(--surface);display:block}
svg .raw{fill:var(--faint)}svg .z-safe{fill:var(--gauge-safe)}svg .z-soft{fill:var(--gauge-soft)}svg .z-hard{fill:var(--gauge-hard)}
svg .limit{stroke-width:1}svg .soft{stroke:var(--gauge-soft)}svg .hard{stroke:var(--gauge-hard)}
svg .window{stroke:var(--foreground);stroke-dasharray:4 3}svg .now{stroke:var(--primary);stroke-width:2}
svg .mark-decided{fill:var(--span-summarized)}svg .mark-recorded{fill:var(--primary)}
.key span{display:inline-block;width:.9em;height:.9em;vertical-align:middle;margin:0 .3rem 0 .8rem}
.lost{color:var(--error)}.ok{color:var(--success)}
.cols{display:grid;grid-template-columns:1fr 1fr;gap:1.2rem}
"""


def _style() -> str:
    light, dark = _palette("light.toml"), _palette("dark.toml")
    kinds = "".join(f".k-{k}{{border-color:var(--span-{k})}}.b-{k}{{background:var(--span-{k})}}" for k in ALL_KINDS)
    return (f":root{{color-scheme:light dark;{_variables(light)}}}"
            f"@media (prefers-color-scheme:dark){{:root{{{_variables(dark)}}}}}{CSS}{kinds}")


def _totals(sides: list[tuple[str, Side]]) -> str:
    rows = [totals_rows(s) for _, s in sides]
    head = "".join(f'<th class="n">{_t(name)}</th>' for name, _ in sides)
    body = []
    for k, row in enumerate(rows[0]):
        cells = "".join(f'<td class="n" data-side="{name}" data-key="{r[k].key}" '
                        f'data-value="{"" if r[k].value is None else r[k].value}">{_t(r[k].text)}</td>'
                        for (name, _), r in zip(sides, rows))
        body.append(f"<tr><th>{_t(row.label)}</th>{cells}</tr>")
    return f'<table class="totals"><tr><th></th>{head}</tr>{"".join(body)}</table>'


def _legend() -> str:
    zones = "".join(f'<span style="background:var(--gauge-{z})"></span>{z} zone' for z in ("safe", "soft", "hard"))
    return (f'<p class="key meta"><span style="background:var(--faint)"></span>without compaction{zones}'
            f'<span style="background:var(--gauge-soft);height:2px"></span>soft limit'
            f'<span style="background:var(--gauge-hard);height:2px"></span>hard limit'
            f'<span style="background:var(--span-summarized)"></span>deep compaction (this policy)'
            f'<span style="background:var(--primary)"></span>recorded by the agent / the chosen turn</p>')


def _fact(f: Fact) -> str:
    pin = " · pinned" if f.pinned else ""
    return (f'<li><b>{_t(f.kind)}</b>{pin} (from turn {f.turn}, lost at turn {f.lost_turn}): '
            f'<code>{_t(f.text)}</code></li>')


def _compaction(c: CompactionRow) -> str:
    lost = (f'<p class="lost">{len(c.lost)} fact{"s" if len(c.lost) != 1 else ""} lost at this turn:</p>'
            f'<ul>{"".join(_fact(f) for f in c.lost)}</ul>') if c.lost else '<p class="ok">no fact lost at this turn</p>'
    return (f'<details class="compaction" data-turn="{c.turn}"><summary>turn {c.turn} · {_t(c.source)} · trigger '
            f'{_t(c.trigger)} · summarizer {_t(c.summarizer)} · covers {c.covered:,} messages · ≈{c.tokens_before:,} → '
            f'≈{c.tokens_after:,} tokens · {len(c.lost)} lost</summary><h4>Summary sent in their place</h4>'
            f'<pre>{_t(c.summary)}</pre>{lost}</details>')


def _parts(parts: tuple[Part, ...]) -> str:
    out = []
    for p in parts:
        text = _t(p.text)
        if p.kind:
            text = f'<mark class="k-{_t(p.kind)}" title="{_t(p.kind)}: {_t(kind_meaning(p.kind))}">{text}</mark>'
        out.append(text)
        if p.omitted:
            out.append(f'<span class="omitted">[… {p.omitted:,} characters not shown …]</span>')
    return "".join(out)


def _message(m: MessageRow) -> str:
    badges = "".join(f'<span class="badge b-{_t(k)}" title="{_t(kind_meaning(k))}">{_t(kind_label(k))}</span>'
                     for k in m.kinds)
    sent = "–" if m.sent_tokens is None else f"{m.sent_tokens:,}"
    calls = "".join(f"\n→ {_t(c)}" for c in m.calls)
    if m.later:
        as_sent = '<p class="meta">after this request</p>'
    elif m.sent is None:
        as_sent = '<p class="meta">not sent as itself (summarized, merged or dropped: see its badges)</p>'
    else:
        as_sent = f"<pre>{_parts(m.sent)}</pre>"
    return (f'<details class="msg{" later" if m.later else ""}" data-index="{m.index}"><summary>'
            f'#{m.index} t{m.turn} <span class="role-{_t(m.role)}">{_t(m.role)}</span> ≈{m.raw_tokens:,} → {sent} '
            f'{badges} {_t(m.preview)}</summary><div class="sides"><div><h4>as logged</h4>'
            f'<pre>{_parts(m.logged)}{calls}</pre></div><div><h4>as sent</h4>{as_sent}</div></div></details>')


def _side(name: str, side: Side, report: Report) -> str:
    comps = "".join(_compaction(c) for c in side.compactions) or '<p class="meta">no deep compaction</p>'
    missing = "".join(_fact(f) for f in side.missing)
    return (f'<section class="side" data-side="{name}"><h3>{_t(name)}: {_t(side.header["preset"])}</h3>'
            f'<p class="meta">{_t(policy_line(side))}</p>'
            f'{timeline_svg(side, report.turn, f"timeline of {name}")}'
            f'<p class="meta">A column per turn, {len(side.turns):,} in all; height: input tokens of the request, 0 '
            f'to {axis_top(side):,} (a request without compaction above that is cut at the top; hover a column for its '
            f'figures). Lines: the window {side.header["window"]:,} (dashed), the hard limit '
            f'{side.header["hard_limit"]:,}, the soft limit {side.header["soft_limit"]:,}.</p>'
            f'<h4>Deep compactions ({len(side.compactions)})</h4>{comps}'
            f'<h4>Facts at turn {report.turn}</h4><p>carried: {pct(side.recall)} of {side.facts:,} '
            f'(pinned: {pct(side.pinned)})</p>'
            + (f'<details><summary>{len(side.missing):,} facts not carried</summary><ul>{missing}</ul></details>'
               if side.missing else "")
            + f'<details><summary>The policy, as a file</summary><pre>{_t(side.policy_file)}</pre></details></section>')


def _differs(report: Report) -> str:
    rows = []
    for d in report.differs[:DIFF_ROWS]:
        rows.append(f'<tr><td class="n">{d.turn}</td><td class="n">{d.a.sent_tokens:,}</td><td class="n">'
                    f'{d.b.sent_tokens:,}</td><td class="n">{d.delta:+,}</td><td>{_t(d.a.zone)}</td><td>{_t(d.b.zone)}'
                    f'</td></tr>')
    more = len(report.differs) - DIFF_ROWS
    tail = f'<p class="meta">{more:,} more turns differ</p>' if more > 0 else ""
    return (f'<details><summary>{len(report.differs):,} of {report.turns:,} turns send differently</summary>'
            f'<table><tr><th class="n">turn</th><th class="n">A sent</th><th class="n">B sent</th><th class="n">B − A'
            f'</th><th>A zone</th><th>B zone</th></tr>{"".join(rows)}</table>{tail}</details>')


def render(report: Report) -> str:
    sides = [("A", report.a)] + ([("B", report.b)] if report.b is not None else [])
    if report.b is None:
        sides = [("this policy", report.a)]
    sent = sum(1 for m in report.messages if not m.later and m.sent is not None)
    body = [f'<h1>{_t(report.title)}</h1>',
            f'<p class="meta">{_t(report.source)} · turn {report.turn:,} of {report.turns:,} · exported by breakwater '
            f'{__version__}</p>',
            '<h2>Totals</h2>', _totals(sides),
            '<p class="meta">Tokens are the provider\'s input tokens of every request, summed (≈: an estimate); '
            'money at the model\'s prices with the cache-stable prefix at the cached price.</p>',
            '<h2>Timeline</h2>', _legend()]
    body.append(f'<div class="{"cols" if len(sides) > 1 else ""}">{"".join(_side(n, s, report) for n, s in sides)}</div>')
    if report.b is not None:
        body += ["<h2>Where A and B differ</h2>", _differs(report)]
    body += [f'<h2>Messages at turn {report.turn:,}</h2>',
             f'<p class="meta">{len(report.messages):,} messages in the log, {sent:,} sent as themselves at this turn; '
             f'tokens per message ≈ (the heuristic), as logged → as sent; replaced spans are underlined in their kind\'s '
             f'colour.</p><p class="key meta">'
             + "".join(f'<span class="b-{k}"></span>{_t(kind_label(k))}: {_t(kind_meaning(k))}' for k in ALL_KINDS)
             + '</p>', "".join(_message(m) for m in report.messages)]
    return ('<!doctype html><html lang="en"><head><meta charset="utf-8">'
            '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; style-src \'unsafe-inline\'">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<title>{_t(report.title)} — Breakwater</title><style>{_style()}</style></head><body>'
            + "".join(body) + "</body></html>\n")
