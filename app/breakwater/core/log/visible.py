"""Text from a model, a transcript or a tool made safe to show a person (issue 27 item 6).

An escape sequence in such text would reach the terminal as a command: clear the screen, set
the title, write the clipboard, hide the rest of a command that asks for approval, or move the
cursor back over it (`\\r`). Every control character but newline and tab is drawn as its Unicode
control picture instead (ESC as ␛, CR as ␍), C1 controls and the bidirectional overrides that
reorder what is read as U+FFFD. One character stands for one, so offsets into the text (search
hits, highlighted spans) stay valid.
"""

from __future__ import annotations

import re

_PICTURES = {c: 0x2400 + c for c in range(0x20) if c not in (0x09, 0x0A)}
_PICTURES[0x7F] = 0x2421
_PICTURES.update({c: 0xFFFD for c in range(0x80, 0xA0)})
_PICTURES.update({c: 0xFFFD for c in (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))})
_UNSAFE = re.compile("[" + "".join(f"\\U{c:08x}" for c in sorted(_PICTURES)) + "]")


def visible(text: str) -> str:
    """`text` with every character that would act on a terminal instead of showing drawn visibly."""
    return text.translate(_PICTURES) if _UNSAFE.search(text) else text
