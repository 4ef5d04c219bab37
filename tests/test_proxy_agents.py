"""The real agents through `breakwater proxy`, offline: each runs non-interactively in a temporary workspace
with a temporary HOME against the scripted provider, the proxy between them, observing and compacting.

Observe: every request the provider received is, byte for byte, what the session log says was sent, and
the usage logged is what the provider answered. Compact: the provider received the compacted request the
log names, and the agent still finished. The agents' keys reach the provider and no file the proxy wrote."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from support.proxy_run import AGENTS, agent_missing, files_under, kept_bytes, request_notes, running_proxy, \
    session_records
from support.scripted_provider import OVERLOADED_ANTHROPIC, SERVER_ERROR_OPENAI, ScriptedProvider, Step

KEY = "sk-ant-test-PROXYKEY-0123456789abcdef"
BIG_LINES = 6000          # `seq` output: 34 KB, past every snip threshold


def _env(root: Path, **extra: str) -> dict[str, str]:
    home = root / "home"
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "CLAUDE"))}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), DISABLE_TELEMETRY="1",
               CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1", NO_COLOR="1", **extra)
    return env


def _workspace(root: Path) -> Path:
    ws = root / "ws"
    ws.mkdir(exist_ok=True)
    return ws


def _the_session(sessions: Path) -> Path:
    """The session of the main conversation: the one whose requests offered tools."""
    logs = [p for p in sessions.glob("*.jsonl") if any(
        json.loads(kept_bytes(p, n["received"])).get("tools") for n in request_notes(p))]
    assert len(logs) == 1, [p.name for p in sessions.glob("*.jsonl")]
    return logs[0]


def _check_sent_is_received(log: Path, provider: ScriptedProvider) -> list[dict]:
    """Each request the log records reached the provider as the bytes it names, in order; the usage it
    logged is what the provider answered."""
    notes = request_notes(log)
    main = provider.main_requests()
    assert len(notes) == len(main) >= 3
    for note, got in zip(notes, main):
        assert kept_bytes(log, note["sent"]) == got.body
    answered = [u for i, u in sorted(provider.usages.items()) if provider.received[i].offers_tools]
    usage = [r for r in session_records(log) if r["type"] == "usage"]
    assert [u["provider_usage"] for u in usage] == answered
    return notes


def _compacted(log: Path, notes: list[dict], messages: str) -> None:
    """Some requests went out compacted (the log says how), each with the agent's frame untouched and
    fewer bytes of history than the agent sent."""
    compacted = [n for n in notes if n["sent"] != n["received"]]
    assert compacted and all(n["edits"] for n in compacted)
    for n in compacted:
        received, sent = json.loads(kept_bytes(log, n["received"])), json.loads(kept_bytes(log, n["sent"]))
        assert {k: v for k, v in sent.items() if k != messages} == {k: v for k, v in received.items() if k != messages}
        assert len(json.dumps(sent[messages])) < len(json.dumps(received[messages]))


def _observed(tmp_path: Path, steps: list[Step], run) -> tuple[object, list[dict], ScriptedProvider]:
    """The agent run through the proxy observing: what it answered, its session's records (every request
    forwarded as the agent sent it, byte for byte), and the provider."""
    with ScriptedProvider(steps) as provider, running_proxy(provider.url, tmp_path, "--observe") as (url, sessions):
        answer = run(url, tmp_path)
    log = _the_session(sessions)
    assert all(n["sent"] == n["received"] for n in _check_sent_is_received(log, provider))
    _no_key_written(tmp_path, KEY)
    return answer, session_records(log), provider


def _finished(argv: list[str], ws: Path, env: dict[str, str]) -> str:
    """Run the agent to its end; it did its task (result.txt written) and exited 0. Its stdout."""
    out = subprocess.run(argv, cwd=ws, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:] + out.stdout[-2000:]
    assert (ws / "result.txt").read_text().strip() == "done"
    return out.stdout


def _no_key_written(root: Path, key: str) -> None:
    written = files_under(root / "sessions", root / "state", root / "cache", root / "proxy-home")
    assert written
    for path in written:
        assert key.encode() not in path.read_bytes(), path


# -- Claude Code (Anthropic Messages) -------------------------------------------------------------------------
CLAUDE_STEPS = [
    Step("Bash", {"command": f"seq 1 {BIG_LINES}", "description": "count"}),
    Step("Bash", {"command": "cat missing.txt", "description": "read a file that is not there"}, fail=OVERLOADED_ANTHROPIC),
    Step("Bash", {"command": "echo done > result.txt", "description": "write the result"}),
    Step(None, text="All done."),
]


def _claude(proxy: str, root: Path) -> dict:
    ws = _workspace(root)
    return json.loads(_finished([str(AGENTS / "claude"), "-p", "count to six thousand, then write result.txt",
                                 "--output-format", "json", "--allowedTools", "Bash", "--model", "claude-sonnet-4-5"],
                                ws, _env(root, ANTHROPIC_BASE_URL=proxy, ANTHROPIC_API_KEY=KEY)))


@pytest.mark.skipif(agent_missing("claude") is not None, reason=agent_missing("claude") or "")
def test_claude_code_observed(tmp_path):
    result, records, provider = _observed(tmp_path, CLAUDE_STEPS, _claude)
    assert result["result"] == "All done."
    assert records[0]["client"].startswith("claude-cli/2.1.197") and records[0]["agent_session"] == result["session_id"]
    # the overload passed through (status and body) and Claude Code retried it
    assert [(r["status"], json.loads(r["message"])["error"]["type"]) for r in records if r["type"] == "error"] \
        == [(529, "overloaded_error")]
    tools = [r for r in records if r["type"] == "message" and r["role"] == "tool"]
    assert str(BIG_LINES) in tools[0]["content"] and "No such file" in tools[1]["content"]
    assert all(r.headers.get("x-api-key") == KEY for r in provider.main_requests())


# -- pi (OpenAI Chat Completions) ------------------------------------------------------------------------------
PI_STEPS = [
    Step("bash", {"command": f"seq 1 {BIG_LINES}"}),
    Step("bash", {"command": "cat missing.txt"}, fail=SERVER_ERROR_OPENAI),
    Step("bash", {"command": "echo done > result.txt"}),
    Step(None, text="All done."),
]


def _pi(proxy: str, root: Path) -> str:
    ws = _workspace(root)
    env = _env(root)
    agent_dir = Path(env["HOME"]) / ".pi" / "agent"
    agent_dir.mkdir(parents=True, exist_ok=True)
    (agent_dir / "models.json").write_text(json.dumps({"providers": {"scripted": {
        "baseUrl": f"{proxy}/v1", "api": "openai-completions", "apiKey": KEY,
        "compat": {"supportsDeveloperRole": False}, "models": [{"id": "scripted-model"}]}}}))
    return _finished([str(AGENTS / "pi"), "--provider", "scripted", "--model", "scripted-model", "-p",
                      "count to six thousand, then write result.txt"], ws, env)


@pytest.mark.skipif(agent_missing("pi") is not None, reason=agent_missing("pi") or "")
def test_pi_observed(tmp_path):
    answer, records, provider = _observed(tmp_path, PI_STEPS, _pi)
    assert "All done." in answer
    assert [r["status"] for r in records if r["type"] == "error"] == [500]   # passed through; pi retried it
    assert records[0]["client"].startswith("OpenAI/JS")
    assert all(r.headers.get("Authorization") == f"Bearer {KEY}" for r in provider.main_requests())


# -- Codex (OpenAI Responses) ------------------------------------------------------------------------------------
CODEX_STEPS = [
    Step("exec_command", {"cmd": f"seq 1 {BIG_LINES}"}),
    Step("exec_command", {"cmd": "cat missing.txt"}, fail=SERVER_ERROR_OPENAI),
    Step("exec_command", {"cmd": "echo done > result.txt"}),
    Step(None, text="All done."),
]


def codex_config(home: Path, base_url: str) -> None:
    """Codex's config.toml in `home` (its CODEX_HOME): the scripted model at `base_url`'s Responses wire."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(f'''model = "scripted-model"
