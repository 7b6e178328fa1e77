"""How a hosted-model provider reaches its server: the options every HTTP provider shares.

:class:`HTTPOptions` is one frozen value for where to connect (``base_url``),
how to authenticate (``api_key`` / ``api_key_env``), whether to stream, how
long to wait and how often to retry, what extra fields and headers to send,
and which ``httpx`` client or transport to use. Both
:class:`~tether.providers.OpenAICompatible` and
:class:`~tether.providers.Anthropic` take it as ``options=``; each also accepts
the same names as keyword arguments, which override the value's fields::

    fast = HTTPOptions(max_retries=0, timeout=10.0)
    OpenAICompatible("llama3.2", base_url="http://127.0.0.1:11434/v1", options=fast)

>>> HTTPOptions(max_retries=0).but(timeout=5.0)
HTTPOptions(base_url=None, stream=True, max_retries=0, timeout=5.0)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..exceptions import UserError
from ._retry import MAX_WAIT

if TYPE_CHECKING:
    import httpx

__all__ = ["MAX_RESPONSE_BYTES", "HTTPOptions", "Sleep"]

MAX_RESPONSE_BYTES = 32 * 1024 * 1024
Sleep = Callable[[float], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class HTTPOptions:
    """Connection, retry and transport settings shared by the HTTP providers.

    ``base_url`` None means the provider's (or preset's) own endpoint. The key
    is ``api_key`` if given, else the environment variable ``api_key_env``
    (default: the provider's). ``extra_body`` adds JSON fields to every request
    (it may not set ``messages``), ``extra_headers`` adds headers. Give either
    ``http_client`` (left open by tether) or ``transport``, not both. ``sleep``
    replaces ``asyncio.sleep`` between retries (tests).

    >>> HTTPOptions(base_url="ftp://x")
    Traceback (most recent call last):
    ...
    tether.exceptions.UserError: base_url must be an http(s) URL, got 'ftp://x'
    """

    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    api_key_env: str | None = field(default=None, repr=False)
    stream: bool = True
    max_retries: int = 2
    timeout: float = 60.0
    max_retry_wait: float = field(default=MAX_WAIT, repr=False)
    max_response_bytes: int = field(default=MAX_RESPONSE_BYTES, repr=False)
    extra_body: Mapping[str, Any] | None = field(default=None, repr=False)
    extra_headers: Mapping[str, str] | None = field(default=None, repr=False)
    http_client: httpx.AsyncClient | None = field(default=None, repr=False)
    transport: httpx.AsyncBaseTransport | None = field(default=None, repr=False)
    sleep: Sleep | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise UserError(f"max_retries must be >= 0, got {self.max_retries!r}")
        if self.base_url is not None and urlsplit(self.base_url).scheme not in ("http", "https"):
            raise UserError(f"base_url must be an http(s) URL, got {self.base_url!r}")
        if self.http_client is not None and self.transport is not None:
            raise UserError("give either http_client or transport, not both")
        if self.extra_body is not None and "messages" in self.extra_body:
            raise UserError("extra_body must not set 'messages'; the context provides them")

    def but(self, **changes: Any) -> HTTPOptions:
        """A copy with some fields changed (unknown names are a UserError).

        >>> HTTPOptions().but(retries=1)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        tether.exceptions.UserError: unknown provider option(s) ['retries']; HTTPOptions has ...
        """
        unknown = sorted(set(changes) - _NAMES)
        if unknown:
            raise UserError(f"unknown provider option(s) {unknown}; HTTPOptions has {sorted(_NAMES)}")
        return dataclasses.replace(self, **changes) if changes else self


_NAMES = frozenset(f.name for f in dataclasses.fields(HTTPOptions))


def merged(options: HTTPOptions | None, changes: Mapping[str, Any]) -> HTTPOptions:
    """``options`` (default: all defaults) with the keyword arguments a constructor received."""
    return (options if options is not None else _DEFAULT).but(**changes)


_DEFAULT = HTTPOptions()
