"""The headless half of the spill pane: listing, line index, capped reads, safe text, search."""

from __future__ import annotations

import os
from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from breakwater.tools.spill_index import (LineIndex, display_text, list_spill_files, open_spill, read_line, read_lines,
                                          scan_line_ends, tail_origin)
from breakwater.tools.spill_search import Query, find_backward, find_forward, search
from support.spills import write_spill


def build_index(fd: int, size: int, tail_lines: int, chunk: int) -> LineIndex:
    """The order the pane uses: the tail first, then the head prepended."""
    origin = tail_origin(fd, size, tail_lines)
    index = LineIndex(origin)
    for end, ends in scan_line_ends(fd, origin, size, chunk=chunk):
        index.extend(ends, end)
    head = [e for _, ends in scan_line_ends(fd, 0, origin, chunk=chunk) for e in ends]
    if origin:
        index.prepend(array("q", head))
    return index


def lines_of(fd: int, index: LineIndex) -> list[bytes]:
    return [read_line(fd, index, i, cap=1 << 30).data for i in range(len(index))]


def expected_lines(data: bytes) -> list[bytes]:
    parts = data.split(b"\n")
    if parts[-1] == b"":
        parts.pop()
    return [p[:-1] if p.endswith(b"\r") else p for p in parts]


@pytest.fixture
def make_file(tmp_path):
    fds = []

    def make(data: bytes, name: str = "f.log"):
        path = tmp_path / name
        path.write_bytes(data)
        fds.append(open_spill(path))
        return path, fds[-1]
    yield make
    for fd in fds:
        os.close(fd)


@settings(max_examples=150, deadline=None)
@given(data=st.lists(st.sampled_from([b"a", b"\n", b"\r", b"\xff", "é".encode()]), max_size=80).map(b"".join),
       tail_lines=st.integers(0, 6), chunk=st.integers(1, 9))
def test_tail_first_index_reads_back_every_line(tmp_path_factory, data, tail_lines, chunk):
    path = tmp_path_factory.mktemp("idx") / "f.log"
    path.write_bytes(data)
    fd = open_spill(path)
    try:
        index = build_index(fd, len(data), tail_lines, chunk)
        assert index.has_head
        assert lines_of(fd, index) == expected_lines(data)
    finally:
        os.close(fd)


def test_tail_origin_starts_at_a_line_and_costs_only_the_tail(make_file):
    _, fd = make_file(b"one\ntwo\nthree\nfour\n")
    assert tail_origin(fd, 19, 2) == len(b"one\ntwo\n")
    assert tail_origin(fd, 19, 10) == 0
    _, fd2 = make_file(b"x" * 200_000 + b"\nlast", "long.log")
    assert tail_origin(fd2, 200_005, 1) == 200_001


def test_index_extends_as_the_file_grows_and_a_partial_last_line_completes(make_file):
    path, fd = make_file(b"a\nbb")
    index = LineIndex()
    for end, ends in scan_line_ends(fd, 0, 4):
        index.extend(ends, end)
    assert lines_of(fd, index) == [b"a", b"bb"]
    with open(path, "ab") as f:
        f.write(b"b\nccc\n")
    for end, ends in scan_line_ends(fd, index.end, os.fstat(fd).st_size):
        index.extend(ends, end)
    assert lines_of(fd, index) == [b"a", b"bbb", b"ccc"]
    assert [index.line_at(o) for o in (0, 1, 2, 5, 6, 9)] == [0, 0, 1, 1, 2, 2]


def test_a_huge_line_is_read_only_up_to_the_cap(make_file):
    _, fd = make_file(b"head\n" + b"y" * 5_000_000 + b"\ntail\n")
    index = build_index(fd, 5_000_011, 100, 1 << 20)
    line = read_line(fd, index, 1, cap=4096)
    assert line.data == b"y" * 4096 and line.cut == 5_000_000 - 4096
    assert read_line(fd, index, 1, cap=10, skip=4_999_995).data == b"yyyyy"
    assert read_line(fd, index, 2).data == b"tail"


def test_scan_of_a_file_that_shrank_stops_short_instead_of_crashing(make_file):
    path, fd = make_file(b"a\n" * 1000)
    os.truncate(path, 10)
    scanned = list(scan_line_ends(fd, 0, 2000, chunk=64))
    assert scanned[-1][0] == 10 and sum(len(e) for _, e in scanned) == 5


