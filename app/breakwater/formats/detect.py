"""Telling the formats apart by a file's first record, without importing their readers.

Every command that reads a session asks this first; importing the six readers to ask it took
longer than the questions (~4 ms), and a native session needs none of them.
"""

from __future__ import annotations

from typing import Any, Mapping

# Claude Code line types that carry no model input (titles, UI state, hooks, snapshots)
CLAUDE_METADATA_TYPES = frozenset((
    "summary", "file-history-snapshot", "queue-operation", "progress", "permission-mode", "last-prompt",
    "attachment", "custom-title", "ai-title", "agent-name", "mode", "worktree-state", "frame-link", "pr-link",
    "started", "result", "relocated", "bridge-session", "atis-latch", "tag",
))
# the line types of a Codex rollout
CODEX_ENVELOPES = frozenset(("session_meta", "turn_context", "response_item", "event_msg", "compacted",
                             "world_state", "inter_agent_communication_metadata"))


def looks_like_claude_code(obj: Mapping[str, Any]) -> bool:
    kind = obj.get("type")
    kind = kind if isinstance(kind, str) else None   # a type that is not a string names none
    if "sessionId" in obj and ("parentUuid" in obj or kind in CLAUDE_METADATA_TYPES or kind in ("user", "assistant")):
        return True
    return kind in ("summary", "file-history-snapshot") or ("parentUuid" in obj and "uuid" in obj)


def looks_like_codex(obj: Mapping[str, Any]) -> bool:
    kind = obj.get("type")
    return isinstance(kind, str) and kind in CODEX_ENVELOPES and isinstance(obj.get("payload"), (dict, type(None)))


def looks_like_openai(obj: Mapping[str, Any]) -> bool:
    return isinstance(obj.get("messages"), list) and "type" not in obj


def looks_like_openhands_event(obj: Any) -> bool:
    return isinstance(obj, dict) and "source" in obj and "id" in obj and (
        "action" in obj or "observation" in obj or "kind" in obj)


def looks_like_openhands_eval(obj: Any) -> bool:
    return isinstance(obj, dict) and "instance_id" in obj and isinstance(obj.get("history"), list)


def looks_like_pi(obj: Mapping[str, Any]) -> bool:
    return obj.get("type") == "session" and "cwd" in obj and "created" not in obj


def looks_like_swe_agent(obj: Mapping[str, Any]) -> bool:
    return isinstance(obj.get("history"), list) and ("trajectory" in obj or "info" in obj)


def looks_like_mini_swe_agent(obj: Mapping[str, Any]) -> bool:
    fmt = obj.get("trajectory_format")
    info = obj.get("info")
    return isinstance(obj.get("messages"), list) and (
        isinstance(fmt, str) and fmt.startswith("mini-swe-agent")
        or isinstance(info, dict) and "mini_version" in info)
