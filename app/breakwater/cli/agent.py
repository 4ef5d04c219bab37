"""`breakwater run` (SPEC §11): the live agent, headless.

Prints the final answer, then `session: PATH`. Failures end in one line on stderr and a
non-zero status: 2 for unusable settings, 1 for a run that could not finish (70, with a crash
report, for a failure nobody foresaw: the command line's last resort). All of it is redacted.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from breakwater.core.log.visible import visible
from breakwater.core.policy import DEFAULT_PRESET, preset_names
from breakwater.tools import sandbox


def register(sub) -> None:
    p = sub.add_parser("run", help="run the agent headless on one prompt",
                       description="Run the agent on one prompt without the workbench; print the final answer "
                                   "and the session file's path.")
    p.add_argument("--prompt", required=True, help="the task for the agent")
    p.add_argument("--base-url", help="OpenAI-compatible endpoint (default: $OPENAI_BASE_URL, the config file, "
                                      "else OpenAI)")
    p.add_argument("--model", help="model name (default: the config file's, else the first the endpoint lists)")
    p.add_argument("--summary-model", help="model for deep-compaction summaries (default: --model)")
    p.add_argument("--workspace", metavar="DIR", type=Path, help="the directory the agent works in (default: .)")
    p.add_argument("--window", type=int, help="the model's context window in tokens")
    p.add_argument("--yes", dest="auto_approve", action="store_true", default=None,
                   help="approve every tool call (bash, write_file) without asking")
    p.add_argument("--max-steps", type=int, help="model requests allowed before giving up (default 50)")
    p.add_argument("--preset", choices=preset_names(), help=f"compaction policy (default {DEFAULT_PRESET})")
    sandbox.add_argument(p)
    p.set_defaults(func=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    from breakwater.agent.approval import TerminalApprover
    from breakwater.agent.config import ConfigError, load_config, resolve_sandbox
    from breakwater.agent.redact import Redactor
    from breakwater.agent.session import AgentError, run_agent
    from breakwater.core.policy import PolicyError

    flags = {"base_url": args.base_url, "model": args.model, "summary_model": args.summary_model,
             "workspace": args.workspace, "window": args.window, "auto_approve": args.auto_approve,
             "max_steps": args.max_steps, "preset": args.preset, "sandbox": args.sandbox,
             "tool_read_paths": args.tool_read_paths}
    try:
        config = load_config(flags)
        sandbox.say_once(resolve_sandbox(config), prefix="breakwater run")
    except (ConfigError, PolicyError, sandbox.SandboxError) as exc:
        print(f"breakwater run: {exc}", file=sys.stderr)
        return 2
    say = Redactor(config.api_key)  # everything printed passes the log's redaction: servers echo keys
    approve = TerminalApprover() if sys.stdin is not None and sys.stdin.isatty() else None
    on_event = ProgressPrinter() if sys.stderr.isatty() else None
    try:
        result = asyncio.run(run_agent(config, args.prompt, approve=approve, on_event=on_event))
    except AgentError as exc:
        where = f" (session: {exc.session_path})" if exc.session_path else ""
        print(visible(say(f"breakwater run: {exc}{where}")), file=sys.stderr)
        return 1
    except PolicyError as exc:
        print(visible(say(f"breakwater run: {exc}")), file=sys.stderr)
        return 2
    print(visible(say(result.answer)))
    print(f"session: {result.session_path}")
    return 0


class ProgressPrinter:
    """What a person at a terminal sees while the run goes: tools, compactions, retries."""

    def __call__(self, ev) -> None:
        from breakwater.agent.approval import describe

        if ev.kind == "tool_start":
            line = f"→ {describe(ev.call, 160)}"
        elif ev.kind == "compaction":
            line = (f"· deep compaction: {ev.event.get('covered')} messages summarized "
                    f"({ev.event.get('summarizer')}, trigger {ev.event.get('trigger')})")
        elif ev.kind == "retry":
            wait = ev.event.get("retry_in_s")
            line = f"· {visible(ev.text)}; retrying" + ("" if wait is None else f" in {wait} s")
        elif ev.kind == "error":
            line = f"! {visible(ev.text)}"
        else:
            return
        print(line, file=sys.stderr, flush=True)
