"""Spill files made the way the bash tool makes them (`Spill.create_in`), for the spill pane's tests."""

from __future__ import annotations

from pathlib import Path

from breakwater.tools.spill import Spill
from breakwater.tools.workspace import Workspace


def write_spill(workspace: Path, session_id: str, tool_call_id: str, data: bytes) -> Path:
    spill = Spill.create_in(Workspace(workspace), session_id, tool_call_id)
    try:
        with spill.open_writer(0) as out:
            out.write(data)
    finally:
        spill.close()
    return spill.path
