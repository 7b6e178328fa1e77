"""Fixtures for provider tests: a fake provider server and providers pointed at it.

``flavor`` parametrises a test over both wire shapes, streamed and not;
``make`` builds providers against the ``server`` and closes them afterwards;
``sleeps`` replaces the retry sleep, recording the delays it was asked for, so
fault tests never wait.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from tether.providers import Anthropic, OpenAICompatible
from tether.providers._http import HTTPPolicy

from .fakeserver import FakeServer

FLAVORS = [("openai", True), ("openai", False), ("anthropic", True), ("anthropic", False)]


class Sleeps(list[float]):
    """An injectable ``sleep`` that records delays instead of waiting."""

    async def __call__(self, delay: float) -> None:
        self.append(delay)


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as fake:
        yield fake


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


Make = Callable[..., HTTPPolicy]


@pytest.fixture
async def make(server: FakeServer, sleeps: Sleeps) -> AsyncIterator[Make]:
    made: list[HTTPPolicy] = []

    def build(shape: str = "openai", **options: Any) -> HTTPPolicy:
        options.setdefault("sleep", sleeps)
        options.setdefault("api_key", "test-key")
        if shape == "openai":
            provider: HTTPPolicy = OpenAICompatible(
                "fake-model", base_url=options.pop("base_url", server.openai_url), **options
            )
        else:
            provider = Anthropic("fake-model", base_url=options.pop("base_url", server.anthropic_url), **options)
        made.append(provider)
        return provider

    yield build
    for provider in made:
        await provider.aclose()


@pytest.fixture(params=FLAVORS, ids=[f"{s}-{'stream' if st else 'json'}" for s, st in FLAVORS])
def flavor(request: pytest.FixtureRequest) -> tuple[str, bool]:
    return request.param
