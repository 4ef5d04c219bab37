"""The help screen: every key (from the live bindings, so remapped keys show as remapped) and
what each colour means."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from breakwater.core.log.words import article
from breakwater.fidelity.loops import MEANINGS, NAMES
from breakwater.ui.widgets.badges import ALL_KINDS, ROLES, describe, label, kind_variable


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,f1", "dismiss", "Close help", id="help.close", tooltip="Back to the workbench")]

    def __init__(self, bindings: list[tuple[str, str, str, str]]):
        super().__init__()
        self.bindings_table = bindings   # (id, keys, description, tooltip)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-body"):
            yield Static(self._keys(), id="help-keys")
            yield Static(self._colours(), id="help-colours")

    def on_mount(self) -> None:
        self.query_one("#help-body").border_title = "Breakwater — keys and colours (esc closes)"

    def _keys(self) -> Table:
        table = Table(title=Text("Keys (remap them in [ui.keymap] of the config file, by id)"), title_justify="left",
                      expand=True, box=None, padding=(0, 1))
        table.add_column("key", style="bold", no_wrap=True)
        table.add_column("does")
        table.add_column("id", style="dim", no_wrap=True)
        for bid, keys, desc, tip in self.bindings_table:
            table.add_row(keys, f"{desc} — {tip}" if tip and tip != desc else desc, bid)
        return table

    def _colours(self) -> Table:
        v = self.app.theme_variables
        table = Table(title=Text("Colours"), title_justify="left", expand=True, box=None, padding=(0, 1))
        table.add_column("", no_wrap=True)
        table.add_column("means")
        for kind in ALL_KINDS:
            colour = v.get(kind_variable(kind))
            table.add_row(Text(f" {label(kind)} ", style=f"{v.get('background', 'black')} on {colour}" if colour else ""),
                          f"{kind}: {describe(kind)}")
        pinned = v.get("pinned")
        table.add_row(Text(" pin ", style=f"{v.get('background', 'black')} on {pinned}" if pinned else ""),
                      "pinned: never compacted")
        for role in ROLES:
            colour = v.get(f"role-{role}")
            table.add_row(Text(role, style=colour or ""), article(f"{role} message"))
        for zone, what in (("safe", "under the soft limit: sent as is"),
                           ("soft", "between soft and hard limit: snip, mask, microcompact"),
                           ("hard", "over the hard limit: deep compaction (summary)")):
            colour = v.get(f"gauge-{zone}")
            table.add_row(Text("████", style=colour or ""), f"{zone} zone — {what}")
        table.add_row(Text("░░░░", style="dim"), "timeline: raw (uncompacted) tokens; solid: tokens sent")
        table.add_row(Text("▼"), "timeline: a deep compaction at that turn; ↓ the current turn")
        table.add_row(Text("facts kept"), "of the facts the session has created so far (goal, constraints, files, "
                      "commands, errors, decisions, pins), the share this request still carries; pinned: the ones "
                      "that must not be lost (goal and constraints, modified files, the latest error, pins) — as "
                      "`breakwater eval` measures them")
        for kind, meaning in MEANINGS.items():
            table.add_row(Text("⟳", style=v.get("gauge-hard") or ""), f"{NAMES[kind]}: {meaning}")
        table.add_row(Text("dim row"), "message list: after the current request (not yet in its history)")
        table.add_row(Text(" │"), "message list: covered by the deep-compaction summary above it")
        return table
