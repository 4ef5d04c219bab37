"""What one tool call returns: the text the model sees and facts about how it was made."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class ToolResult:
    """`content` goes to the model as the tool message; `meta` (JSON-safe) goes into that
    message's `meta["source"]`, so the UI can show what tier 1 did at the source."""

    content: str
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def is_error(self) -> bool:
        return bool(self.meta.get("error"))


def error_result(tool: str, message: str, **meta: Any) -> ToolResult:
    """A failure reported to the model as text; tools never raise at the model."""
    return ToolResult(f"Error: {message}", {"tool": tool, "error": message, **meta})
