"""Breakwater: a terminal workbench that runs an LLM agent's context-compaction pipeline and shows
every decision it makes."""

# Each layer registers its own sub-commands. Only the module of the command asked for is imported
# (the agent's pulls in the openai client, ~0.7 s), so the other commands start quickly.

from __future__ import annotations

import argparse
import gc
import importlib
import os
import signal
import sys

from breakwater import __version__

REGISTRARS = ("breakwater.cli.core", "breakwater.cli.memory", "breakwater.cli.tools",
              "breakwater.cli.formats", "breakwater.cli.ui", "breakwater.cli.fidelity",
              "breakwater.cli.agent", "breakwater.cli.export", "breakwater.cli.proxy")
# The registrar of each command (test_cli_startup holds it to what they register): a command
# imports its own alone, not every one listed before it (eval came sixth: 40 ms of imports).
HOMES = {"simulate": "breakwater.cli.core", "tokens": "breakwater.cli.core", "memory": "breakwater.cli.memory",
         "tool": "breakwater.cli.tools", "import": "breakwater.cli.formats", "replay": "breakwater.cli.ui",
         "browse": "breakwater.cli.ui", "chat": "breakwater.cli.ui", "eval": "breakwater.cli.fidelity",
         "run": "breakwater.cli.agent", "export": "breakwater.cli.export", "proxy": "breakwater.cli.proxy"}
EVERY = "*"
# Commands that only read and print: once their output is flushed, nothing of theirs is left to
# write (no log, lock or temp file), so the process may end without freeing what they built.
ONE_SHOT = ("simulate", "tokens", "eval")
# Commands that do nothing but print: a closed stdout (`simulate | head`) ends them at once and quietly
# by the default SIGPIPE action. Every other command keeps Python's (the signal ignored, a write to a
# closed pipe an exception where it happens): the workbench's threads write to pipes of their own (the
# background measurement's process, which is stopped whenever the live session grows) and the default
# action killed the whole app (exit 141) a second after a chat turn.
PRINT_ONLY = ("simulate", "tokens", "eval")
# ... unless they talk to a server: a socket the peer closed must be an error to report, not a silent death
TALKS = ("judge", "dask")


def wanted_command(argv: list[str]) -> str | None:
    """The sub-command named on the command line; EVERY when help is asked for first; None for none."""
    for arg in argv:
        if arg in ("-h", "--help"):
            return EVERY
        if not arg.startswith("-"):
            return arg
    return None


def build_parser(command: str | None = EVERY) -> argparse.ArgumentParser:
    """The parser with the sub-commands' module that defines `command` registered (all of them for
    EVERY or a name none defines, so argparse can list the choices)."""
    parser = argparse.ArgumentParser(prog="breakwater", description=__doc__)
    parser.add_argument("--version", action="version", version=f"breakwater {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    if command is None:
        return parser
    home = HOMES.get(command)
    for name in (home,) if home else REGISTRARS:
        importlib.import_module(name).register(sub)
        if command in sub.choices:
            break
    return parser


def quiet_pipe(command: str | None, args: argparse.Namespace | None = None) -> bool:
    """Whether the default SIGPIPE action ends this command: help and the print-only commands (None,
    the workbench, keeps it ignored)."""
    if command == EVERY:
        return True
    return command in PRINT_ONLY and not any(getattr(args, name, None) for name in TALKS)


def main(argv: list[str] | None = None) -> int:
    program = argv is None   # the console script: the process ends when this returns
    argv = sys.argv[1:] if argv is None else argv
    command = wanted_command(argv)
    _sigpipe(quiet_pipe(command))   # `breakwater --help | head` ends quietly too
    parser = build_parser(command)
    args = parser.parse_args(argv)
    _sigpipe(quiet_pipe(getattr(args, "command", None) or command, args))
    try:
        code = int(_dispatch(args) or 0)
        if program:
            # what the command built (a session of tens of MB, the pipeline's caches) is freed with the
            # process: the collector need not walk it once more on the way out (0.12 s after a simulate
            # of the 31 MB bench session)
            gc.freeze()
        return code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # stdout was closed by its reader: what is left to flush goes nowhere, not to a traceback at exit
        _drop_stdout()
        return 0
    except Exception as exc:  # noqa: BLE001 - the last resort: one line and a report, never a traceback
        from breakwater.cli.crash import report_crash

        print(report_crash(exc, argv if argv is not None else sys.argv[1:]), file=sys.stderr)
        return 70  # EX_SOFTWARE


def _sigpipe(default: bool) -> None:
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL if default else signal.SIG_IGN)


def _drop_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def _dispatch(args: argparse.Namespace) -> int | None:
    """The sub-command asked for, or the workbench on the bundled sample when none was."""
    func = getattr(args, "func", None)
    if func is None:
        from breakwater.cli import ui as ui_commands

        func = ui_commands.default
    return func(args)


def run() -> int:
    """The console script (and `python -m breakwater`): `main()`, then `leave`."""
    return leave(main())


def leave(code: int) -> int:
    """End a one-shot command's process once stdout and stderr are flushed, without the interpreter
    freeing what it built (tens of MB after a simulate of the 31 MB bench session: ~5 ms). Anything
    else, or a flush that fails, returns `code` to end as before (the same messages, the same codes)."""
    if wanted_command(sys.argv[1:]) in ONE_SHOT:
        store = sys.modules.get("breakwater.core.log.count_store")
        if store is not None:   # the counts this run worked out, kept for the next (os._exit runs no atexit)
            store.flush_all()
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:  # noqa: BLE001 - the interpreter's own exit reports it, as before
            return code
        os._exit(code)
    return code
