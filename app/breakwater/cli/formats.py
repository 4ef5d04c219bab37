"""`breakwater import SOURCE [--format F] [-o OUT] [--session ID]`: another agent's transcript as native JSONL."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import IO

from breakwater.core.log.session_log import SessionLog, SessionLogError

IMPORT_FORMATS = ("auto", "claude-code", "codex", "pi", "openai", "swe-agent", "mini-swe-agent", "openhands")
MAX_WARNINGS = 50


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("import", help="convert another agent's transcript to a native session file")
    p.add_argument("source", help="transcript file (Claude Code, Codex, pi, OpenAI, SWE-agent, mini-swe-agent, "
                                  "OpenHands)")
    p.add_argument("--format", choices=IMPORT_FORMATS, default="auto", help="source format (default: detected "
                                                                           "from the content)")
    p.add_argument("-o", "--output", metavar="OUT", help="output file, or a directory for a file holding several "
                                                          "sessions (default: the principal session on stdout)")
    p.add_argument("--session", metavar="ID", help="import only this session of a file holding several")
    p.set_defaults(func=cmd_import)


def write_native(log: SessionLog, out: IO[str]) -> None:
    header = dict(log.header)
    header["type"] = "session"
    out.write(json.dumps(header, ensure_ascii=False) + "\n")
    for entry in log.entries:
        out.write(json.dumps(entry.to_record(), ensure_ascii=False) + "\n")


def _file_name(session_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", session_id).strip("_") + ".jsonl"


def _warn(logs: list[SessionLog]) -> None:
    issues = [i for log in logs for i in log.issues]
    for issue in issues[:MAX_WARNINGS]:
        print(f"breakwater: warning: {issue}", file=sys.stderr)
    if len(issues) > MAX_WARNINGS:
        print(f"breakwater: warning: {len(issues) - MAX_WARNINGS} more", file=sys.stderr)


def cmd_import(args: argparse.Namespace) -> int:
    from breakwater.cli.core import fail
    from breakwater.formats import load_sessions

    try:
        logs = load_sessions(args.source, args.format)
    except SessionLogError as exc:
        return fail(str(exc))
    if args.session:
        chosen = [log for log in logs if log.id == args.session or log.id.endswith(args.session)]
        if not chosen:
            return fail(f"{args.source}: no session {args.session!r} (it holds {', '.join(l.id for l in logs)})")
        logs = chosen[:1]
    _warn(logs)
    out = Path(args.output) if args.output else None
    if out is None:
        write_native(logs[0], sys.stdout)
        if len(logs) > 1:
            print(f"breakwater: note: the file holds {len(logs)} sessions; wrote {logs[0].id}; use -o DIR for all "
                  f"or --session ID", file=sys.stderr)
        return 0
    to_dir = len(logs) > 1 or out.is_dir()
    try:
        (out if to_dir else out.parent).mkdir(parents=True, exist_ok=True)
        targets = [(log, out / _file_name(log.id) if to_dir else out) for log in logs]
        for log, target in targets:
            with open(target, "w", encoding="utf-8") as fh:
                write_native(log, fh)
    except OSError as exc:
        return fail(f"{out}: cannot write ({exc.strerror or exc})")
    for log, target in targets:
        n_msg = len(log.messages)
        print(f"{target}: {n_msg:,} messages, {len(log.entries) - n_msg:,} events, {log.turn_count():,} turns "
              f"(from {log.source_format})", file=sys.stderr)
    return 0
