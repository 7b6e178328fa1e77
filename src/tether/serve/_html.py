"""HTML for the inbox: the page frame, item cards, a run's story, and highlighted JSON.

Everything here is server-rendered text; every value that came from a run
(arguments, results, messages, names) goes through :func:`h` (HTML escaping,
quotes included) and nothing from a run is ever put in a URL, a script or a
style: an argument holding ``<script>`` or ``javascript:`` is shown as the text
it is. The pages carry no inline script or style (the CSP forbids both).

>>> h('<img src=x onerror="alert(1)">')
'&lt;img src=x onerror=&quot;alert(1)&quot;&gt;'
>>> json_html({"a": [1, "<b>"]})
'<span class="p">{</span>\\n  <span class="k">&quot;a&quot;</span><span class="p">: </span>...'
"""

from __future__ import annotations

import html
import json
import time
from collections.abc import Sequence
from typing import Any, assert_never
from urllib.parse import quote

from ..events import Event
from ..trace import Line, Story
from ._views import ItemView, RunView

__all__ = ["card", "h", "json_html", "page", "run_link", "story", "when"]

CURRENT = ' aria-current="page"'
KIND_LABEL = {"approval": "Approval", "question": "Question", "outcome-unknown": "Outcome unknown"}
STATUS_LABEL = {"needs-decision": "needs decision", "limit-reached": "limit reached"}


def h(value: Any) -> str:
    """Escape for HTML text and attribute values."""
    return html.escape(str(value), quote=True)


def run_link(root: str, run_id: str) -> str:
    return f"{h(root)}/runs/{h(quote(run_id, safe=''))}"


def when(at: float | None) -> str:
    """A ``<time>`` the script turns into "3 min ago"; the UTC time without it."""
    if not at:
        return '<time class="when">—</time>'
    stamp, shown = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at)), time.strftime("%H:%M:%S UTC", time.gmtime(at))
    return f'<time class="when" datetime="{stamp}" data-at="{at:.3f}">{shown}</time>'


def clock(at: float) -> str:
    """An event's time of day (UTC), for logs."""
    return f'<time class="clock">{time.strftime("%H:%M:%S", time.gmtime(at))}</time>' if at else ""


def status_badge(status: str) -> str:
    return f'<span class="status s-{h(status)}">{h(STATUS_LABEL.get(status, status))}</span>'


def page(
    title: str, body: str, *, root: str, csrf: str = "", user: str = "", nav: str = "", kind: str = "", count: int = 0
) -> str:
    """A whole page: head (stylesheet and script from this server only), top bar, body."""
    tabs = (
        ("inbox", "/", f'Inbox <span class="count" id="count">{count or ""}</span>'),
        ("runs", "/runs", "Runs"),
        ("audit", "/audit", "Audit"),
    )
    links = "".join(
        f'<a href="{h(root)}{href}"{CURRENT if nav == name else ""}>{label}</a>' for name, href, label in tabs
    )
    account = ""
    if user:
        account = (
            f'<form method="post" action="{h(root)}/logout" class="logout">{hidden("csrf", csrf)}'
            f'<span class="user" title="Decisions are signed as web:{h(user)}">{h(user)}</span>'
            '<button class="link" type="submit">Log out</button></form>'
        )
    brand = f'<a class="brand" href="{h(root)}/"><span class="mark" aria-hidden="true"></span>tether</a>'
    bar = (
        f'<header class="bar">{brand}'
        f'<nav>{links}</nav><span class="live" id="live" title="Live updates" hidden>offline</span>{account}</header>'
        if user
        else ""
    )
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta name="csrf-token" content="{h(csrf)}"><meta name="root" content="{h(root)}">'
        f"<title>{h(title)} · tether</title>"
        f'<link rel="stylesheet" href="{h(root)}/static/inbox.css">'
        f'<link rel="icon" href="{h(root)}/static/icon.svg" type="image/svg+xml">'
        f'<script src="{h(root)}/static/inbox.js" defer></script></head>'
        f'<body data-page="{h(kind)}">{bar}<main>{body}</main>{HELP if user else ""}</body></html>'
    )


HELP = (
    '<dialog id="help"><h2>Keyboard</h2><dl>'
    "<dt><kbd>j</kbd> <kbd>k</kbd></dt><dd>next / previous item</dd>"
    "<dt><kbd>a</kbd></dt><dd>approve the item as shown</dd>"
    "<dt><kbd>e</kbd></dt><dd>edit the arguments, then approve</dd>"
    "<dt><kbd>d</kbd></dt><dd>deny, with a message for the agent</dd>"
    "<dt><kbd>n</kbd></dt><dd>answer a question</dd>"
    "<dt><kbd>r</kbd> <kbd>s</kbd></dt><dd>run again / skip a call whose outcome is unknown</dd>"
    "<dt><kbd>t</kbd></dt><dd>show or hide what happened so far</dd>"
    "<dt><kbd>o</kbd></dt><dd>open the run</dd>"
    "<dt><kbd>Ctrl</kbd>+<kbd>Enter</kbd></dt><dd>send the form you are typing in</dd>"
    "<dt><kbd>Esc</kbd></dt><dd>close</dd></dl>"
    '<form method="dialog"><button type="submit">Close</button></form></dialog>'
)


