"""A proxied session is counted whole (issue 39): its log holds the system prompt as a message and the tool
schemas in its request notes, so nothing of the request is unseen. Real requests go through `breakwater
proxy` (its own process) to the scripted provider, which bills a quarter of the bytes it received; then
`breakwater simulate --json` on the proxied log predicts each request from the log alone: the tool schemas
in force counted as part of it, no fitted overhead, only the ratio fitted. The workbench's gauge line,
eval and export show the same figures."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from support.proxy_run import request_notes, running_proxy
from support.scripted_provider import ScriptedProvider, Step, usage_for

from breakwater.cli.core import read_session, resolve_policy
from breakwater.core.context_categories import for_turn
from breakwater.core.replay import Replay
from breakwater.fidelity.runner import evaluate_path

# six tools of Claude-Code-like size (~3k tokens of schemas, most of a first request)
TOOLS = [{"name": n, "description": f"{n}: " + "Runs a thing in the workspace and returns what it printed. " * 30,
          "input_schema": {"type": "object", "properties": {"command": {"type": "string", "description": "what " * 40}},
                           "required": ["command"]}} for n in ("Bash", "Read", "Write", "Edit", "Grep", "Glob")]
SYSTEM = "You are a careful coding agent. Read before you write; run the tests you touch. " * 60
SIZES = [3000, 40, 800, 5000, 10, 1200, 300, 2500, 60, 4000, 20, 900]   # tool outputs, in lines / 10
WIRES = {"anthropic": "/v1/messages", "chat": "/v1/chat/completions"}
MODELS = {"anthropic": "claude-sonnet-4-5",   # no tokenizer offline: the heuristic, the ratio fitted
          "chat": "gpt-4o"}                   # o200k offline: the tokenizer counts near the limits


def _listing(n: int) -> str:
    """A tool's output: a source listing (lines of ~100 characters)."""
    return "\n".join(f"src/module_{i:05d}.py: def handler_{i}(request, context) -> Response  # the parsed body of item {i}"
                     for i in range(1, n // 10 + 2))


def _post(url: str, body: dict) -> dict:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"content-type": "application/json", "x-api-key": "k"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read())


def _agent_turns(url: str, wire: str, model: str) -> None:
    """An agent loop: ask, run the tool call the reply makes (a listing of its size), send the result back."""
    path = WIRES[wire]
    msgs: list[dict] = [{"role": "user", "content": "Run the commands the task lists, then say done."}]
    for k in range(len(SIZES) + 1):
        if wire == "anthropic":
            reply = _post(url + path, {"model": model, "max_tokens": 1000, "system": [{"type": "text", "text": SYSTEM}],
                                       "tools": TOOLS, "messages": msgs})
            msgs.append({"role": "assistant", "content": reply["content"]})
            calls = [c["id"] for c in reply["content"] if c["type"] == "tool_use"]
            result = lambda i, out: {"role": "user", "content": [{"type": "tool_result", "tool_use_id": i, "content": out}]}  # noqa: E731
        else:
            tools = [{"type": "function", "function": {"name": t["name"], "description": t["description"],
                                                       "parameters": t["input_schema"]}} for t in TOOLS]
            reply = _post(url + path, {"model": model, "tools": tools,
                                       "messages": [{"role": "system", "content": SYSTEM}, *msgs]})["choices"][0]["message"]
            msgs.append(reply)
            calls = [c["id"] for c in reply.get("tool_calls") or []]
            result = lambda i, out: {"role": "tool", "tool_call_id": i, "content": out}  # noqa: E731
        if not calls:
            return
        msgs.append(result(calls[0], _listing(SIZES[k])))


def _proxied(root: Path, wire: str, *mode: str, model: str | None = None) -> tuple[Path, list[int]]:
    """The proxied session's log and what the provider billed for each request (input, cache included)."""
    steps = [Step("Bash", {"command": f"ls -R part{n}"}) for n in SIZES] + [Step(None, text="All done.")]
    with ScriptedProvider(steps) as provider, running_proxy(provider.url, root, *mode) as (url, sessions):
        _agent_turns(url, wire, model or MODELS[wire])
        billed = [sum(v for k, v in usage_for(r.body).items() if k != "output") for r in provider.main_requests()]
    (log,) = sessions.glob("*.jsonl")
    assert len(request_notes(log)) == len(billed) == len(SIZES) + 1
    return log, billed


def _simulate(log: Path, *args: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "breakwater", "simulate", str(log), "--json", *args],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _errors(sim: dict, billed: list[int]) -> list[float]:
    return [(t["sent_tokens"] - b) / b for t, b in zip(sim["turns"], billed, strict=True)]


@pytest.mark.parametrize("wire", list(WIRES))
def test_an_observed_session_is_predicted_within_one_percent_with_no_overhead(tmp_path, wire):
    log, billed = _proxied(tmp_path, wire, "--observe")
    for counter in ("exact", "heuristic"):
        sim = _simulate(log, "--window", "1000000", "--counter", counter)   # nothing compacted: the request sent
        errors = _errors(sim, billed)
        # the first request has no recorded usage yet: its visible count, the tool schemas in it (before: −71%)
        assert abs(errors[0]) < 0.02, (counter, errors)
        assert max(map(abs, errors[1:])) < 0.01, (counter, errors)
        fit = sim["totals"]["calibration"]
        assert fit["overhead"] == 0 and fit["whole_request"] and fit["samples"] == len(billed), fit
        assert fit["tool_schemas"] > 2500


@pytest.mark.parametrize("wire, model", [("anthropic", "claude-sonnet-4-5"), ("chat", "deepseek-chat")])
def test_a_compacted_session_is_predicted_from_what_went_upstream(tmp_path, wire, model):
    """Compacting, the bill is for the view sent; the fit pairs it with that (the usage's estimate), so it does
    not take the tool schemas for an unseen overhead when the requests stop growing (before: −57% at request 2,
    the overhead fitted at ~3k). The bound is 3%, not 1%: the scripted provider bills JSON bytes, so each
    tool_use / tool_result block's keys and ids cost it ~15 tokens where the heuristic counts 4-10, a share
    that grows as compaction empties the results (1.3-2.3% low once snipped). A model without an offline
    tokenizer on both wires: with one (gpt-4o) the tokenizer's counts are brought into the fit's unit by the
    quotient of earlier requests (issue 36), which is what this would then measure."""
    policy = tmp_path / "policy.toml"
    policy.write_text('preset = "breakwater"\nwindow = 20000\n')
    log, billed = _proxied(tmp_path, wire, "--policy", str(policy), model=model)
    assert sum(bool(n.get("edits")) for n in request_notes(log)) >= 6        # the proxy compacted
    sim = _simulate(log, "--policy", str(policy))                            # what the proxy sent, as it planned it
    errors = _errors(sim, billed)
    assert max(map(abs, errors)) < 0.03, errors
    assert sim["totals"]["calibration"]["overhead"] == 0
    assert all(t["raw_tokens"] > t["sent_tokens"] for t in sim["turns"][5:])   # without compaction: the whole log


def test_the_gauges_eval_and_export_show_simulate_s_figures_for_a_proxied_session(tmp_path):
    log, _ = _proxied(tmp_path, "anthropic", "--observe")
    cli = _simulate(log, "--preset", "breakwater")
    session = read_session(log)
    ns = argparse.Namespace(policy=None, preset="breakwater", window=None, model=None)
    replay = Replay(session, resolve_policy(ns, session), "exact", window_source=ns.window_source)
    assert replay.run().to_json()["turns"] == cli["turns"]
    for row in cli["turns"]:
        detail = replay.detail(row["turn"])
        assert (detail.view.sent_tokens, detail.view.raw_tokens) == (row["sent_tokens"], row["raw_tokens"])
    line = detail.calibration.describe()   # the gauge's calibration line (ui/widgets/gauges.py draws it)
    assert line.startswith("whole request counted, nothing unseen (tool schemas ≈") and "unseen ≈" not in line
    assert detail.calibration.overhead == 0
    context = for_turn(replay, detail)     # `x` on the replay screen: the tool schemas a category of their own
    assert context.overhead == 0 and context.tools > 2500 and context.used == detail.view.sent_tokens
    summary = evaluate_path(str(log), ["breakwater"]).presets["breakwater"]
    assert (summary.billed_raw, summary.billed_sent) == (cli["totals"]["billed_raw"], cli["totals"]["billed_sent"])
    md = tmp_path / "out.md"
    out = subprocess.run([sys.executable, "-m", "breakwater", "export", str(log), "--preset", "breakwater", "--md", str(md)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert f"billed with compaction | ≈{cli['totals']['billed_sent']:,} tokens" in md.read_text()


@pytest.mark.parametrize("agent", ["Claude Code", "Codex", "pi"])
def test_a_real_agents_proxied_log_is_predicted_from_its_second_request_within_a_point_and_a_half(agent, tmp_path):
    """Each real agent observed through the proxy (scripts/proxy_accuracy.py --proxied): through the origin the
    ratio fitted on the first requests (mostly tool schemas) trailed the escaped tool outputs that came later,
    always low: median from request 2 2.36% (Claude Code), 3.53% (Codex), 1.63% (pi). The last request's miss is
    carried now (core/log/accounting.py `_carry`): 0.42%, 0.86%, 0.57% (Codex's own run varies by ~0.5 point)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    from proxy_accuracy import AGENTS, _proxied
    from support.proxy_run import agent_missing

    name, steps, run, _ = next(a for a in AGENTS if a[0].startswith(agent))
    why = agent_missing(run.__name__.strip("_"))
    if why:
        pytest.skip(why)
    predicted, billed, fit = _proxied(tmp_path, steps, run, "--observe", sim_args=("--window", "1000000"))
    assert fit["overhead"] == 0 and len(predicted) == len(billed) == 11
    later = sorted(abs(p - b) / b for p, b in zip(predicted[1:], billed[1:]))
    assert later[len(later) // 2] <= 0.015, (name, later)
