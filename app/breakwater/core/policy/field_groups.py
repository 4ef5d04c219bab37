"""What each Policy value is, for people editing one: its group in pipeline order, unit and step.

Derived from the dataclass fields and their names, so a setting added to `Policy` shows up
(in "other" until a group claims its prefix) without a hand-kept list to forget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from breakwater.core.policy import CHOICES, NOT_COMPACTION, Policy

# groups in the order the pipeline runs them; a field joins the first group whose
# exact names or name prefixes match it
GROUPS: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("limits", ("window", "buffer_tokens", "soft_ratio", "small_window_buffer_ratio", "precise_ratio",
                "soft_hysteresis_ratio", "cache_horizon_turns", "soft_trigger_tokens", "hard_trigger_tokens", "hard_window_share",
                "reserve_tokens"), ()),
    ("sanitize", ("sanitize",), ()),
    ("fast path", ("fast_path_min_messages",), ()),
    ("snip", ("snip",), ("snip_",)),
    ("mask", ("mask", "mask_min_chars", "fold_min_chars", "mask_keep_observations", "mask_placeholder", "mask_all",
              "clear_at_least_tokens", "mask_exclude_tools", "mask_clear_tool_inputs", "mask_batch_tokens"),
     ("working_memory_",)),
    ("microcompact", ("microcompact",), ("microcompact_",)),
    ("deep compact", ("keep_first_user", "compact_trigger_messages"), ("deep_", "summary_", "summarizer")),
    ("shape history", ("user_keep_chars", "argument_max_chars"), ("shape_",)),
    ("tool output (tier 1)", (), ("tool_", "read_file_", "bash_")),
    ("memory (tier 3)", (), ("scribe_", "memory_", "retrieval_", "project_")),
)
OTHER = "other"

UNIT_SUFFIXES = (("_tokens", "tokens"), ("_chars", "chars"), ("_head", "chars"), ("_tail", "chars"),
                 ("_messages", "messages"), ("_turns", "turns"), ("_lines", "lines"), ("_bytes", "bytes"),
                 ("_entries", "entries"), ("_days", "days"), ("_s", "s"), ("_k", "hits"), ("_mb", "MB"))
UNITS = {"window": "tokens", "soft_ratio": "× window", "small_window_buffer_ratio": "× window",
         "deep_keep_ratio": "× window", "hard_window_share": "× window", "summary_instruction_share": "× window",
         "precise_ratio": "× soft", "soft_hysteresis_ratio": "× soft",
         "shape_keep_last_max": "turns",
         "shape_keep_last_min": "turns", "memory_fragments_threshold": "files",
         "mask_keep_observations": "observations", "tool_max_procs": "processes"}


@dataclass(frozen=True, slots=True)
class FieldSpec:
    name: str
    group: str
    kind: type                # bool, int, float or str
    unit: str
    choices: tuple[str, ...] = ()

    @property
    def changes_view(self) -> bool:
        """Tier-1 and memory settings never change what a replay sends."""
        return not self.name.startswith(NOT_COMPACTION)

    def step(self, value: float) -> float:
        """One key press: two significant digits of the current value, so 128,000 and 6 both move sensibly."""
        if self.kind is float:
            return 0.01 if self.name.endswith("_ratio") else 0.5
        digits = len(str(abs(int(value)))) if value else 1
        return 10 ** max(0, digits - 2)

    def stepped(self, value, times: int):
        """`value` moved by `times` steps (negative: down); bools flip, choices cycle.

        Going down uses the step of the value just below, so up then down comes back to the start
        (10,000 -> 9,900 -> 10,000, not 10,000 -> 9,000 -> 9,100)."""
        if self.kind is bool:
            return value if times % 2 == 0 else not value
        if self.kind is str:
            if not self.choices:
                return value
            i = self.choices.index(value) if value in self.choices else 0
            return self.choices[(i + times) % len(self.choices)]
        for _ in range(abs(times)):
            if times > 0:
                value += self.step(value)
            else:
                value -= self.step(value - (1e-9 if self.kind is float else 1))
        return round(value, 6) if self.kind is float else int(value)

    def parse(self, text: str):
        """A typed value, or ValueError saying what was expected."""
        if self.kind is str:   # free text (a placeholder template) keeps its commas and underscores
            text = text.strip()
            if self.choices and text not in self.choices:
                raise ValueError(f"{self.name} must be one of {', '.join(self.choices)}, got {text!r}")
            return text
        text = text.strip().replace(",", "").replace("_", "")
        if self.kind is bool:
            low = text.lower()
            if low in ("on", "true", "yes", "1"):
                return True
            if low in ("off", "false", "no", "0"):
                return False
            raise ValueError(f"{self.name} is on or off, got {text!r}")
        try:
            value = float(text) if self.kind is float else int(text)
        except ValueError:
            raise ValueError(f"{self.name} must be {'a number' if self.kind is float else 'a whole number'}, "
                             f"got {text!r}") from None
        if self.kind is float and not math.isfinite(value):
            raise ValueError(f"{self.name} must be a finite number, got {text!r}")
        return value


def _group(name: str) -> str:
    for title, names, prefixes in GROUPS:
        if name in names or name.startswith(prefixes):
            return title
    return OTHER


def _unit(name: str, kind: type) -> str:
    if name in UNITS:
        return UNITS[name]
    if kind is bool:
        return "on/off"
    if kind is str:
        return "choice"
    for suffix, unit in UNIT_SUFFIXES:
        if name.endswith(suffix):
            return unit
    return ""


def field_specs() -> list[FieldSpec]:
    """Every editable value of Policy (all but `preset`), grouped in pipeline order."""
    base = Policy()
    specs = []
    for f in fields(Policy):
        if f.name == "preset":
            continue
        kind = type(getattr(base, f.name))
        specs.append(FieldSpec(f.name, _group(f.name), kind, _unit(f.name, kind), CHOICES.get(f.name, ())))
    order = [g[0] for g in GROUPS] + [OTHER]
    return sorted(specs, key=lambda s: order.index(s.group))  # stable: field order within a group


__all__ = ["FieldSpec", "GROUPS", "OTHER", "field_specs"]
