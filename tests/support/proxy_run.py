"""Running `breakwater proxy` as the user does (its own process, port 0) and reading what it recorded."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

AGENTS = Path(__file__).resolve().parents[1] / "agents" / "node_modules" / ".bin"


def agent_missing(name: str) -> str | None:
    """Why the real agent `name` cannot run here (None: it can)."""
    if shutil.which("node") is None:
        return "node is not installed (the real-agent tests need Node 20: scripts/install_agents.sh)"
    if not (AGENTS / name).exists():
        return f"{name} is not installed in tests/agents (run scripts/install_agents.sh, as `make test` does)"
    return None


@contextmanager
def running_proxy(upstream: str, root: Path, *extra: str) -> Iterator[tuple[str, Path]]:
    """(the proxy's base URL, the folder of its sessions); stopped (SIGTERM) on the way out."""
    sessions = root / "sessions"
    env = dict(os.environ, HOME=str(root / "proxy-home"), XDG_STATE_HOME=str(root / "state"),
               XDG_CACHE_HOME=str(root / "cache"), BREAKWATER_CACHE_DIR=str(root / "cache" / "breakwater"))
    proc = subprocess.Popen([sys.executable, "-m", "breakwater", "proxy", "--port", "0", "--upstream", upstream,
                             "--sessions", str(sessions), *extra], env=env, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        m = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        assert m, f"the proxy did not start: {line}{proc.stderr.read() if proc.poll() is not None else ''}"
        yield f"http://127.0.0.1:{m.group(1)}", sessions
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        rest = proc.stderr.read()
        assert "Traceback" not in rest, rest


def session_records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def request_notes(path: Path) -> list[dict]:
    return [r for r in session_records(path) if r.get("type") == "note" and r.get("kind") == "request"]


def kept_bytes(log: Path, ref: dict) -> bytes:
    data = (log.parent / ref["file"]).read_bytes()
    assert hashlib.sha256(data).hexdigest() == ref["sha256"] and len(data) == ref["bytes"]
    return data


def files_under(*roots: Path) -> list[Path]:
    return [p for root in roots if root.exists() for p in root.rglob("*") if p.is_file()]
