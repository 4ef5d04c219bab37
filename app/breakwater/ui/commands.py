"""`breakwater replay SESSION …` and `breakwater` alone (SPEC §11): the workbench on a recorded
session. Everything that can fail is checked before the screen opens, so a bad file or policy is
one line on stderr and a non-zero exit; Textual is imported only once that passed."""

from __future__ import annotations

import argparse
from pathlib import Path

from breakwater.core.commands import (add_replay_arguments, compare_policy, fail, read_session, resolve_policy,
                                      sample_path, with_overlay)
from breakwater.core.policy import PolicyError
from breakwater.core.session_log import SessionLogError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("replay", help="open the workbench on a recorded session, turn by turn")
    add_replay_arguments(p)
    p.add_argument("--turn", type=int, metavar="K", help="open at turn K (default: the last)")
    p.add_argument("--workspace", metavar="DIR",
                   help="the agent's workspace, where .agent/spill/<session>/ lives (default: the session's own)")
    p.add_argument("--overlay", metavar="FILE", help="pins, triggers and undos made on this recording")
    p.add_argument("--compare", metavar="P2", help="open beside a second policy: a preset name or a policy file")
    p.set_defaults(func=cmd_replay)


def cmd_replay(args: argparse.Namespace) -> int:
    from breakwater.ui.config import UISettings, UISettingsError

    try:
        log = with_overlay(read_session(args.session), getattr(args, "overlay", None))
        policy = resolve_policy(args, log)
        other = compare_policy(args, log) if getattr(args, "compare", None) else None
        settings = UISettings.load()
    except (SessionLogError, PolicyError, UISettingsError) as exc:
        return fail(str(exc))
    turns = log.turn_count()
    if args.turn is not None and not 1 <= args.turn <= turns + 1:
        return fail(f"--turn {args.turn}: the session has turns 1..{turns} (and {turns + 1}, the next request)")
    workspace = Path(args.workspace).expanduser() if args.workspace else None
    if workspace is not None and not workspace.is_dir():
        return fail(f"--workspace {args.workspace}: not a directory")
    from breakwater.ui.app import make_app

    app = make_app(log, policy, turn=args.turn, counter=args.counter, model=args.model, workspace=workspace,
                   settings=settings, compare=other)
    app.run()
    return app.return_code or 0


def default(args: argparse.Namespace) -> int:
    """`breakwater` with no command: the workbench on the bundled sample, offline."""
    ns = argparse.Namespace(session=str(sample_path()), preset=None, policy=None, window=None, counter="exact",
                            model=None, turn=None, workspace=None, overlay=None, compare=None)
    return cmd_replay(ns)
