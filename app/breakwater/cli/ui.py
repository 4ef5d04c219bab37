"""`breakwater replay SESSION …` and `breakwater` alone (SPEC §11): the workbench on a recorded
session. Everything that can fail is checked before the screen opens, so a bad file or policy is
one line on stderr and a non-zero exit; Textual is imported only once that passed."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from breakwater.cli.core import add_replay_arguments, compare_policy, fail, read_session, resolve_policy, \
    sample_path
from breakwater.core.policy import DEFAULT_PRESET, PolicyError, preset_names
from breakwater.core.log.session_log import SessionLogError
from breakwater.tools import sandbox


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("replay", help="open the workbench on a recorded session, turn by turn")
    add_replay_arguments(p)
    p.add_argument("--turn", type=int, metavar="K", help="open at turn K (default: the last)")
    p.add_argument("--workspace", metavar="DIR",
                   help="the agent's workspace, where .agent/spill/<session>/ lives (default: the session's own)")
    p.add_argument("--overlay", metavar="FILE",
                   help="pins, triggers and undos made on this recording (default: SESSION.overlay.jsonl beside it)")
    p.add_argument("--compare", metavar="P2", help="open beside a second policy: a preset name or a policy file")
    p.add_argument("--follow", action="store_true",
                   help="the agent is still writing SESSION: show each new turn as it is appended")
    p.set_defaults(func=cmd_replay)

    b = sub.add_parser("browse", help="list the sessions of Claude Code, Codex, pi and this workspace; open one",
                       description="The sessions found in ~/.claude/projects, ~/.codex/sessions, ~/.pi/agent/sessions "
                                   "and ./.agent/sessions, grouped by project, newest first; enter opens one.")
    b.set_defaults(func=cmd_browse)

    c = sub.add_parser("chat", help="open the workbench chatting with a live agent",
                       description="Chat with the agent while watching its context: the same list, gauges, "
                                   "inspector, timeline and spill pane as replay, growing as the agent works.")
    c.add_argument("--base-url", help="OpenAI-compatible endpoint (default: $OPENAI_BASE_URL, the config file)")
    c.add_argument("--model", help="model name (default: the config file's, else the first the endpoint lists)")
    c.add_argument("--summary-model", help="model for deep-compaction summaries (default: --model)")
    c.add_argument("--workspace", metavar="DIR", type=Path, help="the directory the agent works in (default: .)")
    c.add_argument("--window", type=int, help="the model's context window in tokens")
    c.add_argument("--preset", choices=preset_names(), help=f"compaction policy (default {DEFAULT_PRESET})")
    c.add_argument("--yes", dest="auto_approve", action="store_true", default=None,
                   help="approve every tool call without asking")
    sandbox.add_argument(c)
    c.set_defaults(func=cmd_chat)


def cmd_replay(args: argparse.Namespace) -> int:
    from breakwater.ui.config import UISettings, UISettingsError

    from breakwater.core.overlay import OverlayFile, overlay_path

    follower = None
    try:
        if getattr(args, "follow", False):
            from breakwater.formats.follow import Follower

            follower = Follower(args.session, getattr(args, "format", "auto"), getattr(args, "session_id", None))
            try:
                log = follower.first(lambda: print(f"breakwater: waiting for {args.session} to hold a whole line "
                                                   f"(ctrl+c stops)", file=sys.stderr))
            except KeyboardInterrupt:
                return 130
        else:
            log = read_session(args.session, getattr(args, "format", "auto"), getattr(args, "session_id", None))
        named = getattr(args, "overlay", None)
        if named and not Path(named).is_file():
            return fail(f"--overlay {named}: no such file")
        overlay = OverlayFile(Path(named) if named else overlay_path(Path(args.session)))
        policy = resolve_policy(args, overlay.apply(log))
        other = compare_policy(args, overlay.apply(log)) if getattr(args, "compare", None) else None
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
                   settings=settings, compare=other, overlay=None if follower else overlay, follower=follower,
                   window_source=args.window_source)
    app.run()
    return app.return_code or 0


def cmd_browse(args: argparse.Namespace) -> int:
    from breakwater.formats.sessions import find_sessions

    sessions = find_sessions()
    if not sessions:
        return fail("no sessions found in ~/.claude/projects, ~/.codex/sessions, ~/.pi/agent/sessions or "
                    "./.agent/sessions; `breakwater replay FILE` opens any transcript")
    return _browse(sessions)


def _browse(sessions) -> int:
    from breakwater.ui.config import UISettings, UISettingsError

    try:
        settings = UISettings.load()
    except UISettingsError as exc:
        return fail(str(exc))
    from breakwater.ui.app import browse_app

    app = browse_app(sessions, settings)
    app.run()
    return app.return_code or 0


def default(args: argparse.Namespace) -> int:
    """`breakwater` with no command: the sessions the user's agents left, else the workbench on the
    bundled sample, offline."""
    from breakwater.formats.sessions import find_sessions

    sessions = find_sessions()
    if sessions:
        return _browse(sessions)
    ns = argparse.Namespace(session=str(sample_path()), preset=None, policy=None, window=None, counter="exact",
                            model=None, turn=None, workspace=None, overlay=None, compare=None)
    return cmd_replay(ns)


def cmd_chat(args: argparse.Namespace) -> int:
    from breakwater.agent.config import ConfigError, load_config, resolve_sandbox
    from breakwater.ui.config import UISettings, UISettingsError

    flags = {"base_url": args.base_url, "model": args.model, "summary_model": args.summary_model,
             "workspace": args.workspace, "window": args.window, "auto_approve": args.auto_approve,
             "preset": args.preset, "sandbox": args.sandbox,
             "tool_read_paths": args.tool_read_paths}
    try:
        config = load_config(flags)
        sandbox.say_once(resolve_sandbox(config), prefix="breakwater chat")
        settings = UISettings.load()
    except (ConfigError, PolicyError, sandbox.SandboxError, UISettingsError) as exc:
        return fail(str(exc))
    from breakwater.ui.chat_app import ChatApp

    app = ChatApp(config, configured=config.configured, settings=settings)
    app.run()
    if app.agent is not None and app.agent.path is not None:
        print(f"session: {app.agent.path}")
    return app.return_code or 0
