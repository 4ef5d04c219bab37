"""Test support: a scripted OpenAI-compatible server and the request checks it applies."""

from .fake_openai import FakeOpenAIServer, RecordedRequest, Reply, ScriptedToolCall, chars_over_four
from .request_checks import check_request, heuristic_tokens

__all__ = [
    "FakeOpenAIServer", "RecordedRequest", "Reply", "ScriptedToolCall", "chars_over_four",
    "check_request", "heuristic_tokens",
]
