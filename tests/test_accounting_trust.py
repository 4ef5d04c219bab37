"""Trust, round two (issue 36, items 1-8): the same figure whichever path counts it, and money through
the provider's cache. Each test failed before its item was done; most run on the shared fixtures and on
copies of them with a field removed (the header's model, the first requests)."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support.transcripts import REAL

from breakwater.core.fold.own_request import own_history_policy
from breakwater.core.log.accounting import RATIO_BOUNDS, Calibration
from breakwater.core.log.prompt_cache import CacheModel, Misses, Prices, cache_rules
from breakwater.core.log.tokens import TokenCounter
from breakwater.core.policy import PRESETS, preset
from breakwater.core.simulate import simulate
from breakwater.fidelity.runner import billed_check, evaluate_path
from breakwater.formats import load_session

CCL = REAL / "claude-code" / "ccl_v2.0.55_a7da6a22.jsonl"
PRIMER = REAL / "claude-code" / "agenticprimer_v2.0.76_subagent_a0294d5.jsonl"
PI = REAL / "pi" / "large-session.jsonl"
MINI = REAL / "mini-swe-agent" / "pr854_deepseek-v4-flash__astropy__astropy-12907.traj.json"
PI_V3 = REAL / "pi" / "agentsessions_pi_v3_fixture_model_small.jsonl"
CODEX = REAL / "codex" / "agentsessions_codex_coverage_small.jsonl"   # with Codex's own compaction
CODEX_RUN = Path(__file__).parent / "fixtures" / "agent-runs" / "codex-0.171.0-two-turns-reasoning.jsonl"
WIDE = preset("breakwater").with_changes(window=1_000_000)   # nothing compacted: each request is the agent's own


def pi_without_model(tmp_path: Path) -> Path:
    """The pi fixture as a pi whose header names no model: only its replies say claude-sonnet-4-5."""
    lines = [json.loads(line) for line in PI.read_text(encoding="utf-8").splitlines() if line.strip()]
    head = {k: v for k, v in lines[0].items() if k not in ("modelId", "provider")}
    path = tmp_path / "pi-no-model.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in [head, *(o for o in lines[1:] if o.get("type") != "model_change")]))
    return path


def cut_first_requests(src: Path, tmp_path: Path, replies: int = 4) -> Path:
    """A copy of a JSONL transcript without its lines before the `replies`+1-th reply."""
    objs = [json.loads(line) for line in src.read_text(encoding="utf-8").splitlines() if line.strip()]
    head = objs[:1] if objs[0].get("type") == "session" else []
    body = objs[len(head):]
    at = [i for i, o in enumerate(body) if o.get("type") == "assistant"
          or isinstance(o.get("message"), dict) and o["message"].get("role") == "assistant"][replies]
    path = tmp_path / f"cut-{src.name}"
    path.write_text("".join(json.dumps(o) + "\n" for o in head + body[at - 1:]))
    return path


def errors(turns) -> list[float]:
    """(predicted - billed) / billed of each request after the first recorded one."""
    billed = [t for t in turns if t.billed_tokens]
    return [(t.sent_tokens - t.billed_tokens) / t.billed_tokens for t in billed[1:]]


def spread(xs: list[float]) -> tuple[float, float]:
    s = sorted(abs(x) for x in xs)
    return s[len(s) // 2], s[min(len(s) - 1, -(-9 * len(s) // 10) - 1)]


# -- item 1: one prediction per request, whichever path counts it ---------------------------------------
def test_a_request_counted_exactly_gets_the_fitted_ratio_too(tmp_path):
    """A Claude session counted by o200k (its header names no model, or --model names one with a
    tokenizer): the exact path ran near the limits and gave tiktoken + overhead, 21% low on every request
    (p90 21.9%); now ratio x visible + overhead, as the heuristic path and eval predict it."""
    log = load_session(PI)
    sim = simulate(log, WIDE, "exact", tokens=TokenCounter.for_model("gpt-4o"))
    assert sum(t.counted == "exact" for t in sim.turns) > 100
    median, p90 = spread(errors(sim.turns))
    assert median <= 0.01 and p90 <= 0.03, (median, p90)
    heuristic = {t.turn: t.sent_tokens for t in simulate(log, WIDE, "heuristic").turns}
    gaps = sorted(abs(t.sent_tokens - heuristic[t.turn]) / heuristic[t.turn] for t in sim.turns if t.counted == "exact")
    assert gaps[len(gaps) // 2] <= 0.01   # one request, one prediction: the two counters agree


@pytest.mark.parametrize("variant", ["fixture", "no model", "first requests cut"])
def test_simulate_and_eval_give_one_answer_on_every_variant(tmp_path, variant):
    if variant == "no model":
        path = pi_without_model(tmp_path)
    elif variant == "first requests cut":
        path = cut_first_requests(PI, tmp_path)
    else:
        path = PI
    log = load_session(path)
    users = errors(simulate(log, WIDE, "exact").turns)   # what `simulate --window 1000000` prints
    for counter in ("exact", "heuristic"):
        check = billed_check(log, counter)
        assert len(check.input_signed) == len(users)
        assert max(abs(a - b) for a, b in zip(check.input_signed, users)) <= 0.005, counter
    median, p90 = spread(users)
    assert median <= 0.01 and p90 <= 0.03, (variant, median, p90)


# -- item 2: without compaction is a property of the transcript ----------------------------------------
@pytest.mark.parametrize("path", [CCL, PI, CODEX, REAL / "openhands" / "runtime_trajs_basic_gui_mode.json"],
                         ids=lambda p: p.parent.name)
def test_without_compaction_is_one_figure_a_turn_whatever_the_policy_or_counter(path):
    """It was the request sent counted exactly + the removed part by the heuristic: 62.4M under one preset,
    63.8M under another on the same transcript. Then it was raised to a request sent that held more text
    than the log (Codex's stand-ins for unanswered calls: +1 token; an OpenHands request that kept a
    summary after the agent's own condensation: +47) under the presets and windows that sent one."""
    log = load_session(path)
    seen, money = {}, {}
    for name in PRESETS:
        for window in (None, 60_000, 8_000):
            for counter in ("exact", "heuristic"):
                policy = preset(name) if window is None else preset(name).with_changes(window=window)
                sim = simulate(log, policy, counter)
                seen[(name, window, counter)] = [t.raw_tokens for t in sim.turns]
                money[(name, window, counter)] = [t.cost_raw for t in sim.turns]
                billed = [t.billed_tokens for t in sim.turns]
                if path in (CCL, PI):   # elsewhere a request that keeps a summary can hold more than the log
                    assert all(t.sent_tokens <= t.raw_tokens for t in sim.turns)
                assert sim.saved == sim.billed_raw - sim.billed_sent
    assert len({tuple(v) for v in seen.values()}) == 1
    # and in money: the cost without compaction was priced with a miss rate learnt against the request sent
    assert len({tuple(v) for v in money.values()}) == 1
    raw = next(iter(seen.values()))
    # it falls only where the fit moves (pi: by 0.15%), not by the policy's cut; and where a turn's figure was
    # above what the provider then billed for it, the next turn starts from the bill (the line's miss is
    # carried: ccl's ExitPlanMode turn was 2.6k over, so the turn after it is 4.5% lower), never lower
    assert all(b >= min(a, bill or a) * 0.995 for a, b, bill in zip(raw, raw[1:], billed))


def without_usage(path: Path, tmp_path: Path | None = None):
    """The transcript with its recorded usage taken out, as a format that records none gives it (OpenHands'
    fncall logs); written as a native log to `tmp_path` when given (for eval and the CLI)."""
    from breakwater.core.log.message import Message
    from breakwater.core.log.session_log import SessionLog

    log = load_session(path)
    entries = [e for e in log.entries if isinstance(e, Message) or e.type != "usage"]
    if tmp_path is None:
        return SessionLog(header=log.header, entries=entries)
    out = tmp_path / f"{path.stem}-no-usage.jsonl"
    out.write_text("".join(json.dumps(o, ensure_ascii=False) + "\n" for o in
                           [{**log.header, "type": "session", "version": 1}, *(e.to_record() for e in entries)]),
                   encoding="utf-8")
    return out


FNCALL = REAL / "openai-chat" / "openhands-sdk_fncall-llm-message.json"   # records no usage
SAMPLES = Path(__file__).parents[1] / "sample_sessions"


@pytest.mark.parametrize("path", [FNCALL, CCL, PI, CODEX, MINI, CODEX_RUN, SAMPLES / "long-refactor.jsonl",
                                  SAMPLES / "npm-install-flood.jsonl", SAMPLES / "mixed-zh-en.jsonl"],
                         ids=lambda p: p.stem[:24])
def test_without_usage_each_request_has_one_figure_whatever_the_window_or_counter(path):
    """With no usage recorded, the tokenizer's count stood for a request it counted (near the limits: the
    window decides which) and the heuristic's for the others: OpenHands' fncall log, turn 1, 2,142 at
    32,000 and 2,563 at 128,000, and "without compaction" took whichever (2 to 9 figure series a transcript,
    among 4 presets × 4 windows × 3 counters). One figure now: the heuristic's, the unit every request has."""
    log = without_usage(path)
    seen = {}
    for name in ("breakwater", "seed-000", "seed-001", "seed-003"):
        for window in (None, 8_000, 32_000, 128_000):
            policy = preset(name) if window is None else preset(name).with_changes(window=window)
            for counter in ("exact", "heuristic", "o200k"):   # o200k: counted by it whatever the model says
                sim = simulate(log, policy, "exact", tokens=TokenCounter("o200k_base")) if counter == "o200k" \
                    else simulate(log, policy, counter)
                seen[name, window, counter] = [t.raw_tokens for t in sim.turns]
                assert sim.saved == sim.billed_raw - sim.billed_sent
    assert len({tuple(v) for v in seen.values()}) == 1
    if path == FNCALL:
        assert seen["breakwater", 32_000, "exact"][0] == seen["breakwater", 128_000, "exact"][0] == 2_563


def test_without_usage_simulate_and_eval_give_one_without_at_every_window(tmp_path):
    """`simulate --json` (what a user runs, either counter) and eval, at the windows where the tokenizer
    counts the requests and where it does not: one billed total without compaction (17,778 by eval at
    8,000 and 18,722 by the heuristic, before)."""
    path = without_usage(FNCALL, tmp_path)
    totals = set()
    for window in ("8000", "32000", "128000"):
        for counter in ("exact", "heuristic"):
            out = subprocess.run([sys.executable, "-m", "breakwater", "simulate", str(path), "--json", "--window",
                                  window, "--counter", counter], capture_output=True, text=True, timeout=120)
            assert out.returncode == 0, out.stderr
            totals.add(json.loads(out.stdout)["totals"]["billed_raw"])
        evaluated = evaluate_path(str(path), ["breakwater", "seed-001"], int(window))
        totals |= {s.billed_raw for s in evaluated.presets.values()}
    assert totals == {18_722}


@pytest.mark.parametrize("name, turns", [("long-refactor.jsonl", range(3, 13)), ("npm-install-flood.jsonl", range(3, 6))])
def test_a_request_the_tokenizer_counts_is_on_the_line_with_usage_too(name, turns):
    """Sessions of GPT models with usage, at their own window (as `simulate` runs them): the requests near the
    limits, counted by o200k, were converted by a factor of 1 until one had been counted both ways
    (npm-install-flood, turn 3: 4,374 for a bill of 3,169) and, nothing edited, by the quotient of the requests
    before (long-refactor, turns 4-12: −3.6% to −0.1%), where the heuristic path put them on the line."""
    log = load_session(SAMPLES / name)
    policy = preset("breakwater").with_changes(window=log.header["window"])
    exact, plain = (simulate(log, policy, counter) for counter in ("exact", "heuristic"))
    # the log whole, counted by the tokenizer (its verdict), its figure the line's
    whole = [(a, b) for a, b in zip(exact.turns, plain.turns) if a.counted == "exact" and a.sent_tokens == a.raw_tokens]
    assert {a.turn for a, _ in whole} >= set(turns)
    assert all(a.sent_tokens == b.sent_tokens == b.raw_tokens for a, b in whole)
    # what the provider billed for them (these logs are Breakwater's: early on, the log whole was sent)
    for a, _ in whole:
        if a.turn in turns:
            assert abs(a.sent_tokens - a.billed_tokens) / a.billed_tokens <= 0.025, (a.turn, a.sent_tokens, a.billed_tokens)


def test_the_verdict_stays_the_tokenizers_with_no_usage():
    """The figure is the heuristic's, the verdict (the zone, `fits`) the tokenizer's: a pasted log of hashes the
    heuristic puts at half the window is past the hard limit for the tokenizer, and cut."""
    import random

    from breakwater.core.log.message import Message
    from breakwater.core.log.session_log import SessionLog

    rng = random.Random(3)
    hashes = "\n".join("%040x" % rng.getrandbits(160) for _ in range(400))
    entries = [Message("m00000", "system", "You are a coding agent."),
               Message("m00001", "user", f"Which of these commits broke the build?\n{hashes}", turn=1),
               Message("m00002", "assistant", "The third.", turn=1)]
    log = SessionLog(header={"model": "gpt-4o"}, entries=entries)
    policy = preset("breakwater").with_changes(window=8_000)
    exact, plain = simulate(log, policy, "exact"), simulate(log, policy, "heuristic")
    tokens = TokenCounter("o200k_base").exact_messages(entries[:2])
    (turn,), (seen,) = exact.turns, plain.turns
    assert tokens > policy.window > turn.raw_tokens == seen.raw_tokens == seen.sent_tokens   # the heuristic: 0.5
    # the tokenizer's verdict: past the hard limit (its count decides the zone), so the paste was cut
    assert turn.counted == "exact" and turn.base_tokens >= tokens and turn.zone == "hard" and seen.zone == "safe"
    assert turn.sent_tokens < seen.sent_tokens and turn.fits


def user_overlay(log, policy, counter: str) -> list:
    """What a user does in the workbench, as its overlay holds it: a D accepted halfway, a pin and two triggers
    near it, both undone, a second D later, a snip trigger early, and an undo of the agent's own compaction."""
    from breakwater.core.log.message import Message
    from breakwater.core.log.session_log import Event
    from breakwater.core.overlay import apply_overlay, compaction_record, manual_compaction, position_of_turn

    turns = sum(isinstance(e, Message) and e.role == "assistant" for e in log.entries)
    mid, late = max(2, turns // 2), max(2, 3 * turns // 4)
    at = lambda turn: position_of_turn(log, min(max(1, turn), turns))
    users = [e.id for e in log.entries if isinstance(e, Message) and e.role == "user"]
    comp, _ = manual_compaction(log, policy, mid, counter)   # None where there is too little to summarize
    records = [{"id": "d1", "type": "compaction", "at": at(mid), **compaction_record(comp)}] if comp else []
    records += [{"id": "p1", "type": "pin", "at": at(mid - 3), "message_id": users[len(users) // 3]},
               {"id": "t1", "type": "trigger", "at": at(mid - 2), "stage": "mask"},
               {"id": "t2", "type": "trigger", "at": at(mid + 2), "stage": "microcompact"},
               {"id": "u1", "type": "undo", "at": at(mid + 4), "target": "d1"},
               {"id": "u2", "type": "undo", "at": at(mid + 5), "target": "p1"},
               {"id": "t3", "type": "trigger", "at": at(3), "stage": "snip"}]
    records += [{"id": "u3", "type": "undo", "at": at(turns), "target": e.id} for e in log.entries
                if isinstance(e, Event) and e.type == "compaction"][:1]
    events = [Event.from_record(r, fallback_id=r["id"]) for r in records]
    comp2, _ = manual_compaction(apply_overlay(log, events), policy, late, counter)
    if comp2 is not None:
        events.append(Event.from_record({"id": "d2", "type": "compaction", "at": at(late),
                                         **compaction_record(comp2)}, fallback_id="d2"))
    return events


@pytest.mark.parametrize("path, window", [(CCL, 60_000), (PI, 60_000), (PI_V3, 2_000), (CODEX, 16_000)],
                         ids=lambda p: p.name[:24] if isinstance(p, Path) else str(p))
@pytest.mark.parametrize("counter", ["exact", "heuristic"])
def test_without_compaction_is_the_same_whatever_the_overlay_holds(path, window, counter):
    """The workbench's figure moved with the overlay (ccl at 60,000: 8,585,719; after a D accepted
    9,529,056; after undoing it and a pin 8,648,946): the D's summary was added to the history without
    compaction, and the agent's own request (the fit's counted side) followed the overlay's D."""
    from breakwater.core.overlay import apply_overlay

    log = load_session(path)
    policy = preset("breakwater").with_changes(window=window)
    plain = simulate(log, policy, counter)
    edited = simulate(apply_overlay(log, user_overlay(log, policy, counter)), policy, counter)
    assert [t.sent_tokens for t in edited.turns] != [t.sent_tokens for t in plain.turns]   # the overlay did something
    assert [t.raw_tokens for t in edited.turns] == [t.raw_tokens for t in plain.turns]
    assert edited.billed_raw == plain.billed_raw
    assert edited.saved == edited.billed_raw - edited.billed_sent


# -- item 3: the fit is bounded, has a prior, and restarts its overhead ------------------------------
def test_three_points_do_not_make_a_ratio_of_twenty():
    """Three requests of nearly one size: least squares gave 21.8 (predictions +54% to +104%)."""
    cal = Calibration(prior=1.35)
    for counted, billed in ((10_000, 36_000), (10_150, 38_900), (10_300, 42_500)):
        cal.observe(billed, counted)
    assert RATIO_BOUNDS[0] <= cal.ratio <= RATIO_BOUNDS[1] and cal.ratio < 2
    # 150 more tokens counted are ~200 more billed, not 3,300: the three points' noise is the overhead's
    assert cal.apply(10_450) - cal.apply(10_300) < 300


def test_one_sample_gives_the_family_ratio_and_the_rest_as_overhead():
    cal = Calibration(prior=1.35)
    cal.observe(21_000 + round(1.35 * 10_000), 10_000)
    assert cal.ratio == 1.35 and cal.overhead == 21_000
    assert cal.apply(12_000) == round(1.35 * 12_000 + 21_000)   # the second request: not 16% low


def test_the_overhead_is_fitted_again_after_a_recorded_compaction():
    """After a compaction the history is short again: a fit through every pair took the fixed overhead
    into the ratio and was 18% low; each segment has its overhead, the ratio is learnt from all."""
    cal = Calibration(prior=1.35)
    for x in range(20_000, 120_000, 5_000):
        cal.observe(round(1.4 * x + 8_000), x)
    cal.restart()
    for x in (9_000, 11_000, 13_000):
        cal.observe(round(1.4 * x + 9_500), x)   # the system prompt grew a little with the summary
    assert abs(cal.apply(15_000) - (1.4 * 15_000 + 9_500)) / (1.4 * 15_000 + 9_500) < 0.01
    assert cal.restarts == 1 and cal.offset > 0


def test_the_pipeline_restarts_the_fit_at_the_agents_compaction():
    sim = simulate(load_session(PI_V3), preset("breakwater"), "heuristic")
    assert sim.calibration.restarts >= 1


# -- item 4: the model from wherever the transcript states it ----------------------------------------
def test_the_model_comes_from_the_replies_when_the_header_names_none(tmp_path):
    out = subprocess.run([sys.executable, "-m", "breakwater", "simulate", str(pi_without_model(tmp_path)), "--json",
                          "--window", "150000"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["model"] == "claude-sonnet-4-5" and data["prices_per_mtok"]["input"] > 0
    over = [t for t in data["turns"] if t.get("recorded_over_window")]
    assert over and all(t["billed_tokens"] > 150_000 for t in over)
    assert all(not t.get("recorded_over_window") for t in data["turns"] if t.get("billed_tokens", 0) <= 150_000)


# -- item 6: money through the provider's cache --------------------------------------------------------
def test_a_gap_longer_than_the_ttl_writes_the_prefix_again():
    rules = cache_rules("claude-opus-4-5")
    prices = Prices(5.0, 0.5, 6.25)
    cache = CacheModel(rules, prices, Misses())
    first = cache.request(50_000, 0, at=0.0)
    assert first.read == 0 and first.write == 50_000
    soon = cache.request(52_000, 50_000, at=30.0)
    assert soon.read > 49_000 and soon.read + soon.write == 52_000
    late = cache.request(53_000, 52_000, at=30.0 + 400)
    assert late.expired and late.read == 0 and late.write == 53_000 and late.cost > soon.cost * 5
    openai = CacheModel(cache_rules("gpt-4o"), Prices(2.5, 1.25, 2.5), Misses())
    openai.request(50_000, 0, at=0.0)
    again = openai.request(51_000, 50_000, at=30.0)
    assert again.write == 0 and again.read > 49_000   # automatic caching: no write premium


@pytest.mark.parametrize("path", [CCL, PRIMER], ids=lambda p: p.name[:20])
def test_the_cost_of_the_recorded_history_matches_its_recorded_usage_priced(path):
    """It assumed a perfect cache: 8.4% and 10.2% low on these two; the issue's sessions 10-24%."""
    check = billed_check(load_session(path))
    report = check.to_json()
    assert abs(check.cost_errors[0]) <= 0.03, report["cost"]
    assert report["cache_reads"]["median_abs_error"] <= 0.02
    assert report["cache_writes"]["requests"] > 10 and report["cache_writes"]["median_abs_error"] <= 0.01
    share = report["cache_read_share"]
    assert abs(share["predicted"] - share["recorded"]) <= 0.01


def test_eval_json_reports_money_beside_tokens():
    out = subprocess.run([sys.executable, "-m", "breakwater", "eval", str(PRIMER), "--json", "--presets", "breakwater",
                          "--jobs", "1"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    row = json.loads(out.stdout)["billed_vs_predicted"]["claude-code"]
    assert {"cache_reads", "cache_writes", "cache_read_share", "cost"} <= set(row)
    assert row["cost"]["recorded"] > 0 and abs(row["cost"]["bias"]) <= 0.03


# -- item 7: why compaction costs more, and no different cost where nothing was saved -----------------
def test_compaction_shows_the_cache_rewrite_it_causes():
    sim = simulate(load_session(PI), preset("breakwater"), "exact")
    totals = sim.totals_json()
    rewrites = [t for t in sim.turns if t.cache.rewritten]
    assert totals["cache_rewritten"] == sum(t.cache.rewritten for t in sim.turns) > 0
    assert totals["cache_rewrite_cost"] > 0
    # the re-writes are where the request changed what the last one sent, not anywhere else
    assert all(t.stable_prefix_tokens < t.sent_tokens for t in rewrites)
    row = next(t.to_json() for t in rewrites)
    assert row["cache"]["rewritten"] > 0 and row["cache"]["rewrite_cost"] > 0


@pytest.mark.parametrize("path", [PRIMER, REAL / "mini-swe-agent" / "pr854_deepseek-v4-flash__astropy__astropy-12907.traj.json",
                                  REAL / "openhands" / "runtime_trajs_basic_gui_mode.json"], ids=lambda p: p.name[:20])
def test_nothing_saved_costs_the_same(path):
    """$0.376565 vs $0.376563 with 0 tokens saved: the two were priced by two cache figures."""
    sim = simulate(load_session(path), own_history_policy(), "exact")
    alike = [t.sent_tokens == t.raw_tokens for t in sim.turns]
    assert sum(alike) > len(alike) // 2
    for was, now, t in zip([True] + alike, alike, sim.turns):
        if was and now:   # the same request as the last time, and the same now: one cost
            assert t.cost_sent == t.cost_raw, t.turn
    if sim.saved == 0:
        assert sim.cost_sent == sim.cost_raw


# -- item 8: eval and simulate count compactions alike ----------------------------------------------
def test_eval_and_simulate_count_the_recorded_compactions_alike():
    evaluated = evaluate_path(str(PI_V3), list(PRESETS))
    log = load_session(PI_V3)
    for name in PRESETS:
        totals = simulate(log, preset(name), "exact").totals_json()
        assert evaluated.presets[name].compactions == totals["compactions"] == 1, name


# -- item 5: what Codex resends that no message shows -------------------------------------------------
def codex_rollout(path: Path, billed=None) -> list[int]:
    """A rollout of 6 user turns of 4 tool calls each, every reply reasoning (encrypted) 2,500-4,000
    tokens. `billed`: the input tokens of each request; returns the reasoning tokens each request
    resends: those of the replies since the last user message (what the provider bills again)."""
    ts = "2026-12-01T10:00:%02d.000Z"
    lines = [{"timestamp": ts % 0, "type": "session_meta", "payload": {"id": "r1", "cwd": "/w", "cli_version": "0.60.0",
                                                                        "base_instructions": {"text": "You are Codex."}}},
             {"timestamp": ts % 0, "type": "turn_context", "payload": {"model": "gpt-5-codex", "cwd": "/w"}}]
    resent, since, k = [], 0, 0
    for user in range(6):
        lines.append({"timestamp": ts % 1, "type": "response_item", "payload": {
            "type": "message", "role": "user", "content": [{"type": "input_text", "text": f"task {user}: fix module {user}"}]}})
        since = 0
        for step in range(4):
            reasoning = 2_500 + 300 * ((user + step) % 6)
            resent.append(since)
            call = f"c{user}_{step}"
            lines += [
                {"timestamp": ts % 2, "type": "response_item", "payload": {
                    "type": "reasoning", "summary": [], "encrypted_content": "gAAAAB" + "x" * 400}},
                {"timestamp": ts % 2, "type": "response_item", "payload": {
                    "type": "function_call", "name": "shell", "call_id": call,
                    "arguments": json.dumps({"command": ["rg", "-n", f"symbol_{user}_{step}", "src/"]})}},
                {"timestamp": ts % 3, "type": "event_msg", "payload": {"type": "token_count", "info": {"last_token_usage": {
                    "input_tokens": billed[k] if billed else 0, "cached_input_tokens": 0, "output_tokens": 60,
                    "reasoning_output_tokens": reasoning}}}},
                {"timestamp": ts % 4, "type": "response_item", "payload": {
                    "type": "function_call_output", "call_id": call,
                    "output": "\n".join(f"src/mod_{user}.py:{i}: def symbol_{user}_{step}_{i}(x): return x * {i}"
                                        for i in range(40 + 10 * step))}},
            ]
            since += reasoning
            k += 1
    path.write_text("".join(json.dumps(o) + "\n" for o in lines), encoding="utf-8")
    return resent


def test_codex_resent_reasoning_is_counted(tmp_path):
    """The provider bills a reply's encrypted reasoning again with each request of the same user turn:
    billing jumped by thousands of tokens between requests whose messages grew by a few hundred. Here
    the bill is 6,000 tokens unseen + the messages + the reasoning resent; the reader counted none of
    the reasoning (the fit took part of it as overhead: 20-40% off on single requests)."""
    path = tmp_path / "rollout.jsonl"
    resent = codex_rollout(path)
    visible = [t.sent_tokens for t in simulate(load_session(path), own_history_policy(), "heuristic").turns]
    # what the reader's own pass counted carries the resent reasoning already: the messages are the rest
    billed = [6_000 + round(1.0 * (v - r)) + r for v, r in zip(visible, resent)]
    codex_rollout(path, billed)
    log = load_session(path)
    assert sum(1 for m in log.messages if m.meta and m.meta.get("resent_tokens")) == 24
    for counter in ("exact", "heuristic"):
        median, p90 = spread(errors(simulate(log, WIDE, counter).turns))
        assert median <= 0.01 and p90 <= 0.03, (counter, median, p90)
    check = billed_check(log)
    assert check.to_json()["median_abs_error"] <= 0.01


def test_the_cache_misses_of_a_new_user_turn_are_learnt_from_the_recorded_reads():
    """pi missed the cache on 36 of the 79 first requests after a user message and 1 of the 360 others;
    priced as a perfect cache its history cost 49% less than recorded, with one miss rate 13% less, with a
    prior of 10 requests on the miss rate 5.9% less (round 5: the prior weighs 4)."""
    log = load_session(PI)
    check = billed_check(log)
    assert abs(check.cost_errors[0]) <= 0.03, check.to_json()["cost"]
    misses = simulate(log, own_history_policy(), "exact").cache_misses
    assert misses.rate(True) > 0.3 > 0.01 > misses.rate(False)


# -- round 5: what the line missed is still in the next request ----------------------------------------
@pytest.mark.parametrize("paths", [(CCL, PRIMER), (MINI,)], ids=["claude-code", "mini-swe-agent"])
def test_the_agents_own_history_is_predicted_within_one_percent(paths):
    """The line alone drifted with the content (Claude Code's reminders never written to the transcript, a
    plan pasted twice): Claude Code 1.25% median, 3.04% p90, mini-swe-agent 1.43% median."""
    errs = [e for path in paths for e in errors(simulate(load_session(path), WIDE, "exact").turns)]
    median, p90 = spread(errs)
    assert median <= 0.01 and p90 <= 0.03, (median, p90)


def test_the_last_requests_miss_is_carried_whole_to_the_next_and_by_share_to_a_smaller_one():
    cal = Calibration(prior=1.35)
    unseen = 0
    for counted in range(10_000, 30_000, 2_000):
        unseen += 900 if counted >= 20_000 else 0   # text the provider gets that no message shows, from here on
        cal.freeze()
        cal.observe(round(1.4 * counted + 5_000) + unseen, counted)
    cal.freeze()
    line = cal.ratio * 30_000 + cal.offset
    assert cal.residual > 1_000
    truth = 1.4 * 30_000 + 5_000 + unseen   # the next request, nothing new unseen in it
    assert abs(cal.apply(30_000) - truth) < abs(line - truth) / 2   # 385 vs the line's 1,030
    assert cal.apply(14_000) - round(cal.ratio * 14_000 + cal.offset) == pytest.approx(cal.residual * 14_000 / 28_000, abs=1)
    assert cal.apply(10_000) < cal.apply(14_000) < cal.apply(30_000)   # still rising with the request
    assert f"last miss +{cal.residual / 1000:.1f}k carried" in cal.describe()   # the gauge says it is there
    cal.restart()   # the history restarted: the miss was in what the summary replaced
    cal.freeze()
    assert cal.apply(30_000) == round(cal.ratio * 30_000 + cal.offset)


def test_deepseek_reads_the_previous_request_and_its_reply_in_64_token_units():
    rules = cache_rules("deepseek-v4-flash")
    model = CacheModel(rules, Prices(0.27, 0.07, 0.27))
    model.request(11_125, 0, at=0.0)
    model.replied(1_317)
    again = model.request(12_744, 11_125, at=20.0)
    assert again.reusable == 12_416 and again.write == 0   # the recorded read on the mini-swe-agent fixture
    model.replied(500)
    compacted = model.request(9_000, 4_000, at=40.0)   # the previous request not kept whole: no reply read
    assert compacted.reusable == 3_968


def test_mini_swe_agent_cost_matches_its_recorded_usage():
    """Its reads were taken as the previous request alone: 2.8% high before round 5's carry, 3.9% after."""
    check = billed_check(load_session(MINI))
    assert abs(check.cost_errors[0]) <= 0.01, check.to_json()["cost"]


# -- round 5: a real Codex rollout (the real CLI, offline: tests/fixtures/agent-runs/README.md) -------------


def without_encrypted_reasoning(path: Path, out: Path) -> Path:
    objs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for o in objs:
        if o.get("payload", {}).get("type") == "reasoning":
            o["payload"].pop("encrypted_content", None)
    out.write_text("".join(json.dumps(o) + "\n" for o in objs))
    return out


def test_a_real_codex_rollout_is_predicted_within_one_percent(tmp_path):
    """Codex 0.171's own rollout of two user turns, every reply with encrypted reasoning: 1.11% median,
    1.53% p90 with round 4's line; the reasoning it sends back, uncounted, 5.65% / 7.70%."""
    log = load_session(CODEX_RUN)
    for counter in ("exact", "heuristic"):
        errs = errors(simulate(log, WIDE, counter).turns)
        assert len(errs) == 10
        median, p90 = spread(errs)
        assert median <= 0.01 and p90 <= 0.03, (counter, median, p90)
    bare = errors(simulate(load_session(without_encrypted_reasoning(CODEX_RUN, tmp_path / "bare.jsonl")), WIDE,
                           "exact").turns)
    assert spread(bare)[0] > 0.03   # the resent reasoning is what the rule counts


def test_codex_sends_its_reasoning_back_across_user_turns(tmp_path):
    """Round 4's rule was written from OpenAI's documentation alone ("until the next user message"): the real
    client sends every earlier reasoning item back, and the provider's default keeps out of context (and does
    not bill) those before the last user message (tests/support/scripted_provider.py `usage_for`)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    from make_codex_rollout import make
    from support.proxy_run import agent_missing

    if agent_missing("codex"):
        pytest.skip(agent_missing("codex"))
    sent = make(tmp_path / "rollout.jsonl")
    assert len(sent) == 11
    second_turn = [r for r in sent if r["users"] == 3]
    assert second_turn and all(len(r["reasoning_sent"]) >= 6 for r in second_turn)
    errs = errors(simulate(load_session(tmp_path / "rollout.jsonl"), WIDE, "exact").turns)
    assert spread(errs)[0] <= 0.01


def test_a_figure_that_is_the_heuristics_is_marked_an_estimate_whichever_count_decided_its_verdict():
    # no usage recorded: every figure is the heuristic's line (one figure a request, whatever the path),
    # while the tokenizer's count still decides `fits` near the limits (`counted` "exact"). The figure was
    # shown without ≈ there, as if the tokenizer had counted it
    from breakwater.cli.core import read_session, sample_path
    from breakwater.core.policy.for_session import resolve_policy

    fncall = read_session(REAL / "openai-chat" / "openhands-sdk_fncall-llm-message.json")
    ns = argparse.Namespace(policy=None, preset=None, window=4_000)
    sim = simulate(fncall, resolve_policy(ns, fncall))
    exact = [t for t in sim.turns if t.counted == "exact"]
    assert exact and all(t.estimated for t in exact) and sim.billed_sent_estimated
    out = subprocess.run([sys.executable, "-m", "breakwater", "simulate",
                          str(REAL / "openai-chat" / "openhands-sdk_fncall-llm-message.json"), "--window", "4000"],
                         capture_output=True, text=True, check=True).stdout
    rows = [line for line in out.splitlines() if re.match(r"\s*│?\s*\d+\s*│", line)]
    assert rows and all("≈" in row.split("│")[3] for row in rows), out
    # with usage, a request the tokenizer counted keeps its figure unmarked
    sample = read_session(sample_path())
    turns = simulate(sample, resolve_policy(argparse.Namespace(policy=None, preset=None, window=None), sample)).turns
    assert any(t.counted == "exact" and not t.estimated for t in turns)
