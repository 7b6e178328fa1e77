"""``tether serve``: runs served to people, over HTTP (``pip install 'tether[serve]'``).

A JSON API (start, list, show, cancel, decide, stream events over SSE) with an
OpenAPI document at ``/openapi.json``, a web inbox at ``/`` where people see
what waits for them and decide, workers that advance the runs, and webhook
notifications. See ``docs/serve.md``.

>>> from tether import Agent
>>> from tether.testing import ScriptedModel
>>> asgi = app(Agent(ScriptedModel(["hello"]), name="greeter"), store="memory://")
>>> type(asgi).__name__
'Starlette'

Mount it in your own Starlette or FastAPI app by running the server's
lifespan in yours::

    server = Server([agent], store="sqlite:///.tether/runs.db")
    outer = Starlette(routes=[Mount("/tether", server.app)], lifespan=lambda _: server.running())
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..exceptions import UserError

try:
    import starlette  # noqa: F401
except ImportError as exc:  # pragma: no cover - the extra is installed in the tests
    raise UserError(
        f"tether serve needs tether[serve] ({exc.name!r} is missing): pip install 'tether[serve]' "
        "(or pip install -e '.[serve]' from a checkout)"
    ) from exc

from ._server import Server

if TYPE_CHECKING:
    from ..agent import Agent
    from ..store import RunStore

__all__ = ["Server", "app"]


def app(
    agents: Agent | Sequence[Agent] | Mapping[str, Agent], *, store: RunStore | str | None = None, **options: Any
) -> Any:
    """The ASGI app serving ``agents`` over ``store`` (the options of :class:`Server`)."""
    return Server(agents, store=store, **options).app
