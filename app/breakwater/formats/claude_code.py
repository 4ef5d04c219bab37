"""Claude Code session transcripts (`~/.claude/projects/<cwd>/<sessionId>.jsonl`), every CLI version.

Claude Code writes one content block per line: the lines of one API response
share `message.id` and are regrouped into one assistant turn here. Tool results
sit in `user` lines; their top-level `toolUseResult` repeats what the model saw
and is not imported twice. Sidechains (Task subagents, inline before 2.0, in
`agent-*.jsonl` files since) are sessions of their own. A `compact_boundary`
line and the `isCompactSummary` user line after it are Claude Code's own deep
compaction and become a recorded compaction event. The 2.1 attachments the model
is sent (a prompt queued while it worked, a file or CLAUDE.md it loaded, hook
context) become user messages marked with their kind.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Mapping

from breakwater.core.log.regular_file import MAX_CONFIG_BYTES, open_regular, read_regular
from breakwater.core.log.json_lines import iter_json_lines
from breakwater.core.log.session_log import LoadIssue, SessionLog
from breakwater.formats.builder import SessionBuilder, Turn, blocks_text, positive_sum, ref
from breakwater.formats.detect import CLAUDE_METADATA_TYPES

FORMAT = "claude-code"
CONTINUED = "This session is being continued from a previous conversation"

# attachments the model sees, and where their text is
ATTACHMENT_TEXT: dict[str, tuple[str, ...]] = {
    "queued_command": ("prompt",), "hook_additional_context": ("content",), "nested_memory": ("content", "content"),
    "file": ("content", "file", "content"), "edited_text_file": ("snippet",), "invoked_skills": (),
    "hook_blocking_error": ("blockingError", "blockingError"),
}
ERROR_SUBTYPES = frozenset(("api_error", "error", "api_refusal", "model_refusal_fallback"))


def prompt_tokens(usage: Any) -> int | None:
    """A request's prompt as Claude Code's usage counts it: fresh input + cache writes + cache reads.
    The reader and the session list (formats/sessions.py) both take it from here: one figure on both screens (37.10)."""
    return positive_sum(usage, ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))


def _usage(turn: Turn, usage: Any, line: int, model: Any) -> None:
    if not isinstance(usage, dict):
        return
    ints = {k: v for k, v in usage.items() if isinstance(v, int)}
    prompt = prompt_tokens(usage)
    extra = {"model": model} if isinstance(model, str) else {}
    if ints.get("cache_read_input_tokens"):
        extra["cached_tokens"] = ints["cache_read_input_tokens"]
    if ints.get("cache_creation_input_tokens"):   # the cache model is checked against it (core/cache.py)
        extra["cache_write_tokens"] = ints["cache_creation_input_tokens"]
    turn.set_usage(prompt, ints.get("output_tokens"), line, **extra)


class _Session:
    """Feeds the lines of one session (main chain, one sidechain, or one subagent file) to a builder."""

    def __init__(self, path: Path, session_id: str, header: dict[str, Any]):
        self.b = SessionBuilder(path, FORMAT, session_id, header)
        self.turn: Turn | None = None
        self.turn_mid: str | None = None
        self.boundary: tuple[int, dict[str, Any]] | None = None
        self.by_uuid: dict[str, Any] = {}
        self.unknown_blocks: set[str] = set()
        self.seen_message = False

    def _close_turn(self) -> None:
        self.turn, self.turn_mid = None, None

    def _flush_boundary(self, reason: str) -> None:
        if self.boundary is None:
            return
        line, data = self.boundary
        self.boundary = None
        self.b.warn(line, f"compact_boundary without its summary line ({reason}); summary left empty")
        self.b.compaction("", line, **data)

    def feed(self, line: int, obj: Mapping[str, Any]) -> None:
        kind = ref(obj.get("type"))
        if kind == "assistant":
            self._assistant(line, obj)
        elif kind == "user":
            self._user(line, obj)
        elif kind == "system":
            self._system(line, obj)
        elif kind == "attachment" and isinstance(obj.get("attachment"), dict):
            self._attachment(line, obj)
        elif isinstance(kind, str):
            self.b.skip(kind, line, known=kind in CLAUDE_METADATA_TYPES)   # skipped and counted
        else:
            self.b.warn(line, "line has no \"type\", skipped")

    def _system(self, line: int, obj: Mapping[str, Any]) -> None:
        sub = ref(obj.get("subtype"))
        if sub == "compact_boundary":
            self._flush_boundary("another boundary follows")
            self._close_turn()
            meta = obj.get("compactMetadata") if isinstance(obj.get("compactMetadata"), dict) else {}
            data: dict[str, Any] = {"original_trigger": meta.get("trigger") or obj.get("trigger") or "auto"}
            if isinstance(meta.get("preTokens"), int):
                data["tokens_before"] = meta["preTokens"]
            seg = meta.get("preservedSegment")
            head = ref(seg.get("headUuid")) if isinstance(seg, dict) else None
            if head in self.by_uuid:
                data["preserved_from"] = head
            self.boundary = (line, data)
        elif sub in ERROR_SUBTYPES:
            err = obj.get("error")
            message = err.get("message") if isinstance(err, dict) else err
            self.b.event("error", line, kind=sub, message=str(message or obj.get("content") or sub),
                         ts=obj.get("timestamp"))
        else:
            self.b.skip(f"system/{sub}", line)

    def _attachment(self, line: int, obj: Mapping[str, Any]) -> None:
        """Claude Code 2.1 sends some attachments to the model as user-side reminders: a prompt
        typed while it worked, a file or CLAUDE.md it loaded, hook context. Those are imported;
        the rest only drives the UI."""
        att = obj["attachment"]
        kind = ref(att.get("type"))
        path = ATTACHMENT_TEXT.get(kind or "")
        value: Any = att
        for key in path or ():
            value = value.get(key) if isinstance(value, dict) else None
        if kind == "invoked_skills" and isinstance(att.get("skills"), list):
            value = [sk.get("content") for sk in att["skills"] if isinstance(sk, dict)]
            value = [v for v in value if isinstance(v, str)]
        counts: dict[str, int] = {}
        text = blocks_text(value, counts) if path is not None else ""
        if not text:
            self.b.skip(f"attachment/{kind}", line)
            return
        self._flush_boundary("a message came first")
        self._close_turn()
        self.b.user(text, line, {"ts": obj.get("timestamp"), "attachment": kind, **counts})

    def _user(self, line: int, obj: Mapping[str, Any]) -> None:
        msg = obj.get("message")
        if not isinstance(msg, dict):
            self.b.warn(line, "user line without a message, skipped")
            return
        content = msg.get("content")
        meta = {"ts": obj.get("timestamp")}
        text = content if isinstance(content, str) else None
        if obj.get("isCompactSummary") or (not self.seen_message and isinstance(text, str)
                                           and text.startswith(CONTINUED)):
            self._summary(line, text if text is not None else blocks_text(content or (), {}))
            return
        if obj.get("isVisibleInTranscriptOnly"):
            self.b.skip("user/transcript-only", line)
            return
        self._flush_boundary("a message came first")
        self.seen_message = True
        if isinstance(content, str):
            self._close_turn()
            node = self.b.user(content, line, meta)
            self.by_uuid.setdefault(ref(obj.get("uuid")), node)
            return
        if not isinstance(content, list):
            self.b.warn(line, "user message content is neither text nor a list of blocks, skipped")
            return
        texts: list[str] = []
        counts: dict[str, int] = {}
        for block in content:
            if not isinstance(block, dict):
                if isinstance(block, str):
                    texts.append(block)
                continue
            bkind = ref(block.get("type"))
            if bkind == "tool_result":
                res_meta: dict[str, Any] = {"ts": obj.get("timestamp")}
                raw = block.get("content")
                if isinstance(raw, list):
                    body = blocks_text(raw, res_meta)
                elif raw is None:
                    body = str(block.get("text") or "")
                else:
                    body = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False)
                if isinstance(block.get("is_error"), bool):
                    # Claude Code says whether each call failed (a command's non-zero exit among them):
                    # a result it says succeeded states no error, whatever its lines say
                    res_meta["is_error"] = block["is_error"]
                self.b.tool_result(block.get("tool_use_id"), body, line, res_meta)
            elif bkind == "text":
                texts.append(str(block.get("text") or ""))
            elif bkind in ("image", "document"):
                counts[f"{bkind}s"] = counts.get(f"{bkind}s", 0) + 1
                texts.append(f"[{bkind}]")
            else:
                self._unknown_block(line, bkind)
        if texts:
            self._close_turn()
            node = self.b.user("\n".join(texts), line, {**meta, **counts})
            self.by_uuid.setdefault(ref(obj.get("uuid")), node)

    def _summary(self, line: int, text: str) -> None:
        self._close_turn()
        data = {"original_trigger": "auto"}
        if self.boundary is not None:
            data = self.boundary[1]
            self.boundary = None
        elif self.seen_message:
            self.b.warn(line, "compaction summary without a compact_boundary line before it")
        cut = self.by_uuid.get(data.pop("preserved_from", None))
        self.b.compaction(text, line, cut=cut, **data)
        self.seen_message = True

    def _assistant(self, line: int, obj: Mapping[str, Any]) -> None:
        msg = obj.get("message")
        if not isinstance(msg, dict):
            self.b.warn(line, "assistant line without a message, skipped")
            return
        self._flush_boundary("a message came first")
        self.seen_message = True
        content = msg.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list):
            self.b.warn(line, "assistant message content is neither text nor a list of blocks, skipped")
            return
        model = msg.get("model")
        if model == "<synthetic>" or obj.get("isApiErrorMessage"):
            # written by the CLI itself (an API error shown as a reply); no model request produced it
            text = blocks_text(blocks, {})
            self.b.event("note", line, kind="synthetic_reply", text=text, ts=obj.get("timestamp"))
            return
        mid = ref(msg.get("id"))
        if self.turn is None or mid is None or mid != self.turn_mid:
            self.turn = self.b.assistant(line, meta={"ts": obj.get("timestamp"), "model": model})
            self.turn_mid = mid
            self.by_uuid.setdefault(ref(obj.get("uuid")), self.turn.node)
        turn = self.turn
        for block in blocks:
            if isinstance(block, dict) and not turn.add_block(block, line, "tool_use", "input"):
                self._unknown_block(line, ref(block.get("type")))
        if msg.get("stop_reason"):
            turn.set_meta("stop_reason", msg["stop_reason"])
        _usage(turn, msg.get("usage"), line, model)

    def _unknown_block(self, line: int, kind: Any) -> None:
        key = str(kind)
        if key not in self.unknown_blocks:
            self.unknown_blocks.add(key)
            self.b.warn(line, f"content block of unknown type {key!r} skipped")

    def build(self) -> SessionLog:
        self._flush_boundary("the transcript ends")
        return self.b.build()


def _session_key(uid: str, parents: dict[str, str | None], sidechain_uuids: set[str]) -> str:
    """The root of a sidechain line's chain: one session per root."""
    seen = set()
    while True:
        parent = parents.get(uid)
        if parent not in sidechain_uuids or parent in seen:
            return uid
        seen.add(parent)
        uid = parent


