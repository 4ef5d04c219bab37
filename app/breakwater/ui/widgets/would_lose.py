"""Under a summary that is about to replace part of the history: the facts it would lose.

The facts at risk are the ones the request carries now and the compacted request would carry
only in its summary (`fidelity.scoring.at_risk`, computed in a worker before the dialog opens,
by the measure the fidelity gauge uses); of those, the ones the summary text does not carry are lost. Checking a text is a substring search over a few
hundred anchors, so the list follows the user's edits as they type.
"""

from __future__ import annotations

from typing import Sequence

from rich.text import Text
from textual.widgets import Static

from breakwater.core.log.words import plural
from breakwater.fidelity.probes import Probe
from breakwater.fidelity.scoring import not_carried

SHOWN = 12


def one_line(text: str) -> str:
    return " ".join(text.split())


class WouldLose(Static):
    DEFAULT_CSS = "WouldLose { height: auto; max-height: 10; padding: 0 0 1 0; }"

    def __init__(self, at_risk: Sequence[Probe], summary: str, id: str | None = None):
        super().__init__(id=id)
        self.at_risk = list(at_risk)
        self.lost: list[Probe] = []
        self.check(summary)

    def check(self, summary: str) -> None:
        """The summary text changed: which facts at risk does it not carry?"""
        self.lost = not_carried(self.at_risk, summary)
        self.update(self._text())

    def _text(self) -> Text:
        if not self.at_risk:
            return Text("The request keeps every fact it carries now: none depends on the summary.", style="dim")
        only = "the one fact" if len(self.at_risk) == 1 else f"all {plural(len(self.at_risk), 'fact')}"
        if not self.lost:
            return Text(f"The summary carries {only} the request would otherwise lose.", style="green")
        out = Text()
        out.append(f"Would lose {len(self.lost):,} of {plural(len(self.at_risk), 'fact')}", style="bold red")
        out.append(" the request carries now (add them to the text to keep them):", style="dim")
        for p in self.lost[:SHOWN]:
            out.append(f"\n  {p.category:<9} ", style="bold")
            out.append(one_line(p.text)[:160])
            out.append(f"  · turn {p.turn}, {p.message_id}", style="dim")
        if len(self.lost) > SHOWN:
            out.append(f"\n  … and {len(self.lost) - SHOWN:,} more", style="dim")
        return out
