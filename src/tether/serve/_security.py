"""The server's front door: one ASGI middleware that every request passes.

In order, :class:`Guard`:

1. refuses a ``Host`` that is not on the allow-list (403, ``host-not-allowed``):
   a DNS-rebinding page cannot talk to the server under another name;
2. refuses a state-changing request whose ``Origin`` is not the server itself,
   or that the browser calls cross-site (403, ``cross-origin``); a client with
   no ``Origin`` (curl, the CLI, a program) is not a browser and passes;
3. finds who is asking: ``Authorization: Bearer <token>`` (compared in
   constant time), or the session cookie the login form hands out (HttpOnly,
   SameSite=Strict, signed with a key derived from the token, 12 hours);
4. refuses everything but the login page and the static files without one
   (401 for the API, a redirect to the login page for pages); more than
   ``max_failures`` wrong tokens a minute from one client get 429 for a minute;
5. requires the session's CSRF token (``X-CSRF-Token``) on every
   state-changing API call made with the cookie (pages check their forms'
   hidden field the same way);
6. adds to every response a strict Content-Security-Policy (no inline script
   or style, nothing from elsewhere), ``X-Frame-Options: DENY`` and friends.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote, urlsplit

from starlette.datastructures import Headers
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._secrets import same_secret

__all__ = ["COOKIE", "Guard", "Sessions", "Throttle", "Who", "route_path", "with_headers"]

COOKIE = "tether_session"
SAFE = frozenset(("GET", "HEAD", "OPTIONS"))
PUBLIC = ("/login", "/static/")
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),  # "no-referrer" would make forms send Origin: null
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]


@dataclass(frozen=True, slots=True)
class Who:
    """Who is asking: a program with the token, or a person logged in through the form."""

    kind: Literal["token", "session"]
    name: str
    csrf: str = ""

    def reviewer(self, given: str | None = None) -> str:
        """How the decisions of this caller are signed: ``web:<name>``, or ``api[:<given>]``."""
        if self.kind == "session":
            return f"web:{self.name}"
        return f"api:{given}" if given else "api"


class Sessions:
    """Signed session cookies and their CSRF tokens; changing the token ends every session."""

    TTL = 12 * 3600

    def __init__(self, token: str) -> None:
        self.key = hmac.new(token.encode(), b"tether serve sessions", hashlib.sha256).digest()

    def issue(self, name: str) -> str:
        """A new cookie value for a person called ``name``."""
        payload = _b64(json.dumps({"n": name, "t": time.time(), "s": secrets.token_hex(16)}).encode())
        return f"{payload}.{self._mac(payload)}"

    def read(self, cookie: str) -> Who | None:
        """The person a cookie value names, if it is ours and fresh."""
        payload, _, mac = cookie.partition(".")
        if not mac or not hmac.compare_digest(mac, self._mac(payload)):
            return None
        try:
            data = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
            name, issued, sid = str(data["n"]), float(data["t"]), str(data["s"])
        except (ValueError, KeyError, TypeError):
            return None
        if time.time() - issued > self.TTL:
            return None
        return Who("session", name, self._mac("csrf:" + sid)[:32])

    def _mac(self, text: str) -> str:
        return hmac.new(self.key, text.encode(), hashlib.sha256).hexdigest()


class Throttle:
    """Counts wrong tokens per client; over ``limit`` a minute, that client is refused for a minute."""

    def __init__(self, limit: int = 10, window: float = 60.0) -> None:
        self.limit, self.window = limit, window
        self._fails: dict[str, deque[float]] = {}

    def retry_after(self, client: str) -> float:
        """Seconds until ``client`` may try again (0: now)."""
        fails = self._fails.get(client)
        if not fails:
            return 0.0
        now = time.monotonic()
        while fails and now - fails[0] > self.window:
            fails.popleft()
        return self.window - (now - fails[0]) if len(fails) >= self.limit else 0.0

    def failed(self, client: str) -> None:
        if len(self._fails) > 10_000:  # many clients: forget the quiet ones
            self._fails = {c: f for c, f in self._fails.items() if self.retry_after(c)}
        self._fails.setdefault(client, deque()).append(time.monotonic())


def route_path(scope: Scope) -> str:
    """The request path below the app's mount point."""
    path, root = str(scope.get("path", "")), str(scope.get("root_path", ""))
    return path[len(root) :] if root and path.startswith(root) else path


