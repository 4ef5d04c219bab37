"""The tools the agent offers the model: schemas, approval flags and one safe entry point.

`execute_tool` is what the agent loop calls with the model's raw tool call; whatever
the model sent (broken JSON, wrong types, an unknown tool) it returns a `ToolResult`
whose text explains the problem, never an exception.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from breakwater.core.log.json_lines import checked_loads
from breakwater.tools.bash import DEFAULT_MAX_BYTES, DEFAULT_TIMEOUT_S, run_bash
from breakwater.tools.bounds import MB, Bounds
from breakwater.tools.read_file import DEFAULT_MAX_LINES, read_file
from breakwater.tools.result import ToolResult, error_result
from breakwater.tools.sandbox import Sandbox
from breakwater.tools.spill import DEFAULT_HEX_BYTES, MAX_HEX_BYTES, SpillBudget, session_spill_bytes
from breakwater.tools.write_file import write_file
from breakwater.tools.workspace import Workspace

MAX_TIMEOUT_S = 3600


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Everything a tool call needs besides its arguments."""

    workspace: Workspace
    session_id: str = "session"
    max_lines: int = 400
    max_line_bytes: int = 4000
    max_bytes: int = DEFAULT_MAX_BYTES
    read_max_lines: int = DEFAULT_MAX_LINES
    bash_timeout_s: float = DEFAULT_TIMEOUT_S
    env: Mapping[str, str] | None = None   # the environment bash gets (None: this process's)
    sandbox: Sandbox | None = None          # where bash runs (None: directly)
    bounds: Bounds | None = None            # what one bash call may take (None: no bounds but time)
    max_timeout_s: float | None = None      # the longest timeout a call may ask for
    max_spill_bytes: int | None = None
    spill_budget: SpillBudget | None = None  # what the session's spill files may hold together

    @classmethod
    def from_policy(cls, workspace: Workspace, session_id: str, policy: Any,
                    env: Mapping[str, str] | None = None, sandbox: Sandbox | None = None) -> "ToolContext":
        """Tier-1 sizes from a `breakwater.core.policy.Policy`."""
        return cls(workspace=workspace, session_id=session_id, max_lines=policy.tool_max_lines,
                   max_line_bytes=policy.tool_max_line_bytes, max_bytes=policy.tool_max_bytes,
                   read_max_lines=policy.read_file_default_lines, bash_timeout_s=policy.bash_timeout_s,
                   env=env, sandbox=sandbox, bounds=Bounds.from_policy(policy),
                   max_timeout_s=policy.tool_timeout_s, max_spill_bytes=policy.tool_max_spill_mb * MB,
                   spill_budget=SpillBudget(policy.tool_max_session_spill_mb * MB,
                                            session_spill_bytes(workspace, session_id)))


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    description: str
    parameters: Mapping[str, Any]
    changes_things: bool      # needs the user's approval before it runs
    run: Callable[[Mapping[str, Any], ToolContext, str], ToolResult]

    def schema(self) -> dict[str, Any]:
        """The OpenAI function-calling definition."""
        return {"type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": self.parameters}}


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


def _run_bash(args: Mapping[str, Any], ctx: ToolContext, tool_call_id: str) -> ToolResult:
    return run_bash(ctx.workspace, args["command"], timeout_s=args.get("timeout_s", ctx.bash_timeout_s),
                    max_lines=ctx.max_lines, session_id=ctx.session_id, tool_call_id=tool_call_id,
                    max_line_bytes=ctx.max_line_bytes, read_max_lines=ctx.read_max_lines, env=ctx.env,
                    max_bytes=ctx.max_bytes, sandbox=ctx.sandbox, bounds=ctx.bounds,
                    max_timeout_s=ctx.max_timeout_s, max_spill_bytes=ctx.max_spill_bytes,
                    spill_budget=ctx.spill_budget)


def _run_read_file(args: Mapping[str, Any], ctx: ToolContext, tool_call_id: str) -> ToolResult:
    return read_file(ctx.workspace, args["path"], args.get("start_line"), args.get("end_line"),
                     max_lines=ctx.read_max_lines, max_line_bytes=ctx.max_line_bytes,
                     offset=args.get("offset"), length=args.get("length"))


def _run_write_file(args: Mapping[str, Any], ctx: ToolContext, tool_call_id: str) -> ToolResult:
    return write_file(ctx.workspace, args["path"], args["content"])


