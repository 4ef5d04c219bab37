"""The footer: the keys of the part that has the focus first, under its name, then the screen's
keys that still work there. Focus changes what a key means (→ scrolls a spill file rather than
stepping the replay): the footer says so, and a key the focused part took is not offered."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Footer
from textual.widgets._footer import FooterKey, FooterLabel


def keys_name(node) -> str:
    """What the focused part is called in the footer: its KEYS_NAME, else its border title."""
    return getattr(node, "KEYS_NAME", None) or str(node.border_title or "") or type(node).__name__


class KeysFooter(Footer):
    DEFAULT_CSS = """
    KeysFooter FooterLabel.-part { text-style: bold; margin: 0 1 0 0; }
    """

    def compose(self) -> ComposeResult:
        if not self._bindings_ready:
            return
        screen, palette = self.screen, self.app.COMMAND_PALETTE_BINDING
        part, inner, outer = None, {}, {}
        for node, binding, enabled, tooltip in screen.active_bindings.values():
            if not binding.show or binding.key == palette:
                continue
            mine = node is not screen and node is not self.app
            part = part or (node if mine else None)
            (inner if mine else outer).setdefault(binding.action, (binding, enabled, tooltip))
        shown = 0
        outer_name = getattr(screen, "KEYS_NAME", "") if inner else ""
        for label, keys in ((keys_name(part) if part else "", inner), (outer_name, outer)):
            if label and keys:
                yield FooterLabel(f"{label}:", classes="-part")
                shown += 1
            for binding, enabled, tooltip in keys.values():
                yield FooterKey(binding.key, self.app.get_key_display(binding), binding.description, binding.action,
                                disabled=not enabled, tooltip=tooltip).data_bind(compact=Footer.compact)
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
