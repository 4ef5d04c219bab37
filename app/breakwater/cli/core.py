"""Headless commands of the core: `simulate` and `tokens` (SPEC §11)."""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
from contextlib import contextmanager
from pathlib import Path

from typing import TYPE_CHECKING

from breakwater.core.log.visible import json_safe, visible
from breakwater.core.log.models import DEFAULT_MODEL, counting_model, resolve_window
from breakwater.core.figures import tokens_figure
from breakwater.core.log.words import plural
from breakwater.core.policy import DEFAULT_PRESET, PRESET_DESCRIPTIONS, Policy, PolicyError, preset_names
from breakwater.core.policy.agents import AGENT_DESCRIPTIONS
from breakwater.core.policy.for_session import resolve_policy

if TYPE_CHECKING:  # the heavy modules load in the commands that use them, so start-up stays short
    from breakwater.core.log.session_log import SessionLog
    from breakwater.core.simulate import Simulation

DEFAULT_SAMPLE = "long-refactor.jsonl"


def counting_epilog() -> str:
    from breakwater.core.figures import FIGURE_RULES

    import textwrap

    def items(pairs) -> str:
        return "\n".join(textwrap.fill(f"{name}: {text}", 96, initial_indent="  ", subsequent_indent="    ")
                         for name, text in pairs)

    counter = textwrap.fill(f"counter: exact (the default) uses tiktoken with the encoding of --model, else of the "
                            f"session's model, else of {DEFAULT_MODEL}, wherever the zone or `fits` could change; an "
                            f"unknown model falls back to the heuristic (≈). `breakwater tokens` follows the same rule.",
                            96)
    window = textwrap.fill("window: --window, else the window the session recorded, else the named model's "
                           "(genai-prices), else the policy's; `window_source` says which. The model's prices give "
                           "the cost fields (USD, cache-aware).", 96)
    intro = textwrap.fill("how each figure is counted (≈ marks an estimate): a request is visible tokens plus the "
                          "unseen overhead, fitted to the transcript's recorded usage; without and with compaction "
                          "are counted alike, so saved = without − with:", 96)
    return (f"{intro}\n{items(FIGURE_RULES.items())}\n\n{counter}\n\n{window}\n\n"
            f"presets:\n{items(PRESET_DESCRIPTIONS.items())}\n\n"
            f"other agents' strategies (each value's source: core/policy/agents.py):\n{items(AGENT_DESCRIPTIONS.items())}")


def fail(reason: str) -> int:
    print(f"breakwater: {reason}", file=sys.stderr)
    return 2


def sample_path(name: str = DEFAULT_SAMPLE) -> Path:
    from importlib import resources

    return Path(str(resources.files("breakwater.sample_sessions") / name))


def read_session(path: str | Path, fmt: str = "auto", session: str | None = None) -> SessionLog:
    """Load any supported session (of a file holding several, the principal one or `session`);
    report skipped lines on stderr, one line each."""
    from breakwater.formats import load_session

    log = load_session(path, fmt, session)
    for issue in log.issues[:50]:
        print(f"breakwater: warning: {issue}", file=sys.stderr)
    if len(log.issues) > 50:
        print(f"breakwater: warning: {len(log.issues) - 50} more lines skipped or repaired", file=sys.stderr)
    return log


