"""When to retry a failed model request, and how long to wait first.

The policy mirrors the official OpenAI and Anthropic SDKs, so tether behaves
the way provider documentation says clients should:

* retry HTTP 408, 409, 429 and every 5xx (529 "overloaded" included) and
  connection failures (``status=None``); never other 4xx;
* ``x-should-retry: true`` / ``false`` from the server overrides that;
* a 429 that says the account is out of money or over its spend limit is not
  retried: waiting will not help;
* wait ``0.5 s * 2**n`` (capped at 8 s) minus up to 25 % jitter, unless the
  server says how long (``retry-after-ms``, then ``retry-after`` in seconds or
  as an HTTP date) and that is at most ``max_wait``; a server that asks for
  more than ``max_wait`` gets no retry at all (fail fast, never sleep an hour).

Everything here is a pure function of its inputs, so the whole policy is tested
without sleeping.

>>> retry_delay(503, {}, attempt=0, jitter=0.0)
0.5
>>> retry_delay(429, {"retry-after-ms": "1500"}, attempt=1)
1.5
>>> retry_delay(400, {}, attempt=0) is None
True
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Mapping

__all__ = ["backoff", "retry_delay", "server_delay", "should_retry"]

INITIAL_DELAY = 0.5
MAX_DELAY = 8.0
MAX_WAIT = 60.0
# 429 bodies that mean "no amount of waiting helps" (Anthropic, OpenAI).
_HOPELESS = ("enforced_spend_limit_reached", "insufficient_quota", "billing_hard_limit_reached")


def should_retry(status: int | None, headers: Mapping[str, str], body: str = "") -> bool:
    """Whether a request that ended this way may succeed if sent again."""
    verdict = (_header(headers, "x-should-retry") or "").lower()
    if verdict == "true":
        return True
    if verdict == "false":
        return False
    if status is None:  # no response at all: connection failed, timed out or broke
        return True
    if status == 429 and any(word in body for word in _HOPELESS):
        return False
    return status in (408, 409, 429) or status >= 500


def server_delay(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds the server asked us to wait (``retry-after-ms``, then ``retry-after``)."""
    millis = _header(headers, "retry-after-ms")
    if millis is not None:
        try:
            return max(float(millis) / 1000.0, 0.0)
        except ValueError:
            pass
    value = _header(headers, "retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return None
    return max(when - (time.time() if now is None else now), 0.0)


def backoff(attempt: int, jitter: float | None = None) -> float:
    """``0.5 * 2**attempt`` seconds capped at 8, shortened by ``jitter`` (0..0.25) of itself."""
    if jitter is None:
        jitter = random.uniform(0.0, 0.25)
    return min(INITIAL_DELAY * 2.0**attempt, MAX_DELAY) * (1.0 - jitter)


def retry_delay(
    status: int | None,
    headers: Mapping[str, str],
    attempt: int,
    *,
    max_retries: int = 2,
    max_wait: float = MAX_WAIT,
    body: str = "",
    jitter: float | None = None,
) -> float | None:
    """Seconds to wait before retry number ``attempt + 1``, or None to give up now.

    ``attempt`` counts the retries already made (0 after the first failure).
    """
    if attempt >= max_retries or not should_retry(status, headers, body):
        return None
    asked = server_delay(headers)
    if asked is not None:
        return asked if asked <= max_wait else None
    return backoff(attempt, jitter)


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is None and not hasattr(headers, "multi_items"):  # plain dicts may use any case
        for key, v in headers.items():
            if key.lower() == name:
                return v.strip()
        return None
    return None if value is None else value.strip()
