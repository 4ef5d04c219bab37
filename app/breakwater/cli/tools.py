"""`breakwater tool bash|read_file|write_file`: run one tool as the agent would (SPEC §11).

It prints exactly the text the model would see. The exit status is 0 when the tool
ran (a failing command's exit code is part of that text) and 1 when the tool
itself refused or failed, with the one-line reason on stderr.
"""

from __future__ import annotations

import argparse
import sys
import uuid

from breakwater.core.log.visible import visible
from breakwater.tools import sandbox
from breakwater.core.policy import Policy
from breakwater.tools.bounds import MB, Bounds
from breakwater.tools.bash import DEFAULT_MAX_BYTES, DEFAULT_TIMEOUT_S, run_bash
from breakwater.tools.read_file import DEFAULT_MAX_LINES, read_file
from breakwater.tools.result import ToolResult
from breakwater.tools.spill import DEFAULT_HEX_BYTES, MAX_HEX_BYTES, SpillBudget, session_spill_bytes
from breakwater.tools.workspace import Workspace, WorkspaceError
from breakwater.tools.write_file import write_file


def register(sub) -> None:
    parser = sub.add_parser("tool", help="run one tool as the agent would; print what the model sees",
                            description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    _workspace_arg(parser, default=".")
    tools = parser.add_subparsers(dest="tool", metavar="TOOL", required=True)

    bash = tools.add_parser("bash", help="run a shell command through the rolling buffer and spill",
                            description="Run `bash -c COMMAND` in the workspace. Options go before or after the "
                                        "command; after `--`, everything is the command.")
    _bash_options(bash)
    bash.add_argument("command", nargs=argparse.REMAINDER, help="the command line")
    bash.set_defaults(func=_bash)

    read = tools.add_parser("read_file", help="read a slice of a file in the workspace")
    _workspace_arg(read)
    read.add_argument("path", help="file path relative to the workspace")
    read.add_argument("--start-line", type=int, default=None, metavar="A")
    read.add_argument("--end-line", type=int, default=None, metavar="B")
    read.add_argument("--max-lines", type=int, default=DEFAULT_MAX_LINES, metavar="N",
                      help=f"lines per call at most (default {DEFAULT_MAX_LINES})")
    read.add_argument("--offset", type=int, default=None, metavar="BYTE", help="hex view from this byte (0-based)")
    read.add_argument("--length", type=int, default=None, metavar="N",
                      help=f"hex view of N bytes (default {DEFAULT_HEX_BYTES}, at most {MAX_HEX_BYTES})")
    read.set_defaults(func=_read_file)

    write = tools.add_parser("write_file", help="atomically write a file in the workspace")
    _workspace_arg(write)
    write.add_argument("path", help="file path relative to the workspace")
    write.add_argument("--content", required=True, help="the new content of the file")
    write.set_defaults(func=_write_file)


def _bash_options(bash: argparse.ArgumentParser) -> None:
    _workspace_arg(bash)
    bash.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="S",
                      help=f"seconds before the process group is killed (default {DEFAULT_TIMEOUT_S:g})")
    bash.add_argument("--max-lines", type=int, default=400, metavar="N", help="lines kept, head + tail (default 400)")
    bash.add_argument("--max-line-bytes", type=int, default=4000, metavar="N",
                      help="bytes kept of one line (default 4000)")
    bash.add_argument("--max-bytes", type=int, default=DEFAULT_MAX_BYTES, metavar="N",
                      help=f"bytes shown of the output, head and tail together (default {DEFAULT_MAX_BYTES})")
    bash.add_argument("--session-id", default="cli", metavar="ID", help="spill directory name (default cli)")
    bash.add_argument("--tool-call-id", default=None, metavar="ID", help="spill file name (default: a new id)")
    sandbox.add_argument(bash)
    bash.add_argument("--network", action="store_true", help="let the sandboxed command use the network")


def _options_in(args, command: list[str]) -> list[str]:
    """The command line the user meant: bash's own options written after the command (the
    README's usage puts them last; `bash "seq 1 9" --workspace DIR` ran `seq 1 9 --workspace DIR`)
    are taken out of it, up to `--`; after `--`, everything is the command."""
    if command[:1] == ["--"]:
        return command[1:]
    before, after = (command[:command.index("--")], command[command.index("--") + 1:]) if "--" in command \
        else (command, [])
    options = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    _bash_options(options)
    _, rest = options.parse_known_args(before, namespace=args)
    return rest + after


def _workspace_arg(parser: argparse.ArgumentParser, default: str | None = argparse.SUPPRESS) -> None:
    # on the tool's own parser it only overrides: `tool --workspace W bash ...` works too
    parser.add_argument("--workspace", default=default, metavar="DIR", help="the workspace (default: current directory)")


def _open_workspace(args) -> Workspace | None:
    try:
        return Workspace(args.workspace)
    except WorkspaceError as exc:
        print(f"breakwater tool: {exc}", file=sys.stderr)
        return None


def _bash(args) -> int:
    try:
        command = _options_in(args, args.command)
    except SystemExit:
        return 2   # argparse said what was wrong with an option
    if not command:
        print("breakwater tool bash: no command given (put it after --)", file=sys.stderr)
        return 2
    if args.max_lines < 1 or args.max_line_bytes < 1:
        print("breakwater tool bash: --max-lines and --max-line-bytes must be at least 1", file=sys.stderr)
        return 2
    ws = _open_workspace(args)
    if ws is None:
        return 2
    # The same environment and sandbox as the agent's bash: without the key, the config hidden.
    from breakwater.agent.config import ConfigError, load_config, resolve_sandbox
    from breakwater.agent.redact import Redactor

    try:
        config = load_config({"workspace": ws.root, "sandbox": args.sandbox,
                              "tool_read_paths": args.tool_read_paths})
        box = resolve_sandbox(config, network=args.network)
    except (ConfigError, sandbox.SandboxError) as exc:
        print(f"breakwater tool bash: {exc}", file=sys.stderr)
        return 2
    sandbox.say_once(box, prefix="breakwater tool bash")
    env, _ = Redactor(config.api_key).tool_environment()
    policy = Policy()       # the same bounds as the agent's bash by default
    budget = SpillBudget(policy.tool_max_session_spill_mb * MB, session_spill_bytes(ws, args.session_id))
    result = run_bash(ws, " ".join(command), timeout_s=args.timeout, max_lines=args.max_lines,
                      session_id=args.session_id, tool_call_id=args.tool_call_id or f"call_{uuid.uuid4().hex[:12]}",
                      max_line_bytes=args.max_line_bytes, max_bytes=args.max_bytes, env=env, sandbox=box,
                      bounds=Bounds.from_policy(policy), max_spill_bytes=policy.tool_max_spill_mb * MB,
                      spill_budget=budget)
    return _show(result)


def _read_file(args) -> int:
    ws = _open_workspace(args)
    if ws is None:
        return 2
    return _show(read_file(ws, args.path, args.start_line, args.end_line, max_lines=args.max_lines,
                           offset=args.offset, length=args.length))


def _write_file(args) -> int:
    ws = _open_workspace(args)
    if ws is None:
        return 2
    return _show(write_file(ws, args.path, args.content))


def _show(result: ToolResult) -> int:
    if result.is_error:
        print(f"breakwater tool: {visible(result.meta['error'])}", file=sys.stderr)
        return 1
    sys.stdout.flush()
    sys.stdout.buffer.write((visible(result.content) + "\n").encode("utf-8", "replace"))
    sys.stdout.flush()
    return 0
