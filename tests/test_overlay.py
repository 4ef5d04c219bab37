"""Overlays: pins, triggers and undos made on a recording live beside it and replay with it."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

from breakwater.cli.core import sample_path
from breakwater.core.overlay import OverlayFile, apply_overlay, overlay_path, position_of_turn
from breakwater.core.policy import preset
from breakwater.core.simulate import simulate, view_at
from breakwater.formats import load_session


def _copy(tmp_path: Path, name: str = "long-refactor.jsonl") -> Path:
    dst = tmp_path / name
    shutil.copy(sample_path(name), dst)
    return dst


def _edited(view, kind: str) -> list[str]:
    return [e.message_id for e in view.edits if e.kind == kind]


def test_a_pin_takes_effect_from_its_turn_and_the_recording_is_untouched(tmp_path):
    session = _copy(tmp_path)
    before = hashlib.sha256(session.read_bytes()).hexdigest()
    log = load_session(session)
    policy = preset("breakwater").with_changes(window=32000)
    last = log.turn_count()
    view = view_at(log, policy, last, counter="heuristic")
    compacted = [e.message_id for e in view.edits if e.kind in ("masked", "microcompacted", "snipped")]
    assert compacted, "the sample must have compacted messages at its last turn"
    target = compacted[0]

    overlay = OverlayFile(overlay_path(session))
    at = position_of_turn(log, last)
    overlay.add("pin", at, message_id=target)
    pinned = overlay.apply(log)

    after_view = view_at(pinned, policy, last, counter="heuristic")
    assert target not in [e.message_id for e in after_view.edits if e.kind != "merged"]
    raw = next(m for m in log.messages if m.id == target)
    assert any(m.content == raw.content for m in after_view.messages)
    # the turn before the pin was made is what it was
    earlier = view_at(pinned, policy, last - 1, counter="heuristic")
    assert earlier.edits == view_at(log, policy, last - 1, counter="heuristic").edits
    assert hashlib.sha256(session.read_bytes()).hexdigest() == before
    assert overlay_path(session).name == "long-refactor.jsonl.overlay.jsonl"


def test_an_overlay_is_read_back_when_reopened_and_undo_cancels_a_trigger(tmp_path):
    session = _copy(tmp_path)
    log = load_session(session)
    policy = preset("breakwater").with_changes(window=128000)
    k = 5
    plain = simulate(log, policy, counter="heuristic")
    first = OverlayFile(overlay_path(session))
    trig = first.add("trigger", position_of_turn(log, k), stage="mask")
    triggered = simulate(first.apply(log), policy, counter="heuristic")
    assert triggered.turns[k - 1].edits.get("masked", 0) > plain.turns[k - 1].edits.get("masked", 0)
    assert triggered.turns[k - 2].edits == plain.turns[k - 2].edits

    second = OverlayFile(overlay_path(session))  # a new workbench opening the same recording
    assert [e.id for e in second.events] == [trig.id]
    second.add("undo", position_of_turn(log, k + 3), target=trig.id)
    undone = simulate(second.apply(log), policy, counter="heuristic")
    assert undone.turns[k - 1].edits == triggered.turns[k - 1].edits
    assert undone.turns[k + 2].edits == plain.turns[k + 2].edits


def test_bad_overlay_lines_are_reported_by_number_and_the_rest_applies(tmp_path):
    session = _copy(tmp_path)
    path = overlay_path(session)
    good = {"type": "trigger", "id": "o00002", "at": 10, "stage": "snip"}
    path.write_text("\n".join([
        "{broken",
        json.dumps({"type": "config", "id": "o00001", "at": 3, "window": 9}),
        json.dumps(good),
        json.dumps({"type": "pin", "id": "o00003", "at": -1, "message_id": "m00001"}),
        json.dumps({"type": "undo", "id": "o00004", "at": 4}),
        json.dumps({"type": "compaction", "id": "o00005", "at": 4, "cut_id": "m00003"}),
    ]) + "\n")
    overlay = OverlayFile(path)
    assert [e.id for e in overlay.events] == ["o00002"]
    assert [i.line for i in overlay.issues] == [1, 2, 4, 5, 6]
    assert "not 'config'" in overlay.issues[1].reason and "needs \"summary\"" in overlay.issues[4].reason
    merged = overlay.apply(load_session(session))
    assert merged.entries[10].id == "o00002"


def test_positions_past_the_end_append_and_same_positions_keep_file_order(tmp_path):
    session = _copy(tmp_path, "sanitizer-mess.jsonl")
    log = load_session(session)
    overlay = OverlayFile(overlay_path(session))
    a = overlay.add("pin", 2, message_id="m00001")
    b = overlay.add("unpin", 2, message_id="m00001")
    c = overlay.add("trigger", 10**9, stage="snip")
    merged = apply_overlay(log, overlay.events)
    ids = [e.id for e in merged.entries]
    assert ids.index(a.id) == 2 and ids.index(b.id) == 3 and ids[-1] == c.id
    assert len(merged.entries) == len(log.entries) + 3
    assert len(log.entries) == len(load_session(session).entries)


def test_simulate_overlay_on_the_command_line(tmp_path):
    session = _copy(tmp_path)
    log = load_session(session)
    overlay = OverlayFile(overlay_path(session))
    overlay.add("trigger", position_of_turn(log, 12), stage="microcompact")

    def run(*extra: str) -> dict:
        out = subprocess.run([sys.executable, "-m", "breakwater", "simulate", str(session), "--json",
                              "--counter", "heuristic", "--window", "128000", *extra],
                             capture_output=True, text=True, check=True)
        return json.loads(out.stdout)

    plain, with_overlay = run(), run("--overlay", str(overlay.path))
    assert plain["turns"][11]["edits"].get("microcompacted", 0) == 0
    assert with_overlay["turns"][11]["edits"].get("microcompacted", 0) > 0
    assert with_overlay["turns"][10] == plain["turns"][10]

    missing = subprocess.run([sys.executable, "-m", "breakwater", "simulate", str(session),
                              "--overlay", str(tmp_path / "nope.jsonl")], capture_output=True, text=True)
    assert missing.returncode != 0 and "no such file" in missing.stderr and "Traceback" not in missing.stderr


# -- issue 27 item 9 -----------------------------------------------------------------------------------
import pytest  # noqa: E402


@pytest.mark.parametrize("line", [
    '{"type":"compaction","id":"o1","at":1,"summary":"x","covered":"lots"}',
    '{"type":"compaction","id":"o1","at":1,"summary":"x","covered":[1,2]}',
    '{"type":"compaction","id":"o1","at":1,"summary":"x","tokens_before":1e999}',
    '{"type":"compaction","id":"o1","at":1,"summary":"x","tokens_before":NaN}',
    '{"type":"compaction","id":"o1","at":1,"summary":"x","tokens_before":"many"}',
    '{"type":"compaction","id":"o1","at":1,"summary":"x","cut_id":["m1"]}',
    '[{"type":"pin"}]',
])
def test_a_bad_overlay_line_is_reported_and_skipped(tmp_path, line):
    session = _copy(tmp_path)
    overlay = tmp_path / "bad.overlay.jsonl"
    good = '{"type":"pin","id":"o2","at":3,"message_id":"m00002"}'
    overlay.write_text(line + "\n" + good + "\n")
    done = subprocess.run([sys.executable, "-m", "breakwater", "simulate", str(session), "--overlay", str(overlay)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and f"{overlay}:1" in done.stderr, done.stderr


def test_two_writers_on_one_overlay_never_share_an_id(tmp_path):
    overlay = tmp_path / "s.jsonl.overlay.jsonl"
    code = ("import sys\nfrom breakwater.core.overlay import OverlayFile\nf = OverlayFile(sys.argv[1])\n"
            "for i in range(150):\n    f.add('pin', i, message_id=f'm{sys.argv[2]}{i}')\n")
    writers = [subprocess.Popen([sys.executable, "-c", code, str(overlay), str(w)]) for w in range(2)]
    assert [w.wait(120) for w in writers] == [0, 0]
    lines = [json.loads(x) for x in overlay.read_text().splitlines()]
    assert len(lines) == 300 and len({x["id"] for x in lines}) == 300


def test_removing_from_an_overlay_writes_through_no_link_a_tool_planted(tmp_path):
    # a command the agent ran may have planted links beside a session it can write near (issue 27
    # item 1): the removal's temporary file and the overlay itself are never written through one
    session = _copy(tmp_path)
    overlay = OverlayFile(overlay_path(session))
    pin = overlay.add("pin", 10, message_id="m00003")
    overlay.add("pin", 12, message_id="m00004")
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    for name in (overlay.path.name + ".tmp", f".{overlay.path.name}.tmp"):
        (overlay.path.parent / name).symlink_to(victim)
    overlay.remove([pin.id])
    assert victim.read_text() == "precious\n"
    assert [ev.get("message_id") for ev in OverlayFile(overlay.path).events] == ["m00004"]
    overlay.path.rename(tmp_path / "moved")
    overlay.path.symlink_to(victim)
    try:
        overlay.remove(["o00002"])
    except OSError as exc:
        assert "symbolic link" in str(exc)
    assert victim.read_text() == "precious\n"
