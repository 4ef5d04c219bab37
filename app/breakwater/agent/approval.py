"""Approval of tool calls that change things (`needs_approval`): bash, write_file, unknown tools.

An approver is `approve(call) -> bool`, or a coroutine function returning bool. A plain
function may block (the terminal prompt does), so the agent runs it in a worker thread; a
coroutine function runs on the agent's loop (the workbench awaits a dialog that way).
Without --yes and without anyone to ask, a call is denied and the model is told how the
user can allow it.
"""

from __future__ import annotations

import sys
import threading
from typing import Awaitable, Callable, TextIO

from breakwater.core.log.visible import visible
from breakwater.core.log.json_lines import checked_loads
from breakwater.core.log.message import ToolCall
from breakwater.tools.result import ToolResult

Approver = Callable[[ToolCall], "bool | Awaitable[bool]"]

HOW_TO_ALLOW = ("To let the agent run tool calls that change things, run again with --yes "
                "(or set auto_approve = true in the config file).")


def denied_result(call: ToolCall, why: str) -> ToolResult:
    """The tool message the model gets instead of the call's output."""
    text = f"Denied: {call.name} was not run because {why}. {HOW_TO_ALLOW}"
    return ToolResult(text, {"tool": call.name, "denied": True, "error": why})


def describe(call: ToolCall, limit: int | None = 2000) -> str:
    """The call as a person should read it before saying yes: control characters drawn visibly, so
    nothing in it can rewrite the line; `limit` None shows all of it."""
    try:
        args = checked_loads(call.arguments) if call.arguments else {}
    except ValueError:
        args = None
    if isinstance(args, dict) and call.name == "bash" and isinstance(args.get("command"), str):
        text = f"bash: {args['command']}"
    elif isinstance(args, dict) and call.name == "write_file" and isinstance(args.get("path"), str):
        content = args.get("content")
        size = f" ({len(content)} chars)" if isinstance(content, str) else ""
        text = f"write_file: {args['path']}{size}"
    else:
        text = f"{call.name}({call.arguments})"
    text = visible(text)
    return text if limit is None or len(text) <= limit else text[: limit - 1] + "…"


class TerminalApprover:
    """Asks on the terminal, one call at a time: `Allow? [y/N]`. EOF or anything but y/yes denies."""

    def __init__(self, stdin: TextIO | None = None, out: TextIO | None = None):
        self.stdin = stdin or sys.stdin
        self.out = out or sys.stderr
        self._lock = threading.Lock()

    def __call__(self, call: ToolCall) -> bool:
        with self._lock:
            self.out.write(f"\nThe agent wants to run {describe(call, None)}\nAllow? [y/N] ")
            self.out.flush()
            answer = self.stdin.readline()
            return answer.strip().lower() in ("y", "yes")
