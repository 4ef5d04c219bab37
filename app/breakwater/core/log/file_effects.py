"""Which files a tool call reads or changes: by the tool's own arguments, or by the shell command it runs.

Shell-driven agents (mini-swe-agent, SWE-agent's bash) change files with `sed -i`, `cat > f`, `tee`,
`>`/`>>`, `patch` or `git apply` fed a diff, and Python writes in a heredoc or `-c`; they read them
with `cat`, `head`, `tail`, `nl` or `sed -n`. The summary's file list and fidelity's file facts both
read calls through `file_effects`, so a file counts the same in both.
"""

from __future__ import annotations

import re
import shlex
from functools import lru_cache

from breakwater.core.log.message import ToolCall
from breakwater.core.log.outcome import CHANGE_TOOLS, PATH_KEYS, call_args, command_of

MODIFIED, READ = "modified", "read"
# the str_replace_editor family names what it does in a `command` argument
_EDITOR_READS = ("view",)
# tools that write the file their path argument names, beside CHANGE_TOOLS (SWE-agent's `create`)
_CREATE_TOOLS = ("create", "create_file", "write", "str_replace_based_edit_tool")
_READERS = ("cat", "head", "tail", "nl", "less", "more", "bat")
_WRITERS = ("touch", "truncate")
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1[^\n]*\n(.*?)\n\s*\2\s*(?:\n|$)", re.DOTALL)
_PY_WRITE = re.compile(r"""open\(\s*(?:r|f)?['"]([^'"\n]+)['"]\s*,\s*(?:mode\s*=\s*)?['"][wax]""")
_PATH_WRITE = re.compile(r"""Path\(\s*['"]([^'"\n]+)['"]\s*\)\s*\.write_(?:text|bytes)""")
_DIFF_TARGET = re.compile(r"^(?:\+\+\+ (?:b/)?|\*\*\* (?:Update|Add) File: )(\S+)", re.MULTILINE)
_REDIRECT = re.compile(r"(?<![<>&\d])\d?>>?\|?\s*([^\s;&|<>()'\"]+)")
_SPLIT = re.compile(r"&&|\|\||[;|\n]")
_PATHLIKE = re.compile(r"^(?:[\w.@~+-]*/)*[\w@+-][\w.@+-]*$")


def file_effects(call: ToolCall) -> tuple[tuple[str, str], ...]:
    """(path, MODIFIED or READ) for each file the call touches, in order, each path once (a change
    wins over a read)."""
    out: dict[str, str] = {}

    def put(path: str, how: str) -> None:
        path = path.strip()
        if path and (out.get(path) != MODIFIED):
            out[path] = how

    args = call_args(call)
    path = next((args[k] for k in PATH_KEYS if isinstance(args.get(k), str) and args[k].strip()), None)
    if path:
        editing = (call.name in CHANGE_TOOLS or call.name in _CREATE_TOOLS) \
            and str(args.get("command") or "") not in _EDITOR_READS
        put(path, MODIFIED if editing else READ)
    for key in ("patch", "input", "diff"):
        if call.name in CHANGE_TOOLS and isinstance(args.get(key), str):
            for target in _DIFF_TARGET.findall(args[key]):
                put(target, MODIFIED)
    command = command_of(call)
    if command:
        for p, how in command_effects(command):
            put(p, how)
    return tuple(out.items())


