"""How each figure of a simulation is counted: one rule per figure, stated once.

Printed by `simulate --help` and in `simulate --json` (`counting`); kept apart from the
simulation itself so the help text costs no import of the pipeline.
"""

FIGURE_RULES = {
    "raw_tokens": "the whole history before the request by the seed's heuristic, never calibrated (≈): "
                  "it never shrinks",
    "sent_tokens": "the heuristic times the calibration factor (≈), confirmed by tiktoken near the limits; "
                   "`counted` says which",
    "stable_prefix_tokens": "≈ the start of the request identical to the previous request, what a "
                            "provider's prompt cache can reuse, counted as sent_tokens is: heuristic times "
                            "calibration, or its share of tiktoken's count; never more than sent_tokens",
    "billed_raw": "sum of raw_tokens (≈)",
    "billed_sent": "sum of sent_tokens",
    "saved": "billed_raw minus the sent requests counted the same way as raw (≈, like for like)",
}


def plural(n: int, word: str) -> str:
    """`n` words, as the command line and the workbench both state a count."""
    return f"{n:,} {word}{'' if n == 1 else 's'}"
