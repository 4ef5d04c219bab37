"""RollingOutputBuffer: exact head/tail/dropped counts, zero-loss spill, bounded memory."""

from __future__ import annotations

import os
import random
import re
import threading
import tracemalloc

import pytest
from hypothesis import given, settings, strategies as st

from breakwater.tools import rolling_buffer as rb
from breakwater.tools.rolling_buffer import RollingOutputBuffer, head_size_for, truncation_marker


def reference(stream: bytes, max_lines: int, max_line_bytes: int):
    """The buffer's contract written the slow, obvious way."""
    lines = stream.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    head_n = head_size_for(max_lines)
    tail_n = max_lines - head_n
    head = lines[:head_n]
    tail = lines[head_n:][-tail_n:] if tail_n else []
    cap = lambda line: line if len(line) <= max_line_bytes else ("cut", len(line))  # noqa: E731
    return [cap(x) for x in head], [cap(x) for x in tail], len(lines) - len(head) - len(tail), len(lines)


def observed(buf: RollingOutputBuffer):
    head, tail, dropped, total, _ = buf._lines()
    norm = lambda x: ("cut", x.size) if isinstance(x, rb._CutLine) else x  # noqa: E731
    return [norm(x) for x in head], [norm(x) for x in tail], dropped, total


def feed(buf: RollingOutputBuffer, data: bytes, sizes) -> None:
    pos = 0
    for size in sizes:
        if pos >= len(data):
            break
        buf.write(data[pos:pos + size])
        pos += size
    if pos < len(data):
        buf.write(data[pos:])


def seq(n: int) -> bytes:
    return b"".join(b"%d\n" % i for i in range(1, n + 1))


# -- head / tail / dropped ------------------------------------------------------------------------
@pytest.mark.parametrize("max_lines,head", [(1, 1), (10, 10), (50, 50), (60, 50), (100, 50), (250, 50),
                                            (400, 80), (1000, 200)])
def test_head_size_is_a_fifth_at_least_50_clamped(max_lines, head):
    assert head_size_for(max_lines) == head
    buf = RollingOutputBuffer(max_lines)
    assert (buf.head_size, buf.tail_size) == (head, max_lines - head)


@pytest.mark.parametrize("chunk", [1, 3, 7, 100, 4096, 65536, 10**9])
def test_seq_head_tail_and_dropped_are_exact(chunk):
    buf = RollingOutputBuffer(400)
    feed(buf, seq(10_000), [chunk] * 10**6)
    buf.close()
    text = buf.render()
    head, marker, tail = text.split("\n\n")
    assert head.split("\n") == [str(i) for i in range(1, 81)]
    assert marker == "... [9600 lines truncated for context efficiency] ..."
    assert tail.split("\n") == [str(i) for i in range(9681, 10_001)]
    assert (buf.total_lines, buf.dropped_lines, buf.cut_lines) == (10_000, 9600, 0)
    assert buf.total_bytes == len(seq(10_000))
    assert str(buf) == text


def test_no_marker_when_nothing_dropped():
    buf = RollingOutputBuffer(400)
    buf.write(seq(400))
    buf.close()
    assert buf.render() == "\n".join(str(i) for i in range(1, 401))
    assert buf.dropped_lines == 0
    assert "truncated" not in buf.render()


def test_unterminated_last_line_counts_and_shows_before_close():
    buf = RollingOutputBuffer(60)   # head 50, tail 10
    buf.write(seq(100) + b"last")
    assert buf.total_lines == 101
    assert buf.dropped_lines == 41
    assert buf.render().endswith("\n100\nlast")
    buf.close()
    assert (buf.total_lines, buf.dropped_lines) == (101, 41)
    assert buf.render().endswith("\n100\nlast")


def test_only_head_when_max_lines_is_small():
    buf = RollingOutputBuffer(5)
    buf.write(seq(100))
    buf.close()
    assert buf.render() == "1\n2\n3\n4\n5\n\n" + truncation_marker(95)


def test_crlf_lines_show_without_cr():
    buf = RollingOutputBuffer(100)
    buf.write(b"one\r\ntwo\r\n")
    buf.close()
    assert buf.render() == "one\ntwo"


def test_text_writes_are_encoded_as_utf8():
    buf = RollingOutputBuffer(100)
    assert buf.write("héllo\n日本\n") == len("héllo\n日本\n")
    buf.close()
    assert buf.render() == "héllo\n日本"
    assert buf.total_bytes == len("héllo\n日本\n".encode())


stream_parts = st.lists(st.tuples(st.integers(0, 40), st.sampled_from([b"\n", b"\r\n", b""])), max_size=400)


