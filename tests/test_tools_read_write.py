"""read_file slices and write_file atomic writes, on real files."""

from __future__ import annotations

import os
import stat
import tracemalloc

import pytest

from breakwater.tools.read_file import read_file
from breakwater.tools.workspace import Workspace
from breakwater.tools.write_file import write_file


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    (root / "big.log").write_text("".join(f"line {i}\n" for i in range(1, 20_001)))
    return Workspace(root)


def body(result):
    return result.content.split("\n")


# -- read_file ------------------------------------------------------------------------------------
def test_default_read_is_capped_with_the_next_range(ws):
    r = read_file(ws, "big.log")
    lines = body(r)
    assert lines[0] == "[big.log: lines 1-400 of 20000]"
    assert lines[1:401] == [f"line {i}" for i in range(1, 401)]
    assert lines[401] == ('[19600 more lines after line 400; next: '
                          'read_file(path="big.log", start_line=401, end_line=800)]')
    assert len(lines) == 402
    assert r.meta["capped"] is True
    assert (r.meta["start_line"], r.meta["end_line"], r.meta["total_lines"]) == (1, 400, 20_000)


def test_explicit_range_is_exact(ws):
    r = read_file(ws, "big.log", start_line=120, end_line=220)
    lines = body(r)
    assert lines[0] == "[big.log: lines 120-220 of 20000]"
    assert lines[1:102] == [f"line {i}" for i in range(120, 221)]
    assert r.meta["capped"] is False
    assert "more lines after line 220" in lines[-1]


def test_a_range_beyond_the_cap_is_cut_to_the_cap(ws):
    r = read_file(ws, "big.log", start_line=1000, end_line=5000)
    lines = body(r)
    assert lines[0] == "[big.log: lines 1000-1399 of 20000]"
    assert len(lines) == 402
    assert lines[-1].startswith("[capped at 400 lines per call; 18601 more lines after line 1399; next: ")
    assert 'start_line=1400, end_line=1799' in lines[-1]
    assert r.meta["capped"] is True


def test_the_end_of_the_file(ws):
    r = read_file(ws, "big.log", start_line=19_990, end_line=30_000)
    assert body(r) == ["[big.log: lines 19990-20000 of 20000]"] + [f"line {i}" for i in range(19_990, 20_001)]
    assert r.meta["capped"] is False


def test_start_past_the_end_is_a_clear_error(ws):
    r = read_file(ws, "big.log", start_line=20_001)
    assert r.is_error
    assert r.content == "Error: start_line 20001 is past the end of big.log (20000 lines)"


@pytest.mark.parametrize("start,end,msg", [(0, None, "start_line must be 1 or more"),
                                           (10, 5, "end_line 5 is before start_line 10")])
def test_bad_ranges(ws, start, end, msg):
    r = read_file(ws, "big.log", start_line=start, end_line=end)
    assert r.is_error and msg in r.content


def test_last_line_without_newline_and_crlf(ws):
    (ws.root / "a.txt").write_bytes(b"one\r\ntwo\r\nthree")
    r = read_file(ws, "a.txt")
    assert r.content == "[a.txt: lines 1-3 of 3]\none\ntwo\nthree"


def test_empty_file(ws):
    (ws.root / "empty.txt").write_bytes(b"")
    r = read_file(ws, "empty.txt")
    assert r.content == "[empty.txt: empty file]"
    assert not r.is_error


def test_binary_file_is_shown_as_a_hex_range(ws):
    (ws.root / "blob.bin").write_bytes(b"\x7fELF\x00\x01" + bytes(range(256)) * 10)
    r = read_file(ws, "blob.bin")
    lines = body(r)
    assert lines[0] == "[blob.bin: binary file, 2566 bytes; bytes 0-1023 as hex]"
    assert lines[1] == "00000000  7f 45 4c 46 00 01 00 01  02 03 04 05 06 07 08 09  |.ELF............|"
    assert len(lines) == 1 + 64 + 1
    assert lines[-1] == '[1542 more bytes after byte 1023; next: read_file(path="blob.bin", offset=1024, length=1024)]'
    assert (r.meta["binary"], r.meta["offset"], r.meta["length"]) == (True, 0, 1024)
    last = read_file(ws, "blob.bin", offset=2560)
    assert body(last) == ["[blob.bin: binary file, 2566 bytes; bytes 2560-2565 as hex]",
                          "00000a00  fa fb fc fd fe ff                                 |......|"]
    assert read_file(ws, "blob.bin", offset=2566).content == "Error: offset 2566 is past the end of blob.bin (2566 bytes)"
    assert body(read_file(ws, "blob.bin", start_line=5))[0] == (
        "[blob.bin: binary file, 2566 bytes; bytes 0-1023 as hex; a binary file has no lines to slice, "
        "use offset and length]")
    (ws.root / "big.bin").write_bytes(bytes(100_000))
    assert len(body(read_file(ws, "big.bin", length=10**6))) == 1 + 4096 // 16 + 1     # capped per call


def test_any_file_has_a_hex_view_on_request(ws):
    r = read_file(ws, "big.log", offset=0, length=8)
    assert body(r)[1] == "00000000  6c 69 6e 65 20 31 0a 6c                           |line 1.l|"


