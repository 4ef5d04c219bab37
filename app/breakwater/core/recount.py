"""Another agent's own history counted as Breakwater counts a request (issue 23): the counted side
of each calibration pair, by a pipeline that compacts nothing of its own. Kept apart from
core/log/accounting.py, which fits the pairs, because it runs the pipeline (core/fold)."""

from __future__ import annotations


def own_history_policy():
    """The agent's own history: nothing of ours compacts it (its recorded compactions still apply)."""
    from breakwater.core.policy import preset

    return preset("breakwater").with_changes(window=1 << 40, snip=False, mask=False, microcompact=False,
                                             deep_compact=False)


def recount_usage(entries: list) -> list:
    """`entries` with each usage event's `estimate` (the counted side of a calibration pair) set to
    Breakwater's own heuristic count of the request the agent sent: its history, sanitized as every
    request is, its recorded compactions applied. An importer's running estimate of the agent's
    context drifts from what the pipeline counts (pi: 33,002 where the request it sent counts 28,472,
    which put the fit 8% low); one counter on both sides of the pair keeps the fit in one unit."""
    from breakwater.core.log.message import Message
    from breakwater.core.fold.pipeline import Pipeline
    from breakwater.core.log.session_log import Event
    from breakwater.core.log.tokens import TokenCounter

    pipe = Pipeline(own_history_policy(), TokenCounter(None), mode="heuristic")
    out = list(entries)
    counted: dict[int, int] = {}   # turn -> heuristic tokens of its request
    for i, entry in enumerate(entries):
        if isinstance(entry, Message):
            if entry.role == "assistant":
                plan = pipe.plan()
                counted[plan.turn] = plan.sent_heuristic
        elif entry.type == "usage":
            h = counted.get(entry.get("turn"))
            if h:
                out[i] = entry = Event("usage", entry.id, {**entry.data, "estimate": h})
        pipe.feed(entry)
    return out
