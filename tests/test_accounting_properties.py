"""The accounting model's rules over generated sessions (hypothesis, issue 23): without and with are
counted alike, so saved = without − with and a policy that only removes text never sends more; and
`fits` and the zone agree with tiktoken's count on text the heuristic undercounts (hex, base64, CJK,
emoji, minified JSON)."""

from __future__ import annotations

import base64
import json
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from breakwater.core.log.message import Message, ToolCall
from breakwater.core.policy import PRESETS
from breakwater.core.log.session_log import Event, SessionLog
from breakwater.core.simulate import simulate, view_at
from breakwater.core.log.tokens import TokenCounter, heuristic_message


def hostile(kind: str, rng: random.Random, size: int) -> str:
    if kind == "hex":
        return "\n".join("%040x" % rng.getrandbits(160) for _ in range(size // 41 + 1))
    if kind == "base64":
        return base64.b64encode(rng.randbytes(size * 3 // 4 + 1)).decode()
    if kind == "cjk":
        return "".join(chr(rng.randrange(0x4E00, 0x9FFF)) for _ in range(size // 3 + 1))
    if kind == "emoji":
        return "".join(chr(rng.randrange(0x1F300, 0x1FAFF)) for _ in range(size // 4 + 1))
    if kind == "json":
        return json.dumps([{"id": rng.randrange(10**9), "v": rng.random()} for _ in range(size // 40 + 1)],
                          separators=(",", ":"))
    return " ".join(rng.choice(["the", "pool", "timeout", "fixed", "order", "service"]) for _ in range(size // 6 + 1))


@st.composite
def sessions(draw, usage: bool = True):
    """A tool-using session whose outputs mix text classes, with recorded usage (an unseen overhead and
    a ratio to the heuristic, with noise) on some requests."""
    rng = random.Random(draw(st.integers(0, 2**32)))
    kinds = draw(st.lists(st.sampled_from(["hex", "base64", "cjk", "emoji", "json", "prose"]), min_size=1, max_size=3))
    overhead, ratio = draw(st.integers(0, 4_000)), draw(st.floats(0.8, 1.6))
    msgs: list = [Message("m00000", "system", "You are a coding agent."),
                  Message("m00001", "user", "Find what broke the build.", turn=1)]
    entries = list(msgs)
    for t in range(draw(st.integers(3, 24))):
        call = ToolCall(f"c{t}", "bash", json.dumps({"command": f"step {t}"}))
        reply = Message(f"m{len(entries):05d}", "assistant", rng.choice(["", "Looking."]), (call,), turn=t + 1)
        entries.append(reply)
        if usage and rng.random() < 0.7:
            visible = sum(heuristic_message(m) for m in entries[:-1] if isinstance(m, Message))
            billed = int(ratio * visible + overhead + rng.randrange(-50, 50))
            entries.append(Event("usage", f"e{t}", {"turn": t + 1, "prompt_tokens": max(1, billed),
                                                     "estimate": visible}))
        size = draw(st.sampled_from([50, 400, 2_500, 6_000]))
        entries.append(Message(f"m{len(entries):05d}", "tool", hostile(rng.choice(kinds), rng, size),
                               tool_call_id=call.id, name="bash", turn=t + 1))
    entries.append(Message(f"m{len(entries):05d}", "assistant", "Done.", turn=len(entries)))
    return SessionLog(header={"model": "gpt-4o"}, entries=entries)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions(), st.sampled_from(sorted(PRESETS)), st.sampled_from([2_000, 6_000, 20_000, 128_000]),
       st.sampled_from(["exact", "heuristic"]))
def test_without_and_with_are_counted_alike(log, name, window, counter):
    for policy in (PRESETS[name].with_changes(window=window),
                   PRESETS[name].with_changes(window=window, deep_compact=False)):
        sim = simulate(log, policy, counter=counter)
        assert sim.saved == sim.billed_raw - sim.billed_sent
        for t in sim.turns:
            assert 0 <= t.stable_prefix_tokens <= t.sent_tokens
            if not policy.deep_compact:   # only removes text: never sends more than without compaction
                assert t.sent_tokens <= t.raw_tokens, (t.turn, t.sent_tokens, t.raw_tokens)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions(usage=False), st.sampled_from(["seed-001", "breakwater", "seed-003"]),
       st.sampled_from([4_000, 12_000, 40_000]))
def test_fits_and_the_zone_hold_against_tiktoken(log, name, window):
    policy = PRESETS[name].with_changes(window=window)
    sim = simulate(log, policy, counter="exact")
    counter = TokenCounter("o200k_base")
    for t in sim.turns[-3:]:
        view = view_at(log, policy, t.turn, counter="exact")
        exact = counter.exact_messages(view.messages)
        assert t.fits == (exact <= window), (t.turn, exact, t.sent_tokens)
        if exact > policy.soft_limit:
            assert t.zone != "safe", (t.turn, exact)
