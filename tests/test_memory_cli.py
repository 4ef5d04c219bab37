"""`breakwater memory ...` run as a user runs it: a real process."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from breakwater.memory.project import append_session
from breakwater.memory.store import MemoryStore


def bw(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "breakwater", "memory", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd, env=dict(os.environ, PYTHONWARNINGS="ignore"))


def test_add_search_show_consolidate(tmp_path):
    ws = str(tmp_path)
    r = bw("add", "[DECISION] 数据库连接池超时，改用 50 个连接", "--turn", "3", "--workspace", ws)
    assert r.returncode == 0 and r.stdout == "entry appended to MEMORY.md (3 lines)\n", r.stderr
    assert bw("add", "[FILE] src/utils.go: parse config\n[ERROR] utils.go EOF", "--workspace", ws).returncode == 0
    text = (tmp_path / ".agent" / "MEMORY.md").read_text()
    assert "\n[Turn 3 | " in text and "- [DECISION] 数据库连接池超时，改用 50 个连接\n" in text
    assert text.endswith("- [FILE] src/utils.go: parse config\n- [ERROR] utils.go EOF\n")

    r = bw("search", "数据库连接超时", "--json", "--workspace", ws)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["query"] == "数据库连接超时" and len(result["hits"]) == 1
    assert result["hits"][0]["source"] == "MEMORY.md" and result["hits"][0]["score"] > 0
    assert result["hits"][0]["text"].endswith("- [DECISION] 数据库连接池超时，改用 50 个连接")

    r = bw("search", "utils.go", cwd=ws)  # the workspace defaults to the current directory
    assert r.returncode == 0 and r.stdout.startswith("#1  score ") and "utils.go EOF" in r.stdout
    assert bw("search", "kubernetes", cwd=ws).stdout == "no matching memory\n"

    append_session(tmp_path, "abcdef0123", "first session")
    r = bw("show", "--workspace", ws)
    assert r.returncode == 0
    assert "- [FILE] src/utils.go: parse config" in r.stdout
    assert "== fragments: 0" in r.stdout and "PROJECT_MEMORY.md: 1 session entries" in r.stdout

    r = bw("consolidate", "--workspace", ws)
    assert r.returncode == 0 and r.stdout == "not consolidated: 0 fragments (fewer than 12)\n"
    r = bw("consolidate", "--force", "--workspace", ws)
    assert r.returncode == 0 and r.stdout.startswith("consolidated: 3 bullets -> 3, 0 fragments removed")


def test_overflow_is_reported(tmp_path):
    store = MemoryStore(tmp_path)
    for turn in range(50):
        store.append(f"- [FILE] f{turn}.py", turn)
    r = bw("add", "[FILE] one-too-many.py", "--workspace", str(tmp_path))
    assert r.returncode == 0 and r.stdout.startswith("MEMORY.md is full (150 lines): entry written to auto-")
    r = bw("search", "one-too-many.py", "--json", "--workspace", str(tmp_path))
    assert json.loads(r.stdout)["hits"][0]["source"].startswith("auto-")


def test_errors_are_one_line_without_traceback(tmp_path):
    r = bw("search", "x", "--workspace", str(tmp_path / "missing"))
    assert r.returncode != 0 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert "is not a directory" in r.stderr
    r = bw("add", "   ", "--workspace", str(tmp_path))
    assert r.returncode != 0 and r.stderr == "breakwater memory add: nothing to remember: the entry has no bullets\n"
    r = bw()
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_memory_modules_do_not_import_textual():
    code = ("import sys, breakwater.cli.memory, breakwater.memory.consolidate, breakwater.memory.project, "
            "breakwater.memory.retrieval, breakwater.memory.scribe; assert 'textual' not in sys.modules")
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0


def test_workspace_may_come_before_or_after_the_action(tmp_path):
    import subprocess
    import sys
    run = lambda *a: subprocess.run([sys.executable, "-m", "breakwater", "memory", *a],  # noqa: E731
                                    capture_output=True, text=True, timeout=60)
    assert run("--workspace", str(tmp_path), "add", "[DECISION] keep raw SQL").returncode == 0
    assert run("add", "[FILE] app/db/pool.py", "--workspace", str(tmp_path)).returncode == 0
    text = (tmp_path / ".agent" / "MEMORY.md").read_text()
    assert "keep raw SQL" in text and "app/db/pool.py" in text
