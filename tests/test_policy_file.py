"""Policy files: save -> `--policy` reads back the same Policy; impossible values refused with why."""

import json
import subprocess
import sys
from dataclasses import fields, replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from breakwater.core.policy import CHOICES, PRESETS, Policy, PolicyError, load_toml, validate
from breakwater.core.policy.field_groups import OTHER, field_specs
from breakwater.core.policy.toml_file import dumps, resolve, save
from synth import session_messages, write_session


def value_strategy(name: str, default):
    if isinstance(default, bool):
        return st.booleans()
    if name == "mask_placeholder":   # free text: quotes and backslashes must survive the file
        return st.one_of(st.just("Old environment output: ({lines} lines omitted)"),
                         st.text(st.sampled_from('ab "\\\'é{}_,'), max_size=40).map(
                             lambda t: t.replace("}", " ").replace("{", "{lines}")))
    if name == "mask_exclude_tools":   # free text: tool names, comma-separated
        return st.sampled_from(["", "read_file", "read_file, bash", "str_replace_editor,memory"])
    if isinstance(default, str):
        return st.sampled_from(CHOICES[name])
    if isinstance(default, float):
        if name.endswith("_ratio"):
            return st.floats(0.01, 0.99)
        return st.floats(0, 4 * default + 10)
    if name == "window":
        return st.integers(256, 400_000)
    return st.integers(0, 4 * default + 10)


EDITABLE = [f.name for f in fields(Policy) if f.name != "preset"]


@st.composite
def valid_policies(draw):
    """A preset with a few values changed; draws that break a cross-field rule are redrawn."""
    base = PRESETS[draw(st.sampled_from(sorted(PRESETS)))]
    names = draw(st.lists(st.sampled_from(EDITABLE), max_size=6, unique=True))
    changes = {n: draw(value_strategy(n, getattr(base, n))) for n in names}
    try:
        return validate(replace(base, **changes))
    except PolicyError:
        return base


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_round_trips(tmp_path, name):
    path = save(PRESETS[name], tmp_path / f"{name}.toml")
    assert load_toml(path) == PRESETS[name]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(policy=valid_policies())
def test_random_valid_policies_round_trip(tmp_path, policy):
    path = save(policy, tmp_path / "p.toml")
    assert load_toml(path) == policy


def test_file_lists_every_value_and_marks_what_differs_from_the_preset():
    text = dumps(PRESETS["seed-001"].with_changes(window=32_000, mask_min_chars=400))
    for name in EDITABLE:
        assert f"\n{name} = " in text
    assert "window = 32000  # tokens; seed-001: 128000" in text
    assert "mask_min_chars = 400  # chars; seed-001: 200" in text
    assert "working_memory_messages = 6  # messages\n" in text


