"""What the scribe writes down: `[FILE]`, `[DECISION]`, `[ERROR]`, `[PROGRESS]` bullets.

Seed 000 §8.4.1 asks a cheap model for these. `extract` is the offline stand-in: plain
rules over the same input the model would get (no system messages, each message cut to
500 characters), deterministic and bounded. The agent may pass any `Extractor` instead,
such as one that calls a model.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterable, Sequence

from breakwater.core.log.json_lines import checked_loads
from breakwater.core.log.message import Message

Extractor = Callable[[list[Message]], str]

MESSAGE_CHARS = 500          # seed 000: each message is cut to 500 characters
MAX_FILES = 12
MAX_DECISIONS = 6
MAX_ERRORS = 6
MAX_BULLET_CHARS = 200

_EXTENSIONS = (
    "py pyi go rs js jsx ts tsx mjs cjs java kt kts scala c h cc cpp hpp cs rb php swift m mm sh bash zsh "
    "ps1 bat lua pl r sql md rst txt json jsonl yaml yml toml ini cfg conf env lock xml html htm css scss "
    "less vue svelte proto graphql gradle mk cmake dockerfile tf hcl csv tsv log ipynb gitignore"
).split()
_PATH_RE = re.compile(
    r"(?<![\w/.~-])"
    r"(?P<path>(?:~/|\.{1,2}/|/)?(?:[\w.@+-]+/)*\.?[\w@+-][\w.@+-]*)"
    r"(?![\w/])"
)
_URL_RE = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.I)
_PATH_KEYS = {"path", "file", "file_path", "filepath", "filename", "paths", "files", "target", "source",
              "dest", "destination", "src", "dst", "directory", "dir", "cwd"}

_DECISION_RE = re.compile(
    r"\b(?:decid(?:e|ed|ing)|decision|will|instead|because|chose|choose|switch(?:ed)? to|going to|"
    r"plan to|opt(?:ed)? (?:for|to)|prefer)\b|选择|决定|改用|因为|采用|打算|换成",
    re.I,
)
# no leading \b for error/exception, so AssertionError and ValueException count
_ERROR_RE = re.compile(r"(?:error|exception)s?\b|\b(?:traceback|fail(?:s|ed|ure|ing)?|fatal|panic)\b|错误|失败|异常|报错",
                       re.I)
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；])|\n+")


def extract(messages: Sequence[Message]) -> str:
    """The default `Extractor`: bullets as text, one per line ("" when nothing is worth keeping)."""
    return "\n".join(extract_bullets(messages))


def extract_bullets(messages: Sequence[Message]) -> list[str]:
    visible = [m for m in messages if m.role != "system"]
    files = _files(visible)
    decisions = _unique(s for m in visible if m.role == "assistant" for s in _sentences(_cut(m.content))
                        if _DECISION_RE.search(s))
    errors = _unique(ln for m in visible for ln in _cut(m.content).splitlines() if _ERROR_RE.search(ln))
    bullets = [f"- [FILE] {path}: {how}" for path, how in files[:MAX_FILES]]
    bullets += [f"- [DECISION] {_clip(s)}" for s in decisions[:MAX_DECISIONS]]
    bullets += [f"- [ERROR] {_clip(ln)}" for ln in errors[:MAX_ERRORS]]
    last = next((m for m in reversed(visible) if m.role == "assistant" and m.content.strip()), None)
    if last is not None:
        bullets.append(f"- [PROGRESS] {_clip(_cut(last.content))}")
    return bullets


def _cut(text: str) -> str:
    return text[:MESSAGE_CHARS]


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_BULLET_CHARS else text[: MAX_BULLET_CHARS - 1] + "…"


def _unique(items: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for item in items:
        item = item.strip().strip("-*• ").strip()
        key = " ".join(item.lower().split())
        if key and key not in seen:
            seen.add(key)
            out.append(item)
    return out


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_SPLIT.split(text) if s and s.strip()]


def paths_in(text: str) -> list[str]:
    """File paths mentioned in free text: names with a known extension, or explicit paths."""
    text = _URL_RE.sub(" ", text)
    found = []
    for m in _PATH_RE.finditer(text):
        path = m.group("path").rstrip(".")
        if _looks_like_path(path):
            found.append(path)
    return found


def _looks_like_path(path: str) -> bool:
    if not any(c.isalpha() for c in path):
        return False
    if path.startswith(("/", "./", "../", "~/")) and len(path) > 2:
        return True
    name = path.rsplit("/", 1)[-1]
    if "." in name.strip("."):
        ext = name.rsplit(".", 1)[-1].lower()
        return ext in _EXTENSIONS or ("/" in path and ext.isalpha() and len(ext) <= 8)
    return name.lower() in ("makefile", "dockerfile", "readme", "license") or (
        path.count("/") >= 2 and not path.endswith("/"))


def _files(messages: Sequence[Message]) -> list[tuple[str, str]]:
    """(path, how it came up) in first-seen order; how = the tools that touched it, else 'mentioned'."""
    how: dict[str, list[str]] = {}

    def note(path: str, tool: str | None) -> None:
        tools = how.setdefault(path, [])
        if tool and tool not in tools:
            tools.append(tool)

    # a call that was refused or failed read nothing: neither its paths nor its error text are files
    failed = {m.tool_call_id for m in messages if m.role == "tool" and m.content.startswith(("Error: ", "Denied: "))}
    for m in messages:
        for call in m.tool_calls:
            if call.id in failed:
                continue
            for path in _argument_paths(_cut(call.arguments)):
                note(path, call.name or "tool")
        if m.role == "tool" and m.tool_call_id in failed:
            continue
        for path in paths_in(_cut(m.content)):
            note(path, None)
    return [(p, ", ".join(t) if t else "mentioned") for p, t in how.items()]


def _argument_paths(arguments: str) -> list[str]:
    try:
        data = checked_loads(arguments)
    except ValueError:
        return paths_in(arguments)
    out: list[str] = []
    _walk(data, None, out)
    return out


def _walk(value: Any, key: str | None, out: list[str]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _walk(v, str(k).lower(), out)
    elif isinstance(value, list):
        for v in value:
            _walk(v, key, out)
    elif isinstance(value, str):
        single = value.strip()
        # a path argument is taken whole only as one printable word: with a line separator in it
        # (U+2028) it would carry a line of its own into the bullet
        if key in _PATH_KEYS and single and single.isprintable() and not any(c.isspace() for c in single):
            out.append(single)
        else:
            out.extend(paths_in(value))