def test_display_text_never_lets_a_control_byte_through():
    raw = b"ok\x1b[31mred\x07\x00 \xff\xfe caf\xc3\xa9\ttab \xc2\x9b \xe2\x80\xae"
    text = display_text(raw)
    assert all(ch == "\t" or (ord(ch) >= 0x20 and not 0x7F <= ord(ch) < 0xA0) for ch in text)
    assert "\u202e" not in text
    assert text.startswith("ok␛[31mred␇␀ \ufffd\ufffd café\ttab")


def test_display_text_of_a_cut_line_drops_the_split_character():
    assert display_text("né".encode()[:2], complete=False) == "n"
    assert display_text("né".encode()[:2], complete=True) == "n\ufffd"


def test_list_spill_files_of_a_session_skips_symlinks_and_other_sessions(tmp_path):
    first = write_spill(tmp_path, "s1", "call_a", b"a\n")
    os.utime(first, (1, 1))
    write_spill(tmp_path, "s1", "call_b", b"bb\n")
    write_spill(tmp_path, "s2", "call_c", b"c\n")
    (first.parent / "evil.log").symlink_to(tmp_path / "secret")
    (first.parent / "notes.txt").write_text("x")
    mine = list_spill_files(tmp_path, "s1")
    assert [f.name for f in mine] == ["call_b", "call_a"]
    assert mine[0].size == 3 and mine[0].session == "s1"
    assert {f.name for f in list_spill_files(tmp_path)} == {"call_a", "call_b", "call_c"}
    assert list_spill_files(tmp_path / "nowhere", "s1") == []


def test_open_spill_refuses_a_symlink(tmp_path):
    (tmp_path / "real.log").write_text("x")
    (tmp_path / "link.log").symlink_to(tmp_path / "real.log")
    with pytest.raises(OSError):
        open_spill(tmp_path / "link.log")


@settings(max_examples=200, deadline=None)
@given(data=st.lists(st.sampled_from([b"ab", b"AB", b"b", b"\n", b"x", "É".encode()]), max_size=40).map(b"".join),
       text=st.sampled_from(["ab", "AB", "b", "bab", "É", "xa"]), at=st.integers(0, 80))
def test_search_agrees_with_a_plain_scan(tmp_path_factory, data, text, at):
    path = tmp_path_factory.mktemp("search") / "f.log"
    path.write_bytes(data)
    fd = open_spill(path)
    query = Query.parse(text)
    hay = data.lower() if query.fold else data
    offsets = [i for i in range(len(hay)) if hay.startswith(query.needle, i)]
    at = min(at, len(data))
    try:
        nxt = find_forward(fd, query, at, len(data), chunk=3)
        assert (nxt.offset if nxt else None) == next((o for o in offsets if o >= at), None)
        prev = find_backward(fd, query, 0, at, len(data), chunk=3)
        assert (prev.offset if prev else None) == next((o for o in reversed(offsets) if o < at), None)
        wrapped, did_wrap = search(fd, query, 0, len(data), at)
        assert (wrapped.offset if wrapped else None) == (next((o for o in offsets if o >= at), None)
                                                         if not did_wrap else offsets[0])
    finally:
        os.close(fd)


def test_smart_case():
    assert Query.parse("error").fold and not Query.parse("Error").fold
    assert Query.parse("") is None


def test_search_stops_when_cancelled(make_file):
    _, fd = make_file(b"x" * 100 + b"needle")
    assert find_forward(fd, Query.parse("needle"), 0, 106, chunk=10, cancelled=lambda: True) is None
    assert find_forward(fd, Query.parse("needle"), 0, 106, chunk=10).offset == 100


@settings(max_examples=100, deadline=None)
@given(data=st.lists(st.sampled_from([b"abc", b"\n", b"\r\n", b"x" * 7]), max_size=30).map(b"".join),
       first=st.integers(0, 12), count=st.integers(1, 12), cap=st.integers(1, 9))
def test_read_lines_in_one_block_equals_reading_each_line(tmp_path_factory, data, first, count, cap):
    path = tmp_path_factory.mktemp("rows") / "f.log"
    path.write_bytes(data)
    fd = open_spill(path)
    try:
        index = build_index(fd, len(data), 3, 4)
        expected = [read_line(fd, index, i, cap=cap) for i in range(first, min(first + count, len(index)))]
        assert read_lines(fd, index, first, count, cap=cap) == expected
    finally:
        os.close(fd)