TOOLS: dict[str, ToolSpec] = {spec.name: spec for spec in (
    ToolSpec(
        "bash",
        "Run a shell command (bash -c) in the workspace directory; stdout and stderr are merged. "
        "Long output keeps its first and last lines with a marker for the lines cut in between; the "
        "full output is saved to a file under .agent/spill/ that read_file can page through.",
        _object({
            "command": {"type": "string", "description": "The command line to run."},
            "timeout_s": {"type": "number", "minimum": 1, "maximum": MAX_TIMEOUT_S,
                          "description": "Seconds before the command and everything it started are killed."},
        }, ["command"]),
        True, _run_bash),
    ToolSpec(
        "read_file",
        "Read lines of a text file in the workspace (1-based, inclusive). Long files come back in "
        "slices; the reply says how many lines the file has and which range to ask for next. A binary "
        "file, or any file when offset or length is given, is shown as a hex dump of a byte range.",
        _object({
            "path": {"type": "string", "description": "File path relative to the workspace."},
            "start_line": {"type": "integer", "minimum": 1, "description": "First line to read (default 1)."},
            "end_line": {"type": "integer", "minimum": 1, "description": "Last line to read."},
            "offset": {"type": "integer", "minimum": 0, "description": "Hex view: first byte (0-based, default 0)."},
            "length": {"type": "integer", "minimum": 1, "maximum": MAX_HEX_BYTES,
                       "description": f"Hex view: bytes to show (default {DEFAULT_HEX_BYTES})."},
        }, ["path"]),
        False, _run_read_file),
    ToolSpec(
        "write_file",
        "Create or replace a file in the workspace with the given content (parent directories are created).",
        _object({
            "path": {"type": "string", "description": "File path relative to the workspace."},
            "content": {"type": "string", "description": "The complete new content of the file."},
        }, ["path", "content"]),
        True, _run_write_file),
)}


def tool_schemas() -> list[dict[str, Any]]:
    """The `tools` list of a chat-completions request."""
    return [spec.schema() for spec in TOOLS.values()]


def needs_approval(name: str) -> bool:
    """Tools that change things (and unknown ones) wait for the user's approval."""
    spec = TOOLS.get(name)
    return True if spec is None else spec.changes_things


def execute_tool(name: str, arguments: str | Mapping[str, Any] | None, ctx: ToolContext,
                 tool_call_id: str = "call") -> ToolResult:
    """Run one tool call as the model sent it (`arguments` is its JSON string)."""
    spec = TOOLS.get(name)
    if spec is None:
        return error_result(name, f"unknown tool {name!r}; available: {', '.join(TOOLS)}")
    args, problem = parse_arguments(arguments, spec.parameters)
    if problem:
        return error_result(name, f"invalid arguments for {name}: {problem}")
    try:
        return spec.run(args, ctx, tool_call_id)
    except Exception as exc:  # a tool must answer the model, whatever went wrong underneath
        return error_result(name, f"{name} failed: {type(exc).__name__}: {exc}")


def parse_arguments(arguments: str | Mapping[str, Any] | None,
                    schema: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    """(arguments, None) when they fit `schema`, else ({}, the reason in one line)."""
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        value: Any = {}
    elif isinstance(arguments, str):
        try:
            value = checked_loads(arguments)
        except ValueError as exc:
            return {}, str(exc)
    else:
        value = arguments
    if not isinstance(value, Mapping):
        return {}, f"expected a JSON object, got {_json_type(value)}"
    props = schema.get("properties", {})
    unknown = sorted(k for k in value if k not in props)
    if unknown and schema.get("additionalProperties") is False:
        return {}, f"unknown argument(s) {', '.join(unknown)}; expected {', '.join(props)}"
    missing = [k for k in schema.get("required", ()) if k not in value]
    if missing:
        return {}, f"missing required argument(s) {', '.join(missing)}"
    args: dict[str, Any] = {}
    for key, raw in value.items():
        if raw is None and key not in schema.get("required", ()):
            continue
        checked, problem = _check(key, raw, props[key])
        if problem:
            return {}, problem
        args[key] = checked
    return args, None


def _check(key: str, value: Any, prop: Mapping[str, Any]) -> tuple[Any, str | None]:
    kind = prop.get("type")
    if kind == "string":
        if not isinstance(value, str):
            return None, f"{key} must be a string, got {_json_type(value)}"
        return value, None
    if kind in ("integer", "number"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None, f"{key} must be a {kind}, got {_json_type(value)}"
        if isinstance(value, float) and not math.isfinite(value):
            return None, f"{key} must be a finite {kind}, got {value}"
        if kind == "integer":
            if isinstance(value, float) and not value.is_integer():
                return None, f"{key} must be a whole number, got {value}"
            value = int(value)
        if "minimum" in prop and value < prop["minimum"]:
            return None, f"{key} must be at least {prop['minimum']}, got {value}"
        if "maximum" in prop and value > prop["maximum"]:
            return None, f"{key} must be at most {prop['maximum']}, got {value}"
        return value, None
    return value, None


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    return "object" if isinstance(value, Mapping) else type(value).__name__
