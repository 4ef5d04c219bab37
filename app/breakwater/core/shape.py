"""Shape history (seed 003 §1): the request's frame and its last resort.

`[System][First user][Summary][Last N turns]`: the parts of the frame are
joined where two user messages would follow each other (seed 003's funnel merges
consecutive roles after shaping, and strict chat templates require turns to
alternate). `squeeze` head/tails the largest messages when even the last few
turns do not fit.
"""

from __future__ import annotations

from breakwater.core import snip as snip_stage
from breakwater.core.edits import Edit
from breakwater.core.message import Message
from breakwater.core.policy import Policy
from breakwater.core.tokens import heuristic_message


def join_users(msgs: list[Message]) -> tuple[list[Message], list[str]]:
    """Merge each run of consecutive user messages into its first; returns the list and the absorbed ids."""
    out: list[Message] = []
    absorbed: list[str] = []
    for m in msgs:
        if out and m.role == "user" and out[-1].role == "user":
            a = out[-1]
            meta = dict(a.meta or {})
            meta.update(m.meta or {})
            meta["joined"] = tuple((a.meta or {}).get("joined", ())) + (m.id,)
            out[-1] = Message(a.id, "user", f"{a.content}\n\n{m.content}" if a.content else m.content,
                              turn=a.turn, meta=meta)
            absorbed.append(m.id)
        else:
            out.append(m)
    return out, absorbed


def squeeze(msgs: list[Message], policy: Policy, count) -> tuple[list[Message], list[Edit]]:
    """Last resort: head/tail the largest messages until the request fits under the hard limit.

    Never touches the system prompt or tool calls; user messages keep their first
    `user_keep_chars` characters unless nothing else is left to cut.
    """
    msgs = list(msgs)
    edits: list[Edit] = []
    target = policy.hard_limit
    total = count(msgs)
    for allow_user in (False, True):
        while total > target:
            best, best_room = None, 0
            for i, m in enumerate(msgs):
                if m.role == "system" or (m.role == "user" and not allow_user):
                    continue
                floor = policy.user_keep_chars if m.role == "user" else 200
                room = len(m.content) - floor
                if room > best_room and room > 64:
                    best, best_room = i, room
            if best is None:
                break
            m = msgs[best]
            floor = policy.user_keep_chars if m.role == "user" else 200
            keep = max(floor, len(m.content) - (total - target) * 4 - 256)
            head = max(keep * 3 // 5, min(floor, keep))
            tail = max(0, keep - head)
            new_text, span = snip_stage.head_tail(m.content, head, tail,
                                                  lambda r: f"\n...[{r} chars cut so the request fits the window]...\n")
            new = m.with_content(new_text)
            before, after = heuristic_message(m), heuristic_message(new)
            if after >= before:
                break
            edits.append(Edit(m.id, "shape_history", "snipped", (span,), before, after,
                              f"request over hard limit {target} after keeping {policy.shape_keep_last_min} turns"))
            msgs[best] = new
            total = count(msgs)
    return msgs, edits