@settings(max_examples=300, deadline=None)
@given(parts=stream_parts, max_lines=st.sampled_from([1, 2, 10, 50, 51, 60, 120, 400]),
       max_line_bytes=st.sampled_from([1, 4, 16, 4000]), seed=st.integers(0, 2**32),
       small_limits=st.booleans())
def test_matches_the_reference_model_for_any_stream_and_chunking(parts, max_lines, max_line_bytes, seed,
                                                                   small_limits, monkeypatch_module):
    rng = random.Random(seed)
    stream = b"".join(bytes([97 + i % 26]) * n + str(i).encode() + end for i, (n, end) in enumerate(parts))
    if small_limits:   # exercise the paths taken for huge writes with tiny data
        monkeypatch_module.setattr(rb, "_PENDING_MAX", 64)
        monkeypatch_module.setattr(rb, "_SPLIT_LIMIT", 32)
    try:
        buf = RollingOutputBuffer(max_lines, max_line_bytes)
        feed(buf, stream, (rng.choice([1, 2, 5, 33, 500, 10**6]) for _ in range(10**6)))
        if rng.random() < 0.5:
            buf.close()
        exp_head, exp_tail, exp_dropped, exp_total = reference(stream, max_lines, max_line_bytes)
        assert observed(buf) == (exp_head, exp_tail, exp_dropped, exp_total)
        assert buf.cut_lines == sum(isinstance(x, tuple) for x in exp_head + exp_tail)
        assert buf.total_bytes == len(stream)
    finally:
        monkeypatch_module.undo()


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


