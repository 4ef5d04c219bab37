"""Issue 36: the accounting model against what the providers billed, per format, by every path.

For each real transcript that records usage (tests/fixtures/real, and tests/fixtures/agent-runs: real agents
run offline against the scripted provider) and its generated variants (the
header's model dropped, the first requests cut), the agent's own history is replayed and every
request after the first recorded one is predicted from the usage recorded before it:

  simulate   `breakwater simulate --json --window 1000000` (the default preset, exact counter: what a
             user runs; nothing is compacted at that window, so each request is the agent's own)
  simulate o200k  the same counted by o200k whatever the model (the exact path runs near the limits,
             as it does for a session that names no model or a GPT model)
  eval       `eval`'s own-history check (fidelity/runner.py billed_check), exact and heuristic counter

Printed: billed vs predicted input tokens (median and p90 of |error|) per format and path, the cache
reads and writes against the recorded ones, and each session's cost of its recorded history (the
prediction, nothing compacted) against its recorded usage priced with genai-prices.

    .venv/bin/python bench/bench_accounting.py [--variants] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from breakwater.core.log.session_log import SessionLog
from breakwater.core.policy import preset
from breakwater.core.simulate import simulate
from breakwater.core.log.tokens import TokenCounter
from breakwater.fidelity.results import spread
from breakwater.fidelity.runner import billed_check
from breakwater.formats import load_session

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "real"
AGENT_RUNS = ROOT / "tests" / "fixtures" / "agent-runs"   # real agents run offline (its README.md)
WINDOW = 1_000_000


def sessions() -> list[Path]:
    return sorted([*(p for p in FIXTURES.glob("*/*") if p.name != "SOURCES.md"), *AGENT_RUNS.glob("*.jsonl")])


def records_usage(log: SessionLog) -> bool:
    return any(getattr(e, "type", None) == "usage" for e in log.entries)


def simulate_errors(log: SessionLog, counter: str = "exact", tokenizer: str | None = None) -> tuple[list[float], object]:
    """`tokenizer`: count by this model's tokenizer whatever the session's model (o200k: the exact path
    runs near the limits, as for a session naming no model)."""
    policy = preset("breakwater").with_changes(window=WINDOW)
    sim = simulate(log, policy, counter, tokens=TokenCounter.for_model(tokenizer) if tokenizer else None)
    errors, first = [], True
    for t in sim.turns:
        if t.billed_tokens is None:
            continue
        if not first:
            errors.append((t.sent_tokens - t.billed_tokens) / t.billed_tokens)
        first = False
    return errors, sim


def row(errors: list[float]) -> str:
    if not errors:
        return "      -        -     0"
    s = spread([abs(e) for e in errors])
    return f"{100 * s['median_abs_error']:6.2f}%  {100 * s['p90_abs_error']:6.2f}%  {len(errors):4d}"


def variants(path: Path, out: Path) -> list[Path]:
    """Copies of a JSONL transcript with a field removed: the model named only by the replies (the
    header's and pi's model_change dropped), and the first requests cut (the lines before the 5th reply)."""
    if path.suffix != ".jsonl" or path.parent.name not in ("pi", "claude-code", "codex"):
        return []
    objs = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    head = objs[:1] if objs and objs[0].get("type") in ("session", "session_meta") else []
    body = objs[len(head):]
    made = []
    if path.parent.name == "pi":
        nomodel = [{k: v for k, v in head[0].items() if k not in ("modelId", "provider")}] if head else []
        nomodel += [o for o in body if o.get("type") != "model_change"]
        made.append(_write(out / f"{path.parent.name}~nomodel~{path.name}", nomodel))
    replies = [i for i, o in enumerate(body) if _is_reply(o)]
    if len(replies) > 8:
        made.append(_write(out / f"{path.parent.name}~cut~{path.name}", head + body[replies[4] - 1:]))
    return made


def _is_reply(o: dict) -> bool:
    msg = o.get("message")
    return o.get("type") == "assistant" or isinstance(msg, dict) and msg.get("role") == "assistant"


def _write(path: Path, objs: list) -> Path:
    path.write_text("".join(json.dumps(o) + "\n" for o in objs), encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variants", action="store_true", help="also the generated variants of the fixtures")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    paths = sessions()
    with tempfile.TemporaryDirectory() as tmp:
        if args.variants:
            for p in list(paths):
                paths += variants(p, Path(tmp))
        by_format: dict[str, dict[str, list[float]]] = {}
        costs = []
        for path in paths:
            log = load_session(path)
            if not records_usage(log):
                continue
            fmt = path.parent.name if "~" not in path.name else "~".join(path.name.split("~")[:2])
            paths_errors = by_format.setdefault(fmt, {"simulate": [], "simulate o200k": [], "eval exact": [],
                                                      "eval heuristic": []})
            errs, sim = simulate_errors(log)
            paths_errors["simulate"] += errs
            paths_errors["simulate o200k"] += simulate_errors(log, tokenizer="gpt-4o")[0]
            for counter in ("exact", "heuristic"):
                check = billed_check(log, counter)
                if check is not None:
                    paths_errors[f"eval {counter}"] += check.input_signed
                    if counter == "exact":
                        costs.append((fmt, path.name, check))
    if args.json:
        print(json.dumps({"tokens": {f: {k: (spread([abs(e) for e in v]) | {"requests": len(v)}) for k, v in d.items()}
                                     for f, d in by_format.items()},
                          "money": {f"{fmt}/{name}": c.to_json() for fmt, name, c in costs}}, indent=1))
        return
    print("billed vs predicted input tokens, |error| median / p90 / requests")
    print(f"{'format':<22} {'path':<16} {'median':>7} {'p90':>8} {'n':>5}")
    for fmt, d in sorted(by_format.items()):
        for name, errors in d.items():
            print(f"{fmt:<22} {name:<16} {row(errors)}")
    print()
    print("money: the recorded history (nothing compacted) predicted through the provider's cache, against its")
    print("recorded usage priced with genai-prices (the requests after the first, as the tokens); per request:")
    print("a hit's read |predicted - recorded| / recorded, writes |predicted - recorded| / billed; the read share")
    print(f"{'session':<44} {'predicted':>10} {'recorded':>10} {'error':>8}  {'reads med/p90':>15}  {'writes med/p90':>15}"
          f"  {'read share pred/rec':>19}")
    for fmt, name, c in costs:
        j = c.to_json()
        cost = j.get("cost")
        money = f"{cost['predicted']:10.4f} {cost['recorded']:10.4f} {100 * c.cost_errors[0]:+7.2f}%" if cost \
            else f"{'-':>10} {'-':>10} {'-':>8}"
        share = j.get("cache_read_share")
        share = f"{100 * share['predicted']:8.2f}/{100 * share['recorded']:6.2f}%" if share else f"{'-':>19}"
        print(f"{(fmt + '/' + name)[:44]:<44} {money}  {_pair(j['cache_reads'])}  {_pair(j['cache_writes'])}  {share}")


def _pair(j: dict) -> str:
    if not j["requests"]:
        return f"{'-':>15}"
    return f"{100 * j['median_abs_error']:6.2f}/{100 * j['p90_abs_error']:6.2f}%"


if __name__ == "__main__":
    main(sys.argv[1:])
