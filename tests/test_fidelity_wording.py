"""Facts, round two (issue 36, items 9-11): wording does not decide a verdict, a fact's parts are
found together and a failure needs its failure marker, and the facts of real transcripts are the
user's task, the errors the agent hit and the files and commands of every agent's own tools.

Built on the real transcripts in tests/fixtures/real (copies of the shared fixtures), and on one
more real SWE-agent run with text actions (tests/fixtures/more-real, its source in SOURCES.md there)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_fidelity_facts import MINI, REAL, call, carried, session

from breakwater.core.log.message import Message
from breakwater.core.log.session_log import SessionLog
from breakwater.fidelity.probes import extract
from breakwater.formats import load_session

FIXTURES = REAL.parent


# -- item 9: every common phrasing of an exit status and of a command list ----------------------------
def pip_session(code: int) -> SessionLog:
    msgs = [Message("u", "user", "Install the three dependencies of the project please.", turn=1)]
    for k, pkg in enumerate(("asgiref", "pytz", "sqlparse")):
        msgs += [Message(f"a{k}", "assistant", "", (call(f"c{k}", "bash", command=f"pip install {pkg} -q"),),
                         turn=k + 1),
                 Message(f"t{k}", "tool", f"<returncode>{code}</returncode>", tool_call_id=f"c{k}", turn=k + 2,
                         meta={"exit_code": code})]
    return session(*msgs)


@pytest.mark.parametrize("said", [
    "Installed with `pip install asgiref -q`, `pip install pytz -q` and `pip install sqlparse -q`, each exiting "
    "with code 0.",
    "`pip install asgiref -q`, `pip install pytz -q`, `pip install sqlparse -q` → exit 0",
    "Ran pip install asgiref -q, pip install pytz -q and pip install sqlparse -q (exit code 0 each).",
    "pip install asgiref -q, pip install pytz -q and pip install sqlparse -q all exited 0.",
    "pip install asgiref -q / pip install pytz -q / pip install sqlparse -q: all returned 0",
    "pip install asgiref -q, pip install pytz -q and pip install sqlparse -q succeeded.",
    "Installed asgiref, pytz and sqlparse (`pip install asgiref -q`, `pip install pytz -q`, `pip install sqlparse "
    "-q`); every install exited with status 0.",
])
def test_every_common_phrasing_of_a_successful_command_list_keeps_each_command(said):
    probes = [p for p in extract(pip_session(0)) if p.kind == "command"]
    assert len(probes) == 3
    assert carried(probes, said) == {p.text for p in probes}


@pytest.mark.parametrize("said", [
    "pip install asgiref -q, pip install pytz -q and pip install sqlparse -q failed with status 1.",
    "pip install asgiref -q, pip install pytz -q and pip install sqlparse -q → exit 1",
    "pip install asgiref -q, pip install pytz -q and pip install sqlparse -q each exited with code 1",
    "pip install asgiref -q, pip install pytz -q and pip install sqlparse -q returned 1",
])
def test_every_common_phrasing_of_a_failed_command_list_keeps_each_command(said):
    probes = [p for p in extract(pip_session(1)) if p.kind == "command"]
    assert carried(probes, said) == {p.text for p in probes}
    # and a status the other way round is not the fact
    assert carried(probes, said.replace("1", "0").replace("failed", "succeeded")) == set()


# A summary of the first eleven turns of the real mini-swe-agent run, written by hand as a summary
# model writes one: its own words, its own order, commands quoted loosely, statuses in prose, each
# sentence on one line (models do not hard-wrap their prose; a fact's parts are found in one line).
MINI_ELEVEN = """## Goal
Fix astropy's `separability_matrix`, which does not compute separability correctly for nested CompoundModels (e.g. `m.Pix2Sky_TAN() & cm` where cm is itself compound).

