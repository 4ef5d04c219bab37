"""Mapping another agent's transcript onto the native session log.

Every importer walks its source once and tells a `SessionBuilder` what the
model saw: user and system text, assistant replies with their tool calls, tool
results, the agent's own compactions and the API's usage figures. The builder
owns what all formats share: results are attached to the call they answer (so
a late or out-of-order result still follows its call), call ids that collide
are made unique, ids and turn numbers are assigned the native way, and every
problem is kept as a warning that names the source line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from breakwater.core.log.message import Message, ToolCall
from breakwater.core.fold.pipeline import RECORDED
from breakwater.core.log.session_log import FORMAT_VERSION, Event, LoadIssue, SessionLog, utc_now

MEDIA = {"image": "image", "input_image": "image", "image_url": "image", "document": "document"}


def blocks_text(content: Any, counts: dict[str, int]) -> str:
    """Text of a content value: a string, or a list of parts (Anthropic blocks, Responses-API or
    chat-completions parts). Images and documents are counted in `counts`, not inlined."""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        return "" if content is None else json.dumps(content, ensure_ascii=False)
    parts = []
    for part in content:
        if isinstance(part, str):
            parts.append(part)
        elif isinstance(part, dict):
            if isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif ref(part.get("type")) in MEDIA:
                kind = MEDIA[part["type"]]
                counts[f"{kind}s"] = counts.get(f"{kind}s", 0) + 1
                parts.append(f"[{kind}]")
    return "\n".join(parts)


def positive_sum(usage: Any, keys: tuple[str, ...]) -> int | None:
    """The sum of a usage record's integer fields `keys`, None when there are none or it is not above
    0 (`Turn.set_usage` takes no such figure: a file's last usage of 0 is not the last figure)."""
    if not isinstance(usage, dict):
        return None
    total = sum(v for v in (usage.get(k) for k in keys) if isinstance(v, int) and not isinstance(v, bool))
    return total if total > 0 else None


def ref(value: Any) -> str | None:
    """An id as a string key, whatever type a damaged or future file gives it."""
    if value is None or value == "":
        return None
    if type(value) is int:   # as json.dumps writes it (OpenHands numbers its events): a call less per event
        return str(value)
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


@dataclass(slots=True)
class _Node:
    kind: str                                 # message | event
    role: str = ""
    content: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    call_id: str | None = None
    name: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    event_type: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    results: list["_Node"] = field(default_factory=list)
    after: list["_Node"] = field(default_factory=list)   # events tied to this reply (its usage)
    cut: "_Node | None" = None                # compaction: first message kept after the summary
    final_id: str = ""


class Turn:
    """An assistant reply still being assembled (Claude Code writes one content block per line)."""

    def __init__(self, builder: "SessionBuilder", node: _Node):
        self._b = builder
        self._node = node

    @property
    def node(self) -> _Node:
        return self._node

    def add_text(self, text: str) -> None:
        if text:
            n = self._node
            n.content = f"{n.content}\n\n{text}" if n.content else text

    def add_call(self, call_id: str | None, name: str, arguments: Any, line: int) -> str:
        return self._b._add_call(self._node, call_id, name, arguments, line)

    def add_block(self, block: dict[str, Any], line: int, call_type: str, args_key: str) -> bool:
        """One content block of a reply (text, thinking, a tool call named `call_type` whose
        arguments are under `args_key`); False for a kind it does not know."""
        kind = ref(block.get("type"))
        if kind == "text":
            self.add_text(str(block.get("text") or ""))
        elif kind == "thinking":
            self.add_meta_text("thinking", str(block.get("thinking") or ""))
        elif kind == "redacted_thinking":
            self.count_meta("redacted_thinking")
        elif kind == call_type:
            self.add_call(block.get("id"), str(block.get("name") or ""), block.get(args_key), line)
        else:
            return False
        return True

    def add_meta_text(self, key: str, text: str) -> None:
        if text:
            prev = self._node.meta.get(key)
            self._node.meta[key] = f"{prev}\n\n{text}" if prev else text

    def set_meta(self, key: str, value: Any) -> None:
        self._node.meta[key] = value

    def count_meta(self, key: str, n: int = 1) -> None:
        self._node.meta[key] = self._node.meta.get(key, 0) + n

    def set_usage(self, prompt_tokens: int | None, completion_tokens: int | None, line: int,
                  **extra: Any) -> None:
        """The API's own counts for this reply (the last call wins: streamed lines repeat them)."""
        if not isinstance(prompt_tokens, int) or prompt_tokens <= 0:
            return
        data = {"prompt_tokens": prompt_tokens, "source_line": line, **extra}
        if isinstance(completion_tokens, int):
            data["completion_tokens"] = completion_tokens
        self._node.after = [n for n in self._node.after if n.event_type != "usage"]
        self._node.after.append(_Node("event", event_type="usage", data=data))


class SessionBuilder:
    def __init__(self, path: Path, source_format: str, session_id: str, header: Mapping[str, Any] | None = None):
        self.path = Path(path)
        self.source_format = source_format
        self.header: dict[str, Any] = {"type": "session", "version": FORMAT_VERSION, "id": session_id}
        self.header.update(header or {})
        self.header.setdefault("created", utc_now())  # also what tells a native header from a pi one
        self.nodes: list[_Node] = []
        self.issues: list[LoadIssue] = []
        self.skipped: dict[str, int] = {}
        self._unknown_first: dict[str, int] = {}
        self._open_calls: dict[str, _Node] = {}    # source call id -> assistant node still awaiting its result
        self._call_ids: dict[str, str] = {}        # source call id -> unique id given to its latest call
        self._used_ids: set[str] = set()
        self._renamed = 0

    # -- problems ------------------------------------------------------------------------------
    def warn(self, line: int, reason: str) -> None:
        self.issues.append(LoadIssue(str(self.path), line, reason))

    def skip(self, kind: str, line: int, known: bool = True) -> None:
        """A source line that holds nothing the model saw. Unknown kinds are warned about once."""
        self.skipped[kind] = self.skipped.get(kind, 0) + 1
        if not known and kind not in self._unknown_first:
            self._unknown_first[kind] = line

    # -- content -------------------------------------------------------------------------------
    def _message(self, role: str, content: str, line: int, meta: Mapping[str, Any] | None) -> _Node:
        m = {"source_line": line}
        if meta:
            m.update({k: v for k, v in meta.items() if v is not None})
        node = _Node("message", role=role, content=content, meta=m)
        self.nodes.append(node)
        return node

    def system(self, content: str, line: int, meta: Mapping[str, Any] | None = None) -> None:
        self._message("system", content, line, meta)

    def user(self, content: str, line: int, meta: Mapping[str, Any] | None = None) -> _Node:
        return self._message("user", content, line, meta)

    def assistant(self, line: int, text: str = "", meta: Mapping[str, Any] | None = None) -> Turn:
        turn = Turn(self, self._message("assistant", "", line, meta))
        turn.add_text(text)
        return turn

    def _add_call(self, node: _Node, call_id: str | None, name: str, arguments: Any, line: int) -> str:
        source_id = str(call_id) if call_id else f"call_line{line}_{len(node.calls) + 1}"
        if not call_id:
            self.warn(line, f"tool call {name!r} has no id; named it {source_id}")
        unique = source_id
        if unique in self._used_ids:
            self._renamed += 1
            unique = f"{source_id}~{self._renamed}"
            if self._renamed == 1:
                self.warn(line, f"tool call id {source_id!r} is used more than once; later calls get a suffix (~n)")
        self._used_ids.add(unique)
        self._call_ids[source_id] = unique
        self._open_calls[source_id] = node
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments if arguments is not None else {}, ensure_ascii=False)
        node.calls.append(ToolCall(unique, str(name or ""), arguments))
        return unique

    def tool_result(self, call_id: str | None, content: str, line: int, meta: Mapping[str, Any] | None = None,
                    name: str | None = None) -> None:
        m = {"source_line": line}
        if meta:
            m.update({k: v for k, v in meta.items() if v is not None})
        source_id = str(call_id) if call_id else None
        if source_id is None and len(self._open_calls) == 1:
            source_id = next(iter(self._open_calls))  # the one call it can answer
            self.warn(line, f"tool result without a call id; paired with the only open call {source_id}")
        owner = self._open_calls.get(source_id) if source_id else None
        if owner is None:
            unique = self._call_ids.get(source_id or "")
            if source_id is None:
                self.warn(line, "tool result without a call id, and no single open call it could answer")
            elif unique is None:
                self.warn(line, f"tool result for {source_id!r}, a call this transcript does not hold")
            else:
                self.warn(line, f"a second result for tool call {source_id!r}")
            self.nodes.append(_Node("message", role="tool", content=content, call_id=unique or source_id,
                                    name=name, meta=m))
            return
        del self._open_calls[source_id]
        owner.results.append(_Node("message", role="tool", content=content, call_id=self._call_ids[source_id],
                                   name=name, meta=m))

    # -- events --------------------------------------------------------------------------------
    def event(self, event_type: str, line: int, **data: Any) -> None:
        self.nodes.append(_Node("event", event_type=event_type, data={"source_line": line, **data}))

    def compaction(self, summary: str, line: int, cut: _Node | None = None, **data: Any) -> None:
        """The original agent's own deep compaction: everything before `cut` (all, when None) was
        replaced by `summary` in what the model saw next."""
        node = _Node("event", event_type="compaction",
                     data={"stage": "deep_compact", "trigger": RECORDED, "summary": summary,
                           "summarizer": self.source_format, "recorded_by": self.source_format,
                           "source_line": line, **data})
        node.cut = cut
        self.nodes.append(node)

    def last_message(self) -> _Node | None:
        for node in reversed(self.nodes):
            if node.kind == "message":
                return node
        return None

    # -- the result ----------------------------------------------------------------------------
    def build(self) -> SessionLog:
        for kind, line in self._unknown_first.items():
            self.warn(line, f"unknown line type {kind!r} skipped ({self.skipped[kind]} line"
                      f"{'s' if self.skipped[kind] != 1 else ''})")
        entries: list[Message | Event] = []
        models: dict[str, int] = {}   # the model each reply names, by how many name it
        n_msg = n_ev = assistants = 0
        flat: list[_Node | None] = []
        for node in self.nodes:
            flat.append(node)
            flat.extend(node.after)
            flat.extend(node.results)
        # each node goes once its entry is made (a compaction keeps the one it cuts at, for its id), so
        # that a long session's nodes do not all live beside its messages; the builder is spent
        self.nodes = []
        self._open_calls.clear()
        for k, node in enumerate(flat):
            flat[k] = None
            if node.kind == "message":
                if node.role == "assistant":
                    assistants += 1
                    turn = assistants
                else:
                    turn = 0 if node.role == "system" and not entries else assistants + 1
                node.final_id = f"m{n_msg:05d}"
                msg = Message(node.final_id, node.role, node.content, tuple(node.calls), node.call_id, node.name,
                              turn, node.meta or None)
                if node.role == "assistant" and node.meta and isinstance(node.meta.get("model"), str) \
                        and node.meta["model"]:
                    models[node.meta["model"]] = models.get(node.meta["model"], 0) + 1
                n_msg += 1
                entries.append(msg)
                continue
            data = dict(node.data)
            if node.event_type == "compaction":
                data["cut_id"] = node.cut.final_id if node.cut is not None and node.cut.final_id else None
                data.setdefault("turn", assistants + 1)
            elif node.event_type == "usage":   # paired by the pipeline with its own count (core/fold/own_request.py)
                data.setdefault("turn", assistants)
            entries.append(Event(node.event_type, f"e{n_ev:05d}", data))
            n_ev += 1
        header = dict(self.header)
        if not (isinstance(header.get("model"), str) and header["model"]) and models:
            # a header naming no model while the replies do (pi writes it on each assistant message): the
            # model most replies name picks the window, the prices and the tokenizer (issue 36)
            header["model"] = max(models, key=models.__getitem__)
        header["imported"] = {"format": self.source_format, "path": str(self.path), "skipped": dict(self.skipped)}
        return SessionLog(header=header, entries=entries, path=self.path, issues=self.issues,
                          source_format=self.source_format)