@lru_cache(maxsize=1 << 12)
def command_effects(command: str) -> tuple[tuple[str, str], ...]:
    """(path, MODIFIED or READ) of the files a shell command changes or reads, as far as its text says."""
    found: list[tuple[str, str]] = []
    bodies = []

    def heredoc(m: re.Match) -> str:
        bodies.append(m.group(3))
        return "\n"

    shell = _HEREDOC.sub(heredoc, command)
    scripts = [*bodies, command] if bodies else [command]
    for body in scripts:
        found += [(p, MODIFIED) for p in _PY_WRITE.findall(body) + _PATH_WRITE.findall(body)]
    for body in bodies:
        found += [(p, MODIFIED) for p in _DIFF_TARGET.findall(body)]
    for part in _SPLIT.split(shell):
        found += [(p, MODIFIED) for p in _REDIRECT.findall(part) if _is_path(p)]
        words = _words(part)
        while words and ("=" in words[0] or words[0] in ("sudo", "env", "time", "command")):
            words = words[1:]
        if not words:
            continue
        prog, rest = words[0].rsplit("/", 1)[-1], _operands(words[1:])
        if prog == "sed":
            inplace = any(w == "-i" or w.startswith(("-i", "--in-place")) for w in words[1:] if w.startswith("-"))
            files = [w for w in rest[1:] if _is_path(w)] if not any(w.startswith("-e") for w in words) \
                else [w for w in rest if _is_path(w)]
            found += [(p, MODIFIED if inplace else READ) for p in files]
        elif prog == "tee" or prog in _WRITERS:
            found += [(p, MODIFIED) for p in rest if _is_path(p)]
        elif prog in ("cp", "mv") and len(rest) >= 2 and _is_path(rest[-1]):
            found.append((rest[-1], MODIFIED))
        elif prog in _READERS:
            found += [(p, READ) for p in rest if _is_path(p)]
    return tuple(dict.fromkeys(found))


# SWE-agent's `edit` and `insert` change the open file, which only their result names
_EDIT_IN_PLACE = ("edit", "insert")
_EDITED = re.compile(r"\[File: ([^\s\]]+)|\(Open file: ([^)\s]+)\)")


def in_place_edit(call: ToolCall, result: str) -> str | None:
    """The file an edit of the open file changed (SWE-agent's `edit`, `insert`), as its result names it."""
    if call.name not in _EDIT_IN_PLACE or any(how == MODIFIED for _, how in file_effects(call)):
        return None
    m = _EDITED.search(result)
    return (m.group(1) or m.group(2)) if m else None


_HEAD_SKIP = ("cd", "source", "export")   # steps that only set up: their operand goes with them
_TOKEN = re.compile(r"[\w.@/+#~%-]*\w")


_HEAD_NOISE = re.compile(r"\d?>>?&?\s*/dev/\S+|<<-?\s*['\"]?\w+['\"]?")


def command_head(command: str) -> tuple[str, ...]:
    """The program and its main operand (a file, else the first two) of the command's first step that does
    something (`cd x &&` is not it): what identifies a command however it is quoted or paraphrased,
    lowered."""
    for step in re.split(r"&&|\|\||;|\n", command):
        # a redirection to a device (`2>/dev/null`), a heredoc's marker and an option (`-name`, `--all`)
        # are no operand: the tokens are told apart before their dashes are stripped
        tokens = _TOKEN.findall(_HEAD_NOISE.sub(" ", step.split("|")[0]).casefold())
        words = [w for w in (t.strip(".-/") for t in tokens if not t.startswith("-")) if w]
        while words and (words[0] in _HEAD_SKIP or words[0] in ("sudo", "env", "time") or "=" in words[0]):
            words = words[2:] if words[0] in _HEAD_SKIP else words[1:]
        if words:
            operands = [w for w in words[1:] if len(w) >= 2]
            named = next((w for w in operands if "." in w.rsplit("/", 1)[-1].strip(".")),
                         next((w for w in operands if "/" in w), None))
            # no file: a subcommand and its argument (`pip install erfa`, `git commit`)
            return (words[0], named) if named else (words[0], *operands[:2])
    return ()


def _words(part: str) -> list[str]:
    part = _REDIRECT.sub(" ", part)
    try:
        return shlex.split(part, comments=False)
    except ValueError:
        return part.split()


def _operands(words: list[str]) -> list[str]:
    return [w for w in words if not w.startswith("-")]


def _is_path(word: str) -> bool:
    """A file name as a command gives it: no options, variables or globs, and not a device."""
    if not word or word.startswith(("-", "/dev/", "&", "$")) or any(c in word for c in "*?$`{}[]=:,"):
        return False
    if not _PATHLIKE.match(word):
        return False
    base = word.rsplit("/", 1)[-1]
    return "/" in word or ("." in base.strip(".") and not base.replace(".", "").isdigit())
