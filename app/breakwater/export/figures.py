"""The figures both pages print, written once: the totals table's rows and each line's words.
Every value comes from `simulate --json`'s totals (the Side's `totals`, the same object)."""

from __future__ import annotations

from dataclasses import dataclass

from breakwater.core.figures import money, tokens_figure
from breakwater.export.report import Side


@dataclass(frozen=True, slots=True)
class Row:
    key: str          # the simulate --json totals key the value comes from
    label: str
    value: object     # the number itself (data-value on the page), None when unknown
    text: str         # as printed, with its unit and ≈ when an estimate


def percent(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "—"


def totals_rows(side: Side) -> list[Row]:
    t = side.totals
    est = bool(t.get("billed_sent_estimated"))
    rows = [Row("turns", "requests (turns)", t["turns"], f"{t['turns']:,}"),
            Row("billed_raw", "input tokens billed without compaction", t["billed_raw"],
                f"≈{t['billed_raw']:,} tokens"),
            Row("billed_sent", "input tokens billed with compaction", t["billed_sent"],
                f"{tokens_figure(t['billed_sent'], est)} tokens"),
            Row("saved", "saved", t["saved"], f"≈{t['saved']:,} tokens ({percent(t['saved'], t['billed_raw'])})")]
    if "cost_raw" in t:
        rows += [Row("cost_raw", "cost without compaction (USD, cache-aware)", t["cost_raw"], money(t["cost_raw"])),
                 Row("cost_sent", "cost with compaction (USD, cache-aware)", t["cost_sent"], money(t["cost_sent"])),
                 Row("cost_saved", "cost saved (USD)", t["cost_saved"], money(t["cost_saved"]))]
    else:
        rows.append(Row("cost_raw", "cost (USD)", None, "no prices known for this model"))
    rows += [Row("compactions", "deep compactions", t["compactions"],
                 f"{t['compactions']:,} ({t.get('decided_compactions', 0)} by this policy, "
                 f"{t.get('recorded_compactions', 0)} recorded in the transcript)"),
             Row("over_window", "requests over the window", t["over_window"], f"{t['over_window']:,}")]
    return rows


def policy_line(side: Side) -> str:
    h = side.header
    model = h.get("model") or "no model named"
    enc = h.get("encoding")
    counter = f"{h['counter']} counter" + (f" ({enc})" if enc else " (≈ heuristic estimate)")
    return (f"preset {h['preset']} · window {h['window']:,} tokens ({h['window_source']}) · soft limit "
            f"{h['soft_limit']:,} · hard limit {h['hard_limit']:,} · {counter} · model {model}")