def load_claude_code(path: Path, with_subagents: bool = True) -> list[SessionLog]:
    """Every session the file holds: the main chain first, then each sidechain, then the
    subagent files Claude Code 2.x wrote beside it."""
    path = Path(path)
    records: list[tuple[int, Mapping[str, Any]]] = []
    parse_issues: list[LoadIssue] = []
    for lineno, obj, problem in iter_json_lines(path):
        if problem:
            parse_issues.append(LoadIssue(str(path), lineno, problem))
        if isinstance(obj, dict):
            records.append((lineno, obj))
        elif obj is not None:
            parse_issues.append(LoadIssue(str(path), lineno, f"expected a JSON object, got {type(obj).__name__}"))
    conv = [(n, o) for n, o in records if ref(o.get("type")) in ("user", "assistant")]
    has_main = any(not o.get("isSidechain") for _, o in conv)
    sidechain = {ref(o.get("uuid")) for _, o in records if o.get("isSidechain") and ref(o.get("uuid"))} \
        if has_main else set()
    parents = {ref(o.get("uuid")): ref(o.get("parentUuid")) for _, o in records if ref(o.get("uuid"))}
    first = next((o for _, o in conv), records[0][1] if records else {})
    base_id = str(first.get("sessionId") or path.stem)
    header: dict[str, Any] = {"source": str(path)}
    version = next((o["version"] for _, o in conv if isinstance(o.get("version"), str)), None)
    if version:
        header["cli_version"] = version
    for _, o in records:
        if ref(o.get("type")) in ("custom-title", "ai-title"):
            header.setdefault("title", o.get("customTitle") or o.get("aiTitle"))
        if isinstance(o.get("cwd"), str):
            header.setdefault("cwd", o["cwd"])
    if not has_main and first.get("agentId"):
        main_id = f"agent-{first['agentId']}"
    else:
        main_id = base_id
    sessions: dict[str, _Session] = {"": _Session(path, main_id, dict(header))}
    for lineno, obj in records:
        key = ""
        uid = ref(obj.get("uuid"))
        if uid in sidechain:
            key = _session_key(uid, parents, sidechain)
            if key not in sessions:
                sid = f"agent-{obj['agentId']}" if obj.get("agentId") else f"{base_id}/sidechain-{key[:8]}"
                sessions[key] = _Session(path, sid, {**header, "parent_session": main_id, "sidechain": True})
        sessions[key].feed(lineno, obj)
    logs = [s.build() for s in sessions.values()]
    logs[0].issues[:0] = parse_issues
    for log in logs:
        model = next((m.meta.get("model") for m in reversed(log.messages)
                      if m.role == "assistant" and m.meta and isinstance(m.meta.get("model"), str)), None)
        if model:
            log.header.setdefault("model", model)
    if has_main and with_subagents:
        logs.extend(_subagent_files(path, base_id, main_id))
    return logs


