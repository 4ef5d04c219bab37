"""How each figure of a simulation is counted: one rule per figure, stated once.

Printed by `simulate --help` and in `simulate --json` (`counting`); kept apart from the
simulation itself so the help text costs no import of the pipeline.
"""

FIGURE_RULES = {
    "sent_tokens": "the request in the provider's tokens (core/log/accounting.py): visible tokens (the heuristic, ≈, "
                   "or tiktoken's count wherever the zone or `fits` could change; `counted` says which) fitted "
                   "to the transcript's recorded usage as ratio × visible + unseen overhead",
    "raw_tokens": "without compaction: sent_tokens plus what the policy took out of the whole log (recorded "
                  "summaries included), counted by the same fit; never less than sent_tokens for a policy that "
                  "only removes text",
    "base_tokens": "the history after summaries and sanitizing, before the soft-zone stages: what decides the zone",
    "stable_prefix_tokens": "≈ the start of the request identical to the previous request, the unseen overhead "
                            "included: what a provider's prompt cache can reuse; never more than sent_tokens",
    "billed_raw": "sum of raw_tokens",
    "billed_sent": "sum of sent_tokens; billed_sent_estimated says whether any of them is an estimate (≈)",
    "saved": "billed_raw − billed_sent, exactly",
    "calibration": "the fit in force after the last request: overhead (unseen tokens per request) and ratio "
                   "(provider tokens per visible token), each with its standard error, from `samples` recorded "
                   "requests; none recorded: ratio 1, overhead 0",
}


def tokens_figure(n: int, estimated: bool) -> str:
    """A token figure as every surface writes it: ≈ in front when it is an estimate."""
    return f"{'≈' if estimated else ''}{n:,}"
