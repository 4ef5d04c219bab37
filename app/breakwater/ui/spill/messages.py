"""What the spill pane's workers report. They never touch a widget; the pane's handlers do.

Every message about one opened file carries the `generation` it was started for, so a
report about a file the user has since left is dropped instead of applied to the new one.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from pathlib import Path

from textual.message import Message

from breakwater.tools.spill_index import SpillFile
from breakwater.tools.spill_search import Hit, Query


@dataclass
class SpillFilesListed(Message):
    """The spill files now in the watched directory (newest first), and which paths changed."""

    workspace: Path
    session_id: str | None
    files: tuple[SpillFile, ...]
    changed: frozenset[Path]


@dataclass
class TailIndexed(Message):
    """The last lines of the opened file are indexed: it can be shown at its tail now."""

    generation: int
    identity: tuple[int, int]
    origin: int
    end: int
    ends: array


@dataclass
class IndexProgress(Message):
    """How far the scan of the head has come; only the latest one matters."""

    generation: int
    scanned: int
    total: int

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, IndexProgress) and message.generation == self.generation


@dataclass
class HeadIndexed(Message):
    """Every line before the tail is indexed: line numbers are absolute from now on."""

    generation: int
    ends: array


@dataclass
class LinesAppended(Message):
    """The file grew: the newlines found in bytes [start, end)."""

    generation: int
    start: int
    end: int
    ends: array


@dataclass
class FileReplaced(Message):
    """The file shrank or was rewritten: the index no longer fits it."""

    generation: int


@dataclass
class FileFailed(Message):
    """The file could not be read; `reason` is one line for the user."""

    generation: int
    reason: str


@dataclass
class SearchFinished(Message):
    """Where the search landed (`hit` None: nowhere); `wrapped`: it went round the end."""

    generation: int
    query: Query
    hit: Hit | None
    wrapped: bool
    backward: bool
