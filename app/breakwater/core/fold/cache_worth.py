"""Whether a soft-zone step pays for the provider's cache it breaks (issue 41, `cache_horizon_turns`).

Snipping or masking more of the history changes messages the previous request sent, and the
provider's prompt cache (core/log/prompt_cache.py) then writes everything after the first of them
again. At Anthropic's prices a token written costs 1.25x the input and one read from the cache 0.1x:
re-writing a cached token costs 11.5 times what keeping it costs a request. So a step is worth it
only when the tokens it frees, at the price the next requests would have paid to read them, add up
over the requests ahead to more than what the step costs now. That makes masking go in batches that
pay for what they break (Anthropic's `clear_at_least`, with the amount worked out from the prices
and the request rather than set by hand), and leaves alone a step that would re-write a long cached
tail to free a little.

`step_worth` is a pure function of the two requests (the one keeping the previous compaction and the
one with the step) and the prices; the pipeline decides with it (core/fold/pipeline.py `_cache_gate`).
The provider's misses (core/log/prompt_cache.py `Misses`: pi missed a third of the requests after a
user message) count too: a miss writes everything, so a token freed saves more, and a step re-writes
less that would have been read. The pipeline fits them from the log's recorded cache reads as
`simulate` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from breakwater.core.log.models import lookup, named_model
from breakwater.core.log.prompt_cache import TTL_GRACE, Prices, cache_rules, read_and_written


CACHE_WAITS = " waits for the cache: "   # in a plan's note: a soft-zone step the cache model held back

@dataclass(frozen=True, slots=True)
class CachePricing:
    """What the decision needs of the provider's cache: its prices, whether writes cost extra, its TTL."""

    prices: Prices
    writes_billed: bool
    expires_after: float   # seconds unused after which nothing is read from the cache (TTL and grace)

    @classmethod
    def for_model(cls, model: str | None, provider: str | None = None) -> CachePricing | None:
        """The pricing of `model`'s provider, as `simulate` prices requests; None when its prices are unknown."""
        if not model:
            return None
        info = lookup(model)
        if info is None or info.input is None:
            return None
        rules = cache_rules(model, provider)
        return cls(Prices.of(info, rules), rules.writes_billed, rules.ttl + TTL_GRACE)

    @classmethod
    def of_session(cls, header: Mapping[str, Any], model: str | None = None) -> CachePricing | None:
        """The pricing of the model named (`model`: --model, else the session header's), by the provider
        the header names, if any: what every pipeline of a session weighs its steps by, so that a
        replay decides as the live session did."""
        provider = header.get("provider")
        return cls.for_model(named_model(header, model), provider if isinstance(provider, str) else None)

    def cost(self, request: CachedRequest, hit: float = 1.0) -> float:
        """USD of the request's input: its cached start read (with the chance `hit` the provider reads
        it), the rest written (or plain input)."""
        return self.prices.cost(request.tokens, *read_and_written(request.tokens, request.cached, hit,
                                                                   self.writes_billed))


@dataclass(frozen=True, slots=True)
class CachedRequest:
    tokens: int
    cached: int   # its first tokens, identical to the previous request's: read from the cache


@dataclass(frozen=True, slots=True)
class StepWorth:
    """A step weighed: what it frees, what it costs now beyond keeping the previous compaction, and
    what it saves on each later request, over how many."""

    freed: int             # tokens the request with the step is smaller by
    rewritten: int         # cached tokens the step writes again that keeping the compaction reads
    costs_now: float       # USD the request with the step costs more (the re-write less the tokens freed)
    saves_per_turn: float  # USD each later request saves: the tokens freed, at the price of reading them
    turns: int             # later requests the saving is counted over

    @property
    def pays(self) -> bool:
        return self.freed > 0 and self.saves_per_turn * self.turns >= self.costs_now

    def note(self, stage: str) -> str:
        """Why the step waits, for the plan's notes (the gauge shows it: `CACHE_WAITS` marks it)."""
        return (f"{stage}{CACHE_WAITS}it frees {self.freed:,} tokens but re-writes {self.rewritten:,} cached "
                f"(${self.costs_now:,.4f} more now) for ${self.saves_per_turn * self.turns:,.4f} saved over the "
                f"next {self.turns} request{'' if self.turns == 1 else 's'}")


def step_worth(pricing: CachePricing, kept: CachedRequest, step: CachedRequest, turns: int,
               hit: float = 1.0) -> StepWorth:
    """The step from `kept` (the request keeping the previous compaction) to `step`, weighed over `turns`
    later requests; `hit`: the chance the provider reads a cached prefix (core/log/prompt_cache.py
    `Misses`): a token freed saves its read on a hit, its write on a miss. A cold cache (nothing read: both
    `cached` 0) re-writes nothing the step can be blamed for."""
    freed = kept.tokens - step.tokens
    p = pricing.prices
    kept_per_turn = hit * p.read + (1.0 - hit) * (p.write if pricing.writes_billed else p.input)
    return StepWorth(freed, max(0, kept.cached - step.cached), pricing.cost(step, hit) - pricing.cost(kept, hit),
                     max(0, freed) * kept_per_turn / 1e6, turns)


def turns_ahead(cap: int, room: int, growth: float) -> int:
    """Later requests a saving is counted over: at most `cap`, and only until the request, growing by
    `growth` tokens a request, has grown by `room`, the tokens the step leaves below the soft limit: there
    the soft zone steps again, re-writing about where this step did, or going a stage further over the
    same messages (a snip that only just gets under the soft limit is masked a few requests later, and
    what it saved ends there). So a step that frees much buys many requests, and small steps wait to be
    made as one. At least one."""
    if growth <= 0:
        return max(1, cap)
    return max(1, min(cap, int(room / growth)))


__all__ = ["CachePricing", "CachedRequest", "StepWorth", "step_worth", "turns_ahead"]
