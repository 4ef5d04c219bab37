"""Other agents' sessions as their agents ran them (issue 25): text-mode observations, reasoning that
was sent back, OpenHands evaluation output, files holding several sessions, and `import -o`."""

import json
import subprocess
import sys

from breakwater.core.log.message import Message
from breakwater.core.policy import preset
from breakwater.core.simulate import simulate, view_at
from breakwater.formats import detect_format, load_session, load_sessions
from support.small_disk import small_disk
from support.transcripts import REAL

SWE = REAL / "swe-agent" / "marshmallow-1867__function_calling_replace_from_source.traj"
MINI = REAL / "mini-swe-agent" / "pr854_deepseek-v4-flash__astropy__astropy-12907.traj.json"
CLAUDE_TWO = REAL / "claude-code" / "agentsessions_claude_coverage_small.jsonl"
OPENHANDS_V0 = REAL / "openhands" / "runtime_trajs_basic_gui_mode.json"
MASKED = "[early tool output cleared"


def run(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "breakwater", *args], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, cwd=cwd)


def text_mode_swe_agent(tmp_path, message_type: bool = True):
    """The real function-calling trajectory rewritten as a text-action run: the command a fenced block
    in the reply, the observation a user message (as SWE-agent's 2024 runs wrote them)."""
    data = json.loads(SWE.read_text(encoding="utf-8"))
    history = []
    for rec in data["history"]:
        rec = dict(rec)
        calls = rec.pop("tool_calls", None)
        if rec["role"] == "assistant" and calls:
            rec["content"] = f"{rec['content']}\n\n```\n{rec.get('action') or ''}\n```"
        if rec["role"] == "tool":
            rec["role"] = "user"
            rec.pop("tool_call_ids", None)
        if not message_type:
            rec.pop("message_type", None)
        history.append(rec)
    path = tmp_path / "text.traj"
    path.write_text(json.dumps({**data, "history": history}), encoding="utf-8")
    return path


def text_mode_mini(tmp_path):
    """The real mini-swe-agent run as a v1 (text) trajectory: a bare list, commands in fenced blocks,
    observations user messages with `<returncode>`/`<output>`."""
    out = []
    for rec in json.loads(MINI.read_text(encoding="utf-8"))["messages"]:
        if rec["role"] == "assistant":
            cmds = [json.loads(c["function"]["arguments"])["command"] for c in rec.get("tool_calls") or []]
            text = rec.get("content") or ""
            out.append({"role": "assistant",
                        "content": text + "".join(f"\n\n```mswea_bash_command\n{c}\n```" for c in cmds)})
        elif rec["role"] == "tool":
            out.append({"role": "user", "content": rec["content"]})
        elif rec["role"] in ("system", "user"):
            out.append({"role": rec["role"], "content": rec["content"]})
    path = tmp_path / "mini-v1.traj.json"
    path.write_text(json.dumps({"messages": out, "info": {"mini_version": "1.0"}}), encoding="utf-8")
    return path


# -- 1. text-mode observations ----------------------------------------------------------------------
def _observations_masked(log, window):
    policy = preset("seed-001").with_changes(window=window)
    last = log.turn_count()
    view = view_at(log, policy, last, counter="heuristic")
    sent = view.messages
    masked = [m for m in sent if m.role == "user" and m.content.startswith(MASKED)]
    return view, masked


def test_text_mode_swe_agent_observations_are_marked_and_masked_as_sent(tmp_path):
    for with_type in (True, False):   # 2024 files have no message_type: a user message answering a reply
        log = load_session(text_mode_swe_agent(tmp_path, with_type))
        users = [m for m in log.messages if m.role == "user"]
        observed = [m for m in users if m.is_observation]
        results = [m for m in load_session(SWE).messages if m.role == "tool"]
        assert len(observed) == len(results) == 13 and not users[0].is_observation   # the task is not an observation
        assert not any(m.is_observation for m in log.messages if m.role in ("system", "assistant"))
        view, masked = _observations_masked(log, 3_000)
        assert len(masked) >= 5, [m.content[:60] for m in view.messages]
        # the request alternates as the agent sent it: the same roles, in the same order
        roles = [m.role for m in log.messages if m.turn <= view.turn][:len(view.messages)]
        assert [m.role for m in view.messages] == roles