## Constraints
- Do not modify tests or configuration files (pyproject.toml, setup.cfg, etc.).
- Every response must include at least one bash tool call.
- Always use non-interactive flags (-y, -f) for commands.
- Avoid interactive tools like vi or nano, or anything that requires user input.
- Once the work is completed, submit the changes as a git patch.
- Run `git diff -- path/to/file1 path/to/file2 > patch.txt`, listing only the source files modified.
- Do not commit the changes.
- The patch must only contain changes to the specific source files modified to fix the issue.
- Do not submit file creations or changes to any of the following files (tests, configuration).
- Inspect patch.txt to confirm it only contains the intended changes, with headers showing `--- a/` and `+++ b/` paths.

## Progress
- Located the module: `find . -path "*/separable*" -type f` in /testbed gave astropy/modeling/separable.py (exit code 0).
- Read astropy/modeling/separable.py with `cat` (exited 0): the bug is in `_cstack`, which sets the right block of a nested compound model to 1 instead of its own matrix.
- Tried `pip install -e .`, `pip install erfa` and `pip install astropy-iers-data`, each exiting with code 0 because the output was piped to tail; the editable build of astropy failed and erfa has no matching distribution.
- Astropy cannot be imported (ModuleNotFoundError: No module named 'erfa'), and `python -c "import astropy; print(astropy.__version__)"` failed with status 1.
- Searching for erfa with `find / -name "erfa*" -type f` succeeded but found only astropy/coordinates/erfa_astrom.py and astropy/units/quantity_helper/erfa.py, no compiled erfa.
- A second search, `find / -name "erfa*.so" -o -name "erfa*.py"`, exited 0 with the same two files.

