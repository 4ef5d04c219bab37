"""The reference policy docs/policies/complexity-trap.toml reproduces "The Complexity Trap" (arXiv
2508.21433): SWE-agent's LastNObservations, the last M = 10 observations kept and every older one
replaced by a placeholder, on every request. Breakwater's billed tokens under it are held to a
direct count: the rule applied to the trajectory's own message array, counted with tiktoken."""

import json
import re
from pathlib import Path

import pytest

from breakwater.core.stages.mask import mask_placeholder, masked_text
from breakwater.core.policy import Policy, PolicyError, load_toml
from breakwater.core.simulate import simulate
from breakwater.core.log.tokens import MESSAGE_OVERHEAD, TOOL_CALL_OVERHEAD, get_encoding
from breakwater.formats import load_session
from support.transcripts import REAL

POLICY = Path(__file__).resolve().parents[1] / "docs" / "policies" / "complexity-trap.toml"
M = 10
MINI = REAL / "mini-swe-agent" / "pr854_deepseek-v4-flash__astropy__astropy-12907.traj.json"
SWE = REAL / "swe-agent" / "marshmallow-1867__function_calling_replace_from_source.traj"


def _chat_messages(path: Path) -> list[dict]:
    """The model-visible messages of a trajectory, as the agent kept them."""
    data = json.loads(path.read_text(encoding="utf-8"))
    messages = data["messages"] if "messages" in data else data["history"]
    return [m for m in messages if m["role"] in ("system", "user", "assistant", "tool")]


def _is_observation(messages: list[dict], i: int) -> bool:
    return messages[i]["role"] == "tool" or (messages[i]["role"] == "user" and i > 0
                                              and messages[i - 1]["role"] == "assistant")


def swe_agent_placeholder(text: str) -> str:
    """As sweagent/agent/history_processors.py LastNObservations writes it."""
    return f"Old environment output: ({len(text.splitlines())} lines omitted)"


def breakwater_placeholders(path: Path):
    """Breakwater's own line for each observation of the session as loaded (how it went, read per
    format, and the signatures of its errors: issue 24 item 2)."""
    lines = {m.content: masked_text(m) for m in load_session(path).messages if m.is_observation or m.role == "tool"}
    return lambda text: lines.get(text) or mask_placeholder(text)


def direct_saving(path: Path, placeholder=swe_agent_placeholder) -> tuple[int, int]:
    """(tokens billed as sent, tokens billed under LastNObservations) over every request: request k is
    every message before the k-th reply; in it, each observation but the last M is `placeholder(text)`
    ("Old environment output: (N lines omitted)", as SWE-agent's processor writes it)."""
    enc = get_encoding("o200k_base")
    messages = _chat_messages(path)

    def count(m: dict, masked: bool) -> int:
        text = m.get("content") or ""
        if not isinstance(text, str):
            text = "\n".join(p.get("text", "") for p in text)
        if masked:
            text = placeholder(text)
        n = len(enc.encode_ordinary(text)) + MESSAGE_OVERHEAD
        for call in m.get("tool_calls") or ():
            fn = call["function"]
            n += len(enc.encode_ordinary(fn["name"])) + len(enc.encode_ordinary(fn["arguments"])) + TOOL_CALL_OVERHEAD
        return n

    whole = [count(m, False) for m in messages]
    masked = [count(m, True) for m in messages]
    raw = kept = 0
    for k, m in enumerate(messages):
        if m["role"] != "assistant" or k == 0:
            continue
        observations = [i for i in range(k) if _is_observation(messages, i)]
        old = set(observations[:-M])
        raw += sum(whole[:k])
        kept += sum(masked[i] if i in old else whole[i] for i in range(k))
    return raw, kept


