"""The JSON HTTP API: one table of operations, each a small Starlette endpoint.

:data:`OPERATIONS` lists every route with what the OpenAPI document says of
it (:mod:`tether.serve._openapi` is built from this table), so the routes and
their documentation cannot drift apart. Every refusal has one shape::

    {"error": {"code": "stale", "message": "..."}, "run": {...the run now...}}

where ``run`` comes with conflicts (409), so the caller sees the current state.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar, get_args
from urllib.parse import quote

import pydantic
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from ..events import to_dict
from ..parts import safe_text
from ..pending import VERBS, Verdict
from ..state import MAX_DEPTH, Status, strict_json
from ._models import BODIES, CancelBody, StartRun
from ._service import ApiError, chosen
from ._sse import change_stream, position_from, run_stream
from ._state import served as server
from ._views import item_json, run_json, summary_json

__all__ = ["OPERATIONS", "Operation", "SafeJSON", "error_response", "parse_json", "reply"]

B = TypeVar("B", bound=pydantic.BaseModel)
Endpoint = Callable[[Request], Awaitable[Response]]
MAX_BODY = 1024 * 1024
STATUSES = get_args(Status)


@dataclass(frozen=True, slots=True)
class Operation:
    """One route of the API and what its documentation says."""

    method: str
    path: str
    endpoint: Endpoint
    summary: str
    body: type[pydantic.BaseModel] | None = None
    ok: tuple[tuple[int, str], ...] = ((200, "Run"),)  # status -> schema name ("sse": an event stream)
    errors: tuple[int, ...] = ()
    query: tuple[str, ...] = ()


class SafeJSON(JSONResponse):
    """JSON every client decodes: a lone surrogate (an old journal's, or one a tool's arguments spell as
    an escape) goes out as U+FFFD, so no answer fails on what a run holds."""

    def render(self, content: Any) -> bytes:
        return safe_text(json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":"))).encode()


def error_response(exc: ApiError) -> JSONResponse:
    """The one shape of every refusal."""
    body: dict[str, Any] = {"error": {"code": exc.code, "message": exc.message}}
    if exc.status < 300:  # accepted but not done (one approval of several): the script shows it as a notice
        body["notice"] = exc.message
    if exc.run is not None:
        body["run"] = run_json(exc.run)
    return SafeJSON(body, status_code=exc.status, headers={"cache-control": "no-store"})


def reply(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> JSONResponse:
    return SafeJSON(data, status_code=status, headers={"cache-control": "no-store", **(headers or {})})


def guarded(fn: Endpoint) -> Endpoint:
    async def endpoint(request: Request) -> Response:
        try:
            return await fn(request)
        except ApiError as exc:
            return error_response(exc)

    endpoint.__name__ = fn.__name__
    return endpoint


async def read_body(request: Request, model: type[B], *, optional: bool = False) -> B:
    """The request's JSON body as ``model`` (400 not JSON, 413 too large, 422 not that shape)."""
    raw = await read_bytes(request)
    if not raw.strip() and optional:
        raw = b"{}"
    data = parse_json(raw, "the body")
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors())
        raise ApiError(422, "invalid-body", problems) from None


def parse_json(raw: str | bytes, what: str) -> Any:
    """JSON from a request, read as states are (:func:`tether.state.strict_json`: no duplicate keys, no NaN,
    at most :data:`~tether.state.MAX_DEPTH` levels, so no body makes the server recurse), its strings safe."""
    try:
        return safe_strings(strict_json(raw, MAX_DEPTH))
    except ValueError as exc:
        raise ApiError(400, "bad-json", f"{what} is not JSON the server takes: {exc}") from None


def safe_strings(value: Any) -> Any:
    """``value`` with every string (keys too) made safe (:func:`tether.parts.safe_text`); shallow by now."""
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, list):
        return [safe_strings(v) for v in value]
    if isinstance(value, dict):
        return {safe_text(k): safe_strings(v) for k, v in value.items()}
    return value


