"""Headless commands of the core: `simulate` and `tokens` (SPEC §11)."""

from __future__ import annotations

import argparse
import json
import sys
from importlib import resources
from pathlib import Path

from breakwater.core.overlay import apply_overlay, load_overlay
from breakwater.core.policy import DEFAULT_PRESET, PRESETS, Policy, PolicyError, from_mapping, load_toml, preset
from breakwater.core.session_log import SessionLog, SessionLogError
from breakwater.core.simulate import Simulation, simulate, view_at
from breakwater.core.tokens import TokenCounter, TokenizerUnavailable, encoding_for_model, heuristic_message

DEFAULT_SAMPLE = "long-refactor.jsonl"


def fail(reason: str) -> int:
    print(f"breakwater: {reason}", file=sys.stderr)
    return 2


def sample_path(name: str = DEFAULT_SAMPLE) -> Path:
    return Path(str(resources.files("breakwater.sample_sessions") / name))


def read_session(path: str | Path) -> SessionLog:
    """Load any supported session; report skipped lines on stderr, one line each."""
    from breakwater.formats import load_session

    log = load_session(path)
    for issue in log.issues[:50]:
        print(f"breakwater: warning: {issue}", file=sys.stderr)
    if len(log.issues) > 50:
        print(f"breakwater: warning: {len(log.issues) - 50} more lines skipped or repaired", file=sys.stderr)
    return log


def resolve_policy(args: argparse.Namespace, log: SessionLog | None) -> Policy:
    """--policy, else --preset, else the policy the session was recorded under, else the default;
    then --window (or the session's window when no policy file was given)."""
    header = log.header if log else {}
    if getattr(args, "policy", None):
        policy = load_toml(Path(args.policy))
    elif getattr(args, "preset", None):
        policy = preset(args.preset)
    elif isinstance(header.get("policy"), dict):
        try:  # a recording of our own agent: replay under exactly its policy
            policy = from_mapping(header["policy"])
        except PolicyError as exc:
            raise PolicyError(f"the policy recorded in the session is not usable ({exc}); pass --preset") from None
    else:
        recorded = header.get("preset")
        policy = preset(recorded if recorded in PRESETS else DEFAULT_PRESET)
    window = getattr(args, "window", None) or (None if getattr(args, "policy", None) else header.get("window"))
    if isinstance(window, int) and window != policy.window:
        policy = policy.with_changes(window=window)
    return policy


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("simulate", help="replay a session under a policy and print what each request would send")
    p.add_argument("session", help="session file (native JSONL or OpenAI messages)")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--preset", choices=sorted(PRESETS), help=f"named policy (default {DEFAULT_PRESET})")
    group.add_argument("--policy", metavar="FILE.toml", help="policy file")
    p.add_argument("--window", type=int, help="context window in tokens (default: the session's, else the policy's)")
    p.add_argument("--counter", choices=("exact", "heuristic"), default="exact",
                   help="exact: heuristic on the hot path, tiktoken near the limits (default); heuristic: never tiktoken")
    p.add_argument("--model", help="model name that picks the tokenizer (default: the session's)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--view", type=int, metavar="TURN", help="print the exact request of one turn as JSON")
    p.add_argument("--overlay", metavar="FILE",
                   help="pins, triggers and undos made in the workbench on this recording (its .overlay.jsonl)")
    p.set_defaults(func=cmd_simulate)

    t = sub.add_parser("tokens", help="heuristic, exact and recorded API token counts of a session")
    t.add_argument("file")
    t.add_argument("--model", help="model name that picks the tokenizer (default: the session's, else gpt-4o)")
    t.add_argument("--json", action="store_true")
    t.set_defaults(func=cmd_tokens)


def with_overlay(log: SessionLog, path: str | Path | None) -> SessionLog:
    """The log with the overlay at `path` merged in; its bad lines reported like the session's."""
    if not path:
        return log
    events, issues = load_overlay(Path(path))
    for issue in issues:
        print(f"breakwater: warning: {issue}", file=sys.stderr)
    return apply_overlay(log, events)


