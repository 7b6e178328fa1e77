"""The server's front door: one ASGI middleware that every request passes.

In order, :class:`Guard`:

1. refuses a ``Host`` that is not on the allow-list (403, ``host-not-allowed``):
   a DNS-rebinding page cannot talk to the server under another name;
2. refuses a state-changing request whose ``Origin`` is not the server itself,
   or that the browser calls cross-site (403, ``cross-origin``); a client with
   no ``Origin`` (curl, the CLI, a program) is not a browser and passes;
3. finds who is asking: the trusted proxy's header (``X-Forwarded-User``,
   accepted only from the configured proxy addresses and refused, 403, from
   anywhere else), ``Authorization: Bearer <token>`` (the server's token or a
   person's own, compared in constant time), or the session cookie the login
   form hands out (a random id of a server-side session: HttpOnly,
   SameSite=Strict, ``__Host-`` and Secure over https, forgotten at sign-out;
   two values of it, one planted by another page of this host, count as none);
4. refuses everything but the login page and the static files without one
   (401 for the API, a redirect to the login page for pages); more than
   ``max_failures`` wrong tokens a minute from one client get 429 for a minute,
   while the right token still passes;
5. requires the session's CSRF token (``X-CSRF-Token``) on every
   state-changing API call made with the cookie or the proxy's header (pages
   check their forms' hidden field the same way);
6. adds to every response a strict Content-Security-Policy (no inline script
   or style, nothing from elsewhere), ``X-Frame-Options: DENY`` and friends.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal, Protocol
from urllib.parse import quote, urlsplit

from starlette.datastructures import Headers
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._people import Accounts
from ._rules import Rules
from ._secrets import same_secret

__all__ = [
    "COOKIE",
    "Guard",
    "Sessions",
    "Throttle",
    "Who",
    "cookie_name",
    "route_path",
    "session_cookie",
    "session_cookies",
    "session_id",
    "with_headers",
]

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
    """Who is asking: a program with the server's token, a signed-in person, or an authenticated person.

    ``person`` is True when the name was proven (an account's password or
    personal token, or the trusted proxy's header): the rules apply to it and
    its decisions are signed ``user:<name>`` or ``proxy:<name>``. In the
    one-person mode (the server's token only) the name is what the person
    typed at sign-in: ``web:<name>``.
    """

    kind: Literal["token", "session", "user", "proxy", "rule"]
    name: str
    csrf: str = ""
    person: bool = False

    def reviewer(self, given: str | None = None) -> str:
        """How the decisions of this caller are signed (``given``: a name a program says it acts for)."""
        if self.person:
            return f"{'proxy' if self.kind == 'proxy' else 'user'}:{self.name}"
        if self.kind == "session":
            return f"web:{self.name}"
        if self.kind == "rule":
            return self.name
        return f"api:{given}" if given else "api"


@dataclass(slots=True)
class _Session:
    who: Who
    issued: float
    stamp: str  # the account's password stamp at sign-in: a reset or a removal ends the session


class Sessions:
    """Server-side sessions: the cookie holds a random id; signing out or expiry forgets it at once.

    >>> sessions = Sessions(ttl=3600)
    >>> sid = sessions.issue("ana", person=False)
    >>> sessions.read(sid).name, sessions.read("forged")
    ('ana', None)
    >>> sessions.revoke(sid); sessions.read(sid) is None
    True
    """

    TTL = 12 * 3600

    def __init__(self, ttl: float | None = None, stamp: Callable[[str], str] | None = None) -> None:
        self.ttl = float(ttl if ttl is not None else self.TTL)
        self._stamp = stamp
        self._live: dict[str, _Session] = {}

    def issue(self, name: str, *, person: bool) -> str:
        """A new session for ``name``; the value to put in the cookie."""
        self._sweep()
        sid = secrets.token_urlsafe(32)
        who = Who("session", name, secrets.token_hex(16), person)
        self._live[sid] = _Session(who, time.time(), self._stamp(name) if person and self._stamp else "")
        return sid

    def read(self, sid: str) -> Who | None:
        """The person a cookie value names, if that session is live."""
        session = self._live.get(sid)
        if session is None:
            return None
        stale = session.who.person and self._stamp is not None and self._stamp(session.who.name) != session.stamp
        if time.time() - session.issued > self.ttl or stale:
            self._live.pop(sid, None)
            return None
        return session.who

    def revoke(self, sid: str) -> None:
        self._live.pop(sid, None)

    def _sweep(self) -> None:
        if len(self._live) > 1000:
            now = time.time()
            self._live = {k: s for k, s in self._live.items() if now - s.issued <= self.ttl}


class Throttle:
    """Counts wrong secrets per key (a client, or a client and a user name); over ``limit`` a minute, refused."""

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


class People(Protocol):
    """What the guard needs to know of the people (:class:`tether.serve._judge.People`)."""

    rules: Rules
    accounts: Accounts

    def proxy_csrf(self, name: str) -> str: ...


class Guard:
    """The ASGI middleware of the module docstring."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str,
        hosts: Iterable[str],
        sessions: Sessions,
        throttle: Throttle,
        people: People | None = None,
    ) -> None:
        self.app, self.token, self.sessions, self.throttle = app, token, sessions, throttle
        self.hosts = frozenset(h.lower() for h in hosts)
        self.people = people

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
        scope["tether.secure"] = self._secure(scope, headers)
        who, refusal = self._who(scope, headers)
        if refusal is not None:
            return refusal
        scope["tether.who"] = who
        if path.startswith(PUBLIC):
            return None
        if who is None:
            return _unauthenticated(scope, path)
        ambient = who.kind in ("session", "proxy")  # the browser sends it by itself: a form or script must prove it
        proven = hmac.compare_digest(headers.get("x-csrf-token", ""), who.csrf)
        if ambient and method not in SAFE and path.startswith("/api/") and not proven:
            return _refuse(403, "csrf", "the X-CSRF-Token header is missing or wrong for this session")
        return None

    def _client(self, scope: Scope) -> str:
        return str((scope.get("client") or ("?", 0))[0])

    def _secure(self, scope: Scope, headers: Headers) -> bool:
        """Whether the browser reached us over https: directly, or through the trusted proxy that says so."""
        if scope.get("scheme") == "https":
            return True
        proxied = self.people is not None and self.people.rules.trusted_proxy(self._client(scope))
        return proxied and headers.get("x-forwarded-proto", "").lower() == "https"

    def _who(self, scope: Scope, headers: Headers) -> tuple[Who | None, Response | None]:
        client = self._client(scope)
        if self.people is not None and (proxied := self._proxied(client, headers)) != "absent":
            return (proxied, None) if isinstance(proxied, Who) else (None, proxied)
        auth = headers.get("authorization")
        if auth:
            scheme, _, given = auth.partition(" ")
            given = given.strip()
            if scheme.lower() == "bearer" and same_secret(given, self.token):
                return Who("token", "api"), None  # the right token is never throttled out by someone's wrong ones
            owner = self.people.accounts.owner_of(given) if self.people is not None and given else None
            if scheme.lower() == "bearer" and owner is not None:
                return Who("user", owner, person=True), None
            if wait := self.throttle.retry_after(client):
                response = _refuse(429, "throttled", "too many wrong tokens from this client; wait and try again")
                response.headers["retry-after"] = str(int(wait) + 1)
                return None, response
            self.throttle.failed(client)
            return None, _refuse(401, "unauthorized", "the token is wrong", bearer=True)
        sid = session_id(scope)
        return (self.sessions.read(sid) if sid else None), None

    def _proxied(self, client: str, headers: Headers) -> Who | Response | Literal["absent"]:
        """The person the trusted proxy names; a refusal when the header comes from anywhere else."""
        assert self.people is not None
        rules = self.people.rules
        if not (rules.proxy_header or rules.proxy_email_header):
            return "absent"
        named = [headers.get(h) for h in (rules.proxy_header, rules.proxy_email_header) if h]
        if all(n is None for n in named):
            return "absent"
        if not rules.trusted_proxy(client):
            return _refuse(
                403,
                "untrusted-proxy",
                "the proxy's identity header counts only from the configured proxy addresses",
            )
        name = next((n.strip() for n in named if n and n.strip()), "")
        if not name or len(name) > 200:
            return _refuse(401, "unauthorized", "the proxy sent an empty or overlong identity header")
        return Who("proxy", name, self.people.proxy_csrf(name), person=True)


def cookie_prefix(scope: Scope) -> str:
    """``__Host-tether_session`` over https at the root (Secure, host-only, Path=/), else ``tether_session``."""
    if not scope.get("tether.secure"):
        return COOKIE
    return f"__Host-{COOKIE}" if not scope.get("root_path") else f"__Secure-{COOKIE}"


def cookie_name(scope: Scope, sid: str) -> str:
    """A session's cookie is named after its id: a planted id under another session's name is refused."""
    return f"{cookie_prefix(scope)}_{hashlib.sha256(sid.encode()).hexdigest()[:12]}"


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


def session_cookies(scope: Scope) -> list[tuple[str, str]]:
    """Every session cookie the browser sent, as (name, value)."""
    prefix = cookie_prefix(scope) + "_"
    found = []
    for part in Headers(scope=scope).get("cookie", "").split(";"):
        key, _, value = part.strip().partition("=")
        if key.startswith(prefix):
            found.append((key, value))
    return found


def session_cookie(scope: Scope, sid: str, *, max_age: float, name: str = "") -> str:
    """The ``Set-Cookie`` value of a session: HttpOnly, SameSite=Strict, on the app's path, Secure over https.

    With ``name`` (and ``max_age=0``): the header that deletes that cookie.
    """
    path = str(scope.get("root_path") or "/")
    parts = [f"{name or cookie_name(scope, sid)}={sid}", f"Path={path}", "HttpOnly", "SameSite=Strict"]
    parts.append(f"Max-Age={int(max_age)}")
    if scope.get("tether.secure"):
        parts.append("Secure")
    return "; ".join(parts)


def session_id(scope: Scope) -> str:
    """The session id the request's cookie carries.

    '' when there is none, when there are two (another page of this host,
    another port included, planted one: then nobody is signed in), or when
    the cookie's name is not its value's (a planted id under this session's name).
    """
    cookies = session_cookies(scope)
    if len(cookies) != 1:
        return ""
    name, sid = cookies[0]
    return sid if hmac.compare_digest(name, cookie_name(scope, sid)) else ""


def csrf_ok(who: Any, given: str) -> bool:
    """Whether a form's CSRF field matches the session's (or the proxied person's) token."""
    return isinstance(who, Who) and who.kind in ("session", "proxy") and hmac.compare_digest(given, who.csrf)