def test_simulate_policy_reads_a_saved_file_back_identically(tmp_path):
    session = write_session(tmp_path / "s.jsonl", session_messages(80, avg_tool_chars=3000, seed=3),
                            header={"window": 16_000})
    policy = PRESETS["seed-000"].with_changes(window=12_000, snip_threshold_chars=2_600)
    path = save(policy, tmp_path / "mine.toml")

    def sim(*args):
        out = subprocess.run([sys.executable, "-m", "breakwater", "simulate", str(session), "--json",
                              "--counter", "heuristic", *args], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    from_file = sim("--policy", str(path))
    from breakwater.cli.core import read_session
    from breakwater.core.simulate import simulate

    from breakwater.fidelity.loops import of_simulation

    log = read_session(session)
    sim = simulate(log, policy, counter="heuristic", window_source="policy file")
    assert from_file == {**sim.to_json(), "loops": [loop.to_json() for loop in of_simulation(sim, log)]}
    assert from_file["window"] == 12_000 and from_file["preset"] == "seed-000"


@pytest.mark.parametrize("changes, why", [
    ({"soft_ratio": 0.9}, "soft limit .* must stay below the hard limit"),
    ({"buffer_tokens": -1}, "buffer_tokens cannot be negative"),
    ({"snip_head_chars": -5}, "snip_head_chars cannot be negative"),
    ({"soft_ratio": 1.2}, "soft_ratio must be between 0 and 1"),
    ({"window": 100}, "window must be at least 256"),
    ({"snip_head_chars": 2_500}, r"snip_head_chars \+ snip_tail_chars \(2500 \+ 1000\) cannot exceed"),
    ({"working_memory_head_chars": 900}, "cannot exceed working_memory_max_chars"),
    ({"shape_keep_last_min": 30}, "shape_keep_last_min must be >= 1 and <= shape_keep_last_max"),
    ({"deep_cut": "middle"}, "deep_cut must be last-boundary, keep-turns, keep-tokens or keep-messages"),
    ({"bash_timeout_s": float("nan")}, "bash_timeout_s must be a finite number"),
])
def test_impossible_values_are_refused_saying_why(changes, why):
    before = PRESETS["breakwater"]
    with pytest.raises(PolicyError, match=why):
        before.with_changes(**changes)
    assert before == Policy()  # nothing half-applied: the policy is a value, untouched by a refused change


def test_a_file_with_an_impossible_value_is_refused_by_simulate(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('preset = "seed-001"\nwindow = 8000\nsoft_ratio = 0.95\n')
    session = write_session(tmp_path / "s.jsonl", session_messages(10, seed=1))
    out = subprocess.run([sys.executable, "-m", "breakwater", "simulate", str(session), "--policy", str(path)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "must stay below the hard limit" in out.stderr


def test_unreadable_policy_files_get_one_line(tmp_path):
    (tmp_path / "binary.toml").write_bytes(b"\xff\xfe = 1")
    with pytest.raises(PolicyError, match="not valid TOML"):
        load_toml(tmp_path / "binary.toml")
    with pytest.raises(PolicyError, match="is a directory, not a regular file"):
        load_toml(tmp_path)
    with pytest.raises(PolicyError, match="no such policy file"):
        load_toml(tmp_path / "missing.toml")


def test_save_refuses_an_unwritable_place_and_keeps_the_old_file(tmp_path):
    path = save(PRESETS["seed-003"], tmp_path / "p.toml")
    with pytest.raises(PolicyError, match="cannot write there"):
        save(PRESETS["seed-001"], tmp_path / "missing-dir" / "p.toml")
    bad = replace(PRESETS["seed-001"], window=10)  # built around validation on purpose
    with pytest.raises(PolicyError):
        save(bad, path)
    assert load_toml(path) == PRESETS["seed-003"]


def test_resolve_takes_a_preset_or_a_file(tmp_path):
    assert resolve("seed-001") == PRESETS["seed-001"]
    path = save(PRESETS["seed-000"].with_changes(window=9_000), tmp_path / "p.toml")
    assert resolve(str(path)).window == 9_000
    with pytest.raises(PolicyError, match="neither a preset .* nor a policy file"):
        resolve("seed-002")


def test_every_policy_value_has_a_group_and_presets_validate():
    specs = field_specs()
    assert sorted(s.name for s in specs) == sorted(EDITABLE)
    assert not [s.name for s in specs if s.group == OTHER]
    assert all(s.unit for s in specs if s.kind in (int, float))
    for p in PRESETS.values():
        validate(p)


def test_steps_come_back_and_typed_values_parse():
    by_name = {s.name: s for s in field_specs()}
    window = by_name["window"]
    assert window.stepped(128_000, 1) == 138_000 and window.stepped(10_000, -1) == 9_900
    assert window.stepped(window.stepped(10_000, -1), 1) == 10_000
    assert by_name["soft_ratio"].stepped(0.7, 2) == 0.72
    assert by_name["mask"].stepped(True, 1) is False
    assert by_name["deep_cut"].stepped("keep-messages", 1) == "last-boundary"
    assert window.parse("32,000") == 32_000
    assert by_name["mask"].parse("off") is False
    with pytest.raises(ValueError, match="whole number"):
        window.parse("32k")
