"""Every real transcript (copies in tests/fixtures/real, see its SOURCES.md) is detected by its
content, imports with only the warnings its own quirks call for, simulates and gives valid
requests at every turn, and round-trips through the native format."""

import json
import shutil
import subprocess
import sys

import pytest

from breakwater.core.log.message import Message, ToolCall
from breakwater.core.fold.pipeline import Pipeline
from breakwater.core.policy import preset
from breakwater.core.log.session_log import Event, load_native
from breakwater.core.log.validity import api_problems
from breakwater.formats import detect_format, load_session, load_sessions
from breakwater.cli.formats import write_native
from support.transcripts import REAL, every_view_problems

# file -> (format, sessions, warnings per session); each warning is a quirk of that file
EXPECTED = {
    "claude-code/agenticprimer_v2.0.76_subagent_a0294d5.jsonl": ("claude-code", [0]),
    # a boundary with no summary (twice), an unknown 'fallback' block; an id-less call and result,
    # a second result for it, a summary without its boundary (the coverage file is hand-assembled)
    "claude-code/agentsessions_claude_coverage_small.jsonl": ("claude-code", [3, 4]),
    "claude-code/ccl_v2.0.55_a7da6a22.jsonl": ("claude-code", [0]),
    # ids "[trimmed for fixture]": a result whose call was trimmed away, call ids used twice
    "codex/agentsessions_codex_coverage_small.jsonl": ("codex", [2]),
    "mini-swe-agent/pr854_deepseek-v4-flash__astropy__astropy-12907.traj.json": ("mini-swe-agent", [0]),
    "openai-chat/openhands-sdk_fncall-llm-message.json": ("openai", [0]),
    "openai-chat/openhands-sdk_llm-log_claude-sonnet-4_1757015046.707.json": ("openai", [0]),
    # an observation whose action is not in the (cut-down) file
    "openhands/openhands-sdk-v1_goal_events.jsonl": ("openhands", [1]),
    "openhands/runtime_trajs_basic_gui_mode.json": ("openhands", [0]),
    "pi/agentsessions_pi_v3_fixture_model_small.jsonl": ("pi", [0]),
    "pi/large-session.jsonl": ("pi", [0]),
    # the demonstration reuses one call id for two calls
    "swe-agent/marshmallow-1867__function_calling_replace_from_source.traj": ("swe-agent", [1]),
}
FILES = sorted(p for p in REAL.glob("*/*") if p.name != "SOURCES.md")


def test_every_real_fixture_is_covered():
    assert sorted(str(p.relative_to(REAL)) for p in FILES) == sorted(EXPECTED)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_detected_by_content_with_only_the_expected_warnings(path, tmp_path):
    fmt, warnings = EXPECTED[str(path.relative_to(REAL))]
    renamed = tmp_path / "transcript.data"   # the name says nothing: detection reads the content
    shutil.copy(path, renamed)
    assert detect_format(renamed) == fmt
    logs = load_sessions(path)
    assert [len(log.issues) for log in logs] == warnings, [str(i) for log in logs for i in log.issues]
    assert all(log.source_format == fmt for log in logs)


READERS = ("breakwater.formats.builder", "breakwater.formats.openai_chat", "breakwater.formats.claude_code",
           "breakwater.formats.codex", "breakwater.formats.openhands", "breakwater.formats.pi",
           "breakwater.formats.swe_agent")


@pytest.mark.parametrize("header", [{"type": "session", "id": "s", "created": "2026-12-01T00:00:00+00:00"},
                                    {"type": "session", "id": "s", "version": 1, "model": "gpt-4o"}],
                         ids=["created", "written-by-another-tool"])
def test_a_native_session_is_read_without_importing_another_formats_reader(header, tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps(header) + "\n" + json.dumps({"type": "message", "role": "user", "content": "hi"}) + "\n")
    code = (f"import sys; from breakwater.formats import load_session; log = load_session({str(path)!r}); "
            f"print(log.source_format, len(log.entries), [m for m in {READERS!r} if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split(None, 2) == ["native", "1", "[]\n"]


@pytest.mark.parametrize("first, fmt", [
    ({"type": 5, "sessionId": "s", "parentUuid": None}, "claude-code"),
    ({"type": ["summary"], "parentUuid": "p", "uuid": "u"}, "claude-code"),
    ({"type": {"summary": 1}, "sessionId": "s"}, "native"),
    ({"type": ["response_item"], "payload": {}}, "native"),
    ({"type": "response_item", "payload": None}, "codex"),
    ({"type": "", "sessionId": "s"}, "native"),
])
def test_a_line_type_that_is_not_a_string_names_no_format(first, fmt, tmp_path):
    path = tmp_path / "first.jsonl"
    path.write_text(json.dumps(first) + "\n")
    assert detect_format(path) == fmt


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_request_of_every_session_is_valid(path):
    for log in load_sessions(path):
        assert every_view_problems(log) == []


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_simulate_json_runs_on_the_file_itself(path):
    r = subprocess.run([sys.executable, "-m", "breakwater", "simulate", str(path), "--json", "--counter",
                        "heuristic", "--window", "32000"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert len(out["turns"]) == load_session(path).turn_count() > 0
    _, warnings = EXPECTED[str(path.relative_to(REAL))]
    several = 1 if len(warnings) > 1 else 0   # and one saying which of the file's sessions this is
    assert r.stderr.count("warning:") == warnings[0] + several, r.stderr


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_native_round_trip_keeps_every_entry(path, tmp_path):
    for i, log in enumerate(load_sessions(path)):
        out = tmp_path / f"{i}.jsonl"
        with open(out, "w", encoding="utf-8") as fh:
            write_native(log, fh)
        assert detect_format(out) == "native"
        back = load_native(out)
        assert [e.to_record() for e in back.entries] == [e.to_record() for e in log.entries]
        assert back.header["imported"]["format"] == log.source_format


def test_a_recorded_compaction_right_after_an_unanswered_call_replaces_everything_before_it():
    pipe = Pipeline(preset("breakwater"))
    pipe.feed_all([Message("m0", "user", "go", turn=1),
                   Message("m1", "assistant", "", (ToolCall("c1", "bash", "{}"),), turn=1),
                   Event("compaction", "e0", {"trigger": "recorded", "cut_id": None, "summary": "went"})])
    view, _ = pipe.view()   # the aborted call is stripped; the cut must still fall inside the history
    assert api_problems(view.to_api()) == [] and "went" in view.to_api()[-1]["content"]
