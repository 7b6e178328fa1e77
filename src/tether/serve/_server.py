"""The server: served agents, the store, secrets, workers and the ASGI app, put together.

:class:`Server` is configured once (agents, store, where it listens) and then
gives an ASGI app (:attr:`Server.app`) whose lifespan starts the workers and
the change watcher, and stops them (each run in flight ends resumable and is
resumed on the next start). To mount it inside your own Starlette or FastAPI
app, run :meth:`Server.running` in your app's lifespan.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..agent import Agent
from ..dispatch import DepsFactory, Dispatcher, refuse_missing
from ..exceptions import UserError
from ..store import RunStore
from . import _pages as pages
from ._api import OPERATIONS, reply
from ._hub import Hub
from ._judge import People
from ._login import audit_lines, audit_page, login, login_form, logout
from ._notify import Notifier
from ._openapi import document
from ._rules import Rules, load_rules
from ._secrets import NOTIFY_ENV, TOKEN_ENV, home_of, is_loopback, secret_file, server_key, server_token
from ._security import Guard, Throttle, Who, route_path, with_headers
from ._service import Service
from ._views import Views
from ._workers import ServedStore, Workers

__all__ = ["Server"]

log = logging.getLogger("tether.serve")
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


class Server:
    """``tether serve`` as an object: see the module docstring and ``docs/serve.md``.

    >>> from tether.testing import ScriptedModel
    >>> server = Server([Agent(ScriptedModel(["hi"]), name="greeter")], store="memory://")
    >>> sorted(server.agents), server.hosts
    (['greeter'], ('127.0.0.1', 'localhost', '[::1]'))
    """

    def __init__(
        self,
        agents: Agent | Sequence[Agent] | Mapping[str, Agent],
        *,
        store: RunStore | str | None = None,
        host: str = "127.0.0.1",
        allowed_hosts: Sequence[str] = (),
        workers: int = 4,
        notify: str | None = None,
        public_url: str | None = None,
        max_auth_failures: int = 10,
        sweep_every: float = 5.0,
        env: Mapping[str, str] | None = None,
        dispatcher: Dispatcher | None = None,
        rules: str | Path | None = None,
        deps: DepsFactory | None = None,
        asker: str = "the customer",
    ) -> None:
        env = os.environ if env is None else env
        if workers == 0 and dispatcher is None:
            raise UserError("workers=0 needs a dispatcher: the engine that hands runs to tether worker processes")
        if deps is not None and not callable(deps):
            raise UserError(f"deps must be a callable make_deps(run_id, agent, inputs), got {deps!r}")
        given = _by_name(agents)
        refuse_missing(given, deps)  # an agent that needs deps is refused now, not run by run
        self.store_url, inner, self._owns_store = _store(store, given)
        self.home = home_of(self.store_url)
        self.key = _key(given, self.store_url, env)
        token = server_token(self.home, env, create=is_loopback(host))
        if token is None:
            raise UserError(
                f"serving on {host!r} (not loopback) needs a token made beforehand: set {TOKEN_ENV}, or start "
                f"the server once on 127.0.0.1 to make {self.home / 'serve.token'}"
            )
        self.token = token
        self.token_hint = TOKEN_ENV if env.get(TOKEN_ENV) else str(self.home / "serve.token")
        self.host = host
        self.asker = asker  # who the inbox says wrote a run's task ("the customer", "the caller", ...)
        self.hosts = _hosts(host, allowed_hosts)
        self.hub = Hub()
        self.store = ServedStore(inner, self._appended)
        self.agents = {name: _served(a, self.store, self.key) for name, a in given.items()}
        self.views = Views(self.store, self.agents)
        self.notifier = _notifier(notify, self.home, env, public_url or f"http://{host}:8765")
        on_waiting = self.notifier.waiting if self.notifier is not None else None
        self.workers = Workers(
            self.agents,
            self.store,
            self.hub,
            self.views,
            concurrency=workers,
            on_waiting=on_waiting,
            interrupted=self.home / "serve.interrupted.json",
            sweep_every=sweep_every,
            dispatcher=dispatcher,
            deps=deps,
        )
        self.service = Service(self.agents, self.store, self.views, self.workers, self.key, deps)
        self.people = People(self.home, load_rules(rules) if rules else Rules(), self.key)  # who may decide what
        self.service.judge = self.people
        self.sessions = self.people.sessions
        self.throttle = Throttle(max_auth_failures)
        self.sweep_every = sweep_every
        self.app = self._app()

    def _appended(self, run_id: str, events: Sequence[Any]) -> None:
        self.workers.appended(run_id, events)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Server]:
        """Workers, change watcher and notifications run inside this block."""
        await self.workers.start()
        if self.notifier is not None:
            self.notifier.start()
        expiry = asyncio.create_task(self._expire_forever())
        try:
            yield self
        finally:
            expiry.cancel()
            await self.workers.stop()
            if self.notifier is not None:
                await self.notifier.stop()
            if self._owns_store:
                await self.store.aclose()

    async def _expire_forever(self) -> None:
        """Escalate or deny the items waiting past their rule's time (see :mod:`._judge`)."""
        if not any(r.expire_after for r in self.people.rules.rules) and not self.people.rules.default.expire_after:
            return
        notify = self.notifier.send if self.notifier is not None else None
        while True:
            await asyncio.sleep(min(self.sweep_every, 5.0))
            try:
                await self.people.sweep(self.service.waiting, self.views.get, self._deny, notify)
            except Exception:
                log.exception("the expiry sweep failed; it runs again shortly")

    async def _deny(self, run_id: str, choice: Any, by: str) -> None:
        await self.service.decide(run_id, choice, by=by, who=Who("rule", by))

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        async with self.running():
            yield

    def _app(self) -> Starlette:
        # An item id may be a path into a child run (c1/c7): the routes take it whole.
        routes = [
            Route(op.path.replace("{call_id}", "{call_id:path}"), op.endpoint, methods=[op.method]) for op in OPERATIONS
        ]
        routes += [
            Route("/openapi.json", self._openapi, methods=["GET"]),
            Route("/", pages.inbox, methods=["GET"]),
            Route("/runs", pages.runs_page, methods=["GET"]),
            Route("/runs/{run_id}", pages.run_page, methods=["GET"]),
            Route("/runs/{run_id}/cancel", pages.cancel, methods=["POST"]),
            Route("/fragments/items/{run_id}", pages.fragment, methods=["GET"]),
            Route("/fragments/runs/{run_id}", pages.run_fragment, methods=["GET"]),
            Route("/decide", pages.decide, methods=["POST"]),
            Route("/login", login_form, methods=["GET"]),
            Route("/login", login, methods=["POST"]),
            Route("/logout", logout, methods=["POST"]),
            Route("/audit", audit_page, methods=["GET"]),
            Route("/api/audit", audit_lines, methods=["GET"]),
            Route("/static/{name}", pages.static, methods=["GET"]),
        ]
        guard = Middleware(
            Guard,
            token=self.token,
            hosts=self.hosts,
            sessions=self.sessions,
            throttle=self.throttle,
            people=self.people,
        )
        handlers: Any = {HTTPException: _http_error, Exception: _internal_error}
        app = Starlette(routes=routes, middleware=[guard], exception_handlers=handlers, lifespan=self._lifespan)
        app.state.server = self
        return app

    async def _openapi(self, request: Request) -> Response:
        return reply(document(sorted(self.agents)))


