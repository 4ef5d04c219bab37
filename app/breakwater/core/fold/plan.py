"""The decision the pipeline makes for one request (core/fold/pipeline.py `plan`): what to count and build."""

from __future__ import annotations

from dataclasses import dataclass, field

from breakwater.core.stages.deep_compaction import Compaction
from breakwater.core.log.edits import View
from breakwater.core.log.message import Message


@dataclass(slots=True)
class Plan:
    """The decision for one request; enough to count it, and to build it."""

    turn: int
    n: int
    cut: int
    start: int                # first sanitized index of the sent region (after shaping)
    level: int
    near_start: int
    keep_first_user: int | None
    head: list[Message]
    raw_tokens: int
    base_tokens: int
    sent_tokens: int
    zone: str
    counted: str
    fits: bool
    zone_counted: str = "estimate"   # whether the zone decision was confirmed by an exact count
    squeeze: bool = False
    new_compaction: Compaction | None = None
    counts: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    api_tokens: int | None = None
    built: View | None = None  # the request, when planning already had to build it (squeeze)
    # the soft zone applies `level` to the far messages before `boundary`, `lower` to the rest
    lower: int = 0
    boundary: int = 0
    drop_to: int = 0           # shape history dropped out[cut:drop_to] (none when equal to cut)
    joined: tuple[str, ...] = ()  # ids of user messages joined into the one before them
    stable_prefix_tokens: int | None = None  # estimate: the start of the request identical to the previous one
    sent_heuristic: int = 0    # the sent request by the plain heuristic: like for like with raw_tokens
    recorded_compaction: Compaction | None = None  # a compaction from the log applied right before it
    head_heuristic: int = 0    # heuristic tokens of `head`
    # the lowest sanitized index changed since the previous request (what followers of the requests,
    # fidelity's tracker, must look at again besides what a stage boundary moved over)
    changed_from: int = 0
    # heuristic tokens of the cache-stable prefix, and of the previous request not in it: what the
    # provider's cache must write again because this request changed it (core/log/prompt_cache.py)
    stable_prefix_heuristic: int = 0
    rewritten_heuristic: int = 0
    api_turn: int | None = None   # the request api_tokens belongs to (View.api_turn)
    # nothing edited and the request is the log whole: sent_tokens is the line's figure, raw_tokens
    # (Pipeline._finish), whichever path counted it, and so is the view's
    whole: bool = False
    # the figure is the heuristic's line, whichever path counted the verdicts (`counted`): the log whole,
    # no usage recorded (Meter.settle), or counted by the heuristic. Shown with ≈ (View.estimated)
    estimated: bool = True
