"""Building the request a `Plan` decided: its messages, every edit behind them, and their counts.

Functions of the pipeline's parts (the index, the deep compactions, the meter), never changing
them: the plan says which stage level each part of the history gets; here that becomes the
messages sent and the `Edit`s that explain them.
"""

from __future__ import annotations

from breakwater.core.fold.compactions import DeepCompaction
from breakwater.core.fold.index import Index
from breakwater.core.fold.meter import Meter, estimated_figure
from breakwater.core.fold.plan import Plan
from breakwater.core.fold.stage_forms import near_level
from breakwater.core.log.edits import Covered, Edit, Edits, View
from breakwater.core.log.message import Message
from breakwater.core.log.tokens import heuristic_message
from breakwater.core.policy import Policy
from breakwater.core.stages.shape import squeeze


def counts(index: Index, deep: DeepCompaction, plan: Plan) -> dict[str, int]:
    """The edits `materialize` would make, by kind, without building them. Asked for every request: a
    kind is entered only with a count above zero (the sanitizer's counts are), so nothing is filtered
    after, and the ledger is asked only about the parts a stage applies to."""
    counts = index.san.counts.copy()
    cut, kept_fu = plan.cut, plan.keep_first_user
    if deep.active:
        fu = kept_fu if kept_fu is not None and kept_fu < cut else None
        covered = cut - index.base_start() - (fu is not None)
        if index.pins:
            covered -= len(deep.pinned_kept(cut, fu))
        if covered > 0:
            counts["summarized"] = counts.get("summarized", 0) + covered
    if plan.joined:
        counts["merged"] = counts.get("merged", 0) + len(plan.joined)
    dropped = plan.drop_to - cut - (1 if kept_fu is not None and cut <= kept_fu < plan.drop_to else 0)
    if dropped > 0:
        counts["dropped"] = counts.get("dropped", 0) + dropped
    ledger = index.ledger
    level, lower = plan.level, plan.lower
    if level or lower:
        start, boundary, near_start = plan.start, plan.boundary, plan.near_start
        if level and boundary > start:
            ledger.count_kinds(level, start, boundary, counts)
        if lower and near_start > boundary:
            ledger.count_kinds(lower, boundary, near_start, counts)
        near = level if boundary >= near_start else lower
        if near and plan.n > near_start:
            ledger.count_kinds(near_level(near), near_start, plan.n, counts)
    if ledger.truncated:
        src = ledger.truncated_count(plan.start, plan.n)
        if src:
            counts["truncated-at-source"] = src
    return counts


def level_of(plan: Plan, i: int) -> tuple[int, bool]:
    """The stage level message i of the sent region gets, and whether it counts as working memory."""
    if i >= plan.near_start:
        return (plan.level if plan.boundary >= plan.near_start else plan.lower), True
    return (plan.level if i < plan.boundary else plan.lower), False


def materialize(index: Index, deep: DeepCompaction, meter: Meter, plan: Plan) -> View:
    """The messages to send and every edit behind them."""
    p = index.policy
    out = index.san.out
    tok0 = index.ledger.tok0
    msgs: list[Message] = list(plan.head)
    parts: list = [tuple(index.san.edits)]
    base_start = index.base_start()
    kept_fu = plan.keep_first_user
    if deep.active:
        fu_before = kept_fu if kept_fu is not None and kept_fu < plan.cut else None
        kept = {i - base_start for i in (fu_before, *deep.pinned_kept(plan.cut, fu_before))
                if i is not None and base_start <= i < plan.cut}
        parts.append(Covered("deep_compact", "summarized", f"hard limit {p.hard_limit}", base_start,
                             out[base_start:plan.cut], tok0[base_start:plan.cut], frozenset(kept)))
    parts.append(tuple(Edit(mid, "shape_history", "merged", (), 0, 0,
                            "user messages in a row joined so that turns alternate") for mid in plan.joined))
    kept = {kept_fu - plan.cut} if kept_fu is not None and plan.cut <= kept_fu < plan.drop_to else set()
    parts.append(Covered("shape_history", "dropped", f"keep last turns to fit {p.hard_limit}", plan.cut,
                         out[plan.cut:plan.drop_to], tok0[plan.cut:plan.drop_to], frozenset(kept)))
    edits: list[Edit] = []
    named: dict[tuple[str, int, bool], tuple[str, str]] = {}   # (kind, level, near) -> stage, threshold
    for i in range(plan.start, plan.n):
        m = out[i].message
        level, near = level_of(plan, i)
        res = index.transform(i, level, near) if level else None
        src = (m.meta or {}).get("source") if m.role == "tool" and m.meta else None
        if isinstance(src, dict) and src.get("dropped_lines"):
            edits.append(Edit(m.id, "source", "truncated-at-source", (),
                              int(src.get("total_bytes", 0)) // 4, heuristic_message(m),
                              f"tool output over {src.get('max_lines', p.tool_max_lines)} lines"))
        if res:
            new, spans, kind = res
            why = named.get((kind, level, near))
            if why is None:
                why = named[kind, level, near] = (
                    {"snipped": "snip" if not near or level < 2 else "working_memory",
                     "masked": "mask", "folded": "mask" if level < 3 else "microcompact",
                     "microcompacted": "microcompact"}[kind], threshold(p, kind, near))
            edits.append(Edit(m.id, why[0], kind, spans, heuristic_message(m), heuristic_message(new), why[1]))
            msgs.append(new)
        else:
            msgs.append(m)
    parts.append(tuple(edits))
    if plan.squeeze:
        msgs, more = squeeze(msgs, p, lambda ms: meter.count(ms)[0])
        parts.append(tuple(more))
    sent, counted = meter.count(msgs)
    fits = sent <= p.window   # the verdict, in the meter's unit; the figure is the plan's (Pipeline._finish)
    if plan.whole:
        sent = plan.sent_tokens
    elif not meter.calibration.samples:
        sent = meter.calibration.figure(sent, sum(heuristic_message(m) for m in msgs))
    return View(turn=plan.turn, messages=tuple(msgs), edits=Edits(parts), raw_tokens=plan.raw_tokens,
                base_tokens=plan.base_tokens, sent_tokens=sent, zone=plan.zone, counted=counted,
                estimated=estimated_figure(counted, plan.whole, meter.calibration),
                window=p.window, soft_limit=p.soft_limit, hard_limit=p.hard_limit,
                api_tokens=plan.api_tokens, fits=fits, notes=tuple(plan.notes),
                stable_prefix_tokens=plan.stable_prefix_tokens, api_turn=plan.api_turn)


def threshold(p: Policy, kind: str, near: bool) -> str:
    """The rule that fired for an edit of `kind`, as the inspector shows it."""
    if kind == "snipped" and near and p.mask:
        return f"working memory: tool output > {p.working_memory_max_chars} chars"
    return {"snipped": f"soft limit {p.soft_limit}; tool output > {p.snip_threshold_chars} chars",
            "masked": f"soft limit {p.soft_limit}; outside last {p.working_memory_messages} messages, "
                      f"tool output > {p.mask_min_chars} chars",
            "folded": f"soft limit {p.soft_limit}; outside last {p.working_memory_messages} messages, "
                      f"assistant text > {p.fold_min_chars} chars",
            "microcompacted": f"soft limit {p.soft_limit}; outside last {p.working_memory_messages} messages",
            }[kind]
