"""Each conversation the proxy sees is a session, recorded as a native session log (core/log/session_log.py)
that `browse` lists and `replay --follow` follows.

A request belongs to the session whose history it extends: its messages start with the messages the
session has logged (the earlier requests' and the replies'), matched by `fingerprint`; where the agent
names its own session (Claude Code's metadata, Codex's header) only that one's sessions are candidates.
Anything else starts a session of its own (one of the agent's own session id that does not extend an
earlier request, as when Claude Code compacts its history itself, names the session it `continues`).

The log holds, per request: the new messages of the agent's history (so the pipeline folds them as it
folds any session), a `note` of kind `request` naming the bytes the agent sent and the bytes sent
upstream (kept whole beside the log, in `<log>.requests/`, so a count of the request is exact and a
test can compare them byte for byte), the tools when they change, and after the reply the assistant
message and a `usage` event with the provider's figures as billed. Headers are never recorded: the
client's key goes upstream and nowhere else.

In compact mode the session keeps a `Pipeline` fed with the log (and the workbench's overlay beside it:
pins, triggers, undos, manual compactions), and each request goes out as the pipeline's view of it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from types import ModuleType
from typing import Any

from breakwater.core.fold.cache_worth import CachePricing
from breakwater.core.fold.pipeline import Pipeline
from breakwater.core.log.message import Message
from breakwater.core.log.models import resolve_window
from breakwater.core.log.session_log import Event, SessionLog, new_session_id, utc_now
from breakwater.core.log.tokens import TokenCounter, heuristic_messages
from breakwater.core.overlay import OverlayFile, apply_overlay, overlay_path
from breakwater.core.policy import Policy
from breakwater.proxy.wire import Conversation, Reply, fingerprint

MAX_SESSIONS = 256   # sessions kept in memory to match requests against; the oldest are let go
SIDE_DIR = ".requests"


@dataclass(frozen=True, slots=True)
class Settings:
    folder: Path            # where the session logs go
    mode: str               # "observe" | "compact"
    policy: Policy
    upstream: str           # the provider's base URL, without credentials
    fixed_window: bool = False   # the policy's window stands (a policy file states one); else the model's
    summarizer: Any = None       # deep compactions' summaries: None, the offline extractive one; else a model's


def _file_name(session_id: str) -> str:
    return f"{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}-{session_id[:8]}.jsonl"


class ProxySession:
    def __init__(self, settings: Settings, wire: ModuleType, conv: Conversation, client: str,
                 continues: str | None = None):
        self.settings = settings
        self.wire = wire.NAME
        self.agent_session = conv.agent_session
        self.id = new_session_id()
        policy = settings.policy
        header: dict[str, Any] = {"id": self.id, "agent": "proxy", "client": client, "wire": wire.NAME,
                                  "model": conv.model, "upstream": settings.upstream, "mode": settings.mode,
                                  "agent_session": conv.agent_session}
        if continues:
            header["continues"] = continues
        window, source = resolve_window({"model": conv.model}, None, None)
        if window and not settings.fixed_window and source != "policy" and window != policy.window:
            policy = policy.with_changes(window=window)
        self.policy = policy
        header.update({"window": policy.window, "preset": policy.preset, "policy": policy.to_dict()})
        settings.folder.mkdir(parents=True, exist_ok=True)
        self.log = SessionLog.create(settings.folder / _file_name(self.id), header)
        self.side = self.log.path.with_name(self.log.path.name + SIDE_DIR)
        self.side.mkdir(exist_ok=True)
        self.known: list[str] = []       # fingerprints of the history logged (system excluded)
        self.ids: list[str] = []         # the log's ids of those messages
        self.requests = 0                # requests seen (each kept beside the log under its number)
        self.replies = 0
        self.tools: Any = None
        self.tools_sha: str | None = None
        self.system: str | None = None
        self.used = time.monotonic()
        self.pipe: Pipeline | None = None
        self._overlay_stamp: tuple[int, int] | None = None
        self._tools_note: dict[str, Any] = {}   # the request's note as far as the pipeline reads it (`view`)
        self._estimate: int | None = None       # heuristic tokens of the view sent upstream (compacting)
        self.lock = asyncio.Lock()    # compacting: one request of the session at a time (its view is planned in a thread)

    # -- matching ---------------------------------------------------------------------------------
    def extends(self, fps: list[str]) -> int:
        """How much of the request's history this session already holds (-1: the request is not this
        session's). The last reply may come back as the agent keeps it, not as it streamed (a reply
        cut by the agent, text it trimmed): a history that differs only there is still this one."""
        n = len(self.known)
        if n <= len(fps) and fps[:n] == self.known:
            return n
        if n and n <= len(fps) and fps[:n - 1] == self.known[:-1] and self._reply_last:
            return n - 1
        return -1

    _reply_last = False

    # -- one request --------------------------------------------------------------------------------
    def take(self, conv: Conversation, fps: list[str], held: int, received: bytes,
             path: str) -> tuple[int, dict[str, Any]]:
        """Log the request's new messages and keep what the agent sent; the request's turn (the request
        that produces the session's next reply: a retry after an error has the same) and its note."""
        self.requests += 1
        turn = self.replies + 1
        self.used = time.monotonic()
        if self.system is None and conv.system:
            self._append(Message(self.log.next_message_id(), "system", conv.system, turn=0, meta={"ts": utc_now()}))
        self.system = conv.system if self.system is None else self.system
        if held < len(self.known):      # the reply as the agent kept it
            self.known[held] = fps[held]
            self._reply_last = False
        for k in range(len(self.known), len(conv.items)):
            m = conv.items[k].message
            logged = self._append(Message(self.log.next_message_id(), m.role, m.content, m.tool_calls,
                                          m.tool_call_id, m.name, turn, {"ts": utc_now()}))
            self.known.append(fps[k])
            self.ids.append(logged.id)
            self._reply_last = False
        for k, item in enumerate(conv.items):   # the log's ids, for the pipeline's view to be put back
            item.message = Message(self.ids[k], item.message.role, item.message.content, item.message.tool_calls,
                                   item.message.tool_call_id, item.message.name, item.message.turn)
        data: dict[str, Any] = {"kind": "request", "turn": turn, "wire": self.wire, "path": path,
                                "model": conv.model, "stream": conv.stream, "messages": len(conv.items),
                                "received": self._keep("received", received)}
        if conv.system != self.system:
            data["system"] = conv.system          # a system prompt that changed within the session
        if conv.tools is not None:
            if conv.tools != self.tools:   # compared as values: hashing 60 KB of schemas each request cost 0.5 ms
                text = json.dumps(conv.tools, ensure_ascii=False, sort_keys=True)
                self.tools_sha = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
                self.tools = conv.tools
                data["tools"] = conv.tools
            data["tools_sha256"] = self.tools_sha
        self._tools_note = {"kind": "request", **({"tools": data["tools"]} if "tools" in data else {})}
        return turn, data

    def sent(self, turn: int, data: dict[str, Any], body: bytes, same: bool) -> None:
        """What went upstream for request `turn`, logged with what the agent sent in one note (the
        pipeline had it before the view was planned: `view`)."""
        data["sent"] = data["received"] if same else self._keep("sent", body)
        self._append(Event("note", self.log.next_event_id(), data), feed=False)

    def finish(self, turn: int, status: int, reply: Reply | None, error: str | None = None) -> None:
        if status >= 400 or reply is None:
            self._append(Event("error", self.log.next_event_id(),
                               {"kind": "upstream", "turn": turn, "status": status, "message": error or ""}))
            return
        if reply.text or reply.tool_calls:
            meta: dict[str, Any] = {"ts": utc_now()}
            if reply.stop:
                meta["finish_reason"] = reply.stop
            if reply.model:
                meta["model"] = reply.model
            msg = self._append(Message(self.log.next_message_id(), "assistant", reply.text, tuple(reply.tool_calls),
                                       turn=turn, meta=meta))
            self.replies += 1
            self.known.append(fingerprint(msg))
            self.ids.append(msg.id)
            self._reply_last = True
        if reply.usage is not None:
            # compacting, the bill is for the view sent, not for the agent's request: its count is the pair's
            # other side (core/fold/own_request.py); observing, the two are one
            estimate = {"estimate": self._estimate} if self.pipe is not None and self._estimate is not None else {}
            self._append(Event("usage", self.log.next_event_id(), {"turn": turn, **reply.usage.record(), **estimate}))

    def _keep(self, what: str, body: bytes) -> dict[str, Any]:
        name = f"{self.requests:05d}.{what}.json"
        fd = os.open(self.side / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(body)
        return {"file": f"{self.side.name}/{name}", "bytes": len(body), "sha256": hashlib.sha256(body).hexdigest()}

    def _append(self, entry, feed: bool = True):
        entry = self.log.append(entry)
        if feed and self.pipe is not None:
            self.pipe.feed(entry)
        return entry

    # -- compaction -----------------------------------------------------------------------------------
    def view(self) -> tuple[list[Message], dict[str, int]]:
        """The pipeline's view of the next request (a deep compaction it decides is logged), and how
        edits of each kind shaped it. The workbench's overlay, when it changed, is read first: the pipeline is
        folded again from the log with it, so a pin, trigger or undo counts from this request."""
        self._sync_overlay()
        # the request's tool schemas are part of it (core/log/accounting.py `whole`): the pipeline knows
        # them before planning, as one folding the log does (its note is logged once the view is sent)
        self.pipe.feed(Event("note", "request", self._tools_note))
        view, comp = self.pipe.view()
        self._estimate = heuristic_messages(view.messages)
        take = getattr(self.settings.summarizer, "take_outcomes", None)
        failed = [o for o in take() if not o.ok] if take is not None else []
        if comp is not None:
            event = comp.to_event()
            if failed:   # the model's summary was refused: the offline one stands, and the log says why
                event = Event(event.type, event.id, {**event.data, "reason": failed[-1].reason})
            self.log.append(event)
        return list(view.messages), view.edit_counts()

    def _sync_overlay(self) -> None:
        path = overlay_path(self.log.path)
        try:
            st = os.stat(path)
            stamp = (st.st_size, st.st_mtime_ns)
        except OSError:
            stamp = None
        if self.pipe is not None and stamp == self._overlay_stamp:
            return
        self._overlay_stamp = stamp
        log = self.log
        if stamp is not None:
            log = apply_overlay(log, OverlayFile(path).events)
        self.pipe = Pipeline(self.policy, TokenCounter.for_model(self.log.header.get("model")), mode="exact",
                             summarizer=self.settings.summarizer, cache_pricing=CachePricing.of_session(self.log.header))
        self.pipe.feed_all(log.entries)

    def close(self) -> None:
        self.log.close()


class Tracker:
    """The sessions of one proxy, and which one a request belongs to."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.sessions: list[ProxySession] = []

    def session_for(self, wire: ModuleType, conv: Conversation, client: str) -> tuple[ProxySession, list[str], int]:
        """(the session, the request's fingerprints, how much of its history the session holds)."""
        fps = [fingerprint(it.message) for it in conv.items]
        best, held = None, -1
        for s in self.sessions:
            if s.wire != wire.NAME or (conv.agent_session and s.agent_session != conv.agent_session):
                continue
            n = s.extends(fps)
            if n > held and (n > 0 or (conv.agent_session and not s.known)):
                best, held = s, n
        if best is None:
            # the agent rewrote its history (its own compaction, an edit): a session of its own, naming the one
            # it continues
            earlier = next((s.id for s in reversed(self.sessions) if conv.agent_session
                            and s.agent_session == conv.agent_session and s.wire == wire.NAME), None)
            best, held = ProxySession(self.settings, wire, conv, client, continues=earlier), 0
            self.sessions.append(best)
            if len(self.sessions) > MAX_SESSIONS:
                oldest = min(self.sessions, key=lambda s: s.used)
                self.sessions.remove(oldest)
                oldest.close()
        return best, fps, held

    def close(self) -> None:
        for s in self.sessions:
            s.close()
