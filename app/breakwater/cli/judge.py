"""`breakwater eval --judge`: model-judged probes next to the offline recall (fidelity/judge.py).

The model is the live agent's (agent/config.py: flags, OPENAI_BASE_URL / OPENAI_API_KEY, the
config file); nothing configured is one line saying how, before any work is done.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Sequence

from breakwater.core.log.visible import visible
from breakwater.core.log.words import pct

DEFAULT_QUESTIONS = 24
DEFAULT_TIMEOUT_S = 120.0
HOW_TO_CONFIGURE = ("eval --judge needs a model: set OPENAI_BASE_URL and OPENAI_API_KEY (and --judge-model NAME), "
                    "or write base_url, api_key and model in ~/.config/breakwater/config.toml ($BREAKWATER_CONFIG), "
                    "as for `breakwater chat`")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--judge", action="store_true",
                   help="also ask the configured model Factory's four probe types (recall, artifact, continuation, "
                        "decision) from the compacted request and grade its answers 0-5 against the full history "
                        "(costs tokens; 2 calls a question)")
    p.add_argument("--judge-model", metavar="NAME", help="the model to ask and grade with (default: the agent's)")
    p.add_argument("--judge-questions", type=int, metavar="N",
                   help=f"most questions in all, shared among the presets (default: {DEFAULT_QUESTIONS})")
    p.add_argument("--judge-timeout", type=float, metavar="S",
                   help=f"seconds one model request may take, from sending it to the last byte of the reply "
                        f"(default: {DEFAULT_TIMEOUT_S:g}); a reply is at most 1 MiB")


def make_judge(args: argparse.Namespace):
    """A Judge for these arguments, None without --judge, or the reason there is none (one line)."""
    given = [f"--{k.replace('_', '-')}" for k in ("judge_model", "judge_questions", "judge_timeout")
             if getattr(args, k) is not None]
    if not args.judge:
        return f"{', '.join(given)} without --judge: add --judge to ask a model" if given else None
    # only now: the client library takes 0.6 s to import, which every eval without --judge paid
    import openai

    from breakwater.agent.chat import classify
    from breakwater.agent.config import ConfigError, load_config
    from breakwater.agent.redact import Redactor
    from breakwater.fidelity.judge import Judge
    from breakwater.fidelity.judge_client import CallCut, judge_client

    if args.judge_questions is None:
        args.judge_questions = DEFAULT_QUESTIONS
    if args.judge_timeout is None:
        args.judge_timeout = DEFAULT_TIMEOUT_S
    if args.judge_questions < 1:
        return f"--judge-questions must be at least 1, got {args.judge_questions}"
    if not args.judge_timeout > 0:
        return f"--judge-timeout must be more than 0 seconds, got {args.judge_timeout:g}"
    try:
        cfg = load_config({"model": args.judge_model})
    except ConfigError as exc:
        return str(exc)
    if not cfg.configured:
        return HOW_TO_CONFIGURE
    redact = Redactor(cfg.api_key)   # a server may echo the key in an error message
    # each call bounded as a whole by --judge-timeout and each reply in size (fidelity/judge_client.py)
    judge = Judge(judge_client(cfg.base_url, cfg.api_key, args.judge_timeout), cfg.model or "",
                  timeout=args.judge_timeout, max_retries=min(cfg.max_retries, 3), retry_base_s=cfg.retry_base_s,
                  retry_cap_s=min(cfg.retry_cap_s, 10.0), redact=redact)
    if cfg.model is None:   # as the agent does: the first model the endpoint lists
        try:
            ids = judge.model_ids()
        except (openai.APIError, CallCut) as exc:
            judge.close()
            why = classify(exc).message if isinstance(exc, openai.APIError) else str(exc)
            return redact(f"no model configured, and listing the endpoint's models failed: {why}; "
                          f"pass --judge-model NAME")
        if not ids:
            judge.close()
            return "no model configured, and the endpoint lists none; pass --judge-model NAME"
        judge.model = ids[0]
    return judge


def run(judge, files: Sequence[str], corpus, presets: Sequence[str], window: int | None, counter: str,
        limit: int):
    """The judge's report over the sessions the offline eval could read, in the order named."""
    from breakwater.core.log.session_log import SessionLogError
    from breakwater.core.policy import PolicyError
    from breakwater.fidelity.judge import ask, plan
    from breakwater.fidelity.runner import policy_for
    from breakwater.formats import load_session

    def load(path: str):
        try:
            log = load_session(path)
            return log, {name: policy_for(name, log, window) for name in presets}
        except (SessionLogError, PolicyError, OSError):
            return None   # the offline eval read it a moment ago; if it is gone now, it is not judged

    chosen = plan([s.path for s in corpus.ordered(files) if not s.error], load, counter, limit)
    n = len(chosen.questions)
    print(f"breakwater: judge: asking {visible(judge.model)} {n} question{'s' if n != 1 else ''}, 2 calls each; "
          f"the contexts alone are about {chosen.context_tokens:,} prompt tokens", file=sys.stderr)
    try:
        return with_progress(lambda step: ask(judge, chosen, counter, limit, step), n)
    finally:
        judge.close()


