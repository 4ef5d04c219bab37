"""Pytest fixtures over the fake server. Use them from a conftest or a test module:

    from support.fixtures import fake_openai  # noqa: F401
"""

from __future__ import annotations

from typing import Iterator

import pytest

from .fake_openai import FakeOpenAIServer


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAIServer]:
    """A running, empty-scripted server; queue replies with `fake_openai.queue(...)`."""
    with FakeOpenAIServer() as server:
        yield server
