"""The replay bar: which session, under which policy, at which turn, playing or paused at what speed."""

from __future__ import annotations

from rich.text import Text

from breakwater.ui.widgets.drawn import Drawn

SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)


class ReplayControls(Drawn):
    COMPONENT_CLASSES = {"replay-controls--title", "replay-controls--dim", "replay-controls--playing",
                         "replay-controls--overlay"}

    def __init__(self, title: str, id: str | None = None):
        super().__init__(id=id)
        self.title = title
        self.policy_line = ""
        self.turn = 0
        self.turns = 0
        self.playing = False
        self.speed = 1.0
        self.pending = False
        self.progress: tuple[int, int] | None = None   # turns simulated so far, of all
        self.first_look = False   # the gauges show the heuristic's figures until the exact pass ends
        self.overlay = ""   # what of the user's overlay is applied (empty: none)

    def update_state(self, **state) -> None:
        for k, v in state.items():
            setattr(self, k, v)
        self.redraw()

    def draw(self) -> Text:
        c = lambda n: self.get_component_rich_style(f"replay-controls--{n}", partial=True)  # noqa: E731
        text = Text()
        text.append(" ▶ playing " if self.playing else " paused ", c("playing") if self.playing else c("dim"))
        where = f"turn {self.turn} / {self.turns}"
        if self.turn == self.turns + 1:
            where = f"turn {self.turn} (the next request) / {self.turns}"
        text.append(where, c("title"))
        busy = ""
        if self.pending:
            done = f" {self.progress[0]:,}/{self.progress[1]:,}" if self.progress else ""
            busy = f" · first look by the heuristic, counting exactly{done}…" if self.first_look \
                else f" · simulating{done}…" if done else " · computing…"
        text.append(f" · {self.speed:g}×{busy}", c("dim"))
        if self.overlay:   # before the policy and the title, so that a narrow terminal still shows it
            text.append(" │ ", c("dim"))
            text.append(self.overlay, c("overlay"))
        text.append(f" │ {self.policy_line} │ ", c("dim"))
        text.append(self.title, c("title"))
        return text
