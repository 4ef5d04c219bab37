"""write_file: replace a file inside the workspace atomically (SPEC §3)."""

from __future__ import annotations

import os
import stat
import tempfile

from breakwater.tools.result import ToolResult, error_result
from breakwater.tools.workspace import Workspace, WorkspaceError, as_workspace

NEW_FILE_MODE = 0o644


def write_file(workspace: Workspace | str | os.PathLike, path: str, content: str) -> ToolResult:
    """Write `content` (UTF-8) to `path`, creating parent directories inside the workspace.

    The bytes go to a temporary file beside the target and are moved over it with
    `os.replace`, so a reader sees the old file or the new one, never half of one.
    """
    if not isinstance(content, str):
        return error_result("write_file", f"content must be a string, got {type(content).__name__}", path=str(path))
    try:
        ws = as_workspace(workspace)
        real = ws.resolve(path)
    except WorkspaceError as exc:
        return error_result("write_file", str(exc), path=str(path))
    rel = ws.relative(real)
    data = content.encode("utf-8", "replace")
    try:
        if real == ws.root or real.is_dir():
            return error_result("write_file", f"{rel} is a directory", path=rel)
        existed = real.exists()
        mode = stat.S_IMODE(real.stat().st_mode) if existed else NEW_FILE_MODE
        real.parent.mkdir(parents=True, exist_ok=True)
        # The parent was created after the check: make sure it did not land elsewhere.
        ws.resolve(real.parent)
        fd, tmp = tempfile.mkstemp(dir=real.parent, prefix=f".{real.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, mode)
            os.replace(tmp, real)
        except BaseException:
            os.unlink(tmp)
            raise
    except WorkspaceError as exc:
        return error_result("write_file", str(exc), path=rel)
    except OSError as exc:
        return error_result("write_file", f"cannot write {rel}: {exc.strerror or exc}", path=rel)
    lines = content.count("\n") + (1 if content and not content.endswith("\n") else 0)
    verb = "Replaced" if existed else "Created"
    return ToolResult(f"{verb} {rel}: {len(data)} bytes, {lines} lines.",
                      {"tool": "write_file", "path": rel, "bytes": len(data), "lines": lines, "created": not existed})
