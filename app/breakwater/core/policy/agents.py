"""The strategies other agents and providers compact with, as presets a user replays, tunes and puts
beside Breakwater's (`--preset claude-code`, the A/B screen's default B on that agent's transcript).

Each value says where it comes from: the agent's code or docs, and the version read. Where the agent
has no such number (a trigger LangChain leaves to the user) the preset says so and keeps Breakwater's.
What a preset cannot reproduce is said beside it. Summaries are Breakwater's (the extractive one
offline): a preset reproduces when an agent compacts and what it keeps, not its summarizer's words.
"""

from __future__ import annotations

from typing import Any

# Each strategy is the settings it changes from Breakwater's defaults (core/policy/__init__.py makes
# them presets, AGENT_PRESETS): plain values here, so this module needs nothing of the policy's.

# no soft-zone stage: these agents only summarize (the soft limit then only says when a summary would
# settle a request, core/fold/compactions.py `settles`)
_SUMMARY_ONLY: dict[str, Any] = dict(snip=False, mask=False, microcompact=False, deep_compact=True,
                                     deep_compact_first=True)

# clear old tool results and nothing else: no snipping, no folding of the agent's own text, working
# memory sent whole, every far result cleared however short (as docs/policies/complexity-trap.toml)
_CLEAR_ONLY: dict[str, Any] = dict(snip=False, microcompact=False, deep_compact=False, mask=True, mask_min_chars=0,
                                   fold_min_chars=1_000_000_000, working_memory_max_chars=1_000_000_000)

AGENT_STRATEGIES: dict[str, dict[str, Any]] = {
    # Claude Code 2.0.55 (@anthropic-ai/claude-code, cli.js read for this preset): auto-compact when the
    # conversation reaches (context window - max output tokens) - 13,000. The window is 200,000
    # (1,000,000 for a "[1m]" model); max output is min(CLAUDE_CODE_MAX_OUTPUT_TOKENS, default 32,000,
    # the model's: 64,000 sonnet-4/haiku-4, 32,000 opus-4, 8,192 claude-3-5), so 45,000 for Claude 4
    # models (claude-3-5: 21,192, not reproduced). The summary then replaces the whole conversation
    # (boundary + summary + re-attached files); the cut here is the last safe boundary, so at most the
    # turn in progress stays. 2.0.76's cli.js gives the same (opus-4-5's 64,000 is capped at 32,000 there
    # too); later versions were not read (2.1 ships a native binary).
    "claude-code": dict(_SUMMARY_ONLY, window=200_000, reserve_tokens=45_000,
                           deep_cut="last-boundary", keep_first_user=False),
    # Codex CLI (openai/codex codex-rs): auto-compact once the last turn's tokens reach the model's
    # auto_compact_token_limit, by default 90% of the context window
    # (codex-rs/protocol/src/openai_models.rs `ModelInfo::auto_compact_token_limit`); gpt-5 and codex-*
    # models have 272,000 (codex-rs/core/src/openai_model_info.rs). Codex's rollouts (and so the window
    # Breakwater reads from them) give the effective window, effective_context_window_percent = 95% of
    # that: 258,400. The window here is that one, so the limit is 0.9 / 0.95 = 18/19 of it (244,800 for
    # gpt-5); Codex 0.171.0 recorded at model_context_window = 48,000 reports 45,600 and compacted past
    # 43,200 (tests/fixtures/agent-runs/codex-0.171.0-auto-compactions.jsonl). The compacted
    # history is the initial context, the user's messages, newest first up to
    # COMPACT_USER_MESSAGE_MAX_TOKENS = 20,000 (codex-rs/core/src/compact.rs, the oldest one kept cut to
    # fit: left out here), then the summary.
    "codex": dict(_SUMMARY_ONLY, window=258_400, hard_window_share=0.9 / 0.95,
                     deep_keep_user_tokens=20_000, deep_cut="last-boundary", keep_first_user=False),
    # pi (badlogic/pi-mono packages/coding-agent/src/core/compaction/compaction.ts,
    # DEFAULT_COMPACTION_SETTINGS, as in @mariozechner/pi-coding-agent 0.73.1): compact when the context
    # (the last reply's usage) exceeds window - reserveTokens (16,384); keep the most recent
    # keepRecentTokens (20,000, by chars / 4) from a turn boundary, the rest summarized.
    "pi": dict(_SUMMARY_ONLY, reserve_tokens=16_384, deep_cut="keep-tokens",
                  deep_keep_tokens=20_000, keep_first_user=False),
    # OpenHands (OpenHands/software-agent-sdk, openhands-tools preset default.py `get_default_condenser`):
    # LLMSummarizingCondenser(max_size=80, keep_first=4): once the view holds more than 80 events it
    # keeps the first 4 (system prompt and task) and the last 80 // 2 - 4 - 1 = 35, the rest summarized.
    # It counts events, not tokens (its max_tokens is off by default): the hard limit is Breakwater's,
    # as a request over the window is never sent. Events are counted here as messages.
    "openhands": dict(_SUMMARY_ONLY, compact_trigger_messages=80, deep_cut="keep-messages",
                         deep_keep_messages=35, keep_first_user=True),
    # Anthropic context editing, clear_tool_uses_20250919 with its defaults (platform.claude.com docs,
    # "Context editing"; beta context-management-2025-06-27): past `trigger` = 100,000 input tokens,
    # every tool result but the last `keep` = 3 tool uses is cleared; clear_at_least: none;
    # exclude_tools: none; clear_tool_inputs: false (`mask_clear_tool_inputs = true` clears the calls'
    # arguments too, to "{}": the replacement is not published either). The placeholder's wording is not
    # published: LangChain's "[cleared]" stands in. No summary: a request still over the window drops its
    # oldest turns (shape history), where the API would refuse it. clear_thinking_20251015 is not
    # reproduced: Breakwater never counts or sends earlier turns' thinking (docs/notes/round-5, issue 40); Claude
    # Code 2.1.197 sends it itself, with keep "all".
    "anthropic-clear-tool-uses": dict(_CLEAR_ONLY, window=200_000,
                                         soft_trigger_tokens=100_000, mask_all=True, mask_keep_observations=3,
                                         mask_placeholder="[cleared]"),
    # Anthropic server-side compaction, compact_20260112 (platform.claude.com docs, "Compaction at a
    # token threshold"; beta compact-2026-01-12): once input tokens reach `trigger` (default 150,000,
    # at least 50,000) the conversation is summarized and everything before the compaction block is
    # dropped from later requests.
    "anthropic-compaction": dict(_SUMMARY_ONLY, window=200_000,
                                    hard_trigger_tokens=150_000, deep_cut="last-boundary", keep_first_user=False),
    # LangChain ContextEditingMiddleware with ClearToolUsesEdit's defaults (langchain v1, Python
    # reference `langchain.agents.middleware.context_editing.ClearToolUsesEdit`): trigger=100,000
    # tokens, keep=3 tool results, clear_at_least=0, clear_tool_inputs=False, exclude_tools=(),
    # placeholder "[cleared]".
    "langchain-context-editing": dict(_CLEAR_ONLY, soft_trigger_tokens=100_000, mask_all=True, mask_keep_observations=3,
                                         mask_placeholder="[cleared]"),
    # LangChain SummarizationMiddleware (langchain v1 reference): keep defaults to the last 20 messages,
    # cut where no tool call loses its result. Its trigger has no default (unset, it never summarizes):
    # Breakwater's hard limit (window - 13,000) stands in; set hard_trigger_tokens to yours.
    "langchain-summarization": dict(_SUMMARY_ONLY, deep_cut="keep-messages",
                                       deep_keep_messages=20, keep_first_user=False),
    # SWE-agent's LastNObservations as "The Complexity Trap" (arXiv 2508.21433) runs it: always on, the
    # last 10 observations whole, each older one "Old environment output: (N lines omitted)"; the same
    # values as docs/policies/complexity-trap.toml, which says why each is what it is.
    "swe-agent-last-n": dict(_CLEAR_ONLY, soft_ratio=0.001, mask_keep_observations=10,
                         mask_placeholder="Old environment output: ({lines} lines omitted)"),
}

