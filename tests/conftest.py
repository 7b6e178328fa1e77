"""Shared test setup: no real model requests, ever (loopback servers are fine)."""

from __future__ import annotations

import pytest

from tether.policy import set_model_requests_blocked


@pytest.fixture(autouse=True, scope="session")
def _block_model_requests() -> None:
    set_model_requests_blocked(True)
