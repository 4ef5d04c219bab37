"""Helpers for the importer tests: the real transcripts copied into tests/fixtures/real (see its
SOURCES.md), and the checks every imported session must pass."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from breakwater.core.log.message import Message
from breakwater.core.fold.pipeline import Pipeline
from breakwater.core.policy import preset
from breakwater.core.log.session_log import SessionLog
from breakwater.core.log.validity import api_problems

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"


def every_view_problems(log: SessionLog, window: int = 16_000) -> list[str]:
    """Problems of the request built before each assistant message (and the next one), under a
    window small enough that the soft and hard zones are reached. A cut-down file may open with
    a reply: nothing precedes it, so there is no request to check."""
    pipe = Pipeline(preset("breakwater").with_changes(window=window))
    problems: list[str] = []
    seen_message = False
    for entry in log.entries:
        if isinstance(entry, Message):
            if entry.role == "assistant" and seen_message:
                view, _ = pipe.view()
                problems += [f"turn {view.turn}: {p}" for p in api_problems(view.to_api())]
            seen_message = True
        pipe.feed(entry)
    view, _ = pipe.view()
    return problems + [f"next: {p}" for p in api_problems(view.to_api())]


def imported_chars(logs: Iterable[SessionLog]) -> int:
    """Characters of what the model saw, as imported: message text, tool calls, reasoning kept in
    meta, the summaries of recorded compactions and notes."""
    total = 0
    for log in logs:
        for m in log.messages:
            total += len(m.content) + sum(len(c.name) + len(c.arguments) for c in m.tool_calls)
            if m.meta:
                total += sum(len(m.meta[k]) for k in ("thinking", "reasoning") if isinstance(m.meta.get(k), str))
        for ev in log.events:
            for key in ("summary", "text"):
                if isinstance(ev.get(key), str):
                    total += len(ev.get(key))
    return total


def calls_and_results(logs: Iterable[SessionLog]) -> tuple[int, int, int]:
    """(tool calls, results, calls whose result follows them) over the sessions."""
    calls = results = answered = 0
    for log in logs:
        pending: set[str] = set()
        for m in log.messages:
            if m.role == "assistant":
                calls += len(m.tool_calls)
                pending = {c.id for c in m.tool_calls}
            elif m.role == "tool":
                results += 1
                if m.tool_call_id in pending:
                    answered += 1
                    pending.discard(m.tool_call_id)
    return calls, results, answered
