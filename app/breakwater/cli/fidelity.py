"""`breakwater eval` (SPEC §11): billed tokens and probe recall per preset over a corpus."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Iterator

from breakwater.core.log.visible import json_safe, visible
from breakwater.cli import judge as judge_cli
from breakwater.core.log.words import pct
from breakwater.core.policy import DEFAULT_PRESET, PRESETS, preset_names
from breakwater.core.policy.agents import AGENT_OWN, AGENT_ROWS, AS_RECORDED

SESSION_SUFFIXES = (".jsonl", ".json", ".traj", ".gz")
BAR_WIDTH = 8


def register(sub) -> None:
    p = sub.add_parser("eval", help="what compaction saves and what it keeps, per preset, over many sessions",
                       description="Replay every session under each preset; report billed tokens with and without "
                                   "compaction and the recall of the session's facts (goal and constraints, files, "
                                   "commands, errors, decisions, pinned messages) request by request.")
    p.add_argument("paths", nargs="+", metavar="FILES_OR_DIR", help="session files, or folders searched recursively")
    p.add_argument("--presets", default=",".join([*sorted(PRESETS), *AGENT_ROWS]),
                   help=f"comma-separated presets (default: {', '.join([*sorted(PRESETS), *AGENT_ROWS])}); "
                        f"'{AS_RECORDED}': what each session's agent sent; '{AGENT_OWN}': its agent's strategy "
                        "replayed (Claude Code, Codex, pi, OpenHands; else as recorded); any other agent's preset")
    p.add_argument("--window", type=int, help="context window in tokens (default: each session's, else the preset's)")
    p.add_argument("--counter", choices=("exact", "heuristic"), default="exact",
                   help="exact: tiktoken near the limits (default); heuristic: never tiktoken")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--jobs", type=int, help="parallel local processes (default and most: the cores available)")
    p.add_argument("--oversubscribe", action="store_true", help="run --jobs processes even if there are more "
                                                                "than cores (each holds a session in memory)")
    p.add_argument("--dask", metavar="SCHEDULER_ADDRESS",
                   help="run on an existing Dask cluster (needs breakwater[cluster]); workers must see the paths")
    p.add_argument("--dask-timeout", type=float, default=10.0, metavar="S",
                   help="seconds to wait for the Dask scheduler to answer (default: 10)")
    judge_cli.add_arguments(p)
    p.set_defaults(func=cmd_eval)


def fail(reason: str) -> int:
    print(f"breakwater: {reason}", file=sys.stderr)
    return 2


def session_files(paths: list[str]) -> tuple[list[str], list[str]]:
    """The session files named or found under the folders named, and the arguments that are neither."""
    found: list[str] = []
    missing: list[str] = []
    for arg in paths:
        p = Path(arg)
        if p.is_dir():
            found.extend(str(f) for f in sorted(p.rglob("*")) if f.is_file() and f.name.endswith(SESSION_SUFFIXES))
        elif p.is_file():
            found.append(str(p))
        else:
            missing.append(arg)
    return list(dict.fromkeys(found)), missing


def parse_presets(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    known = [*preset_names(), *AGENT_ROWS]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise ValueError(f"unknown preset {', '.join(unknown) or '(none given)'}; choose from {', '.join(known)}")
    return list(dict.fromkeys(names))


def cmd_eval(args: argparse.Namespace) -> int:
    from breakwater.fidelity.runner import ClusterError, Corpus, default_jobs, run_dask, run_local, task

    try:
        presets = parse_presets(args.presets)
    except ValueError as exc:
        return fail(str(exc))
    if args.window is not None and args.window < 256:
        return fail(f"--window must be at least 256 tokens, got {args.window}")
    if args.jobs is not None and args.jobs < 1:
        return fail(f"--jobs must be at least 1, got {args.jobs}")
    files, missing = session_files(args.paths)
    for m in missing:
        print(f"breakwater: warning: {m}: no such file or folder", file=sys.stderr)
    if not files:
        return fail("no session files to evaluate")
    if args.dask_timeout <= 0:
        return fail(f"--dask-timeout must be more than 0 seconds, got {args.dask_timeout:g}")
    judge = judge_cli.make_judge(args)
    if isinstance(judge, str):
        return fail(judge)
    cores = default_jobs()
    jobs = args.jobs or cores
    if jobs > cores and not args.oversubscribe and not args.dask:
        # every process holds a session and the interpreter: 1,000 of them took 6.5 GB for no gain
        print(f"breakwater: note: --jobs {jobs} is more than the {cores} cores here; running {cores} "
              f"(--oversubscribe runs {jobs})", file=sys.stderr)
        jobs = cores
    fn = task(presets, args.window, args.counter)
    results = run_dask(files, fn, args.dask, args.dask_timeout) if args.dask else run_local(files, fn, jobs)
    corpus = Corpus(tuple(presets))
    try:
        for summary in _with_progress(results, len(files)):
            corpus.add(summary)
    except ClusterError as exc:
        return fail(str(exc))
    for s in corpus.ordered(files):
        if s.error:
            print(f"breakwater: warning: skipped {s.path}: {s.error}", file=sys.stderr)
    if not any(not s.error for s in corpus.sessions):
        return fail("none of the sessions could be evaluated")
    judged = judge_cli.run(judge, files, corpus, presets, args.window, args.counter, args.judge_questions) \
        if judge else None
    if args.json:
        data = corpus.to_json(files)
        if judged:
            data["judge"] = judged.to_json()
        print(json_safe(json.dumps(data, ensure_ascii=False)))
    else:
        print_report(corpus, files)
        if judged:
            judge_cli.print_report(judged, {n: t.to_json() for n, t in corpus.totals().items()})
    return judge_cli.stopped(judged) if judged else 0


def _with_progress(results: Iterator, total: int) -> Iterator:
    if total < 2:   # no bar for one session: rich is not imported for it (30 ms of eval's start)
        yield from results
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    console = Console(stderr=True)
    if not console.is_terminal:
        yield from results
        return
    with Progress(TextColumn("eval"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=console, transient=True) as bar:
        job = bar.add_task("sessions", total=total)
        for r in results:
            bar.advance(job)
            yield r


def bar(fraction: float | None, width: int = BAR_WIDTH) -> str:
    if fraction is None:
        return ""
    full = round(fraction * width)
    return "█" * full + "░" * (width - full)


def tokens(n: int) -> str:
    for div, unit in ((1_000_000_000, "G"), (1_000_000, "M"), (1_000, "k")):
        if n >= div:
            return f"{n / div:.1f}{unit}"
    return str(n)


def print_report(corpus, order: list[str]) -> None:
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    from breakwater.fidelity.probes import CATEGORIES

    console = judge_cli.report_console()
    done = [s for s in corpus.sessions if not s.error]
    turns = sum(s.turns for s in done)
    totals = {name: (t, t.to_json()) for name, t in corpus.totals().items()}
    table = Table(title=f"eval: {len(done)} session{'s' if len(done) != 1 else ''}, {turns:,} turns",
                  title_justify="left", box=box.SIMPLE_HEAD, caption_justify="left",
                  caption="billed tokens: the whole session without compaction → with it, ≈ an estimate; "
                          "recall: share of (fact, turn) pairs still recoverable from what is sent; pinned: goal and "
                          f"constraints, modified files, the latest error, pinned messages; * default preset")
    for col, just in (("preset", "left"), ("billed tokens", "right"), ("saving", "right"), ("deep", "right"),
                      ("recall", "left"), ("pinned", "right"), ("loop", "right")):
        table.add_column(col, justify=just, no_wrap=True)
    for name, (t, j) in totals.items():
        table.add_row(name + ("*" if name == DEFAULT_PRESET else ""),
                      f"≈{tokens(t.billed_raw)} → {'≈' if t.sent_estimated else ''}{tokens(t.billed_sent)}",
                      pct(j["saving"]), str(t.compactions),
                      f"{pct(j['recall']):>4} {bar(j['recall'])}",
                      pct(j["pinned_recall"]), str(t.flagged) if t.flagged else "")
    console.print(table)
    _print_money(console, totals)
    cats = Table(title="recall per category", title_justify="left", box=box.SIMPLE_HEAD)
    cats.add_column("preset")
    for c in CATEGORIES:
        cats.add_column(c, justify="right")
    for name, (_, j) in totals.items():
        cats.add_row(name, *(pct(j["by_category"][c]) for c in CATEGORIES))
    console.print(cats)
    for s in corpus.ordered(order):
        if s.error:
            continue
        lines = []
        facts = s.facts_json()
        for name, ps in s.presets.items():
            if ps.lost_turns:
                shown = ", ".join(f"{k}({n})" for k, n in ps.lost_turns[:12])
                more = f" … {len(ps.lost_turns) - 12} more" if len(ps.lost_turns) > 12 else ""
                lines.append(f"  {name}: lost at turn(probes) {shown}{more}")
            lines.extend(f"  [bold yellow]{name}: {escape(flag)}[/]" for flag in ps.loops)
            lines.extend(_missing_lines(name, facts))
        if lines:
            console.print(f"[bold]{escape(s.title)}[/] ({s.turns} turns)")
            for line in lines:
                console.print(line, highlight=False)


def _print_money(console, totals: dict) -> None:
    """Input $ without and with compaction beside the tokens, and the cache re-writes compaction caused
    (issue 41): `simulate`'s figures (core/log/prompt_cache.py), over the sessions whose model is priced."""
    from rich import box
    from rich.table import Table

    priced = max((t.priced for t, _ in totals.values()), default=0)
    if not priced:
        return
    money = Table(title=f"input cost through the provider's prompt cache ({priced} session{'s' if priced != 1 else ''}"
                        " with known prices)", title_justify="left", box=box.SIMPLE_HEAD)
    for col in ("preset", "USD", "saving", "cache re-writes"):
        money.add_column(col, justify="left" if col == "preset" else "right", no_wrap=True)
    for name, (t, j) in totals.items():
        money.add_row(name, f"${j['cost_raw']:,.2f} → ${j['cost_sent']:,.2f}", pct(j["cost_saving"]),
                      f"{tokens(j['cache_rewritten'])} tokens, ${j['cache_rewrite_cost']:,.2f}")
    console.print(money)


MISSING_SHOWN = 3   # facts the table names per session and preset (eval --json lists them all)


def _missing_lines(preset: str, facts: list[dict]) -> list[str]:
    """The facts the last request of a session no longer carries, as the workbench's `f` list gives
    them at the last turn: the most recently lost first."""
    from rich.markup import escape

    missing = sorted((f for f in facts if f["lost"].get(preset) is not None), key=lambda f: -f["lost"][preset])
    out = [f"    missing at the end: {f['kind']} [dim]{escape(visible(_clip(f['text'])))}[/] "
           f"(lost at turn {f['lost'][preset]}, from {f['message_id']})" for f in missing[:MISSING_SHOWN]]
    if len(missing) > MISSING_SHOWN:
        out.append(f"    … {len(missing) - MISSING_SHOWN} more missing (eval --json lists every fact)")
    return out


def _clip(text: str, n: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"
