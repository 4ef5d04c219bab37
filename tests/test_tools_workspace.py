"""Workspace confinement and spill paths: nothing lands outside, whatever the ids or symlinks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from breakwater.tools.spill import SPILL_DIR, safe_component, spill_notice, spill_path
from breakwater.tools.workspace import Workspace, WorkspaceError


@pytest.fixture
def layout(tmp_path):
    ws_dir = tmp_path / "ws"
    outside = tmp_path / "outside"
    ws_dir.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (ws_dir / "src").mkdir()
    (ws_dir / "src" / "main.py").write_text("print(1)\n")
    return Workspace(ws_dir), outside


# -- workspace paths ------------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["src/main.py", "./src/main.py", "src/../src/main.py", "new/dir/file.txt", "."])
def test_paths_inside_resolve(layout, path):
    ws, _ = layout
    real = ws.resolve(path)
    assert real == ws.root or real.is_relative_to(ws.root)


@pytest.mark.parametrize("path", ["..", "../outside/secret.txt", "src/../../outside/secret.txt",
                                  "/etc/passwd", "/", "new/../../x"])
def test_paths_outside_are_refused(layout, path):
    ws, _ = layout
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        ws.resolve(path)


def test_absolute_path_inside_is_allowed(layout):
    ws, _ = layout
    assert ws.resolve(str(ws.root / "src" / "main.py")) == ws.root / "src" / "main.py"


@pytest.mark.parametrize("path", ["", "src/\x00main.py"])
def test_malformed_paths_are_refused(layout, path):
    ws, _ = layout
    with pytest.raises(WorkspaceError):
        ws.resolve(path)


def test_symlinks_are_judged_by_where_they_point(layout):
    ws, outside = layout
    (ws.root / "to_outside").symlink_to(outside)
    (ws.root / "secret_link").symlink_to(outside / "secret.txt")
    (ws.root / "dangling").symlink_to(outside / "not_yet.txt")
    (ws.root / "to_src").symlink_to(ws.root / "src")
    for path in ["to_outside", "to_outside/secret.txt", "to_outside/new_file.txt", "to_outside/a/b/new.txt",
                 "secret_link", "dangling"]:
        with pytest.raises(WorkspaceError):
            ws.resolve(path)
    assert ws.resolve("to_src/main.py") == ws.root / "src" / "main.py"
    assert ws.relative("to_src/main.py") == "src/main.py"


def test_root_itself_may_be_a_symlink(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    ws = Workspace(tmp_path / "link")
    assert ws.root == real
    assert ws.resolve("a.txt") == real / "a.txt"


def test_missing_workspace_is_an_error(tmp_path):
    with pytest.raises(WorkspaceError, match="not a directory"):
        Workspace(tmp_path / "nope")


# -- spill paths ----------------------------------------------------------------------------------
EVIL_IDS = ["../../x", "/etc/passwd", "a/b", "", ".", "..", "a\x00b", "x" * 5000, "..\\..\\win",
            "~root", "name with spaces", "日本語", ".hidden", "call_1/../../../etc"]


@pytest.mark.parametrize("session_id", EVIL_IDS)
@pytest.mark.parametrize("tool_call_id", EVIL_IDS)
def test_spill_paths_never_leave_the_spill_dir(layout, session_id, tool_call_id):
    ws, _ = layout
    path = spill_path(ws, session_id, tool_call_id)
    spill_root = (ws.root / SPILL_DIR).resolve()
    assert path.parent.parent == spill_root
    assert path.name.endswith(".log")
    assert len(path.parent.name) <= 100 and len(path.name) <= 104
    assert not path.parent.name.startswith(".") and not path.name.startswith(".")
    assert path.parent.is_dir()


@settings(max_examples=200, deadline=None)
@given(session_id=st.text(max_size=300), tool_call_id=st.text(max_size=300))
def test_any_ids_stay_inside(tmp_path_factory, session_id, tool_call_id):
    ws = Workspace(tmp_path_factory.mktemp("ws"))
    path = spill_path(ws, session_id, tool_call_id, create_dir=False)
    assert path.parent.parent == ws.root / ".agent" / "spill"


def test_ordinary_ids_are_kept_as_they_are(layout):
    ws, _ = layout
    assert spill_path(ws, "s1", "call_1") == ws.root / ".agent" / "spill" / "s1" / "call_1.log"
    assert safe_component("call_AbC-12.x", "call") == "call_AbC-12.x"


def test_different_ids_never_share_a_file():
    ids = ["a/b", "a_b", "a:b", "a b", "", ".", "..", "_", "_."]
    assert len({safe_component(i, "call") for i in ids}) == len(ids)


def test_symlinked_agent_dir_pointing_outside_is_refused(layout):
    ws, outside = layout
    (ws.root / ".agent").symlink_to(outside)
    with pytest.raises(WorkspaceError):
        spill_path(ws, "s1", "call_1")
    assert not (outside / "spill").exists()


def test_spill_notice_names_path_counts_and_how_to_read():
    notice = spill_notice(".agent/spill/s1/call_1.log", total_lines=300_000, total_bytes=1_988_895,
                          dropped_lines=299_600, cut_lines=0, first_dropped_line=81, read_max_lines=400)
    assert ".agent/spill/s1/call_1.log" in notice
    assert "300000 lines, 1988895 bytes" in notice
    assert "299600 lines were truncated above (lines 81-299680)" in notice
    assert 'read_file(path=".agent/spill/s1/call_1.log", start_line=81, end_line=480)' in notice


def test_spill_dir_is_readable_through_the_workspace(layout):
    ws, _ = layout
    path = spill_path(ws, "s1", "c1")
    path.write_text("x\n")
    assert ws.resolve(".agent/spill/s1/c1.log") == path
    assert Path(os.path.relpath(path, ws.root)).as_posix() == ws.relative(path)
