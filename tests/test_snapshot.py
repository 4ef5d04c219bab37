"""Pipeline.snapshot(): the replay's checkpoints. A snapshot is independent of the pipeline it
was taken from (either may be fed on without disturbing the other) and folds on to exactly the
views a fresh fold gives."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from synth import as_log, session_messages

from breakwater.cli.core import read_session, sample_path
from breakwater.core.log.message import Message
from breakwater.core.fold.pipeline import Pipeline
from breakwater.core.policy import PRESETS
from breakwater.core.stages.sanitize import SanitizedMessage, Sanitizer
from breakwater.core.log.session_log import Event, SessionLog
from breakwater.core.simulate import make_pipeline, view_at

REAL = Path(__file__).parent / "fixtures" / "real"
# shared on purpose: never changed by folding (the counter's cache maps a text to its count)
SHARED = {"policy", "counter", "summarizer"}
# one plan's scratch, rebuilt by the next plan: the containers are copied, what they hold is not
# changed in place and may be shared
SCRATCH = {"_near_sums", "_measured", "_joined"}
# caches a copy starts without: each entry is checked against the objects it was made from, and what it
# holds is made again on a miss (core/fold/index.py `_form`)
CACHES = {"_formed"}
# the meter's reader of the figures earlier runs kept (core/fold/kept_measures.py): a copy starts its own,
# over the copy's index, with nothing of the plan under way
READERS = {"kept"}


def with_controls(msgs: list[Message], window: int) -> SessionLog:
    """A session that exercises every kind of pipeline state: API usage (calibration), a pin and
    its undo, a stage trigger and its undo, and a window small enough for deep compactions."""
    entries: list = []
    for i, m in enumerate(msgs):
        if i == 30:
            entries.append(Event("pin", "pin1", {"message_id": msgs[5].id}))
        if i == 45:
            entries.append(Event("trigger", "trig1", {"stage": "mask"}))
        if i == 70:
            entries.append(Event("undo", "undo1", {"target": "trig1"}))
        if i == 95:
            entries.append(Event("undo", "undo2", {"target": "pin1"}))
        entries.append(m)
        if m.role == "assistant" and i % 3 == 0:
            entries.append(Event("usage", f"u{i}", {"prompt_tokens": 900 + 7 * i, "estimate": 1000 + 5 * i}))
    return SessionLog(header={"id": "controls", "model": "gpt-4o", "window": window}, entries=entries)


def sessions() -> dict[str, SessionLog]:
    with warnings.catch_warnings():
        out = {name: read_session(sample_path(name)) for name in ("sanitizer-mess.jsonl", "mixed-zh-en.jsonl",
                                                                  "npm-install-flood.jsonl")}
        out["codex (recorded compactions)"] = read_session(REAL / "codex" / "agentsessions_codex_coverage_small.jsonl")
    out["controls"] = with_controls(session_messages(130, avg_tool_chars=2500, seed=11), window=9000)
    return out


SESSIONS = sessions()


def mutable(value: object) -> bool:
    if isinstance(value, (Message, SanitizedMessage)):
        return False   # replaced, never changed in place, by the pipeline and the sanitizer alike
    if isinstance(value, (list, dict, set, Sanitizer, Pipeline)):
        return True
    params = getattr(type(value), "__dataclass_params__", None)
    return params is not None and not params.frozen


# the pipeline's parts (core/fold/pipeline.py): each copies itself, and reads the copies of the others
PARTS = ("san", "index", "meter", "deep", "frames", "soft_zone", "short_cuts", "prefix")


def check_copy(pipe: Pipeline, snap: Pipeline, filled: set[str]) -> None:
    parts = {id(getattr(pipe, part)): part for part in PARTS}
    for original, copy in ((pipe, snap), *((getattr(pipe, part), getattr(snap, part)) for part in PARTS
                                            if hasattr(getattr(pipe, part), "__dict__"))):
        name = type(original).__name__
        missing = set(vars(original)) - set(vars(copy))
        assert not missing, f"{name}.snapshot() does not handle {sorted(missing)}"
        for attr, value in vars(original).items():
            got = vars(copy)[attr]
            if attr in SHARED:
                assert got is value
                continue
            if attr in READERS:
                assert got is not value and got.index is snap.index and got.index is not value.index, \
                    f"{name}.{attr} is not a reader of the copy's index"
                continue
            if attr in CACHES:
                assert got is not value, f"{name}.{attr} is shared with the snapshot"
                if value:
                    filled.add(f"{name}.{attr}")
                continue
            if id(value) in parts:   # a part it reads: the copy reads the copy's (checked on its own)
                part = parts[id(value)]
                assert got is getattr(snap, part) and got is not value, f"{name}.{attr} is not the copy's {part}"
                assert part != "prefix" or got == value
                continue
            assert got == value or isinstance(value, (Sanitizer, Pipeline)), f"{name}.{attr} differs in the copy"
            if mutable(value):
                assert got is not value, f"{name}.{attr} is shared with the snapshot"
            if value:
                filled.add(f"{name}.{attr}")
            if isinstance(value, (dict, list)) and attr not in SCRATCH:
                for v, w in zip(*(x.values() if isinstance(x, dict) else x for x in (value, got))):
                    parts_of = zip(v, w) if isinstance(v, tuple) else [(v, w)]
                    assert not any(mutable(a) and a is b for a, b in parts_of), f"{name}.{attr} holds shared state"
    run, copied = pipe.san._run, snap.san._run
    assert run is None or not any(getattr(run, f) is getattr(copied, f) for f in ("parts", "calls", "sources"))


def test_snapshot_copies_every_attribute():
    """Fails when Pipeline or one of its parts gains state that snapshot() does not copy: say there how.
    The copy is checked after every entry of two sessions under every preset, until each container
    has been seen holding something."""
    filled: set[str] = set()
    for name in ("controls", "sanitizer-mess.jsonl"):
        log = SESSIONS[name]
        # the presets, and one that keeps the last observations (docs/policies/complexity-trap.toml)
        for policy in [*PRESETS.values(), PRESETS["breakwater"].with_changes(mask_keep_observations=10)]:
            pipe = make_pipeline(log, policy.with_changes(window=log.header.get("window") or policy.window))
            for entry in log.entries:
                if isinstance(entry, Message) and entry.role == "assistant":
                    pipe.plan()
                pipe.feed(entry)
                check_copy(pipe, pipe.snapshot(), filled)
    objects = [pipe, *(getattr(pipe, part) for part in PARTS if hasattr(getattr(pipe, part), "__dict__"))]
    parts = {id(o) for o in objects}
    containers = {f"{type(o).__name__}.{a}" for o in objects for a, v in vars(o).items()
                  if (isinstance(v, (list, dict, set)) or mutable(v)) and id(v) not in parts}
    assert containers <= filled, f"never seen holding anything: {sorted(containers - filled)}"


def fold_to(pipe: Pipeline, entries: list, i: int, turn: int):
    """Feed `pipe` (which has planned up to request pipe.turn, entries[i] next) on to request `turn`."""
    while i < len(entries):
        entry = entries[i]
        if isinstance(entry, Message) and entry.role == "assistant":
            if pipe.turn + 1 == turn:
                break
            pipe.plan()
        pipe.feed(entry)
        i += 1
    return pipe.view()[0]


@pytest.mark.parametrize("preset", list(PRESETS))
@pytest.mark.parametrize("name", list(SESSIONS))
def test_snapshot_folds_on_like_a_fresh_fold(name, preset):
    log = SESSIONS[name]
    policy = PRESETS[preset].with_changes(window=log.header.get("window") or PRESETS[preset].window)
    entries = log.entries
    pipe = make_pipeline(log, policy)
    snaps: dict[int, tuple[Pipeline, int]] = {}
    for i, entry in enumerate(entries):
        if isinstance(entry, Message) and entry.role == "assistant":
            snaps[pipe.turn + 1] = (pipe.snapshot(), i)
            pipe.plan()
        pipe.feed(entry)
    snaps[pipe.turn + 1] = (pipe.snapshot(), len(entries))
    pipe.plan()   # the original goes on after every snapshot was taken: none of them may notice
    last = pipe.turn + 1
    fresh = {k: view_at(log, policy, k) for k in range(1, last + 1)}
    for turn, (snap, i) in snaps.items():
        ahead = min(turn + 3, last)
        assert fold_to(snap.snapshot(), entries, i, ahead) == fresh[ahead], (turn, ahead)
        assert fold_to(snap, entries, i, turn) == fresh[turn], turn   # untouched by its copy's folding
