"""The sessions a user already has, found where their agents keep them (for `breakwater browse`).

Claude Code: ~/.claude/projects/<cwd-slug>/<id>.jsonl; Codex: ~/.codex/sessions/YYYY/MM/DD/
rollout-*.jsonl; pi: ~/.pi/agent/sessions/--<cwd>--/*.jsonl; Breakwater's own agent: the
workspace's .agent/sessions/*.jsonl. Each file is described from its first and last 64 KB only
(project, model, the last request's tokens): a listing of hundreds of sessions reads a few MB,
never whole transcripts.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from breakwater.core.log.regular_file import open_regular

EDGE = 65536   # bytes read at each end of a file


@dataclass(frozen=True, slots=True)
class FoundSession:
    path: Path
    agent: str           # Claude Code, Codex, pi, Breakwater
    project: str         # the directory the agent worked in, as the file says (else its folder's name)
    modified: float      # mtime, seconds
    size: int            # bytes
    model: str | None
    last_tokens: int | None   # the last request's prompt tokens, as the API reported them


def _edges(path: Path, size: int) -> tuple[list[str], list[str]]:
    """The whole lines in the first and the last EDGE bytes (one list when the file is small)."""
    with os.fdopen(open_regular(path), "rb") as fh:   # a FIFO or a device put there since: refused, not read
        head = fh.read(EDGE)
        if size <= EDGE:
            lines = head.decode("utf-8", "replace").splitlines()
            return lines, lines
        fh.seek(max(EDGE, size - EDGE))
        tail = fh.read(EDGE)
    head_lines = head.decode("utf-8", "replace").splitlines()[:-1]   # the last one is cut
    tail_lines = tail.decode("utf-8", "replace").splitlines()[1:]    # so is the first
    return head_lines, tail_lines


def _records(lines: list[str], reverse: bool = False) -> Iterator[dict[str, Any]]:
    for line in reversed(lines) if reverse else lines:
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict):
            yield obj


def _int(*values: Any) -> int | None:
    ints = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
    return sum(ints) if ints else None


def _claude(head: list[str], tail: list[str]) -> tuple[str | None, str | None, int | None]:
    project = next((r["cwd"] for r in _records(head) if isinstance(r.get("cwd"), str)), None)
    for r in _records(tail, reverse=True):
        msg = r.get("message")
        if r.get("type") == "assistant" and isinstance(msg, dict) and isinstance(msg.get("usage"), dict):
            u = msg["usage"]
            tokens = _int(u.get("input_tokens"), u.get("cache_read_input_tokens"), u.get("cache_creation_input_tokens"))
            return project, msg.get("model") if isinstance(msg.get("model"), str) else None, tokens
    return project, None, None


def _codex(head: list[str], tail: list[str]) -> tuple[str | None, str | None, int | None]:
    project = model = tokens = None
    for r in _records(head):
        p = r.get("payload") if isinstance(r.get("payload"), dict) else {}
        if r.get("type") == "session_meta" and isinstance(p.get("cwd"), str):
            project = p["cwd"]
            break
    for r in _records(tail, reverse=True):
        p = r.get("payload") if isinstance(r.get("payload"), dict) else {}
        if model is None and r.get("type") == "turn_context" and isinstance(p.get("model"), str):
            model = p["model"]
        info = p.get("info") if isinstance(p.get("info"), dict) else None
        last = info.get("last_token_usage") if info else None
        if tokens is None and p.get("type") == "token_count" and isinstance(last, dict):
            tokens = _int(last.get("input_tokens"))
        if model is not None and tokens is not None:
            break
    return project, model, tokens


def _pi(head: list[str], tail: list[str]) -> tuple[str | None, str | None, int | None]:
    first = next(_records(head[:1]), {})
    project = first.get("cwd") if isinstance(first.get("cwd"), str) else None
    model = first.get("modelId") if isinstance(first.get("modelId"), str) else None
    for r in _records(tail, reverse=True):
        msg = r.get("message")
        if isinstance(msg, dict) and msg.get("role") == "assistant" and isinstance(msg.get("usage"), dict):
            u = msg["usage"]
            return project, msg.get("model") or model, _int(u.get("input"), u.get("cacheRead"), u.get("cacheWrite"))
    return project, model, None


def _native(head: list[str], tail: list[str]) -> tuple[str | None, str | None, int | None]:
    first = next(_records(head[:1]), {})
    project = first.get("workspace") if isinstance(first.get("workspace"), str) else None
    model = first.get("model") if isinstance(first.get("model"), str) else None
    for r in _records(tail, reverse=True):
        if r.get("type") == "usage":
            return project, model, _int(r.get("prompt_tokens"))
    return project, model, None


Describe = Callable[[list[str], list[str]], tuple[str | None, str | None, int | None]]


def _places(home: Path, workspace: Path) -> list[tuple[str, Path, str, Describe]]:
    """(agent, folder, glob, how to describe a file) of every place sessions are kept."""
    return [("Claude Code", home / ".claude" / "projects", "*/*.jsonl", _claude),
            ("Codex", home / ".codex" / "sessions", "*/*/*/rollout-*.jsonl", _codex),
            ("pi", home / ".pi" / "agent" / "sessions", "*/*.jsonl", _pi),
            ("Breakwater", workspace / ".agent" / "sessions", "*.jsonl", _native),
            ("Breakwater proxy", proxy_sessions_dir(), "*.jsonl", _native)]


def proxy_sessions_dir() -> Path:
    """Where `breakwater proxy` records the conversations it sees (its --sessions, by default): beside
    the overlays in Breakwater's state folder (core/overlay.py's `state_dir`, not imported: it brings the
    whole pipeline, 0.13 s, into a listing)."""
    return Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "breakwater" / "proxy"


def find_sessions(home: Path | None = None, workspace: Path | None = None) -> list[FoundSession]:
    """Every session found, newest first. A file that cannot be read is left out, not reported:
    the listing is of what can be opened."""
    home = Path(home or os.environ.get("HOME") or Path.home())
    workspace = Path(workspace or Path.cwd())
    found: list[FoundSession] = []
    for agent, folder, pattern, describe in _places(home, workspace):
        if not folder.is_dir():
            continue
        for path in folder.glob(pattern):
            if path.name.endswith(".overlay.jsonl"):
                continue   # the workbench's own notes on a recording, not a session
            try:
                st = path.stat()
                if not st.st_size or not stat.S_ISREG(st.st_mode):
                    continue
                project, model, tokens = describe(*_edges(path, st.st_size))
            except OSError:
                continue
            # else the folder: Claude Code's and pi's name the directory; Breakwater's is the workspace's
            project = project or (str(workspace) if agent == "Breakwater" else path.parent.name)
            found.append(FoundSession(path, agent, project, st.st_mtime, st.st_size, model, tokens))
    found.sort(key=lambda s: s.modified, reverse=True)
    return found


def by_project(found: list[FoundSession]) -> list[tuple[str, list[FoundSession]]]:
    """Groups of sessions by project, the project with the newest session first; newest first within."""
    groups: dict[str, list[FoundSession]] = {}
    for s in found:   # already newest first
        groups.setdefault(s.project, []).append(s)
    return list(groups.items())
