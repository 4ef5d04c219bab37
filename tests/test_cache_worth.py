"""Cache-aware compaction (issue 41): a soft-zone step is taken only when what it saves over the next
requests pays for the cache re-write it causes, at the model's cache prices."""

from __future__ import annotations

import pytest

from breakwater.core.fold.cache_worth import CachedRequest, CachePricing, step_worth, turns_ahead
from breakwater.core.log.message import Message, ToolCall
from breakwater.core.log.prompt_cache import Prices
from breakwater.core.log.session_log import SessionLog
from breakwater.core.policy import Policy, preset
from breakwater.core.simulate import simulate, view_at

SONNET = CachePricing(Prices(3.0, 0.3, 3.75), True, 315.0)    # Anthropic: writes at 1.25x, reads at 0.1x
GPT = CachePricing(Prices(1.25, 0.125, 1.25), False, 315.0)   # OpenAI: a write is plain input


# -- the decision, a pure function of the two requests and the prices --------------------------------
def test_a_step_that_rewrites_a_long_cached_tail_to_free_a_little_does_not_pay():
    kept = CachedRequest(100_000, 99_000)     # keeping the compaction: all but the newest message read
    step = CachedRequest(95_000, 10_000)      # masking from message 10k on: 85k written again
    worth = step_worth(SONNET, kept, step, turns=20)
    assert worth.freed == 5_000 and worth.rewritten == 89_000
    # 85k written at $3.75 and 10k read, against 99k read and 1k written
    assert worth.costs_now == pytest.approx((10_000 * 0.3 + 85_000 * 3.75 - 99_000 * 0.3 - 1_000 * 3.75) / 1e6)
    assert worth.saves_per_turn == pytest.approx(5_000 * 0.3 / 1e6)
    assert not worth.pays
    # it pays once enough requests follow: $0.2883 / $0.0015 = 192.2
    assert not step_worth(SONNET, kept, step, turns=192).pays
    assert step_worth(SONNET, kept, step, turns=193).pays
    assert "mask waits for the cache: it frees 5,000 tokens but re-writes 89,000 cached" in worth.note("mask")


def test_a_step_that_frees_much_of_what_it_rewrites_pays_within_a_few_requests():
    kept = CachedRequest(100_000, 99_000)
    step = CachedRequest(40_000, 10_000)      # 60k freed, 30k written again
    assert step_worth(SONNET, kept, step, turns=5).pays
    assert not step_worth(SONNET, kept, step, turns=1).pays


def test_a_cold_cache_makes_any_step_that_frees_tokens_pay():
    """After the TTL nothing is read either way: the step re-writes nothing the cache held."""
    worth = step_worth(SONNET, CachedRequest(100_000, 0), CachedRequest(99_000, 0), turns=1)
    assert worth.costs_now < 0 and worth.pays
    assert not step_worth(SONNET, CachedRequest(100_000, 0), CachedRequest(100_000, 0), turns=50).pays


def test_openai_prices_a_rewrite_at_the_input_price_less_the_cached_one():
    kept, step = CachedRequest(100_000, 99_000), CachedRequest(95_000, 10_000)
    worth = step_worth(GPT, kept, step, turns=20)
    assert worth.costs_now == pytest.approx((10_000 * 0.125 + 85_000 * 1.25 - 99_000 * 0.125 - 1_000 * 1.25) / 1e6)
    # $0.093875 / (5,000 * $0.125e-6): 150.2 requests
    assert not worth.pays and not step_worth(GPT, kept, step, turns=150).pays
    assert step_worth(GPT, kept, step, turns=151).pays


def test_turns_ahead_stop_at_the_hard_limit_and_the_cap():
    assert turns_ahead(100, room=10_000, growth=500) == 20
    assert turns_ahead(10, room=10_000, growth=500) == 10
    assert turns_ahead(100, room=-5, growth=500) == 1
    assert turns_ahead(100, room=10_000, growth=0) == 100


