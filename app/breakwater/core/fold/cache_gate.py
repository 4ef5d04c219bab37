"""What the pipeline knows of the provider's prompt cache, to weigh a soft-zone step against the cache it
breaks (`cache_horizon_turns`; the weighing itself is core/fold/cache_worth.py): when each request is sent
(the time of the last message before it), whether a user message came since the last one, what of the last
request the cache held, and the provider's misses, fitted from the log's recorded cache reads as
`simulate` fits its own (core/log/prompt_cache.py `Misses`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from breakwater.core.fold.cache_worth import CachedRequest, CachePricing, StepWorth, step_worth, turns_ahead
from breakwater.core.log.message import Message
from breakwater.core.log.prompt_cache import MINIMUM_PREFIX, Misses, timestamp


@dataclass
class CacheGate:
    pricing: CachePricing | None       # None: the model's prices unknown, every step is taken
    misses: Misses = field(default_factory=Misses)
    _stamped: Message | None = None            # the last message with metadata: its time is the next request's
    _planned_at: float | None = None           # when the last request was sent
    _after_user: bool = False                  # a user message came since the last request
    _planned: tuple[int, int, bool, bool] | None = None   # turn, cached prefix, cold, after a user

    def feed(self, entry: Message) -> None:
        if entry.role == "user":
            self._after_user = True
        if entry.meta:
            self._stamped = entry

    def usage(self, turn: object, cached: object) -> None:
        """The provider's figures for request `turn`: what it read of the prefix the last plan cached."""
        planned = self._planned
        if planned is not None and planned[0] == turn:
            self.misses.observe(planned[1], cached if isinstance(cached, int) else None, planned[2], planned[3])

    def cold(self) -> bool:
        """Whether the request being planned comes longer after the last one than the cache keeps it."""
        at = self._request_time()
        return at is not None and self._planned_at is not None and at - self._planned_at > self.pricing.expires_after

    def weigh(self, kept: CachedRequest, step: CachedRequest, horizon: int, room: int, growth: float) -> StepWorth:
        """The step from `kept` (the request keeping the previous compaction) to `step`, over the requests
        ahead: until the request has grown by `room` at `growth` a request, at most `horizon`."""
        return step_worth(self.pricing, kept, step, turns_ahead(horizon, room, growth),
                          1.0 - self.misses.rate(self._after_user))

    def planned(self, turn: int, stable_prefix: int | None, weighed: bool) -> None:
        """A request was planned (`weighed`: its steps were weighed): what of it the cache holds next."""
        if weighed:
            cached = stable_prefix or 0
            self._planned = (turn, cached if cached >= MINIMUM_PREFIX else 0, self.cold(), self._after_user)
            self._planned_at = self._request_time()
        self._after_user = False

    def copy(self) -> "CacheGate":
        return replace(self, misses=self.misses.copy())

    def _request_time(self) -> float | None:
        stamped = self._stamped
        return timestamp(stamped.meta.get("ts")) if stamped is not None and stamped.meta else None
