"""The workspace: the one directory the agent's tools may touch (SPEC §3, §11)."""

from __future__ import annotations

import errno
import os
import stat
import weakref
from pathlib import Path

from breakwater.core.log.beneath import OwnedDir, open_beneath, owned_dir_fd

DIR_FLAGS = os.O_PATH | os.O_DIRECTORY
AGENT_DIR = ".agent"
# Breakwater's own state: the tools may read it but never write it (issue 27 item 8), nor the locks
# (`.agent/*.lock`; these two are the memory's, memory/store.py and memory/project.py). Memory files
# (.agent/MEMORY.md...) stay writable: the agent may keep notes, marked as a tool's (memory/ledger.py).
AGENT_STATE = (".agent/sessions", ".agent/spill", ".agent/state")    # state: memory/ledger.py's STATE_DIR
AGENT_LOCKS = ("memory.lock", "project_memory.lock")
# how many folders up from a write's folder to look for the state's (deeper is not the state's layout)
STATE_DEPTH = 8


class WorkspaceError(ValueError):
    """A path the tools must not use (outside the workspace, malformed) or a missing workspace."""


class Workspace:
    """Confines tool paths to `root`.

    The root is opened once; every path is then opened relative to that descriptor by
    `open`, which refuses whatever leads out of it (`..` above the root, a symlink to
    elsewhere, an absolute path outside) in the same system call that opens the file.
    Symlinks that stay inside are followed where the kernel can check that (openat2).
    """

    def __init__(self, root: str | os.PathLike):
        path = Path(root)
        if not path.is_dir():
            raise WorkspaceError(f"workspace {str(path)!r} is not a directory")
        self.root = path.resolve()
        try:
            self.fd = os.open(self.root, DIR_FLAGS | os.O_CLOEXEC)
        except OSError as exc:
            raise WorkspaceError(f"cannot open the workspace {str(self.root)!r}: {exc.strerror}") from None
        weakref.finalize(self, os.close, self.fd)

    def rel(self, path: str | os.PathLike) -> str:
        """`path` as the model should name it: normalised, relative to the root, forward slashes.

        Only the spelling is judged here (`..` above the root, an absolute path elsewhere);
        where the path really lands is judged when it is opened.
        """
        text = os.fspath(path)
        if not isinstance(text, str):
            text = os.fsdecode(text)
        if not text:
            raise WorkspaceError("empty path")
        if "\x00" in text:
            raise WorkspaceError(f"path {text!r} contains a NUL byte")
        norm = os.path.normpath(text)
        if os.path.isabs(norm):
            root = str(self.root)
            if norm != root and not norm.startswith(root.rstrip("/") + "/"):
                raise WorkspaceError(f"path {text!r} is outside the workspace {root!r}")
            norm = os.path.relpath(norm, root)
        if norm == ".." or norm.startswith("../"):
            raise WorkspaceError(f"path {text!r} is outside the workspace {str(self.root)!r}")
        return norm

    def open(self, path: str | os.PathLike, flags: int, mode: int = 0o644) -> int:
        """A descriptor for `path` opened beneath the root (the caller closes it).

        WorkspaceError when the path leads out of the workspace; other failures are the
        OSError of the open (FileNotFoundError, IsADirectoryError, ...).
        """
        rel = self.rel(path)
        try:
            return open_beneath(self.fd, rel, flags, mode)
        except OSError as exc:
            raise self._refusal(exc, path) from None

    def read_regular(self, path: str | os.PathLike, limit: int) -> bytes:
        """At most `limit` bytes of the regular file at `path`. A FIFO or device there (a command may
        have left one) is refused without blocking: opened O_NONBLOCK and checked by fstat."""
        fd = self.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise WorkspaceError(f"{os.fspath(path)!r} is not a regular file")
            return fh.read(limit)

    def open_dir(self, path: str | os.PathLike, create: bool = False, follow: bool = True) -> int:
        """A directory descriptor (O_PATH) for `path`; with `create`, missing directories are made.
        Without `follow` no symlink is followed at all (Breakwater's own folders, issue 27)."""
        rel = self.rel(path)
        try:
            return open_beneath(self.fd, rel, DIR_FLAGS, follow=follow)
        except FileNotFoundError:
            if not create:
                raise
        except OSError as exc:
            raise self._refusal(exc, path) from None
        # Make the missing directories one at a time, each inside the one opened before it.
        parts = rel.split("/")
        current = os.dup(self.fd)
        try:
            for i, part in enumerate(parts):
                try:
                    step = open_beneath(self.fd, "/".join(parts[:i + 1]), DIR_FLAGS, follow=follow)
                except FileNotFoundError:
                    try:
                        os.mkdir(part, 0o755, dir_fd=current)
                    except FileExistsError:
                        pass
                    step = open_beneath(self.fd, "/".join(parts[:i + 1]), DIR_FLAGS, follow=follow)
                os.close(current)
                current = step
        except OSError as exc:
            os.close(current)
            raise self._refusal(exc, path) from None
        return current

    def link_refusal(self, path: str | os.PathLike) -> WorkspaceError:
        """Why a path whose spelling stays inside was refused: a symlink on it is absolute or leads out.
        An absolute link is refused even when it points inside, by read_file and write_file alike."""
        return WorkspaceError(f"path {os.fspath(path)!r} goes through a symbolic link with an absolute target "
                              f"or one leading outside the workspace {str(self.root)!r}; such links are not followed")

    def prepare_agent_state(self) -> None:
        """Make Breakwater's state folders and lock files, no link followed, so that a sandbox binds
        them read-only before a command runs: one the command makes itself would be its own to write.
        UnsafePathError (an OSError) when something a tool planted is in the way."""
        for rel in AGENT_STATE:
            os.close(owned_dir_fd(self.root, rel))
        agent = OwnedDir(self.root, AGENT_DIR)
        for name in AGENT_LOCKS:
            os.close(agent.open(name, os.O_RDONLY | os.O_CREAT))

    def is_agent_state(self, dir_fd: int, name: str) -> bool:
        """Whether `name` in the directory `dir_fd` (wherever the links to it led) is Breakwater's own
        state. The folder is judged by what it is, not by a path: it, or a folder up to STATE_DEPTH
        above it, is one of the state's folders as reached from the root with no link followed."""
        state, agent = set(), None
        for rel in (AGENT_DIR, *AGENT_STATE):
            try:
                fd = open_beneath(self.fd, rel, DIR_FLAGS, follow=False)
            except OSError:
                continue
            try:
                st = os.fstat(fd)
            finally:
                os.close(fd)
            if rel == AGENT_DIR:
                agent = (st.st_dev, st.st_ino)
            else:
                state.add((st.st_dev, st.st_ino))
        here = os.fstat(dir_fd)
        if (here.st_dev, here.st_ino) == agent and name.endswith(".lock"):
            return True
        root = os.fstat(self.fd)
        current = os.dup(dir_fd)
        try:
            for _ in range(STATE_DEPTH):
                st = os.fstat(current)
                if (st.st_dev, st.st_ino) in state:
                    return True
                if (st.st_dev, st.st_ino) == (root.st_dev, root.st_ino):
                    return False
                up = os.open("..", DIR_FLAGS | os.O_CLOEXEC, dir_fd=current)
                os.close(current)
                current = up
        finally:
            os.close(current)
        return False

    def _refusal(self, exc: OSError, path: str | os.PathLike) -> OSError | WorkspaceError:
        text = os.fspath(path)
        if exc.errno == errno.EXDEV:     # the spelling was judged inside by rel(): a link led out
            return self.link_refusal(path)
        if exc.errno == errno.ELOOP:
            return WorkspaceError(f"path {text!r} goes through a symbolic link that is not followed here")
        return exc

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"


def as_workspace(workspace: "Workspace | str | os.PathLike") -> Workspace:
    return workspace if isinstance(workspace, Workspace) else Workspace(workspace)
