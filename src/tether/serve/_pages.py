"""The web inbox: pages a person uses to see what waits for them and decide.

``/`` lists every waiting item, newest first; ``/runs`` the runs; ``/runs/{id}``
one run with its story and a live event log (``/login`` and ``/audit``
live in :mod:`._login`). Decisions are plain HTML forms (``POST /decide``, with
the session's CSRF token and the hash of the arguments shown), so the inbox
works without JavaScript; the script (``/static/inbox.js``) sends the same
forms in the background, keeps the page live over SSE, checks edited JSON
against the tool's schema, and adds keyboard shortcuts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, RedirectResponse, Response

from ..events import PERSISTED
from ..parts import safe_text
from ..pending import VERBS
from ._api import error_response, parse_json, read_bytes, reply
from ._cards import card
from ._forms import edited_args
from ._html import ASKER, clock, h, hidden, page, run_id_html, run_link, status_badge, story, when
from ._security import csrf_ok, route_path
from ._service import ApiError, chosen
from ._state import served as server
from ._views import RunView, summary_json

__all__ = ["decide", "fragment", "inbox", "run_page", "runs_page", "static"]

STATIC = Path(__file__).parent / "static"
NOTICES = {
    "approve": "Approved: the run goes on.",
    "deny": "Denied: the agent will read your message.",
    "retry": "The call will run again.",
    "skip": "Skipped: the agent will be told.",
    "answer": "Answer sent: the run goes on.",
    "cancel": "The run was cancelled.",
}


def root(request: Request) -> str:
    return str(request.scope.get("root_path", ""))


def who(request: Request) -> Any:
    return request.scope.get("tether.who")


def html(text: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(safe_text(text), status_code=status, headers={"cache-control": "no-store"})


async def frame(request: Request, title: str, body: str, *, nav: str = "", kind: str = "") -> HTMLResponse:
    person = who(request)
    if person is None or person.kind not in ("session", "proxy"):
        return html(page(title, body, root=root(request), kind=kind))
    count = len(await server(request).service.waiting(person))
    return html(
        page(title, body, root=root(request), csrf=person.csrf, user=person.name, nav=nav, kind=kind, count=count)
    )


def _csrf(request: Request) -> str:
    person = who(request)
    return person.csrf if person is not None else ""


# -- the inbox ---------------------------------------------------------------------------


PAGE = 50  # items on one page of the inbox


def _page_number(request: Request) -> int:
    text = request.query_params.get("page", "1")
    return min(int(text), 100_000) if text.isdigit() and int(text) > 0 else 1


async def inbox(request: Request) -> Response:
    srv = server(request)
    items = await srv.service.waiting(who(request))  # only what this person may decide
    number = _page_number(request)
    shown = items[(number - 1) * PAGE : number * PAGE]
    cards, told = [], set()
    for item in shown:
        run = await srv.service.views.get(item.run_id)
        if run is not None:  # the story of a run once per page: on its first card here
            first = item.run_id not in told
            told.add(item.run_id)
            cards.append(_card(request, item, run, back="/", with_story=first))
    notice = NOTICES.get(request.query_params.get("notice", ""), "")
    body = (
        '<div class="head"><h1>Waiting for you</h1>'
        f'<p class="sub"><span id="summary">{_summary(len(items))}</span> · newest first · '
        "press <kbd>?</kbd> for shortcuts</p></div>"
        + (f'<p class="flash" role="status">{h(notice)}</p>' if notice else "")
        + f'<div id="items" data-elsewhere="{len(items) - len(shown)}">{"".join(cards)}</div>'
        + _pager(request, number, len(items))
        + f'<div class="empty" id="empty"{" hidden" if shown else ""}><p><b>Nothing is waiting for you'
        f"{' on this page' if items else ''}.</b></p>"
        "<p>When an agent asks for approval or a question, it appears here by itself.</p></div>"
    )
    return await frame(request, "Inbox", body, nav="inbox", kind="inbox")


def _asker(request: Request) -> str:
    return str(getattr(server(request), "asker", None) or ASKER)


def _card(
    request: Request, item: Any, run: RunView, *, back: str, with_story: bool = True, run_page: bool = False
) -> str:
    where = {"root": root(request), "csrf": _csrf(request), "back": back, "asker": _asker(request)}
    return card(item, run, with_story=with_story, run_page=run_page, **where)


def _pager(request: Request, number: int, total: int) -> str:
    pages = max(1, -(-total // PAGE))
    if pages == 1:
        return ""
    newer = f'<a class="button" href="{h(root(request))}/?page={number - 1}">Newer</a>' if number > 1 else ""
    older = f'<a class="button" href="{h(root(request))}/?page={number + 1}">Older</a>' if number < pages else ""
    return f'<nav class="pager">{newer}<span>page {number} of {pages}</span>{older}</nav>'


def _summary(n: int) -> str:
    return "no items" if n == 0 else f"{n} item{'s' if n != 1 else ''}"


async def fragment(request: Request) -> Response:
    """The waiting items of one run, as cards (for the live inbox); empty when none wait."""
    run = await server(request).service.views.get(request.path_params["run_id"])
    if run is None:
        return html("")
    back = _safe_back(request.query_params.get("back", "/"))
    mine = server(request).people.visible(who(request), run.waiting, {run.run_id: run})
    waiting = mine[:PAGE]  # a live update adds at most a page
    return html("".join(_card(request, i, run, back=back, with_story=n == 0) for n, i in enumerate(waiting)))


# -- runs --------------------------------------------------------------------------------


async def runs_page(request: Request) -> Response:
    status = request.query_params.get("status") or None
    offset = (
        int(request.query_params.get("offset", "0") or 0) if request.query_params.get("offset", "0").isdigit() else 0
    )
    runs, more = await server(request).service.runs(status=status, agent=None, limit=50, offset=offset)
    rows = "".join(_run_row(request, v) for v in runs)
    filters = "".join(_filter(request, s, label, s == (status or "")) for s, label in FILTERS)
    also = f"&status={quote(status)}" if status else ""
    nxt = f'<p><a class="button" href="{h(root(request))}/runs?offset={more}{also}">Older runs</a></p>' if more else ""
    table = (
        '<table class="runs"><thead><tr><th>Status</th><th>Task</th><th>Agent</th><th>Waiting</th><th>Updated</th>'
        "</tr></thead>"
        f"<tbody>{rows}</tbody></table>"
        if rows
        else '<div class="empty"><p>No runs here yet.</p></div>'
    )
    body = f'<div class="head"><h1>Runs</h1><nav class="filters">{filters}</nav></div>{table}{nxt}'
    return await frame(request, "Runs", body, nav="runs", kind="runs")


FILTERS = (
    ("", "all"),
    ("paused", "paused"),
    ("needs-decision", "needs decision"),
    ("running", "running"),
    ("finished", "finished"),
    ("failed", "failed"),
    ("cancelled", "cancelled"),
)


def _filter(request: Request, status: str, label: str, current: bool) -> str:
    query = f"?status={quote(status)}" if status else ""
    mark = ' aria-current="page"' if current else ""
    return f'<a href="{h(root(request))}/runs{query}"{mark}>{h(label)}</a>'


def _run_row(request: Request, v: RunView) -> str:
    s = summary_json(v)
    waiting = f'<span class="count">{s["waiting"]}</span>' if s["waiting"] else "—"
    return (
        f"<tr><td>{status_badge(v.status)}</td>"
        f'<td><a href="{run_link(root(request), v.run_id)}">{h(v.task[:140] or v.run_id)}</a></td>'
        f"<td>{h(v.agent)}</td><td>{waiting}</td><td>{when(v.updated_at)}</td></tr>"
    )


async def run_page(request: Request) -> Response:
    run_id = request.path_params["run_id"]
    run = await server(request).service.views.get(run_id)
    if run is None:
        response = await frame(request, "No such run", f'<div class="empty"><p>There is no run {h(run_id)}.</p></div>')
        response.status_code = 404
        return response
    server(request).people.showed(who(request), run)
    return await frame(request, f"Run {run_id}", run_body(request, run), kind="run")


def run_body(request: Request, run: RunView) -> str:
    back = f"/runs/{quote(run.run_id, safe='')}"
    mine = server(request).people.visible(who(request), run.waiting, {run.run_id: run})  # what this person decides
    cards = "".join(_card(request, i, run, back=back, run_page=True) for i in mine)
    answer = (
        f'<section class="answer"><h2>Answer</h2><p>{h(run.output)}</p></section>' if run.output is not None else ""
    )
    error = f'<p class="note error">{h(run.error)}</p>' if run.error else ""
    cancel = ""
    if run.status != "finished" and not run.closed:
        where = f"{h(root(request))}/runs/{h(quote(run.run_id, safe=''))}/cancel"
        cancel = (
            f'<form method="post" action="{where}" class="cancel">'
            f'{hidden("csrf", _csrf(request))}<button class="danger quiet" type="submit">Cancel run</button></form>'
        )
    return (
        f'<div class="head run-head" id="run" data-run="{h(run.run_id)}" data-seq="{run.seq}">'
        f'<p class="crumbs"><a href="{h(root(request))}/runs">Runs</a> / {run_id_html(run.run_id)}</p>'
        f"<h1>“{h(run.task[:300])}”</h1>"
        f'<div class="sub-row"><p class="sub">{status_badge(run.status)} {h(run.agent)} · '
        f"started {when(run.created_at)}"
        f"{_usage(run)}</p>{cancel}</div></div>"
        f'{error}{answer}<div id="items">{cards}</div>'
        f'<section class="panel"><h2>Story</h2>{story(run.events, run.agent, asker=_asker(request))}</section>'
        f'<section class="panel"><h2>Live events</h2><ol class="events" id="events" data-after="{run.seq}" '
        f'data-kinds="{h(" ".join(sorted(PERSISTED)))}">'
        + "".join(
            f'<li><span class="pos">{n}</span> {clock(ev.at)} {h(ev.kind)}</li>' for n, ev in enumerate(run.events, 1)
        )
        + "</ol></section>"
    )


def _usage(run: RunView) -> str:
    tokens = run.usage["input_tokens"] + run.usage["output_tokens"]
    return f" · {run.usage['requests']} model requests, {tokens:,} tokens" if run.usage["requests"] else ""


async def run_fragment(request: Request) -> Response:
    run = await server(request).service.views.get(request.path_params["run_id"])
    return html(run_body(request, run) if run is not None else "")


# -- decisions from forms ----------------------------------------------------------------


async def _form(request: Request) -> dict[str, str]:
    raw = await read_bytes(request, 1024 * 1024)
    return {k: v[0] for k, v in parse_qs(raw.decode("utf-8", "replace"), keep_blank_values=True).items()}


def _safe_back(back: str) -> str:
    return back if back.startswith("/") and not back.startswith("//") and "\\" not in back else "/"


def _wants_json(request: Request) -> bool:
    return "application/json" in request.headers.get("accept", "")


async def decide(request: Request) -> Response:
    """``POST /decide``: one verdict from a form (JSON back for the script, a redirect without it)."""
    try:
        form = await _form(request)
        if not csrf_ok(who(request), form.get("csrf", "")):
            raise ApiError(403, "csrf", "this form is stale or not from this inbox: reload the page")
        verdict = form.get("verdict", "")
        payload = {"args": _edited(form), "message": form.get("message", ""), "answer": _answer(form)}
        choice = chosen(verdict, form.get("call_id", ""), args_hash=form.get("args_hash", ""), **payload)
        person = who(request)
        run = await server(request).service.decide(form.get("run_id", ""), choice, by=person.reviewer(), who=person)
    except ApiError as exc:
        return error_response(exc) if _wants_json(request) else await _error_page(request, exc)
    if _wants_json(request):
        notice = NOTICES.get(verdict, f"{VERBS[choice.verdict].done.capitalize()}.")
        return reply({"ok": True, "notice": notice, "run_id": run.run_id})
    return RedirectResponse(f"{root(request)}{_safe_back(form.get('back', '/'))}?notice={verdict}", status_code=303)


def _edited(form: dict[str, str]) -> dict[str, Any] | None:
    """Edited arguments: from the schema's fields (``arg:NAME``), or the JSON box (``args``); None if neither."""
    try:
        fields = edited_args(form, lambda text: parse_json(text, "a field"))
    except (ValueError, ApiError) as exc:
        raise ApiError(422, "invalid-arguments", getattr(exc, "message", str(exc))) from None
    if fields is not None:
        return fields
    text = form.get("args", "").strip()
    if not text:
        return None
    try:
        value = parse_json(text, "the edited arguments")
    except ApiError as exc:
        raise ApiError(422, "invalid-arguments", exc.message) from None
    if not isinstance(value, dict):
        raise ApiError(422, "invalid-arguments", "the edited arguments must be a JSON object")
    return value