def test_text_mode_mini_swe_agent_observations_are_masked(tmp_path):
    path = text_mode_mini(tmp_path)
    assert detect_format(path) == "mini-swe-agent"
    log = load_session(path)
    tool_log = load_session(MINI)
    assert sum(m.is_observation for m in log.messages) == sum(m.role == "tool" for m in tool_log.messages) == 63
    policy = preset("seed-001").with_changes(window=16_000)
    view = view_at(log, policy, log.turn_count(), counter="heuristic")
    # every message still sent, in its role, and most old observations cleared
    assert [m.role for m in view.messages] == [m.role for m in log.messages if m.role != "assistant" or
                                               m.turn < log.turn_count()][:len(view.messages)]
    assert len(view.messages) == len(log.messages) - 1
    assert sum(m.role == "user" and m.content.startswith(MASKED) for m in view.messages) > 30
    sim = simulate(log, policy, counter="heuristic")
    assert 1 - sim.billed_sent / sim.billed_raw > 0.3


def test_the_observation_mark_survives_the_native_round_trip(tmp_path):
    path = text_mode_swe_agent(tmp_path)
    log = load_session(path)
    out = tmp_path / "native.jsonl"
    r = run("import", str(path), "-o", str(out))
    assert r.returncode == 0, r.stderr
    back = load_session(out)
    assert [m.is_observation for m in back.messages] == [m.is_observation for m in log.messages]


# -- 2. reasoning that was sent back ------------------------------------------------------------------
def test_reasoning_content_the_agent_resent_is_counted(tmp_path):
    data = json.loads(MINI.read_text(encoding="utf-8"))
    for rec in data["messages"]:   # no API figures: they would calibrate the counts to themselves
        if isinstance(rec.get("extra"), dict):
            rec["extra"].pop("response", None)
    plain = tmp_path / "plain.traj.json"
    plain.write_text(json.dumps(data), encoding="utf-8")
    thought = "Let me think about the separability matrix of nested compound models. " * 40
    for rec in data["messages"]:
        if rec["role"] == "assistant":
            rec["reasoning_content"] = thought
    path = tmp_path / "reasoning.traj.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    plain, reasoned = load_session(plain), load_session(path)
    policy = preset("breakwater").with_changes(window=1_000_000)
    a = simulate(plain, policy, counter="exact", model="gpt-4o")
    b = simulate(reasoned, policy, counter="exact", model="gpt-4o")
    n_replies = sum(1 for m in plain.messages if m.role == "assistant")
    # the last request carries every earlier reply's reasoning: ~700 tokens each
    extra = b.turns[-1].sent_tokens - a.turns[-1].sent_tokens
    assert 600 * (n_replies - 1) < extra < 800 * (n_replies - 1), extra


# -- 3. OpenHands evaluation output ----------------------------------------------------------------------
def eval_output(tmp_path, ids):
    events = json.loads(OPENHANDS_V0.read_text(encoding="utf-8"))
    path = tmp_path / "output.jsonl"
    # a real instance line is long: the history holds each step's full model response
    lines = [json.dumps({"instance_id": i, "instruction": "fix it", "instance": {"repo": "o/r", "number": 7},
                         "metadata": {"agent_class": "CodeActAgent", "llm_config": {"model": "gpt-4o"}},
                         "history": events * 3, "metrics": {}, "test_result": {"report": {}}, "error": None})
             for i in ids]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert len(lines[0]) > 65536
    return path


def test_openhands_eval_output_with_long_lines_is_detected(tmp_path):
    path = eval_output(tmp_path, ["o__r-7", "o__r-8"])
    assert detect_format(path) == "openhands"
    assert [log.id for log in load_sessions(path)] == ["o__r-7", "o__r-8"]
    r = run("simulate", str(path), "--counter", "heuristic")
    assert r.returncode == 0, r.stderr


def test_a_failed_detection_names_the_format_that_reads_the_file(tmp_path):
    data = json.loads(SWE.read_text(encoding="utf-8"))
    path = tmp_path / "bare.traj"   # a trajectory cut down to its history: nothing says SWE-agent
    path.write_text(json.dumps({"history": data["history"]}), encoding="utf-8")
    r = run("simulate", str(path), "--counter", "heuristic")
    assert r.returncode == 2 and "--format swe-agent" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    r = run("simulate", str(path), "--counter", "heuristic", "--format", "swe-agent")
    assert r.returncode == 0, r.stderr


