"""The sessions a user already has, found where their agents keep them (for `breakwater browse`).

Claude Code: ~/.claude/projects/<cwd-slug>/<id>.jsonl; Codex: ~/.codex/sessions/YYYY/MM/DD/
rollout-*.jsonl; pi: ~/.pi/agent/sessions/--<cwd>--/*.jsonl; Breakwater's own agent: the
workspace's .agent/sessions/*.jsonl; the subagents of a Claude Code session
(<id>/subagents/agent-*.jsonl) are sessions of their own. Each file is described from its first and
last 64 KB only (project, model, the last request's tokens, its title or first prompt, when it started
and ended): a listing of hundreds of sessions reads a few MB, never whole transcripts. A file whose
first 64 KB hold no JSON object, or hold NUL bytes, is no transcript and is not listed.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from breakwater.core.log.regular_file import open_regular
from breakwater.formats.claude_code import prompt_tokens as claude_prompt_tokens
from breakwater.formats.codex import prompt_tokens as codex_prompt_tokens
from breakwater.formats.builder import positive_sum
from breakwater.formats.pi import prompt_tokens as pi_prompt_tokens

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
    title: str | None = None      # the title the agent gave it, else its first prompt (one line, as written)
    started: str | None = None    # the first timestamp the file holds (ISO 8601, as written)
    ended: str | None = None      # the last one
    parent: str | None = None     # a subagent's: the session file (stem) it ran under


def _edges(path: Path, size: int) -> tuple[list[str] | None, list[str]]:
    """The whole lines in the first and the last EDGE bytes (one list when the file is small); None
    for the first when the file is no transcript (`is_transcript`)."""
    with os.fdopen(open_regular(path), "rb") as fh:   # a FIFO or a device put there since: refused, not read
        head = fh.read(EDGE)
        if not is_transcript(head):
            return None, []
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


def _claude(head: list[str], tail: list[str]) -> tuple[str | None, str | None, int | None]:
    project = next((r["cwd"] for r in _records(head) if isinstance(r.get("cwd"), str)), None)
    for r in _records(tail, reverse=True):
        msg = r.get("message")
        if r.get("type") == "assistant" and isinstance(msg, dict) and isinstance(msg.get("usage"), dict):
            tokens = claude_prompt_tokens(msg["usage"])
            if tokens is not None:   # a usage of 0 is no figure: the reader skips it too
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
        if tokens is None and p.get("type") == "token_count":
            tokens = codex_prompt_tokens(last)
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
            tokens = pi_prompt_tokens(msg["usage"])
            if tokens is not None:
                return project, msg.get("model") or model, tokens
    return project, model, None


def _native(head: list[str], tail: list[str]) -> tuple[str | None, str | None, int | None]:
    first = next(_records(head[:1]), {})
    project = first.get("workspace") if isinstance(first.get("workspace"), str) else None
    model = first.get("model") if isinstance(first.get("model"), str) else None
    for r in _records(tail, reverse=True):
        tokens = positive_sum(r, ("prompt_tokens",)) if r.get("type") == "usage" else None
        if tokens is not None:
            return project, model, tokens
    return project, model, None


Describe = Callable[[list[str], list[str]], tuple[str | None, str | None, int | None]]

TITLE_CHARS = 200
# what an agent puts in a user message that the user did not type (instructions, environment, commands)
NOT_TYPED = ("<environment_context", "<user_instructions", "# AGENTS.md", "<command-", "<local-command",
             "Caveat: ", "<system-reminder")


def _text(content: Any) -> str | None:
    """The text of a message's content (a string, or a list of text parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
                 and p.get("type") in ("text", "input_text", None)]
        return "\n".join(parts) if parts else None
    return None


def _user_text(r: dict[str, Any]) -> str | None:
    """The text the user typed, if record `r` of any of the formats is one of their prompts."""
    msg = r.get("message") if isinstance(r.get("message"), dict) else None
    payload = r.get("payload") if isinstance(r.get("payload"), dict) else None
    if r.get("type") == "user" and msg is not None and not r.get("isMeta"):                 # Claude Code
        return _text(msg.get("content"))
    if payload is not None and payload.get("type") == "user_message":                       # Codex
        return payload.get("message") if isinstance(payload.get("message"), str) else None
    if payload is not None and payload.get("type") == "message" and payload.get("role") == "user":
        return _text(payload.get("content"))
    if msg is not None and msg.get("role") == "user":                                       # pi
        return _text(msg.get("content"))
    if r.get("type") == "message" and r.get("role") == "user":                              # Breakwater's
        return _text(r.get("content"))
    return None


