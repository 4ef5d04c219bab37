"""The LLM summarizer of deep compaction (SPEC §5), with the extractive one as its fallback.

`Pipeline.plan()` calls `summarize` synchronously (the agent runs `plan()` in a worker
thread), so this uses the sync client. The request is the core's two-phase prompt
(`summary_request`) on a small model, temperature ≤ 0.2, a hard `max_tokens` cap; the answer
must pass `validate_summary`. A transcript too long for one request is summarized in
slices, each slice's summary becoming the next one's "earlier summary". Any rejection or
API error gives the extractive summary instead, and says why; a polluted summary never
enters the context.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import openai

from breakwater.agent.chat import TRANSIENT, backoff_delay, classify
from breakwater.core.log.message import Message
from breakwater.core.policy import Policy
from breakwater.core.stages.extractive import ExtractiveSummarizer
from breakwater.core.stages.summarize import (
    SummaryResult,
    summary_request,
    transcript,
    validate_summary,
)
from breakwater.core.log.tokens import heuristic_text

FALLBACK_NAME = "extractive-fallback"
MAX_TEMPERATURE = 0.2
MAX_CALLS = 8            # slices per summary; beyond this the transcript is not worth a model's time
MARGIN_TOKENS = 256      # the heuristic's error and the chat template's own tokens


@dataclass(frozen=True, slots=True)
class SummaryOutcome:
    """What one `summarize` call did, for the session log."""

    ok: bool                  # the LLM summary was used
    summarizer: str
    reason: str               # why it fell back ("" when ok)
    model: str
    calls: int
    seconds: float
    prompt_tokens: int = 0
    completion_tokens: int = 0


class SummaryRejected(Exception):
    pass


class LLMSummarizer:
    name = "llm"

    def __init__(self, client: openai.OpenAI, model: str, *, window: int, max_tokens: int = 2048,
                 temperature: float = 0.1, max_attempts: int = 2, retry_cap_s: float = 10.0,
                 redact: Callable[[str], str] = lambda s: s):
        self.client = client
        self.model = model
        self.window = window
        self.max_tokens = max_tokens
        self.temperature = min(MAX_TEMPERATURE, max(0.0, temperature))
        self.max_attempts = max(1, max_attempts)
        self.retry_cap_s = retry_cap_s
        self.redact = redact
        self.fallback = ExtractiveSummarizer()
        self._outcomes: list[SummaryOutcome] = []
        self._lock = threading.Lock()

    def take_outcomes(self) -> list[SummaryOutcome]:
        with self._lock:
            out, self._outcomes = self._outcomes, []
        return out

    def summarize(self, messages: Sequence[Message], previous: str | None, policy: Policy) -> SummaryResult:
        started = time.monotonic()
        usage = [0, 0, 0]   # calls, prompt, completion
        try:
            body = self._summarize_slices(list(messages), previous, policy, usage)
            result = SummaryResult(self.redact(body), True, f"llm:{self.model}")
            reason = ""
        except SummaryRejected as exc:
            reason = f"LLM summary rejected: {exc}"
        except openai.APIError as exc:
            reason = f"LLM summary request failed: {classify(exc).message}"
        if reason:
            fb = self.fallback.summarize(messages, previous, policy)
            result = SummaryResult(fb.text, fb.ok, FALLBACK_NAME, reason)
        with self._lock:
            self._outcomes.append(SummaryOutcome(not reason, result.summarizer, reason, self.model, usage[0],
                                                 round(time.monotonic() - started, 3), usage[1], usage[2]))
        return result

    def _summarize_slices(self, messages: list[Message], previous: str | None, policy: Policy,
                          usage: list[int]) -> str:
        """Consecutive runs of messages, each sent with the summary so far, as many as fit a request."""
        budget = self._budget(policy)
        if budget <= 0:
            raise SummaryRejected(f"a window of {self.window} tokens leaves no room for a summary request")
        costs = [heuristic_text(transcript([m], None, policy)) for m in messages]
        summary = previous
        i = calls = 0
        while i < len(messages):
            carried = heuristic_text(summary) if summary else 0
            start, used = i, 0
            while i < len(messages) and (i == start or carried + used + costs[i] <= budget):
                if carried + costs[i] > budget:
                    raise SummaryRejected("one message is too long for the summary model's window")
                used += costs[i]
                i += 1
            calls += 1
            if calls > MAX_CALLS:
                raise SummaryRejected(f"the transcript needs more than {MAX_CALLS} requests to fit the window")
            output = self._call(summary_request(messages[start:i], summary, policy), usage)
            checked = validate_summary(output, policy, self.name)
            if not checked.ok:
                raise SummaryRejected(checked.reason)
            summary = checked.text
        if summary is None:
            raise SummaryRejected("nothing to summarize")
        return summary

    @property
    def reply_tokens(self) -> int:
        """The reply cap: the configured one, but at most a quarter of a small window."""
        return min(self.max_tokens, max(256, self.window // 4))

    def _budget(self, policy: Policy) -> int:
        fixed = sum(heuristic_text(m["content"]) + 4 for m in summary_request([], None, policy))
        return self.window - self.reply_tokens - MARGIN_TOKENS - fixed

    def _call(self, request: list[dict], usage: list[int]) -> str:
        for attempt in range(1, self.max_attempts + 1):
            try:
                completion = self.client.chat.completions.create(
                    model=self.model, messages=[dict(m, content=self.redact(m["content"])) for m in request],
                    temperature=self.temperature, max_tokens=self.reply_tokens, stream=False)
            except openai.APIError as exc:
                failure = classify(exc)
                if failure.kind != TRANSIENT or attempt == self.max_attempts:
                    raise
                time.sleep(backoff_delay(attempt, 1.0, self.retry_cap_s, failure.retry_after))
                continue
            usage[0] += 1
            if completion.usage is not None:
                usage[1] += completion.usage.prompt_tokens or 0
                usage[2] += completion.usage.completion_tokens or 0
            if not completion.choices:
                return ""
            return completion.choices[0].message.content or ""
        return ""
