"""The pipeline's short cuts decide exactly what its general path decides (issue 7 item 18, issue 8
item 9): the plan of a request under the soft limit, the ledger's sums, the stages' reach."""

from __future__ import annotations

from dataclasses import fields

import pytest

from breakwater.core.stages import mask, microcompact, snip
from breakwater.cli.core import sample_path
from breakwater.core.fold.ledger import FAR_KINDS, NEAR, Ledger
from breakwater.core.log.message import Message, ToolCall
from breakwater.core.fold.pipeline import Pipeline
from breakwater.core.fold.stable_prefix import assigned, region_tokens, sent_alike
from breakwater.core.policy import PRESETS
from breakwater.core.log.session_log import Event, SessionLog
from breakwater.core.simulate import make_pipeline
from breakwater.core.log.tokens import heuristic_message
from breakwater.formats import load_session
from synth import session_messages


def plans(log, policy, general: bool, by_short_cut: list | None = None, counter: str = "exact"):
    """Each request's plan and view; `by_short_cut` gets the plans the short cut under the soft limit
    made."""
    pipe = make_pipeline(log, policy, counter, "gpt-4o")
    if general:   # every request through the general path (tiktoken-counted ones go to under_soft alone)
        pipe.short_cuts.plan = pipe.short_cuts.under_soft = lambda *args: None
    elif by_short_cut is not None:
        planned = pipe.short_cuts.under_soft
        pipe.short_cuts.under_soft = lambda *args: (lambda plan: plan and by_short_cut.append(plan) or plan)(planned(*args))
    out = []
    for entry in log.entries:
        if isinstance(entry, Message) and entry.role == "assistant":
            plan = pipe.plan()
            out.append((plan, plan.built or pipe.materialize(plan)))
        pipe.feed(entry)
    return out


def with_controls(msgs):
    entries = []
    for i, m in enumerate(msgs):
        if i == 40:
            entries.append(Event("pin", "p1", {"message_id": msgs[12].id}))
        if i == 90:
            entries.append(Event("undo", "u1", {"target": "p1"}))
        entries.append(m)
        if m.role == "assistant" and i % 4 == 0:
            entries.append(Event("usage", f"e{i}", {"prompt_tokens": 700 + 9 * i, "estimate": 800 + 7 * i}))
    return entries


SESSIONS = {"long-refactor": lambda: load_session(sample_path("long-refactor.jsonl")),
            "mixed-zh-en": lambda: load_session(sample_path("mixed-zh-en.jsonl")),
            "controls": lambda: SessionLog({"model": "gpt-4o"},
                                           with_controls(session_messages(160, avg_tool_chars=2500, seed=9)))}


@pytest.mark.parametrize("window", [12_000, 128_000])
@pytest.mark.parametrize("preset", sorted(PRESETS))
@pytest.mark.parametrize("name", sorted(SESSIONS))
def test_a_request_under_the_soft_limit_is_planned_as_the_general_path_plans_it(name, preset, window):
    log = SESSIONS[name]()
    policy = PRESETS[preset].with_changes(window=window)
    short, general = plans(log, policy, False), plans(log, policy, True)
    assert len(short) == len(general) > 0
    safe = 0
    for (a, va), (b, vb) in zip(short, general):
        for f in fields(a):
            if f.name not in ("head", "built"):
                assert getattr(a, f.name) == getattr(b, f.name), (a.turn, f.name)
        assert a.head == b.head and va == vb
        safe += a.zone == "safe"
    assert safe > 0


def test_a_rejected_summary_is_noted_on_a_request_tiktoken_counts_under_the_soft_limit():
    """After a rejected summary the general path notes it (`_plan_of`): the exact short cut leaves it."""
    pipe = make_pipeline(SessionLog({"model": "gpt-4o"}, []), PRESETS["breakwater"].with_changes(window=32_000),
                         "exact", "gpt-4o")
    pipe.feed(Message("m0", "user", "go on " * 3000))
    pipe.deep.last_failure = "empty summary"
    plan = pipe.plan()
    assert (plan.zone, plan.counted) == ("safe", "exact")
    assert plan.notes == ["summary rejected (empty summary); the extractive summary stands in"]