def test_missing_file_directory_and_outside_are_messages_not_exceptions(ws, tmp_path):
    (tmp_path / "secret.txt").write_text("secret")
    (ws.root / "leak").symlink_to(tmp_path / "secret.txt")
    assert read_file(ws, "nope.txt").content == "Error: no such file: nope.txt"
    (ws.root / "sub").mkdir()
    assert read_file(ws, "sub").content == "Error: sub is a directory, not a file"
    for path in ["../secret.txt", str(tmp_path / "secret.txt"), "leak"]:
        r = read_file(ws, path)
        assert r.is_error and "outside the workspace" in r.content
        assert "secret" not in r.content.replace("secret.txt", "")


def test_fifo_is_refused_without_blocking(ws):
    os.mkfifo(ws.root / "pipe")
    r = read_file(ws, "pipe")
    assert r.content == "Error: pipe is not a regular file"


def test_long_lines_are_cut(ws):
    (ws.root / "wide.txt").write_bytes(b"a" * 10_000 + b"\nshort\n")
    r = read_file(ws, "wide.txt", max_line_bytes=100)
    lines = body(r)
    assert lines[1] == "a" * 100 + "… [line cut: 9900 more bytes]"
    assert lines[2] == "short"
    assert r.meta["cut_lines"] == 1


def test_huge_file_is_streamed_not_loaded(ws):
    line = b"x" * 99 + b"\n"
    with open(ws.root / "huge.log", "wb") as fh:
        for _ in range(300):
            fh.write(line * 1000)               # 30 MB, 300,000 lines
    tracemalloc.start()
    try:
        r = read_file(ws, "huge.log", start_line=299_990)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert body(r)[0] == "[huge.log: lines 299990-300000 of 300000]"
    assert len(body(r)) == 12
    assert peak < 3_000_000


def test_lines_across_read_chunks(ws, monkeypatch):
    import breakwater.tools.read_file as rf
    monkeypatch.setattr(rf, "CHUNK", 7)
    (ws.root / "f.txt").write_text("".join(f"row {i}\n" for i in range(1, 51)))
    r = read_file(ws, "f.txt", start_line=5, end_line=9)
    assert body(r)[1:6] == [f"row {i}" for i in range(5, 10)]
    assert r.meta["total_lines"] == 50


# -- write_file -----------------------------------------------------------------------------------
def test_write_creates_parents_and_round_trips(ws):
    r = write_file(ws, "deep/er/new.txt", "héllo\n世界\n")
    assert r.content == "Created deep/er/new.txt: 14 bytes, 2 lines."
    assert (ws.root / "deep/er/new.txt").read_text() == "héllo\n世界\n"
    assert r.meta == {"tool": "write_file", "path": "deep/er/new.txt", "bytes": 14, "lines": 2, "created": True}
    r2 = write_file(ws, "deep/er/new.txt", "x")
    assert r2.content.startswith("Replaced deep/er/new.txt: 1 bytes, 1 lines")
    assert (ws.root / "deep/er/new.txt").read_text() == "x"


def test_write_is_atomic_and_keeps_the_mode(ws):
    target = ws.root / "run.sh"
    target.write_text("old")
    target.chmod(0o755)
    inode_before = target.stat().st_ino
    write_file(ws, "run.sh", "#!/bin/sh\necho new\n")
    assert target.read_text() == "#!/bin/sh\necho new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o755
    assert target.stat().st_ino != inode_before        # replaced, not rewritten in place
    assert [p.name for p in ws.root.iterdir() if p.name.endswith(".tmp")] == []


def test_write_refuses_outside_paths(ws, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (ws.root / "out").symlink_to(outside)
    for path in ["../evil.txt", str(tmp_path / "evil.txt"), "out/evil.txt", "out/sub/evil.txt"]:
        r = write_file(ws, path, "pwned")
        assert r.is_error and "outside the workspace" in r.content, path
    assert list(outside.iterdir()) == []
    assert not (tmp_path / "evil.txt").exists()


def test_write_to_a_directory_is_an_error(ws):
    (ws.root / "d").mkdir()
    assert write_file(ws, "d", "x").content == "Error: d is a directory"
    assert write_file(ws, ".", "x").is_error


def test_write_requires_text(ws):
    assert write_file(ws, "a.txt", b"bytes").is_error


def test_the_agents_state_is_judged_by_what_the_folder_is_not_by_its_path(tmp_path):
    # Breakwater's state is refused to write_file wherever the workspace now is (it was judged by
    # the path /proc gave for the folder, compared with the root's old path: a moved workspace let it through)
    root = tmp_path / "project"
    (root / ".agent" / "sessions").mkdir(parents=True)
    (root / ".agent" / "spill" / "s1").mkdir(parents=True)
    (root / ".agent" / "state").mkdir()
    (root / "st").symlink_to(".agent/state")      # a link a command planted, relative and inside
    ws = Workspace(root)
    root.rename(tmp_path / "moved")
    for path in (".agent/sessions/forged.jsonl", ".agent/spill/s1/call.log", ".agent/memory.lock",
                 "st/memory-writers"):
        result = write_file(ws, path, "forged")
        assert result.is_error and "Breakwater's own state" in result.content, (path, result.content)
    assert write_file(ws, ".agent/MEMORY.md", "- a note\n").is_error is False
    assert sorted(p.name for p in (tmp_path / "moved").rglob("*") if p.is_file()) == ["MEMORY.md"]
