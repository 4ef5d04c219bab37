"""How each edit kind is named and coloured: one table shared by the list, the inspector, the
legend and the help screen. Colours are theme variables (`$span-<kind>` in themes/*.toml)."""

from __future__ import annotations

from breakwater.core.log.edits import ALL_KINDS, KIND_INFO  # noqa: F401 - the table, named here for the UI
from breakwater.core.log.edits import kind_label as label, kind_meaning as describe  # noqa: F401

ROLES = ("system", "user", "assistant", "tool")


def kind_variable(kind: str) -> str:
    """The theme variable holding a kind's colour."""
    return f"span-{kind}"
