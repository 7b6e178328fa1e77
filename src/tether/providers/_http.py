"""What every hosted-model provider shares: one pooled client, retries, streams.

:class:`HTTPPolicy` is the base of :class:`~tether.providers.OpenAICompatible`
and :class:`~tether.providers.Anthropic`. A subclass says how to build a
request body and how to read a reply (whole, or as server-sent events); this
module sends it, reads it with a size cap, and applies the retry policy of
:mod:`tether.providers._retry`:

* a failed attempt (an HTTP error, a connection that failed or broke, a stream
  that stopped before the model finished, an error event inside a stream) is
  retried as a whole: a partial turn is thrown away, so tool calls from a broken
  stream never reach the loop;
* every attempt of one turn carries the same ``Idempotency-Key``;
* when retries run out, :class:`~tether.exceptions.ProviderError` is raised,
  which the agent loop turns into a ``failed`` event with a resumable state.

Text streamed by an attempt that later broke has already been yielded; the
retry streams its text again from the start. ``token`` events are a live view;
the committed ``model-replied`` message is the truth.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import uuid
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any, Protocol

import httpx

from ..context import Context
from ..exceptions import ProviderError, UserError
from ..messages import Message
from ..testing import check_model_request
from ..tools import Tool
from ._retry import retry_delay, should_retry
from ._sse import ServerSentEvent, SSEDecoder
from ._stream import final_message
from .options import HTTPOptions, Sleep

_EXCERPT = 500
_KEPT_BODY = 64 * 1024


class AttemptFailed(Exception):
    """One attempt failed; the retry policy decides whether another follows.

    ``retryable`` False forbids a retry whatever the status says; None leaves
    the decision to the policy.
    """

    def __init__(
        self,
        detail: str,
        *,
        status: int | None = None,
        headers: Mapping[str, str] | None = None,
        body: str = "",
        retryable: bool | None = None,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.status = status
        self.headers: Mapping[str, str] = headers if headers is not None else {}
        self.body = body
        self.retryable = retryable


class StreamReader(Protocol):
    """Assembles one streamed reply from its events."""

    complete: bool  # the model said it finished (a later break does not matter)

    def feed(self, event: ServerSentEvent) -> str | None:
        """Take one event; return a text piece to stream, if it holds one."""
        ...

    def finish(self) -> Message:
        """The complete reply (only called when ``complete``)."""
        ...


class HTTPPolicy:
    """A policy that asks a model over HTTP (base class; see the subclasses).

    A subclass names its endpoint (``path`` below ``default_base_url``, the
    ``key_env`` and ``label``) and its wire shape; the connection, retry and
    transport settings arrive as one :class:`~tether.providers.HTTPOptions`.
    The agent loop calls :meth:`stream` (text pieces, then one Message) or
    :meth:`decide` (just the Message). One ``httpx.AsyncClient`` per instance
    and event loop is kept and reused; close it with :meth:`aclose` or
    ``async with``.
    """

    label: str = "provider"
    key_env: str = ""  # where the key lives when neither api_key nor api_key_env is given
    default_base_url: str = ""
    needs_key: bool = True  # the default endpoint refuses requests without a key
    path: str = ""  # the endpoint, below base_url

    def __init__(
        self,
        model: str,
        options: HTTPOptions,
        *,
        tool_choice: str | dict[str, Any] | None = None,
        parallel_tool_calls: bool | None = None,
    ) -> None:
        self.model = model
        self.options = options
        self.base_url = (options.base_url or self.default_base_url).rstrip("/")
        self.url = self.base_url + self.path
        self.tool_choice = tool_choice_value(tool_choice)
        self.parallel_tool_calls = parallel_tool_calls
        self.streaming = options.stream
        self.max_retries = options.max_retries
        self.timeout = options.timeout
        self.max_retry_wait = options.max_retry_wait
        self.max_response_bytes = options.max_response_bytes
        self.extra_body = dict(options.extra_body or {})
        self.extra_headers = dict(options.extra_headers or {})
        self.api_key = self._find_key(options.api_key, options.api_key_env)
        self._sleep: Sleep = options.sleep if options.sleep is not None else asyncio.sleep
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self._closer: asyncio.Task[None] | None = None
        self._tools_cache: tuple[Sequence[Tool], list[dict[str, Any]]] | None = None

    def _find_key(self, api_key: str | None, api_key_env: str | None) -> str | None:
        if api_key is not None:
            return api_key
        key = os.environ.get(api_key_env or self.key_env) or None
        required = api_key_env or (self.needs_key and self.base_url == self.default_base_url.rstrip("/"))
        if key is None and required:
            raise UserError(f"{self.label} needs an API key: pass api_key=... or set {api_key_env or self.key_env}")
        return key

    # -- what a subclass provides -----------------------------------------

    def tool_definition(self, tool: Tool) -> dict[str, Any]:
        """How one tool is offered to the model."""
        raise NotImplementedError

    def headers(self) -> dict[str, str]:
        """Headers for every request (authentication, API version)."""
        raise NotImplementedError

    def body(self, context: Context, tools: Sequence[Tool]) -> bytes:
        """The request body, serialised deterministically."""
        raise NotImplementedError

    def parse(self, data: Any, text: str) -> Message:
        """The reply in a (non-streamed) JSON response; ``text`` is the raw body."""
        raise NotImplementedError

    def reader(self) -> StreamReader:
        raise NotImplementedError

    def tool_definitions(self, tools: Sequence[Tool]) -> list[dict[str, Any]]:
        """The tools as offered; the agent passes the same tuple every turn, so they are built once."""
        cached = self._tools_cache
        if cached is not None and cached[0] is tools:
            return cached[1]
        defs = [self.tool_definition(t) for t in tools]
        self._tools_cache = (tools, defs)
        return defs

    # -- the Policy interface ---------------------------------------------

    async def decide(self, context: Context, tools: Sequence[Tool]) -> Message:
        """The model's next message (streamed or not, per ``stream=``)."""
        return await final_message(self.stream(context, tools))

    async def stream(self, context: Context, tools: Sequence[Tool]) -> AsyncGenerator[str | Message, None]:
        """Text pieces as they arrive, then the complete Message (with usage)."""
        body = self.body(context, tools)
        headers = self.headers()
        headers["Idempotency-Key"] = "tether-" + uuid.uuid4().hex  # the same on every retry
        attempt = 0
        while True:
            check_model_request(self.url)
            try:
                if self.streaming:
                    async with contextlib.aclosing(self._streamed(body, headers)) as pieces:
                        async for piece in pieces:
                            yield piece
                    return
                yield await self._whole(body, headers)
                return
            except AttemptFailed as failure:
                delay = self._delay(failure, attempt)
                if delay is None:
                    raise self._error(failure, attempt + 1) from None
            attempt += 1
            await self._sleep(delay)

    async def aclose(self) -> None:
        """Close the connection pool this provider opened (a given http_client is left open)."""
        client, closer = self._client, self._closer
        self._client = self._client_loop = self._closer = None
        if closer is not None:
            closer.cancel()
        if client is not None:
            await client.aclose()

    async def __aenter__(self) -> HTTPPolicy:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model!r}, base_url={self.base_url!r})"

    # -- one attempt ---------------------------------------------------------

    def _http(self) -> httpx.AsyncClient:
        if self.options.http_client is not None:
            return self.options.http_client
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            # Pooled connections belong to one event loop; a new loop (another
            # asyncio.run) gets a new pool.
            self._client = httpx.AsyncClient(
                transport=self.options.transport,
                timeout=httpx.Timeout(self.timeout),
                limits=httpx.Limits(max_connections=1000, max_keepalive_connections=100),
            )
            self._client_loop = loop
            self._closer = loop.create_task(_close_when_the_loop_ends(self._client))
        return self._client

    async def _whole(self, body: bytes, headers: dict[str, str]) -> Message:
        try:
            async with self._http().stream("POST", self.url, content=body, headers=headers) as response:
                raw = await self._read(response)
        except httpx.RequestError as exc:
            raise _transport_failure(exc) from exc
        text = raw.decode("utf-8", "replace")
        if not response.is_success:
            raise AttemptFailed(
                _http_detail(response.status_code, text),
                status=response.status_code,
                headers=response.headers,
                body=text,
            )
        try:
            data = json.loads(raw)
        except ValueError:
            raise AttemptFailed(f"the reply is not JSON: {text[:_EXCERPT]!r}", body=text, retryable=False) from None
        return self.parse(data, text)

    async def _streamed(self, body: bytes, headers: dict[str, str]) -> AsyncGenerator[str | Message, None]:
        reader = self.reader()
        try:
            async with self._http().stream("POST", self.url, content=body, headers=headers) as response:
                if not response.is_success:
                    text = (await self._read(response)).decode("utf-8", "replace")
                    raise AttemptFailed(
                        _http_detail(response.status_code, text),
                        status=response.status_code,
                        headers=response.headers,
                        body=text,
                    )
                decoder, size = SSEDecoder(), 0
                async for chunk in response.aiter_bytes():
                    size += len(chunk)
                    if size > self.max_response_bytes:
                        raise AttemptFailed(
                            f"the reply stream exceeded {self.max_response_bytes} bytes", retryable=False
                        )
                    for event in decoder.feed(chunk):
                        if (piece := reader.feed(event)) is not None:
                            yield piece
                for event in decoder.close():
                    reader.feed(event)
        except httpx.RequestError as exc:
            if not reader.complete:  # once the model has finished, a late break costs nothing
                raise _transport_failure(exc) from exc
        if not reader.complete:
            raise AttemptFailed("the reply stream ended before the model finished")
        yield reader.finish()

    async def _read(self, response: httpx.Response) -> bytes:
        """The whole body, refusing to hold more than ``max_response_bytes``."""
        cap = self.max_response_bytes
        declared = response.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > cap:
            raise AttemptFailed(f"the reply is {declared} bytes, over the {cap}-byte cap", retryable=False)
        parts: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > cap:
                raise AttemptFailed(f"the reply exceeded the {cap}-byte cap", retryable=False)
            parts.append(chunk)
        return b"".join(parts)

    # -- giving up ---------------------------------------------------------

    def _delay(self, failure: AttemptFailed, attempt: int) -> float | None:
        if failure.retryable is False:
            return None
        status = None if failure.retryable else failure.status  # explicit True: retry like a lost connection
        return retry_delay(
            status,
            failure.headers,
            attempt,
            max_retries=self.max_retries,
            max_wait=self.max_retry_wait,
            body=failure.body,
        )

    def _error(self, failure: AttemptFailed, attempts: int) -> ProviderError:
        tries = f"after {attempts} attempts" if attempts > 1 else "(not retried)"
        retryable = failure.retryable
        if retryable is None:
            retryable = should_retry(failure.status, failure.headers, failure.body)
        return ProviderError(
            f"{self.label} model {self.model!r} at {self.url!r} failed {tries}: {failure.detail}",
            status_code=failure.status,
            body=failure.body[:_KEPT_BODY] or None,
            retryable=retryable,
        )


