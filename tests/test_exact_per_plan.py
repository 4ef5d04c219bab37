"""The exact counter's per-plan work (issue 38): what a plan finds in a few lookups in heuristic mode it
finds the same way in exact mode, with the same figures."""

from __future__ import annotations

from synth import as_log

from breakwater.core.fold import short_cuts
from breakwater.core.fold.stable_prefix import CachePrefix
from breakwater.core.log.message import Message
from breakwater.core.log.tokens import TokenCounter
from breakwater.core.policy import preset
from breakwater.core.simulate import simulate


def _chat(n: int, system: str = "") -> list[Message]:
    msgs = [Message(id="sys", role="system", content=system)] if system else []
    return msgs + [Message(id=f"m{i}", role="user" if i % 2 == 0 else "assistant", content=f"msg {i} " * 10)
                   for i in range(n)]


def test_a_request_counted_exactly_takes_the_quick_cache_prefix_with_the_same_figure(monkeypatch):
    """Under the soft limit with nothing changed by a stage, the cache-stable prefix is the previous
    request up to what changed since, in a lookup of the ledger's sums, also when tiktoken counted the
    request: before, exact mode compared the two plans again (`CachePrefix.tokens`) for every request
    (1.6 of 34 s on 200,000 tiny messages). Each quick figure equals what the comparison gives."""
    under_soft, quick, compared = short_cuts.ShortCuts.under_soft, [], [0]
    tokens = CachePrefix.tokens

    def checked(self, *args, **kwargs):
        plan = under_soft(self, *args, **kwargs)
        if plan is not None and plan.stable_prefix_tokens is not None:
            got = plan.stable_prefix_tokens, plan.stable_prefix_heuristic
            index = self.index
            want = tokens(self.prefix, plan, index.ledger, index.transform, self.meter.calibration)
            quick.append((plan.counted, got, (want, plan.stable_prefix_heuristic)))
            plan.stable_prefix_tokens, plan.stable_prefix_heuristic = got
        return plan

    def compare(self, *args):
        compared[0] += 1
        return tokens(self, *args)

    monkeypatch.setattr(short_cuts.ShortCuts, "under_soft", checked)
    monkeypatch.setattr(CachePrefix, "tokens", compare)
    window = 32_000   # near the limits by the heuristic bound (8 bytes a token): tiktoken counts most requests
    turns = simulate(as_log(_chat(1000, "You are terse."), window=window),
                     preset("breakwater").with_changes(window=window), counter="exact").turns
    exact = [q for q in quick if q[0] == "exact"]
    assert len(exact) > 300 and sum(t.counted == "exact" for t in turns) > 300
    assert all(got == want for _, got, want in quick)
    assert compared[0] < 10, (compared[0], len(turns))   # was one a request counted exactly


def test_a_head_sent_again_is_counted_once_not_once_a_plan(monkeypatch):
    """The frame of the cut (system prompt, summary, kept user messages) is the same list request after
    request: its exact count and bound are kept across plans, not worked out again in each."""
    system = "You are a careful agent. " * 30
    asked = [0]
    exact_message = TokenCounter.exact_message

    def counted(self, msg, *keep):
        asked[0] += msg.content == system
        return exact_message(self, msg, *keep)

    monkeypatch.setattr(TokenCounter, "exact_message", counted)
    window = 32_000
    turns = simulate(as_log(_chat(1000, system), window=window),
                     preset("breakwater").with_changes(window=window), counter="exact").turns
    assert sum(t.counted == "exact" for t in turns) > 300
    assert asked[0] <= 5, asked[0]