async def read_bytes(request: Request, limit: int = MAX_BODY) -> bytes:
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > limit:
        raise ApiError(413, "too-large", f"the body is over {limit} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ApiError(413, "too-large", f"the body is over {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def int_query(request: Request, name: str, default: int, low: int, high: int) -> int:
    text = request.query_params.get(name)
    if text is None:
        return default
    if not text.isdigit() or not low <= int(text) <= high:
        raise ApiError(422, "invalid-query", f"{name} must be a whole number from {low} to {high}, got {text!r}")
    return int(text)


# -- endpoints ---------------------------------------------------------------------------


@guarded
async def list_agents(request: Request) -> Response:
    agents = server(request).agents
    out = [{"name": name, "tools": [_tool_json(t) for t in a.tool_list]} for name, a in sorted(agents.items())]
    return reply({"agents": out})


def _tool_json(t: Any) -> dict[str, Any]:
    return {
        "name": t.name,
        "description": t.description,
        "parameters": t.parameters,
        "approval": bool(t.approval),
        "question": t.is_question,
    }


@guarded
async def start_run(request: Request) -> Response:
    body = await read_body(request, StartRun)
    key = request.headers.get("idempotency-key")
    if key is not None and not 1 <= len(key) <= 200:
        raise ApiError(422, "invalid-key", "Idempotency-Key must be 1 to 200 characters")
    service = server(request).service
    view, new = await service.start(
        body.agent, body.input, run_id=body.run_id, key=key, meta=body.meta, inputs=body.inputs
    )
    where = f"{request.scope.get('root_path', '')}/api/runs/{quote(view.run_id, safe='')}"
    return reply(run_json(view), 201 if new else 200, {"location": where})


@guarded
async def list_runs(request: Request) -> Response:
    status = request.query_params.get("status")
    if status is not None and status not in STATUSES:
        raise ApiError(422, "invalid-query", f"status must be one of {', '.join(STATUSES)}")
    limit, offset = int_query(request, "limit", 50, 1, 500), int_query(request, "offset", 0, 0, 1_000_000)
    agent = request.query_params.get("agent")
    runs, more = await server(request).service.runs(status=status, agent=agent, limit=limit, offset=offset)
    return reply({"runs": [summary_json(v) for v in runs], "next_offset": more})


@guarded
async def show_run(request: Request) -> Response:
    view = await server(request).service.view(request.path_params["run_id"])
    server(request).people.showed(request.scope["tether.who"], view)
    return reply(run_json(view))


@guarded
async def cancel_run(request: Request) -> Response:
    body = await read_body(request, CancelBody, optional=True)
    who = request.scope["tether.who"]
    view = await server(request).service.cancel(
        request.path_params["run_id"], reason=body.reason, by=who.reviewer(body.by), who=who
    )
    return reply(run_json(view))


@guarded
async def list_events(request: Request) -> Response:
    view = await server(request).service.view(request.path_params["run_id"])
    server(request).people.showed(request.scope["tether.who"], view)
    after = int_query(request, "after", 0, 0, 10_000_000)
    events = [
        {"position": n, "kind": ev.kind, "at": ev.at or None, "event": to_dict(ev)}
        for n, ev in enumerate(view.events[after:], after + 1)
    ]
    return reply({"events": events, "next": max(after, len(view.events))})


@guarded
async def stream_run(request: Request) -> Response:
    srv = server(request)
    run_id = request.path_params["run_id"]
    await srv.service.view(run_id)  # 404 before the stream starts
    after = position_from(request.headers.get("last-event-id"), request.query_params.get("after"))
    if after is None:
        raise ApiError(422, "invalid-query", "Last-Event-ID and after= must be whole numbers")
    return StreamingResponse(run_stream(srv.hub, srv.store, run_id, after), media_type="text/event-stream")


@guarded
async def stream_changes(request: Request) -> Response:
    srv = server(request)
    return StreamingResponse(change_stream(srv.hub, srv.store), media_type="text/event-stream")


@guarded
async def list_items(request: Request) -> Response:
    who = request.scope["tether.who"]  # a person sees what they may decide; a program with the token, all
    limit, offset = int_query(request, "limit", 50, 1, 500), int_query(request, "offset", 0, 0, 1_000_000)
    items = await server(request).service.waiting(who)
    more = offset + limit if len(items) > offset + limit else None
    return reply({"items": [item_json(i) for i in items[offset : offset + limit]], "next_offset": more})


def _decide(verdict: Verdict) -> Endpoint:
    @guarded
    async def decide(request: Request) -> Response:
        body: Any = await read_body(request, BODIES[verdict])
        p = request.path_params
        payload = body.model_dump(exclude={"args_hash", "by"})  # the one field the verdict takes, if any
        choice = chosen(verdict, p["call_id"], args_hash=body.args_hash, **payload)
        who = request.scope["tether.who"]
        view = await server(request).service.decide(p["run_id"], choice, by=who.reviewer(body.by), who=who)
        return reply({"run": run_json(view)})

    decide.__name__ = f"{verdict}_item"
    return decide


RUN = "/api/runs/{run_id}"
ITEM = RUN + "/items/{call_id}"
DECIDE_ERRORS = (400, 404, 409, 413, 422)
OPERATIONS: tuple[Operation, ...] = (
    Operation("GET", "/api/agents", list_agents, "The served agents and their tools", ok=((200, "Agents"),)),
    Operation(
        "POST",
        "/api/runs",
        start_run,
        "Start a run (idempotent with run_id or an Idempotency-Key header)",
        StartRun,
        ok=((201, "Run"), (200, "Run")),
        errors=(400, 409, 413, 422),
    ),
    Operation(
        "GET",
        "/api/runs",
        list_runs,
        "List runs, most recently updated first",
        ok=((200, "RunList"),),
        errors=(422,),
        query=("status", "agent", "limit", "offset"),
    ),
    Operation("GET", RUN, show_run, "A run: status, trace, usage and every open item", errors=(404,)),
    Operation("POST", RUN + "/cancel", cancel_run, "End a run for good", CancelBody, errors=(400, 404, 409, 413, 422)),
    Operation(
        "GET",
        RUN + "/events",
        list_events,
        "A run's committed events after a position",
        ok=((200, "EventList"),),
        errors=(404, 422),
        query=("after",),
    ),
    Operation(
        "GET",
        RUN + "/stream",
        stream_run,
        "A run's events, live, over server-sent events (Last-Event-ID = position)",
        ok=((200, "sse"),),
        errors=(404, 422),
        query=("after",),
    ),
    Operation(
        "GET",
        "/api/items",
        list_items,
        "The items waiting for a person, newest first (a page of them)",
        ok=((200, "ItemList"),),
        errors=(422,),
        query=("limit", "offset"),
    ),
    Operation(
        "GET", "/api/changes", stream_changes, "Which runs change, live (server-sent events)", ok=((200, "sse"),)
    ),
    *(
        Operation(
            "POST",
            f"{ITEM}/{verdict}",
            _decide(verdict),
            verb.says,
            BODIES[verdict],
            ((200, "Decided"),),
            DECIDE_ERRORS,
        )
        for verdict, verb in VERBS.items()
    ),
)
