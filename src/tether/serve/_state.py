"""What the request handlers need from the server, as a Protocol (so they need not import it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from starlette.requests import Request

from ..agent import Agent
from ._hub import Hub
from ._judge import People
from ._security import Sessions, Throttle
from ._service import Service
from ._workers import ServedStore

__all__ = ["Served", "served"]


class Served(Protocol):
    """The parts of :class:`tether.serve.Server` a route uses."""

    agents: Mapping[str, Agent]
    store: ServedStore
    hub: Hub
    service: Service
    sessions: Sessions
    people: People
    throttle: Throttle
    token: str
    token_hint: str


def served(request: Request) -> Served:
    """The server handling ``request`` (the app keeps it in its state)."""
    server: Served = request.app.state.server
    return server