class Guard:
    """The ASGI middleware of the module docstring."""

    def __init__(
        self, app: ASGIApp, *, token: str, hosts: Iterable[str], sessions: Sessions, throttle: Throttle
    ) -> None:
        self.app, self.token, self.sessions, self.throttle = app, token, sessions, throttle
        self.hosts = frozenset(h.lower() for h in hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        secured = _with_headers(send)
        refusal = self._check(scope)
        if refusal is not None:
            await refusal(scope, receive, secured)
            return
        await self.app(scope, receive, secured)

    def _check(self, scope: Scope) -> Response | None:
        headers = Headers(scope=scope)
        host = headers.get("host", "")
        if _hostname(host) not in self.hosts:
            return _refuse(403, "host-not-allowed", f"this server does not answer to the host name {host!r}")
        method, path = scope["method"], route_path(scope)
        if method not in SAFE and _cross_site(headers, host):
            return _refuse(403, "cross-origin", "a page from another origin may not change anything here")
        who, refusal = self._who(scope, headers)
        if refusal is not None:
            return refusal
        scope["tether.who"] = who
        if path.startswith(PUBLIC):
            return None
        if who is None:
            return _unauthenticated(scope, path)
        cookie_write = who.kind == "session" and method not in SAFE and path.startswith("/api/")
        if cookie_write and not hmac.compare_digest(headers.get("x-csrf-token", ""), who.csrf):
            return _refuse(403, "csrf", "the X-CSRF-Token header is missing or wrong for this session")
        return None

    def _who(self, scope: Scope, headers: Headers) -> tuple[Who | None, Response | None]:
        auth = headers.get("authorization")
        client = (scope.get("client") or ("?", 0))[0]
        if auth is None and route_path(scope) == "/login" and scope["method"] == "POST":
            auth = ""  # a login attempt presents a token too (checked by the page)
        if auth is not None and (wait := self.throttle.retry_after(client)):
            response = _refuse(429, "throttled", "too many wrong tokens from this client; wait and try again")
            response.headers["retry-after"] = str(int(wait) + 1)
            return None, response
        if auth:
            scheme, _, given = auth.partition(" ")
            if scheme.lower() == "bearer" and same_secret(given.strip(), self.token):
                return Who("token", "api"), None
            self.throttle.failed(client)
            return None, _refuse(401, "unauthorized", "the token is wrong", bearer=True)
        cookie = _cookie(headers.get("cookie", ""), COOKIE)
        return (self.sessions.read(cookie) if cookie else None), None


# A Host header as browsers send it: a name or an IPv4 address, or an IPv6 address in brackets, and maybe a port.
# Anything else (``127.0.0.1:1@evil``, ``[::1].evil``, spaces, a second colon) names no host of ours.
_HOST = re.compile(r"(?P<name>[a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?|\[[0-9a-f:.]{2,45}\])(?::[0-9]{1,5})?")


def _hostname(host: str) -> str:
    """``example.org:8765`` -> ``example.org``; ``[::1]:8765`` -> ``[::1]``; a spelling no browser sends -> ``""``."""
    found = _HOST.fullmatch(host.lower())
    return found.group("name") if found else ""


def _cross_site(headers: Headers, host: str) -> bool:
    origin = headers.get("origin")
    if origin is not None and (origin == "null" or urlsplit(origin).netloc.lower() != host.lower()):
        return True
    return headers.get("sec-fetch-site") == "cross-site"


def _unauthenticated(scope: Scope, path: str) -> Response:
    if path.startswith("/api/") or path == "/openapi.json" or scope["method"] != "GET":
        hint = "send Authorization: Bearer <token> (the token is in serve.token beside the store: .tether/serve.token)"
        return _refuse(401, "unauthorized", hint, True)
    query = scope.get("query_string", b"").decode("latin-1")
    back = path + (f"?{query}" if query else "")
    return RedirectResponse(f"{scope.get('root_path', '')}/login?next={quote(back)}", status_code=303)


def _refuse(status: int, code: str, message: str, bearer: bool = False) -> Response:
    response = JSONResponse({"error": {"code": code, "message": message}}, status_code=status)
    if bearer:
        response.headers["www-authenticate"] = 'Bearer realm="tether"'
    response.headers["cache-control"] = "no-store"
    return response


def with_headers(response: Response) -> Response:
    """``response`` with the security headers: for the answers made outside :class:`Guard` (a crash's 500)."""
    for name, value in HEADERS:
        response.headers[name.decode()] = value.decode()
    return response


def _with_headers(send: Send) -> Send:
    async def secured(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), *HEADERS]}
        await send(message)

    return secured


def _cookie(header: str, name: str) -> str:
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return ""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def session_cookie(value: str, *, path: str, secure: bool, max_age: int | None = Sessions.TTL) -> str:
    """The ``Set-Cookie`` value of a session: HttpOnly, SameSite=Strict, on the app's path."""
    parts = [f"{COOKIE}={value}", f"Path={path or '/'}", "HttpOnly", "SameSite=Strict"]
    parts.append(f"Max-Age={max_age}" if max_age is not None else "Max-Age=0")
    if secure:
        parts.append("Secure")
    return "; ".join(parts)


def csrf_ok(who: Any, given: str) -> bool:
    """Whether a form's CSRF field matches the session's token."""
    return isinstance(who, Who) and who.kind == "session" and hmac.compare_digest(given, who.csrf)
