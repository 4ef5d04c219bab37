"""Invariants of the sanitizer and the pipeline over generated histories (hypothesis)."""

import copy
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from breakwater.core.log.message import Message, ToolCall
from breakwater.core.fold.pipeline import Pipeline
from breakwater.core.policy import preset
from breakwater.core.stages.deep_compaction import WAITS
from breakwater.core.stages.sanitize import INVALID_CALL_NAME
from breakwater.core.log.session_log import SessionLog
from breakwater.core.simulate import simulate
from breakwater.core.log.tokens import TokenCounter
from breakwater.core.log.validity import api_problems

SIZES = [0, 1, 150, 199, 201, 999, 1001, 2999, 3001, 12_000, 60_000, 400_000]
HUGE = 10 * 1024 * 1024
ALPHABETS = ["lorem ipsum dolor ", "连接池超时，请检查配置。", "Traceback: KeyError 'x'\n", "ok 🚀 ", "é\u0301 ", "\x00\t "]


@st.composite
def text(draw, huge=False):
    size = draw(st.sampled_from(SIZES + ([HUGE] if huge else [])))
    unit = draw(st.sampled_from(ALPHABETS))
    return (unit * (size // len(unit) + 1))[:size]


@st.composite
def history(draw):
    items = draw(st.lists(st.sampled_from(
        ["user", "assistant", "calls", "calls", "calls", "orphan_result", "placeholder", "legacy_tool",
         "cancelled", "system", "odd_role", "user", "calls", "dup_calls", "user_run", "big_args"]), min_size=1, max_size=40))
    huge_at = draw(st.integers(min_value=-1, max_value=len(items) - 1)) if draw(st.booleans()) else -2
    msgs = [Message("m00000", "system", "You are an agent.")] if draw(st.booleans()) else []
    n_call = 0

    def add(role, content="", **kw):
        msgs.append(Message(f"m{len(msgs):05d}", role, content, **kw))

    for i, kind in enumerate(items):
        body = draw(text(huge=(i == huge_at)))
        if kind == "user":
            add("user", body)
        elif kind == "assistant":
            add("assistant", body)
        elif kind == "calls":
            k = draw(st.integers(1, 3))
            calls = []
            for _ in range(k):
                n_call += 1
                calls.append(ToolCall(f"call_{n_call}", draw(st.sampled_from(["bash", "read_file", "写文件", ""])),
                                      json.dumps({"command": draw(st.sampled_from(["ls", "cat 中文.txt", ""]))})))
            add("assistant", draw(st.sampled_from(["", "Let me look."])), tool_calls=tuple(calls))
            answered = draw(st.lists(st.sampled_from([c.id for c in calls]), max_size=k + 1))
            for cid in answered:
                add("tool", draw(text(huge=(i == huge_at))), tool_call_id=cid)
        elif kind == "dup_calls":  # two calls sharing one id, answered once or twice
            n_call += 1
            cid = f"call_{n_call}"
            add("assistant", "", tool_calls=(ToolCall(cid, "bash", '{"command": "ls"}'),
                                             ToolCall(cid, "bash", '{"command": "pwd"}')))
            for _ in range(draw(st.integers(1, 2))):
                add("tool", body, tool_call_id=cid)
        elif kind == "big_args":  # a model that writes a whole file through one call
            n_call += 1
            size = draw(st.sampled_from([19_999, 25_000, 120_000, 600_000]))
            args = json.dumps({"path": "big.txt", "content": (body or "x") * (size // max(1, len(body) or 1) + 1)})
            add("assistant", "", tool_calls=(ToolCall(f"call_{n_call}", "write_file", args[:size] + '"}'
                                                      if draw(st.booleans()) else args),))
            add("tool", "written", tool_call_id=f"call_{n_call}")
        elif kind == "user_run":
            for _ in range(draw(st.integers(2, 4))):
                add("user", body or "more")
        elif kind == "orphan_result":
            add("tool", body, tool_call_id="call_missing")
        elif kind == "placeholder":
            add("assistant", "[tool_call: quicksort]")
        elif kind == "legacy_tool":
            add("tool", "legacy tool message")
        elif kind == "cancelled":
            add("assistant", "The request was cancelled.")
        elif kind == "system":
            add("system", "late system note")
        elif kind == "odd_role":
            add("exit", "bye")
    return msgs


POLICIES = st.sampled_from(["breakwater", "seed-000", "seed-001", "seed-003"])
WINDOWS = st.sampled_from([4_000, 16_000, 128_000])


def origin_map(msgs):
    return {m.id: m for m in msgs}


def check_view(view, msgs, policy, seen=None):
    api = view.to_api()
    if not api:  # nothing valid in the history yet: there is no request to make
        return
    # valid, with unique call ids and user/assistant turns that alternate
    assert api_problems(api) == [], api_problems(api)
    if seen is not None:
        assert_covered(view, seen, policy)
    # a request that exceeds the window is never produced: one always fits here, unless a tool call
    # in working memory carries an argument too long to send (the agent then refuses to send it)
    # (with no usage recorded the figure is the heuristic's and the verdict the tokenizer's near the limits:
    # the two may fall either side of the window, issue 36; the verdict is then checked by the tokenizer)
    if view.counted == "exact" and view.estimated:
        assert view.fits == (TokenCounter("o200k_base").exact_messages(list(view.messages)) <= policy.window)
    else:
        assert view.fits == (view.sent_tokens <= policy.window)
    if not view.fits:   # the argument as logged was too long (the cut one may still be too many tokens)
        recent = view.messages[-policy.working_memory_messages:]
        logged = {c.id: c.arguments for m in msgs for c in m.tool_calls}
        assert any(len(logged.get(c.id, c.arguments)) > policy.argument_max_chars for m in recent for c in m.tool_calls)
    originals = origin_map(msgs)
    log_calls = {(c.id, c.name, c.arguments) for m in msgs for c in m.tool_calls}
    log_args = {}
    for m in msgs:  # the first call with each id is the one sent (a merged message keeps its first id)
        for c in m.tool_calls:
            log_args.setdefault(c.id, c.arguments)
    cut = {e.message_id for e in view.edits if e.kind == "truncated-argument"}
    for m in view.messages:
        for c in m.tool_calls:
            if (c.id, c.name, c.arguments) in log_calls:
                continue
            # calls are never altered, except that a call without a name is sent under one that says
            # so, and an over-long argument is cut so the request fits
            if c.name == INVALID_CALL_NAME and (c.id, "", c.arguments) in log_calls:
                continue
            original = log_args[c.id]
            assert m.id in cut and len(original) > policy.argument_max_chars > len(c.arguments)
            try:
                keys = set(json.loads(original))
            except ValueError:
                continue
            assert set(json.loads(c.arguments)) == keys
        if m.role == "user" and m.id in originals and originals[m.id].role == "user":
            original = originals[m.id].content
            assert m.content.startswith(original[: policy.user_keep_chars])


def assert_covered(view, seen, policy):
    """Every message that left the context is covered by a summary (seed-001 alone drops by design), or
    left by shaping while the plan says compaction waits: no summary could bring the request under the
    soft limit, so turns leave by shaping until a batch worth summarizing has gathered (core/fold/pipeline.py
    `_summarize_what_shaping_drops`). Hypothesis found that case (a 400,000-character user message at
    128,000: the turns after a summary leave by shaping, with the note on the plan)."""
    present = set()
    for m in view.messages:
        present.add(m.id)
        present.update((m.meta or {}).get("joined", ()))
    waits = any(note.startswith(WAITS) for note in view.notes)
    accounted = {e.message_id for e in view.edits if e.kind in ("summarized", "merged", "stripped")
                 or (e.kind == "dropped" and (e.stage == "sanitize" or not policy.deep_compact))
                 or (e.kind == "dropped" and e.stage == "shape_history" and waits)}
    assert [m.id for m in seen if m.id not in present and m.id not in accounted] == []


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(msgs=history(), name=POLICIES, window=WINDOWS)
def test_every_request_is_valid_fits_and_keeps_calls_and_user_heads(msgs, name, window):
    policy = preset(name).with_changes(window=window)
    frozen = copy.deepcopy(msgs)
    pipe = Pipeline(policy)
    for i, m in enumerate(msgs):
        if m.role == "assistant":
            check_view(pipe.view()[0], msgs, policy, seen=msgs[:i])
        pipe.feed(m)
    check_view(pipe.view()[0], msgs, policy, seen=msgs)
    assert msgs == frozen and [m.meta for m in msgs] == [m.meta for m in frozen]  # the log is never modified


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(msgs=history(), name=POLICIES, window=WINDOWS)
def test_two_runs_give_identical_results(msgs, name, window):
    policy = preset(name).with_changes(window=window)
    log = SessionLog(header={"model": "gpt-4o"}, entries=msgs)
    a = simulate(log, policy, counter="exact").to_json()
    b = simulate(log, policy, counter="exact").to_json()
    assert a == b
    pa, pb = Pipeline(policy, TokenCounter("o200k_base")), Pipeline(policy, TokenCounter("o200k_base"))
    pa.feed_all(msgs)
    pb.feed_all(msgs)
    va, vb = pa.view()[0], pb.view()[0]
    assert va.to_api() == vb.to_api() and va.edits == vb.edits
    check_view(va, msgs, policy)