def add_replay_arguments(p: argparse.ArgumentParser) -> None:
    """SESSION and how to replay it (policy, window, counter, model): shared by simulate and replay."""
    p.add_argument("session", help="session file (native JSONL, OpenAI messages, or another agent's transcript)")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--preset", choices=preset_names(), help=f"named policy (default {DEFAULT_PRESET})")
    group.add_argument("--policy", metavar="FILE.toml", help="policy file")
    p.add_argument("--window", type=int, help="context window in tokens (default: the session's, else its model's, "
                   "else the policy's)")
    p.add_argument("--counter", choices=("exact", "heuristic"), default="exact",
                   help="exact: heuristic on the hot path, tiktoken wherever the zone or fits could change (default); "
                        "heuristic: never tiktoken")
    p.add_argument("--model", help=f"model name that picks the tokenizer, the window and the prices (default: the "
                                   f"session's, else {DEFAULT_MODEL} for the tokenizer)")
    # the formats are named by the reader (an unknown one is refused there): importing it here would
    # load every command's start-up with it
    p.add_argument("--format", default="auto", metavar="FORMAT",
                   help="the session file's format: claude-code, codex, pi, openai, swe-agent, mini-swe-agent, "
                        "openhands or native (default: detected from the content)")
    p.add_argument("--session", dest="session_id", metavar="ID",
                   help="of a file holding several sessions (sidechains, an eval output), the one to open "
                        "(its id or the end of it)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("simulate", help="replay a session under a policy and print what each request would send",
                       description="Replay a session under a policy: one row per request (turn), with the tokens "
                                   "it would send, its zone and what the pipeline did to it.",
                       epilog=counting_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    add_replay_arguments(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--view", type=int, metavar="TURN", help="print the exact request of one turn as JSON "
                   "(with --compare: the turn whose messages are compared, default the last)")
    p.add_argument("--compare", metavar="P2", help="also simulate under P2 (a preset name or a policy file) "
                   "and print both and their difference")
    p.add_argument("--overlay", metavar="FILE",
                   help="pins, triggers and undos made in the workbench on this recording (its .overlay.jsonl)")
    p.set_defaults(func=cmd_simulate)

    t = sub.add_parser("tokens", help="heuristic, exact and recorded API token counts of a session or any text file",
                       description="Count a session (every supported format) or any other text file: the seed's "
                                   "heuristic, tiktoken's exact count and, for a session, the last prompt_tokens "
                                   "the API reported.")
    t.add_argument("file")
    t.add_argument("--model", help=f"model name that picks the tokenizer (default: the session's, else {DEFAULT_MODEL})")
    t.add_argument("--json", action="store_true")
    t.set_defaults(func=cmd_tokens)


def with_overlay(log: SessionLog, path: str | Path | None) -> SessionLog:
    """The log with the overlay at `path` merged in; its bad lines reported like the session's."""
    if not path:
        return log
    from breakwater.core.overlay import apply_overlay, load_overlay

    events, issues = load_overlay(Path(path))
    for issue in issues:
        print(f"breakwater: warning: {issue}", file=sys.stderr)
    return apply_overlay(log, events)


def compare_policy(args: argparse.Namespace, log: SessionLog) -> Policy:
    """P2 of --compare, under the first policy's window rule: --window, else the session's window
    unless P2 is a file (a file's window is part of what is being compared)."""
    from breakwater.core.policy.toml_file import resolve

    try:
        other = resolve(args.compare)
        if args.compare in preset_names():
            window, args.compare_window_source = resolve_window(log.header, args.model, args.window)
        else:
            window, args.compare_window_source = args.window, "--window" if args.window else "policy file"
        if isinstance(window, int) and window != other.window:
            other = other.with_changes(window=window)
    except PolicyError as exc:
        raise PolicyError(f"--compare {args.compare}: {exc}") from None
    return other


def cmd_simulate(args: argparse.Namespace) -> int:
    # a log is up to millions of objects, and loading and simulating it make next to no cycles (a few
    # hundred over a million messages): the collector, run every few hundred allocations, would walk
    # them all again and again, the first time right after loading
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _simulate_command(args)
    finally:
        if collecting:
            gc.enable()


def _simulate_command(args: argparse.Namespace) -> int:
    from breakwater.core.log.session_log import SessionLogError
    from breakwater.core.simulate import simulate, view_at
    from breakwater.fidelity.loops import of_simulation

    args.model = args.model or None
    try:
        log = with_overlay(read_session(args.session, args.format, args.session_id), getattr(args, "overlay", None))
        policy = resolve_policy(args, log)
        other = compare_policy(args, log) if getattr(args, "compare", None) else None
    except (SessionLogError, PolicyError) as exc:
        return fail(str(exc))
    turns = log.turn_count()
    if other is not None:
        if args.view is not None and not 1 <= args.view <= turns:
            return fail(f"--view {args.view} with --compare: the session has turns 1..{turns}")
        from breakwater.core.compare import compare

        comparison = compare(log, policy, other, args.counter, args.model, args.view,
                             (args.window_source, args.compare_window_source))
        loops = {side: of_simulation(sim, log) for side, sim in (("a", comparison.a), ("b", comparison.b))}
        if args.json:
            out = comparison.to_json()
            for side, found in loops.items():
                out[side]["loops"] = [loop.to_json() for loop in found]
            print(json_safe(json.dumps(out, ensure_ascii=False)))
        else:
            print_comparison(comparison, log)
            for side, found in loops.items():
                print_loops(found, f"{side.upper()}: ")
        return 0
    if args.view is not None:
        if args.view < 1 or args.view > turns + 1:
            return fail(f"--view {args.view}: the session has turns 1..{turns} (and {turns + 1}, the next request)")
        view = view_at(log, policy, args.view, args.counter, args.model)
        out = {"turn": view.turn, "zone": view.zone, "raw_tokens": view.raw_tokens, "sent_tokens": view.sent_tokens,
               "counted": view.counted, "fits": view.fits, "stable_prefix_tokens": view.stable_prefix_tokens,
               "messages": view.to_api(), "edits": [e.to_json() for e in view.edits], "notes": list(view.notes)}
        print(json_safe(json.dumps(out, ensure_ascii=False, indent=1)))
        if not view.fits:
            print(f"breakwater: warning: turn {view.turn} needs {view.sent_tokens:,} tokens, over the window of "
                  f"{view.window:,}; the agent would not send it", file=sys.stderr)
        return 0
    if args.json:
        from breakwater.core.simulate import JsonWriter
        from breakwater.fidelity.loops import file_reads, find

        writer = JsonWriter(sys.stdout)   # the turns are written as they come, never all kept
        sim = simulate(log, policy, args.counter, args.model, on_turn=writer.turn, window_source=args.window_source)
        loops = find(sim.compaction_turns, file_reads(log))   # of_simulation, from what was not kept
        writer.finish(sim, {"loops": [loop.to_json() for loop in loops]})
    else:
        sim = simulate(log, policy, args.counter, args.model, window_source=args.window_source)
        print_table(sim, log)
        print_loops(of_simulation(sim, log))
    over = sim.over_window
    if over:
        first = over[0]
        print(f"breakwater: warning: {plural(len(over), 'request')} over the window of {policy.window:,} tokens "
              f"(first: turn {first.turn}, {first.sent_tokens:,} tokens); the agent would not send them",
              file=sys.stderr)
    return 0


def print_table(sim: Simulation, log: SessionLog) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    p = sim.policy
    console = Console()
    title = log.header.get("title") or (log.path.name if log.path else log.id)
    # the title comes from the transcript (or its file name): drawn visibly, never read as markup
    table = Table(title=Text(visible(f"{title} — preset {p.preset}, window {p.window:,} (soft {p.soft_limit:,}, "
                                     f"hard {p.hard_limit:,}), counter {sim.counter}"
                                     + ("" if sim.encoding else " ≈ estimate"))), title_justify="left")
    for col, just in (("turn", "right"), ("raw", "right"), ("sent", "right"), ("zone", "left"),
                      ("stage", "left"), ("edits", "left")):
        table.add_column(col, justify=just)
    styles = {"safe": "green", "soft": "yellow", "hard": "bold red"}
    for t in sim.turns:
        edits = ", ".join(f"{k} {v}" for k, v in sorted(t.edits.items()))
        if t.compaction:
            edits = f"[bold magenta]deep compaction[/] · {edits}"
        if t.recorded_compaction:
            edits = f"[bold cyan]recorded compaction[/] · {edits}"
        mark = "≈" if t.estimated else ""
        sent = f"{mark}{t.sent_tokens:,}" if t.fits else f"[bold red]{mark}{t.sent_tokens:,} over[/]"
        table.add_row(str(t.turn), f"≈{t.raw_tokens:,}", sent, f"[{styles[t.zone]}]{t.zone}[/]", t.level, edits)
    console.print(table)
    pct = 100 * sim.saved / sim.billed_raw if sim.billed_raw else 0
    console.print(f"billed without compaction ≈{sim.billed_raw:,} · "
                  f"with {tokens_figure(sim.billed_sent, sim.billed_sent_estimated)} · "
                  f"saved ≈{sim.saved:,} ({pct:.0f}%) · {plural(len(sim.compactions), 'deep compaction')} · "
                  + (f"{len(sim.recorded)} recorded in the log · " if sim.recorded else "") +
                  f"{plural(len(sim.turns), 'turn')} · pipeline {sim.seconds * 1000:.0f} ms")


def print_loops(loops, prefix: str = "") -> None:
    from rich.console import Console

    console = Console()
    for loop in loops:
        console.print(f"{prefix}[bold red]⟳ {loop.text}[/] — {loop.meaning}")


def print_comparison(comparison, log: SessionLog) -> None:
    from rich.console import Console
    from rich.table import Table

    a, b = comparison.a.policy, comparison.b.policy
    console = Console()
    title = log.header.get("title") or (log.path.name if log.path else log.id)
    table = Table(title=f"{title} — A: {a.preset} window {a.window:,} · B: {b.preset} window {b.window:,}",
                  title_justify="left")
    for col, just in (("turn", "right"), ("A sent", "right"), ("B sent", "right"), ("B − A", "right"),
                      ("A zone", "left"), ("B zone", "left"), ("A stage", "left"), ("B stage", "left")):
        table.add_column(col, justify=just)
    for t in comparison.turns:
        if not t.differs:
            continue
        marks = [("◆" if s.compaction else "") for s in (t.a, t.b)]
        table.add_row(str(t.turn), f"{t.a.sent_tokens:,}{marks[0]}", f"{t.b.sent_tokens:,}{marks[1]}",
                      f"{t.delta:+,}", t.a.zone, t.b.zone, t.a.level, t.b.level)
    console.print(table)
    for name, tot in zip("AB", comparison.totals):
        console.print(f"{name}: billed without compaction ≈{tot.billed_raw:,} · "
                      f"with {tokens_figure(tot.billed_sent, tot.billed_sent_estimated)} · "
                      f"saved ≈{tot.saved:,} ({tot.saved_pct:.0f}%) · {plural(tot.compactions, 'deep compaction')} · "
                      f"{plural(tot.hard_turns, 'turn')} in the hard zone")
    same = sum(1 for t in comparison.turns if not t.differs)
    console.print(f"{same} of {len(comparison.turns)} turns identical (not listed; ◆ deep compaction); "
                  f"at turn {comparison.turn}, {len(comparison.messages)} messages are edited differently")


def cmd_tokens(args: argparse.Namespace) -> int:
    from breakwater.core.log.regular_file import RefusedFile
    from breakwater.core.log.session_log import SessionLogError
    from breakwater.core.log.tokens import TokenCounter, TokenizerUnavailable, encoding_for_model, heuristic_message

    log, counted, refused = None, None, None
    try:
        if _may_be_session(args.file):
            try:
                log = read_session(args.file)
            except SessionLogError as exc:
                refused = exc
        if log is None:
            model = counting_model({}, args.model)
            enc = encoding_for_model(model)
            counted = count_text_file(args.file, enc)
            if counted is None:
                return fail(str(refused) if refused else f"{args.file}: not a session, and not UTF-8 text to count")
            text_chars, heuristic, exact = counted
        else:
            model = counting_model(log.header, args.model)
            enc = encoding_for_model(model)
            heuristic = sum(heuristic_message(m) for m in log.messages)
            exact = TokenCounter(enc).exact_messages(log.messages) if enc else None
    except (RefusedFile, OSError) as exc:
        return fail(str(exc) if isinstance(exc, RefusedFile) else f"{args.file}: cannot read ({exc.strerror or exc})")
    except TokenizerUnavailable as exc:
        return fail(str(exc))
    api = None
    for ev in (log.events if log else ()):
        if ev.type == "usage" and isinstance(ev.get("prompt_tokens"), int):
            api = ev.get("prompt_tokens")
    if args.json:
        out = {"heuristic": heuristic, "exact": exact, "encoding": enc, "model": model,
               "kind": "session" if log else "text"}
        if log is not None:
            out["messages"] = len(log.messages)
        if api is not None:
            out["api_last_prompt_tokens"] = api
        print(json.dumps(out))
        return 0
    if log is not None:
        print(f"{'messages':>10}  {len(log.messages):,}")
    else:
        print(f"{'text':>10}  {text_chars:,} chars (not a session: counted as plain text)")
    print(f"{'heuristic':>10}  ≈{heuristic:,}")
    print(f"{'exact':>10}  " + (f"{exact:,} ({enc})" if exact is not None else f"≈ unknown model {model!r}: heuristic only"))
    if api is not None:
        print(f"{'api':>10}  {api:,} (last prompt_tokens recorded)")
    return 0


TEXT_CHUNK = 1 << 22   # bytes read at a time by `tokens` of a text file


def _may_be_session(path: str) -> bool:
    """Whether the file starts as a session does (JSON: `{` or `[`). A text file is then never loaded
    as one: on a 10 MB text that took 83 s, as each of the eight readers tried it line by line."""
    from breakwater.core.log.regular_file import open_regular

    with open(open_regular(path), "rb") as fh:
        head = fh.read(65536).lstrip()
    return head[:1] in (b"{", b"[") or head.startswith(b"\xef\xbb\xbf")


def count_text_file(path: str, encoding: str | None) -> tuple[int, int, int | None] | None:
    """(characters, heuristic, exact or None) of a UTF-8 text file, read TEXT_CHUNK bytes at a time
    (memory stays a few chunks, not the text and its copies); None when it is not text (a NUL byte in
    its first 64 KB, or bytes that are not UTF-8). The counts are those of the whole text
    (`heuristic_text`, `TokenCounter.exact_text`): the text is encoded in the same pieces, the last
    one of each chunk carried into the next, several at once over the cores. With stderr a terminal,
    a bar says how far it is."""
    import codecs

    from breakwater.core.log.regular_file import open_regular
    from breakwater.core.log.tokens import ascii_chars, get_encoding, pieces

    enc = get_encoding(encoding) if encoding else None
    decoder = codecs.getincrementaldecoder("utf-8")()
    chars = n_ascii = exact = 0
    carry = ""
    with open(open_regular(path), "rb", buffering=0) as fh, _bytes_bar(os.fstat(fh.fileno()).st_size) as advance:
        first = True
        while True:
            raw = fh.read(TEXT_CHUNK)
            if first and b"\0" in raw[:65536]:
                return None
            first = False
            try:
                text = decoder.decode(raw, final=not raw)
            except UnicodeDecodeError:
                return None
            chars += len(text)
            n_ascii += ascii_chars(text)
            if enc is not None:
                parts = list(pieces(carry + text))   # the pieces of the whole text, but the last: it may go on
                carry = parts.pop() if raw else ""
                exact += sum(map(len, enc.encode_ordinary_batch(parts, num_threads=os.cpu_count() or 1)))
            advance(len(raw))
            if not raw:
                break
    heuristic = n_ascii // 4 + (chars - n_ascii) // 2 + 1
    return chars, heuristic, exact if enc is not None else None


@contextmanager
def _bytes_bar(total: int):
    """advance(n) of a transient bar over `total` bytes on stderr, when stderr is a terminal."""
    from rich.console import Console

    console = Console(stderr=True)
    if not console.is_terminal:
        yield lambda n: None
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(TextColumn("counting"), BarColumn(), DownloadColumn(), TimeRemainingColumn(), console=console,
                  transient=True) as bar:
        job = bar.add_task("bytes", total=total)
        yield lambda n: bar.advance(job, n)