model_provider = "scripted"
[model_providers.scripted]
name = "scripted"
base_url = "{base_url}/v1"
wire_api = "responses"
env_key = "SCRIPTED_API_KEY"
''')


def _codex(proxy: str, root: Path) -> str:
    ws = _workspace(root)
    home = Path(_env(root)["HOME"]) / ".codex"
    codex_config(home, proxy)
    return _finished([str(AGENTS / "codex"), "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox",
                      "count to six thousand, then write result.txt"], ws, _env(root, CODEX_HOME=str(home), SCRIPTED_API_KEY=KEY))


@pytest.mark.skipif(agent_missing("codex") is not None, reason=agent_missing("codex") or "")
def test_codex_observed(tmp_path):
    answer, records, provider = _observed(tmp_path, CODEX_STEPS, _codex)
    assert "All done." in answer
    assert 500 in [r["status"] for r in records if r["type"] == "error"]
    assert records[0]["agent_session"] and records[0]["client"].startswith("codex_exec/0.171.0")
    assert all(r.headers.get("Authorization") == f"Bearer {KEY}" for r in provider.main_requests())


# -- each agent compacted ----------------------------------------------------------------------------------------
COMPACTED = {   # agent: (its script, how it runs, the window that makes its scripted session compact, the wire's list)
    "claude": (CLAUDE_STEPS, _claude, 20_000, "messages"),
    "pi": (PI_STEPS, _pi, 5_000, "messages"),
    "codex": (CODEX_STEPS, _codex, 16_000, "input"),
}


@pytest.mark.parametrize("agent", sorted(COMPACTED))
def test_compacted(agent, tmp_path):
    if agent_missing(agent):
        pytest.skip(agent_missing(agent))
    steps, run, window, messages = COMPACTED[agent]
    policy = tmp_path / "small.toml"
    policy.write_text(f'preset = "breakwater"\nwindow = {window}\n')
    with ScriptedProvider(steps) as provider, \
            running_proxy(provider.url, tmp_path, "--policy", str(policy)) as (url, sessions):
        answer = run(url, tmp_path)
    assert "All done." in json.dumps(answer)        # the agent still finished its task
    log = _the_session(sessions)
    _compacted(log, _check_sent_is_received(log, provider), messages)
    _no_key_written(tmp_path, KEY)