# -- 4. files holding several sessions --------------------------------------------------------------------
def test_a_file_with_sidechains_says_what_it_holds_and_session_picks_one():
    r = run("simulate", str(CLAUDE_TWO), "--counter", "heuristic", "--json")
    assert r.returncode == 0, r.stderr
    assert "2 sessions" in r.stderr and "ses_stage0_small/sidechain-sys1" in r.stderr and "--session" in r.stderr
    r = run("simulate", str(CLAUDE_TWO), "--counter", "heuristic", "--json", "--session", "sidechain-sys1")
    assert r.returncode == 0, r.stderr
    side = load_sessions(CLAUDE_TWO)[1]
    assert len(json.loads(r.stdout)["turns"]) == side.turn_count()
    r = run("simulate", str(CLAUDE_TWO), "--session", "nope")
    assert r.returncode == 2 and "ses_stage0_small/sidechain-sys1" in r.stderr


def test_import_to_a_jsonl_file_writes_that_file(tmp_path):
    out = tmp_path / "main.jsonl"
    for again in (False, True):   # a second run replaces the file it wrote, and says so
        r = run("import", str(CLAUDE_TWO), "-o", str(out))
        assert r.returncode == 0, r.stderr
        assert out.is_file() and load_session(out).id == "ses_stage0_small"
        assert "2 sessions" in r.stderr and "--session" in r.stderr
        assert ("replaced the file that was there" in r.stderr) is again
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    r = run("import", str(CLAUDE_TWO), "-o", str(tmp_path / "side.jsonl"), "--session", "sidechain-sys1")
    assert r.returncode == 0 and load_session(tmp_path / "side.jsonl").id.endswith("sidechain-sys1")
    r = run("import", str(CLAUDE_TWO), "-o", str(tmp_path / "all"))
    assert r.returncode == 0 and len(list((tmp_path / "all").glob("*.jsonl"))) == 2


def test_an_import_that_cannot_finish_leaves_the_file_that_was_there(tmp_path):
    big = REAL / "pi" / "large-session.jsonl"    # 839 KB as native JSONL
    with small_disk(tmp_path / "disk", "256k") as disk:
        out = disk / "main.jsonl"
        out.write_text("a session the user kept\n")
        r = run("import", str(big), "-o", str(out))
        # was: the file truncated first, then a partial session left in its place
        assert r.returncode == 2 and "as it was" in r.stderr and "Traceback" not in r.stderr
        assert out.read_text() == "a session the user kept\n"
        assert [p.name for p in disk.iterdir()] == ["main.jsonl"]


def test_import_to_a_directory_never_writes_two_sessions_to_one_file(tmp_path):
    path = eval_output(tmp_path, ["same", "same", "a/b", "a_b"])
    out = tmp_path / "out"
    r = run("import", str(path), "-o", str(out))
    assert r.returncode == 0, r.stderr
    written = sorted(out.iterdir())
    assert len(written) == 4, written
    assert sorted(load_session(p).id for p in written) == ["a/b", "a_b", "same", "same"]
    # stderr names each file once, and says which names were changed and why
    named = [line.split(":")[0] for line in r.stderr.splitlines() if "messages" in line]
    assert sorted(named) == sorted(str(p) for p in written)
    assert r.stderr.count("already taken") == 2, r.stderr


async def test_the_inspector_says_a_user_message_is_an_observation(tmp_path):
    from breakwater.ui.app import make_app
    from breakwater.ui.config import UISettings
    from ui_support import ready, screen_text, select_row

    log = load_session(text_mode_swe_agent(tmp_path))
    app = make_app(log, preset("seed-001").with_changes(window=3_000), counter="heuristic", settings=UISettings())
    async with app.run_test(size=(160, 48)) as pilot:
        await ready(pilot)
        row = next(i for i, m in enumerate(log.messages) if m.is_observation)
        await select_row(pilot, row)
        assert f"#{row} user (observation)" in screen_text(app)
        await select_row(pilot, 1)   # the task
        assert "#1 user (observation)" not in screen_text(app) and "#1 user" in screen_text(app)
