"""The workspace: the one directory the agent's tools may touch (SPEC §3, §11)."""

from __future__ import annotations

import os
from pathlib import Path


class WorkspaceError(ValueError):
    """A path the tools must not use (outside the workspace, malformed) or a missing workspace."""


class Workspace:
    """Confines tool paths to `root`.

    A path is checked by where it really lands: `..`, absolute paths and symlinks
    (dangling ones too, and a symlinked parent of a file not created yet) are
    followed first, and the result must be the root or below it.
    """

    def __init__(self, root: str | os.PathLike):
        path = Path(root)
        if not path.is_dir():
            raise WorkspaceError(f"workspace {str(path)!r} is not a directory")
        self.root = path.resolve()

    def resolve(self, path: str | os.PathLike) -> Path:
        """The real absolute path for `path` (relative to the root), or WorkspaceError."""
        text = os.fspath(path)
        if not text:
            raise WorkspaceError("empty path")
        if "\x00" in text:
            raise WorkspaceError(f"path {text!r} contains a NUL byte")
        candidate = Path(text)
        if not candidate.is_absolute():
            candidate = self.root / candidate
        # realpath follows every symlink that exists (dangling ones included) and keeps the
        # not-yet-existing rest as written, so a new file under a symlinked parent is caught.
        real = Path(os.path.realpath(candidate))
        if real != self.root and not real.is_relative_to(self.root):
            raise WorkspaceError(f"path {text!r} is outside the workspace {str(self.root)!r}")
        return real

    def relative(self, path: str | os.PathLike) -> str:
        """`path` as the model should name it: relative to the root, with forward slashes."""
        real = self.resolve(path)
        return "." if real == self.root else real.relative_to(self.root).as_posix()

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"


def as_workspace(workspace: "Workspace | str | os.PathLike") -> Workspace:
    return workspace if isinstance(workspace, Workspace) else Workspace(workspace)
