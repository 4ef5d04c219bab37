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
from support.scripted_provider import OVERLOADED_ANTHROPIC, ScriptedProvider, Step

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
    assert [(u["input_tokens"], u["cache_write_tokens"], u["cache_read_tokens"], u["completion_tokens"]) for u in usage] \
        == [(a["input"], a["cache_write"], a["cache_read"], a["output"]) for a in answered]
    return notes


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
    out = subprocess.run([str(AGENTS / "claude"), "-p", "count to six thousand, then write result.txt",
                          "--output-format", "json", "--allowedTools", "Bash", "--model", "claude-sonnet-4-5"],
                         cwd=ws, env=_env(root, ANTHROPIC_BASE_URL=proxy, ANTHROPIC_API_KEY=KEY),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:] + out.stdout[-2000:]
    assert (ws / "result.txt").read_text().strip() == "done"
    return json.loads(out.stdout)


@pytest.mark.skipif(agent_missing("claude") is not None, reason=agent_missing("claude") or "")
def test_claude_code_observed(tmp_path):
    with ScriptedProvider(CLAUDE_STEPS) as provider, running_proxy(provider.url, tmp_path, "--observe") as (url, sessions):
        result = _claude(url, tmp_path)
    assert result["result"] == "All done."
    log = _the_session(sessions)
    notes = _check_sent_is_received(log, provider)
    assert all(n["sent"] == n["received"] for n in notes)
    records = session_records(log)
    assert records[0]["client"].startswith("claude-cli/2.1.197") and records[0]["agent_session"] == result["session_id"]
    # the overload passed through (status and body) and Claude Code retried it
    assert [(r["status"], json.loads(r["message"])["error"]["type"]) for r in records if r["type"] == "error"] \
        == [(529, "overloaded_error")]
    tools = [r for r in records if r["type"] == "message" and r["role"] == "tool"]
    assert str(BIG_LINES) in tools[0]["content"] and "No such file" in tools[1]["content"]
    assert all(r.headers.get("x-api-key") == KEY for r in provider.main_requests())
    _no_key_written(tmp_path, KEY)


@pytest.mark.skipif(agent_missing("claude") is not None, reason=agent_missing("claude") or "")
def test_claude_code_compacted(tmp_path):
    policy = tmp_path / "small.toml"
    policy.write_text('preset = "breakwater"\nwindow = 20000\n')
    with ScriptedProvider(CLAUDE_STEPS) as provider, \
            running_proxy(provider.url, tmp_path, "--policy", str(policy)) as (url, sessions):
        result = _claude(url, tmp_path)
    assert result["result"] == "All done."
    log = _the_session(sessions)
    notes = _check_sent_is_received(log, provider)
    compacted = [n for n in notes if n["sent"] != n["received"]]
    assert compacted and all(n["edits"] for n in compacted)
    for n in compacted:
        received, sent = json.loads(kept_bytes(log, n["received"])), json.loads(kept_bytes(log, n["sent"]))
        assert sent["system"] == received["system"] and sent["tools"] == received["tools"]
        assert len(json.dumps(sent["messages"])) < len(json.dumps(received["messages"]))
    _no_key_written(tmp_path, KEY)
