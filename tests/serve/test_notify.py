"""Webhook notifications: a signed POST when items start waiting, retried, never in the run's way."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from .conftest import Served, paused

SECRET = "s" * 40


class Receiver:
    """A webhook receiver on loopback that fails its first ``fail`` deliveries with HTTP 500."""

    def __init__(self, fail: int) -> None:
        self.fail = fail
        self.got: list[tuple[dict[str, str], bytes, float]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                receiver.got.append(({k.lower(): v for k, v in self.headers.items()}, body, time.monotonic()))
                self.send_response(500 if len(receiver.got) <= receiver.fail else 204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http.server_address[1]}/hook"

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver(fail=1)
    try:
        yield r
    finally:
        r.close()


def test_a_signed_notice_is_sent_when_an_item_starts_waiting_and_retried_when_refused(
    tmp_path: Path, receiver: Receiver
) -> None:
    served = Served(tmp_path, "sqlite", extra=("--notify", receiver.url))
    served.env["TETHER_NOTIFY_SECRET"] = SECRET
    served.start()
    try:
        with served.client() as c:
            run = paused(c, "Refund A1234")
            deadline = time.monotonic() + 30
            while len(receiver.got) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert c.get(f"/api/runs/{run['run_id']}").json()["status"] == "paused"  # the run did not wait on it
    finally:
        served.stop()
    (_, refused, _), (headers, body, _) = receiver.got[:2]
    assert refused == body  # the refused notice was sent again
    stamp = headers["x-tether-timestamp"]
    expected = "sha256=" + hmac.new(SECRET.encode(), stamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(headers["x-tether-signature"], expected)
    notice = json.loads(body)
    assert (notice["type"], notice["run_id"], notice["agent"]) == ("items-waiting", run["run_id"], "support")
    assert [(i["kind"], i["tool"]) for i in notice["items"]] == [("approval", "issue_refund")]
    assert notice["link"] == f"http://127.0.0.1:{served.port}/runs/{run['run_id']}"
    assert len(receiver.got) == 2  # one notice: delivered on the second attempt, not sent again