async def _close_when_the_loop_ends(client: httpx.AsyncClient) -> None:
    """Sleep until cancelled, then close ``client``.

    ``asyncio.run`` (and so ``Agent.run_sync``) cancels the tasks left when it
    ends: this closes the pool while its loop still runs, instead of leaving
    sockets to be reclaimed (with ResourceWarnings) after the loop is gone.
    """
    try:
        await asyncio.Event().wait()
    finally:
        await client.aclose()


def _transport_failure(exc: httpx.RequestError) -> AttemptFailed | UserError:
    if isinstance(exc, httpx.UnsupportedProtocol):
        return UserError(f"cannot send a request to {str(exc.request.url)!r}: {exc}")
    return AttemptFailed(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)


def _http_detail(status: int, text: str) -> str:
    return f"HTTP {status}: {error_message(text)[:_EXCERPT]}"


def error_message(text: str) -> str:
    """The human-readable message in a provider's error body, else the body itself."""
    try:
        data = json.loads(text)
    except ValueError:
        return text.strip()
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            kind = err.get("type") or err.get("code")
            return f"{kind}: {err['message']}" if isinstance(kind, str) and kind else err["message"]
        if isinstance(err, str):
            return err
    return text.strip()


def dumps(payload: Any) -> bytes:
    """Compact, deterministic JSON bytes (insertion order is the key order)."""
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "replace")


def excerpt(text: str) -> str:
    return text[:_EXCERPT]


def tool_choice_value(choice: str | dict[str, Any] | None) -> str | dict[str, Any] | None:
    """Shared validation: ``tool_choice`` is "auto", "none", "required", a tool name or a dict."""
    if choice is None or isinstance(choice, dict | str):
        return choice
    raise UserError(f"tool_choice must be a string or a dict, got {type(choice).__name__}")


__all__ = ["AttemptFailed", "HTTPPolicy", "StreamReader"]
