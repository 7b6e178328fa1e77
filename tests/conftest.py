"""Shared test setup: no real model requests, ever (loopback servers are fine)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tether.testing import block_model_requests


@pytest.fixture(autouse=True, scope="session")
def _block_model_requests() -> Iterator[None]:
    with block_model_requests():
        yield
