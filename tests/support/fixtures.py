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


@pytest.fixture(params=["openat2", "walk"])
def resolver(request) -> Iterator[str]:
    """Each way the file tools resolve a path beneath the workspace: openat2, and the
    O_NOFOLLOW walk used where openat2 is missing."""
    from breakwater.core.log import beneath

    if request.param == "walk":
        beneath.force_walk(True)
    elif beneath.resolver() != "openat2":
        pytest.skip("openat2 is not available here")
    yield request.param
    beneath.force_walk(False)
