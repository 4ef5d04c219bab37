"""What the chat-completions API accepts, as a check the pipeline's output must always pass.

Stricter than OpenAI itself: user and assistant turns must alternate, as strict chat templates
(and seed 003's funnel) require.
"""

from __future__ import annotations

from typing import Any, Sequence


def api_problems(messages: Sequence[dict[str, Any]]) -> list[str]:
    """Problems that would make the API reject this message list (empty: valid)."""
    problems: list[str] = []
    if not messages:
        return ["no messages"]
    pending: dict[str, str] = {}
    previous = None
    for i, m in enumerate(messages):
        role = m.get("role")
        if role not in ("system", "user", "assistant", "tool"):
            problems.append(f"#{i}: invalid role {role!r}")
            continue
        # strict chat templates want user and assistant turns to alternate
        if role == previous and role in ("user", "assistant"):
            problems.append(f"#{i}: two {role} messages in a row")
        previous = role
        if role == "system" and i != 0:
            problems.append(f"#{i}: system message not first")
        if role == "tool":
            cid = m.get("tool_call_id")
            if cid not in pending:
                problems.append(f"#{i}: tool result {cid!r} without a pending call")
            else:
                del pending[cid]
            continue
        if pending:
            problems.append(f"#{i}: {role} message before results of {sorted(pending)}")
            pending = {}
        if role == "assistant":
            calls = m.get("tool_calls") or []
            seen_ids = set()
            if not calls and not (m.get("content") or "").strip():
                problems.append(f"#{i}: empty assistant message")
            for c in calls:
                cid = c.get("id")
                if not cid or cid in seen_ids:
                    problems.append(f"#{i}: missing or duplicate tool call id {cid!r}")
                seen_ids.add(cid)
                name = c.get("function", {}).get("name", "")
                if not str(name).strip():
                    problems.append(f"#{i}: tool call {cid!r} without a name")
                pending[cid] = name
    if pending:
        problems.append(f"end: calls without results {sorted(pending)}")
    return problems
