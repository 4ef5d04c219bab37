"""`simulate --json` streams its turns (issue 8 item 9): the text is exactly the one JSON object it
printed before, built a turn at a time, so that half a million turns never sit in memory."""

import io
import json
import subprocess
import sys

import pytest

from breakwater.cli.core import sample_path
from breakwater.core.policy import PRESETS, preset
from breakwater.core.log.session_log import SessionLog
from breakwater.core.simulate import JsonWriter, simulate
from breakwater.fidelity.loops import of_simulation
from breakwater.formats import load_session
from synth import session_messages, write_session


def streamed(log, policy, counter="heuristic", batch=None):
    buf = io.StringIO()
    writer = JsonWriter(buf)
    writer.BATCH = batch or writer.BATCH
    sim = simulate(log, policy, counter, "gpt-4o", on_turn=writer.turn)
    writer.finish(sim)
    return buf.getvalue(), sim


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_the_streamed_text_is_the_whole_object_dumped_at_once(name):
    log = load_session(sample_path("long-refactor.jsonl"))
    policy = preset(name).with_changes(window=16_000)
    text, sim = streamed(log, policy, "exact", batch=7)   # turns written in batches, the last one short
    kept = simulate(log, policy, "exact", "gpt-4o")
    assert text == json.dumps(kept.to_json(), ensure_ascii=False) + "\n"
    assert sim.turns == [] and sim.turn_count == len(kept.turns) > 100  # the turns went to the writer
    assert (sim.billed_raw, sim.billed_sent, sim.saved) == (kept.billed_raw, kept.billed_sent, kept.saved)
    assert json.loads(text)["totals"]["compactions"] == len(kept.compactions) > (0 if policy.deep_compact else -1)


def test_a_session_without_turns_is_still_one_object():
    log = SessionLog({"model": "gpt-4o"}, session_messages(2, seed=1)[:1])
    text, _ = streamed(log, preset("breakwater"))
    data = json.loads(text)
    assert data["turns"] == [] and data["totals"]["turns"] == 0
    assert text == json.dumps(simulate(log, preset("breakwater"), "heuristic").to_json(), ensure_ascii=False) + "\n"


