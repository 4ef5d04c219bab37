"""Policy: every threshold and size of the pipeline as one immutable value.

Numbers come from the seeds (SPEC §4); `PRESETS` reproduces each seed's strategy.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Mapping

from breakwater.core.policy.agents import AGENT_STRATEGIES


class PolicyError(ValueError):
    pass


# settings of tier 1 and tier 3: they never change what the pipeline sends
# English prose and code run about 4 chars a token: a share of the window in chars
SUMMARY_CHARS_PER_TOKEN = 4

NOT_COMPACTION = ("tool_", "read_file_", "bash_", "scribe_", "memory_", "retrieval_", "project_")
# settings added after policies were first fingerprinted, with the value that changes nothing: left
# out of the fingerprint at that value, so a policy's fingerprint (and the compactions it logged) holds
NEUTRAL: dict[str, Any] = {"mask_placeholder": "", "soft_trigger_tokens": 0, "hard_trigger_tokens": 0,
                           "hard_window_share": 0.0, "reserve_tokens": 0, "compact_trigger_messages": 0,
                           "mask_all": False, "clear_at_least_tokens": 0, "mask_exclude_tools": "",
                           "deep_keep_tokens": 0, "deep_keep_messages": 20, "deep_keep_user_tokens": 0,
                           "mask_batch_tokens": 0, "summary_instruction_share": 0.0, "mask_clear_tool_inputs": False,
                           "cache_horizon_turns": 0}


@dataclass(frozen=True, slots=True)
class Policy:
    preset: str = "breakwater"
    window: int = 128_000
    buffer_tokens: int = 13_000          # seed 000: room for the next reply + estimator error
    soft_ratio: float = 0.70              # seed 000: soft limit = 70% of the window
    small_window_buffer_ratio: float = 0.15  # buffer cap for small windows (soft and hard stay apart)
    precise_ratio: float = 0.9            # seed 000 §8.6: exact count once estimate > 0.9 x soft
    fast_path_min_messages: int = 4       # seed 003: too few messages -> send as is
    # ours: a soft-zone stage that has to reach further aims this far below the soft limit, then
    # stays put while the request fits, so the compacted prefix (and the provider cache) holds
    soft_hysteresis_ratio: float = 0.10
    # > 0: a soft-zone step that changes what the provider has cached (snipping or masking more of the
    # history) is taken only when what it saves on the next requests, at most this many, pays for the
    # cache re-write it causes, at the model's cache prices (core/fold/cache_worth.py); until then the
    # request is sent over the soft limit, never over the hard one. 0: every step is taken once the
    # request is over the soft limit (the seeds). Without the model's prices it is 0. (issue 41) 100: on the
    # shared fixtures the requests until the request is back at the soft limit mostly bind first (at 32k 30,
    # 100 and 1,000 decide alike; at the models' windows 30 is $0.24 lower on $35, on one session: not
    # tuned on); the cap bounds a window so large that the soft limit is hundreds of requests away
    cache_horizon_turns: int = 100
    # the limits as other agents state them (core/policy/agents.py); 0: the limits above. Each sets
    # one limit in input tokens: the soft limit outright (Anthropic's clear_tool_uses `trigger`), the
    # hard limit outright (Anthropic's compaction `trigger`), as a share of the window (Codex: 90%)
    # or as the window less a reserve (pi's reserveTokens, Claude Code's output + 13,000 buffer)
    soft_trigger_tokens: int = 0
    hard_trigger_tokens: int = 0
    hard_window_share: float = 0.0
    reserve_tokens: int = 0
    # > 0: a deep compaction is also due once the history holds more messages than this (OpenHands'
    # condenser counts events: `max_size`)
    compact_trigger_messages: int = 0

    sanitize: bool = True

    snip: bool = True                     # seed 000 snipToolOutputs
    snip_threshold_chars: int = 3_000
    snip_head_chars: int = 1_500
    snip_tail_chars: int = 1_000

    mask: bool = True                     # seed 001 observation masking
    working_memory_messages: int = 6
    # > 0: working memory is the last this many observations instead (SWE-agent's LastNObservations,
    # the rule of "The Complexity Trap", arXiv 2508.21433); 0: the last `working_memory_messages`
    mask_keep_observations: int = 0
    mask_min_chars: int = 200
    # "": seed 001's line with the outcome kept (exit status, first error); else what a masked
    # observation becomes, with {lines} and {bytes} of the original: SWE-agent's LastNObservations
    # writes "Old environment output: ({lines} lines omitted)" (see docs/policies/complexity-trap.toml)
    mask_placeholder: str = ""
    # once masking applies, every observation outside working memory is masked, not only as many as
    # bring the request under the soft limit (Anthropic's clear_tool_uses clears all but `keep`).
    # (issue 41) breakwater masks so: with the cache gate a step is made rarely, and one that re-writes the
    # cached history anyway frees what it can (shared fixtures with the gate, 32k: $9.70 oldest first, $9.16
    # all at once; the models' windows $35.30 and $35.08; pinned facts unchanged)
    mask_all: bool = True
    # masking that would free fewer tokens than this in a request is not done (Anthropic's
    # clear_at_least: clearing re-writes the cached prefix, so it must be worth it)
    clear_at_least_tokens: int = 0
    # tool names, comma-separated, whose results are never masked (Anthropic's exclude_tools)
    mask_exclude_tools: str = ""
    # a far tool call's arguments are cleared too ("{}"), as its result is (Anthropic's clear_tool_inputs,
    # LangChain's): working memory then starts at the call of its first result, so no kept result
    # loses its call's arguments
    mask_clear_tool_inputs: bool = False
    # > 0: masking moves its boundary only when that frees this many tokens at once, so the cached
    # prefix is re-written in batches that pay for it, not on every request (issue 41)
    mask_batch_tokens: int = 0
    fold_min_chars: int = 200
    working_memory_max_chars: int = 1_000
    working_memory_head_chars: int = 500
    working_memory_tail_chars: int = 500

    microcompact: bool = True             # seed 000: far tool interaction -> one skeleton line

    deep_compact: bool = True
    # seed 000 summarizes as soon as the hard limit is crossed; breakwater first checks whether
    # the free stages (snip, mask, microcompact) already bring the request under the hard limit
    deep_compact_first: bool = False
    # where to cut: "last-boundary" (seed 000 findSafeCutPoint), "keep-turns" (seed 003,
    # keep the last N turns), "keep-tokens" (keep a recent tail of `deep_keep_ratio` x window)
    deep_cut: str = "keep-tokens"
    # (issue 41) 0.25 before the summary kept every instruction of the user: with them in it, a shorter
    # verbatim tail keeps what it did (pinned 99.7% at 32k on the shared fixtures) and saves what the longer
    # summary costs (78.55% -> 78.73% of tokens). The seeds and agents keep 0.25: no part of their strategy
    deep_keep_ratio: float = 0.22
    # "keep-tokens" keeps this many tokens when > 0, instead of deep_keep_ratio x window (pi's
    # keepRecentTokens); "keep-messages" keeps the last deep_keep_messages messages (OpenHands, LangChain)
    deep_keep_tokens: int = 0
    deep_keep_messages: int = 20
    # > 0: after a summary the user's own messages stay verbatim, the newest first, up to this many
    # tokens (Codex keeps 20,000 tokens of them before its summary)
    deep_keep_user_tokens: int = 0
    keep_first_user: bool = True          # seed 003: [System][First user][Summary][Last N]
    summary_max_chars: int = 6_000
    # the user's instructions may take this share of the window (at SUMMARY_CHARS_PER_TOKEN) in a summary
    # on top of `summary_max_chars`: a long session holds ~100 of them (pi's: 12,500 chars), which a fixed
    # cap dropped oldest first. 0: the seeds' fixed cap
    summary_instruction_share: float = 0.10
    summary_pretruncate_chars: int = 2_000  # seed 000 truncateForCompaction
    summary_pretruncate_head: int = 1_000
    summary_pretruncate_tail: int = 800

    shape_keep_last_max: int = 20         # seed 003 keepLast 20 -> 3
    shape_keep_last_min: int = 3
    user_keep_chars: int = 1_000          # user messages keep at least this much
    # only when nothing else makes a request fit: tool-call arguments over this, outside working
    # memory, keep head and tail (SPEC §4.6; otherwise tool calls are never altered)
    argument_max_chars: int = 20_000

    # tier 1 (tool output at the source)
    tool_max_lines: int = 400
    tool_max_line_bytes: int = 4_000
    # the shown head + tail of one result, in bytes: ~7,500 tokens (Claude Code allows 30,000
    # characters, Codex 10 KiB); without it 400 lines of 4 KB would reach the model whole
    tool_max_bytes: int = 30_000
    read_file_default_lines: int = 400
    bash_timeout_s: float = 120.0
    bash_network: bool = False            # the bash sandbox has no network unless this allows it
    # what one bash call may take (issue 27): the longest timeout a call may ask for, processes,
    # memory, any one file it writes (and its /tmp), and how much of its output is kept in the spill
    tool_timeout_s: float = 600.0
    tool_max_procs: int = 512
    tool_max_memory_mb: int = 4_096
    tool_max_file_mb: int = 1_024
    tool_max_spill_mb: int = 256
    # what the spill files of one session hold together (issue 35 item 8): 8 calls at the bound above.
    # Past it a call's spill is cut (the result says so) or, with nothing left, not kept at all
    tool_max_session_spill_mb: int = 2_048
    # bash's sandbox shows $HOME empty (bar the workspace and toolchains); this shows it whole, read-only
    # (the config file, its backups and ~/.config/breakwater stay hidden)
    tool_allow_secrets: bool = False

    # tier 3 (memory)
    scribe_every_turns: int = 5
    memory_max_lines: int = 150
    memory_fragments_threshold: int = 12
    memory_gc_cooldown_days: float = 7.0
    retrieval_timeout_s: float = 2.0
    retrieval_top_k: int = 5
    project_history_entries: int = 5
    project_history_max_tokens: int = 1_500

    # -- derived limits --------------------------------------------------------------------------
    @property
    def effective_buffer(self) -> int:
        """The buffer, capped at `small_window_buffer_ratio` of a window too small for it. The smaller
        of the two, never a switch at the window where soft and hard would collide: that switch made
        the hard limit jump down as the window grew (43,333 -> hard 36,834; 43,334 -> 30,334)."""
        return min(self.buffer_tokens, int(self.small_window_buffer_ratio * self.window))

    @property
    def states_limits(self) -> bool:
        """Whether a limit is stated in tokens (another agent's rule) rather than by the seed's ratios."""
        return bool(self.soft_trigger_tokens or self.hard_trigger_tokens or self.hard_window_share
                    or self.reserve_tokens)

    @property
    def soft_limit(self) -> int:
        soft = self.soft_trigger_tokens or int(self.soft_ratio * self.window)
        # a stated trigger past the hard limit never fires before it: the soft zone starts below it
        return min(soft, self.hard_limit - 1) if self.states_limits else soft

    @property
    def hard_limit(self) -> int:
        if self.hard_trigger_tokens:
            # a trigger past what the window holds (150,000 on a 128k model) is never reached: the
            # buffer's limit stands in, as a request over the window is never sent
            return min(self.hard_trigger_tokens, self.window - self.effective_buffer)
        if self.hard_window_share:
            return int(self.hard_window_share * self.window)
        if self.reserve_tokens:
            # a window smaller than twice the reserve (Claude Code's 45,000 on a 32k window) has no
            # such agent: half of it stays usable rather than none
            return self.window - min(self.reserve_tokens, self.window // 2)
        return self.window - self.effective_buffer

    @property
    def summary_instruction_chars(self) -> int:
        """Chars a summary may spend on the user's instructions beyond `summary_max_chars`."""
        return int(self.summary_instruction_share * self.window * SUMMARY_CHARS_PER_TOKEN)

    @property
    def summary_limit(self) -> int:
        """The longest summary, in chars: the fixed cap and the instructions' share of the window."""
        return self.summary_max_chars + self.summary_instruction_chars

    @property
    def precise_from(self) -> int:
        return int(self.precise_ratio * self.soft_limit)

    def fingerprint(self) -> str:
        """Identifies the compaction behaviour; tier-1 and memory settings do not change a view."""
        import hashlib

        data = {f.name: getattr(self, f.name) for f in fields(self) if not f.name.startswith(NOT_COMPACTION)}
        for name in NEUTRAL:   # at their neutral value, as before they existed: compactions logged then still match
            if data[name] == NEUTRAL[name]:
                del data[name]
        return hashlib.sha1(json.dumps(data, sort_keys=True).encode()).hexdigest()[:12]

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def with_changes(self, **changes: Any) -> "Policy":
        return validate(replace(self, **changes))


_BASE = Policy()
# Breakwater's defaults before issue 41 (its summary keeping every instruction, the cache gate, masking all
# far observations at once): the seeds and the other agents' strategies keep them (those are breakwater's
# tuning, no part of theirs), and their fingerprints
_SEED = replace(_BASE, summary_instruction_share=0.0, deep_keep_ratio=0.25, cache_horizon_turns=0, mask_all=False)

PRESETS: dict[str, Policy] = {
    # seed 000: dual threshold; snip tool output in the soft zone, deep LLM summary past hard;
    # the cut is the last clean boundary, the summary replaces everything but the system prompt.
    "seed-000": replace(_SEED, preset="seed-000", mask=False, microcompact=False, deep_compact_first=True,
                        deep_cut="last-boundary", keep_first_user=False),
    # seed 001: observation masking + working-memory head/tail, no LLM at all.
    "seed-001": replace(_SEED, preset="seed-001", snip=False, microcompact=False, deep_compact=False),
    # seed 003: no per-message trimming; shape history [System][First user][Summary][Last N turns].
    "seed-003": replace(_SEED, preset="seed-003", snip=False, mask=False, microcompact=False, deep_compact_first=True,
                        deep_cut="keep-turns", keep_first_user=True),
    "breakwater": _BASE,
}

DEFAULT_PRESET = "breakwater"

PRESET_DESCRIPTIONS: dict[str, str] = {
    "seed-000": "dual threshold: snip tool output past the soft limit, summarize everything before the last "
                "safe boundary past the hard limit",
    "seed-001": "observation masking and working-memory head/tail, no model: a sliding window that drops "
                "the oldest turns without a summary when masking is not enough",
    "seed-003": "shape history [System][First user][Summary][Last N turns], keep-last 20 down to 3; "
                "compacts often, as the seed does, because it keeps as much as just fits",
    "breakwater": "snip oldest first, mask every far observation at once, microcompact, each step only when it "
                  "pays for the provider's cache it breaks; summarize only when they are not enough, keeping a "
                  "fifth of the window verbatim",
}


# other agents' strategies (core/policy/agents.py says where each value comes from)
AGENT_PRESETS: dict[str, Policy] = {name: replace(_SEED, preset=name, **changes)
                                    for name, changes in AGENT_STRATEGIES.items()}


def preset(name: str) -> Policy:
    """A preset by name: Breakwater's own (PRESETS) or another agent's strategy (AGENT_PRESETS)."""
    found = PRESETS.get(name) or AGENT_PRESETS.get(name)
    if found is None:
        raise PolicyError(f"unknown preset {name!r}; choose one of {', '.join(preset_names())}")
    return found


def preset_names() -> list[str]:
    """Every preset a command line takes: Breakwater's, then the agents' strategies."""
    return [*PRESETS, *AGENT_PRESETS]


# str settings and the values they take
CHOICES: dict[str, tuple[str, ...]] = {
    "deep_cut": ("last-boundary", "keep-turns", "keep-tokens", "keep-messages"),
}

# (head, tail, limit): text over `limit` chars keeps its head and tail, so they must fit in it
HEAD_TAIL_LIMITS = (
    ("snip_head_chars", "snip_tail_chars", "snip_threshold_chars"),
    ("working_memory_head_chars", "working_memory_tail_chars", "working_memory_max_chars"),
    ("summary_pretruncate_head", "summary_pretruncate_tail", "summary_pretruncate_chars"),
    ("snip_head_chars", "snip_tail_chars", "argument_max_chars"),
)


def validate(p: Policy) -> Policy:
    """`p` if every value is usable, else PolicyError saying which value and why."""
    for f in fields(p):
        value = getattr(p, f.name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if value != value or value in (float("inf"), float("-inf")):
            raise PolicyError(f"{f.name} must be a finite number, got {value}")
        if value < 0:
            raise PolicyError(f"{f.name} cannot be negative, got {value}")
        if f.name.endswith("_ratio") and not 0 < value < 1:
            raise PolicyError(f"{f.name} must be between 0 and 1 (exclusive), got {value}")
    if not 0 <= p.hard_window_share < 1:
        raise PolicyError(f"hard_window_share must be 0 (off) or below 1, got {p.hard_window_share}")
    for name, allowed in CHOICES.items():
        if getattr(p, name) not in allowed:
            raise PolicyError(f"{name} must be {', '.join(allowed[:-1])} or {allowed[-1]}, got {getattr(p, name)!r}")
    if p.window < 256:
        raise PolicyError(f"window must be at least 256 tokens, got {p.window}")
    if p.soft_limit >= p.hard_limit:
        raise PolicyError(f"soft limit ({p.soft_limit:,} = {p.soft_ratio} x window) must stay below the hard limit "
                          f"({p.hard_limit:,} = window - buffer {p.effective_buffer:,})")
    if p.shape_keep_last_min < 1 or p.shape_keep_last_max < p.shape_keep_last_min:
        raise PolicyError(f"shape_keep_last_min must be >= 1 and <= shape_keep_last_max, got "
                          f"{p.shape_keep_last_min} and {p.shape_keep_last_max}")
    for name in ("tool_timeout_s", "tool_max_procs", "tool_max_memory_mb", "tool_max_file_mb", "tool_max_spill_mb",
                 "tool_max_session_spill_mb"):
        if getattr(p, name) < 1:
            raise PolicyError(f"{name} must be at least 1, got {getattr(p, name)}")
    if p.tool_max_bytes < 256:
        raise PolicyError(f"tool_max_bytes must be at least 256, got {p.tool_max_bytes}")
    for head, tail, limit in HEAD_TAIL_LIMITS:
        h, t, n = getattr(p, head), getattr(p, tail), getattr(p, limit)
        if h + t > n:
            raise PolicyError(f"{head} + {tail} ({h} + {t}) cannot exceed {limit} ({n})")
    _check_placeholder(p.mask_placeholder)
    if p.summary_instruction_share >= 1:
        raise PolicyError(f"summary_instruction_share must be below 1 (a share of the window), got "
                          f"{p.summary_instruction_share}")
    if p.summary_pretruncate_tail < 1:
        raise PolicyError("summary_pretruncate_tail must be at least 1")
    return p


PLACEHOLDER_FIELDS = ("lines", "bytes")
PLACEHOLDER_MAX_CHARS = 200


def _check_placeholder(template: str) -> None:
    """A placeholder is one short line, and names only the fields it is given."""
    import string

    if len(template) > PLACEHOLDER_MAX_CHARS:
        raise PolicyError(f"mask_placeholder must be at most {PLACEHOLDER_MAX_CHARS} characters, got {len(template)}")
    if any(not c.isprintable() for c in template):
        raise PolicyError("mask_placeholder must be one line of printable text")
    try:
        parts = [(name, spec, conv) for _, name, spec, conv in string.Formatter().parse(template) if name is not None]
    except ValueError as exc:
        raise PolicyError(f"mask_placeholder is not a valid template ({exc}); write {{{{ and }}}} for braces") from None
    for name, spec, conv in parts:
        # no format spec or conversion: "{lines:>999999}" would not be one short line
        if name not in PLACEHOLDER_FIELDS or spec or conv:
            raise PolicyError("mask_placeholder may use {lines} and {bytes} (nothing else inside braces), "
                              f"not {{{name}{'!' + conv if conv else ''}{':' + spec if spec else ''}}}")


def from_mapping(data: Mapping[str, Any], base: Policy | None = None) -> Policy:
    """Build a policy from a TOML-like mapping: an optional `preset` then overrides."""
    data = dict(data)
    if "policy" in data and isinstance(data["policy"], Mapping):
        data = dict(data["policy"])
    start = preset(data.pop("preset")) if "preset" in data else (base or _BASE)
    known = {f.name: f for f in fields(Policy)}
    changes: dict[str, Any] = {}
    for key, value in data.items():
        if key not in known:
            raise PolicyError(f"unknown policy setting {key!r}")
        want = type(getattr(_BASE, key))
        if want is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, want) or (want is int and isinstance(value, bool)):
            raise PolicyError(f"policy setting {key!r} must be {want.__name__}, got {value!r}")
        changes[key] = value
    return validate(replace(start, **changes))


def load_toml(path: Path) -> Policy:
    import tomllib

    from breakwater.core.log.regular_file import MAX_CONFIG_BYTES, RefusedFile, read_regular

    try:
        data = tomllib.loads(read_regular(path, MAX_CONFIG_BYTES, "policy file").decode("utf-8"))
    except FileNotFoundError:
        raise PolicyError(f"{path}: no such policy file") from None
    except RefusedFile as exc:   # a FIFO, a device, a directory, or megabytes: refused before reading
        raise PolicyError(str(exc)) from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise PolicyError(f"{path}: not valid TOML ({exc})") from None
    except OSError as exc:
        raise PolicyError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    return from_mapping(data)


__all__ = ["AGENT_PRESETS", "Policy", "PolicyError", "PRESETS", "PRESET_DESCRIPTIONS", "CHOICES", "DEFAULT_PRESET", "preset", "preset_names",
           "from_mapping", "load_toml",
           "validate"]
