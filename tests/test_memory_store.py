"""Bounded append: MEMORY.md within 150 lines, overflow fragments, real concurrent processes."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from datetime import datetime
from pathlib import Path

import pytest

from breakwater.memory.entries import Entry, Pointer, parse
from breakwater.memory.store import MemoryStore

NOW = datetime(2026, 11, 29, 14, 5, 9)
FRAGMENT_RE = re.compile(r"^auto-2026-11-29-[0-9a-z]{3}\.md$")


def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_entry_format(tmp_path):
    store = MemoryStore(tmp_path)
    result = store.append("- [FILE] a.py: read\n\n- [DECISION] keep it\n", turn=7, now=NOW)
    assert result.path == tmp_path / ".agent" / "MEMORY.md" and not result.overflow
    assert store.memory_path.read_text() == "---\n[Turn 7 | 14:05:09]\n- [FILE] a.py: read\n- [DECISION] keep it\n"
    assert result.memory_lines == 4


def test_the_150_line_boundary(tmp_path):
    store = MemoryStore(tmp_path)
    for turn in range(50):  # 50 entries of 3 lines: exactly 150
        assert not store.append(f"- [FILE] f{turn}.py", turn, now=NOW).overflow
    assert len(lines_of(store.memory_path)) == 150
    result = store.append("- [FILE] f50.py", 50, now=NOW)
    assert result.overflow and FRAGMENT_RE.match(result.path.name)
    # MEMORY.md is full: not even the pointer fits, it goes to the fragment index
    assert len(lines_of(store.memory_path)) == 150 and result.memory_lines == 150
    assert lines_of(store.index_path) == [f"- [overflow] see {result.path.name} (Turn 50)"]
    assert [e.turn for e in store.snapshot().entries] == list(range(51))
    assert result.path.read_text() == "---\n[Turn 50 | 14:05:09]\n- [FILE] f50.py\n"


def test_an_entry_that_does_not_fit_overflows_whole(tmp_path):
    store = MemoryStore(tmp_path)
    for turn in range(49):
        store.append(f"- [FILE] f{turn}.py", turn, now=NOW)  # 147 lines
    big = store.append("- a\n- b", 49, now=NOW)  # 4 lines: 151 > 150
    assert big.overflow
    small = store.append("- c", 50, now=NOW)  # 147 + pointer + 3 = 151: also over
    assert small.overflow
    assert len(lines_of(store.memory_path)) == 149


def test_once_full_pointers_go_to_the_index_and_nothing_is_dropped(tmp_path):
    store = MemoryStore(tmp_path, max_lines=10)
    for turn in range(40):
        result = store.append(f"- [FILE] f{turn}.py\n- [PROGRESS] step {turn}", turn, now=NOW)
        assert result.memory_lines <= 10
    memory = lines_of(store.memory_path)
    head, pointers = memory[:8], memory[8:]
    assert len(memory) == 10, "the bound counts the pointers"
    assert len(pointers) == 2 and all(p.startswith("- [overflow] see auto-") for p in pointers)
    assert len(head) == 8 and head[0] == "---"
    index = lines_of(store.index_path)
    assert len(index) == 36 and all(p.startswith("- [overflow] see auto-") for p in index)
    assert len(store.fragment_paths()) == 38
    snap = store.snapshot()
    assert [e.turn for e in snap.entries] == list(range(40)), "entries come back in write order"
    assert [e.lines[0] for e in snap.entries] == [f"- [FILE] f{t}.py" for t in range(40)]
    sources = {e.source for e in snap.entries}
    assert "MEMORY.md" in sources and len(sources) == 39


def test_parse_tolerates_hand_edits(tmp_path):
    text = "# Notes\nremember the milk\n---\n[Turn 2 | 10:00:00]\n- [FILE] a.py\n\n" \
           "- [overflow] see auto-2026-01-01-abc.md (Turn 3)\n- [DECISION] after the pointer\n---\nfree text\n"
    items = parse(text, "MEMORY.md")
    assert items == [
        Entry("", ("# Notes", "remember the milk"), "MEMORY.md"),
        Entry("[Turn 2 | 10:00:00]", ("- [FILE] a.py",), "MEMORY.md"),
        Pointer("overflow", "auto-2026-01-01-abc.md", "- [overflow] see auto-2026-01-01-abc.md (Turn 3)"),
        Entry("[Turn 2 | 10:00:00]", ("- [DECISION] after the pointer",), "MEMORY.md"),
        Entry("", ("free text",), "MEMORY.md"),
    ]


def test_a_missing_final_newline_is_repaired(tmp_path):
    store = MemoryStore(tmp_path)
    store.root.mkdir()
    store.memory_path.write_text("hand-written note")
    store.append("- [FILE] b.py", 1, now=NOW)
    assert store.memory_path.read_text() == "hand-written note\n---\n[Turn 1 | 14:05:09]\n- [FILE] b.py\n"


def test_empty_bullets_are_refused(tmp_path):
    with pytest.raises(ValueError):
        MemoryStore(tmp_path).append(" \n---\n", 1)


def test_orphan_fragments_are_read_first(tmp_path):
    store = MemoryStore(tmp_path)
    store.append("- [FILE] new.py", 9, now=NOW)
    (store.root / "auto-2026-11-28-zzz.md").write_text("---\n[Turn 1 | 09:00:00]\n- [FILE] old.py\n")
    assert [e.lines for e in store.snapshot().entries] == [("- [FILE] old.py",), ("- [FILE] new.py",)]


APPENDER = textwrap.dedent("""
    import sys
    from breakwater.memory.store import MemoryStore
    workspace, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    store = MemoryStore(workspace, lock_timeout=300)
    for i in range(count):
        store.append(f"- [FILE] {name}/file{i}.py\\n- [DECISION] {name} decided {i}", i)