def with_progress(work, total: int):
    """`work(step)` with a bar on stderr when it is a terminal (a question takes seconds)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    console = Console(stderr=True)
    if not console.is_terminal:
        return work(None)
    with Progress(TextColumn("judge"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=console, transient=True) as bar:
        job = bar.add_task("questions", total=total)
        return work(lambda _verdict: bar.advance(job))


def report_console():
    """The console the eval tables print on: a terminal's width, else (a file, a pipe) wide enough
    for every column whole (Rich's 80 columns cut them: `savi…`, `lo…`)."""
    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=400)


def score(cell: dict[str, Any]) -> str:
    return "—" if cell["mean"] is None else f"{cell['mean']:.1f} ({cell['count']})"


def print_report(report, offline: dict[str, dict]) -> None:
    """The judged scores per preset and probe type, next to the offline recall of the same preset."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    from breakwater.fidelity.judge import POINTS, PROBE_TYPES

    console = report_console()
    u = report.usage
    table = Table(title=f"model-judged probes ({escape(visible(report.model))})", title_justify="left",
                  box=box.SIMPLE_HEAD, pad_edge=False, caption_justify="left",
                  caption=f"mean grade 0-5 (and the number graded) of the answers from the compacted request, "
                          f"against the facts of the full history; offline: the recall above; "
                          f"{len(report.verdicts)} of the {report.planned} questions of {report.sessions} "
                          f"session{'s' if report.sessions != 1 else ''} asked (--judge-questions "
                          f"{report.limit}; probe points: the last turn and up to {POINTS - 1} deep compactions per "
                          f"session and preset); {u.calls} model calls, {u.prompt_tokens:,} prompt + "
                          f"{u.completion_tokens:,} completion tokens")
    rows = report.by_preset()
    ungraded = any(got["ungraded"] for got in rows.values())   # a column only when there is something in it
    table.add_column("preset", no_wrap=True)
    table.add_column("offline", justify="right", no_wrap=True, min_width=7)
    for t in PROBE_TYPES:
        table.add_column(t, justify="right", no_wrap=True)
    if ungraded:
        table.add_column("ungraded", justify="right", no_wrap=True)
    for name, got in rows.items():
        recall = offline.get(name, {}).get("recall")
        table.add_row(name, pct(recall),
                      *(score(got["types"][t]) for t in PROBE_TYPES), *([str(got["ungraded"])] if ungraded else []))
    console.print(table)


def stopped(report) -> int:
    """The exit status: 1 (and why, on stderr) when the judge could not ask all its questions."""
    if not report.stopped:
        return 0
    print(f"breakwater: judge stopped early: {visible(report.stopped)}", file=sys.stderr)
    return 1