def _by_name(agents: Agent | Sequence[Agent] | Mapping[str, Agent]) -> dict[str, Agent]:
    if isinstance(agents, Agent):
        agents = [agents]
    if isinstance(agents, Mapping):
        named = dict(agents)
    else:
        named = {}
        for a in agents:
            if a.name in named:
                raise UserError(f"two served agents are named {a.name!r}: give each a name (Agent(..., name=...))")
            named[a.name] = a
    if not named:
        raise UserError("serve at least one agent")
    for name, a in named.items():
        if not isinstance(a, Agent):
            raise UserError(f"{name!r} is not an Agent: {a!r}")
    return named


def _store(store: RunStore | str | None, agents: Mapping[str, Agent]) -> tuple[str, RunStore, bool]:
    """The store URL (for where secrets live), the store, and whether the server opened it."""
    from ..stores import open_store

    if store is None:
        own = {id(a.store): a.store for a in agents.values() if a.store is not None}
        if len(own) != 1 or any(a.store is None for a in agents.values()):
            raise UserError("give the server a store (store='sqlite:///.tether/runs.db'), or all agents one store")
        store = next(iter(own.values()))
        assert store is not None
    if isinstance(store, str):
        return store, open_store(store), True
    return _url_of(store), store, False


def _url_of(store: RunStore) -> str:
    path = getattr(store, "path", None)
    if isinstance(path, str):
        return f"sqlite:///{path}"  # sqlite:////abs for an absolute path, as open_store reads it
    name = type(store).__name__
    return "memory://" if name == "MemoryStore" else "postgresql://" if name == "PostgresStore" else f"{name}://"


def _key(agents: Mapping[str, Agent], store_url: str, env: Mapping[str, str]) -> bytes:
    keys = {a.signing_key for a in agents.values() if a.signing_key is not None}
    if len(keys) > 1:
        raise UserError("the served agents have different signing keys: decisions are signed with one")
    return keys.pop() if keys else server_key(store_url, env)


def _served(agent: Agent, store: ServedStore, key: bytes) -> Agent:
    """The server's copy of an agent: its store, and the key decisions are signed with."""
    served = copy.copy(agent)
    served.store = store
    served.signing_key = key
    return served


def _hosts(host: str, extra: Sequence[str]) -> tuple[str, ...]:
    names = list(LOOPBACK_NAMES)
    if host not in ("0.0.0.0", "::", ""):
        names.append(f"[{host}]" if ":" in host and not host.startswith("[") else host)
    names += [h.strip().lower() for h in extra if h.strip()]
    return tuple(dict.fromkeys(n.lower() for n in names))


def _notifier(url: str | None, home: Path, env: Mapping[str, str], base_url: str) -> Notifier | None:
    if not url:
        return None
    if not url.startswith(("http://", "https://")):
        raise UserError(f"--notify must be an http(s) URL, got {url!r}")
    secret = env.get(NOTIFY_ENV) or secret_file(home / "notify.key", create=True)
    assert secret is not None
    return Notifier(url, secret.encode(), base_url)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = {404: "not-found", 405: "method-not-allowed"}.get(exc.status_code, "http-error")
    if not pages.is_page(request) or route_path(request.scope) == "/openapi.json":
        return JSONResponse({"error": {"code": code, "message": str(exc.detail)}}, status_code=exc.status_code)
    return Response(f"{exc.status_code} {exc.detail}", status_code=exc.status_code, media_type="text/plain")


async def _internal_error(request: Request, exc: Exception) -> Response:
    log.error("error serving %s %s", request.method, request.url.path, exc_info=exc)
    message = f"the server failed: {type(exc).__name__}"
    return with_headers(JSONResponse({"error": {"code": "internal", "message": message}}, status_code=500))
