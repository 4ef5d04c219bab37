"""Where full tool output is spilled, and the notice that tells the model how to read it.

Layout (SPEC §3, §11): `<workspace>/.agent/spill/<session_id>/<tool_call_id>.log`.
Both ids come from outside (a session file, the model's tool call), so they are
reduced to one safe file-name component each and the final path is checked to
land inside the spill directory.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from breakwater.tools.workspace import Workspace, WorkspaceError

SPILL_DIR = Path(".agent") / "spill"
SUFFIX = ".log"
MAX_COMPONENT = 100

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def safe_component(raw: str, fallback: str) -> str:
    """One path component for `raw`: only `[A-Za-z0-9._-]`, no leading dot, bounded length.

    When anything had to change, a short hash of the original is appended so two
    different ids (`a/b`, `a_b`) never share a file.
    """
    text = raw if isinstance(raw, str) else str(raw)
    safe = _UNSAFE.sub("_", text)
    safe = "_" + safe[1:] if safe.startswith(".") else safe
    if safe == text and 0 < len(safe) <= MAX_COMPONENT:
        return safe
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    stem = safe[:MAX_COMPONENT - len(digest) - 1] or fallback
    return f"{stem}-{digest}"


def spill_path(workspace: Workspace, session_id: str, tool_call_id: str, create_dir: bool = True) -> Path:
    """The absolute spill file for one tool call, guaranteed to be inside `.agent/spill/`."""
    root = workspace.root / SPILL_DIR
    session_dir = root / safe_component(session_id, "session")
    path = session_dir / (safe_component(tool_call_id, "call") + SUFFIX)
    # A symlinked `.agent`, `spill` or session directory must not carry the file elsewhere:
    # check before creating anything, and again once the directories exist.
    real = _checked(workspace, root, path, tool_call_id)
    if create_dir:
        session_dir.mkdir(parents=True, exist_ok=True)
        real = _checked(workspace, root, path, tool_call_id)
    return real


def _checked(workspace: Workspace, root: Path, path: Path, tool_call_id: str) -> Path:
    real_root = workspace.resolve(root)
    real = workspace.resolve(path)
    if real.parent.parent != real_root or not real.name.endswith(SUFFIX):
        raise WorkspaceError(f"spill path for {tool_call_id!r} escapes {SPILL_DIR.as_posix()}/")
    return real


def read_range_hint(rel_path: str, start_line: int, end_line: int) -> str:
    return f'read_file(path="{rel_path}", start_line={start_line}, end_line={end_line})'


def spill_notice(rel_path: str, *, total_lines: int, total_bytes: int, dropped_lines: int,
                 cut_lines: int, first_dropped_line: int, read_max_lines: int) -> str:
    """The line appended to a truncated tool result; it names the file and how to page it."""
    what = []
    if dropped_lines:
        what.append(f"{dropped_lines} lines were truncated above (lines {first_dropped_line}-"
                    f"{first_dropped_line + dropped_lines - 1})")
    if cut_lines:
        what.append(f"{cut_lines} long lines were cut")
    start = first_dropped_line if dropped_lines else 1
    end = start + read_max_lines - 1
    if dropped_lines:
        end = min(end, first_dropped_line + dropped_lines - 1)
    return (f"[Full output ({total_lines} lines, {total_bytes} bytes) saved to {rel_path}; "
            f"{' and '.join(what) or 'nothing was truncated'}. Read any range of it with "
            f"{read_range_hint(rel_path, start, end)} — up to {read_max_lines} lines per call.]")
