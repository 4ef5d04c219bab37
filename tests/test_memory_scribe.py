"""The scribe: a bounded queue that never blocks the loop, and a worker that writes memory."""

from __future__ import annotations

import threading

from breakwater.core.log.message import Message, ToolCall
from breakwater.memory.scribe import Scribe
from breakwater.memory.store import MemoryStore


def conversation(turn: int) -> list[Message]:
    return [
        Message("s", "system", "You are an agent. decided=secret"),
        Message(f"u{turn}", "user", "Please fix the flaky test in tests/test_pool.py"),
        Message(f"a{turn}", "assistant", "", (ToolCall("c1", "read_file", '{"path": "tests/test_pool.py"}'),),
                turn=turn),
        Message(f"t{turn}", "tool", "AssertionError: expected 50 got 10", turn=turn),
        Message(f"b{turn}", "assistant", f"Pool size fixed at step {turn}.", turn=turn),
    ]


def stuck_extractor(result: str):
    """An extractor that blocks until released: (extractor, entered, release)."""
    entered, release = threading.Event(), threading.Event()

    def extract(messages):
        entered.set()
        release.wait(30)
        return result

    return extract, entered, release


def call_in_thread(fn, *args):
    """Run fn in a thread and return its result only if it came back at once."""
    out = []
    t = threading.Thread(target=lambda: out.append(fn(*args)), daemon=True)
    t.start()
    t.join(2.0)
    assert not t.is_alive(), f"{fn.__name__} blocked"
    return out[0]


def test_offer_never_blocks_while_the_worker_is_stuck(tmp_path):
    stuck, entered, release = stuck_extractor("- [PROGRESS] written after the release")
    scribe = Scribe(MemoryStore(tmp_path), extractor=stuck)
    try:
        assert call_in_thread(scribe.offer, 1, conversation(1))
        assert entered.wait(5)  # the worker holds snapshot 1; the queue is empty again
        assert call_in_thread(scribe.offer, 2, conversation(2))
        assert call_in_thread(scribe.offer, 3, conversation(3))
        results = [call_in_thread(scribe.offer, t, conversation(t)) for t in range(4, 50)]
        assert not any(results)
        assert scribe.skipped == 46 and scribe.offered == 3
        assert not call_in_thread(scribe.close, 0.2), "cannot stop a stuck worker, but returns"
    finally:
        release.set()
    assert scribe.close(10)
    assert scribe.written == 1, "one new bullet; the next two snapshots repeated it"
    assert not scribe.offer(99, conversation(99)), "closed"


def test_maybe_offer_every_n_turns_or_at_the_soft_limit(tmp_path):
    stuck, entered, release = stuck_extractor("")
    scribe = Scribe(MemoryStore(tmp_path), extractor=stuck, every_turns=5)
    offered = []
    try:
        for t in range(1, 13):
            if scribe.maybe_offer(t, conversation(t), at_soft_limit=(t == 7)):
                offered.append(t)
                assert entered.wait(5)  # the worker holds the first snapshot; two more fit the queue
        assert offered == [5, 7, 12]
        assert not scribe.maybe_offer(12, conversation(12), at_soft_limit=True), "once per turn"
    finally:
        release.set()
    assert scribe.close()


def test_worker_writes_new_bullets_only(tmp_path):
    store = MemoryStore(tmp_path)
    scribe = Scribe(store)
    scribe.offer(5, conversation(5))
    assert scribe.close()
    text = store.read_memory()
    assert text.startswith("---\n[Turn 5 | ")
    assert "- [FILE] tests/test_pool.py: read_file" in text
    assert "- [ERROR] AssertionError: expected 50 got 10" in text
    assert "- [PROGRESS] Pool size fixed at step 5." in text
    assert "secret" not in text

    again = Scribe(store)
    again.offer(10, conversation(10))
    again.offer(15, conversation(15) + [Message("x", "assistant", "Pool size fixed at step 15.", turn=15)])
    assert again.close()
    entries = store.snapshot().entries
    assert [e.turn for e in entries] == [5, 10, 15]
    assert entries[1].lines == ("- [FILE] tests/test_pool.py: read_file",
                                "- [ERROR] AssertionError: expected 50 got 10",
                                "- [PROGRESS] Pool size fixed at step 10.")
    assert entries[2].lines == ("- [PROGRESS] Pool size fixed at step 15.",)


def test_a_failing_extractor_does_not_kill_the_worker(tmp_path):
    calls = []

    def flaky(messages):
        calls.append(len(messages))
        if len(calls) == 1:
            raise RuntimeError("model unavailable")
        return "- [DECISION] retry later"

    store = MemoryStore(tmp_path)
    scribe = Scribe(store, extractor=flaky)
    scribe.offer(1, conversation(1))
    scribe.offer(2, conversation(2))
    assert scribe.close()
    assert scribe.failures == 1 and scribe.last_error == "RuntimeError: model unavailable"
    assert "- [DECISION] retry later" in store.read_memory()
