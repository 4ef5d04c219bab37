"""The transcript accounting checked against the wire (issue 39): each real agent (Claude Code, Codex, pi) runs
its scripted task through `breakwater proxy --observe`; then, for every request its own transcript implies,
Breakwater's prediction from the transcript (`simulate --json`: ratio x visible + fitted unseen overhead, the
fit from the usage the transcript recorded before that request) is set against the request the provider
actually received: the provider's billed figure (the scripted provider bills a quarter of the bytes it
received, so the figure is exact about what was sent) and the heuristic count of the whole request body.

Prints a table per agent and the median / p90 error from the second request on (the first has no usage
to fit from). Needs the agents installed (scripts/install_agents.sh). Run: .venv/bin/python scripts/proxy_accuracy.py

Then the same agents' *proxied* logs (the proxy's own session log, which holds the whole request: system prompt,
tool schemas in its notes) predicted by `simulate --json` (the whole request counted, no overhead fitted), observing
and compacting (`--proxied`, under a policy of window 30,000: `--policy`'s file given to simulate too, so it plans
what the proxy sent). Run: .venv/bin/python scripts/proxy_accuracy.py --proxied
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.proxy_run import running_proxy  # noqa: E402
from support.scripted_provider import ScriptedProvider, Step, usage_for  # noqa: E402
from test_proxy_agents import _claude, _codex, _pi  # noqa: E402

from breakwater.core.log.tokens import heuristic_text  # noqa: E402

COMMANDS = [f"seq 1 {n}" for n in (3000, 40, 800, 5000, 10, 1200, 300, 2500)] + ["cat missing.txt", "echo done > result.txt"]


def _steps(tool: str, arg: str) -> list[Step]:
    """Ten tool calls of outputs large and small, one failing, then the answer."""
    return [Step(tool, {arg: c}) for c in COMMANDS] + [Step(None, text="All done.")]


AGENTS = (("Claude Code 2.1.197", _steps("Bash", "command"), _claude, ".claude/projects/*/*.jsonl"),
          ("Codex 0.171.0", _steps("exec_command", "cmd"), _codex, ".codex/sessions/*/*/*/rollout-*.jsonl"),
          ("pi 0.73.1", _steps("bash", "command"), _pi, ".pi/agent/sessions/*/*.jsonl"))


def _predicted(transcript: Path) -> list[int]:
    out = subprocess.run([sys.executable, "-m", "breakwater", "simulate", str(transcript), "--json", "--counter",
                          "heuristic"], capture_output=True, text=True, check=True)
    return [t["raw_tokens"] for t in json.loads(out.stdout)["turns"]]


def _proxied(root: Path, steps: list[Step], run, *mode: str, sim_args: tuple[str, ...] = ()) -> tuple[list, list, dict]:
    """(predicted per request from the proxied log, billed per request, the fit) for the agent run through the proxy."""
    with ScriptedProvider(steps) as provider, running_proxy(provider.url, root, *mode) as (url, sessions):
        run(url, root)
        billed = [sum(v for k, v in usage_for(r.body).items() if k != "output")
                  for i, r in enumerate(provider.received) if r.offers_tools and i in provider.usages]
    logs = [p for p in sessions.glob("*.jsonl") if '"tools_sha256"' in p.read_text()]
    out = subprocess.run([sys.executable, "-m", "breakwater", "simulate", str(max(logs, key=lambda p: p.stat().st_size)),
                          "--json", *sim_args], capture_output=True, text=True, check=True)
    sim = json.loads(out.stdout)
    return [t["sent_tokens"] for t in sim["turns"]], billed, sim["totals"]["calibration"]


def proxied() -> None:
    for name, steps, run, _ in AGENTS:
        for mode in ("observe", "compact"):
            with tempfile.TemporaryDirectory() as tmp:
                root = Path(tmp)
                policy = root / "policy.toml"
                policy.write_text('preset = "breakwater"\nwindow = 30000\n')
                args = ("--observe",) if mode == "observe" else ("--policy", str(policy))
                sim_args = ("--window", "1000000") if mode == "observe" else ("--policy", str(policy))
                predicted, billed, fit = _proxied(root, steps, run, *args, sim_args=sim_args)
            errors = [(p - b) / b for p, b in zip(predicted, billed)]
            later = sorted(abs(e) for e in errors[1:])
            print(f"\n{name}, {mode}: {len(billed)} requests billed, {len(predicted)} turns in the proxied log; fit: "
                  f"overhead {fit['overhead']}, ratio {fit['ratio']} ± {fit['ratio_error']}, tool schemas {fit.get('tool_schemas')}")
            print("  per request (predicted/billed, error): " + " · ".join(
                f"{p:,}/{b:,} {e:+.1%}" for p, b, e in zip(predicted, billed, errors)))
            if later:
                print(f"  request 1: {errors[0]:+.2%}; from request 2 on: median |error| {statistics.median(later):.2%}, "
                      f"p90 {later[int(len(later) * 0.9)]:.2%}, max {later[-1]:.2%}")


def main() -> None:
    if "--proxied" in sys.argv[1:]:
        proxied()
        return
    for name, steps, run, pattern in AGENTS:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            with ScriptedProvider(steps) as provider, running_proxy(provider.url, root, "--observe") as (url, _):
                run(url, root)
            transcripts = sorted((root / "home").glob(pattern), key=lambda p: p.stat().st_size)
            predicted = _predicted(transcripts[-1])
            # the requests that got an answer: the ones the transcript holds a reply to (a retried failure is not one)
            answered = [r for i, r in enumerate(provider.received) if r.offers_tools and i in provider.usages]
        print(f"\n{name}: {len(answered)} requests received, {len(predicted)} turns in its transcript")
        print(f"{'turn':>4} {'predicted':>10} {'billed':>8} {'error':>7} {'whole request (heuristic)':>26}")
        errors, whole_err = [], []
        for k, (pred, req) in enumerate(zip(predicted, answered), 1):
            billed = sum(v for key, v in usage_for(req.body).items() if key != "output")
            err = (pred - billed) / billed
            if k > 1:
                errors.append(abs(err))
            whole_err.append(abs(heuristic_text(req.body.decode()) - billed) / billed)
            print(f"{k:>4} {pred:>10,} {billed:>8,} {err:>+7.1%} {heuristic_text(req.body.decode()):>26,}")
        if errors:
            print(f"from request 2 on: median |error| {statistics.median(errors):.1%}, "
                  f"p90 {sorted(errors)[int(len(errors) * 0.9)]:.1%}, max {max(errors):.1%} ({len(errors)} requests); "
                  f"the whole request as the proxy saw it, every request: median {statistics.median(whole_err):.2%}")


if __name__ == "__main__":
    main()
