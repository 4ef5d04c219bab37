"""OpenAI Codex CLI rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`).

`response_item` lines are the model-visible history (Responses API items);
`event_msg` lines are UI and telemetry that partly repeat them, so only their
token counts (as usage events) and errors are taken. A `compacted` line is
Codex's own compaction: its replacement history is what the model saw next.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from breakwater.core.log.json_lines import iter_json_lines
from breakwater.core.log.session_log import SessionLog
from breakwater.formats.builder import SessionBuilder, Turn, blocks_text, positive_sum, ref
from breakwater.formats.detect import CODEX_ENVELOPES

FORMAT = "codex"
CALLS = frozenset(("function_call", "custom_tool_call", "local_shell_call", "tool_search_call"))
OUTPUTS = frozenset(("function_call_output", "custom_tool_call_output", "local_shell_call_output",
                     "tool_search_output"))
SERVER_SIDE = frozenset(("web_search_call", "image_generation_call"))   # run by the API, no output item


def unwrap_output(output: Any, meta: dict[str, Any]) -> str:
    """Tool output as the model saw it. Codex 0.5x wrote a JSON-encoded {"output", "metadata"}
    string; later versions plain text or a content list."""
    if isinstance(output, str):
        if output.startswith("{") and '"output"' in output:
            try:
                decoded = json.loads(output)
            except ValueError:
                return output
            if isinstance(decoded, dict) and isinstance(decoded.get("output"), str):
                md = decoded.get("metadata")
                if isinstance(md, dict):
                    meta.update({k: md[k] for k in ("exit_code", "duration_seconds") if k in md})
                meta["unwrapped"] = True
                return decoded["output"]
        return output
    return blocks_text(output, meta)



def prompt_tokens(last_token_usage: Any) -> int | None:
    """A request's prompt as Codex counts it (`last_token_usage.input_tokens`, cached ones included).
    The reader and the session list (formats/sessions.py) both take it from here (37.10)."""
    return positive_sum(last_token_usage, ("input_tokens",))

class _Rollout:
    def __init__(self, path: Path):
        self.b = SessionBuilder(path, FORMAT, path.stem, {"source": str(path)})
        self.turn: Turn | None = None
        self.last_turn: Turn | None = None
        self.seen_meta = False
        self.any_message = False

    def _assistant(self, line: int, ts: Any) -> Turn:
        if self.turn is None:
            self.turn = self.b.assistant(line, meta={"ts": ts, "model": self.b.header.get("model")})
            self.last_turn = self.turn
        return self.turn

    def feed(self, line: int, obj: Mapping[str, Any]) -> None:
        kind = ref(obj.get("type"))
        payload = obj.get("payload") if isinstance(obj.get("payload"), dict) else {}
        ts = obj.get("timestamp")
        if kind == "response_item":
            self._item(line, payload, ts)
        elif kind == "event_msg":
            self._event(line, payload)
        elif kind == "compacted":
            self._compacted(line, payload)
        elif kind == "session_meta":
            self._meta(line, payload)
        elif kind == "turn_context":
            self.turn = None   # written once per model request: what follows is a new reply
            if isinstance(payload.get("model"), str):
                self.b.header["model"] = payload["model"]
            self.b.skip(kind, line)
        elif isinstance(kind, str):
            self.b.skip(kind, line, known=kind in CODEX_ENVELOPES)
        else:
            self.b.warn(line, "line has no \"type\", skipped")

    def _meta(self, line: int, p: Mapping[str, Any]) -> None:
        if self.seen_meta:  # a resumed or forked rollout repeats it; the first one names the session
            self.b.skip("session_meta", line)
            return
        self.seen_meta = True
        h = self.b.header
        if isinstance(p.get("id"), str):
            h["id"] = p["id"]
        for src, dst in (("cli_version", "cli_version"), ("cwd", "cwd"), ("timestamp", "created"),
                         ("originator", "originator")):
            if isinstance(p.get(src), str):
                h[dst] = p[src]
        base = p.get("base_instructions")
        text = base.get("text") if isinstance(base, dict) else base
        if isinstance(text, str) and text:
            self.b.system(text, line, {"from": "base_instructions"})

    def _item(self, line: int, p: Mapping[str, Any], ts: Any) -> None:
        kind = ref(p.get("type"))
        if kind == "message":
            counts: dict[str, int] = {}
            text = blocks_text(p.get("content"), counts)
            role = ref(p.get("role"))
            if role == "assistant":
                turn = self._assistant(line, ts)
                turn.add_text(text)
                for k, v in counts.items():
                    turn.count_meta(k, v)
                return
            self.turn = None
            if role in ("developer", "system") and not self.any_message:
                self.b.system(text, line, {"ts": ts, "source_role": role, **counts})
            else:
                self.b.user(text, line, {"ts": ts, **({"source_role": role} if role != "user" else {}), **counts})
            self.any_message = True
        elif kind == "reasoning":
            turn = self._assistant(line, ts)
            summary = p.get("summary") if isinstance(p.get("summary"), list) else []
            turn.add_meta_text("reasoning", blocks_text(summary, {}))
            if p.get("content"):
                turn.add_meta_text("reasoning", blocks_text(p.get("content"), {}))
            if p.get("encrypted_content"):
                turn.count_meta("encrypted_reasoning")
        elif kind in CALLS:
            turn = self._assistant(line, ts)
            if kind == "custom_tool_call":
                args = p.get("input")
            elif kind == "local_shell_call":
                args = p.get("action")
            else:
                args = p.get("arguments")
            name = p.get("name") or ("local_shell" if kind == "local_shell_call" else
                                     "tool_search" if kind == "tool_search_call" else "")
            turn.add_call(p.get("call_id") or p.get("id"), str(name), args if args is not None else {}, line)
        elif kind in OUTPUTS:
            self.turn = None
            meta: dict[str, Any] = {"ts": ts}
            out = p.get("tools") if kind == "tool_search_output" else p.get("output")
            text = json.dumps(out, ensure_ascii=False) if kind == "tool_search_output" else unwrap_output(out, meta)
            self.b.tool_result(p.get("call_id"), text, line, meta)
        elif kind in SERVER_SIDE:
            turn = self._assistant(line, ts)
            turn.count_meta(kind)
        elif kind == "agent_message":   # a message from another agent of the same thread
            self.turn = None
            self.b.user(blocks_text(p.get("content"), {}), line, {"ts": ts, "from_agent": p.get("author")})
            self.any_message = True
        elif kind == "ghost_snapshot":
            self.b.skip("response_item/ghost_snapshot", line)
        else:
            self.b.skip(f"response_item/{kind}", line, known=False)

    def _event(self, line: int, p: Mapping[str, Any]) -> None:
        kind = ref(p.get("type"))
        if kind == "token_count":
            info = p.get("info") if isinstance(p.get("info"), dict) else None
            last = info.get("last_token_usage") if info else None
            if info and isinstance(info.get("model_context_window"), int) and info["model_context_window"] > 0:
                self.b.header["window"] = info["model_context_window"]
            if isinstance(last, dict) and self.last_turn is not None:
                extra = {"cached_tokens": last["cached_input_tokens"]} if last.get("cached_input_tokens") else {}
                self.last_turn.set_usage(prompt_tokens(last), last.get("output_tokens"), line, **extra)
                reasoning = last.get("reasoning_output_tokens")
                if isinstance(reasoning, int) and reasoning > 0 and self.last_turn.node.meta.get("encrypted_reasoning"):
                    # Codex sends its reasoning items back (encrypted) with every request until the next
                    # user message, and the provider bills them as input: tokens no message shows
                    # (core/log/accounting.py `Calibration.resent`)
                    self.last_turn.set_meta("resent_tokens", reasoning)
        elif kind == "error":
            self.b.event("error", line, kind="codex_error", message=str(p.get("message") or "error"))
        elif kind == "task_started" and isinstance(p.get("model_context_window"), int) \
                and p["model_context_window"] > 0:
            self.b.header["window"] = p["model_context_window"]
            self.b.skip(f"event_msg/{kind}", line)
        else:
            self.b.skip(f"event_msg/{kind}", line)

    def _compacted(self, line: int, p: Mapping[str, Any]) -> None:
        self.turn = None
        history = p.get("replacement_history") if isinstance(p.get("replacement_history"), list) else None
        parts = [p["message"]] if isinstance(p.get("message"), str) and p["message"] else []
        replaced: list[dict[str, str]] = []
        for item in history or ():
            if isinstance(item, dict) and item.get("type") == "message":
                text = blocks_text(item.get("content"), {})
                replaced.append({"role": str(item.get("role") or "user"), "content": text})
                parts.append(text)
        data: dict[str, Any] = {"original_trigger": "auto"}
        if history is not None:
            data["replacement_history"] = replaced
        for key in ("window_id", "window_number", "previous_window_id"):
            if key in p:
                data[key] = p[key]
        self.b.compaction("\n\n".join(parts), line, **data)


def load_codex(path: Path) -> list[SessionLog]:
    path = Path(path)
    rollout = _Rollout(path)
    for lineno, obj, problem in iter_json_lines(path):
        if problem:
            rollout.b.warn(lineno, problem)
        if isinstance(obj, dict):
            rollout.feed(lineno, obj)
        elif obj is not None:
            rollout.b.warn(lineno, f"expected a JSON object, got {type(obj).__name__}, skipped")
    return [rollout.b.build()]