def _command(text: str) -> bool:
    """A bare slash command (pi's "/mode", "/model"): it sets something, it says nothing of the session."""
    words = text.split()
    return len(words) == 1 and words[0].startswith("/") and words[0][1:2].isalpha() and "/" not in words[0][1:]


def _title(head: list[str]) -> str | None:
    """The title the agent gave the session (Claude Code's custom, AI or summary title; the
    header's), else the first prompt the user typed; one line, at most TITLE_CHARS."""
    titles: dict[str, str] = {}
    prompt = None
    for r in _records(head):
        for key, rank in (("customTitle", "0"), ("aiTitle", "1"), ("summary", "2"), ("title", "3")):
            if isinstance(r.get(key), str) and r[key].strip() and (key != "summary" or r.get("type") == "summary"):
                titles.setdefault(rank, r[key])
        if prompt is None:
            text = _user_text(r)
            if text and text.strip() and not text.lstrip().startswith(NOT_TYPED) and not _command(text):
                prompt = text
    chosen = titles[min(titles)] if titles else prompt
    if chosen is None:
        return None
    line = " ".join(chosen.split())
    return line[:TITLE_CHARS - 1] + "…" if len(line) > TITLE_CHARS else line


def _stamp(r: dict[str, Any]) -> str | None:
    for key in ("timestamp", "created"):
        value = r.get(key)
        if isinstance(value, str) and len(value) >= 10 and value[:4].isdigit():
            return value
    return None


def _times(head: list[str], tail: list[str]) -> tuple[str | None, str | None]:
    first = next((t for t in map(_stamp, _records(head)) if t), None)
    last = next((t for t in map(_stamp, _records(tail, reverse=True)) if t), None)
    return first, last or first


def is_transcript(head: bytes) -> bool:
    """Whether a file's first bytes can be a JSON Lines transcript: no NUL byte, and a line that is
    a JSON object (a binary file or a text file of another kind named .jsonl is not one)."""
    if b"\0" in head:
        return False
    return next(_records(head.decode("utf-8", "replace").splitlines()[:64]), None) is not None


def _places(home: Path, workspace: Path) -> list[tuple[str, Path, str, Describe]]:
    """(agent, folder, glob, how to describe a file) of every place sessions are kept."""
    return [("Claude Code", home / ".claude" / "projects", "*/*.jsonl", _claude),
            ("Claude Code", home / ".claude" / "projects", "*/*/subagents/agent-*.jsonl", _claude),
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
                head, tail = _edges(path, st.st_size)
                if head is None:
                    continue   # not a transcript: binary, or no JSON object in its first lines
                project, model, tokens = describe(head, tail)
                if tokens is None and tail is not head:
                    # the last figure can sit before the last 64 KB (Codex ends with empty token counts)
                    tokens = describe(head, head)[2]
            except OSError:
                continue
            parent = path.parent.parent.name if path.parent.name == "subagents" else None
            # else the folder: Claude Code's and pi's name the directory; Breakwater's is the workspace's
            project = project or (str(workspace) if agent == "Breakwater" else
                                  (path.parents[2] if parent else path.parent).name)
            started, ended = _times(head, tail)
            found.append(FoundSession(path, agent, project, st.st_mtime, st.st_size, model, tokens,
                                      _title(head), started, ended, parent))
    found.sort(key=lambda s: s.modified, reverse=True)
    return found


def by_project(found: list[FoundSession]) -> list[tuple[str, list[FoundSession]]]:
    """Groups of sessions by project, the project with the newest session first; newest first within."""
    groups: dict[str, list[FoundSession]] = {}
    for s in found:   # already newest first
        groups.setdefault(s.project, []).append(s)
    return list(groups.items())


def day(stamp: str | None) -> str | None:
    """The date (YYYY-MM-DD) of an ISO 8601 timestamp as written."""
    return stamp[:10] if stamp and len(stamp) >= 10 and stamp[4] == "-" else None


def date_range(found: list[FoundSession]) -> str | None:
    """The first and last day a group of sessions covers ("2026-01-05 – 2026-01-09"; one day once)."""
    days = sorted(d for s in found for d in (day(s.started), day(s.ended)) if d)
    if not days:
        return None
    return days[0] if days[0] == days[-1] else f"{days[0]} – {days[-1]}"
