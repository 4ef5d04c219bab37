"""The index's sums of exact counts (core/fold/range_sums.py): each message counted once per level,
whatever ranges a plan asks for and in whatever order, and every sum what adding the counts gives."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from breakwater.core.fold.range_sums import RangeSums

N = 200


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.tuples(st.just("sum"), st.integers(0, N), st.integers(0, N)),
                          st.tuples(st.just("cut"), st.integers(0, N), st.just(0))), max_size=60),
       st.lists(st.integers(0, 1000), min_size=N, max_size=N))
def test_sums_are_exact_and_each_count_is_asked_once(ops, values):
    sums = RangeSums()
    version = [0] * N          # a message changed by a cut is counted again, once
    asked: dict[tuple[int, int], int] = {}

    def count(i):
        key = (i, version[i])
        asked[key] = asked.get(key, 0) + 1
        return values[i] + version[i]

    for op, a, b in ops:
        if op == "cut":
            sums.truncate(a)
            for i in range(a, N):
                version[i] += 1
            continue
        a, b = min(a, b), max(a, b)
        want = sum(values[i] + version[i] for i in range(a, b))
        assert sums.total(a, b, count) == want
        if a < b:
            assert sums.known(a, b) == want
    assert all(n == 1 for n in asked.values())


def test_ranges_asked_in_turn_count_the_history_once():
    """A plan's pattern: working memory's last messages, then the history from its start, as the
    session grows; what restarted its sums counted each message ~7 times at 20,000 messages."""
    sums, calls = RangeSums(), [0]

    def count(i):
        calls[0] += 1
        return 1

    for n in range(10, 20_000, 2):
        assert sums.total(n - 6, n, count) == 6
        assert sums.total(1 + n // 3, n - 6, count) == n - 7 - n // 3
    assert calls[0] == 20_000 - 2 - 1 - 10 // 3


def test_a_simulation_counts_each_message_about_once_per_level(monkeypatch):
    """Five levels (as sent, snipped, masked, microcompacted, working memory's form): each message's
    exact count is asked about five times, however long the session. Sums that started again counted
    each 15-17 times from 2,000 messages on."""
    from synth import as_log, session_messages

    from breakwater.core.log.tokens import TokenCounter
    from breakwater.core.policy import preset
    from breakwater.core.simulate import simulate

    calls = [0]
    exact_message = TokenCounter.exact_message

    def counted(self, msg, *keep):
        calls[0] += 1
        return exact_message(self, msg, *keep)

    monkeypatch.setattr(TokenCounter, "exact_message", counted)
    n = 2000
    simulate(as_log(session_messages(n, avg_tool_chars=2000, seed=7), window=128_000),
             preset("breakwater").with_changes(window=128_000))
    assert calls[0] <= 6 * n



@pytest.mark.parametrize("changes", [{}, {"mask_clear_tool_inputs": True}])
def test_a_level_forms_only_the_messages_it_changes(monkeypatch, tmp_path, changes):
    """A message a stage level leaves as sent (the ledger's rank does not step at it) is summed at that
    level with its count as sent: its form is not looked for. Before, each level's exact count and bound
    transformed every message of a range (the 20k session: 146,598 transforms, 108,314 finding nothing
    to change; here ~70% found nothing). Every sum is still what counting each message's form gives."""
    from synth import as_log, session_messages

    from breakwater.core.fold.index import Index
    from breakwater.core.fold.ledger import NEAR
    from breakwater.core.log.tokens import lower_message
    from breakwater.core.policy import preset
    from breakwater.core.simulate import simulate

    transform, calls = Index.transform, [0, 0]

    def looked(self, i, level, near):
        res = transform(self, i, level, near)
        calls[0] += 1
        calls[1] += res is not None
        return res

    # a store of its own: the suite's holds the figures of this simulation's plans (core/fold/kept_measures.py)
    monkeypatch.setenv("BREAKWATER_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(Index, "transform", looked)
    pipes = []
    simulate(as_log(session_messages(1500, avg_tool_chars=2000, seed=7), window=128_000),
             preset("breakwater").with_changes(window=128_000, **changes),
             before_turn=lambda pipe, i: pipes[:1] or pipes.append(pipe))
    assert calls[0] and calls[1] >= 0.9 * calls[0], calls
    monkeypatch.undo()
    index = pipes[0].index
    out, n = index.san.out, len(index.ledger.tok0)   # what the last plan entered
    for level in (0, 1, 2, 3, NEAR):
        form, near = (2, True) if level == NEAR else (level, False)
        sent = [(index.transform(i, form, near) or (out[i].message,))[0] for i in range(n)]
        for a, b in ((0, n), (n // 3, n - 7), (n - 7, n), (5, 6)):
            assert index.exact_sum(level, a, b) == sum(map(index.counter.exact_message, sent[a:b])), (level, a, b)
            assert index.lower_sum(level, a, b) == sum(map(lower_message, sent[a:b])), (level, a, b)


def test_the_bound_and_the_exact_count_of_a_range_build_each_form_once(monkeypatch, tmp_path):
    """A plan sums a range's lower bound, then its exact count: each form of a message the level changes
    is built once for both (the 20k session built 38,284 forms, 28,405 of them different; now 28,925).
    The sums stay those of counting every form (test above)."""
    from collections import Counter

    from synth import as_log, session_messages

    from breakwater.core.fold.index import Index
    from breakwater.core.policy import preset
    from breakwater.core.simulate import simulate

    transform, summed, built, summing = Index.transform, Index._summed, Counter(), [False]

    def looked(self, i, level, near):
        if summing[0]:   # the request built and the cache-stable prefix ask for forms of their own
            built[id(self), i, level, near] += 1
        return transform(self, i, level, near)

    def sums(self, *args):
        summing[0] = True
        try:
            return summed(self, *args)
        finally:
            summing[0] = False

    monkeypatch.setenv("BREAKWATER_CACHE_DIR", str(tmp_path))   # as above: no figures kept by another test
    monkeypatch.setattr(Index, "transform", looked)
    monkeypatch.setattr(Index, "_summed", sums)
    simulate(as_log(session_messages(1500, avg_tool_chars=2000, seed=7), window=128_000),
             preset("breakwater").with_changes(window=128_000))
    assert built and sum(built.values()) <= 1.05 * len(built), (sum(built.values()), len(built))
