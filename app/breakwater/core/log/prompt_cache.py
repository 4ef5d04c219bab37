"""The provider's prompt cache in money (SPEC §2 "Cache in money", issue 36).

Per request: how many of its input tokens the provider reads from its prompt cache, how many it
writes there, and what the request's input costs at the model's prices (core/log/models.py). The
rules are the provider's:

- Anthropic: a prefix is cached when a request marks it (Claude Code and pi mark the end of each
  request), written at 1.25× the input price (genai-prices' cache-write price where it has one),
  read at 0.1×; an entry lives 5 minutes unused (each read refreshes it). So a request reads what
  it shares with the previous one, when that was less than the TTL before, and writes the rest.
- OpenAI and the rest: automatic caching of a shared prefix of 1,024 tokens or more, read at the
  cached price, nothing extra for a write (the rest is input); an entry lives 5-10 minutes unused,
  taken as 5.

The time of a request is the latest timestamp of the messages before it (its reply's ends after a
long answer): a gap between two requests longer than the TTL (and a little grace: "a minimum
lifetime") re-writes the whole prefix. A transcript with no timestamps keeps its cache.

Caches also miss with no rule broken (on the pi fixture, 37 of 439 requests read nothing 20 s to
4 min after the last one, each writing its whole prefix again at 1.25×: half the session's input cost).
The miss rate is fitted from the transcript's own recorded cache reads, as the token accounting is
from its billed tokens (`Misses`: a request predicted to read a cached prefix that read less than
half of it missed), apart for the first request after a user message and the requests of a tool
loop: pi missed 36 of the 79 first ones and 1 of the 360 others, whatever the gap (20 s to 4 min),
Claude Code none of either. Each has a prior weighing 4 requests while few are seen; each request
reads its prefix with the probability of a hit: the expected read and write. A request with nothing
of its own cached (the first, or one after the TTL) may still read the agent's system prompt and
tools, which its other sessions keep warm (Claude Code: 12,610 tokens read on the first request and
after a 69-minute gap): that warm prefix is the least such a request was recorded to read.

A compaction changes the history the previous request cached: what this request must write again
of the previous one (`rewritten`) is the cache re-write the compaction causes, priced as what it
costs beyond reading it (`CacheModel.request`). That is why compaction can cost more than it saves.

This is the model `simulate`, `eval` and the workbench price requests by, and the one a strategy can
ask what a compaction would cost in cache writes (`CacheModel.request` on the request it would make).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from breakwater.core.log.models import ModelInfo

ANTHROPIC_WRITE = 1.25   # × input, where the price source gives no cache-write price
ANTHROPIC_READ = 0.1
TTL_SECONDS = 300.0
# "a minimum 5-minute lifetime": an entry 306 s unused was still read on the Claude Code fixture (a test
# run between two requests), so an entry expires only a little past its TTL
TTL_GRACE = 15.0
# a prefix this share of the previous request holds all of it: the two are counted by the fit as it stood
# at each (a compacted request's stable prefix stops well before)
REPLY_KEPT = 0.98
DEEPSEEK_UNIT = 64
MINIMUM_PREFIX = 1024    # tokens: a shorter prefix is not cached (Anthropic's Sonnet/Opus, OpenAI)


@dataclass(frozen=True, slots=True)
class CacheRules:
    provider: str          # "anthropic", "openai" or "other"
    ttl: float             # seconds an entry lives unused
    writes_billed: bool    # writes cost the cache-write price (Anthropic); else the input price
    minimum: int           # the shortest prefix cached
    unit: int = 1          # a cached prefix is a whole number of these tokens
    caches_reply: bool = False   # the request's reply is cached with it (DeepSeek), read by the next one

    def to_json(self) -> dict[str, Any]:
        out = {"provider": self.provider, "ttl_seconds": self.ttl, "writes_billed": self.writes_billed,
               "minimum_prefix": self.minimum}
        if self.caches_reply:
            out |= {"unit": self.unit, "caches_reply": True}
        return out


def cache_rules(model: str | None, provider: str | None = None) -> CacheRules:
    """The cache rules of the provider serving `model` (the session's provider where it names one)."""
    name = f"{provider or ''} {model or ''}".lower()
    if "claude" in name or "anthropic" in name:
        return CacheRules("anthropic", TTL_SECONDS, True, MINIMUM_PREFIX)
    if any(f in name for f in ("gpt", "openai", "codex", "o1", "o3", "o4")):
        return CacheRules("openai", TTL_SECONDS, False, MINIMUM_PREFIX)
    if "deepseek" in name:
        # DeepSeek caches on disk in 64-token units, and what it cached of a request holds its reply: the
        # mini-swe-agent fixture's reads are the previous request and its output, floored to 64 (12,416 read
        # after a request of 11,125 that answered 1,317); taken as the previous request alone, its uncached
        # input was twice the recorded (34,858 vs 17,859 tokens) and the cost 3.9% high
        return CacheRules("deepseek", TTL_SECONDS, False, DEEPSEEK_UNIT, DEEPSEEK_UNIT, True)
    return CacheRules("other", TTL_SECONDS, False, MINIMUM_PREFIX)


@dataclass(frozen=True, slots=True)
class Prices:
    """USD per million input tokens: uncached, read from the cache, written to it."""

    input: float
    read: float
    write: float

    @classmethod
    def of(cls, info: ModelInfo, rules: CacheRules) -> "Prices":
        base = info.input or 0.0
        if rules.writes_billed:
            read = info.cache_read if info.cache_read is not None else ANTHROPIC_READ * base
            write = info.cache_write if info.cache_write is not None else ANTHROPIC_WRITE * base
        else:
            read = info.cache_read if info.cache_read is not None else base
            write = base
        return cls(base, read, write)

    def cost(self, tokens: int, read: int, write: int) -> float:
        return (read * self.read + write * self.write + max(0, tokens - read - write) * self.input) / 1e6


def read_and_written(tokens: int, cached: int, hit: float, writes_billed: bool) -> tuple[int, int]:
    """A request of `tokens` whose first `cached` the cache holds, read with the chance `hit`: the tokens
    expected read, and those written (Anthropic: all that was not read; else 0, the rest plain input)."""
    read = round(cached * hit)
    return read, tokens - read if writes_billed else 0


@dataclass(slots=True)
class Misses:
    """The share of requests whose cached prefix the provider did not read, fitted from recorded reads."""

    PRIOR_RATES = (0.005, 0.02)   # in a tool loop, the first request after a user message
    # the prior weighs as 4 requests: agents differ from 0% (Claude Code) to 46% (pi) after a user message,
    # so a prior of 10 priced pi's first misses as hits for most of a session (its cost -5.6%, now +0.4%)
    PRIOR_WEIGHT = 4.0

    missed: list[float] = field(default_factory=lambda: [0.0, 0.0])
    seen: list[float] = field(default_factory=lambda: [0.0, 0.0])
    warm: int = 0   # tokens a cold request read: the agent's prefix its other sessions keep cached

    def copy(self) -> "Misses":
        return Misses(self.missed[:], self.seen[:], self.warm)

    def rate(self, after_user: bool) -> float:
        b = int(after_user)
        return (self.missed[b] + self.PRIOR_RATES[b] * self.PRIOR_WEIGHT) / (self.seen[b] + self.PRIOR_WEIGHT)

    def observe(self, expected: int, recorded: int | None, cold: bool, after_user: bool = False) -> None:
        """A request that could read `expected` tokens from the cache read `recorded`; `cold`: nothing
        of its own was cached."""
        if cold:   # the least a cold request read: the part other sessions keep warm, not a long gap's luck
            if recorded:
                self.warm = min(self.warm, recorded) if self.warm else recorded
            return
        if expected <= 0:
            return
        b = int(after_user)
        self.seen[b] += 1
        self.missed[b] += (recorded or 0) < expected // 2

    def to_json(self) -> dict[str, Any]:
        return {"rate_in_a_tool_loop": round(self.rate(False), 4), "rate_after_a_user_message": round(self.rate(True), 4),
                "warm": self.warm}


# Not frozen, for the reason Message is not: a frozen dataclass sets each of its 11 fields through
# object.__setattr__, and a simulation builds two per request (7% of simulate on a million tiny
# messages). It is a value all the same: nothing assigns to one once it is built.
@dataclass(slots=True, unsafe_hash=True)
class RequestCache:
    """One request's input against the cache."""

    tokens: int
    read: int            # from the cache (the expected read: the prefix times the chance of a hit)
    reusable: int        # what a hit reads: the prefix the cache holds
    write: int           # to it (Anthropic: all that was not read; else 0: the rest is plain input)
    rewritten: int       # of the previous request's cached tokens, written again because this one changed them
    cost: float | None   # USD of the input, None without prices
    rewrite_cost: float  # what `rewritten` cost beyond reading them (USD; 0 without prices)
    expired: bool        # the previous request was longer than the TTL ago: nothing of it was read
    cold: bool           # nothing of this run's was cached (the first request, or expired)
    gap: float | None    # seconds since the previous request, when both have a time
    after_user: bool     # the first request after a user message

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"read": self.read, "write": self.write}
        if self.rewritten:
            out["rewritten"] = self.rewritten
            out["rewrite_cost"] = round(self.rewrite_cost, 6)
        if self.expired:
            out["expired"] = True
        return out


