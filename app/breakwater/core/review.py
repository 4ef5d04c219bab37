"""A deep compaction shown to the user before it is sent (SPEC §10 "Controls").

The workbench attaches a reviewer while it is on screen; a headless run has none and never
waits. The reviewer gets the proposal — the summary, the messages it replaces, tokens before
and after — and answers accept, edit (with the new text) or cancel. What is logged is what
was decided, so a replay gives back the request that was really sent:
  accept  the compaction event as proposed
  edit    the compaction event with the user's text (marked `reviewed: edited`)
  cancel  manual: nothing at all; automatic: the proposal and an `undo` of it, so the next
          request (live or replayed) is built without it and the pipeline does not redo it
          at once
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Awaitable, Callable

from breakwater.core.log.edits import View
from breakwater.core.fold.pipeline import Compaction

ACTIONS = ("accept", "edit", "cancel")


@dataclass(frozen=True, slots=True)
class SummaryProposal:
    compaction: Compaction
    covered: tuple[str, ...]     # ids of the log messages the summary replaces
    tokens_before: int           # the request as it is now (what the gauge shows)
    tokens_after: int            # the request as it will be sent once the summary is accepted
    view: View                   # that request

    @classmethod
    def of(cls, comp: Compaction, view: View, previous: View | None) -> "SummaryProposal":
        """The proposal for `comp`, whose request is `view`: it covers what `view` summarizes and
        `previous` (the request before it, if any) did not. Its figures are the requests' own, counted
        as the gauge counts them (the compaction's own figures are the history's, before the stages)."""
        earlier = {e.message_id for e in previous.edits if e.kind == "summarized"} if previous else set()
        covered = tuple(dict.fromkeys(e.message_id for e in view.edits
                                      if e.kind == "summarized" and e.message_id not in earlier))
        before = previous.sent_tokens if previous is not None else comp.tokens_before
        return cls(comp, covered, before, view.sent_tokens, view)

    @property
    def summary(self) -> str:
        return self.compaction.summary

    @property
    def manual(self) -> bool:
        return self.compaction.trigger == "manual"


@dataclass(frozen=True, slots=True)
class SummaryDecision:
    action: str                  # accept | edit | cancel
    text: str = ""               # the edited summary, for `edit`

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"a summary decision is one of {', '.join(ACTIONS)}, not {self.action!r}")
        if self.action == "edit" and not self.text.strip():
            raise ValueError("an edited summary cannot be empty")


ACCEPT = SummaryDecision("accept")
CANCEL = SummaryDecision("cancel")

Reviewer = Callable[[SummaryProposal], "SummaryDecision | Awaitable[SummaryDecision]"]
