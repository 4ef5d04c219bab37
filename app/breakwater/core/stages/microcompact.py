"""Microcompact (seed 000): a far tool interaction shrinks to one skeleton line.

`read_file(path=utils.go) → 847 lines`: the call stays exactly as it was made;
its result becomes the line that says what it was, how big, and how it went (exit status, first
error line).
"""

from __future__ import annotations

import json

from breakwater.core.stages.mask import fold
from breakwater.core.log.message import Message, ToolCall, utf8
from breakwater.core.log.error_signature import cleared_outcome
from breakwater.core.log.outcome import parsed_arguments
from breakwater.core.policy import Policy
from breakwater.core.log.text_cache import text_cached

STAGE = "microcompact"
ARG_CHARS = 60


def _short(value) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= ARG_CHARS else text[: ARG_CHARS - 1] + "…"


def skeleton(result: Message, call: ToolCall | None, outcome: list[str] | None = None) -> str:
    """The line a far result becomes; `outcome` is its `cleared_outcome`, when the caller has them already."""
    name = call.name if call else (result.name or "tool")
    args = ""
    if call:
        parsed = parsed_arguments(call.arguments)
        if isinstance(parsed, dict):
            args = ", ".join(f"{k}={_short(v)}" for k, v in parsed.items())
        else:
            args = _short(parsed)
    source = (result.meta or {}).get("source") if result.meta else None
    text = result.content
    if isinstance(source, dict) and source.get("total_lines"):
        lines = int(source["total_lines"])   # cut at the source: the whole output, counted when it ran
    else:
        lines = _line_count(text) if len(text) > CACHED_LINES_CHARS else (text.count("\n") + 1 if text else 0)
    facts = [f"{lines} line{'s' if lines != 1 else ''}"]
    facts.extend(cleared_outcome(result) if outcome is None else outcome)
    if isinstance(source, dict) and source.get("spill"):
        facts.append(f"full output in {source['spill']}")
    return f"[{name}({args}) → {', '.join(facts)}; output cleared to save context]"


CACHED_LINES_CHARS = 2_000   # below this, counting the lines again is cheaper than looking them up


@text_cached(1 << 14)   # every simulation of a session clears the same results (a policy changed, a replay)
def _line_count(text: str) -> int:
    # in the text's UTF-8 encoding (kept from its sizes or the error scan): deleting the newlines
    # finds each one with memchr, two to three times faster than str.count or bytes.count comparing
    # every character, while lines are longer than some 30 bytes (a call per newline: `seq`'s
    # output is counted character by character)
    data = utf8(text)
    if data.count(b"\n", 0, _SAMPLE) > _SAMPLE // _SHORT_LINE:
        return data.count(b"\n") + 1
    return len(data) - len(data.replace(b"\n", b"")) + 1


_SAMPLE, _SHORT_LINE = 2_048, 32


def microcompact(msg: Message, call: ToolCall | None, policy: Policy):
    if msg.role == "tool":
        line = skeleton(msg, call)
        if len(line) < len(msg.content):
            return msg.with_content(line), ((0, len(msg.content)),), "microcompacted"
        return None
    return fold(msg, policy)