def cmd_simulate(args: argparse.Namespace) -> int:
    try:
        log = with_overlay(read_session(args.session), getattr(args, "overlay", None))
        policy = resolve_policy(args, log)
    except (SessionLogError, PolicyError) as exc:
        return fail(str(exc))
    if args.view is not None:
        turns = log.turn_count()
        if args.view < 1 or args.view > turns + 1:
            return fail(f"--view {args.view}: the session has turns 1..{turns} (and {turns + 1}, the next request)")
        view = view_at(log, policy, args.view, args.counter, args.model)
        out = {"turn": view.turn, "zone": view.zone, "raw_tokens": view.raw_tokens, "sent_tokens": view.sent_tokens,
               "counted": view.counted, "messages": view.to_api(), "edits": [e.to_json() for e in view.edits]}
        print(json.dumps(out, ensure_ascii=False, indent=1))
        return 0
    sim = simulate(log, policy, args.counter, args.model)
    if args.json:
        print(json.dumps(sim.to_json(), ensure_ascii=False))
    else:
        print_table(sim, log)
    return 0


def print_table(sim: Simulation, log: SessionLog) -> None:
    from rich.console import Console
    from rich.table import Table

    p = sim.policy
    console = Console()
    title = log.header.get("title") or (log.path.name if log.path else log.id)
    table = Table(title=f"{title} — preset {p.preset}, window {p.window:,} (soft {p.soft_limit:,}, "
                        f"hard {p.hard_limit:,}), counter {sim.counter}"
                        + ("" if sim.encoding else " ≈ estimate"), title_justify="left")
    for col, just in (("turn", "right"), ("raw", "right"), ("sent", "right"), ("zone", "left"),
                      ("stage", "left"), ("edits", "left")):
        table.add_column(col, justify=just)
    styles = {"safe": "green", "soft": "yellow", "hard": "bold red"}
    for t in sim.turns:
        edits = ", ".join(f"{k} {v}" for k, v in sorted(t.edits.items()))
        if t.compaction:
            edits = f"[bold magenta]deep compaction[/] · {edits}"
        mark = "" if t.counted == "exact" else "≈"
        table.add_row(str(t.turn), f"{t.raw_tokens:,}", f"{mark}{t.sent_tokens:,}",
                      f"[{styles[t.zone]}]{t.zone}[/]", t.level, edits)
    console.print(table)
    saved = sim.billed_raw - sim.billed_sent
    pct = 100 * saved / sim.billed_raw if sim.billed_raw else 0
    console.print(f"billed without compaction {sim.billed_raw:,} · with {sim.billed_sent:,} · "
                  f"saved {saved:,} ({pct:.0f}%) · {len(sim.compactions)} deep compactions · "
                  f"{len(sim.turns)} turns · pipeline {sim.seconds * 1000:.0f} ms")


def cmd_tokens(args: argparse.Namespace) -> int:
    try:
        log = read_session(args.file)
    except SessionLogError as exc:
        return fail(str(exc))
    model = args.model or log.header.get("model") or "gpt-4o"
    msgs = log.messages
    heuristic = sum(heuristic_message(m) for m in msgs)
    enc = encoding_for_model(model)
    exact = None
    if enc:
        try:
            exact = TokenCounter(enc).exact_messages(msgs)
        except TokenizerUnavailable as exc:
            return fail(str(exc))
    api = None
    for ev in log.events:
        if ev.type == "usage" and isinstance(ev.get("prompt_tokens"), int):
            api = ev.get("prompt_tokens")
    if args.json:
        out = {"heuristic": heuristic, "exact": exact, "encoding": enc, "model": model, "messages": len(msgs)}
        if api is not None:
            out["api_last_prompt_tokens"] = api
        print(json.dumps(out))
        return 0
    print(f"{'messages':>10}  {len(msgs):,}")
    print(f"{'heuristic':>10}  {heuristic:,}")
    print(f"{'exact':>10}  " + (f"{exact:,} ({enc})" if exact is not None else f"≈ unknown model {model!r}: heuristic only"))
    if api is not None:
        print(f"{'api':>10}  {api:,} (last prompt_tokens recorded)")
    return 0


def default(args: argparse.Namespace) -> int:
    """`breakwater` with no command: until the workbench lands, simulate the bundled sample."""
    path = sample_path()
    ns = argparse.Namespace(session=str(path), preset=None, policy=None, window=None, counter="exact",
                            model=None, json=False, view=None, overlay=None)
    return cmd_simulate(ns)
