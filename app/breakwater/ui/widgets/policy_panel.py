"""The policy panel: every Policy value in pipeline order, stepped with keys or typed, checked
before it is applied, compared with the chosen preset, saved to and loaded from TOML.

The panel only edits a Policy value (immutable: a refused change leaves nothing half-applied)
and announces every accepted one at once with `PolicyPanel.Changed`; whoever owns the session
re-simulates, cancelling the run of an earlier value (typing fast: the last value wins). A fixed
settle delay before announcing would be paid by every change, the single one most of all.
"""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.visual import visualize
from textual.widgets import DataTable, Input, Static

from breakwater.core.policy import PRESETS, Policy, PolicyError, load_toml, preset
from breakwater.core.policy.field_groups import FieldSpec, field_specs
from breakwater.core.policy.toml_file import save

PRESET_KEYS = {"breakwater": "f5", "seed-000": "f6", "seed-001": "f7", "seed-003": "f8"}
TYPING_KEYS = set("0123456789.")


def show_value(value) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


class PolicyTable(DataTable):
    """The rows of the panel; its bindings are the panel's keys (they win while it has the focus)."""

    KEYS_NAME = "policy"

    BINDINGS = [
        Binding("right,plus,equals_sign", "step(1)", "Value +", key_display="→/+", id="policy.up",
                tooltip="Raise the selected value by one step (or switch it on / to the next choice)"),
        Binding("left,minus", "step(-1)", "Value −", key_display="←/−", id="policy.down",
                tooltip="Lower the selected value by one step (or switch it off / to the previous choice)"),
        Binding("shift+right", "step(10)", "Value ++", show=False, id="policy.up10",
                tooltip="Raise the selected value by ten steps"),
        Binding("shift+left", "step(-10)", "Value −−", show=False, id="policy.down10",
                tooltip="Lower the selected value by ten steps"),
        Binding("space", "step(1)", "Toggle", show=False, id="policy.toggle",
                tooltip="Switch a stage on or off, or go to the next choice"),
        Binding("enter", "edit", "Type value", id="policy.edit", tooltip="Type the selected value (or start typing digits)"),
        Binding("backspace,delete", "reset", "Preset value", show=False, id="policy.reset",
                tooltip="Put the selected value back to the preset's"),
        Binding("ctrl+s", "save", "Save TOML", id="policy.save", tooltip="Save the policy to a TOML file"),
        Binding("ctrl+o", "load", "Load TOML", id="policy.load", tooltip="Load a policy from a TOML file"),
        *[Binding(key, f"preset('{name}')", f"Preset {name}", show=False, id=f"policy.preset.{name}",
                  tooltip=f"Switch to preset {name} (keeps the window)") for name, key in PRESET_KEYS.items()],
    ]

    def action_step(self, times: int) -> None:
        self.parent_panel.step(times)

    def action_edit(self) -> None:
        self.parent_panel.start_typing("")

    def action_reset(self) -> None:
        self.parent_panel.reset_value()

    def action_save(self) -> None:
        self.parent_panel.ask_path("save")

    def action_load(self) -> None:
        self.parent_panel.ask_path("load")

    def action_preset(self, name: str) -> None:
        self.parent_panel.choose_preset(name)

    @property
    def parent_panel(self) -> "PolicyPanel":
        return self.query_ancestor(PolicyPanel)

    def on_key(self, event: events.Key) -> None:
        if event.character and event.character in TYPING_KEYS:
            event.stop()
            event.prevent_default()
            self.parent_panel.start_typing(event.character)


