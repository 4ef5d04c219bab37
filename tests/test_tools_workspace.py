"""Workspace confinement and spill paths: nothing lands outside, whatever the ids or symlinks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from breakwater.tools.rolling_buffer import RollingOutputBuffer
from breakwater.tools.spill import SPILL_DIR, Spill, safe_component, spill_notice, spill_path, spill_rel
from breakwater.tools.workspace import Workspace, WorkspaceError
from support.fixtures import resolver  # noqa: F401 - the fixture


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
def read(ws: Workspace, path: str) -> bytes:
    fd = ws.open(path, os.O_RDONLY)
    with os.fdopen(fd, "rb") as fh:
        return fh.read()


@pytest.mark.parametrize("path,rel", [("src/main.py", "src/main.py"), ("./src/main.py", "src/main.py"),
                                      ("src/../src/main.py", "src/main.py"), ("new/dir/file.txt", "new/dir/file.txt"),
                                      (".", "."), ("src//main.py", "src/main.py")])
def test_paths_inside_are_named_relative_to_the_root(layout, path, rel):
    ws, _ = layout
    assert ws.rel(path) == rel


@pytest.mark.parametrize("path", ["..", "../outside/secret.txt", "src/../../outside/secret.txt",
                                  "/etc/passwd", "/", "new/../../x"])
def test_paths_outside_are_refused(layout, path):
    ws, _ = layout
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        ws.rel(path)


def test_absolute_path_inside_is_allowed(layout, resolver):
    ws, _ = layout
    assert ws.rel(str(ws.root / "src" / "main.py")) == "src/main.py"
    assert read(ws, str(ws.root / "src" / "main.py")) == b"print(1)\n"


@pytest.mark.parametrize("path", ["", "src/\x00main.py"])
def test_malformed_paths_are_refused(layout, path):
    ws, _ = layout
    with pytest.raises(WorkspaceError):
        ws.rel(path)


def test_symlinks_out_of_the_workspace_are_refused_when_opened(layout, resolver):
    ws, outside = layout
    (ws.root / "to_outside").symlink_to(outside)
    (ws.root / "secret_link").symlink_to(outside / "secret.txt")
    (ws.root / "dangling").symlink_to(outside / "not_yet.txt")
    (ws.root / "up").symlink_to("../outside")
    for path in ["to_outside/secret.txt", "secret_link", "up/secret.txt"]:
        with pytest.raises(WorkspaceError):
            ws.open(path, os.O_RDONLY)
    for path in ["to_outside/new_file.txt", "dangling"]:
        with pytest.raises(WorkspaceError):
            ws.open(path, os.O_WRONLY | os.O_CREAT)
    with pytest.raises(WorkspaceError):
        ws.open_dir("to_outside/a/b", create=True)
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_symlinks_inside_are_followed_where_the_kernel_can_check_them(layout, resolver):
    ws, _ = layout
    (ws.root / "to_src").symlink_to("src")
    if resolver == "openat2":
        assert read(ws, "to_src/main.py") == b"print(1)\n"
    else:
        with pytest.raises(WorkspaceError, match="symbolic link"):
            read(ws, "to_src/main.py")


def test_open_dir_creates_what_is_missing(layout, resolver):
    ws, _ = layout
    os.close(ws.open_dir("x/y/z", create=True))
    assert (ws.root / "x" / "y" / "z").is_dir()
    with pytest.raises(FileNotFoundError):
        ws.open_dir("p/q")


def test_root_itself_may_be_a_symlink(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (real / "a.txt").write_text("a")
    (tmp_path / "link").symlink_to(real)
    ws = Workspace(tmp_path / "link")
    assert ws.root == real
    assert read(ws, "a.txt") == b"a"


def test_missing_workspace_is_an_error(tmp_path):
    with pytest.raises(WorkspaceError, match="not a directory"):
        Workspace(tmp_path / "nope")


# -- spill paths ----------------------------------------------------------------------------------
EVIL_IDS = ["../../x", "/etc/passwd", "a/b", "", ".", "..", "a\x00b", "x" * 5000, "..\\..\\win",
            "~root", "name with spaces", "日本語", ".hidden", "call_1/../../../etc"]


def make_spill(ws: Workspace, session_id: str, tool_call_id: str) -> Spill:
    spill = Spill.create_in(ws, session_id, tool_call_id)
    os.close(spill.fd)
    spill.close()
    return spill


@pytest.mark.parametrize("session_id", EVIL_IDS)
@pytest.mark.parametrize("tool_call_id", EVIL_IDS)
def test_spill_paths_never_leave_the_spill_dir(layout, session_id, tool_call_id):
    ws, _ = layout
    path = make_spill(ws, session_id, tool_call_id).path
    spill_root = (ws.root / SPILL_DIR).resolve()
    assert path.parent.parent == spill_root
    assert path.name.endswith(".log")
    assert len(path.parent.name) <= 100 and len(path.name) <= 104
    assert not path.parent.name.startswith(".") and not path.name.startswith(".")
    assert path.is_file()


@settings(max_examples=200, deadline=None)
@given(session_id=st.text(max_size=300), tool_call_id=st.text(max_size=300))
def test_any_ids_stay_inside(session_id, tool_call_id):
    rel = Path(spill_rel(session_id, tool_call_id))
    assert rel.parent.parent == SPILL_DIR and len(rel.parts) == 4


def test_ordinary_ids_are_kept_as_they_are(layout):
    ws, _ = layout
    spill = make_spill(ws, "s1", "call_1")
    assert (spill.rel, spill.path) == (".agent/spill/s1/call_1.log", ws.root / ".agent" / "spill" / "s1" / "call_1.log")
    assert safe_component("call_AbC-12.x", "call") == "call_AbC-12.x"


def test_different_ids_never_share_a_file():
    ids = ["a/b", "a_b", "a:b", "a b", "", ".", "..", "_", "_."]
    assert len({safe_component(i, "call") for i in ids}) == len(ids)


def test_symlinked_agent_dir_pointing_outside_is_refused(layout):
    ws, outside = layout
    (ws.root / ".agent").symlink_to(outside)
    with pytest.raises(WorkspaceError):
        Spill.create_in(ws, "s1", "call_1")
    assert not (outside / "spill").exists()


@pytest.mark.parametrize("plant", ["hard link", "symlink", "old spill"])
def test_something_planted_at_the_spill_path_is_never_written_through(layout, plant):
    ws, outside = layout
    victim = ws.root / "victim.txt"          # a hard link must share a file system, so it is inside
    victim.write_bytes(b"precious")
    spill_dir = ws.root / SPILL_DIR / "s1"
    spill_dir.mkdir(parents=True)
    planted = spill_dir / "call_1.log"
    if plant == "hard link":
        os.link(victim, planted)
    elif plant == "symlink":
        planted.symlink_to(outside / "secret.txt")
    else:
        planted.write_bytes(b"an earlier run")
    with RollingOutputBuffer(10, spill=Spill.create_in(ws, "s1", "call_1"), keep_spill="always") as buf:
        buf.write(b"new output\n")
    assert buf.spill_path == spill_dir / "call_1-1.log"
    assert buf.spill_path.read_bytes() == b"new output\n"
    assert victim.read_bytes() == b"precious"
    assert (outside / "secret.txt").read_text() == "secret"


def test_a_discarded_spill_removes_only_its_own_file(layout):
    ws, _ = layout
    spill = Spill.create_in(ws, "s1", "call_1")
    os.unlink(spill.path)
    spill.path.write_bytes(b"someone else's")     # the name now holds another file
    spill.discard()
    os.close(spill.fd)
    spill.close()
    assert spill.path.read_bytes() == b"someone else's"


def test_spill_notice_names_path_counts_and_how_to_read():
    notice = spill_notice(".agent/spill/s1/call_1.log", total_lines=300_000, total_bytes=1_988_895,
                          dropped_lines=299_600, cut_lines=0, first_dropped_line=81, read_max_lines=400)
    assert ".agent/spill/s1/call_1.log" in notice
    assert "300000 lines, 1988895 bytes" in notice
    assert "299600 lines were truncated above (lines 81-299680)" in notice
    assert 'read_file(path=".agent/spill/s1/call_1.log", start_line=81, end_line=480)' in notice


def test_spill_dir_is_readable_through_the_workspace(layout):
    ws, _ = layout
    spill = make_spill(ws, "s1", "c1")
    spill.path.write_text("x\n")
    assert read(ws, spill.rel) == b"x\n"


def test_spill_path_names_the_first_spill_and_makes_its_directory(layout):
    ws, _ = layout
    path = spill_path(ws, "s1", "call_1")
    assert path == ws.root / ".agent" / "spill" / "s1" / "call_1.log" and path.parent.is_dir()
    assert not path.exists()


# -- issue 27 item 1: Breakwater's own folders follow no link at all --------------------------------
def test_owned_dir_refuses_links_hard_links_and_fifos(tmp_path, resolver):
    from breakwater.core.log.beneath import OwnedDir, UnsafePathError

    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    victim = outside / "bashrc"
    victim.write_text("keep\n")
    (ws / "inner").mkdir()
    (ws / ".agent").symlink_to("inner")                 # a link that stays inside is refused too
    with pytest.raises(UnsafePathError, match="refused, a symbolic link"):
        OwnedDir(ws, ".agent").append("MEMORY.md", b"x")
    (ws / ".agent").unlink()
    own = OwnedDir(ws, ".agent/sessions")
    own.append("log.jsonl", b"one\n")
    (ws / ".agent" / "sessions" / "linked").symlink_to(victim)
    os.link(victim, ws / ".agent" / "sessions" / "hard")
    os.mkfifo(ws / ".agent" / "sessions" / "fifo")
    for name, why in [("linked", "a symbolic link"), ("hard", "other hard links"), ("fifo", "regular file")]:
        with pytest.raises(UnsafePathError, match=why):
            own.append(name, b"evil\n")
    assert victim.read_text() == "keep\n"
    assert own.read("log.jsonl") == b"one\n"


def test_an_owned_folder_takes_only_one_file_name(tmp_path):
    # names read from files a tool may have written (a fold journal) never reach past the folder
    from breakwater.core.log.beneath import OwnedDir, UnsafePathError

    (tmp_path / "a").mkdir()
    (tmp_path / "x").write_text("precious\n")
    folder = OwnedDir(tmp_path, "a")
    for call in (lambda: folder.unlink("../x"), lambda: folder.read("../x"), lambda: folder.stat("../x"),
                 lambda: folder.replace("../x", b"y"), lambda: folder.append("..", b"y"), lambda: folder.exists("")):
        with pytest.raises(UnsafePathError, match="not one file name"):
            call()
    assert (tmp_path / "x").read_text() == "precious\n"
