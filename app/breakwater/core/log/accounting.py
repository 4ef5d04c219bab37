"""The accounting model (SPEC §2, issues 23 and 36): what a request costs in the provider's tokens.

A request = *visible* tokens (the messages sent, by the model's tokenizer where one exists
offline, else the seed's heuristic) + *unseen overhead* (what the provider counts that the
transcript never shows: another agent's system prompt and tool schemas). Both are fitted from
the transcript's own pairs (what we count for a recorded request, what the provider billed):

    billed ≈ ratio × counted + overhead

`counted` is the heuristic of the request the agent sent (core/fold/own_request.py): one unit on
both sides of every pair, whichever counter a run uses. A request the tokenizer counted is brought
into that unit by the heuristic tokens per tokenizer token of the requests counted both ways
(`exact`), so one request gets one prediction whichever path counted it (issue 36).

The fit is bounded and has a prior (issue 36): a least-squares line with the ratio pulled toward the
model family's usual ratio to the heuristic (`prior_ratio`) as strongly as a quarter of a request
of the transcript's size would pull it, so that three requests cannot make it 21.8, and bounded to
`RATIO_BOUNDS`. The overhead is never negative, and it is fitted again from the pairs after a
recorded compaction (`restart`): the ratio is learnt from every segment of the history, each with
an overhead of its own. Never a clamped running factor. Every pair weighs alike: weighing recent
ones more (a half-life of 7 requests) halved the one-request-ahead error of the agent's own
history (Claude Code 1.25% -> 0.55% median) but made the line a local one, 11% high on a request
of a quarter of the history's size (pi), which is what a compacted request is.

What the line missed in the last recorded request (its bill − the line, `residual`) is carried instead
(round 5): a history only grows between two requests, so what that bill held that the line does not draw
(Claude Code's reminders sent with user and tool messages and never written to its transcript, content
denser than the history's mean) is still in the next request. It is added whole to a request that holds
all of the last one (the agent's next request, the history without compaction) and by its share to a
smaller one (a compacted request of a quarter of the size carries a quarter), bounded to a quarter of the
line, and dropped where the history restarts. The line stays the global one. One-request-ahead error of
the agents' own histories: Claude Code 1.25% -> 0.23% median, pi 0.66% -> 0.03%, mini-swe-agent 1.43% ->
0.15%; proxied real agents from their second request 1.6-3.5% -> 0.4-0.9%.

Some of what a provider bills no message shows in a form we can count, though the transcript
records how much it is: Codex resends its encrypted reasoning items with every request until the
next user message, billed as input (their reasoning tokens, from the usage of the reply that made
them). That is added to every whole request as it stands (`resent`), and taken out of the billed
side of each pair before the fit.

A log that shows the whole request (Breakwater's proxy: the system prompt is a message, the tool
schemas are in its request notes) has nothing unseen (`whole`): the tool schemas in force are counted
as part of every request (`frame`, in the fit's unit: `apply_exact` says why), the overhead is held at 0 and only the ratio is fitted, bounded, through the origin. With the
overhead gone a single pair fixes the ratio (it is billed / counted), so the prior, there to keep
three near points from trading ratio for overhead, is not used; fitting an overhead beside it gave
`0.01 × heuristic + 28.2k` once the proxy compacted: its requests stayed flat while the bill was
mostly Claude Code's tool schemas, which the fit then took for unseen.

"Without compaction" and "with" are both counted by one `Calibration`, so their difference is
the tokens a policy removed times the ratio: `saved = without − with`, never negative for a
policy that only removes text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

RATIO_BOUNDS = (0.6, 2.5)   # provider tokens per heuristic token: no tokenizer of a real model is outside
CARRY_BOUND = 0.25          # the last residual carried is at most this share of the line at its request
PRIOR_WEIGHT = 0.25         # the prior ratio weighs as a quarter of a request of the transcript's mean size


def prior_ratio(model: str | None) -> float:
    """Provider tokens per heuristic token of a model family, before any usage is seen: Claude's
    tokenizer gives ~1.35 the heuristic's count of code and prose (1.39-1.42 fitted on the Claude
    Code and pi fixtures), OpenAI's o200k about the heuristic's; another family (DeepSeek: 1.20 on the
    mini-swe-agent fixture) between."""
    name = (model or "").lower()
    if "claude" in name or "anthropic" in name:
        return 1.35
    return 1.0 if any(f in name for f in ("gpt", "o1", "o3", "o4", "codex", "openai")) else 1.2


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
    prior: float = 1.0   # the family's ratio (`prior_ratio`)
    restarts: int = 0    # recorded compactions the overhead was fitted again after
    # running sums, so that a pair costs O(1): every pair's (for the prior's weight), the current
    # segment's (since the last restart), and the closed segments' centred ones (for the ratio)
    _tx: float = 0.0
    _txx: float = 0.0
    _n: int = 0
    _sx: float = 0.0
    _sy: float = 0.0
    _sxx: float = 0.0
    _sxy: float = 0.0
    _syy: float = 0.0
    _cxx: float = 0.0
    _cxy: float = 0.0
    _cyy: float = 0.0
    # heuristic and tokenizer tokens of the requests a plan counted both ways (`exact`)
    _eh: int = 0
    _ex: int = 0
    _pending: tuple[int, int] = (0, 0)   # the request being planned, counted both ways: in once it is sent
    _k: float = 0.0   # their quotient, as it stood when the request being planned began (`freeze`); 0: none yet
    resent: int = 0   # tokens the next request resends that no message shows (Codex's reasoning)
    _resent: int = 0  # as they stood when the request being planned began
    whole: bool = False   # the log shows the whole request (a proxied one): no unseen overhead
    frame: int = 0        # heuristic tokens of the tool schemas in force (`whole` only): part of every request
    _frame: int = 0       # as they stood when the request being planned began
    # what the line missed in the last recorded request (billed − line, provider tokens) and that request's
    # count (`carry`); the same as they stood when the request being planned began
    residual: float = 0.0
    residual_at: float = 0.0
    _residual: float = 0.0
    _residual_at: float = 0.0

    def observe(self, api_prompt_tokens: int, estimate: int) -> None:
        api_prompt_tokens -= self._resent   # the request this usage is for resent them: not the line's
        if api_prompt_tokens <= 0 or estimate <= 0:
            return
        if self.whole:   # this usage's request carried the tool schemas in force (its note came before it)
            estimate += self.frame
        x, y = float(estimate), float(api_prompt_tokens)
        self.samples += 1
        self._tx += x
        self._txx += x * x
        self._n += 1
        self._sx += x
        self._sy += y
        self._sxx += x * x
        self._sxy += x * y
        self._syy += y * y
        self.last_api, self.last_estimate = api_prompt_tokens, estimate
        self._fit()
        line = self.ratio * x + self.offset
        self.residual = max(-CARRY_BOUND * line, min(CARRY_BOUND * line, y - line))
        self.residual_at = x

    def restart(self) -> None:
        """The history restarted (a recorded compaction): the overhead is fitted again from the pairs
        that follow; until one arrives, the last one stands. A whole request has no overhead to fit again."""
        if not self._n or self.whole:
            return
        mx, my = self._sx / self._n, self._sy / self._n
        self._cxx += self._sxx - self._n * mx * mx
        self._cxy += self._sxy - self._n * mx * my
        self._cyy += self._syy - self._n * my * my
        self._n = 0
        self._sx = self._sy = self._sxx = self._sxy = self._syy = 0.0
        self.restarts += 1
        self.residual = self.residual_at = 0.0   # it was in the history the summary replaced

    def _fit(self) -> None:
        if self.whole:
            self._fit_ratio()
            return
        n, a0 = self._n, self.prior
        mx, my = self._sx / n, self._sy / n
        sxx = self._cxx + self._sxx - n * mx * mx
        sxy = self._cxy + self._sxy - n * mx * my
        syy = self._cyy + self._syy - n * my * my
        mean = self._tx / self.samples
        lam = PRIOR_WEIGHT * mean * mean   # the prior, as strong as one request of the mean size
        a = _bounded((sxy + lam * a0) / (sxx + lam))
        b = my - a * mx
        if b < 0:   # no overhead is negative: the ratio with the overhead held at 0, still with the prior
            a, b = _bounded((self._sxy + lam * a0) / (self._sxx + lam)), 0.0
        dof = self.samples - 1 - self.restarts
        s2 = max(0.0, syy - 2 * a * sxy + a * a * sxx) / dof if dof > 0 else 0.0
        self.ratio, self.offset = a, b
        self.ratio_error = math.sqrt(s2 / (sxx + lam))
        self.offset_error = math.sqrt(s2 * (1 / n + mx * mx / (sxx + lam))) if b else 0.0

    def _fit_ratio(self) -> None:
        """The whole request counted: billed ≈ ratio × counted, least squares through the origin, bounded
        (`restart` keeps every pair in one segment here)."""
        a = _bounded(self._sxy / self._sxx)
        dof = self.samples - 1
        s2 = max(0.0, self._syy - 2 * a * self._sxy + a * a * self._sxx) / dof if dof > 0 else 0.0
        self.ratio, self.offset = a, 0.0
        self.ratio_error, self.offset_error = math.sqrt(s2 / self._sxx), 0.0

    def exact(self, tokenizer: int, heuristic: int) -> None:
        """The request being planned, counted both ways (core/fold/meter.py): what converts the tokenizer's
        counts from the next request on (`sent`)."""
        self._pending = (tokenizer, heuristic)

    def sent(self) -> None:
        """The request planned was sent (its reply arrived): its counts convert the next ones. Not before,
        so that planning one request again (a snapshot's general path, the replay's) converts alike."""
        x, h = self._pending
        self._ex += x
        self._eh += h
        self._pending = (0, 0)

    def freeze(self) -> None:
        """A request is being planned: its tokenizer counts convert by what was known before it, so that
        every count of one plan (and the view built from it) converts alike."""
        self._k = self._eh / self._ex if self._ex and self._eh else 0.0
        self._resent = self.resent
        self._frame = self.frame
        self._residual, self._residual_at = self.residual, self.residual_at

    @property
    def overhead(self) -> int:
        """The unseen overhead of a request, in the provider's tokens."""
        return round(self.offset)

    @property
    def tool_schemas(self) -> int:
        """Heuristic tokens of the tool schemas a whole request carries (0: none, or not a whole request)."""
        return self._frame

    @property
    def leading(self) -> int:
        """What leads every request and no message holds, in the provider's tokens: the unseen overhead,
        or the tool schemas of a whole request (both cached with the prefix)."""
        return self.overhead + self.scale(self._frame)

    def apply(self, counted: int) -> int:
        """A whole request's provider tokens from its visible count (heuristic)."""
        counted += self._frame
        if not self.samples:
            return counted + self._resent
        return round(self.ratio * counted + self.offset + self._carry(counted)) + self._resent

    def apply_exact(self, tokenizer: int, heuristic: int | None = None) -> int:
        """A whole request's provider tokens from its tokenizer count: the same line as `apply`, the
        count brought into the heuristic's unit first, by the quotient of the requests counted both ways
        before it. Where none was yet, by the request's own: it is then its `heuristic` count, on the line
        as the heuristic path draws it. A factor of 1 put the first request the tokenizer counted off the
        line by the two counts' quotient (npm-install-flood, turn 6: 17,086 for a bill of 14,276; the
        line 14,198). Without `heuristic` (a bound on the tokenizer's count: `Meter`'s band and
        past-the-window tests) the count is taken as it is, which stays a bound.
        With no usage recorded there is no line: the tokenizer's count is what the verdicts (the zone,
        `fits`) go by, and the figure reported is the heuristic's (`figure`).
        A whole request's tool schemas are added in that unit as the fit saw them: brought in by the quotient
        of the messages, o200k's count of them was 5-15% off (JSON schemas and prose split differently), and
        their own quotient gives back the heuristic's count."""
        if not self.samples:
            return tokenizer + self._frame + self._resent
        if self._k:
            counted = tokenizer * self._k
        else:
            counted = tokenizer if heuristic is None else heuristic
        counted += self._frame
        return round(self.ratio * counted + self.offset + self._carry(counted)) + self._resent

    def figure(self, counted: int, heuristic: int) -> int:
        """The provider tokens reported for a request the meter counted as `counted` (its verdicts' unit)
        whose heuristic count is `heuristic`: `counted`, except with no usage recorded, where the
        tokenizer's count (which the meter takes near the limits, so as the window decides) and the
        heuristic's are two units and the heuristic's is the one every request has. One request had two
        figures by the path that counted it (OpenHands: 2,142 by o200k, 2,563 by the heuristic), and
        "without compaction" moved with the window (issue 36)."""
        return counted if self.samples else self.apply(heuristic)

    def _carry(self, counted: float) -> float:
        """What the line missed in the last recorded request, carried to a request of `counted` tokens: whole
        for one that holds all of it (the agent's next request, the history without compaction), else its
        share. A history only grows between recorded requests, so what a bill held that the line does not
        draw (Claude Code's reminders injected with user and tool messages and never written to the
        transcript, content denser than the mean) is still in the next request; the line alone left it
        out, a drift of up to 4.7% over tens of requests (issue 36)."""
        if not self._residual_at:
            return 0.0
        return self._residual * min(1.0, counted / self._residual_at)

    def scale(self, counted: int) -> int:
        """A part of a request (no overhead of its own) in the provider's tokens."""
        return round(self.ratio * counted) if self.samples else counted

    def describe(self, unit: str = "heuristic") -> str:
        """For the screen: 'unseen ≈14.8k ± 0.3k · 1.42 ± 0.01 × heuristic · last miss +310 carried · 102 requests'."""
        if self.whole:
            text = "whole request counted, nothing unseen"
            if self._frame:
                text += f" (tool schemas ≈{_k(self.scale(self._frame))})"
            if not self.samples:
                return text + ": no recorded usage yet"
            return text + f" · {self.ratio:.2f} ± {self.ratio_error:.2f} × {unit}{self._carried()} · {self.samples} " \
                f"request{'' if self.samples == 1 else 's'}"
        if not self.samples:
            # "before this request": the gauge beside it may show the usage recorded for this one (37.10)
            return "no usage recorded before this request: visible tokens only"
        text = f"unseen ≈{_k(self.offset)} ± {_k(self.offset_error)}"
        if self.ratio != 1.0:
            text += f" · {self.ratio:.2f} ± {self.ratio_error:.2f} × {unit}"
        return text + f"{self._carried()} · {self.samples} request{'' if self.samples == 1 else 's'}"

    def _carried(self) -> str:
        """' · last miss +1.2k carried': what the line missed in the last recorded request, added to this one."""
        miss = round(self._residual)
        return f" · last miss {'+' if miss > 0 else '−'}{_k(abs(miss))} carried" if miss else ""

    def to_json(self) -> dict:
        return {"samples": self.samples, "overhead": self.overhead, "overhead_error": round(self.offset_error),
                "ratio": round(self.ratio, 4), "ratio_error": round(self.ratio_error, 4),
                "prior_ratio": self.prior, "restarts": self.restarts, "carried": round(self.residual),
                **({"whole_request": True, "tool_schemas": self.scale(self._frame)} if self.whole else {})}


def _bounded(ratio: float) -> float:
    return min(RATIO_BOUNDS[1], max(RATIO_BOUNDS[0], ratio))


def _k(tokens: float) -> str:
    return f"{tokens / 1000:.1f}k" if abs(tokens) >= 1000 else f"{tokens:.0f}"
