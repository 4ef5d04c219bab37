"""Text actions: an agent's command written in its reply (SWE-agent, mini-swe-agent v1), its output
the next user message.

SWE-agent's text-action parsers take the last fenced block of a reply, mini-swe-agent v1 its one
```bash block; the environment answers in a user message, which the importer marks an observation.
SWE-agent's own commands (`open`, `create`, `edit … end_of_edit`, `str_replace_editor`, `goto`,
`find_file`, `search_dir`) read or change files by their signatures and run no shell; any other
command is a shell command.
"""

from __future__ import annotations

import re
from typing import Sequence

from breakwater.core.log.file_effects import MODIFIED, READ, command_effects
from breakwater.core.log.message import Message

# SWE-agent's text-action parsers take the last fenced block of a reply, mini-swe-agent v1 its one
# ```bash block; the environment answers in a user message (marked an observation by the importer)
_LAST_FENCE = re.compile(r"```[^\n`]*\n(.*?)\n?```(?!.*```)", re.DOTALL)
# SWE-agent's own commands (its tools' text signatures): they read or change a file, never run a shell
SWE_READS = ("open", "filemap")
SWE_CREATES = ("create",)
SWE_OWN = frozenset(("open", "goto", "scroll_up", "scroll_down", "create", "edit", "insert", "search_dir",
                     "search_file", "find_file", "submit", "filemap", "str_replace_editor", "exit_forfeit", "skip"))
_EDITOR_CHANGES = ("create", "str_replace", "insert", "undo_edit")
_UPDATED = re.compile(r"^File updated\.", re.MULTILINE)
_OPEN_FILE = re.compile(r"^\(Open file: ([^)\n]+)\)", re.MULTILINE)


def text_action(text: str) -> str | None:
    """The command a text-action reply gives (its last fenced block), if it gives one."""
    if "```" not in text:
        return None
    m = _LAST_FENCE.search(text)
    action = m.group(1).strip() if m else ""
    return action or None


def action_effects(action: str) -> tuple[tuple[str, str], ...]:
    """(path, MODIFIED or READ) of the files a text action touches: SWE-agent's own commands by their
    signatures (`open path`, `create path`, `str_replace_editor view|create|str_replace path`), any
    other command as a shell command. `edit`/`insert` change the open file: the editor's answer
    names it (`editor_updated`)."""
    words = action.split()
    name = words[0] if words else ""
    if name in SWE_OWN:
        if name in SWE_READS and len(words) > 1:
            return ((words[1], READ),)
        if name in SWE_CREATES and len(words) > 1:
            return ((words[1], MODIFIED),)
        if name == "str_replace_editor" and len(words) > 2:
            return ((words[2], MODIFIED if words[1] in _EDITOR_CHANGES else READ),)
        return ()
    return command_effects(action)


def editor_updated(msg: Message) -> str | None:
    """The file SWE-agent's editor says it updated (`File updated.` after an edit, the open file named
    below it), when a user message is that answer."""
    if "File updated" not in msg.content or not _UPDATED.search(msg.content):
        return None
    m = _OPEN_FILE.search(msg.content)
    return m.group(1).strip() if m and m.group(1).strip() != "n/a" else None


def acted_replies(messages: Sequence[Message]) -> dict[str, str]:
    """The replies whose text gives a command that the next message answers as an observation."""
    out = {}
    for m, after in zip(messages, messages[1:]):
        if m.role == "assistant" and not m.tool_calls and after.role == "user" and after.is_observation:
            action = text_action(m.content)
            if action:
                out[m.id] = action
    return out