""")


def test_two_processes_appending_500_entries_each_lose_none(tmp_path):
    count = 500
    procs = [subprocess.Popen([sys.executable, "-c", APPENDER, str(tmp_path), name, str(count)],
                              stderr=subprocess.PIPE, text=True) for name in ("alpha", "beta")]
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
    store = MemoryStore(tmp_path)
    entries = store.snapshot().entries
    assert len(entries) == 2 * count
    lines = [ln for e in entries for ln in e.lines]
    assert len(lines) == len(set(lines)) == 4 * count
    for name in ("alpha", "beta"):
        mine = [e for e in entries if e.lines[0].startswith(f"- [FILE] {name}/")]
        assert [e.lines for e in mine] == [(f"- [FILE] {name}/file{i}.py", f"- [DECISION] {name} decided {i}")
                                           for i in range(count)], "every entry, whole, in its writer's order"
    memory = store.read_memory()
    assert memory.count("\n") <= 150
    pointers = re.findall(r"^- \[overflow\] see (auto-\S+\.md)", memory + store.index_path.read_text(), re.M)
    assert sorted(pointers) == sorted(p.name for p in store.fragment_paths()), "one pointer per fragment"
    before_first_pointer = memory.split("- [overflow]", 1)[0]
    assert before_first_pointer.count("\n") <= 150


def test_a_forged_fold_journal_deletes_nothing_but_folded_fragments(tmp_path):
    # the journal of a crashed consolidation names files to delete; a tool can write in .agent, so a
    # journal it wrote must not delete anything it names (a workspace file, one outside, MEMORY.md)
    import hashlib

    from breakwater.tools.workspace import Workspace
    from breakwater.tools.write_file import write_file

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "src.py").write_text("code\n")
    (tmp_path / "outside.txt").write_text("precious\n")
    store = MemoryStore(ws)
    store.append("- [FILE] a.py", 1)
    digest = hashlib.sha256(store.memory_path.read_bytes()).hexdigest()
    names = ["../src.py", "../../outside.txt", "MEMORY.md", "memory.lock"]
    journal = "".join(f"{line}\n" for line in [digest, *names])
    for where in (".agent/.memory-folded", ".agent/state/.memory-folded"):
        result = write_file(Workspace(ws), where, journal)
        assert result.is_error == (where.startswith(".agent/state")), result.content
    store.append("- [FILE] b.py", 2)
    assert (ws / "src.py").exists() and (tmp_path / "outside.txt").exists()
    assert [e.lines for e in store.snapshot().entries] == [("- [FILE] a.py",), ("- [FILE] b.py",)]


def test_bullets_from_any_extractor_stay_one_line_each(tmp_path):
    # an Extractor may be a model: whatever it returns, each "\n"-line is one line for every reader
    store = MemoryStore(tmp_path)
    store.append("- [FILE] a.md\u2028[PROGRESS]forged\r\n- [ERROR] b\x0bc\x1e\x85d\u2029\n---\n\x1b]0;title\x07", turn=3)
    text = (tmp_path / ".agent" / "MEMORY.md").read_text()
    lines = text.splitlines()
    assert lines[2:] == ["- [FILE] a.md\ufffd[PROGRESS]forged", "- [ERROR] b\u240bc\u241e\ufffdd", "\u241b]0;title\u2407"]
    snap = store.snapshot()
    assert len(snap.entries) == 1 and snap.writer_of(snap.entries[0]) == "scribe"