def timestamp(value: Any) -> float | None:
    """Seconds since the epoch of a transcript's timestamp (ISO 8601, or epoch seconds or ms); None when unreadable."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value / 1000.0 if value > 1e11 else float(value)
    if isinstance(value, str) and value:
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


class CacheModel:
    """The provider's cache as one run's requests meet it, in order (`request` once per request)."""

    __slots__ = ("rules", "prices", "misses", "_cached", "_at", "_tokens", "_reply")
    # `_cached`: whether there was a previous request; `_at`: when it was sent; `_tokens`: its size;
    # `_reply`: the output tokens of its reply (`replied`)

    def __init__(self, rules: CacheRules, prices: Prices | None, misses: Misses | None = None):
        self.rules, self.prices = rules, prices
        self.misses = misses if misses is not None else Misses()
        self._cached = False
        self._at: float | None = None
        self._tokens = 0
        self._reply = 0

    def replied(self, output_tokens: int) -> None:
        """The last request's reply was `output_tokens` long: cached with it where the provider does that."""
        self._reply = max(0, output_tokens)

    def request(self, tokens: int, prefix: int, at: float | None = None, rewritten: int = 0,
                after_user: bool = False) -> RequestCache:
        """The request of `tokens` whose first `prefix` tokens are the previous request's (counted as this
        one is), sent at `at` (seconds); `rewritten`: the previous request's tokens after `prefix` that
        this one changed; `after_user`: a user message came since the last request."""
        rules = self.rules
        gap = at - self._at if self._at is not None and at is not None else None
        expired = self._cached and gap is not None and gap > rules.ttl + TTL_GRACE
        cold = expired or not self._cached
        if rules.caches_reply and not cold and prefix >= self._tokens * REPLY_KEPT:
            prefix += self._reply   # the whole previous request is kept, so what was cached after it is too
        reusable = min(self.misses.warm if cold else prefix, tokens)
        reusable -= reusable % rules.unit
        if reusable < rules.minimum:
            reusable = 0
        hit = 1.0 - self.misses.rate(after_user)
        read, write = read_and_written(tokens, reusable, hit, rules.writes_billed)
        # what the change made it write: had the history not changed, a hit would have read it
        again = 0 if cold else round(min(rewritten, tokens - reusable) * hit)
        cost = rewrite_cost = None
        if self.prices is not None:
            cost = self.prices.cost(tokens, read, write)
            rewrite_cost = again * ((self.prices.write if rules.writes_billed else self.prices.input)
                                    - self.prices.read) / 1e6
        self._cached = True   # whether it was long enough to be cached, the next one's prefix says
        self._tokens, self._reply = tokens, 0
        if at is not None:
            self._at = at
        return RequestCache(tokens, read, reusable, write, again, cost, rewrite_cost or 0.0, expired, cold, gap,
                            after_user)


def recorded_cost(prices: Prices, prompt: int, cached: int | None, written: int | None, rules: CacheRules) -> float:
    """USD of a request's input as the provider recorded it: its cache reads and writes at their prices."""
    read = cached or 0
    write = (written or 0) if rules.writes_billed else 0
    return prices.cost(prompt, read, write)
