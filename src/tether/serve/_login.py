"""Signing in and out, and the audit log's page and export.

``/login`` takes a user name and password when the server has accounts
(``tether users add``), else a name and the server's token (the one-person
mode). Either way it starts a server-side session whose random id is the
cookie; ``/logout`` forgets it, so a copied cookie stops working at once.
Wrong passwords are throttled per client and user name, wrong tokens per
client; the right token is never refused for someone else's mistakes.

``/audit`` shows the audit log (newest first) and ``GET /api/audit`` returns
it as JSON lines, to whoever the rules file's ``[audit] readers`` names
(default: anyone signed in).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from ._html import clock, h, hidden, page
from ._pages import _error_page, _form, _safe_back, frame, html, root, who
from ._secrets import same_secret
from ._security import Who, csrf_ok, session_cookie, session_cookies, session_id
from ._service import ApiError
from ._state import served as server

__all__ = ["audit_lines", "audit_page", "login", "login_form", "logout"]


def _people(request: Request) -> Any:
    return request.app.state.server.people


def _login_page(request: Request, problem: str = "", status: int = 200) -> Response:
    nxt = _safe_back(request.query_params.get("next", "/"))
    accounts = _people(request).accounts.any()
    if accounts:
        fields = (
            '<label>User name<input name="name" required maxlength="100" autocomplete="username" autofocus></label>'
            '<label>Password<input name="password" type="password" required autocomplete="current-password"></label>'
        )
        hint = "Ask whoever runs this server for an account (<code>tether users add</code>)."
    else:
        fields = (
            '<label>Your name <small>(recorded with each decision)</small><input name="name" required maxlength="60" '
            'autocomplete="username" autofocus></label>'
            '<label>Access token<input name="token" type="password" required autocomplete="current-password"></label>'
        )
        hint = f"The token is in <code>{h(server(request).token_hint)}</code>."
    body = (
        '<div class="login"><h1><span class="mark" aria-hidden="true"></span>tether</h1>'
        "<p>Sign in to see what your agents are waiting for.</p>"
        + (f'<p class="note error" role="alert">{h(problem)}</p>' if problem else "")
        + f'<form method="post" action="{h(root(request))}/login">{hidden("next", nxt)}{fields}'
        '<button class="primary" type="submit">Sign in</button></form>'
        f'<p class="hint">{hint}</p></div>'
    )
    return html(page("Sign in", body, root=root(request), kind="login"), status)


async def login_form(request: Request) -> Response:
    return _login_page(request)


async def login(request: Request) -> Response:
    srv, people = server(request), _people(request)
    form = await _form(request)
    client = str((request.scope.get("client") or ("?", 0))[0])
    name = " ".join(form.get("name", "").split())[:100]
    if people.accounts.any():
        key = f"{client}|{name.lower()}"  # one person's wrong passwords lock out only that name, from that client
        if srv.throttle.retry_after(key):
            return _login_page(request, "Too many wrong passwords for this name: wait a minute.", 429)
        # The hash costs tens of milliseconds (seconds on a loaded machine): off the event loop.
        if not await asyncio.to_thread(people.accounts.check, name, form.get("password", "")):
            srv.throttle.failed(key)
            people.audit.write("sign-in-refused", f"user:{name}", client=client)
            return _login_page(request, "That user name and password do not match.", 401)
        person = True
    else:
        if not same_secret(form.get("token", "").strip(), srv.token):  # the right token always passes
            if srv.throttle.retry_after(client):
                return _login_page(request, "Too many wrong tokens from here: wait a minute.", 429)
            srv.throttle.failed(client)
            return _login_page(request, "That token is not right.", 401)
        if not name:
            return _login_page(request, "Say who you are: your name is recorded with each decision.", 422)
        person = False
    sid = srv.sessions.issue(name, person=person)
    signed = srv.sessions.read(sid)
    assert signed is not None
    people.audit.write("signed-in", signed.reviewer(), client=client)
    response = RedirectResponse(f"{root(request)}{_safe_back(form.get('next', '/'))}", status_code=303)
    _forget_cookies(request, response)  # an earlier session's cookie would make two: nobody
    response.headers.append("set-cookie", session_cookie(request.scope, sid, max_age=srv.sessions.ttl))
    return response


def _forget_cookies(request: Request, response: Response) -> None:
    for name, old in session_cookies(request.scope):
        server(request).sessions.revoke(old)
        response.headers.append("set-cookie", session_cookie(request.scope, "", max_age=0, name=name))


async def logout(request: Request) -> Response:
    form = await _form(request)
    person = who(request)
    if not csrf_ok(person, form.get("csrf", "")):
        return await _error_page(request, ApiError(403, "csrf", "this form is stale: reload the page"))
    server(request).sessions.revoke(session_id(request.scope))  # the cookie's value is worth nothing from now on
    _people(request).audit.write("signed-out", person.reviewer())
    response = RedirectResponse(f"{root(request)}/login", status_code=303)
    _forget_cookies(request, response)
    return response


# -- the audit log -------------------------------------------------------------------------


def _readable(request: Request) -> list[dict[str, Any]]:
    people, person = _people(request), who(request)
    allowed = isinstance(person, Who) and person.person and people.rules.is_one_of(person.name, people.rules.audit)
    if people.on and not allowed:
        readers = ", ".join(people.rules.audit)
        raise ApiError(403, "not-an-auditor", f"the audit log is for {readers} ([audit] readers in the rules file)")
    since = request.query_params.get("since", "0")
    try:
        start = float(since)
    except ValueError:
        raise ApiError(422, "invalid-query", f"since must be a Unix time, got {since!r}") from None
    return list(people.audit.entries(since=start, run_id=request.query_params.get("run_id", "")))


async def audit_lines(request: Request) -> Response:
    """``GET /api/audit``: the log as JSON lines (``since=``: a Unix time; ``run_id=``: one run)."""
    from ._api import error_response

    try:
        entries = _readable(request)
    except ApiError as exc:
        return error_response(exc)
    text = "".join(json.dumps(e, ensure_ascii=False, sort_keys=True) + "\n" for e in entries)
    return Response(text, media_type="application/x-ndjson", headers={"cache-control": "no-store"})


async def audit_page(request: Request) -> Response:
    """``/audit``: the log, newest first (the last 500 steps)."""
    try:
        entries = _readable(request)[-500:]
    except ApiError as exc:
        return await _error_page(request, exc)
    rows = "".join(_row(e) for e in reversed(entries))
    body = (
        '<div class="head"><h1>Audit</h1>'
        f'<p class="sub">{len(entries)} steps, newest first · '
        f'<a href="{h(root(request))}/api/audit">JSON lines</a></p></div>'
        '<table class="audit"><thead><tr><th>When</th><th>Who</th><th>What</th><th>Run</th><th>Item</th>'
        f"<th>Details</th></tr></thead><tbody>{rows}</tbody></table>"
    )
    return await frame(request, "Audit", body, nav="audit")


def _row(e: dict[str, Any]) -> str:
    at = float(e.get("at", 0) or 0)
    details = {k: v for k, v in e.items() if k not in ("at", "step", "who", "run_id", "call_id")}
    return (
        f'<tr><td title="{h(time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at)))} UTC">{clock(at)}</td>'
        f"<td>{h(str(e.get('who', '')))}</td><td>{h(str(e.get('step', '')))}</td>"
        f"<td><code>{h(str(e.get('run_id', '')))}</code></td><td><code>{h(str(e.get('call_id', '')))}</code></td>"
        f"<td>{h(json.dumps(details, ensure_ascii=False, sort_keys=True) if details else '')}</td></tr>"
    )
