"""Synthetic but realistic-shaped sessions for tests and benchmarks (deterministic per seed)."""

from __future__ import annotations

import json
import random
from pathlib import Path

from breakwater.core.log.message import Message, ToolCall
from breakwater.core.log.session_log import Event, SessionLog

LOG_LINE = "2026-11-29T10:{m:02d}:{s:02d}Z INFO worker-{w} processed batch {b} in {ms}ms ({path})"
ERR_LINE = "Traceback (most recent call last):\n  File \"app/db/pool.py\", line 88, in acquire\nTimeoutError: 连接池超时 pool exhausted after 30s"
PATHS = ["app/api/orders.py", "app/db/pool.py", "pkg/server/handler.go", "web/src/index.ts", "README.md",
         "services/billing/invoice.py", "cmd/worker/main.go"]


def tool_output(rng: random.Random, chars: int) -> str:
    if chars <= 0:
        return ""
    lines, size = [], 0
    while size < chars:
        if rng.random() < 0.02:
            line = ERR_LINE
        else:
            line = LOG_LINE.format(m=rng.randrange(60), s=rng.randrange(60), w=rng.randrange(8),
                                   b=rng.randrange(10**6), ms=rng.randrange(900), path=rng.choice(PATHS))
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)[:chars]


def session_messages(n: int, avg_tool_chars: int = 6000, seed: int = 1, big_every: int = 0,
                     big_chars: int = 0) -> list[Message]:
    rng = random.Random(seed)
    msgs = [Message("m00000", "system", "You are a coding agent. Work in the repository."),
            Message("m00001", "user", "请重构订单服务 and fix the flaky pool timeout in app/db/pool.py. " * 3, turn=1)]
    turn, call = 1, 0
    while len(msgs) < n:
        mid = lambda: f"m{len(msgs):05d}"  # noqa: E731
        r = rng.random()
        if r < 0.75:
            k = 3 if rng.random() < 0.1 else 1
            calls = []
            for _ in range(k):
                call += 1
                path = rng.choice(PATHS)
                name = rng.choice(["bash", "read_file", "read_file"])
                args = {"command": f"pytest -q {path}"} if name == "bash" else {"path": path}
                calls.append(ToolCall(f"call_{call}", name, json.dumps(args)))
            msgs.append(Message(mid(), "assistant", "Checking the next piece. " * rng.randrange(0, 12),
                                tuple(calls), turn=turn))
            turn += 1
            for c in calls:
                size = int(rng.expovariate(1 / avg_tool_chars))
                if big_every and rng.randrange(big_every) == 0:
                    size = big_chars
                msgs.append(Message(mid(), "tool", tool_output(rng, size), tool_call_id=c.id, turn=turn))
        elif r < 0.9:
            msgs.append(Message(mid(), "assistant", "I decided to use a bounded pool because the old one leaked. "
                                * rng.randrange(1, 30), turn=turn))
            turn += 1
            msgs.append(Message(mid(), "user", rng.choice(["continue", "继续，注意不要改动公共接口", "run the tests again"]),
                                turn=turn))
        else:
            msgs.append(Message(mid(), "assistant", "Progress: step done.", turn=turn))
            turn += 1
            msgs.append(Message(mid(), "user", "ok, next step please " * rng.randrange(1, 5), turn=turn))
    return msgs[:n] if msgs[min(n, len(msgs)) - 1].role != "assistant" or True else msgs


def write_session(path: Path, msgs: list[Message], header: dict | None = None,
                  events: dict[int, list[Event]] | None = None) -> Path:
    head = {"type": "session", "version": 1, "id": "synthetic", "model": "gpt-4o", "window": 32000}
    head.update(header or {})
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(head) + "\n")
        for i, m in enumerate(msgs):
            for ev in (events or {}).get(i, []):
                fh.write(json.dumps(ev.to_record(), ensure_ascii=False) + "\n")
            fh.write(json.dumps(m.to_record(), ensure_ascii=False) + "\n")
    return path


def as_log(msgs: list[Message], window: int = 32000) -> SessionLog:
    return SessionLog(header={"id": "synthetic", "model": "gpt-4o", "window": window}, entries=msgs)