def _answer(form: dict[str, str]) -> Any:
    if form.get("verdict") != "answer":
        return None
    text = form.get("answer", "")
    if form.get("as") != "json":
        if not text.strip():
            raise ApiError(422, "invalid-answer", "the answer is empty")
        return text
    try:
        return parse_json(text, "the answer")
    except ApiError as exc:
        raise ApiError(422, "invalid-answer", exc.message) from None


async def _error_page(request: Request, exc: ApiError) -> Response:
    head, cls = ("Recorded", "flash") if exc.status < 300 else ("That did not go through", "note error")  # 202: 1 of N
    body = (
        f'<div class="head"><h1>{head}</h1></div><p class="{cls}">{h(exc.message)}</p>'
        f'<p><a class="button" href="{h(root(request))}/">Back to the inbox</a></p>'
    )
    response = await frame(request, "Not done", body)
    response.status_code = exc.status
    return response


async def cancel(request: Request) -> Response:
    try:
        form = await _form(request)
        if not csrf_ok(who(request), form.get("csrf", "")):
            raise ApiError(403, "csrf", "this form is stale or not from this inbox: reload the page")
        run_id = request.path_params["run_id"]
        await server(request).service.cancel(run_id, reason="", by=who(request).reviewer(), who=who(request))
    except ApiError as exc:
        return error_response(exc) if _wants_json(request) else await _error_page(request, exc)
    return RedirectResponse(f"{root(request)}/runs/{quote(run_id, safe='')}?notice=cancel", status_code=303)


async def static(request: Request) -> Response:
    name = request.path_params["name"]
    path = STATIC / name
    if "/" in name or name.startswith(".") or not path.is_file():
        return Response("not found", status_code=404, media_type="text/plain")
    return FileResponse(path, headers={"cache-control": "no-cache"})


def is_page(request: Request) -> bool:
    return not route_path(request.scope).startswith("/api/")
