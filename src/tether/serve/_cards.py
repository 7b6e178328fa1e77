"""An item card: what waits, in words a person who is not a developer reads, and the forms that decide it.

A card names the tool in words and carries the tool's own description, the
task as the customer wrote it (:data:`~tether.serve._html.ASKER`), the run's
story (once per run on a page: later cards of the same run point up to it),
the arguments as rows from the tool's schema (:mod:`tether.serve._forms`) with
the raw JSON behind a toggle, and the buttons. An approval's "Edit" is a form
made from the schema, with the JSON box one click further. An item whose
outcome is unknown offers the safe choice first ("Don't run it again"); running
it again sits behind a warning.
"""

from __future__ import annotations

import json
from urllib.parse import quote

from ._forms import arguments_view, edit_fields, title_of
from ._html import ASKER, h, hidden, run_id_html, run_link, short, story, when
from ._views import ItemView, RunView

__all__ = ["STORY_LINES", "card"]

KIND_LABEL = {"approval": "Approval", "question": "Question", "outcome-unknown": "Outcome unknown"}
STORY_LINES = 30  # a card shows the last so many lines of the story; the run's page shows it all
PROBLEMS = '<p class="problems" aria-live="polite"></p>'


def card(
    item: ItemView,
    run: RunView,
    *,
    root: str,
    csrf: str,
    back: str,
    with_story: bool = True,
    asker: str = ASKER,
    run_page: bool = False,
) -> str:
    """One waiting item (``with_story=False``: on an earlier card of the page; ``run_page``: in the page's panel)."""
    ident = f"item-{quote(item.run_id, safe='')}-{quote(item.call_id, safe='')}"
    named = f"{h(title_of(item.tool, {}))} <code>{h(item.tool)}</code>"
    title = f"<h2>{h(item.question)}</h2>" if item.question is not None else f"<h2>{named}</h2>"
    where = f'<span class="where">{h(item.label)}</span>' if item.label else ""
    meta = (
        f'<span class="meta">{h(run.agent or "agent")} · <a href="{run_link(root, run.run_id)}">run '
        f"{run_id_html(run.run_id)}</a> · asked {when(item.since)}</span>"
    )
    about = _about(item)
    note = f'<p class="note">{h(item.note)}</p>' if item.note else ""
    told = "" if run_page else _story_box(run, root, asker) if with_story else _same_run(run, root)
    doing = "What it will do" if item.kind == "approval" else "What it was doing"
    args = (
        ""
        if item.kind == "question"
        else f'<div class="args"><div class="label">{doing}</div>'
        f"{arguments_view(item.arguments, item.parameters, item.arguments_text)}</div>"
    )
    asked = h(asker[:1].upper() + asker[1:])
    return (
        f'<article class="item k-{item.kind}" id="{h(ident)}" tabindex="0" data-run="{h(item.run_id)}" '
        f'data-call="{h(item.call_id)}" data-since="{item.since:.3f}">'
        f'<header><span class="badge k-{item.kind}">{KIND_LABEL[item.kind]}</span>{title}{where}{meta}</header>'
        f"{about}"
        f'<p class="task"><span class="who">{asked} wrote</span> “{h(short(run.task, 600))}”</p>'
        f"{told}{args}{note}{_unknown(item)}"
        f'<div class="actions">{_actions(item, root=root, csrf=csrf, back=back)}</div>'
        '<p class="outcome" role="status" aria-live="polite"></p></article>'
    )


def _story_box(run: RunView, root: str, asker: str) -> str:
    told = story(run.events, run.agent, asker=asker, last=STORY_LINES)
    return f'<details class="story-box"><summary>What happened so far</summary>{told}</details>'


def _same_run(run: RunView, root: str) -> str:
    return (
        '<p class="same-run">Same run as the item above: its story is shown there, or '
        f'<a href="{run_link(root, run.run_id)}">open the run</a>.</p>'
    )


def _about(item: ItemView) -> str:
    """The tool's own description (its first paragraph), when the tool is served here."""
    tool = item.tool_ref
    text = (tool.description or "").strip().split("\n\n")[0] if tool is not None else ""
    return f'<p class="about-tool">{h(" ".join(text.split()))}</p>' if text and item.kind != "question" else ""


def _unknown(item: ItemView) -> str:
    if item.kind != "outcome-unknown":
        return ""
    return (
        f'<p class="note warn">{h(title_of(item.tool, {}))} started but never reported back (its process '
        "stopped): it may or may not have happened. Check first. If it happened, or you cannot tell, "
        "do not run it again.</p>"
    )


def _form(item: ItemView, inner: str, *, root: str, csrf: str, back: str, cls: str = "", schema: str = "") -> str:
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
    data = f' data-schema="{h(schema)}"' if schema else ""
    return f'<form method="post" action="{h(root)}/decide" class="decide {cls}"{data}>{fields}{inner}</form>'


def _more(key: str, summary: str, form: str, cls: str = "") -> str:
    """A folded panel (a ``<details>``) holding one more form; ``key`` is its keyboard shortcut."""
    return f'<details class="more {cls}" data-key="{key}"><summary>{summary}</summary>{form}</details>'


def _actions(item: ItemView, **where: str) -> str:
    if item.kind == "approval":
        return _approval_actions(item, **where)
    if item.kind == "question":
        return _answer_form(item, **where)
    keep = (
        "<label>Message for the agent <small>(optional: what you found)</small>"
        '<textarea name="message" rows="2"></textarea></label>'
        '<button class="primary" name="verdict" value="skip" data-key="s">Don\'t run it again</button>'
    )
    again = (
        '<p class="note warn">Only if you checked that it did <b>not</b> happen: running it again may do it twice.</p>'
        '<button class="danger" name="verdict" value="retry">Run it again</button>'
    )
    return _form(item, keep, cls="keep", **where) + _more("r", "Run it again…", _form(item, again, **where))


def _approval_actions(item: ItemView, **where: str) -> str:
    value = item.arguments
    text = value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)
    schema = json.dumps(item.parameters or {})
    approve = '<button class="primary" name="verdict" value="approve" data-key="a">Approve</button>'
    as_json = (
        "<label>Arguments as JSON <small>(checked against the tool's schema)</small>"
        f'<textarea name="args" rows="8" spellcheck="false" data-schema="{h(schema)}">{h(text)}</textarea></label>'
        f'{PROBLEMS}<button name="verdict" value="approve">Approve with this JSON</button>'
    )
    fields = edit_fields(value, item.parameters)
    if fields:
        by_fields = f'{fields}{PROBLEMS}<button name="verdict" value="approve">Approve with these changes</button>'
        edit = _form(item, by_fields, cls="edit fields-edit", schema=schema, **where) + _more(
            "json", "Edit as JSON instead", _form(item, as_json, cls="edit", **where), "json-edit"
        )
    else:
        edit = _form(item, as_json, cls="edit", **where)
    deny = (
        '<label>Message for the agent (it reads this)<textarea name="message" rows="3"></textarea></label>'
        '<button class="danger" name="verdict" value="deny">Deny</button>'
    )
    return (
        _form(item, approve, **where)
        + _more("e", "Edit &amp; approve", edit)
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