## Next steps
- Test `_cstack` without importing the whole package, then fix the right block.
"""


def mini_eleven_probes():
    log = load_session(MINI)
    ids = [m.id for m in log.messages]
    last = ids.index([m.id for m in log.messages if m.role == "assistant"][10]) + 1   # its result too
    return [p for p in extract(log) if ids.index(p.message_id) <= last]


def test_a_faithful_paraphrase_of_eleven_turns_of_a_real_run_scores_at_least_095():
    probes = mini_eleven_probes()
    assert {p.kind for p in probes} >= {"goal", "constraint", "command", "error", "file-read"}
    kept = carried(probes, MINI_ELEVEN)
    lost = [p.text for p in probes if p.text not in kept]
    assert len(kept) / len(probes) >= 0.95, lost


# -- item 10: a fact's parts together, a failure with its marker ---------------------------------------
AGG = ("Traceback (most recent call last):\n  File \"report.py\", line 4, in <module>\n"
       "    from django.db.models.functions import Count, Max\n"
       "AttributeError: module 'django.db.models.functions' has no attribute 'Max'\n[exit code: 1]")
FAILED = ("E       assert 41 == 42\n============ short test summary info ============\n"
          "FAILED tests/test_report.py::test_monthly_totals\n1 failed, 12 passed in 0.4s\n[exit code: 1]")


def failed_session(output: str, command: str) -> SessionLog:
    return session(Message("u", "user", "Make the monthly report script work again.", turn=1),
                   Message("a", "assistant", "", (call("c1", "bash", command=command),), turn=1),
                   Message("t", "tool", output, tool_call_id="c1", turn=2))


def test_an_error_is_not_kept_by_its_parts_in_two_sentences():
    [error] = [p for p in extract(failed_session(AGG, "python report.py")) if p.kind == "error"]
    decoy = ("The AttributeError came from report.py importing `Count` from the wrong module, "
             "django.db.models.functions.\nThe attribute `Max` is used later for the totals.")
    assert carried([error], decoy) == set()
    kept = ("report.py failed: AttributeError, module django.db.models.functions has no attribute Max "
            "(it lives in django.db.models).")
    assert carried([error], kept) == {error.text}


def test_a_failing_test_is_kept_only_with_its_failure():
    errors = [p for p in extract(failed_session(FAILED, "pytest -q")) if p.kind == "error"]
    test = next(p for p in errors if p.text.startswith("FAILED"))
    assert carried([test], "tests/test_report.py::test_monthly_totals passes now, after the fix.") == set()
    kept = "tests/test_report.py::test_monthly_totals failed (assert 41 == 42)"
    assert carried([test], kept) == {test.text}


DECOYS = [
    # the words of the facts, never the facts: a status the other way, parts a sentence apart
    "`pip install asgiref -q` was skipped. Exit code 0 came from an unrelated `ls`.",
    "tests/test_report.py::test_monthly_totals is green. Nothing is broken today.",
    "AttributeError is a common Python error. The module django.db.models.functions has Max? No, it has Count.",
    "The AttributeError came from report.py importing `Count` from the wrong module, django.db.models.functions.\n"
    "The attribute `Max` is used later for the totals.",
    "tests/test_report.py::test_monthly_totals passes now, after the fix.",
]


def decoy_facts():
    probes = [p for p in extract(pip_session(0)) if p.kind == "command"]
    probes += [p for p in extract(failed_session(AGG, "python report.py")) if p.kind == "error"]
    probes += [p for p in extract(failed_session(FAILED, "pytest -q")) if p.kind == "error"]
    return probes


def test_decoys_keep_no_fact():
    facts = decoy_facts()
    assert len(facts) == 5
    for decoy in DECOYS:
        assert carried(facts, decoy) == set(), decoy


# -- item 11: the facts of real transcripts ----------------------------------------------------------
CCL = REAL / "claude-code" / "ccl_v2.0.55_a7da6a22.jsonl"
SWE_TEXT = FIXTURES / "more-real" / "swe-agent" / "marshmallow-1867__default_text_actions.traj"
ZH = Path(__file__).resolve().parents[1] / "sample_sessions" / "mixed-zh-en.jsonl"


def edited_copy(src: Path, dest: Path, edit) -> Path:
    """A copy of a real JSONL transcript with `edit(obj) -> [obj, ...]` applied to each line."""
    out = []
    for line in src.read_text().splitlines():
        out += [json.dumps(o) for o in edit(json.loads(line))]
    dest.write_text("\n".join(out) + "\n")
    return dest


def test_a_claude_code_goal_is_the_users_task_not_a_hooks_status_line(tmp_path):
    first = []

    def hook_first(obj):
        if obj.get("type") == "user" and not first:
            first.append(obj)
            hook = {"type": "attachment", "uuid": "hook-1", "parentUuid": obj.get("parentUuid"),
                    "sessionId": obj.get("sessionId"), "timestamp": obj.get("timestamp"),
                    "attachment": {"type": "hook_additional_context", "hookName": "SessionStart:startup",
                                   "content": "clmail 6.0.10 session registered"}}
            return [hook, obj]
        return [obj]

    log = load_session(edited_copy(CCL, tmp_path / "hooked.jsonl", hook_first))
    assert any((m.meta or {}).get("attachment") == "hook_additional_context" for m in log.messages)
    probes = extract(log)
    assert [p.text for p in probes if p.kind == "goal"] == [
        "It's been a while - I see that I have pending changes, examine them, add and commit (i.e., including "
        "unknown files)."]
    assert not [p for p in probes if "clmail" in p.text]


def test_a_git_log_subject_of_a_command_that_succeeded_is_no_error(tmp_path):
    uses = {}

    def subject(obj):
        content = (obj.get("message") or {}).get("content")
        for block in content if isinstance(content, list) else ():
            if block.get("type") == "tool_use":
                uses[block["id"]] = block["input"].get("command", "")
            if block.get("type") == "tool_result" and uses.get(block["tool_use_id"], "").startswith("git log"):
                block["content"] = "9f1c2ab fix(hooks): report hook_error: stop hook failed\n" + block["content"]
        return [obj]

    log = load_session(edited_copy(CCL, tmp_path / "gitlog.jsonl", subject))
    assert any("hook_error" in m.content for m in log.messages if m.role == "tool")
    errors = [p.text for p in extract(log) if p.kind == "error"]
    assert not [e for e in errors if "hook_error" in e]
    # the errors of the commands Claude Code says failed are still there
    assert "FAILED tests/test_unit.py::TestDeepManifestGenerator::test_process_invalid_input_type" in errors


# pasted as the terminal shows it: the markdown's bold marks gone
PASTED = ("\n\nTests: All 40 tests pass with 100% branch coverage\n"
          "Linting: `ruff check` passes with no issues\n"
          "README Accuracy: The README correctly reflects what the code does:")


def test_assistant_text_the_user_pasted_is_no_constraint(tmp_path):
    def paste(obj):
        msg = obj.get("message") or {}
        if obj.get("type") == "user" and isinstance(msg.get("content"), str) and "status report" in msg["content"]:
            msg["content"] += PASTED
        return [obj]

    log = load_session(edited_copy(CCL, tmp_path / "pasted.jsonl", paste))
    assert any(PASTED.strip() in m.content for m in log.messages if m.role == "user")
    rules = [p.text for p in extract(log) if p.kind == "constraint"]
    assert "Please create an empty commit with that content." in rules     # the user's own words
    assert not [r for r in rules if "40 tests" in r or "ruff check" in r or "README Accuracy" in r]


def test_a_chinese_instruction_is_a_constraint():
    rules = [p for p in extract(load_session(ZH)) if p.kind == "constraint"]
    [note] = [p for p in rules if p.text.startswith("另外帮我写一段给他们的变更说明")]
    assert carried([note], "- 约束：给 DBA 和 SRE 写一段简短的中文变更说明。") == {note.text}
    assert carried([note], "- 变更已经上线。") == set()


def test_a_negated_chinese_instruction_keeps_its_negation():
    log = session(Message("u", "user", "把重试逻辑加到 client.py 里。不要修改数据库迁移文件。", turn=1),
                  Message("a", "assistant", "好的。", turn=1))
    [rule] = [p for p in extract(log) if p.kind == "constraint"]
    assert rule.text == "不要修改数据库迁移文件。"
    assert carried([rule], "- 禁止改数据库迁移文件") == {rule.text}
    assert carried([rule], "- 已修改数据库迁移文件") == set()


def test_a_swe_agent_run_with_text_actions_has_file_and_command_facts():
    probes = extract(load_session(SWE_TEXT))
    facts = {(p.kind, p.text) for p in probes}
    assert {("file-read", "read setup.py"), ("file-read", "read src/marshmallow/fields.py"),
            ("file-modified", "modified reproduce.py"),
            ("file-modified", "modified /marshmallow-code__marshmallow/src/marshmallow/fields.py"),
            ("command", "python reproduce.py"), ("command", "pip install -e .[dev]")} <= facts
    # SWE-agent's own commands are no shell commands
    assert not [p for p in probes if p.kind == "command" and p.text.split()[0] in
                ("open", "goto", "edit", "create", "find_file", "search_dir", "submit", "str_replace_editor")]
    [fields] = [p for p in probes if p.kind == "file-modified" and p.text.endswith("fields.py")]
    assert carried([fields], "Edited src/marshmallow/fields.py: TimeDelta now rounds.") == {fields.text}
    assert carried([fields], "Opened src/marshmallow/fields.py at line 1474.") == set()


@pytest.mark.parametrize("action, effects", [
    ("open src/app.py 120", [("src/app.py", "read")]),
    ("create tests/test_new.py", [("tests/test_new.py", "modified")]),
    ("str_replace_editor view /repo/src/app.py", [("/repo/src/app.py", "read")]),
    ("str_replace_editor str_replace /repo/src/app.py --old_str a --new_str b", [("/repo/src/app.py", "modified")]),
    ("goto 583", []), ("scroll_down", []), ("find_file \"fields.py\" src", []), ("search_dir \"TimeDelta\" src", []),
    ("edit 10:12\n    return 1\nend_of_edit", []), ("submit", []),
    ("sed -i 's/a/b/' src/app.py", [("src/app.py", "modified")]),
])
def test_swe_agent_commands_read_or_change_files_by_their_signatures(action, effects):
    from breakwater.fidelity.text_actions import action_effects, text_action

    assert text_action(f"DISCUSSION\nLet me look.\n```\n{action}\n```") == action
    assert list(action_effects(action)) == effects