AGENT_DESCRIPTIONS: dict[str, str] = {
    "claude-code": "Claude Code 2.0.55's auto-compact: at window - 45,000 the whole conversation becomes a summary",
    "codex": "Codex's auto-compaction: at 90% of the model's window (the window Codex reports is 95% of it), "
             "a summary after the user's messages (20,000 tokens)",
    "pi": "pi's compaction: past window - 16,384, all but the last 20,000 tokens summarized",
    "openhands": "OpenHands' default condenser: past 80 messages, the first and the last 35 kept around a summary",
    "anthropic-clear-tool-uses": "Anthropic context editing's defaults: past 100,000 tokens all but the last 3 "
                                 "tool results cleared",
    "anthropic-compaction": "Anthropic's server-side compaction: at 150,000 tokens everything becomes a summary",
    "langchain-context-editing": "LangChain's ClearToolUsesEdit: past 100,000 tokens all but the last 3 tool "
                                 "results become [cleared]",
    "langchain-summarization": "LangChain's SummarizationMiddleware: the last 20 messages kept beside a summary "
                               "(trigger: Breakwater's hard limit; LangChain has none by default)",
    "swe-agent-last-n": "SWE-agent's LastNObservations (the Complexity Trap): always the last 10 observations whole",
}

# the agent whose transcript a format is, and so its strategy ("your agent today"). SWE-agent's and
# mini-swe-agent's default configurations keep the whole history (LastNObservations is an option
# their runs name), so their transcripts have no strategy of their own to replay.
FORMAT_AGENT: dict[str, str] = {"claude-code": "claude-code", "codex": "codex", "pi": "pi", "openhands": "openhands"}


# eval's rows of what each session's own agent does: as its transcript records it (its compactions,
# none of ours), and as its agent's strategy replayed would do (its recorded compactions taken out, the
# strategy makes its own); a session of an agent with no known strategy is its record on both rows
AS_RECORDED, AGENT_OWN = "as-recorded", "agent"
AGENT_ROWS = (AS_RECORDED, AGENT_OWN)


def agent_of(header: dict) -> str | None:
    """The name of the preset of the agent that wrote a transcript (its header's imported format), or None."""
    imported = header.get("imported") if isinstance(header, dict) else None
    fmt = imported.get("format") if isinstance(imported, dict) else None
    return FORMAT_AGENT.get(fmt) if isinstance(fmt, str) else None


__all__ = ["AGENT_OWN", "AGENT_STRATEGIES", "AGENT_DESCRIPTIONS", "AGENT_ROWS", "AS_RECORDED", "FORMAT_AGENT", "agent_of"]
