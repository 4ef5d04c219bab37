"""Reading a file of JSON lines as the json module reads it, only faster, and never failing on a line.

Every line is read as `json.loads` reads it (msgspec where it reads the same, the json module where
it does not); a line that cannot be read as it is becomes a problem named with its line number.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any, Iterator

import msgspec

from breakwater.core.log.regular_file import RefusedFile, open_regular
from breakwater.core.log.message import replace_surrogates


class SessionLogError(Exception):
    """The file cannot be read at all (missing, a directory, no permission, empty)."""


# Read ahead this much: with the default 8 KB a line of a 15 KB tool result is put together from two
# reads and a copy, and reading a 31 MB session by lines took a third longer.
READ_AHEAD = 1 << 18


def open_session_file(path: Path):
    """Open for binary reading; every reason it cannot be read becomes one clear SessionLogError. Only
    a regular file is read (core/log/beneath.open_regular): a FIFO there would block the open for ever,
    a link to /dev/zero read without end."""
    try:
        return os.fdopen(open_regular(path), "rb", buffering=READ_AHEAD)
    except RefusedFile as exc:
        raise SessionLogError(str(exc)) from None
    except IsADirectoryError:
        raise SessionLogError(f"{path}: is a directory, not a session file") from None
    except FileNotFoundError:
        raise SessionLogError(f"{path}: no such file") from None
    except PermissionError:
        raise SessionLogError(f"{path}: permission denied") from None
    except OSError as exc:
        raise SessionLogError(f"{path}: cannot read ({exc.strerror or exc})") from None


_SCAN = json.JSONDecoder().scan_once
# A well-formed line is read by msgspec, twice as fast as the json module and the same objects (exact
# integers, the same floats, the last of a repeated key); whatever it refuses (NaN, a number out of
# range, broken JSON, a lone surrogate escape, repaired below) the json module reads as before. So it
# does a line nested _BRACKETS deep (msgspec's nesting limit is a few levels past json's, which
# depends on how deep the caller's stack is).
_DECODE = msgspec.json.Decoder().decode
_BRACKETS = 256
SHORT_LINE = 2 * _BRACKETS   # too short to hold _BRACKETS brackets and their contents
_LONE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
DIGITS_LIMIT = sys.get_int_max_str_digits() or 4300


def shallow(obj: Any) -> bool:
    """Whether `obj` nests containers fewer than _BRACKETS deep. Asked of what msgspec read (of a line
    too long to be shallow anyway, or of a message's meta), in place of counting its brackets: a tool
    output of 15 KB is one string, a walk of one level, where counting reads every byte twice."""
    level = [obj]
    for _ in range(_BRACKETS):
        inner = []
        for node in level:
            if type(node) is dict:
                node = node.values()
            elif type(node) is not list:
                continue
            inner += [v for v in node if type(v) is dict or type(v) is list]
        if not inner:
            return True
        level = inner
    return False


def _bounded_int(digits: str) -> int | None:
    return int(digits) if len(digits) <= DIGITS_LIMIT else None


_LENIENT = json.JSONDecoder(parse_int=_bounded_int)


def lenient_loads(text: str) -> Any:
    """json.loads, except that an integer too long to convert becomes None."""
    return _LENIENT.decode(text)


def _refused_int(digits: str) -> int:
    if len(digits) > DIGITS_LIMIT:
        raise ValueError(f"a number of {len(digits)} digits (at most {DIGITS_LIMIT})")
    return int(digits)


_CHECKED = json.JSONDecoder(parse_int=_refused_int)


def checked_loads(text: str) -> Any:
    """json.loads for text from outside (a model's tool-call arguments): every way it fails is a
    ValueError that says why, a nesting too deep for the stack and a number too long included."""
    try:
        return _CHECKED.decode(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except RecursionError:
        raise ValueError("nested too deeply") from None


def decode_document(raw: bytes, where: object, notes: list[str] | None = None) -> Any:
    """One JSON document (a whole file) as `json.loads` reads it, by msgspec where that reads the same
    (as `read_line` does a line): three times as fast, and a reader that sniffed the format first no
    longer reads the file twice. An integer too long to convert is read as null and a lone surrogate
    escape as U+FFFD, each said once in `notes`; broken JSON and nesting too deep to parse are a
    clear SessionLogError naming `where`."""
    try:
        data = _DECODE(raw)
    except (ValueError, RecursionError):
        pass
    else:
        if len(raw) < SHORT_LINE or shallow(data):
            return data
    text = raw.decode("utf-8", errors="replace")
    found = []
    try:
        data = json.loads(text)
    except RecursionError:
        raise SessionLogError(f"{where}: nested too deeply to read") from None
    except json.JSONDecodeError as exc:
        raise SessionLogError(f"{where}: not valid JSON ({exc})") from None
    except ValueError:  # an integer longer than int() converts
        data = lenient_loads(text)
        found.append(f"numbers of more than {DIGITS_LIMIT} digits were read as null")
    if "\\u" in text and (fixed := replace_surrogates_in(data)) is not None:
        data = fixed
        found.append("lone surrogate escapes (not characters) were replaced by U+FFFD")
    if notes is not None:
        notes.extend(found)
    return data


class NotPlain(Exception):
    """An item of a JSON array that msgspec does not read as the json module does (`decode_document`)."""


_RAW_ITEMS = msgspec.json.Decoder(list[msgspec.Raw]).decode


class ArrayItems:
    """The items of a JSON array document, read once, in order, each decoded when it is reached and its
    bytes let go. Decoded whole, a 64,000-message OpenAI array (55 MB) held every message's dicts (99 MB)
    beside the file's bytes before the first message was built. Iterating raises NotPlain at an item
    msgspec does not read as the json module does; the reader then starts again from `whole()`, the
    file as `decode_document` reads it."""

    __slots__ = ("path", "_items", "_head")

    def __init__(self, path: Path, items: list[bytes]):
        self.path = path
        items.reverse()   # taken from the end as they are reached
        self._items = items
        self._head: tuple[Any] | None = None   # the first item, decoded to tell the format: handed on

    def __iter__(self) -> Iterator[Any]:
        items = self._items
        if self._head is not None and items:
            items.pop()
            head, self._head = self._head[0], None
            yield head
        while items:
            yield _plain(items.pop())

    def first(self) -> Any:
        if self._head is None and self._items:
            self._head = (_plain(self._items[-1]),)
        return self._head[0] if self._head is not None else None

    def whole(self, notes: list[str] | None = None) -> Any:
        with open_session_file(self.path) as fh:
            return decode_document(fh.read(), self.path, notes)


def array_items(path: Path, raw: bytes) -> ArrayItems | None:
    """The items of `raw` (the file at `path`), when it is one JSON array msgspec can split, checking its
    syntax as it goes; None otherwise, and `decode_document` says what it is. Each item is copied out,
    so that `raw` can go and each item's bytes with it."""
    try:
        split = _RAW_ITEMS(raw)
    except (ValueError, RecursionError):   # msgspec's DecodeError and ValidationError are ValueErrors
        return None
    return ArrayItems(path, [bytes(item) for item in split])


def _plain(item: bytes) -> Any:
    """One item, read by msgspec where that reads what the json module does (as `decode_document`)."""
    try:
        data = _DECODE(item)
    except (ValueError, RecursionError):
        raise NotPlain from None
    if len(item) >= SHORT_LINE and not shallow(data):
        raise NotPlain
    return data


def iter_json_lines(path: Path) -> Iterator[tuple[int, Any | None, str | None]]:
    """Yield (line number, parsed object or None, problem or None) for every non-blank line.

    Survives broken JSON, a truncated last line, several objects glued on one
    line (each is yielded), bytes that are not UTF-8 (replaced, reported), very
    long lines, nesting too deep to parse, integers too long to convert (read
    as null) and lone surrogate escapes (replaced by U+FFFD). None with a problem:
    the line is skipped.
    """
    with open_session_file(path) as fh:
        lineno = 0
        for raw in fh:
            lineno += 1
            yield from read_line(lineno, raw)


def read_line(lineno: int, raw: bytes) -> Iterator[tuple[int, Any | None, str | None]]:
    """What `iter_json_lines` yields for one line."""
    try:  # the fast path: one well-formed object per line
        obj = _DECODE(raw)
    except (ValueError, RecursionError):   # msgspec.DecodeError is a ValueError
        pass
    else:   # unless nested deep enough that the json module may refuse it: then as it reads it
        if len(raw) < SHORT_LINE or shallow(obj):
            if obj is None:
                yield lineno, None, "expected a JSON object, got null, skipped"
            else:
                yield lineno, obj, None
            return
    try:  # one object per line, straight to the C scanner
        text = raw.decode()
        obj, end = _SCAN(text, 0)
        if end != len(text) and not text[end:].isspace():
            raise ValueError
    except (ValueError, StopIteration, RecursionError):
        if raw.strip():
            yield from _slow_line(lineno, raw)
        return
    if obj is None:
        yield lineno, None, "expected a JSON object, got null, skipped"
    elif "\\u" in text and _LONE_ESCAPE.search(text) and (fixed := replace_surrogates_in(obj)) is not None:
        yield lineno, fixed, "a lone surrogate escape (not a character) was replaced by U+FFFD"
    else:
        yield lineno, obj, None


def _slow_line(lineno: int, raw: bytes) -> Iterator[tuple[int, Any | None, str | None]]:
    complete = raw.endswith(b"\n")
    raw = raw.strip()
    try:
        text = raw.decode("utf-8")
        problems = []
    except UnicodeDecodeError as exc:
        text = raw.decode("utf-8", errors="replace")
        problems = [f"bytes that are not UTF-8 at column {exc.start + 1} were replaced"]
    objs: list[Any] = []
    pos, err = 0, None
    too_long: list[str] = []

    def bounded_int(digits: str) -> int | None:   # an integer longer than int() converts is read as null
        if len(digits) <= DIGITS_LIMIT:
            return int(digits)
        too_long.append(digits)
        return None

    decoder = json.JSONDecoder(parse_int=bounded_int)
    while pos < len(text):
        seen = len(too_long)
        try:
            obj, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            err = exc
            break
        except RecursionError:
            yield lineno, None, "nested too deeply to read, skipped"
            return
        if len(too_long) > seen:
            problems.append(f"a number of more than {DIGITS_LIMIT} digits was read as null")
        objs.append(obj)
        pos = end
        while pos < len(text) and text[pos] in " \t\r":
            pos += 1
    if err is not None and not objs:
        if not complete:
            yield lineno, None, f"truncated last line ({len(raw)} bytes), skipped"
        else:
            yield lineno, None, f"not valid JSON ({err.msg} at column {err.colno}), skipped"
        return
    if len(objs) > 1 or err is not None:
        what = f"{len(objs)} JSON objects glued on one line"
        problems.append(what + (", loaded each" if err is None else f", loaded {len(objs)}, rest is broken"))
    if "\\u" in text:
        for i, obj in enumerate(objs):
            fixed = replace_surrogates_in(obj)
            if fixed is not None:
                objs[i] = fixed
                problems.append("a lone surrogate escape (not a character) was replaced by U+FFFD")
    problem = "; ".join(problems) or None
    for i, obj in enumerate(objs):
        if obj is None:
            yield lineno, None, "expected a JSON object, got null, skipped"
        else:
            yield lineno, obj, problem if i == 0 else None


def replace_surrogates_in(obj: Any) -> Any | None:
    """`obj` with lone surrogates replaced in every string (keys too), or None if it had none."""
    if isinstance(obj, str):
        fixed = replace_surrogates(obj)
        return None if fixed == obj else fixed
    found = False
    stack = [obj]
    while stack:  # iterative: the object may be nested as deep as the parser allows
        node = stack.pop()
        items = list(node.items()) if isinstance(node, dict) else enumerate(node)
        for key, value in items:
            if isinstance(value, str):
                fixed = replace_surrogates(value)
                if fixed != value:
                    node[key] = fixed
                    found = True
            elif isinstance(value, (dict, list)):
                stack.append(value)
            if isinstance(node, dict) and isinstance(key, str) and (new_key := replace_surrogates(key)) != key:
                node[new_key] = node.pop(key)
                found = True
    return obj if found else None
