"""OpenHands trajectories: the V0 event stream (GUI download: a JSON list; evaluation
`output.jsonl`: one instance a line, its events under `history`) and V1 SDK event JSONL
(discriminated by `kind`).

An agent action that came from a tool call carries the model response it came from
(V0 `tool_call_metadata.model_response`, V1 `llm_response_id`): the actions of one
response are one assistant turn. Observations answer their action by `tool_call_id`
(V0 also by `cause`). A `condensation` forgets events and leaves a summary: a
recorded compaction, cut after the last forgotten event.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping

from breakwater.core.log.message import content_text
from breakwater.core.log.json_lines import ArrayItems, NotPlain, SessionLogError, iter_json_lines, open_session_file
from breakwater.core.log.session_log import LoadIssue, SessionLog
from breakwater.formats.builder import SessionBuilder, Turn, ref
from breakwater.formats.detect import looks_like_openhands_eval
from breakwater.formats.openai_chat import feed_usage, read_items

FORMAT = "openhands"
V0_SKIPPED = frozenset(("change_agent_state", "recall", "condensation_request", "null", "agent_state_changed"))
V1_SKIPPED = frozenset(("ConversationStateUpdateEvent", "CondensationRequest", "CondensationSummaryEvent",
                        "PauseEvent", "TokenEvent", "LLMCompletionLogEvent"))


def _forgotten(args: Mapping[str, Any]) -> list[Any]:
    ids = args.get("forgotten_event_ids")
    if isinstance(ids, list):
        return [ref(i) for i in ids]
    start, end = args.get("forgotten_events_start_id"), args.get("forgotten_events_end_id")
    if isinstance(start, int) and isinstance(end, int):
        return [ref(i) for i in range(start, end + 1)]
    return []


class _Stream:
    """Shared by V0 and V1: turns keyed by model response, nodes keyed by event id (for cuts)."""

    def __init__(self, b: SessionBuilder):
        self.b = b
        self.turns: dict[str, Turn] = {}
        self.turn: Turn | None = None
        self.turn_key: str | None = None
        self.node_of: list[tuple[Any, Any]] = []     # (event id, first message node made from it)
        self.call_of_event: dict[Any, str] = {}

    def turn_for(self, key: str | None, line: int, meta: Mapping[str, Any]) -> tuple[Turn, bool]:
        if key is not None and key == self.turn_key and self.turn is not None:
            return self.turn, False
        self.turn = self.b.assistant(line, meta={k: v for k, v in meta.items() if v is not None})
        self.turn_key = key
        return self.turn, True

    def close(self) -> None:
        self.turn, self.turn_key = None, None

    def mark(self, event_id: Any) -> None:
        node = self.b.last_message()
        if node is not None:
            self.node_of.append((event_id, node))

    def condensation(self, forgotten: list[Any], summary: Any, line: int, **data: Any) -> None:
        self.close()
        gone = set(forgotten)
        last_gone = max((i for i, (eid, _) in enumerate(self.node_of) if eid in gone), default=None)
        cut = None
        if last_gone is not None:
            cut = next((n for eid, n in self.node_of[last_gone + 1:] if eid not in gone), None)
        data["forgotten"] = len(forgotten)
        self.b.compaction(str(summary or ""), line, cut=cut if last_gone is not None else None, **data)


def _feed_v0(s: _Stream, events: Iterable[Any], line_of) -> None:
    b = s.b
    for i, ev in enumerate(events):
        line = line_of(i)
        if not isinstance(ev, dict):
            b.warn(line, f"event {i} is not an object, skipped")
            continue
        eid = ref(ev.get("id"))
        args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
        tcm = ev.get("tool_call_metadata") if isinstance(ev.get("tool_call_metadata"), dict) else None
        action, observation = ref(ev.get("action")), ref(ev.get("observation"))
        if action == "condensation":
            s.condensation(_forgotten(args), args.get("summary"), line, summary_offset=args.get("summary_offset"))
        elif action == "system":
            s.close()
            b.system(str(args.get("content") or ev.get("message") or ""), line, {"ts": ev.get("timestamp")})
            s.mark(eid)
        elif action == "message":
            s.close()
            text = str(args.get("content") if args.get("content") is not None else ev.get("message") or "")
            if ev.get("source") == "user":
                b.user(text, line, {"ts": ev.get("timestamp"), "images": len(args.get("image_urls") or []) or None})
            else:
                b.assistant(line, text, {"ts": ev.get("timestamp")})
            s.mark(eid)
        elif action is not None and ev.get("source") == "agent" and action not in V0_SKIPPED:
            _v0_tool_action(s, ev, tcm or {}, args, line)
        elif observation is not None and observation not in V0_SKIPPED:
            call = ref((tcm or {}).get("tool_call_id")) or s.call_of_event.get(ref(ev.get("cause")))
            if call is None:
                b.skip(f"observation/{observation}", line)
                continue
            s.close()
            extras = ev.get("extras") if isinstance(ev.get("extras"), dict) else {}
            md = extras.get("metadata") if isinstance(extras.get("metadata"), dict) else {}
            b.tool_result(call, str(ev.get("content") or ""), line,
                          {"ts": ev.get("timestamp"), "observation": observation, "exit_code": md.get("exit_code")},
                          name=(tcm or {}).get("function_name"))
            s.mark(eid)
        else:
            kind = f"action/{action}" if action is not None else f"observation/{observation}"
            b.skip(kind, line, known=(action or observation) in V0_SKIPPED or ev.get("source") != "agent")


def _v0_tool_action(s: _Stream, ev: Mapping[str, Any], tcm: Mapping[str, Any], args: Mapping[str, Any],
                    line: int) -> None:
    """An action the model asked for: its turn is the model response it came from, rebuilt from
    that response (the exact text and calls the model produced). Without one (the older
    text-action CodeAct) the action stands as a call of its own, answered through `cause`."""
    response = tcm.get("model_response") if isinstance(tcm.get("model_response"), dict) else {}
    key = response.get("id") if isinstance(response.get("id"), str) else None
    turn, new = s.turn_for(key, line, {"ts": ev.get("timestamp"), "model": response.get("model")})
    call_id = str(tcm.get("tool_call_id") or f"event-{ev.get('id')}")
    if new:
        choices = response.get("choices") if isinstance(response.get("choices"), list) else []
        msg = choices[0].get("message") if choices and isinstance(choices[0], dict) else None
        if isinstance(msg, dict):
            turn.add_text(content_text(msg.get("content")))
            calls = msg.get("tool_calls")
            for call in calls if isinstance(calls, list) else ():
                fn = call.get("function") if isinstance(call, dict) else None
                if isinstance(fn, dict):
                    turn.add_call(call.get("id"), str(fn.get("name") or ""), fn.get("arguments", ""), line)
        else:
            turn.add_text(str(args.get("thought") or ""))
        feed_usage(turn, response.get("usage"), line)
    if not any(c.id == call_id or c.id.startswith(call_id + "~") for c in turn.node.calls):
        turn.add_call(call_id, str(tcm.get("function_name") or ev.get("action")),
                      {k: v for k, v in args.items() if k != "thought"}, line)
    s.call_of_event[ref(ev.get("id"))] = call_id
    s.mark(ref(ev.get("id")))


def _feed_v1(s: _Stream, events: Iterable[tuple[int, Mapping[str, Any]]]) -> None:
    b = s.b
    for line, ev in events:
        kind = ref(ev.get("kind"))
        ts = ev.get("timestamp")
        if kind == "SystemPromptEvent":
            s.close()
            prompt = ev.get("system_prompt")
            b.system(content_text(prompt.get("text") if isinstance(prompt, dict) else prompt), line, {"ts": ts})
            s.mark(ref(ev.get("id")))
        elif kind == "MessageEvent":
            s.close()
            msg = ev.get("llm_message") if isinstance(ev.get("llm_message"), dict) else {}
            text = content_text(msg.get("content"))
            if msg.get("role") == "assistant":
                b.assistant(line, text, {"ts": ts})
            else:
                b.user(text, line, {"ts": ts})
            s.mark(ref(ev.get("id")))
        elif kind == "ActionEvent":
            turn, new = s.turn_for(ref(ev.get("llm_response_id")), line, {"ts": ts})
            if new:
                turn.add_text(content_text(ev.get("thought")))
                if isinstance(ev.get("reasoning_content"), str):
                    turn.add_meta_text("reasoning", ev["reasoning_content"])
            call = ev.get("tool_call") if isinstance(ev.get("tool_call"), dict) else {}
            turn.add_call(call.get("id") or ev.get("tool_call_id"), str(call.get("name") or ev.get("tool_name") or ""),
                          call.get("arguments", ev.get("action")), line)
            s.mark(ref(ev.get("id")))
        elif kind in ("ObservationEvent", "AgentErrorEvent", "UserRejectObservation"):
            s.close()
            if kind == "ObservationEvent":
                obs = ev.get("observation") if isinstance(ev.get("observation"), dict) else {}
                text, err = content_text(obs.get("content")), bool(obs.get("is_error"))
            else:
                text, err = str(ev.get("error") or ev.get("rejection_reason") or ""), True
            b.tool_result(ev.get("tool_call_id"), text, line, {"ts": ts, "is_error": err or None},
                          name=ev.get("tool_name"))
            s.mark(ref(ev.get("id")))
        elif kind == "Condensation":
            ids = ev.get("forgotten_event_ids")
            s.condensation([ref(i) for i in ids] if isinstance(ids, list) else [], ev.get("summary"), line,
                           summary_offset=ev.get("summary_offset"))
        elif isinstance(kind, str):
            b.skip(kind, line, known=kind in V1_SKIPPED)
        else:
            b.warn(line, "event has no \"kind\", skipped")


def load_openhands(path: Path, document: Any = None) -> list[SessionLog]:
    """`document`: the file already read whole (a V0 event list, or the one line of a one-line file)."""
    path = Path(path)
    if document is None:
        with open_session_file(path) as fh:
            head = fh.read(4096).lstrip()[:1]
        document = read_items(path) if head == b"[" else None
    if isinstance(document, ArrayItems):
        try:
            return [_load_v0(path, document)]
        except NotPlain:   # an item the json module reads otherwise: the document as it reads it, from the start
            document = document.whole()
    if isinstance(document, list):
        return [_load_v0(path, document)]
    logs: list[SessionLog] = []
    v1: list[tuple[int, Mapping[str, Any]]] = []
    issues: list[LoadIssue] = []
    lines = iter_json_lines(path) if document is None else [(1, document, None)]
    for lineno, obj, problem in lines:
        if problem:
            issues.append(LoadIssue(str(path), lineno, problem))
        if looks_like_openhands_eval(obj):
            logs.append(_eval_instance(path, lineno, obj))
        elif isinstance(obj, dict):
            v1.append((lineno, obj))
    if v1:
        b = SessionBuilder(path, FORMAT, path.stem, {"source": str(path), "openhands": "v1"})
        _feed_v1(_Stream(b), v1)
        logs.insert(0, b.build())
    if not logs:
        raise SessionLogError(f"{path}: no OpenHands events")
    logs[0].issues[:0] = issues
    return logs


def _load_v0(path: Path, events: Iterable[Any]) -> SessionLog:
    b = SessionBuilder(path, FORMAT, path.stem, {"source": str(path), "openhands": "v0"})
    _feed_v0(_Stream(b), events, lambda i: i + 1)
    return b.build()


def _eval_instance(path: Path, lineno: int, obj: Mapping[str, Any]) -> SessionLog:
    """One line of an evaluation `output.jsonl`: its events are items of one JSON value, so
    warnings name the line and the event's index."""
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    llm = meta.get("llm_config") if isinstance(meta.get("llm_config"), dict) else {}
    header = {"source": str(path), "openhands": "v0", "instance_id": obj.get("instance_id"),
              "model": llm.get("model"), "agent_class": meta.get("agent_class")}
    b = SessionBuilder(path, FORMAT, str(obj["instance_id"]), {k: v for k, v in header.items() if v is not None})
    _feed_v0(_Stream(b), obj["history"], lambda i: lineno)
    return b.build()