def hidden(name: str, value: str) -> str:
    return f'<input type="hidden" name="{h(name)}" value="{h(value)}">'


# -- JSON, highlighted ----------------------------------------------------------------


def json_html(value: Any, indent: int = 0) -> str:
    """Pretty JSON with spans for keys, strings, numbers and literals; every token escaped."""
    pad, inner = "  " * indent, "  " * (indent + 1)
    if isinstance(value, dict) and value:
        rows = [
            f'{inner}<span class="k">{h(json.dumps(k, ensure_ascii=False))}</span><span class="p">: </span>'
            f"{json_html(v, indent + 1)}"
            for k, v in value.items()
        ]
        return '<span class="p">{</span>\n' + ",\n".join(rows) + f'\n{pad}<span class="p">}}</span>'
    if isinstance(value, list) and value:
        rows = [f"{inner}{json_html(v, indent + 1)}" for v in value]
        return '<span class="p">[</span>\n' + ",\n".join(rows) + f'\n{pad}<span class="p">]</span>'
    kind = "s" if isinstance(value, str) else "n" if isinstance(value, int | float) and value is not True else "l"
    if isinstance(value, dict | list):
        kind = "p"
    return f'<span class="{kind}">{h(json.dumps(value, ensure_ascii=False))}</span>'


def arguments_html(item: ItemView) -> str:
    value = item.arguments
    if isinstance(value, str) and value == item.arguments_text:  # not JSON: the text as it is
        return f'<pre class="json raw"><code>{h(value)}</code></pre>'
    return f'<pre class="json"><code>{json_html(value)}</code></pre>'


# -- a run's story ---------------------------------------------------------------------


def _short(text: str, width: int = 400) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def story(events: Sequence[Event], agent: str) -> str:
    """The run so far, the seed's way: you asked, the agent thought, a tool returned."""
    teller, items = Story(agent or "agent"), []
    for n, ev in enumerate(events, 1):
        for line in teller.tell(ev):
            if (shown := _shown(line)) is not None:
                cls, text = shown
                items.append(f'<li class="{cls}{" nested" if line.path else ""}" data-pos="{n}">{text}</li>')
    return f'<ol class="story">{"".join(items)}</ol>'


def _shown(line: Line) -> tuple[str, str] | None:
    """A story line as the inbox shows it: a class and its HTML (``None``: not shown)."""
    who, kind = h(line.agent), line.kind
    match kind:
        case "asked":
            return "asked", f"<b>{f'{who} was asked' if line.path else 'you asked'}</b> “{h(_short(line.text))}”"
        case "resumed":
            return None
        case "thought":
            return "thought", f"<b>{who} thought</b> {h(_short(line.text))}"
        case "call":
            return "call", f"<b>{who} calls</b> <code>{h(line.tool)}({h(_short(line.text, 300))})</code>"
        case "answer" | "finished":
            return None if line.echo else ("final", f"<b>final answer</b> {h(_short(line.text, 2000))}")
        case "result":
            verb, cls = ("failed", "result error") if line.error else ("returned", "result")
            return cls, f"<b>→ {h(line.tool)} {verb}</b> {h(_short(line.text))}"
        case "approval":
            return "wait", f"<b>‖ {h(line.tool)}</b> waits for a person to approve it"
        case "question":
            return "wait", f"<b>? {who} asks</b> “{h(_short(line.text))}”"
        case "decided":
            said = f": “{h(_short(line.text, 200))}”" if line.text else ""
            return "decided", f"<b>✓ {h(line.by or 'someone')} said {h(line.value)}</b> {said}"
        case "handed-off":
            return "handoff", f"<b>⇢ {who} hands off</b> to {h(line.value)}"
        case "child-stopped":
            stopped = f"<b>→ {h(line.tool)} stopped</b> before it finished ({h(line.value)})"
            return None if line.echo else ("result", stopped)
        case "compacted":
            return "note", "<b>compacted</b> older notes were summarised"
        case "noted":
            return "note", f"<b>the model was told</b> {h(_short(line.text))}"
        case "paused":
            return "paused", f"<b>paused</b> for {h(line.value.replace('-', ' '))}"
        case "failed":
            return "ended error", f"<b>failed</b> {h(_short(line.text))}"
        case "cancelled":
            return "ended", f"<b>cancelled</b> {h(_short(line.text))}"
        case "limit-reached":
            return "ended", f"<b>stopped</b> {h(line.text)}"
        case _:
            assert_never(kind)


# -- an item card ---------------------------------------------------------------------


