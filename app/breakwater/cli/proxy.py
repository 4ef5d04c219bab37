"""`breakwater proxy [--port N] --upstream URL [--preset P | --policy FILE.toml | --observe]` (SPEC §9, §11)."""

from __future__ import annotations

import argparse
import asyncio
import signal
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from breakwater.cli.core import fail
from breakwater.core.policy import DEFAULT_PRESET, PolicyError, load_toml, preset, preset_names


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("proxy", help="sit between an agent and its provider: record each conversation, compact it",
                       description="A local proxy for the Anthropic Messages, OpenAI Chat Completions and OpenAI "
                                   "Responses APIs. Point the agent's base URL at it; each conversation becomes a "
                                   "session that `breakwater browse` lists and `replay --follow` follows.")
    p.add_argument("--upstream", required=True, metavar="URL",
                   help="the provider's base URL, e.g. https://api.anthropic.com or https://api.openai.com/v1")
    p.add_argument("--port", type=int, default=8788, help="port to listen on (default 8788; 0: any free one)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1; anything else lets other machines use your key's quota)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--observe", action="store_true", help="forward every request unchanged; record only")
    mode.add_argument("--preset", choices=preset_names(),
                      help=f"compact under this preset (default {DEFAULT_PRESET}; an agent's strategy too)")
    mode.add_argument("--policy", metavar="FILE.toml", help="compact under this policy file")
    p.add_argument("--sessions", metavar="DIR", type=Path,
                   help="where the session logs go (default: the folder `breakwater browse` lists them from)")
    p.add_argument("--summary-model", metavar="M",
                   help="summarize deep compactions with this model, at the endpoint Breakwater's own agent uses "
                        "($OPENAI_BASE_URL / $OPENAI_API_KEY, else the config file); default: the offline summary")
    p.add_argument("--max-request-mb", type=int, default=64, help="largest request body accepted (default 64)")
    p.add_argument("--read-timeout", type=float, default=600.0,
                   help="seconds the upstream may be silent within a reply (default 600)")
    p.set_defaults(func=cmd_proxy)


def cmd_proxy(args: argparse.Namespace) -> int:
    from breakwater.formats.sessions import proxy_sessions_dir
    from breakwater.proxy.server import Limits, Proxy, Settings, say, serve

    parts = urlsplit(args.upstream)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return fail(f"--upstream {args.upstream}: not an http(s) URL")
    if parts.username or parts.password:
        return fail("--upstream: credentials in the URL would be recorded; give the key to the agent instead")
    upstream = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
    try:
        policy = load_toml(Path(args.policy)) if args.policy else preset(args.preset or DEFAULT_PRESET)
    except PolicyError as exc:
        return fail(str(exc))
    if not 1 <= args.max_request_mb <= 4096 or args.read_timeout <= 0:
        return fail("--max-request-mb must be 1..4096 and --read-timeout positive")
    folder = (args.sessions or proxy_sessions_dir()).expanduser()
    try:
        summarizer = _summarizer(args.summary_model, policy) if args.summary_model else None
    except ValueError as exc:
        return fail(str(exc))
    settings = Settings(folder, "observe" if args.observe else "compact", policy, upstream,
                        fixed_window=bool(args.policy), summarizer=summarizer)
    limits = Limits(max_request=args.max_request_mb << 20, read_s=args.read_timeout)
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        say(f"warning: listening on {args.host}, not 127.0.0.1: anyone who reaches this port uses the keys "
            f"the agents send through it")

    def ready(port: int) -> None:
        what = "observing (requests forwarded unchanged)" if args.observe else f"compacting under {policy.preset}"
        say(f"listening on http://{args.host}:{port} -> {upstream}, {what}; sessions in {folder}")

    async def main() -> None:
        task = asyncio.ensure_future(serve(Proxy(upstream, settings, limits), args.host, args.port, ready))
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, task.cancel)
        try:
            await task
        except asyncio.CancelledError:
            pass

    try:
        asyncio.run(main())
    except OSError as exc:
        return fail(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}")
    return 0


def _summarizer(model: str, policy):
    """The summary model's summarizer, at the endpoint of Breakwater's own configuration (its key is that
    configuration's, never one an agent sent through the proxy)."""
    import openai

    from breakwater.agent.config import ConfigError, load_config
    from breakwater.agent.redact import Redactor
    from breakwater.agent.summarizer import LLMSummarizer

    try:
        config = load_config({"summary_model": model})
    except ConfigError as exc:
        raise ValueError(str(exc)) from None
    if not config.base_url:
        raise ValueError("--summary-model needs an endpoint: set OPENAI_BASE_URL (or base_url in the config file)")
    client = openai.OpenAI(base_url=config.base_url, api_key=config.api_key or "none", max_retries=0,
                           timeout=config.request_timeout_s)
    return LLMSummarizer(client, model, window=policy.window, max_tokens=config.summary_max_tokens,
                         temperature=config.summary_temperature, retry_cap_s=min(10.0, config.retry_cap_s),
                         redact=Redactor(config.api_key))
