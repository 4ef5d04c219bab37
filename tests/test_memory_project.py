"""Project memory: session entries in PROJECT_MEMORY.md and the [Project History] block."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from datetime import datetime

from breakwater.memory.project import (
    append_session,
    estimate_tokens,
    project_history,
    project_memory_path,
    read_sessions,
)


def test_round_trip(tmp_path):
    append_session(tmp_path, "0123456789abcdef", "Refactored auth: auth.go, session.go.",
                   now=datetime(2026, 11, 28, 9, 30))
    append_session(tmp_path, "fedcba9876543210", "Added BM25 retrieval.\n\n- memory/retrieval.py",
                   now=datetime(2026, 11, 29, 17, 5))
    assert project_memory_path(tmp_path).read_text() == (
        "## Session 01234567 (2026-11-28 09:30)\nRefactored auth: auth.go, session.go.\n"
        "\n## Session fedcba98 (2026-11-29 17:05)\nAdded BM25 retrieval.\n\n- memory/retrieval.py\n")
    sessions = read_sessions(tmp_path)
    assert [s.header for s in sessions] == ["## Session 01234567 (2026-11-28 09:30)",
                                            "## Session fedcba98 (2026-11-29 17:05)"]
    assert sessions[1].summary == "Added BM25 retrieval.\n\n- memory/retrieval.py"
    assert project_history(tmp_path) == (
        "[Project History]\n## Session 01234567 (2026-11-28 09:30)\nRefactored auth: auth.go, session.go.\n\n"
        "## Session fedcba98 (2026-11-29 17:05)\nAdded BM25 retrieval.\n\n- memory/retrieval.py")


def test_no_history(tmp_path):
    assert project_history(tmp_path) == ""
    project_memory_path(tmp_path).write_text("# Project memory\nwritten by hand, no sessions yet\n")
    assert project_history(tmp_path) == ""


def test_latest_entries_only(tmp_path):
    for i in range(8):
        append_session(tmp_path, f"session{i}xx", f"summary {i}")
    history = project_history(tmp_path, entries=5)
    assert [ln for ln in history.splitlines() if ln.startswith("summary")] == [f"summary {i}" for i in range(3, 8)]


def test_token_budget(tmp_path):
    for i in range(5):
        append_session(tmp_path, f"s{i}aaaaaaa", f"summary {i}: " + "word " * 500)  # ~630 tokens each
    history = project_history(tmp_path, entries=5, max_tokens=1_500)
    assert estimate_tokens(history) <= 1_500
    assert "summary 4:" in history and "summary 3:" in history and "summary 2:" not in history
    assert history.index("summary 3:") < history.index("summary 4:"), "oldest first, newest last"


def test_a_huge_latest_entry_is_cut_to_the_budget(tmp_path):
    append_session(tmp_path, "bigbigbig", "数据库迁移记录。" * 1_000)
    history = project_history(tmp_path, max_tokens=500)
    assert history.startswith("[Project History]\n## Session bigbigbi (")
    assert history.endswith(" …") and 450 < estimate_tokens(history) <= 500


def test_estimate_tokens():
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd" * 10) == 10
    assert estimate_tokens("数据库") == 2
    assert estimate_tokens("ab数据") == 2


WRITER = textwrap.dedent("""
    import sys
    from breakwater.memory.project import append_session
    for i in range(50):
        append_session(sys.argv[1], f"{sys.argv[2]}{i:06d}", f"summary {sys.argv[2]} {i}")
""")


def test_concurrent_sessions_are_all_kept(tmp_path):
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), name], stderr=subprocess.PIPE, text=True)
             for name in ("aa", "bb")]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    summaries = sorted(s.summary for s in read_sessions(tmp_path))
    assert summaries == sorted(f"summary {n} {i}" for n in ("aa", "bb") for i in range(50))