def breakwater_saving(path: Path) -> tuple[int, int, int, int]:
    """(the requests' history as the tokenizer (o200k) counted it, the same in each figure's own unit,
    tokens billed under the policy, observations masked at the last request), by Breakwater's own
    simulation. With no usage recorded a request's figure is the heuristic's line, whichever count decided
    its verdict (issue 36: one figure a request): the history it is set against is then the log's on that
    line (`raw_tokens`), not the tokenizer's count (`base_tokens`)."""
    sim = simulate(load_session(path), load_toml(POLICY), counter="exact", model="gpt-4o")
    assert {t.counted for t in sim.turns} == {"exact"}
    return (sum(t.base_tokens for t in sim.turns), sum(t.raw_tokens if t.estimated else t.base_tokens for t in sim.turns),
            sum(t.sent_tokens for t in sim.turns), sim.turns[-1].edits.get("masked", 0))


@pytest.mark.parametrize("path", [MINI, SWE], ids=lambda p: p.parent.name)
def test_breakwater_under_the_reference_policy_agrees_with_the_direct_count(path):
    raw, kept = direct_saving(path)
    _, logged, sent, masked = breakwater_saving(path)
    direct, ours = 1 - kept / raw, 1 - sent / logged
    msgs = _chat_messages(path)
    last_reply = max(i for i, m in enumerate(msgs) if m["role"] == "assistant")
    observations = sum(1 for i in range(last_reply) if _is_observation(msgs, i))
    assert masked == max(0, observations - M)   # at the last request
    assert abs(direct - ours) < 0.02, (direct, ours)   # the bound: 2 points of saving
    # Breakwater's own line (with the exit status) masks the same observations: the policy's template
    # is the whole difference
    own = simulate(load_session(path), load_toml(POLICY).with_changes(mask_placeholder=""), counter="exact",
                   model="gpt-4o")
    own_raw, own_kept = direct_saving(path, breakwater_placeholders(path))
    assert abs((1 - own_kept / own_raw) - (1 - sum(t.sent_tokens for t in own.turns) / logged)) < 0.002
    if path is MINI:   # a long run: most of its observations are old by the end
        assert ours > 0.25


@pytest.mark.parametrize("variant", ["swe-agent", "mini-swe-agent"])
def test_text_mode_runs_are_masked_by_the_same_rule(variant, tmp_path):
    """The same runs with text actions (observations in user messages) save what the direct count says."""
    from test_transcripts import text_mode_mini, text_mode_swe_agent

    path = text_mode_swe_agent(tmp_path) if variant == "swe-agent" else text_mode_mini(tmp_path)
    raw, kept = direct_saving(path)
    base, logged, sent, masked = breakwater_saving(path)
    assert base == raw and abs((1 - kept / raw) - (1 - sent / logged)) < 0.02
    assert masked > 0


def test_the_placeholder_template_is_one_short_line_of_known_fields():
    p = load_toml(POLICY)
    text = "a\nb\nc\n"
    assert mask_placeholder(text, template=p.mask_placeholder) == "Old environment output: (3 lines omitted)"
    assert mask_placeholder("é", template="{bytes} bytes") == "2 bytes"
    for bad, says in [("{size}", "{size}"), ("{lines:>999999}", "{lines:>999999}"), ("{}", "{}"),
                      ("{lines", "not a valid template"), ("a\x1b[2Jb", "printable"), ("x" * 201, "at most 200")]:
        with pytest.raises(PolicyError, match=re.escape(says)):
            p.with_changes(mask_placeholder=bad)
    # the presets' fingerprints (logged with each compaction) are those from before the setting
    assert p.with_changes(mask_placeholder="").fingerprint() != p.fingerprint()
    assert Policy().with_changes(summary_instruction_share=0.0, deep_keep_ratio=0.25, cache_horizon_turns=0,
                                 mask_all=False).fingerprint() == "c7a54eac954b"
    # issue 41: breakwater's summary gives the user's instructions a share of the window, and keeps 22% verbatim
    # (cc451b46af59); then its soft-zone steps wait until they pay for the cache they break, and masking
    # takes every far observation at once
    assert Policy().with_changes(cache_horizon_turns=0, mask_all=False).fingerprint() == "cc451b46af59"
    assert Policy().fingerprint() == "02fa03ea6cb4"
