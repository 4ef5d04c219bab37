"""core.edits: a request's edits, some held as ranges of whole messages (`Covered`), read exactly
as if every edit had been built one by one."""

from __future__ import annotations

from array import array

import pytest

from breakwater.core.log.edits import Covered, Edit, Edits
from breakwater.core.log.message import Message
from breakwater.core.stages.sanitize import SanitizedMessage


def entries(*ids: str) -> list[SanitizedMessage]:
    return [SanitizedMessage(Message(mid, "tool", "x" * (3 + k)), (mid,)) for k, mid in enumerate(ids)]


def summarized(start: int, history: list[SanitizedMessage], skip=frozenset()) -> Covered:
    return Covered("deep_compact", "summarized", "hard limit 9", start, history, [10 + k for k in range(len(history))],
                   frozenset(skip))


def one_by_one(covered: Covered) -> list[Edit]:
    return [Edit(e.message.id, covered.stage, covered.kind, ((0, len(e.message.content)),), covered.tokens[k], 0,
                 covered.threshold)
            for k, e in enumerate(covered.entries) if k not in covered.skip]


def test_a_range_reads_as_its_edits_in_order_without_the_kept_ones():
    c = Covered("deep_compact", "summarized", "hard limit 9", 1, entries("a", "b", "c", "d"), array("q", [5, 6, 7, 8]),
                frozenset({1}))
    assert list(c) == one_by_one(c) and len(c) == 3
    assert [c[0].message_id, c[-1].message_id, c[1].tokens_before] == ["a", "d", 7]
    assert c.message_ids() == ("a", "c", "d")
    assert c.covers("c") and not c.covers("b") and not c.covers("zz")
    assert c.edits_of("d") == [one_by_one(c)[2]] and c.edits_of("b") == []
    with pytest.raises(IndexError):
        c[3]


def test_an_id_twice_in_a_range_has_both_edits():
    c = Covered("shape_history", "dropped", "keep last turns", 0, entries("a", "b", "a", "c", "a"), [1, 2, 3, 4, 5],
                frozenset({3, 4}))
    assert c.edits_of("a") == [one_by_one(c)[0], one_by_one(c)[2]]
    assert not c.covers("c") and c.message_ids() == ("a", "b")


def test_a_range_inside_an_indexed_one_shares_its_index_and_reads_its_own_messages():
    history = entries("s", "a", "b", "c", "d", "e")
    wide = summarized(1, history[1:])
    wide.index()
    inner = summarized(2, history[2:5], {1})          # b, (c kept), d
    inner.index(like=wide)
    assert inner._index[0] is wide._index[0]
    assert [m for m in "sabcde" if inner.covers(m)] == ["b", "d"] and inner.message_ids() == ("b", "d")
    assert inner.edits_of("d") == [one_by_one(inner)[1]] and inner.edits_of("e") == []
    other = entries("s", "a", "x", "c")               # another history: indexed afresh
    moved = summarized(1, other[1:])
    moved.index(like=wide)
    assert moved._index[0] is not wide._index[0] and moved.covers("x") and not moved.covers("b")
    longer = summarized(1, history[1:] + entries("f"))   # reaches past what `wide` indexed
    longer.index(like=wide)
    assert longer._index[0] is not wide._index[0] and longer.covers("f")


def test_edits_are_their_parts_in_order_and_equal_the_same_edits_as_a_tuple():
    first = (Edit("s", "sanitize", "stripped"),)
    c = summarized(0, entries("a", "b"))
    last = (Edit("t", "mask", "masked", ((0, 4),), 9, 2, "soft"),)
    edits = Edits([first, c, (), last])
    flat = (*first, *one_by_one(c), *last)
    assert edits == flat and edits == Edits([flat]) and tuple(edits) == flat and len(edits) == 4
    assert edits[2] == flat[2] and edits[-1] == last[0] and edits[1:3] == flat[1:3]
    assert edits != flat[:3] and Edits() == ()
    assert edits.counts() == {"stripped": 1, "summarized": 2, "masked": 1}
    assert hash(edits) == hash(Edits([flat]))
