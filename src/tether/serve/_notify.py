"""Webhook notifications: a signed JSON POST when items start waiting for a person.

:class:`Notifier` never blocks a run: :meth:`Notifier.waiting` only queues the
message; a background task delivers it, retrying with exponential backoff
(1, 2, 4, 8, 16 s; six attempts) on a network error or a non-2xx answer.

Each POST carries ``X-Tether-Timestamp`` and ``X-Tether-Signature: sha256=<hex>``,
the HMAC-SHA256 of ``"<timestamp>.<body>"`` with the webhook secret
(``TETHER_NOTIFY_SECRET``, or ``notify.key`` in the server's home, mode 0600).
A receiver checks the signature and refuses an old timestamp.

>>> signature = sign(b"k" * 32, "1700000000", b'{"a":1}')
>>> signature[:7], len(signature)
('sha256=', 71)
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import time
from typing import Any
from urllib.parse import quote

from ._views import RunView, item_json

__all__ = ["Notifier", "payload", "sign"]

log = logging.getLogger("tether.serve")
BACKOFF = (1.0, 2.0, 4.0, 8.0, 16.0)


def sign(secret: bytes, timestamp: str, body: bytes) -> str:
    """The ``X-Tether-Signature`` value of a body sent at ``timestamp``."""
    return "sha256=" + hmac.new(secret, timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()


def payload(view: RunView, base_url: str) -> dict[str, Any]:
    """What a webhook receives when ``view``'s items start waiting."""
    return {
        "type": "items-waiting",
        "run_id": view.run_id,
        "agent": view.agent,
        "status": view.status,
        "task": view.task,
        "items": [item_json(i) for i in view.waiting],
        "link": f"{base_url.rstrip('/')}/runs/{quote(view.run_id, safe='')}",
    }


class Notifier:
    """Queues and delivers webhook POSTs (see the module docstring)."""

    def __init__(self, url: str, secret: bytes, base_url: str, *, backoff: tuple[float, ...] = BACKOFF) -> None:
        self.url, self.secret, self.base_url, self.backoff = url, secret, base_url, backoff
        self._queue: asyncio.Queue[bytes] = asyncio.Queue(maxsize=1000)
        self._task: asyncio.Task[None] | None = None
        self._sending: set[asyncio.Task[None]] = set()
        self.delivered = 0
        self.failed = 0

    def waiting(self, view: RunView) -> None:
        """Queue the message for ``view`` (dropped, with a warning, if 1000 are already queued)."""
        body = json.dumps(payload(view, self.base_url), ensure_ascii=False, sort_keys=True).encode()
        try:
            self._queue.put_nowait(body)
        except asyncio.QueueFull:
            log.warning("webhook queue full: the notice for run %r was dropped", view.run_id)

    def send(self, data: dict[str, Any]) -> None:
        """Queue any other message (an escalated item, for example), signed and retried alike."""
        body = json.dumps({**data, "inbox": self.base_url + "/"}, ensure_ascii=False, sort_keys=True).encode()
        try:
            self._queue.put_nowait(body)
        except asyncio.QueueFull:
            log.warning("webhook queue full: a %s notice was dropped", data.get("event"))

    def start(self) -> None:
        self._task = asyncio.create_task(self._deliver_forever())

    async def stop(self) -> None:
        for task in [t for t in (self._task, *self._sending) if t is not None]:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _deliver_forever(self) -> None:
        import httpx

        async with httpx.AsyncClient(timeout=10.0) as client:
            while True:
                body = await self._queue.get()
                task = asyncio.create_task(self._deliver(client, body))  # a slow receiver delays no other notice
                self._sending.add(task)
                task.add_done_callback(self._sending.discard)

    async def _deliver(self, client: Any, body: bytes) -> None:
        import httpx

        for attempt, pause in enumerate((*self.backoff, None), 1):
            stamp = str(int(time.time()))
            headers = {
                "content-type": "application/json",
                "x-tether-timestamp": stamp,
                "x-tether-signature": sign(self.secret, stamp, body),
                "user-agent": "tether-serve",
            }
            try:
                response = await client.post(self.url, content=body, headers=headers)
                if 200 <= response.status_code < 300:
                    self.delivered += 1
                    return
                why = f"HTTP {response.status_code}"
            except httpx.HTTPError as exc:
                why = f"{type(exc).__name__}: {exc}"
            if pause is None:
                break
            log.info("webhook attempt %d failed (%s); again in %.0f s", attempt, why, pause)
            await asyncio.sleep(pause)
        self.failed += 1
        log.warning("webhook to %s failed %d times; notice dropped", self.url, len(self.backoff) + 1)
