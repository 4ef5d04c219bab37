"""The key encoded is redacted as the plain key is (issue 35 item 2).

A model may read a `.env` in its own workspace and print it base64- or hex-encoded. The end-to-end
test runs the real CLI against the fake server with a real `.env` read by real tool calls under the
real sandbox, then decodes every base64 and hex run in what reached the provider, the session log
and the spill: none holds the key (nor a stretch of it). The check decodes, so it does not lean on
the forms the redactor computes.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from agent_support import KEY, Script, load, serve
from hypothesis import given, settings, strategies as st
from support.fake_openai import Reply, ScriptedToolCall

from breakwater.agent.redact import MARK, Redactor
from breakwater.core.log.beneath import OwnedDir

PIECES = [KEY[i:i + 8].encode() for i in range(len(KEY) - 7)]   # any 8 bytes of the key in a row


def leaks(text: str) -> list[str]:
    """Base64 or hex runs in `text` (line breaks, raw or JSON-escaped, allowed inside) whose decoding,
    at any alignment, holds 8 bytes of the key in a row; and the key itself."""
    found = [KEY] if KEY in text else []
    flat = text.replace("\\r", "").replace("\\n", "").replace("\r", "").replace("\n", "")
    for run in re.findall(r"[A-Za-z0-9+/_=-]{12,}", flat):
        run = run.replace("-", "+").replace("_", "/").rstrip("=")
        for skip in range(4):
            body = run[skip:]
            body = body[:len(body) - len(body) % 4]
            try:
                decoded = base64.b64decode(body, validate=False)
            except binascii.Error:
                continue
            if any(p in decoded for p in PIECES):
                found.append(run)
    for run in re.findall(r"[0-9a-fA-F]{16,}", flat):
        for skip in range(2):
            body = run[skip:]
            decoded = bytes.fromhex(body[:len(body) - len(body) % 2])
            if any(p in decoded for p in PIECES):
                found.append(run)
    return found


ENV = f"# local settings\nOPENAI_API_KEY={KEY}\nDEBUG=1\n".encode()


def encodings(data: bytes) -> dict[str, str]:
    return {"base64": base64.b64encode(data).decode(), "base64url": base64.urlsafe_b64encode(data).decode(),
            "hex": data.hex(), "HEX": data.hex().upper(), "mime": base64.encodebytes(data).decode(),
            "pem-in-json": json.dumps("\n".join(base64.b64encode(data).decode()[i:i + 64]
                                                for i in range(0, len(base64.b64encode(data)), 64)))}


def test_each_alignment_and_alphabet_is_redacted():
    r = Redactor(KEY)
    for lead in range(6):          # the key at each of the three offsets of a 3-byte group, twice
        data = b"x" * lead + ENV
        for name, text in encodings(data).items():
            assert leaks(text), name            # the check sees the key in the unredacted text
            out = r(text)
            assert leaks(out) == [] and MARK in out, (lead, name, out)
    assert r("ordinary text, no key") == "ordinary text, no key"


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=40), st.binary(max_size=40), st.sampled_from(["base64", "base64url", "hex", "HEX", "mime"]))
def test_the_key_encoded_among_any_bytes_is_redacted(before, after, name):
    text = encodings(before + KEY.encode() + after)[name]
    assert leaks(Redactor(KEY)(text)) == []


def test_a_spill_holding_the_key_encoded_is_rewritten_across_chunk_boundaries(tmp_path):
    r = Redactor(KEY)
    pad = b"y" * ((1 << 20) - 30)     # the second form straddles the 1 MiB read boundary
    spill = tmp_path / "s.log"
    forms = [base64.b64encode(b"A" + ENV), base64.encodebytes(b"AB" + ENV), ENV.hex().encode()]
    spill.write_bytes(forms[0] + b"\n" + pad + forms[1] + b"\n" + pad + forms[2] + b"\ntail\n")
    assert r.scrub_file(OwnedDir(tmp_path), "s.log") == 3
    out = spill.read_bytes()
    assert leaks(out.decode()) == [] and out.endswith(b"\ntail\n") and out.count(MARK.encode()) == 3
    assert r.scrub_file(OwnedDir(tmp_path), "s.log") == 0


def test_a_crash_report_quoting_the_key_encoded_is_redacted(tmp_path, monkeypatch):
    from breakwater.cli.crash import report_crash

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("BREAKWATER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("BREAKWATER_CONFIG", str(tmp_path / "none.toml"))
    line = report_crash(ValueError(f"bad header {base64.b64encode(ENV).decode()}"), ["run"])
    (report,) = (tmp_path / "cache" / "crash").glob("crash-*.txt")
    assert leaks(line) == [] and leaks(report.read_text()) == [] and MARK in report.read_text()


def test_a_real_run_that_prints_the_env_encoded_leaks_the_key_nowhere(tmp_path):
    workspace, home = tmp_path / "ws", tmp_path / "home"
    workspace.mkdir()
    home.mkdir()
    (workspace / ".env").write_bytes(ENV)
    (home / "config.toml").write_text('model = "fake-model"\nretry_base_s = 0.01\n')
    commands = ["base64 -w0 .env; echo; base64 .env; basenc --base64url .env; xxd -p .env; "
                "xxd -p .env | tr a-f A-F; printf 'AB' | cat - .env | base64 -w0",
                # the encoded key in the middle of long output: only the spill keeps it
                "yes filler | head -3000; base64 -w0 .env; echo; printf Z | cat - .env | xxd -p; yes filler | head -3000"]
    script = Script([*(Reply.calls(ScriptedToolCall("bash", {"command": c})) for c in commands),
                     Reply(text="done")])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "BREAKWATER_"))}
    env.update(HOME=str(home), BREAKWATER_CONFIG=str(home / "config.toml"), OPENAI_API_KEY=KEY)
    with serve(script) as server:
        done = subprocess.run([sys.executable, "-m", "breakwater", "run", "--prompt", "go", "--workspace",
                               str(workspace), "--base-url", server.base_url, "--yes"],
                              env=env, capture_output=True, text=True, timeout=120)
        bodies = [json.dumps(r.body) for r in server.chat_requests]
    assert done.returncode == 0, done.stderr[-2000:]
    session = Path(done.stdout.strip().splitlines()[-1].removeprefix("session: "))
    log = load(session)
    results = [m for m in log.messages if m.role == "tool"]
    assert len(results) == 2 and MARK in results[0].content
    # six forms in the first result (short: no spill kept); two in the second's spill, cut from what it shows
    assert results[0].content.count(MARK) == 6 and results[0].meta["source"]["spill"] is None
    assert results[1].meta["source"]["redacted"] == 2
    assert len(bodies) == 3 and all(leaks(b) == [] for b in bodies[1:]), [leaks(b) for b in bodies]
    assert leaks(session.read_text()) == []
    spills = sorted((workspace / ".agent" / "spill").rglob("*.log"))
    assert len(spills) == 1 and all(leaks(s.read_text()) == [] for s in spills)
    assert leaks(done.stdout) == [] and leaks(done.stderr) == []
    assert (workspace / ".env").read_bytes() == ENV        # the workspace's own file is the user's