def test_the_cli_prints_the_same_bytes_as_before(tmp_path):
    path = write_session(tmp_path / "s.jsonl", session_messages(300, avg_tool_chars=4000, seed=7),
                         header={"window": 8_000, "model": "gpt-4o"})
    out = subprocess.run([sys.executable, "-m", "breakwater", "simulate", str(path), "--json"],
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    log = load_session(path)
    sim = simulate(log, preset("breakwater").with_changes(window=8_000), "exact", "gpt-4o", window_source="session")
    loops = [loop.to_json() for loop in of_simulation(sim, log)]
    assert out.stdout == json.dumps({**sim.to_json(), "loops": loops}, ensure_ascii=False) + "\n"
    assert sim.compaction_turns == [t.turn for t in sim.turns if t.compaction] != []


def test_a_full_disk_midway_is_one_line_not_a_traceback_at_exit(tmp_path):
    """Past the first batch the output goes out a batch at a time: a write that fails is still
    reported by the command (one line, exit 70), with nothing left buffered to fail again at exit."""
    lines = [json.dumps({"type": "session", "id": "t", "version": 1, "model": "gpt-4o"})]
    lines += [json.dumps({"type": "message", "id": f"m{i}", "role": "user" if i % 2 == 0 else "assistant",
                          "content": f"msg {i}"}) for i in range(4 * JsonWriter.BATCH + 10)]
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with open("/dev/full", "w") as full:
        out = subprocess.run([sys.executable, "-m", "breakwater", "simulate", str(path), "--json", "--counter",
                              "heuristic"], stdout=full, stderr=subprocess.PIPE, text=True, timeout=180,
                             env={"PATH": "/usr/bin:/bin", "BREAKWATER_CACHE_DIR": str(tmp_path / "cache")})
    assert out.returncode == 70, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "No space left on device" in out.stderr


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_each_turn_s_text_is_what_json_dumps_writes(name):
    """`TurnStats.json_text` builds the text by hand for speed: it must be json.dumps's, byte for byte,
    with API figures, decided and recorded compactions, edits of every kind and non-ASCII ids."""
    from pathlib import Path

    real = Path(__file__).parent / "fixtures" / "real" / "codex" / "agentsessions_codex_coverage_small.jsonl"
    seen = set()
    for log in (load_session(sample_path("long-refactor.jsonl")), load_session(real),
                load_session(sample_path("mixed-zh-en.jsonl"))):
        for window in (6_000, 30_000):
            for t in simulate(log, preset(name).with_changes(window=window), "exact", "gpt-4o").turns:
                assert t.json_text() == json.dumps(t.to_json(), ensure_ascii=False)
                seen.update(k for k, v in t.to_json().items() if v)
                seen.update(t.edits)
    odd = simulate(load_session(sample_path("long-refactor.jsonl")), preset(name), "heuristic").turns[3]
    odd.message_id = 'm"1\\\n连接'
    assert odd.json_text() == json.dumps(odd.to_json(), ensure_ascii=False)
    assert {"api_tokens", "compaction", "compaction_source", "recorded_compaction", "cache", "cache_raw"} <= seen


def test_a_turn_s_text_with_every_optional_field_is_what_json_dumps_writes():
    """The fields after the edits are written by hand too (a turn of a session naming its model carries
    its cache figures: json.dumps was a quarter of simulate's time on a million tiny messages)."""
    from breakwater.core.log.prompt_cache import RequestCache
    from breakwater.core.simulate import TurnStats

    cold = RequestCache(900, 0, 0, 900, 0, 0.00225, 0.0, True, True, 400.5, False)
    again = RequestCache(1000, 800, 850, 0, 37, 0.0012345678, 1.23456789e-05, False, False, None, True)
    for billed in (None, 1000, True):
        for cached, written, over in ((None, None, False), (512, 0, True)):
            for cache, cost in ((None, None), (cold, 0.1), (again, 3e-07)):
                t = TurnStats(4, "m\u8fde4", 1200, 1100, 1000, "hard", "exact", "estimate", "snip", {"snipped": 2},
                              api_tokens=1010 if billed else None, compaction="c1" if cost else None,
                              recorded_compaction="r\"1" if cache is cold else None,
                              fits=True, stable_prefix_tokens=640,
                              compaction_source="decided" if cost else None, billed_tokens=billed,
                              billed_cached=cached, cost_raw=cost and cost * 2, cost_sent=cost, cache=cache,
                              cache_raw=cold if cache else None, billed_cache_write=written,
                              recorded_over_window=over)
                assert t.json_text() == json.dumps(t.to_json(), ensure_ascii=False)
    t.cost_raw, t.cost_sent = None, float("inf")   # no simulation writes these: json.dumps's text all the same
    assert t.json_text() == json.dumps(t.to_json(), ensure_ascii=False)


def test_a_turn_counting_the_same_edits_in_another_order_writes_them_in_its_own():
    """Consecutive turns reuse the text of the same edits: the order they were counted in is part of it."""
    from breakwater.core.simulate import TurnStats

    def turn(edits):
        return TurnStats(7, "m7", 10, 10, 10, "soft", "estimate", "estimate", "microcompact", edits)

    for edits in ({"summarized": 5, "merged": 2}, {"merged": 2, "summarized": 5}, {"merged": 2, "summarized": 5},
                  {}, {"merged": 2}, {"merged": 3}):
        t = turn(edits)
        assert t.json_text() == json.dumps(t.to_json(), ensure_ascii=False)


def test_consecutive_turns_differing_in_one_shared_field_write_their_own():
    """The text around the numbers is reused while zone, counting, fits, stage and edits repeat."""
    from breakwater.core.simulate import TurnStats

    fields = {"zone": "soft", "counted": "estimate", "zone_counted": "estimate", "level": "microcompact",
              "edits": {"merged": 2}, "fits": True}
    changes = [{}, {"zone": "hard"}, {}, {"counted": "exact"}, {"zone_counted": "exact"}, {"fits": False}, {},
               {"level": "none"}, {"edits": {}}, {}, {"edits": {"merged": 2}}]
    for k, change in enumerate(changes):
        t = TurnStats(k, f"m{k}", 10 + k, 9, 8, stable_prefix_tokens=k, **{**fields, **change})
        assert t.json_text() == json.dumps(t.to_json(), ensure_ascii=False), change