@pytest.mark.parametrize("preset", sorted(PRESETS))
@pytest.mark.parametrize("name", [*sorted(SESSIONS), "chat"])
def test_the_exact_sums_are_the_counts_of_the_forms_the_stages_build(name, preset):
    """The index's exact sums at a stage level (taken from level 0's where the level changes none of
    the messages) are tiktoken's counts of what `transform` makes of each, pins included."""
    log = SESSIONS[name]() if name != "chat" else SessionLog(
        {"model": "gpt-4o"}, [Message(f"m{i}", ("user", "assistant")[i % 2], f"short line {i} " * (1 + i % 7))
                              for i in range(300)])
    pipe = make_pipeline(log, PRESETS[preset].with_changes(window=12_000), "exact", "gpt-4o")
    index, count = pipe.index, pipe.counter.exact_message
    checked = 0
    for entry in log.entries:
        if isinstance(entry, Message) and entry.role == "assistant":
            pipe.plan()
            n = len(pipe.san.out)
            for level in (1, 2, 3):
                for a, b in ((0, n), (n // 3, n), (n // 2, n - 1), (1, n // 4 + 1)):
                    expected = sum(count((index.transform(i, level, near=False) or (pipe.san.out[i].message,))[0])
                                   for i in range(a, b))
                    assert index.exact_sum(level, a, b) == expected, (level, a, b)
                    checked += a < b
        pipe.feed(entry)
    assert checked > 0


SIZES = [0, 5, 199, 201, 999, 1_001, 2_999, 3_001, 40_000]


@pytest.mark.parametrize("role", ["user", "system"])
@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_no_soft_zone_stage_changes_a_user_or_system_message(role, preset):
    """The pipeline enters user and system messages as unchanged at every stage level (SPEC §4:
    the stages act on tool results and assistant text): the stages must agree."""
    policy = PRESETS[preset]
    for size in SIZES:
        for unit in ("lorem ipsum ", "连接池超时。", "Traceback\n"):
            msg = Message("m1", role, (unit * (size // len(unit) + 1))[:size])
            assert snip.snip(msg, policy) is None
            assert mask.mask_far(msg, policy) is None and mask.head_tail_near(msg, policy) is None
            assert microcompact.microcompact(msg, ToolCall("c", "bash", '{"command": "ls"}'), policy) is None


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_an_assistant_reply_is_entered_with_the_forms_the_stages_make_of_it(preset):
    """The pipeline enters a reply up to `fold_min_chars` as unchanged without asking the stages
    (the one thing they do to assistant text is fold a longer one): the stages must agree."""
    policy = PRESETS[preset]
    clearing = policy.with_changes(mask_clear_tool_inputs=True)   # the calls' arguments too, far from the end
    for policy, size in [(p, n) for p in (policy, clearing) for n in (*SIZES, p.fold_min_chars, p.fold_min_chars + 1)]:
        for calls in ((), (ToolCall("c1", "bash", '{"command": "ls"}'),)):
            pipe = make_pipeline(SessionLog({}, []), policy, "heuristic")
            reply = Message("m1", "assistant", ("lorem ipsum " * (size // 12 + 1))[:size], calls)
            pipe.feed(Message("m0", "user", "go on"))
            pipe.feed(reply)
            if calls:
                pipe.feed(Message("m2", "tool", "done", tool_call_id="c1"))
            pipe.plan()
            if size or calls:   # an empty reply without calls is dropped
                assert pipe.san.out[1].message is reply
                assert _entered(pipe.ledger, 1) == _built_counts(pipe, reply), size


def _built_counts(pipe: Pipeline, msg: Message) -> dict[int, tuple[str, int]]:
    """{ledger level: (kind, heuristic tokens)} of the forms the stages build of `msg`."""
    built = {L: pipe.index.far_form(msg, L) for L in (1, 2, 3)}
    built[NEAR] = pipe.index.near_form(msg, 2)
    return {L: (res[2], heuristic_message(res[0])) for L, res in built.items() if res is not None}


def _entered(ledger: Ledger, i: int) -> dict[int, tuple[str, int]]:
    """{ledger level: (kind, tokens)} the ledger holds for message i, for each level that changes it."""
    out = {}
    for L in (1, 2, 3, NEAR):
        kinds: dict[str, int] = {}
        ledger.count_kinds(L, i, i + 1, kinds)
        assert sum(kinds.values()) <= 1
        for kind in kinds:
            out[L] = (kind, ledger.tokens(L, i, i + 1))
    return out


def _varied_results(policy) -> list[tuple[Message, ToolCall | None]]:
    """Tool results and replies on every side of each stage's thresholds: ASCII, Chinese and mixed,
    with and without an exit status, an error line, a call, a source cut and a spill file."""
    cases = []
    sizes = sorted({0, 1, 150, policy.mask_min_chars, policy.mask_min_chars + 1, policy.fold_min_chars + 1,
                    policy.working_memory_max_chars, policy.working_memory_max_chars + 1,
                    policy.snip_threshold_chars, policy.snip_threshold_chars + 1, 9_999, 10_000, 24_999, 25_001})
    units = ("processed batch 42 in 7ms\n", "连接池超时，重试中。\n", "résumé naïve — ok\n", "x" * 300 + "\n")
    tails = ("", "\nTraceback (most recent call last):\n  ValueError: 错误的参数 " + "长" * 200,
             "\nnpm ERR! code ERESOLVE\n[exit code: 1]", "\nall good\n[exit code: 0]")
    calls = (None, ToolCall("c1", "bash", '{"command": "pytest -q tests/' + "deep/" * 30 + '"}'),
             ToolCall("c1", "read_file", '{"path": "app/路径.py", "limit": 40}'), ToolCall("c1", "grep", "not json"))
    k = 0
    for size in sizes:
        for unit in units:
            for tail in tails:
                body = (unit * (size // len(unit) + 1))[:size]
                text = body + tail if size else tail
                k += 1
                meta = None
                if k % 5 == 0:
                    meta = {"source": {"total_lines": 1234, "dropped_lines": 1000, "spill": ".agent/spill/s/o.txt"}}
                elif k % 7 == 0:
                    meta = {"exit_code": k % 3}
                call = calls[k % len(calls)]
                cases.append((Message(f"t{k}", "tool", text, tool_call_id="c1" if call else None,
                                      name=None if call else "bash", meta=meta), call))
                reply_calls = ((ToolCall("c9", "bash", '{"command": "ls -la 路径"}'), ToolCall("c8", "grep", "{}"))
                               if k % 4 == 1 else (ToolCall("c9", "bash", "{}"),) if k % 2 else ())
                cases.append((Message(f"a{k}", "assistant", text, reply_calls), None))
    return cases


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_each_message_is_entered_with_the_counts_of_the_forms_the_stages_build(preset):
    """The ledger enters a message's counts at each stage level without building the forms (they are
    built only when a request is): the counts must be those of the forms built."""
    base = PRESETS[preset]
    policies = (base, base.with_changes(snip=False), base.with_changes(mask=False),
                base.with_changes(microcompact=False, mask_min_chars=50, working_memory_max_chars=120,
                                  working_memory_head_chars=60, working_memory_tail_chars=60),
                # far calls' arguments cleared (Anthropic's clear_tool_inputs), one tool excluded
                base.with_changes(mask_clear_tool_inputs=True, mask_exclude_tools="grep"),
                base.with_changes(mask_clear_tool_inputs=True, microcompact=False))
    for policy in policies:
        pipe = Pipeline(policy)
        for i, (msg, call) in enumerate(_varied_results(policy)):
            pipe.index.calls = {"c1": call} if call else {}
            pipe.ledger.add(heuristic_message(msg), True, pipe.index.form_tokens(msg))
            assert _entered(pipe.ledger, i) == _built_counts(pipe, msg), (policy, msg.id)


def test_the_ledger_sums_what_each_level_makes_of_each_message():
    ledger = Ledger()
    rows = []   # (tokens as logged, {level: (kind, tokens)})
    for i in range(300):
        t0 = 5 + (i * 37) % 90
        forms = {}
        if i % 3 == 0:
            forms = {1: ("snipped", t0 // 2), 2: ("masked", 7), 3: ("microcompacted", 4), NEAR: ("snipped", t0 - 1)}
        elif i % 5 == 0:
            forms = {2: ("folded", 9), 3: ("folded", 9)}
        ledger.add(t0, i % 4 != 1, [(L, k, t) for L, (k, t) in forms.items()])
        if i % 7 == 0:
            ledger.add_truncated(i)
        rows.append((t0, forms))
    ledger.truncate(250)   # what the sanitizer changed is entered again
    for i in range(250, 300):
        t0, forms = rows[i]
        ledger.add(t0, i % 4 != 1, [(L, k, t) for L, (k, t) in forms.items()])
        if i % 7 == 0:
            ledger.add_truncated(i)
    for a, b in ((0, 300), (17, 17), (3, 251), (249, 250), (120, 299)):
        for level in (0, 1, 2, 3, NEAR):
            want = sum(forms[level][1] if level in forms else t0 for t0, forms in rows[a:b])
            assert ledger.tokens(level, a, b) == want
            if level:
                counts = {"snipped": 100}
                ledger.count_kinds(level, a, b, counts)
                want = {"snipped": 100}
                for kind in ("snipped", "masked", "folded", "microcompacted"):
                    c = sum(1 for _, forms in rows[a:b] if forms.get(level, ("",))[0] == kind)
                    if c:
                        want[kind] = want.get(kind, 0) + c
                assert list(counts.items()) == list(want.items())   # in FAR_KINDS order
        assert ledger.truncated_count(a, b) == len([i for i in range(a, b) if i % 7 == 0])
        assert list(ledger.changed_in(2, NEAR, a, b)) == [i for i in range(a, b) if i % 3 == 0 or i % 5 == 0]
        for levels in ((), (1,), (2, 3)):
            changed = {i for i in range(a, b) for L in (*levels, NEAR) if L in rows[i][1]}
            assert ledger.changes(levels, a, b) == bool(changed)
    assert list(ledger.group_starts) == [i for i in range(300) if i % 4 != 1]
    copy = ledger.copy()
    assert copy == ledger
    copy.add(5, True)
    assert copy != ledger and len(ledger) == 300


class _Searching(Ledger):
    """A ledger that says every stage changes something: the soft zone's search tries every level."""

    __slots__ = ()

    def changes(self, levels, a, b):
        return True


class _Telling(Ledger):
    """A ledger that counts the requests the soft zone's short cut was taken for."""

    __slots__ = ("skipped",)

    def __init__(self):
        super().__init__()
        self.skipped = 0

    def changes(self, levels, a, b):
        found = super().changes(levels, a, b)
        self.skipped += not found
        return found


def tiny_chat(n):
    return SessionLog({"model": "gpt-4o"}, [Message(f"m{i}", "user" if i % 2 == 0 else "assistant", f"msg {i}")
                                            for i in range(n)])


@pytest.mark.parametrize("preset", sorted(PRESETS))
@pytest.mark.parametrize("name", ["tiny-chat", "long-refactor", "controls"])
def test_the_soft_zone_skips_the_stages_that_change_nothing_as_the_search_would(name, preset):
    """A request over the soft limit whose messages no stage changes goes straight to the highest
    stage level, as trying each in turn would end (issue 8 item 9: a million short messages)."""
    log = tiny_chat(1_200) if name == "tiny-chat" else SESSIONS[name]()
    policy = PRESETS[preset].with_changes(window=2_000 if name == "tiny-chat" else 12_000)
    runs, ledgers = [], (_Telling(), _Searching())
    for ledger in ledgers:
        pipe = make_pipeline(log, policy, "exact", "gpt-4o")
        pipe.index.ledger = ledger
        runs.append([])
        for entry in log.entries:
            if isinstance(entry, Message) and entry.role == "assistant":
                plan = pipe.plan()
                runs[-1].append((plan, plan.built or pipe.materialize(plan)))
            pipe.feed(entry)
    for (a, va), (b, vb) in zip(*runs, strict=True):
        for f in fields(a):
            if f.name not in ("head", "built", "new_compaction"):
                assert getattr(a, f.name) == getattr(b, f.name), (a.turn, f.name)
        assert a.head == b.head and va == vb
    if name == "tiny-chat" and (policy.snip or policy.mask or policy.microcompact):
        assert ledgers[0].skipped > 0


def test_a_plan_s_region_is_counted_as_its_messages_one_by_one():
    """`region_tokens` counts a part at a time (the cache-stable prefix of every request): it must
    be the sum of each message at the stage level the plan gives it, wherever the boundary falls."""
    from itertools import product

    from breakwater.core.fold.pipeline import Pipeline, Plan

    pipe = Pipeline(PRESETS["breakwater"])
    for i in range(40):
        t0 = 5 + (i * 37) % 90
        pipe.ledger.add(t0, True, [(1, "snipped", t0 // 2), (2, "masked", 3), (3, "microcompacted", 2),
                                   (NEAR, "snipped", t0 - 1)] if i % 3 == 0 else ())
    for level, lower, boundary, near_start in product(range(4), range(4), range(0, 41, 3), range(0, 41, 4)):
        plan = Plan(1, 40, 0, 0, level, near_start, None, [], 0, 0, 0, "soft", "estimate", True,
                    lower=lower, boundary=boundary)
        for a in range(0, 40, 3):
            for b in range(a + 1, 41, 4):
                one_by_one = 0
                for i in range(a, b):
                    lv, near = assigned(plan, i)
                    one_by_one += pipe.ledger.tokens(NEAR if near else lv, i, i + 1)
                assert region_tokens(pipe.ledger, plan, a, b) == one_by_one, (level, lower, boundary, near_start, a, b)


@pytest.mark.parametrize("counter", ["heuristic", "exact"])
@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_a_soft_zone_request_no_stage_changes_is_planned_as_the_general_path_plans_it(preset, counter):
    """Over the soft limit, a request whose messages no stage changes (a long chat of short messages)
    is planned in a few lookups, as the general path would plan it (issue 8 item 9); under it too.
    Near the limits tiktoken counts the request at no stage, and the short cut plans from that count
    (issue 29 item 1: the general path cost a million tiny messages 21 s)."""
    log = tiny_chat(3_000)
    policy = PRESETS[preset].with_changes(window=12_000)
    short = plans(log, policy, False, by_short_cut := [], counter)
    general = plans(log, policy, True, counter=counter)
    assert len(short) == len(general)
    for (a, va), (b, vb) in zip(short, general):
        for f in fields(a):
            if f.name not in ("head", "built"):
                assert getattr(a, f.name) == getattr(b, f.name), (a.turn, f.name)
        assert a.head == b.head and va == vb
    zones = [p.zone for p in by_short_cut if p.counted == ("exact" if counter == "exact" else "estimate")]
    assert zones.count("soft") > 100 and zones.count("safe") > 100


def eager_ids(pipe: Pipeline) -> dict[str, int]:
    """Ids entered as the pipeline used to enter them: each message's, as it is (re)entered."""
    eager: dict[str, int] = {}
    enter = pipe.index.enter_from

    def entering(d):
        enter(d)
        for i in range(d, len(pipe.san.out)):
            for sid in pipe.san.out[i].sources:
                eager[sid] = i

    pipe.index.enter_from = entering
    return eager


RECORDING = PRESETS["breakwater"].with_changes(window=16_000, deep_compact_first=True)


def recorded_compactions_log():
    live, log = Pipeline(RECORDING), SessionLog({"window": 16_000})
    for m in session_messages(240, avg_tool_chars=3000, seed=3):
        if m.role == "assistant":
            comp = live.plan().new_compaction
            if comp:
                log.append(comp.to_event())
        live.feed(m)
        log.append(m)
    return log


def pinned_then_stripped():
    """A call nobody answered, pinned while it waits: the sanitizer then removes it, and the id
    entered for it points where the next message went."""
    msgs = [Message("s", "system", "You are an agent."), Message("u0", "user", "start", turn=1),
            Message("a0", "assistant", "", (ToolCall("c9", "bash", '{"command": "ls"}'),), turn=1)]
    chat = tiny_chat(2_000).entries
    return SessionLog({}, [*msgs, Event("pin", "p1", {"message_id": "a0"}), *chat[:7],
                           Event("pin", "p2", {"message_id": chat[5].id}), *chat[7:]])


@pytest.mark.parametrize("name", ["controls", "recorded", "sanitizer-mess", "tiny-chat", "pinned-then-stripped"])
def test_a_message_is_found_by_id_as_if_every_id_had_been_entered_as_it_came(name):
    """Ids are entered when a pin or a compaction asks (issue 8 item 9): every answer must be the one
    the index entered message by message gave, stale entries of messages the sanitizer removed too."""
    log = {"controls": SESSIONS["controls"], "recorded": recorded_compactions_log,
           "sanitizer-mess": lambda: load_session(sample_path("sanitizer-mess.jsonl")),
           "tiny-chat": lambda: tiny_chat(3_000), "pinned-then-stripped": pinned_then_stripped}[name]()
    policy = RECORDING if name == "recorded" else PRESETS["breakwater"].with_changes(window=12_000)
    pipe = Pipeline(policy)
    eager = eager_ids(pipe)
    ids = [e.id for e in log.entries if isinstance(e, Message)]
    asked = 0
    for k, entry in enumerate(log.entries):
        if isinstance(entry, Message) and entry.role == "assistant":
            pipe.plan()
            wanted = [*pipe.pins, *(a.comp.cut_id for a in pipe.active if a.comp.cut_id), *ids[k % 7::97], *ids[-3:]]
            for mid in wanted:
                assert pipe.index.index_of(mid) == eager.get(mid), (k, mid)
                asked += 1
        pipe.feed(entry)
    assert asked > 50 and (name != "recorded" or pipe.active)


def test_a_long_chat_with_no_pin_enters_no_id():
    """A million short messages held an id -> index entry each (~60 MB): only pins and compactions ask,
    and a compaction finds the message it names among the newest."""
    log = tiny_chat(3_000)
    pipe = make_pipeline(log, PRESETS["breakwater"].with_changes(window=12_000), "heuristic")
    for entry in log.entries:
        if isinstance(entry, Message) and entry.role == "assistant":
            pipe.plan()
        pipe.feed(entry)
    assert pipe.compactions_applied >= 2
    assert pipe.index.ids_entered() == 0


def check_boundaries(pipe: Pipeline) -> set[int]:
    """Holds the soft zone's count of a boundary without a shape to the shape's own, at every boundary
    each search counts; returns the counts checked."""
    checked: set[int] = set()
    count = pipe.soft_zone.boundary_count

    def counting(at, lv, below, cut, n, whole):
        sent = count(at, lv, below, cut, n, whole)
        for b in range(whole.start, whole.near_start):
            assert sent(b) == at(lv, cut, below, b).sent, (pipe.turn, lv, below, b)
            checked.add(sent(b))
        return sent

    pipe.soft_zone.boundary_count = counting
    return checked


@pytest.mark.parametrize("preset", [*sorted(PRESETS), "breakwater-oldest-first"])
@pytest.mark.parametrize("name", ["long-refactor", "controls"])
def test_the_soft_zone_counts_a_boundary_as_the_request_it_makes(name, preset):
    """The search for how far a stage applies counts each boundary from the ledger, not by building
    the request shape (issue 7 item 18): the counts must be the shapes' counts. (breakwater masks every
    far observation at once since issue 41: it searches a boundary for snipping and microcompacting.)"""
    from breakwater.core.log.tokens import TokenCounter

    log = SESSIONS[name]()
    policy = POLICIES[preset].with_changes(window=12_000)
    pipe = Pipeline(policy, TokenCounter(None), mode="heuristic")
    checked = check_boundaries(pipe)
    for entry in log.entries:
        if isinstance(entry, Message) and entry.role == "assistant":
            pipe.plan()
        pipe.feed(entry)
    assert len(checked) > (10 if policy.mask_all else 20) or not (policy.snip or policy.mask or policy.microcompact)


@pytest.mark.parametrize("preset", sorted(PRESETS))
@pytest.mark.parametrize("name", sorted(SESSIONS))
def test_a_plan_s_plain_count_is_its_head_and_its_region_part_by_part(name, preset):
    """The cache-stable prefix takes the region after it from the plan's own plain heuristic count
    (issue 7 item 18): that count must be the head's and the region's as `region_tokens` counts it."""
    log = SESSIONS[name]()
    policy = PRESETS[preset].with_changes(window=12_000)
    pipe = make_pipeline(log, policy, "heuristic")
    levels = set()
    for entry in log.entries:
        if isinstance(entry, Message) and entry.role == "assistant":
            plan = pipe.plan()
            if plan.built is None and plan.n > plan.start:
                assert plan.sent_heuristic == plan.head_heuristic + region_tokens(pipe.ledger, plan, plan.start, plan.n)
                levels.add((plan.level, plan.lower, plan.boundary < plan.near_start))
        pipe.feed(entry)
    assert len(levels) > 1 or not (policy.snip or policy.mask or policy.microcompact)


@pytest.mark.parametrize("preset", sorted(PRESETS))
@pytest.mark.parametrize("name", sorted(SESSIONS))
def test_two_forms_are_told_apart_by_their_counts_as_by_their_texts(name, preset):
    """The cache-stable prefix compares two forms of a message by the ledger's counts, building them
    only when the counts agree (issue 7 item 18): the answer must be the one comparing their texts."""
    from itertools import combinations

    log = SESSIONS[name]()
    policy = PRESETS[preset].with_changes(window=12_000)
    pipe = make_pipeline(log, policy, "heuristic")
    for entry in log.entries:
        pipe.feed(entry)
    pipe.plan()
    told = 0
    for i in range(len(pipe.san.out)):
        for was, now in combinations(((0, False), (1, False), (2, False), (3, False), (2, True)), 2):
            r1, r2 = pipe.index.transform(i, *was), pipe.index.transform(i, *now)
            alike = (r1[0].content if r1 else None) == (r2[0].content if r2 else None)
            assert sent_alike(pipe.ledger, pipe.index.transform, i, was, now) == alike, (i, was, now)
            told += not alike
    assert told > 0 or not (policy.snip or policy.mask or policy.microcompact)


def bench_like(n: int, window: int):
    """The bench session's shape (bench/bench_core.py: long results, one prompt, mostly tool calls),
    shorter, at a window it overflows many times over."""
    return SessionLog({"model": "gpt-4o", "window": window}, session_messages(n, avg_tool_chars=15_000, seed=42))


NEXT_SESSIONS = {**{name: (load, 12_000) for name, load in SESSIONS.items()},
                 **{name: (lambda name=name: load_session(sample_path(name + ".jsonl")), 8_000)
                    for name in ("npm-install-flood", "nginx-error-log", "sanitizer-mess")},
                 "bench-like": (lambda: bench_like(900, 64_000), 64_000),
                 "bench-like-small-window": (lambda: bench_like(400, 16_000), 16_000),
                 # short results, which microcompacting shortens where masking does not, and a few long
                 # ones: working memory is told from the masked results past the boundary
                 **{f"short-results-{seed}": (lambda seed=seed, every=every, long=long: SessionLog(
                     {}, session_messages(600, avg_tool_chars=300, seed=seed, big_every=every, big_chars=long)), window)
                    for seed, every, long, window in ((3, 6, 2_500, 8_000), (42, 4, 1_500, 4_000))}}


# breakwater weighs each soft-zone step against the cache it breaks (issue 41): the general path plans
# every request over the soft limit then, and the short cut is held to breakwater as it was before
OLDEST_FIRST = PRESETS["breakwater"].with_changes(cache_horizon_turns=0, mask_all=False)
POLICIES = {**PRESETS, "breakwater-oldest-first": OLDEST_FIRST, "breakwater-no-snip": OLDEST_FIRST.with_changes(snip=False),
            "breakwater-no-mask": OLDEST_FIRST.with_changes(mask=False)}


def planned_next_as_general(name: str, policy_name: str, counter: str) -> list:
    """Simulate session `name`: on every turn the short cut from the kept boundary is asked, plan the
    same state through the general path too, and hold the plans and the requests equal; where it gives
    the request up, the general path must have had more to do. Returns the plans the short cut made."""
    load, window = NEXT_SESSIONS[name]
    log = load()
    pipe = make_pipeline(log, POLICIES[policy_name].with_changes(window=window), counter, "gpt-4o")
    planned, pairs = pipe.short_cuts.from_kept_boundary, []

    def next_plan(*args):
        plan = planned(*args)
        general = pipe.snapshot()
        general.short_cuts.plan = lambda *args: None
        want = general.plan()
        if plan is not None:
            pairs.append((plan, want, general))
        elif args[0] >= pipe.policy.fast_path_min_messages and not pipe.short_cuts.gated:
            # what the short cut leaves to the general path: a compaction, a search for a boundary,
            # shaping the history, or a note
            assert (want.new_compaction or want.drop_to > want.cut or want.notes
                    or general.soft_zone.kept_boundaries() != pipe.soft_zone.kept_boundaries()), want.turn
        return plan

    pipe.short_cuts.from_kept_boundary = next_plan
    taken = []
    for entry in log.entries:
        if isinstance(entry, Message) and entry.role == "assistant":
            got = pipe.plan()
            if pairs and pairs[-1][0] is got:
                _, want, general = pairs.pop()
                for f in fields(got):
                    if f.name not in ("head", "built"):
                        assert getattr(got, f.name) == getattr(want, f.name), (got.turn, f.name)
                assert got.head == want.head and got.built is None and want.built is None
                assert pipe.materialize(got) == general.materialize(want)
                taken.append(got)
        pipe.feed(entry)
    assert not pairs
    return taken


# tiktoken over the bench-like sessions' megabytes would take minutes: the heuristic runs cover them
COUNTED = [(name, counter) for name in sorted(NEXT_SESSIONS) for counter in ("heuristic", "exact")
           if counter == "heuristic" or not name.startswith("bench-like")]


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("name, counter", COUNTED)
def test_a_request_planned_from_the_kept_boundary_is_planned_as_the_general_path_plans_it(name, counter, policy):
    """Over the soft limit with nothing pending, a request is planned from the ledger's sums at the
    stage level and boundary the search would end at (issue 7 item 18): on every turn it does, the
    plan and the request must be the ones the general path makes from the same state."""
    planned_next_as_general(name, policy, counter)


def test_the_short_cut_from_the_kept_boundary_plans_every_kind_of_request():
    """The test above compares the requests the short cut planned: it must plan every kind of them."""
    taken = set()
    for name in ("bench-like", "bench-like-small-window", "short-results-3", "short-results-42"):
        for policy in POLICIES:
            taken |= {(p.level, p.lower, p.boundary < p.near_start)
                      for p in planned_next_as_general(name, policy, "heuristic")}
    assert taken >= {(1, 0, True), (2, 1, True), (2, 0, True), (3, 2, True), (3, 1, True), (2, 2, False),
                     (3, 3, False)}, taken


def test_the_short_cut_from_the_kept_boundary_plans_requests_tiktoken_counts():
    """Near the limits the short cut counts each request shape as the general path does, by tiktoken
    (issue 29 item 1): it gave those requests up, and the general path searched the soft zone again on
    every turn of a session that stays near the limits (a 20,000-message chat: 8,849 of 9,287 plans)."""
    taken = [p for name in ("short-results-3", "controls") for policy in ("breakwater-oldest-first", "seed-003")
             for p in planned_next_as_general(name, policy, "exact")]
    exact = [p for p in taken if p.counted == "exact" and p.zone_counted == "exact"]
    assert len(exact) > 50, len(exact)
    assert {p.boundary < p.near_start for p in exact} == {True, False}


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_an_exact_figure_is_tiktoken_s_count_of_the_request_sent(policy):
    """A plan counted exactly sends what its figure says: tiktoken's count of the request built from
    it on the fitted line (issue 36: ratio × visible + overhead, the count in the fit's unit), whatever the preset (working memory's own form counted by the index's
    sums, the short cut from the kept boundary measuring as the general path does). The log whole,
    nothing edited, is on the line as its heuristic count draws it, and with no usage recorded every
    figure is the heuristic's (one figure a request, whichever path counted it)."""
    checked = 0
    for log in (SESSIONS["long-refactor"](), SESSIONS["controls"]()):
        pipe = make_pipeline(log, POLICIES[policy].with_changes(window=12_000), "exact", "gpt-4o")
        for entry in log.entries:
            if isinstance(entry, Message) and entry.role == "assistant":
                plan = pipe.plan()
                if plan.counted == "exact":
                    view = plan.built or pipe.materialize(plan)
                    cal, h = pipe.meter.calibration, sum(heuristic_message(m) for m in view.messages)
                    sent = cal.apply(h) if plan.whole else \
                        cal.figure(cal.apply_exact(pipe.meter.counter.exact_messages(view.messages), h), h)
                    assert plan.sent_tokens == view.sent_tokens == sent, (plan.turn, plan.level, plan.lower)
                    checked += 1
            pipe.feed(entry)
    assert checked > 100
