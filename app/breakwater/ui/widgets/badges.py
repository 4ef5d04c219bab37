"""How each edit kind is named and coloured: one table shared by the list, the inspector, the
legend and the help screen. Colours are theme variables (`$span-<kind>` in themes/*.toml)."""

from __future__ import annotations

from breakwater.core.log.edits import KINDS

# short badge label, and what the kind means (help screen and legend)
KIND_INFO: dict[str, tuple[str, str]] = {
    "truncated-at-source": ("src", "tool output cut at the source (rolling buffer); the full stream is in the spill file"),
    "snipped": ("snip", "long tool output kept as head + marker + tail"),
    "masked": ("mask", "old tool output replaced by a one-line notice"),
    "folded": ("fold", "old assistant text folded"),
    "microcompacted": ("micro", "a far tool exchange reduced to a skeleton line"),
    "summarized": ("sum", "replaced by a deep-compaction summary"),
    "dropped": ("drop", "left out to fit the window (shape history) or invalid"),
    "merged": ("merge", "joined with the message of the same role next to it, so that turns alternate"),
    "stripped": ("strip", "orphaned tool call or result removed"),
    "truncated-argument": ("arg", "an over-long tool-call argument cut to head + tail"),
}
ALL_KINDS: tuple[str, ...] = tuple(KINDS) + tuple(k for k in KIND_INFO if k not in KINDS)
ROLES = ("system", "user", "assistant", "tool")


def label(kind: str) -> str:
    return KIND_INFO.get(kind, (kind[:5], ""))[0]


def describe(kind: str) -> str:
    return KIND_INFO.get(kind, ("", kind))[1]


def kind_variable(kind: str) -> str:
    """The theme variable holding a kind's colour."""
    return f"span-{kind}"
