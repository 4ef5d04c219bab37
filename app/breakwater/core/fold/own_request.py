"""Another agent's own history counted as Breakwater counts a request (issue 23): the counted side of
each calibration pair of an imported transcript, worked out by the pipeline that replays it, in the
same pass (issue 28: a second pass on import cost a third of loading a pi session).

An importer's running estimate of the agent's context drifts from what the pipeline counts (pi:
33,002 where the request it sent counts 28,472, which put the fit 8% low); one counter on both sides
of the pair keeps the fit in one unit. So a usage event without an `estimate` (every imported one) is
paired with the heuristic count of the request the agent sent: its history, sanitized as every
request is, its recorded compactions applied, nothing of ours. Breakwater's own logs carry the
estimate of what they sent, which stands."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from breakwater.core.fold.compactions import DeepCompaction
from breakwater.core.fold.frames import Frames
from breakwater.core.log.session_log import Entry, Event
from breakwater.core.log.tokens import heuristic_message
from breakwater.core.policy import Policy, preset
from breakwater.core.stages.deep_compaction import Active, follows


def own_history_policy() -> Policy:
    """The agent's own history: nothing of ours compacts it (its recorded compactions still apply)."""
    return preset("breakwater").with_changes(window=1 << 40, snip=False, mask=False, microcompact=False,
                                             deep_compact=False)


_OWN = own_history_policy()


def wanted_for(entries: Iterable[Entry]) -> bool:
    """Whether a log's usage figures need the agent's request counted: one without its own estimate
    (another agent's). A log with none (a million tiny messages, Breakwater's own) skips the count,
    which costs a head and a seam each turn once this policy has compacted on its own."""
    return any(isinstance(e, Event) and e.type == "usage" and not isinstance(e.get("estimate"), int) for e in entries)


@dataclass(slots=True)
class OwnRequest:
    """The request the log's own agent sent, followed beside the pipeline's: the compactions it applied
    (the log's recorded ones) and the heuristic count of its latest request."""

    chain: list[Active] = field(default_factory=list)
    counted: tuple[int, int] | None = None   # (turn, heuristic tokens) of the latest request planned
    wanted: bool = True   # the log has usage figures to pair (`wanted_for`); else no request is counted

    def copy(self) -> "OwnRequest":
        return OwnRequest(self.chain.copy(), self.counted, self.wanted)

    def take(self, placed: Active) -> None:
        if follows(self.chain, placed):
            self.chain.append(placed)

    def plan(self, deep: DeepCompaction, frames: Frames, turn: int, n: int, h: int) -> None:
        """Count request `turn + 1`, the history `out[:n]`; `h`: the pipeline's own request at no stage
        from its cut, by the heuristic, which is the agent's when both stand after the same compaction."""
        if not self.wanted:
            return
        own = self.chain[-1] if self.chain else None
        active = deep.active[-1] if deep.active else None
        if own is None and active is None or own is not None and active is not None and own.comp is active.comp \
                and own.cut == active.cut and deep.policy.keep_first_user == _OWN.keep_first_user:
            self.counted = (turn + 1, h)
            return
        # the pipeline compacted on its own, or frames its head otherwise: the agent's request, as
        # `Frames.frame` makes it of a history sent whole from the cut
        cut = own.cut if own is not None else deep.index.base_start()
        head, _ = deep.head_after(own, _OWN.keep_first_user)
        joined, start, _ = frames.seam(head, cut, n)
        prefix = deep.index.ledger.prefix
        self.counted = (turn + 1, sum(map(heuristic_message, joined)) + prefix[n] - prefix[start])

    def estimate(self, turn: object) -> int | None:
        """The count of request `turn` when it was the latest planned."""
        counted = self.counted
        return counted[1] if counted is not None and counted[0] == turn and counted[1] else None
