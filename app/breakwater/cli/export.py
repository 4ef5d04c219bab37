"""`breakwater export SESSION … --html OUT | --md OUT` (SPEC §9 "Out", §11): a replay as one
self-contained HTML page or as Markdown, with the figures `simulate --json` prints."""

from __future__ import annotations

import argparse
import gc
import sys
from pathlib import Path

from breakwater.cli.core import add_replay_arguments, compare_policy, fail, read_session, with_overlay
from breakwater.core.policy import PolicyError
from breakwater.core.policy.for_session import resolve_policy


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="write a replay as one self-contained HTML page or as Markdown",
                       description="Replay a session under a policy and write what the workbench shows: the totals "
                                   "with and without compaction (tokens and money), the timeline, each deep "
                                   "compaction with its summary and the facts it lost, the messages at a turn as "
                                   "logged and as sent, and the policy. HTML: one file, no script, nothing fetched, "
                                   "light or dark by the reader's setting. Markdown: for a pull request or an issue.")
    add_replay_arguments(p)
    p.add_argument("--turn", type=int, metavar="K", help="the request whose messages are shown (default: the last)")
    p.add_argument("--compare", metavar="P2", help="also replay under P2 (a preset name or a policy file), side by side")
    p.add_argument("--overlay", metavar="FILE",
                   help="pins, triggers and undos made in the workbench on this recording (its .overlay.jsonl)")
    p.add_argument("--html", metavar="OUT.html", help="write the page here")
    p.add_argument("--md", metavar="OUT.md", help="write the Markdown here")
    p.set_defaults(func=cmd_export)


def _target(name: str | None, flag: str) -> Path | str | None:
    """The output path, or a reason it cannot be written."""
    from breakwater.export.output import unwritable

    if name is None:
        return None
    path = Path(name).expanduser()
    reason = unwritable(path)
    return f"{flag} {name}: {reason}" if reason else path


def cmd_export(args: argparse.Namespace) -> int:
    from breakwater.core.log.session_log import SessionLogError

    targets = [(_target(args.html, "--html"), "html"), (_target(args.md, "--md"), "md")]
    targets = [(t, kind) for t, kind in targets if t is not None]
    if not targets:
        return fail("export: say where to write: --html OUT.html and/or --md OUT.md")
    for t, _ in targets:
        if isinstance(t, str):
            return fail(t)
    args.model = args.model or None
    gc.disable()   # as simulate: loading and replaying build millions of objects and next to no cycles
    try:
        log = with_overlay(read_session(args.session, args.format, args.session_id), args.overlay)
        policy = resolve_policy(args, log)
        other = compare_policy(args, log) if args.compare else None
    except (SessionLogError, PolicyError) as exc:
        return fail(str(exc))
    turns = log.turn_count()
    if args.turn is not None and not 1 <= args.turn <= max(1, turns):
        return fail(f"--turn {args.turn}: the session has turns 1..{turns}")
    from breakwater.export import html, markdown, report
    from breakwater.export.output import write_atomically

    built = report.build(log, policy, args.counter, args.model, args.turn, args.window_source, other,
                         getattr(args, "compare_window_source", "policy"))
    for path, kind in targets:
        text = html.render(built) if kind == "html" else markdown.render(built)
        try:
            write_atomically(path, text)
        except OSError as exc:
            return fail(f"{path}: cannot write there ({exc.strerror or exc})")
        print(f"wrote {path} ({len(text.encode()) / 1e6:.2f} MB, turn {built.turn} of {built.turns})", file=sys.stderr)
    return 0
