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
from ..parts import safe_text
from ..trace import Line, Story

__all__ = ["ASKER", "h", "json_html", "page", "run_id_html", "run_link", "short", "story", "when"]

CURRENT = ' aria-current="page"'
KIND_LABEL = {"approval": "Approval", "question": "Question", "outcome-unknown": "Outcome unknown"}
STATUS_LABEL = {"needs-decision": "needs decision", "limit-reached": "limit reached"}


def h(value: Any) -> str:
    """Escape for HTML text and attribute values (a lone surrogate, which no page can carry, shown as U+FFFD)."""
    return safe_text(html.escape(str(value), quote=True))


def run_link(root: str, run_id: str) -> str:
    return f"{h(root)}/runs/{h(quote(run_id, safe=''))}"


def run_id_html(run_id: str) -> str:
    """A run id whole (never cut), ellipsized by the stylesheet where it does not fit, with a tooltip."""
    return f'<code class="rid" title="{h(run_id)}">{h(run_id)}</code>'


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
    tabs = (("inbox", "/", f'Inbox <span class="count" id="count">{count or ""}</span>'), ("runs", "/runs", "Runs"))
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
    "<dt><kbd>s</kbd> <kbd>r</kbd></dt><dd>do not run again / run again a call whose outcome is unknown</dd>"
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


# -- a run's story ---------------------------------------------------------------------


def short(text: str, width: int = 400) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


ASKER = "the customer"
"""Who the inbox says wrote a run's task, unless the server is told otherwise (``Server(asker=...)``)."""
VERDICTS = {  # a decision as the story tells it: an icon, a class, and what the person did
    "approve": ("✓", "ok", "approved"),
    "deny": ("✕", "no", "denied"),
    "skip": ("⤼", "skip", "skipped"),
    "retry": ("↻", "retry", "asked to run it again"),
    "answer": ("✎", "ok", "answered"),
}
NOT_RUN = {"deny": "was not run (denied)", "skip": "was not run again (skipped)"}


def story(events: Sequence[Event], agent: str, *, asker: str = ASKER, last: int | None = None) -> str:
    """The run so far: what the customer asked, what the agent thought and called, what people decided.

    ``last``: show only the last so many lines, with a line saying how many came before.
    """
    teller, items, said = Story(agent or "agent"), [], {}
    for n, ev in enumerate(events, 1):
        for line in teller.tell(ev):
            if line.kind == "decided":
                said[line.call_id] = line.value
            if (shown := _shown(line, asker, said)) is not None:
                cls, text = shown
                items.append(f'<li class="{cls}{" nested" if line.path else ""}" data-pos="{n}">{text}</li>')
    if last is not None and len(items) > last:
        more = len(items) - last
        earlier = f'<li class="note earlier">… {more} earlier step{"s" if more != 1 else ""}: open the run</li>'
        items = [earlier, *items[-last:]]
    return f'<ol class="story">{"".join(items)}</ol>'


def _shown(line: Line, asker: str, said: dict[str, str]) -> tuple[str, str] | None:
    """A story line as the inbox shows it: a class and its HTML (``None``: not shown)."""
    who, kind = h(line.agent), line.kind
    match kind:
        case "asked":
            said_by = f"{who} was asked" if line.path else f"{h(asker[:1].upper() + asker[1:])} wrote"
            return "asked", f"<b>{said_by}</b> “{h(short(line.text))}”"
        case "resumed":
            return None
        case "thought":
            return "thought", f"<b>{who} thought</b> {h(short(line.text))}"
        case "call":
            return "call", f"<b>{who} calls</b> <code>{h(line.tool)}({h(short(line.text, 300))})</code>"
        case "answer" | "finished":
            return None if line.echo else ("final", f"<b>final answer</b> {h(short(line.text, 2000))}")
        case "result":
            if line.error and said.get(line.call_id) in NOT_RUN:  # the person's own choice, not a failure
                return "result not-run", f"<b>→ {h(line.tool)} {NOT_RUN[said[line.call_id]]}</b> {h(short(line.text))}"
            verb, cls = ("failed", "result error") if line.error else ("returned", "result")
            return cls, f"<b>→ {h(line.tool)} {verb}</b> {h(short(line.text))}"
        case "approval":
            return "wait", f"<b>‖ {h(line.tool)}</b> waits for a person to approve it"
        case "question":
            return "wait", f"<b>? {who} asks</b> “{h(short(line.text))}”"
        case "decided":
            icon, cls, did = VERDICTS.get(line.value, ("•", "", line.value))
            said_text = f": “{h(short(line.text, 200))}”" if line.text else ""
            mark = f'<span class="icon" aria-hidden="true">{icon}</span>'
            return f"decided v-{cls}", f"<b>{mark} {h(line.by or 'someone')} {h(did)}</b>{said_text}"
        case "handed-off":
            return "handoff", f"<b>⇢ {who} hands off</b> to {h(line.value)}"
        case "child-stopped":
            stopped = f"<b>→ {h(line.tool)} stopped</b> before it finished ({h(line.value)})"
            return None if line.echo else ("result", stopped)
        case "compacted":
            return "note", "<b>compacted</b> older notes were summarised"
        case "noted":
            return "note", f"<b>the model was told</b> {h(short(line.text))}"
        case "paused":
            return "paused", f"<b>paused</b> for {h(line.value.replace('-', ' '))}"
        case "failed":
            return "ended error", f"<b>failed</b> {h(short(line.text))}"
        case "cancelled":
            return "ended", f"<b>cancelled</b> {h(short(line.text))}"
        case "limit-reached":
            return "ended", f"<b>stopped</b> {h(line.text)}"
        case _:
            assert_never(kind)
