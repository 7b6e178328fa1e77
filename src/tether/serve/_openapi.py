"""The OpenAPI 3.1 document of the API, built from the operation table and the pydantic models.

Every operation needs the bearer token (or the inbox's session cookie) and
may answer 401 (no or wrong token), 403 (a refused Host or Origin, or a
missing CSRF token) and 429 (too many wrong tokens); the rest is per
operation in :data:`tether.serve._api.OPERATIONS`.

>>> doc = document(["support"])
>>> doc["openapi"], sorted(doc["paths"])[:2]
('3.1.0', ['/api/agents', '/api/changes'])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, get_args

from pydantic.json_schema import models_json_schema

from ..state import Status
from ._api import OPERATIONS, Operation
from ._models import MODELS

__all__ = ["document"]

REASONS = {
    200: "OK",
    201: "Created",
    400: "The body is not JSON",
    401: "No token, or a wrong one",
    403: "Refused: Host not allowed, cross-origin, or a missing CSRF token",
    404: "No such run or item",
    409: "Conflict: the item moved on, was decided already, or the run exists otherwise; `run` shows it now",
    413: "The body is too large",
    422: "The request does not fit the schema, the tool's schema, or the item",
    429: "Too many wrong tokens from this client",
}
QUERY: dict[str, dict[str, Any]] = {
    "status": {"type": "string", "enum": list(get_args(Status))},
    "agent": {"type": "string"},
    "limit": {"type": "integer", "minimum": 1, "maximum": 500, "default": 50},
    "offset": {"type": "integer", "minimum": 0, "maximum": 1_000_000, "default": 0},
    "after": {"type": "integer", "minimum": 0, "maximum": 10_000_000, "default": 0},
}


def document(agents: Sequence[str], *, title: str = "tether serve") -> dict[str, Any]:
    """The OpenAPI document for a server with these agent names."""
    _, defs = models_json_schema([(m, "validation") for m in MODELS], ref_template="#/components/schemas/{model}")
    schemas = defs.get("$defs", {})
    if agents:
        schemas["StartRun"]["properties"]["agent"]["enum"] = sorted(agents)
    paths: dict[str, dict[str, Any]] = {}
    for op in OPERATIONS:
        paths.setdefault(op.path, {})[op.method.lower()] = _operation(op)
    return {
        "openapi": "3.1.0",
        "info": {"title": title, "version": "1", "description": "Start, watch and decide on agent runs."},
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"token": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"token": []}],
    }


def _operation(op: Operation) -> dict[str, Any]:
    out: dict[str, Any] = {
        "operationId": op.endpoint.__name__,
        "summary": op.summary,
        "responses": {str(code): _ok(code, name) for code, name in op.ok},
    }
    for code in (*op.errors, 401, 403, 429):
        out["responses"][str(code)] = _json(REASONS[code], "Error")
    params = [_path_param(name) for name in _names(op.path)]
    params += [{"name": q, "in": "query", "required": False, "schema": QUERY[q]} for q in op.query]
    if op.path.endswith("/stream"):
        params.append({"name": "Last-Event-ID", "in": "header", "required": False, "schema": QUERY["after"]})
    if op.method == "POST" and op.path == "/api/runs":
        params.append({"name": "Idempotency-Key", "in": "header", "required": False, "schema": _key()})
    if params:
        out["parameters"] = params
    if op.body is not None:
        out["requestBody"] = {
            "required": op.path.endswith("/cancel") is False,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{op.body.__name__}"}}},
        }
    return out


def _ok(code: int, name: str) -> dict[str, Any]:
    if name == "sse":
        return {"description": "A stream of server-sent events", "content": {"text/event-stream": {"schema": {}}}}
    return _json(REASONS[code], name)


def _json(description: str, name: str) -> dict[str, Any]:
    schema = {"$ref": f"#/components/schemas/{name}"}
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _names(path: str) -> list[str]:
    return [part[1:-1] for part in path.split("/") if part.startswith("{")]


def _path_param(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string", "minLength": 1}}


def _key() -> dict[str, Any]:
    return {"type": "string", "minLength": 1, "maxLength": 200}