def card(item: ItemView, run: RunView, *, root: str, csrf: str, back: str, open_story: bool = False) -> str:
    """One waiting item: what it is, the run's story, the full arguments, and the buttons."""
    ident = f"item-{quote(item.run_id, safe='')}-{quote(item.call_id, safe='')}"
    name = f"<code>{h(item.tool)}</code>" if not item.label else h(item.label)
    title = f"<h2>{h(item.question)}</h2>" if item.question is not None else f"<h2>{name}</h2>"
    meta = (
        f'<span class="meta">{h(run.agent or "agent")} · <a href="{run_link(root, run.run_id)}">run '
        f"{h(run.run_id[:10])}</a> · asked {when(item.since)}</span>"
    )
    note = f'<p class="note">{h(item.note)}</p>' if item.note else ""
    unknown = (
        f'<p class="note">{h(item.tool)} started but never reported back (its process stopped): '
        "it may or may not have happened. Check, then run it again or skip it.</p>"
        if item.kind == "outcome-unknown"
        else ""
    )
    args = (
        ""
        if item.kind == "question"
        else f'<div class="args"><div class="label">Arguments</div>{arguments_html(item)}</div>'
    )
    details = " open" if open_story else ""
    return (
        f'<article class="item k-{item.kind}" id="{h(ident)}" tabindex="0" data-run="{h(item.run_id)}" '
        f'data-call="{h(item.call_id)}" data-since="{item.since:.3f}">'
        f'<header><span class="badge k-{item.kind}">{KIND_LABEL[item.kind]}</span>{title}{meta}</header>'
        f'<p class="task">“{h(_short(run.task, 600))}”</p>'
        f'<details class="story-box"{details}><summary>What happened so far</summary>'
        f"{story(run.events, run.agent)}</details>"
        f"{args}{note}{unknown}"
        f'<div class="actions">{_actions(item, root=root, csrf=csrf, back=back)}</div>'
        '<p class="outcome" role="status" aria-live="polite"></p></article>'
    )


def _form(item: ItemView, inner: str, *, root: str, csrf: str, back: str, cls: str = "") -> str:
    fields = "".join(
        hidden(k, v)
        for k, v in (
            ("csrf", csrf),
            ("run_id", item.run_id),
            ("call_id", item.call_id),
            ("args_hash", item.args_hash),
            ("back", back),
        )
    )
    return f'<form method="post" action="{h(root)}/decide" class="decide {cls}">{fields}{inner}</form>'


def _more(key: str, summary: str, form: str) -> str:
    """A folded panel (a ``<details>``) holding one more form; ``key`` is its keyboard shortcut."""
    return f'<details class="more" data-key="{key}"><summary>{summary}</summary>{form}</details>'


PROBLEMS = '<p class="problems" aria-live="polite"></p>'


def _actions(item: ItemView, **where: str) -> str:
    if item.kind == "approval":
        return _approval_actions(item, **where)
    if item.kind == "question":
        return _answer_form(item, **where)
    retry = '<button class="primary" name="verdict" value="retry" data-key="r">Run it again</button>'
    skip = (
        '<label>Message for the agent<textarea name="message" rows="3"></textarea></label>'
        '<button name="verdict" value="skip">Skip it</button>'
    )
    return _form(item, retry, **where) + _more("s", "Skip…", _form(item, skip, **where))


def _approval_actions(item: ItemView, **where: str) -> str:
    value = item.arguments
    text = value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)
    schema = h(json.dumps(item.parameters or {}))
    approve = '<button class="primary" name="verdict" value="approve" data-key="a">Approve</button>'
    edit = (
        "<label>Arguments (JSON, checked against the tool's schema)"
        f'<textarea name="args" rows="8" spellcheck="false" data-schema="{schema}">{h(text)}</textarea></label>'
        f'{PROBLEMS}<button name="verdict" value="approve">Approve with these arguments</button>'
    )
    deny = (
        '<label>Message for the agent (it reads this)<textarea name="message" rows="3"></textarea></label>'
        '<button class="danger" name="verdict" value="deny">Deny</button>'
    )
    return (
        _form(item, approve, **where)
        + _more("e", "Edit &amp; approve", _form(item, edit, cls="edit", **where))
        + _more("d", "Deny…", _form(item, deny, **where))
    )


def _answer_form(item: ItemView, **where: str) -> str:
    schema = item.answer_schema or {"type": "string"}
    choices = schema.get("enum")
    if isinstance(choices, list) and all(isinstance(c, str) for c in choices):
        buttons = "".join(f'<button name="answer" value="{h(c)}" data-choice>{h(c)}</button>' for c in choices)
        inner = f'{hidden("verdict", "answer")}{hidden("as", "text")}<div class="choices" data-key="n">{buttons}</div>'
        return _form(item, inner, cls="answer", **where)
    text = schema.get("type") == "string"
    field = (
        f'<label>Your answer{"" if text else " (JSON)"}<textarea name="answer" rows="{2 if text else 5}" required '
        f'data-key="n" data-schema="{h(json.dumps(schema))}" data-json="{"" if text else "1"}"></textarea></label>'
        f"{PROBLEMS}"
    )
    send = '<button class="primary" name="verdict" value="answer">Send answer</button>'
    inner = f"{hidden('as', 'text' if text else 'json')}{field}{send}"
    return _form(item, inner, cls="answer", **where)
