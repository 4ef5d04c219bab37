"""`breakwater import SOURCE [--format F] [-o OUT] [--session ID]`: another agent's transcript as native JSONL."""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import sys
from pathlib import Path
from typing import IO

from breakwater.core.log.session_log import SessionLog, SessionLogError
from breakwater.core.log.visible import visible
from breakwater.core.log.words import plural

IMPORT_FORMATS = ("auto", "claude-code", "codex", "pi", "openai", "swe-agent", "mini-swe-agent", "openhands")
MAX_WARNINGS = 50


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("import", help="convert another agent's transcript to a native session file")
    p.add_argument("source", help="transcript file (Claude Code, Codex, pi, OpenAI, SWE-agent, mini-swe-agent, "
                                  "OpenHands)")
    p.add_argument("--format", choices=IMPORT_FORMATS, default="auto", help="source format (default: detected "
                                                                           "from the content)")
    p.add_argument("-o", "--output", metavar="OUT",
                   help="output file (a name ending .jsonl: the principal session, or the one --session picks), or a "
                        "directory for every session of a file holding several (default: the principal one on stdout)")
    p.add_argument("--session", metavar="ID", help="import only this session of a file holding several")
    p.set_defaults(func=cmd_import)


def write_native(log: SessionLog, out: IO[str]) -> None:
    header = dict(log.header)
    header["type"] = "session"
    out.write(json.dumps(header, ensure_ascii=False) + "\n")
    for entry in log.entries:
        out.write(json.dumps(entry.to_record(), ensure_ascii=False) + "\n")


def _file_name(session_id: str) -> str:
    return (re.sub(r"[^A-Za-z0-9._-]+", "_", session_id).strip("_") or "session") + ".jsonl"


def _targets(logs: list[SessionLog], out: Path) -> tuple[list[tuple[SessionLog, Path]], list[str]]:
    """A file in `out` for each session, never one for two (ids that are equal, or equal once made
    a file name: `a/b` and `a_b`), and a note for each name changed."""
    targets, notes, taken = [], [], set()
    for log in logs:
        name = _file_name(log.id)
        stem, n = name.removesuffix(".jsonl"), 1
        while name.lower() in taken:   # case too: a case-insensitive file system would merge them
            n += 1
            name = f"{stem}-{n}.jsonl"
        if n > 1:
            notes.append(f"{out / _file_name(log.id)} is already taken by another session of the file; "
                         f"session {log.id} goes to {out / name}")
        taken.add(name.lower())
        targets.append((log, out / name))
    return targets, notes


def _to_directory(out: Path, several: bool) -> bool:
    """-o names a directory when it is one, ends with a slash, or has no .jsonl name and the file holds
    several sessions; else it is the file to write (never a directory named FILE.jsonl)."""
    if out.is_dir() or str(out).endswith(("/", "\\")):
        return True
    return several and out.suffix.lower() != ".jsonl" and not out.is_file()


def _warn(logs: list[SessionLog]) -> None:
    issues = [i for log in logs for i in log.issues]
    for issue in issues[:MAX_WARNINGS]:
        print(f"breakwater: warning: {issue}", file=sys.stderr)
    if len(issues) > MAX_WARNINGS:
        print(f"breakwater: warning: {len(issues) - MAX_WARNINGS} more", file=sys.stderr)


def cmd_import(args: argparse.Namespace) -> int:
    from breakwater.cli.core import fail
    from breakwater.formats import holds, load_sessions, pick_session

    try:
        logs = load_sessions(args.source, args.format)
    except SessionLogError as exc:
        return fail(str(exc))
    if args.session:
        try:
            logs = [pick_session(args.source, logs, args.session)]
        except SessionLogError as exc:
            return fail(str(exc))
    _warn(logs)
    out = Path(args.output) if args.output else None
    several = len(logs) > 1
    to_dir = out is not None and _to_directory(out, several)
    if not to_dir:
        if several:
            print(f"breakwater: note: {holds(logs)}; wrote {logs[0].id}; -o DIR writes them all, --session ID "
                  f"picks one", file=sys.stderr)
            logs = logs[:1]
        if out is None:
            write_native(logs[0], sys.stdout)
            return 0
        targets, notes = [(logs[0], out)], []
    else:
        targets, notes = _targets(logs, out)
    for note in notes:
        print(f"breakwater: note: {note}", file=sys.stderr)
    replaced = set()
    try:
        folder = out if to_dir else out.parent
        folder.mkdir(parents=True, exist_ok=True)
        left = clean_leftovers(folder)
        if left:
            print(f"breakwater: note: removed {plural(len(left), 'temporary file')} a killed import left in {folder}: "
                  f"{', '.join(visible(n) for n in left[:5])}{' …' if len(left) > 5 else ''}", file=sys.stderr)
        for log, target in targets:
            if target.exists():
                replaced.add(target)
            _write_whole(log, target)
    except OSError as exc:
        return fail(f"{out}: cannot write ({exc.strerror or exc}); every file that was there is as it was")
    for log, target in targets:
        n_msg = len(log.messages)
        print(f"{target}: {n_msg:,} messages, {len(log.entries) - n_msg:,} events, {log.turn_count():,} turns "
              f"(from {log.source_format})" + ("; replaced the file that was there" if target in replaced else ""),
              file=sys.stderr)
    return 0


def _write_whole(log: SessionLog, target: Path) -> None:
    """Written beside the target and renamed (core/log/beneath.py): a full disk or a bad record leaves
    the old file whole."""
    from breakwater.core.log.beneath import replace_beneath

    text = io.StringIO()
    write_native(log, text)
    folder = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        # the temporary file is named after this process: a later import knows it from a running one's
        replace_beneath(folder, target.name, text.getvalue().encode("utf-8"),
                        temp_prefix=f".{target.name[:200]}.{os.getpid()}.")
    finally:
        os.close(folder)


# what _write_whole (core/log/beneath.replace_beneath) names its temporary file: .<name>.<pid>.<12 hex>.tmp;
# before the pid was in the name: .<name>.<12 hex>.tmp
_TEMP = re.compile(r"\.(?P<name>.+\.jsonl)\.(?:(?P<pid>\d+)\.)?[0-9a-f]{12}\.tmp", re.IGNORECASE)
_UNNAMED_STALE_S = 600   # a temporary file without a pid, untouched this long, is no running import's


def clean_leftovers(folder: Path) -> list[str]:
    """Remove the temporary files killed imports left in `folder`, and say which: only names an import
    gives, regular files of this user (never a link: it is not followed, nor removed), of a process
    that no longer runs (or, named before the pid was, untouched for 10 minutes)."""
    import stat
    import time

    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    removed = []
    try:
        for name in sorted(os.listdir(fd)):
            m = _TEMP.fullmatch(name)
            if m is None:
                continue
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
                continue
            if m["pid"] is not None and _running(int(m["pid"])):
                continue
            if m["pid"] is None and time.time() - st.st_mtime < _UNNAMED_STALE_S:
                continue
            try:
                os.unlink(name, dir_fd=fd)
            except FileNotFoundError:
                continue
            removed.append(name)
    finally:
        os.close(fd)
    return removed


def _running(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True
