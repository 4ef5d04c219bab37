"""write_file: replace a file inside the workspace atomically (SPEC §3)."""

from __future__ import annotations

import os
import stat

from breakwater.core.log.beneath import replace_beneath
from breakwater.tools.result import ToolResult, error_result
from breakwater.tools.workspace import Workspace, WorkspaceError, as_workspace

NEW_FILE_MODE = 0o644
# a symlink at the target is followed (inside the workspace) at most this many times
MAX_LINKS = 40


def write_file(workspace: Workspace | str | os.PathLike, path: str, content: str) -> ToolResult:
    """Write `content` (UTF-8) to `path`, creating parent directories inside the workspace.

    The bytes go to a temporary file created in the target's directory (through that
    directory's descriptor, so it cannot be moved elsewhere under us) and are renamed
    over the target, so a reader sees the old file or the new one, never half of one.
    """
    if not isinstance(content, str):
        return error_result("write_file", f"content must be a string, got {type(content).__name__}", path=str(path))
    try:
        ws = as_workspace(workspace)
        rel = ws.rel(path)
    except WorkspaceError as exc:
        return error_result("write_file", str(exc), path=str(path))
    data = content.encode("utf-8", "replace")
    try:
        for _ in range(MAX_LINKS):
            if rel == ".":
                return error_result("write_file", f"{rel} is a directory", path=rel)
            parent, _, name = rel.rpartition("/")
            dir_fd = ws.open_dir(parent or ".", create=True)
            try:
                try:
                    info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                except FileNotFoundError:
                    info = None
                if info is not None and stat.S_ISLNK(info.st_mode):
                    # Write where the link points, judged like any other path of the workspace.
                    target = os.readlink(name, dir_fd=dir_fd)
                    if os.path.isabs(target):
                        raise ws.link_refusal(path)
                    rel = ws.rel(f"{parent or '.'}/{target}")
                    continue
                if ws.is_agent_state(dir_fd, name):
                    return error_result("write_file", f"{rel} is Breakwater's own state (the session log, "
                                                      "spill files and locks under .agent); tools cannot write it",
                                        path=rel)
                if info is not None and stat.S_ISDIR(info.st_mode):
                    return error_result("write_file", f"{rel} is a directory", path=rel)
                mode = stat.S_IMODE(info.st_mode) if info is not None else NEW_FILE_MODE
                replace_beneath(dir_fd, name, data, mode)
            finally:
                os.close(dir_fd)
            break
        else:
            return error_result("write_file", f"{path} goes through too many symbolic links", path=str(path))
    except WorkspaceError as exc:
        return error_result("write_file", str(exc), path=rel)
    except NotADirectoryError:
        return error_result("write_file", f"a parent of {rel} is not a directory", path=rel)
    except OSError as exc:
        return error_result("write_file", f"cannot write {rel}: {exc.strerror or exc}", path=rel)
    lines = content.count("\n") + (1 if content and not content.endswith("\n") else 0)
    verb = "Replaced" if info is not None else "Created"
    return ToolResult(f"{verb} {rel}: {len(data)} bytes, {lines} lines.",
                      {"tool": "write_file", "path": rel, "bytes": len(data), "lines": lines,
                       "created": info is None})
