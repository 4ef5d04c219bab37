"""The accounting model (SPEC §2, issue 23): what a request costs in the provider's tokens.

A request = *visible* tokens (the messages sent, by the model's tokenizer where one exists
offline, else the seed's heuristic) + *unseen overhead* (what the provider counts that the
transcript never shows: another agent's system prompt and tool schemas). Both are fitted from
the transcript's own pairs (what we count for a recorded request, what the provider billed):

    billed ≈ ratio × counted + offset

The offset is the unseen overhead; the ratio maps our count to the provider's tokenizer (the
heuristic, or o200k for a model with no offline tokenizer of its own: Claude). A least-squares
fit over every pair so far, with its standard errors; never a clamped running factor. With one
pair only the offset is known (ratio 1); a fit whose ratio is not positive (a toy transcript)
falls back to the offset alone.

"Without compaction" and "with" are both counted by one `Calibration`, so their difference is
the tokens a policy removed times the ratio: `saved = without − with`, never negative for a
policy that only removes text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(slots=True)
class Calibration:
    """billed ≈ ratio × counted + offset, fitted from (counted, billed) pairs as they arrive."""

    samples: int = 0
    ratio: float = 1.0
    offset: float = 0.0
    ratio_error: float = 0.0
    offset_error: float = 0.0
    last_api: int | None = None
    last_estimate: int | None = None
    # running sums of the pairs: the fit costs O(1) a pair
    _sx: float = 0.0
    _sy: float = 0.0
    _sxx: float = 0.0
    _sxy: float = 0.0
    _syy: float = 0.0

    def observe(self, api_prompt_tokens: int, estimate: int) -> None:
        if api_prompt_tokens <= 0 or estimate <= 0:
            return
        x, y = float(estimate), float(api_prompt_tokens)
        self.samples += 1
        self._sx += x
        self._sy += y
        self._sxx += x * x
        self._sxy += x * y
        self._syy += y * y
        self.last_api, self.last_estimate = api_prompt_tokens, estimate
        self._fit()

    def _fit(self) -> None:
        n = self.samples
        mx, my = self._sx / n, self._sy / n
        sxx = self._sxx - n * mx * mx
        sxy = self._sxy - n * mx * my
        syy = self._syy - n * my * my
        if n >= 3 and sxx > 1e-9 * max(1.0, self._sxx) and sxy > 0:
            a = sxy / sxx
            b = my - a * mx
            if b >= 0:
                s2 = max(0.0, syy - a * sxy) / (n - 2)
                self.ratio, self.offset = a, b
                self.ratio_error = math.sqrt(s2 / sxx)
                self.offset_error = math.sqrt(s2 * (1 / n + mx * mx / sxx))
                return
        d_mean = my - mx
        if d_mean < 0 or (n >= 3 and sxy > 0 and sxx > 0):
            # no overhead can be negative: the least-squares ratio with the overhead held at 0
            a = self._sxy / self._sxx
            s2 = max(0.0, self._syy - a * self._sxy) / max(1, n - 1)
            self.ratio, self.offset = a, 0.0
            self.ratio_error, self.offset_error = math.sqrt(s2 / self._sxx), 0.0
            return
        # the offset alone: the mean of billed − counted, its standard error from their spread
        d_var = max(0.0, (syy - 2 * sxy + sxx) / (n - 1)) if n > 1 else 0.0
        self.ratio, self.ratio_error = 1.0, 0.0
        self.offset, self.offset_error = d_mean, math.sqrt(d_var / n)

    @property
    def overhead(self) -> int:
        """The unseen overhead of a request, in the provider's tokens."""
        return round(self.offset)

    def apply(self, counted: int) -> int:
        """A whole request's provider tokens from its visible count."""
        return round(self.ratio * counted + self.offset) if self.samples else counted

    def scale(self, counted: int) -> int:
        """A part of a request (no overhead of its own) in the provider's tokens."""
        return round(self.ratio * counted) if self.samples else counted

    def describe(self, unit: str = "heuristic") -> str:
        """For the screen: 'unseen ≈14.8k ± 0.3k · 1.42 ± 0.01 × heuristic · 102 requests'."""
        if not self.samples:
            return "no recorded usage: visible tokens only"
        text = f"unseen ≈{_k(self.offset)} ± {_k(self.offset_error)}"
        if self.ratio != 1.0:
            text += f" · {self.ratio:.2f} ± {self.ratio_error:.2f} × {unit}"
        return text + f" · {self.samples} request{'' if self.samples == 1 else 's'}"

    def to_json(self) -> dict:
        return {"samples": self.samples, "overhead": self.overhead, "overhead_error": round(self.offset_error),
                "ratio": round(self.ratio, 4), "ratio_error": round(self.ratio_error, 4)}


def _k(tokens: float) -> str:
    return f"{tokens / 1000:.1f}k" if abs(tokens) >= 1000 else f"{tokens:.0f}"


def request_cost(prices, tokens: int, cached: int) -> float:
    """USD for one request's input at `prices` (core/log/models.py ModelInfo), cache-aware: the cached
    prefix at the cache-read price, the rest at the cache-write price where the provider prices
    writes (Anthropic: the new suffix is written for the next request), else at the input price."""
    cached = max(0, min(cached, tokens))
    read = prices.cache_read if prices.cache_read is not None else prices.input
    rest = prices.cache_write if prices.cache_write is not None else prices.input
    return (cached * read + (tokens - cached) * rest) / 1e6