# -- giant lines and UTF-8 ------------------------------------------------------------------------
def test_giant_line_without_newline_is_capped_and_spilled_whole(tmp_path):
    chunk = (bytes(range(256)) * 256).replace(b"\n", b"x")   # 64 KiB, every byte value but newline
    spill = tmp_path / "giant.log"
    buf = RollingOutputBuffer(400, max_line_bytes=4000, spill_path=spill)
    n = (50 * 1024 * 1024) // len(chunk)
    tracemalloc.start()
    try:
        for _ in range(n):
            buf.write(chunk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    buf.close()
    assert peak < 1_000_000, f"ingesting one 50 MB line took {peak} bytes of Python memory"
    assert (buf.total_lines, buf.dropped_lines, buf.cut_lines) == (1, 0, 1)
    assert buf.total_bytes == n * len(chunk)
    assert f"… [line cut: {n * len(chunk) - 4000} more bytes]" in buf.render()
    assert spill.stat().st_size == n * len(chunk)
    with open(spill, "rb") as fh:
        while block := fh.read(len(chunk)):
            assert block == chunk
    assert buf.spill_path == spill


def test_memory_stays_bounded_for_a_long_stream_of_long_lines():
    line = b"y" * 9000 + b"\n"                 # every kept line is cut
    block = line * 7
    buf = RollingOutputBuffer(400)
    tracemalloc.start()
    try:
        for _ in range(3000):
            buf.write(block)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    buf.close()
    assert buf.total_lines == 21_000
    assert buf.cut_lines == 400
    assert peak < 400 * 4000 * 1.5 + 2_000_000


def test_utf8_split_across_chunks_is_not_mangled():
    text = "héllo wörld 日本語 🎉 ok\n" * 50
    data = text.encode()
    buf = RollingOutputBuffer(400)
    for i in range(len(data)):
        buf.write(data[i:i + 1])
    buf.close()
    assert buf.render() == text.rstrip("\n")
    assert "\ufffd" not in buf.render()


def test_cut_never_splits_a_character():
    line = ("日" * 2000).encode()              # 3 bytes each; 4000 is not a multiple of 3
    buf = RollingOutputBuffer(10, max_line_bytes=4000)
    buf.write(line + b"\n" + line)
    buf.close()
    for shown in buf.render().split("\n"):
        assert "\ufffd" not in shown
        assert shown.startswith("日" * 1333 + "…")
    assert buf.cut_lines == 2


def test_invalid_utf8_is_replaced_only_for_display(tmp_path):
    data = b"ok \xff\xfe bad\n\xc3(\n"
    buf = RollingOutputBuffer(10, spill_path=tmp_path / "s.log", keep_spill="always")
    buf.write(data)
    buf.close()
    assert buf.render() == "ok \ufffd\ufffd bad\n\ufffd("
    assert (tmp_path / "s.log").read_bytes() == data


# -- spill ----------------------------------------------------------------------------------------
def test_spill_is_byte_identical_for_binaryish_crlf_streams(tmp_path):
    rng = random.Random(7)
    pieces = [bytes(rng.randrange(256) for _ in range(rng.randrange(0, 300))) + rng.choice([b"\n", b"\r\n", b""])
              for _ in range(20_000)]
    data = b"".join(pieces)
    spill = tmp_path / "s.log"
    buf = RollingOutputBuffer(400, spill_path=spill)
    feed(buf, data, (rng.choice([1, 17, 4096, 65536, 300_000]) for _ in range(10**6)))
    buf.close()
    assert buf.dropped_lines > 0
    assert spill.read_bytes() == data
    assert buf.total_bytes == len(data)


def test_spill_is_deleted_when_nothing_was_dropped_or_cut(tmp_path):
    spill = tmp_path / "s.log"
    buf = RollingOutputBuffer(400, spill_path=spill)
    buf.write(seq(400))
    assert spill.exists()
    buf.close()
    assert not spill.exists()
    assert buf.spill_path is None


def test_spill_is_kept_when_only_a_line_was_cut(tmp_path):
    spill = tmp_path / "s.log"
    with RollingOutputBuffer(400, max_line_bytes=10, spill_path=spill) as buf:
        buf.write(b"short\n" + b"z" * 50 + b"\n")
    assert (buf.dropped_lines, buf.cut_lines) == (0, 1)
    assert spill.read_bytes() == b"short\n" + b"z" * 50 + b"\n"


def test_spill_can_be_kept_always(tmp_path):
    spill = tmp_path / "s.log"
    with RollingOutputBuffer(400, spill_path=spill, keep_spill="always") as buf:
        buf.write(b"tiny\n")
    assert spill.read_bytes() == b"tiny\n"
    assert buf.spill_path == spill


def test_spill_refuses_a_planted_symlink(tmp_path):
    target = tmp_path / "victim"
    target.write_bytes(b"precious")
    (tmp_path / "s.log").symlink_to(target)
    with pytest.raises(OSError):
        RollingOutputBuffer(400, spill_path=tmp_path / "s.log")
    assert target.read_bytes() == b"precious"


def test_flush_makes_the_spill_readable_while_streaming(tmp_path):
    spill = tmp_path / "s.log"
    buf = RollingOutputBuffer(400, spill_path=spill)
    buf.write(b"first\n")
    buf.flush()
    assert spill.read_bytes() == b"first\n"
    buf.close()


# -- sink behaviour -------------------------------------------------------------------------------
def test_pump_from_a_pipe_fd_and_a_file_object(tmp_path):
    data = seq(50_000)
    r, w = os.pipe()

    def writer():
        with os.fdopen(w, "wb") as fh:
            fh.write(data)

    t = threading.Thread(target=writer)
    t.start()
    buf = RollingOutputBuffer(400)
    assert buf.pump(r) == len(data)
    t.join()
    os.close(r)
    buf.close()
    assert buf.total_lines == 50_000

    path = tmp_path / "in.txt"
    path.write_bytes(data)
    buf2 = RollingOutputBuffer(400)
    with open(path, "rb") as fh:
        assert buf2.pump(fh, chunk_size=1000) == len(data)
    buf2.close()
    assert buf2.render() == buf.render()


def test_write_after_close_raises():
    buf = RollingOutputBuffer(10)
    buf.close()
    buf.close()    # idempotent
    with pytest.raises(ValueError):
        buf.write(b"x")


def test_concurrent_writers_lose_nothing(tmp_path):
    threads_n, lines_n = 8, 20_000
    spill = tmp_path / "s.log"
    buf = RollingOutputBuffer(400, spill_path=spill)
    start = threading.Barrier(threads_n)

    def writer(t: int) -> None:
        start.wait()
        for i in range(lines_n):
            buf.write(f"T{t}-{i}\n" if i % 2 else f"T{t}-{i}\n".encode())

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    buf.close()
    total = threads_n * lines_n
    assert buf.total_lines == total
    assert buf.dropped_lines == total - 400
    head, marker, tail = buf.render().split("\n\n")
    shown = head.split("\n") + tail.split("\n")
    assert len(shown) == 400
    assert marker == truncation_marker(total - 400)
    last_seen: dict[str, int] = {}
    for line in shown:
        m = re.fullmatch(r"T(\d)-(\d+)", line)
        assert m, line
        assert int(m[2]) > last_seen.get(m[1], -1)   # each writer's lines stay in order
        last_seen[m[1]] = int(m[2])
    spilled = spill.read_bytes().decode().splitlines()
    assert sorted(spilled) == sorted(f"T{t}-{i}" for t in range(threads_n) for i in range(lines_n))


def test_rejects_nonsense_sizes():
    with pytest.raises(ValueError):
        RollingOutputBuffer(0)
    with pytest.raises(ValueError):
        RollingOutputBuffer(10, max_line_bytes=0)
    with pytest.raises(ValueError):
        RollingOutputBuffer(10, keep_spill="sometimes")


# -- byte budget of the shown result (issue 7 item 12) --------------------------------------------
def shown_bytes(buf: RollingOutputBuffer) -> int:
    return len(buf.render().encode())


def test_many_long_lines_are_capped_in_total_bytes(tmp_path):
    line = b"L%06d " % 0 + b"x" * 2991 + b"\n"           # 3,000 bytes a line
    spill = tmp_path / "s.log"
    buf = RollingOutputBuffer(400, spill_path=spill, max_bytes=30_000)
    for i in range(100_000):
        buf.write(b"L%06d " % i + line[8:])
    buf.close()
    assert shown_bytes(buf) <= 30_000
    text = buf.render()
    head, marker, tail = text.split("\n\n")
    heads, tails = head.split("\n"), tail.split("\n")
    assert heads[0].startswith("L000000 ") and tails[-1].startswith("L099999 ")
    assert [int(x[1:7]) for x in heads] == list(range(len(heads)))
    assert [int(x[1:7]) for x in tails] == list(range(100_000 - len(tails), 100_000))
    assert marker == truncation_marker(100_000 - len(heads) - len(tails))
    assert buf.dropped_lines == 100_000 - len(heads) - len(tails)
    assert buf.shown_head_lines == len(heads) >= 1 and len(tails) > len(heads)
    assert spill.stat().st_size == 100_000 * 3000        # nothing lost
    assert RollingOutputBuffer(400).max_bytes is None


def test_the_head_gets_what_the_tail_does_not_need():
    buf = RollingOutputBuffer(400, max_bytes=2_000)
    for i in range(80):
        buf.write(b"%02d" % i + b"h" * 97 + b"\n")        # the head: 80 lines of 100 bytes
    buf.write(b"end\n")
    buf.close()
    shown = buf.render()
    assert len(shown.encode()) <= 2_000
    assert shown.startswith("00h") and shown.endswith("\nend")
    # far more than the head's fifth of the budget (400 bytes), since the tail needs 4 bytes
    assert buf.shown_head_lines == 19 and buf.dropped_lines == 61


def test_a_line_bigger_than_what_is_left_is_cut_to_fit():
    buf = RollingOutputBuffer(60, max_line_bytes=1_000_000, max_bytes=1_000)    # head 50, tail 10
    buf.write(b"s\n" * 50 + b"z" * 500_000 + b"\n" + b"q" * 500_000)
    buf.close()
    text = buf.render()
    assert len(text.encode()) <= 1_000
    assert text.startswith("s\ns\n") and text.endswith("… [line cut: %d more bytes]" % (500_000 - len(
        text.rsplit("\n", 1)[1].split("…")[0])))
    assert "qqq" in text and "zzz" not in text
    assert (buf.cut_lines, buf.dropped_lines, buf.shown_head_lines) == (1, 1, 50)


def test_invalid_utf8_is_measured_as_shown():
    buf = RollingOutputBuffer(400, max_bytes=5_000)
    buf.write((b"\xff" * 200 + b"\n") * 300)                 # each byte shows as a 3-byte U+FFFD
    buf.close()
    assert shown_bytes(buf) <= 5_000
    assert buf.dropped_lines > 0


@settings(max_examples=200, deadline=None)
@given(parts=stream_parts, max_lines=st.sampled_from([1, 10, 60, 400]),
       max_line_bytes=st.sampled_from([4, 16, 4000]), max_bytes=st.sampled_from([256, 300, 1000, 5000]))
def test_a_budget_keeps_a_prefix_and_a_suffix_of_the_line_caps(parts, max_lines, max_line_bytes, max_bytes):
    stream = b"".join(bytes([97 + i % 26]) * n + str(i).encode() + end for i, (n, end) in enumerate(parts))
    free = RollingOutputBuffer(max_lines, max_line_bytes)
    capped = RollingOutputBuffer(max_lines, max_line_bytes, max_bytes=max_bytes)
    for buf in (free, capped):
        buf.write(stream)
        buf.close()
    assert shown_bytes(capped) <= max_bytes
    full, shown = free._snapshot(), capped._snapshot()
    assert shown.total == full.total
    assert len(shown.head) + len(shown.tail) + shown.dropped == full.total
    # whole lines kept as they were, at most one line per end cut further to fit
    assert shown.head[:-1] == full.head[:len(shown.head) - 1]
    assert shown.tail[1:] == full.tail[len(full.tail) - len(shown.tail) + 1:]
