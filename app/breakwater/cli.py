"""Command line (SPEC §11). Each layer registers its own sub-commands."""

from __future__ import annotations

import argparse
import signal
import sys

from breakwater import __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="breakwater", description=__doc__)
    parser.add_argument("--version", action="version", version=f"breakwater {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    from breakwater.core import commands as core_commands
    from breakwater.tools import commands as tool_commands
    from breakwater.memory import commands as memory_commands
    from breakwater.agent import commands as agent_commands
    from breakwater.formats import commands as format_commands
    from breakwater.ui import commands as ui_commands
    from breakwater.fidelity import commands as fidelity_commands

    core_commands.register(sub)
    tool_commands.register(sub)
    memory_commands.register(sub)
    agent_commands.register(sub)
    format_commands.register(sub)
    ui_commands.register(sub)
    fidelity_commands.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    if hasattr(signal, "SIGPIPE"):  # `breakwater ... | head` ends quietly, as a command-line tool should
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        from breakwater.ui import commands as ui_commands

        return ui_commands.default(args)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # noqa: BLE001 - the last resort: one line and a report, never a traceback
        from breakwater.crash import report_crash

        print(report_crash(exc, argv if argv is not None else sys.argv[1:]), file=sys.stderr)
        return 70  # EX_SOFTWARE
