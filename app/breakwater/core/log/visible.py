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


# JSON printed for a person's terminal: json.dumps escapes C0 controls itself but, with
# ensure_ascii=False, leaves C1 controls (U+009B is CSI) and bidi overrides as they are.
# Written as \uXXXX escapes they are the same JSON value and nothing a terminal acts on.
_JSON_ESCAPES = {c: f"\\u{c:04x}" for c in _PICTURES if c >= 0x80}
_JSON_UNSAFE = re.compile("[" + "".join(f"\\U{c:08x}" for c in sorted(_JSON_ESCAPES)) + "]")


def json_safe(text: str) -> str:
    """JSON text (from json.dumps) with C1 controls and bidi overrides escaped: the same value."""
    if text.isascii():   # every one is past ASCII; CPython knows a str is ASCII without reading it
        return text
    return text.translate(_JSON_ESCAPES) if _JSON_UNSAFE.search(text) else text