def _subagent_files(path: Path, session_id: str, main_id: str) -> list[SessionLog]:
    """Claude Code 2.1 writes `<sessionId>/subagents/agent-*.jsonl`; 2.0 wrote `agent-*.jsonl`
    beside the session, holding the parent's `sessionId`."""
    if not re.fullmatch(r"[\w.-]+", session_id) or session_id.strip(".") == "":
        return []   # not a name Claude Code gives; never look outside the transcript's folder
    found = sorted((path.parent / session_id / "subagents").glob("agent-*.jsonl"))
    for other in sorted(path.parent.glob("agent-*.jsonl")):
        if other == path:
            continue
        try:
            with os.fdopen(open_regular(other), "rb") as fh:   # never a FIFO or a device: refused
                head = json.loads(fh.readline() or b"{}")
        except (OSError, ValueError):
            continue
        if isinstance(head, dict) and head.get("sessionId") == session_id:
            found.append(other)
    logs = []
    for f in found:
        for log in load_claude_code(f, with_subagents=False):
            log.header.setdefault("parent_session", main_id)
            meta = f.with_suffix(".meta.json")
            if meta.exists():
                try:
                    info = json.loads(read_regular(meta, MAX_CONFIG_BYTES, "subagent meta file").decode("utf-8"))
                except (OSError, ValueError):
                    info = None
                if isinstance(info, dict):
                    log.header.update({k: info[k] for k in ("agentType", "description") if k in info})
            logs.append(log)
    return logs
