"""Edit and View: what the pipeline did, and what it sends."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from breakwater.core.message import Message

KINDS = ("truncated-at-source", "snipped", "masked", "folded", "microcompacted", "summarized", "dropped",
         "merged", "stripped", "truncated-argument")


@dataclass(frozen=True, slots=True)
class Edit:
    """One change the pipeline made to one message of the log for one request.

    `spans` are the (start, end) character ranges of the original content that
    were replaced; `threshold` names the rule or limit that fired.
    """

    message_id: str
    stage: str
    kind: str
    spans: tuple[tuple[int, int], ...] = ()
    tokens_before: int = 0
    tokens_after: int = 0
    threshold: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"message_id": self.message_id, "stage": self.stage, "kind": self.kind,
                "spans": [list(s) for s in self.spans], "tokens_before": self.tokens_before,
                "tokens_after": self.tokens_after, "threshold": self.threshold}


@dataclass(frozen=True, slots=True)
class View:
    """The messages for one request, the edits that shaped them, and the counts."""

    turn: int
    messages: tuple[Message, ...]
    edits: tuple[Edit, ...]
    raw_tokens: int          # the whole history before this request, uncompacted
    base_tokens: int         # after sanitize and persisted summaries: what decides the zone
    sent_tokens: int         # what is sent
    zone: str
    counted: str             # "exact" when tiktoken confirmed the figure, else "estimate"
    window: int
    soft_limit: int
    hard_limit: int
    api_tokens: int | None = None  # the last figure the API reported, if any
    fits: bool = True
    notes: tuple[str, ...] = field(default=())
    # estimate (heuristic x calibration): tokens at the start identical to the previous request,
    # what a provider's prompt cache can reuse; 0 for the first request
    stable_prefix_tokens: int = 0

    def to_api(self) -> list[dict[str, Any]]:
        return [m.to_api() for m in self.messages]

    def edit_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for e in self.edits:
            counts[e.kind] = counts.get(e.kind, 0) + 1
        return counts
