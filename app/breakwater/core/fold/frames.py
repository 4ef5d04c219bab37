"""The frame of a request whose history starts at a given index: its head (core/fold/compactions.py),
the first user message kept when shaping drops it, and user messages in a row joined so that turns
alternate (stage 6). It depends only on the messages up to that start, the summary and the pins,
so `Frames` works each out once and keeps it until one of those changes.
"""

from __future__ import annotations

from breakwater.core.fold.compactions import DeepCompaction
from breakwater.core.fold.index import Index
from breakwater.core.log.message import Message
from breakwater.core.log.tokens import heuristic_message
from breakwater.core.stages.shape import join_users


class Frames:
    def __init__(self, index: Index, deep: DeepCompaction):
        self.index = index
        self.deep = deep
        self._frames: dict[tuple[int, bool], tuple] = {}  # (start, start < n) -> (summary, pins, frame)
        self._frames_reach = -1                 # the highest start in _frames: a change past it keeps them all
        self._joined: dict[tuple[int, ...], tuple] = {}   # parts of a joined head -> (parts, joined, absorbed)

    def copy(self, index: Index, deep: DeepCompaction) -> Frames:
        new = Frames.__new__(Frames)
        new.__dict__.update(index=index, deep=deep, _frames=self._frames.copy(), _frames_reach=self._frames_reach,
                            _joined=self._joined.copy())
        return new

    def changed(self, d: int) -> None:
        """Messages from index d on changed (or were added)."""
        if d <= self._frames_reach:
            self._frames = {k: v for k, v in self._frames.items() if k[0] < d}
            self._frames_reach = max((k[0] for k in self._frames), default=-1)

    def frame(self, s: int, n: int) -> tuple:
        """(head, first sent index, ids joined, first user kept, heuristic tokens of the head) of a request
        whose history starts at s: the cut, or a later turn when shaping drops some."""
        key = (s, s < n)
        deep, index = self.deep, self.index
        summary = deep.active[-1].message if deep.active else None
        hit = self._frames.get(key)
        if hit is not None and hit[0] is summary and hit[1] == index.pins_version:
            return hit[2]
        head, kept_fu = deep.head()
        cut = deep.cut()
        fu_i = index.first_user() if deep.policy.keep_first_user else None
        if s > cut and fu_i is not None and cut <= fu_i < s:
            head, kept_fu = head + [index.san.out[fu_i].message], fu_i
        jh, js, joined = self.seam(head, s, n)
        frame = (jh, js, joined, kept_fu, sum(heuristic_message(m) for m in jh))
        if len(self._frames) > 32:
            self._frames.clear()
            self._frames_reach = -1
        self._frames[key] = (summary, index.pins_version, frame)
        self._frames_reach = max(self._frames_reach, s)
        return frame

    def seam(self, head: list[Message], start: int, n: int) -> tuple[list[Message], int, tuple[str, ...]]:
        """The head with user messages in a row joined, also with the first kept message, so turns alternate."""
        out = self.index.san.out
        msgs = list(head)
        if start < n and out[start].message.role == "user" and msgs and msgs[-1].role == "user":
            msgs.append(out[start].message)
            start += 1
        if sum(1 for m in msgs if m.role == "user") < 2:
            return msgs, start, ()
        # the same parts give the same joined message: build it (and count it) once, not every request
        hit = self._joined.get(tuple(id(m) for m in msgs))
        if hit is not None and all(a is b for a, b in zip(hit[0], msgs)):
            return hit[1], start, hit[2]
        joined, absorbed = join_users(msgs)
        if len(self._joined) > 16:
            self._joined.clear()
        self._joined[tuple(id(m) for m in msgs)] = (msgs, joined, tuple(absorbed))
        return joined, start, tuple(absorbed)
