"""The footer: the keys of the part that has the focus first, under its name, then the screen's
keys that still work there. Focus changes what a key means (→ scrolls a spill file rather than
stepping the replay): the footer says so, and a key the focused part took is not offered.

A narrow terminal cannot show every key: the screen's keys are offered in the order of its
BINDINGS (its priority) while they fit, help, theme and quit always, and help says how many it
left out (all of them are in the help and the command palette)."""

from __future__ import annotations

from dataclasses import dataclass

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Footer
from textual.widgets._footer import FooterKey, FooterLabel

ALWAYS = ("app.help", "app.theme", "app.quit")   # offered however narrow the terminal
MORE_CELLS = 4       # " +12" after help: how many keys were left out
PALETTE_CELLS = 14   # "▏^p palette " docked at the right, and its padding


def keys_name(node) -> str:
    """What the focused part is called in the footer: its KEYS_NAME, else its border title."""
    return getattr(node, "KEYS_NAME", None) or str(node.border_title or "") or type(node).__name__


@dataclass
class Item:
    binding: Binding
    keys: str            # as shown: one key, or the keys of a group ("←→")
    description: str
    enabled: bool
    tooltip: str

    @property
    def cells(self) -> int:   # compact: "key description" and a space after
        return len(self.keys) + 1 + len(self.description) + 1


class KeysFooter(Footer):
    DEFAULT_CSS = """
    KeysFooter FooterLabel.-part { text-style: bold; margin: 0 1 0 0; }
    """

    def __init__(self, **kw):
        super().__init__(compact=True, **kw)

    def on_resize(self, event: events.Resize) -> None:
        self.call_after_refresh(self.recompose)

    def _items(self, bindings: list) -> list[Item]:
        """One item per action; bindings of one group in a row become one item."""
        by_action: dict[str, tuple] = {}
        for b in bindings:
            by_action.setdefault(b[0].action, b)
        items: list[Item] = []
        for binding, enabled, tooltip in by_action.values():
            key = self.app.get_key_display(binding)
            last = items[-1] if items else None
            if binding.group is not None and last is not None and last.binding.group is binding.group:
                last.keys += key
                continue
            items.append(Item(binding, key, binding.group.description if binding.group else binding.description,
                              enabled, tooltip))
        return items

    def compose(self) -> ComposeResult:
        if not self._bindings_ready:
            return
        screen, app, palette = self.screen, self.app, self.app.COMMAND_PALETTE_BINDING
        part, inner, outer, always = None, [], [], []
        for node, binding, enabled, tooltip in screen.active_bindings.values():
            if not binding.show or binding.key == palette:
                continue
            mine = node is not screen and node is not app
            part = part or (node if mine else None)
            (inner if mine else always if node is app else outer).append((binding, enabled, tooltip))
        inner_items, outer_items, app_items = self._items(inner), self._items(outer), self._items(always)
        kept = [i for i in app_items if i.binding.id in ALWAYS]
        labels = [keys_name(part), getattr(screen, "KEYS_NAME", "")] if inner_items else ["", ""]
        room = (self.size.width or app.size.width) - PALETTE_CELLS - MORE_CELLS - sum(i.cells for i in kept)
        groups: list[tuple[str, list[Item]]] = []
        left_out = 0
        for label, items in ((labels[0], inner_items), (labels[1], outer_items),
                             ("", [i for i in app_items if i not in kept])):
            fitting: list[Item] = []
            for item in items:
                cells = item.cells + (len(label) + 2 if label and not fitting else 0)
                if cells > room:
                    break
                fitting.append(item)
                room -= cells
            left_out += len(items) - len(fitting)
            groups.append((label, fitting))
        groups.append(("", kept))
        shown = 0
        for label, items in groups:
            if label and items:
                yield FooterLabel(f"{label}:", classes="-part")
                shown += 1
            for item in items:
                more = f" +{left_out}" if left_out and item.binding.id == "app.help" else ""
                yield FooterKey(item.binding.key, item.keys, item.description + more, item.binding.action,
                                disabled=not item.enabled, tooltip=item.tooltip or item.description
                                ).data_bind(compact=Footer.compact)
                shown += 1
        self.styles.grid_size_columns = shown
        yield from self._palette_key()

    def _palette_key(self) -> ComposeResult:
        if not (self.show_command_palette and self.app.ENABLE_COMMAND_PALETTE):
            return
        active = self.screen.active_bindings.get(self.app.COMMAND_PALETTE_BINDING)
        if active is None:
            return
        _, binding, enabled, _ = active
        yield FooterKey(binding.key, self.app.get_key_display(binding), binding.description, binding.action,
                        classes="-command-palette", disabled=not enabled,
                        tooltip=binding.tooltip or binding.description)
