"""How each figure of a simulation is counted: one rule per figure, stated once.

Printed by `simulate --help` and in `simulate --json` (`counting`); kept apart from the
simulation itself so the help text costs no import of the pipeline.
"""

FIGURE_RULES = {
    "sent_tokens": "the request in the provider's tokens (core/log/accounting.py): visible tokens (the heuristic, ≈, "
                   "or tiktoken's count wherever the zone or `fits` could change; `counted` says which) fitted "
                   "to the transcript's recorded usage as ratio × visible + unseen overhead, whichever counted it",
    "raw_tokens": "without compaction: the whole log (recorded summaries included) on the same line, one figure a "
                  "turn whatever the policy or the counter; never less than sent_tokens",
    "base_tokens": "the history after summaries and sanitizing, before the soft-zone stages: what decides the zone",
    "stable_prefix_tokens": "≈ the start of the request identical to the previous request, the unseen overhead "
                            "included: what a provider's prompt cache can reuse; never more than sent_tokens",
    "billed_raw": "sum of raw_tokens",
    "billed_sent": "sum of sent_tokens; billed_sent_estimated says whether any of them is an estimate (≈)",
    "saved": "billed_raw − billed_sent, exactly",
    "calibration": "the fit in force after the last request: overhead (unseen tokens per request) and ratio "
                   "(provider tokens per heuristic token, pulled toward the model family's `prior_ratio` while "
                   "samples are few, the overhead fitted again after each of the log's compactions: `restarts`), "
                   "each with its standard error, from `samples` recorded requests; none recorded: ratio 1, overhead 0",
    "cache": "the request against the provider's prompt cache (core/log/prompt_cache.py): tokens read, written, "
             "and `rewritten` (of the last request's, written again because this one changed them) with what "
             "that cost beyond reading them; cache_raw: the same without compaction",
    "cost_sent": "USD of the request's input at the model's prices through the cache (reads at the read price, "
                 "Anthropic's writes at the write price, the rest at the input price); cost_raw: without compaction",
}


def money(x: float | None) -> str:
    """USD as every surface writes it: four decimals under a dollar (a short session's cents), else two."""
    return "—" if x is None else f"${x:,.4f}" if abs(x) < 1 else f"${x:,.2f}"


def tokens_figure(n: int, estimated: bool) -> str:
    """A token figure as every surface writes it: ≈ in front when it is an estimate."""
    return f"{'≈' if estimated else ''}{n:,}"
