"""The retry policy as a pure function: which faults retry, and how long to wait."""

from __future__ import annotations

import email.utils

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tether.providers._retry import backoff, retry_delay, server_delay, should_retry

RETRIED = [408, 409, 429, 500, 502, 503, 504, 529]
NOT_RETRIED = [400, 401, 403, 404, 422]


@pytest.mark.parametrize("status", RETRIED)
def test_transient_statuses_are_retried(status: int) -> None:
    assert should_retry(status, {})


@pytest.mark.parametrize("status", NOT_RETRIED)
def test_other_client_errors_are_not_retried(status: int) -> None:
    assert not should_retry(status, {})
    assert retry_delay(status, {}, 0) is None


def test_lost_connections_are_retried() -> None:
    assert should_retry(None, {})


def test_x_should_retry_overrides_the_status() -> None:
    assert not should_retry(500, {"x-should-retry": "false"})
    assert should_retry(400, {"X-Should-Retry": "true"})


def test_a_spend_limit_429_is_not_retried() -> None:
    body = '{"type":"error","error":{"type":"rate_limit_error","message":"enforced_spend_limit_reached"}}'
    assert not should_retry(429, {}, body)
    assert should_retry(429, {}, '{"error":{"type":"rate_limit_error","message":"slow down"}}')


@given(st.integers(min_value=0, max_value=12), st.floats(min_value=0.0, max_value=0.25))
def test_backoff_lies_in_the_jitter_window(attempt: int, jitter: float) -> None:
    base = min(0.5 * 2**attempt, 8.0)
    assert 0.75 * base <= backoff(attempt, jitter) <= base


@given(st.integers(min_value=0, max_value=12))
def test_random_jitter_stays_in_the_window(attempt: int) -> None:
    base = min(0.5 * 2**attempt, 8.0)
    assert 0.75 * base <= backoff(attempt) <= base


def test_attempts_stop_at_max_retries() -> None:
    assert retry_delay(503, {}, 1, max_retries=2) is not None
    assert retry_delay(503, {}, 2, max_retries=2) is None
    assert retry_delay(503, {}, 0, max_retries=0) is None


def test_retry_after_ms_wins_over_retry_after() -> None:
    assert retry_delay(429, {"retry-after-ms": "500", "retry-after": "3"}, 0) == 0.5
    assert retry_delay(429, {"retry-after": "1"}, 0) == 1.0
    assert retry_delay(429, {"retry-after": "1.5"}, 0) == 1.5


def test_retry_after_as_an_http_date() -> None:
    date = email.utils.formatdate(1_000_030.0, usegmt=True)
    assert server_delay({"retry-after": date}, now=1_000_000.0) == pytest.approx(30.0)
    assert server_delay({"retry-after": date}, now=2_000_000.0) == 0.0


def test_a_server_delay_over_the_cap_fails_fast() -> None:
    assert retry_delay(429, {"retry-after": "3600"}, 0) is None
    assert retry_delay(429, {"retry-after": "30"}, 0, max_wait=10.0) is None
    assert retry_delay(429, {"retry-after": "30"}, 0, max_wait=60.0) == 30.0


def test_an_unreadable_server_delay_falls_back_to_backoff() -> None:
    assert retry_delay(503, {"retry-after": "soon"}, 0, jitter=0.0) == 0.5
    assert retry_delay(503, {"retry-after-ms": "x", "retry-after": "2"}, 0) == 2.0