def test_pricing_comes_from_the_model_named_and_its_provider():
    pricing = CachePricing.of_session({"model": "claude-sonnet-4-5"})
    assert pricing is not None and pricing.writes_billed and pricing.prices.read < pricing.prices.input
    assert CachePricing.of_session({"model": "gpt-4o"}).writes_billed is False
    assert CachePricing.of_session({}) is None
    assert CachePricing.of_session({"model": "no-such-model-anywhere"}) is None


# -- in the pipeline ---------------------------------------------------------------------------------
def _session(exchanges: int, first_chars: int = 4_800, model: str = "claude-sonnet-4-5",
             gap_before: int | None = None) -> SessionLog:
    """A tool loop: one long early result (snipped or masked: little to free), then many short exchanges
    that nothing compacts, 10 s apart (an hour before exchange `gap_before`)."""
    msgs = [Message("sys", "system", "You are an agent."), Message("u0", "user", "Fix the build.")]
    at = 1_700_000_000.0

    def msg(*args, **kwargs) -> Message:
        nonlocal at
        at += 10
        return Message(*args, **kwargs, meta={"ts": at})

    msgs += [msg("a0", "assistant", "", (ToolCall("c0", "bash", '{"command": "make"}'),)),
             msg("t0", "tool", "error: x\n" * (first_chars // 9), tool_call_id="c0")]
    for i in range(1, exchanges):
        if i == gap_before:
            at += 3_600
        msgs += [msg(f"a{i}", "assistant", f"step {i}: looking at the next file",
                     (ToolCall(f"c{i}", "read_file", f'{{"path": "src/f{i}.py"}}'),)),
                 msg(f"t{i}", "tool", f"line {i} " * 15, tool_call_id=f"c{i}")]
    msgs.append(msg("end", "assistant", "done"))
    return SessionLog(header={"id": "s", "model": model, "window": 32_000}, entries=msgs)


def _policy(horizon: int) -> Policy:
    return preset("seed-000").with_changes(window=32_000, cache_horizon_turns=horizon)


def test_a_step_that_does_not_pay_waits_over_the_soft_limit_and_costs_less():
    log = _session(360)
    every, weighed = simulate(log, _policy(0), "heuristic"), simulate(log, _policy(20), "heuristic")
    p = _policy(20)
    over = [t for t in weighed.turns if t.base_tokens > p.soft_limit]
    assert over, "the session crosses the soft limit"
    # without the gate the long result is snipped as soon as the request crosses the soft limit,
    # re-writing the whole cached history after it to free ~580 tokens
    assert every.turns[over[0].turn - 1].edits.get("snipped")
    # weighed, it waits: every request over the soft limit stays under the hard one, as it was
    assert all(t.edits.get("snipped") is None and t.sent_tokens <= p.hard_limit for t in over)
    assert weighed.cache_rewritten < every.cache_rewritten
    assert weighed.cost_sent < every.cost_sent
    # the plan says why
    view = view_at(log, p, over[0].turn, "heuristic")
    assert any(note.startswith("snip waits for the cache: it frees") for note in view.notes)
    assert not view.edits or all(e.kind != "snipped" for e in view.edits)


def test_a_step_that_pays_is_taken_as_before():
    """A 60,000-char result: snipping it frees more than the cached tail it re-writes."""
    log = _session(150, first_chars=60_000)
    every, weighed = simulate(log, _policy(0), "heuristic"), simulate(log, _policy(20), "heuristic")
    assert [t.sent_tokens for t in weighed.turns] == [t.sent_tokens for t in every.turns]
    assert any(t.edits.get("snipped") for t in weighed.turns)


def test_the_hard_limit_is_never_crossed_to_spare_the_cache():
    log = _session(420)
    p = _policy(20)
    weighed = simulate(log, p, "heuristic")
    assert max(t.sent_tokens for t in weighed.turns) <= p.hard_limit
    assert any(t.level != "none" or t.compaction for t in weighed.turns)   # a step was forced at last
    assert weighed.cost_sent < simulate(log, _policy(0), "heuristic").cost_sent


def test_after_the_cache_expired_the_step_is_taken_at_once():
    log, cold = _session(360), _session(360, gap_before=315)
    p = _policy(20)
    warm_turns = simulate(log, p, "heuristic").turns
    cold_sim = simulate(cold, p, "heuristic")
    first = next(t for t in cold_sim.turns if t.base_tokens > p.soft_limit)
    snipped = [t.turn for t in cold_sim.turns if t.edits.get("snipped")]
    # the hour passes before exchange 315's reply: the request after it (turn 317: a request's time is its
    # last message's) is the first that reads nothing cached
    assert first.turn < 317 and snipped[0] == 317 and cold_sim.turns[316].cache.expired
    assert all(t.edits.get("snipped") is None for t in warm_turns)
    assert cold_sim.cache_rewritten == 0   # what it changed, the expired cache did not hold


def test_without_prices_or_a_horizon_every_step_is_taken():
    unknown = _session(360, model="no-such-model-anywhere")
    assert any(t.edits.get("snipped") for t in simulate(unknown, _policy(20), "heuristic").turns)
    assert any(t.edits.get("snipped") for t in simulate(_session(360), _policy(0), "heuristic").turns)


def test_the_decision_is_the_same_on_replay():
    """A pure function of (log, policy): the view of a waiting turn rebuilt from scratch equals the
    one simulate planned on its way through the session."""
    log = _session(360)
    p = _policy(20)
    sim = simulate(log, p, "heuristic", views=range(300, 362))
    for turn, view in sim.views.items():
        again = view_at(log, p, turn, "heuristic")
        assert [m.content for m in again.messages] == [m.content for m in view.messages]
        assert again.notes == view.notes


def test_misses_make_a_step_worth_more():
    """A miss writes the whole request: a token freed then saves its write, and the re-write a step
    causes is partly paid anyway (pi missed a third of its requests after a user message)."""
    kept, step = CachedRequest(100_000, 99_000), CachedRequest(95_000, 10_000)
    sure, half, never = (step_worth(SONNET, kept, step, 20, hit) for hit in (1.0, 0.5, 0.0))
    assert sure.costs_now > half.costs_now > never.costs_now
    assert sure.saves_per_turn < half.saves_per_turn < never.saves_per_turn
    assert half.saves_per_turn == pytest.approx(5_000 * (0.5 * 0.3 + 0.5 * 3.75) / 1e6)
    assert never.pays and not sure.pays


async def test_the_gauge_says_why_a_step_waits_for_the_cache():
    """The workbench shows the plan's reason beside what ran: a request over the soft limit with nothing
    snipped is otherwise a policy that looks broken."""
    from ui_support import ready

    from breakwater.ui.app import make_app
    from breakwater.ui.config import UISettings
    from breakwater.ui.widgets.gauges import Gauges

    log, p = _session(360), _policy(20)
    first = next(t for t in simulate(log, p, "heuristic").turns if t.base_tokens > p.soft_limit)
    note = next(n for n in view_at(log, p, first.turn, "heuristic").notes if "waits for the cache" in n)
    app = make_app(log, p, turn=first.turn, settings=UISettings(), counter="heuristic", window_source="policy")
    async with app.run_test(size=(200, 60)) as pilot:
        await ready(pilot, first.turn)
        assert note in app.screen.query_one(Gauges).figures().plain


def test_simulate_view_gives_the_plan_s_notes(tmp_path):
    import json
    import subprocess
    import sys

    from breakwater.core.policy.toml_file import dumps

    log, p = _session(360), _policy(20)
    first = next(t for t in simulate(log, p, "heuristic").turns if t.base_tokens > p.soft_limit)
    saved = SessionLog.create(tmp_path / "s.jsonl", log.header)
    for entry in log.entries:
        saved.append(entry)
    saved.close()
    (tmp_path / "p.toml").write_text(dumps(p))
    out = subprocess.run([sys.executable, "-m", "breakwater", "simulate", str(tmp_path / "s.jsonl"), "--policy",
                          str(tmp_path / "p.toml"), "--counter", "heuristic", "--view", str(first.turn)],
                         capture_output=True, text=True, check=True, timeout=120)
    assert any("snip waits for the cache: it frees" in n for n in json.loads(out.stdout)["notes"])