class PolicyPanel(Vertical):
    BINDINGS = [Binding("escape", "stop_typing", "Undo typing", show=False, id="policy.escape",
                        tooltip="Close the value or path box; a typed value goes back to what it was")]
    COMPONENT_CLASSES = {"policy-panel--group", "policy-panel--changed", "policy-panel--refused",
                         "policy-panel--dim"}
    DEFAULT_CSS = """
    PolicyPanel { height: 1fr; }
    PolicyPanel > #policy-summary, PolicyPanel > #policy-status { height: auto; padding: 0 1; }
    PolicyPanel > PolicyTable { height: 1fr; }
    PolicyPanel > #policy-input { height: 3; }
    PolicyPanel .policy-panel--group { color: $accent; text-style: bold; }
    PolicyPanel .policy-panel--changed { color: $warning; text-style: bold; }
    PolicyPanel .policy-panel--refused { color: $error; text-style: bold; }
    PolicyPanel .policy-panel--dim { color: $text-muted; }
    """

    class Changed(Message):
        """A new policy, accepted; the one before it is superseded."""

        def __init__(self, policy: Policy):
            super().__init__()
            self.policy = policy

    def __init__(self, policy: Policy, id: str | None = None):
        super().__init__(id=id)
        self.policy = policy
        self.specs = field_specs()
        self.refused: tuple[str, str] | None = None   # (field, why) of the last refused change
        self.path: Path | None = None
        self._typing: tuple[str, object] | None = None  # (field or "save"/"load", value before typing)
        self._announced = policy

    def compose(self) -> ComposeResult:
        yield Static(id="policy-summary")
        table = PolicyTable(id="policy-table", cursor_type="row", zebra_stripes=False)
        # the preset's value beside the value: the unit is what a narrow panel cuts
        for label, key in (("setting", "name"), ("value", "value"), ("preset", "preset"), ("unit", "unit")):
            table.add_column(label, key=key)
        yield table
        yield Input(id="policy-input", select_on_focus=False)
        yield Static(id="policy-status")

    def on_mount(self) -> None:
        self.query_one("#policy-input", Input).display = False
        self._fill()
        # the cells hold the colours of the theme they were made in: another theme makes them again
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.call_after_refresh(self._restyle))

    def _restyle(self) -> None:
        table = self.table
        for group in dict.fromkeys(s.group for s in self.specs):
            replayed = any(s.changes_view for s in self.specs if s.group == group)
            table.update_cell(f"group:{group}", "name", Text(group, style=self._c("group")))
            table.update_cell(f"group:{group}", "unit", Text("" if replayed else "agent only", style=self._c("dim")))
        self._redraw([s.name for s in self.specs])

    # -- drawing -----------------------------------------------------------------------------------
    def _c(self, name: str):
        return self.get_component_rich_style(f"policy-panel--{name}", partial=True)

    @property
    def table(self) -> PolicyTable:
        return self.query_one(PolicyTable)

    @property
    def reference(self) -> Policy:
        return PRESETS.get(self.policy.preset, Policy())

    def _fill(self) -> None:
        table = self.table
        table.clear()
        group = None
        for spec in self.specs:
            if spec.group != group:
                group = spec.group
                replayed = any(s.changes_view for s in self.specs if s.group == group)
                table.add_row(Text(group, style=self._c("group")), "", "",
                              Text("" if replayed else "agent only", style=self._c("dim")), key=f"group:{group}")
            table.add_row(*self._cells(spec), key=spec.name)
        self._summary()

    def _cells(self, spec: FieldSpec) -> tuple:
        value, ref = getattr(self.policy, spec.name), getattr(self.reference, spec.name)
        differs = value != ref
        refused = self.refused is not None and self.refused[0] == spec.name
        name = Text()
        name.append("✗ " if refused else ("● " if differs else "  "),
                    style=self._c("refused") if refused else self._c("changed"))
        name.append(spec.name, style=self._c("dim") if not spec.changes_view else "")
        shown = Text(show_value(value), style=self._c("changed") if differs else "", justify="right")
        return name, shown, Text(show_value(ref), style=self._c("dim"), justify="right"), Text(spec.unit,
                                                                                              style=self._c("dim"))

    def _redraw(self, names) -> None:
        table = self.table
        for name in names:
            spec = self._spec(name)
            if spec is None:
                continue
            for key, cell in zip(("name", "value", "preset", "unit"), self._cells(spec)):
                table.update_cell(name, key, cell)
        self._summary()

    def _summary(self) -> None:
        p = self.policy
        differ = sum(1 for s in self.specs if getattr(p, s.name) != getattr(self.reference, s.name))
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(f"preset {p.preset}", style="bold")
        text.append(f" · soft limit {p.soft_limit:,} · hard limit {p.hard_limit:,} (buffer {p.effective_buffer:,})")
        text.append(f" · ● {differ} {'value differs' if differ == 1 else 'values differ'} from {p.preset}",
                    style=self._c("changed") if differ else self._c("dim"))
        if self.refused:
            text.append(" · ✗ refused", style=self._c("refused"))
        self._line("policy-summary", text)

    def _status(self, text: str, refused: bool = False) -> None:
        self._line("policy-status", Text(text, style=self._c("refused") if refused else ""))

    def _line(self, name: str, text: Text) -> None:
        """Show the summary or the status; a relayout repaints the whole screen (≈15 ms at 5,000
        messages, paid by every step of a value), so only when the text takes another height."""
        box = self.query_one(f"#{name}", Static)
        size = box.content_size
        box.update(text, layout=not size.width or visualize(box, text).get_height(box.styles, size.width) != size.height)

    # -- the selected value -------------------------------------------------------------------------
    def _spec(self, name: str | None) -> FieldSpec | None:
        return next((s for s in self.specs if s.name == name), None)

    def selected(self) -> FieldSpec | None:
        table = self.table
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key((table.cursor_row, 0)).row_key.value
        return self._spec(key)

    def select(self, name: str) -> None:
        self.table.move_cursor(row=self.table.get_row_index(name))

    # -- changing the policy ------------------------------------------------------------------------
    def apply(self, name: str, value) -> bool:
        """Try one value; refused values leave the policy as it was and say why."""
        old = self.refused
        try:
            self.policy = self.policy.with_changes(**{name: value})
        except PolicyError as exc:
            self.refused = (name, str(exc))
            self._status(f"refused: {exc}", refused=True)
            self._redraw({name, old[0]} if old else {name})
            return False
        self.refused = None
        self._status(f"{name} = {show_value(value)}")
        self._redraw({name, old[0]} if old else {name})
        self._announce()
        return True

    def step(self, times: int) -> None:
        spec = self.selected()
        if spec is not None:
            self.apply(spec.name, spec.stepped(getattr(self.policy, spec.name), times))

    def reset_value(self) -> None:
        spec = self.selected()
        if spec is not None:
            self.apply(spec.name, getattr(self.reference, spec.name))

    def set_policy(self, policy: Policy, why: str) -> None:
        self.policy, self.refused = policy, None
        self._fill()
        self._status(why)
        self._announce()

    def choose_preset(self, name: str) -> None:
        try:
            policy = preset(name).with_changes(window=self.policy.window)
        except PolicyError as exc:
            self._status(f"refused: {exc}", refused=True)
            return
        row = self.table.cursor_row
        self.set_policy(policy, f"preset {name} (window kept at {policy.window:,})")
        self.table.move_cursor(row=row)

    def _announce(self) -> None:
        if self.policy != self._announced:
            self._announced = self.policy
            self.post_message(self.Changed(self.policy))

    # -- typing: a value, or a path ------------------------------------------------------------------
    def start_typing(self, first: str) -> None:
        box = self.query_one("#policy-input", Input)
        if self._typing is not None and box.display:
            # keys typed in a burst reach the table before the box has the focus: they belong in the box
            if first and box.selection.is_empty:
                box.insert_text_at_cursor(first)
            elif first:  # as the box itself does: a typed key replaces the selected value
                box.replace(first, *box.selection)
            else:
                self._finish(box.value)
            return
        spec = self.selected()
        if spec is None:
            return
        current = getattr(self.policy, spec.name)
        self._typing = (spec.name, current)
        box.placeholder = f"{spec.name} ({spec.unit}), enter to keep, escape to undo"
        box.value = first or show_value(current).replace(",", "")
        self._open(box, select=not first)

    def ask_path(self, what: str) -> None:
        self._typing = (what, None)
        box = self.query_one("#policy-input", Input)
        box.placeholder = f"policy file to {what} (TOML), enter to {what}, escape to cancel"
        box.value = str(self.path or Path("policy.toml"))
        self._open(box, select=True)

    def _open(self, box: Input, select: bool) -> None:
        """Show the box; a value opened with enter is selected, so typing replaces it."""
        box.display = True
        box.focus()
        if select:
            box.select_all()
        else:
            box.cursor_position = len(box.value)

    @on(Input.Changed, "#policy-input")
    def _typed(self, event: Input.Changed) -> None:
        if self._typing is None or self._typing[0] in ("save", "load"):
            return
        spec = self._spec(self._typing[0])
        try:
            value = spec.parse(event.value)
        except ValueError as exc:
            self._status(f"not yet: {exc}", refused=True)
            return
        if value != getattr(self.policy, spec.name):
            self.apply(spec.name, value)

    @on(Input.Submitted, "#policy-input")
    def _submitted(self, event: Input.Submitted) -> None:
        self._finish(event.value)

    def _finish(self, text: str) -> None:
        what = self._typing[0] if self._typing else None
        if what == "save":
            self._save(text)
        elif what == "load":
            self._load(text)
        elif what is not None and self.refused is not None and self.refused[0] == what:
            return  # keep the box open on a refused value: the reason is on the status line
        self._close_input()

    def _close_input(self) -> None:
        self._typing = None
        box = self.query_one("#policy-input", Input)
        box.display = False
        self.table.focus()

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        # escape belongs to the screen (clear a filter) unless a box of the panel is open
        return self._typing is not None if action == "stop_typing" else True

    def action_stop_typing(self) -> None:
        name, before = self._typing
        if name not in ("save", "load") and getattr(self.policy, name) != before:
            self.apply(name, before)
        elif self.refused is not None:
            old, self.refused = self.refused, None
            self._redraw({old[0]})
            self._status("")
        self._close_input()

    def _save(self, text: str) -> None:
        try:
            path = save(self.policy, text.strip() or "policy.toml")
        except PolicyError as exc:
            self._status(f"not saved: {exc}", refused=True)
            return
        self.path = path
        self._status(f"saved to {path}")

    def _load(self, text: str) -> None:
        path = Path(text.strip() or "policy.toml").expanduser()
        try:
            policy = load_toml(path)
        except PolicyError as exc:
            self._status(f"not loaded: {exc}", refused=True)
            return
        self.path = path
        self.set_policy(policy, f"loaded {path}")


__all__ = ["PolicyPanel", "PolicyTable", "show_value"]
