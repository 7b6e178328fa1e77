"""A call's arguments as a person reads them, and the form that edits them, both from the tool's JSON Schema.

Each argument is a row: its title (the schema's ``title``, or the name in words:
``order_id`` -> "Order id"), its description, and its value shown as what it
is: an amount of money as money (``"format": "money"``, or a number named
``amount``, ``price``, ``total``...; the currency is ``"x-currency"``, ``$``
by default), a choice as a chip, a yes/no as Yes or No, text as text. The raw
JSON is one click away. The edit form has one field per argument: a number
input with the schema's bounds, a select for a choice, a select for yes/no, a
text input, and a JSON box for anything nested. The browser refuses what the
bounds refuse; the server reads the fields back by their types
(:func:`edited_args`) and checks the result against the tool's schema, so
nothing the form lets through is trusted.

>>> title_of("order_id", {})
'Order id'
>>> kind_of("amount", {"type": "integer"}), kind_of("reason", {"enum": ["late", "damaged"]})
('money', 'enum')
>>> money(1234.5, {})
'$1,234.50'
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ._html import h, json_html

__all__ = ["Field", "arguments_view", "edit_fields", "edited_args", "fields_of", "kind_of", "money", "title_of"]

MONEY = re.compile(r"(^|_)(amount|price|cost|total|fee|refund|balance|payment|charge|sum)s?($|_)", re.IGNORECASE)
PREFIX = "arg:"  # an edit form's field for argument NAME is "arg:NAME"; its type is in "type:NAME"


@dataclass(frozen=True, slots=True)
class Field:
    """One argument of a tool, as its schema describes it."""

    name: str
    schema: dict[str, Any]
    required: bool
    kind: str  # money, enum, integer, number, boolean, text, json

    @property
    def title(self) -> str:
        return title_of(self.name, self.schema)

    @property
    def description(self) -> str:
        text = self.schema.get("description")
        return text if isinstance(text, str) else ""


def title_of(name: str, schema: dict[str, Any]) -> str:
    title = schema.get("title")
    if isinstance(title, str) and title.strip():
        return title
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name).replace("_", " ").replace("-", " ").strip()
    return (words[:1].upper() + words[1:].lower()) if words else name


def kind_of(name: str, schema: dict[str, Any]) -> str:
    """How a value of this schema is shown and edited."""
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return "enum"
    kind = schema.get("type")
    if kind in ("integer", "number"):
        return "money" if schema.get("format") in ("money", "currency") or MONEY.search(name) else kind
    if kind == "boolean":
        return "boolean"
    if kind == "string":
        return "text"
    return "json"


def fields_of(schema: dict[str, Any] | None) -> list[Field]:
    """The tool's arguments, in the schema's order (none when the schema names no properties)."""
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        return []
    given = schema.get("required")
    required: list[Any] = given if isinstance(given, list) else []
    out = []
    for name, sub in schema["properties"].items():
        sub = _resolved(sub, schema)
        out.append(Field(str(name), sub, name in required, kind_of(str(name), sub)))
    return out


def _resolved(sub: Any, top: dict[str, Any]) -> dict[str, Any]:
    """A property's schema, following one local ``$ref`` (nested models) and an ``Optional``'s ``anyOf``."""
    if not isinstance(sub, dict):
        return {}
    ref = sub.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        found = (top.get("$defs") or {}).get(ref.rpartition("/")[2])
        return {**found, **{k: v for k, v in sub.items() if k != "$ref"}} if isinstance(found, dict) else sub
    options = sub.get("anyOf")
    if isinstance(options, list):
        real = [o for o in options if isinstance(o, dict) and o.get("type") != "null"]
        if len(real) == 1:
            return {**real[0], **{k: v for k, v in sub.items() if k != "anyOf"}}
    return sub


def money(value: Any, schema: dict[str, Any]) -> str:
    currency = schema.get("x-currency") if isinstance(schema.get("x-currency"), str) else "$"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    sign = "-" if value < 0 else ""
    return f"{sign}{currency}{abs(value):,.2f}"


# -- showing -----------------------------------------------------------------------------


def _shown(field: Field, value: Any) -> str:
    if field.kind == "money" and isinstance(value, int | float) and not isinstance(value, bool):
        return f'<span class="money">{h(money(value, field.schema))}</span>'
    if field.kind == "enum" and isinstance(value, str | int | float | bool):
        return f'<span class="chip">{h(value)}</span>'
    if field.kind == "boolean" and isinstance(value, bool):
        return f'<span class="yesno">{"Yes" if value else "No"}</span>'
    if isinstance(value, str):
        return f'<span class="text">{h(value)}</span>' if value else '<span class="blank">(empty)</span>'
    return f'<pre class="json"><code>{json_html(value)}</code></pre>'


def _row(title: str, description: str, value: str, name: str) -> str:
    about = f'<small class="about">{h(description)}</small>' if description else ""
    return f'<div class="field" data-arg="{h(name)}"><dt>{h(title)}{about}</dt><dd>{value}</dd></div>'


def arguments_view(value: Any, schema: dict[str, Any] | None, raw: str) -> str:
    """The arguments as rows from the schema, then the raw JSON behind a toggle."""
    fields = fields_of(schema)
    raw_json = f'<pre class="json"><code>{json_html(value)}</code></pre>' if not isinstance(value, str) else ""
    if not fields or not isinstance(value, dict):
        return raw_json or f'<pre class="json raw"><code>{h(raw)}</code></pre>'
    known = {f.name for f in fields}
    rows = [_row(f.title, f.description, _shown(f, value[f.name]), f.name) for f in fields if f.name in value]
    rows += [
        _row(str(k), "not a field of this tool", _shown(Field(k, {}, False, "json"), v), k)
        for k, v in value.items()
        if k not in known
    ]
    return (
        f'<dl class="fields">{"".join(rows)}</dl>'
        f'<details class="raw-json"><summary>Raw JSON</summary>{raw_json}</details>'
    )


# -- editing -----------------------------------------------------------------------------


def _number_attrs(field: Field) -> str:
    s, integer = field.schema, field.schema.get("type") == "integer"
    step = "1" if integer else "0.01" if field.kind == "money" else "any"
    attrs = [f'step="{step}"']
    low, high = s.get("minimum"), s.get("maximum")
    if isinstance(s.get("exclusiveMinimum"), int | float):
        low = s["exclusiveMinimum"] + (1 if integer else 0.01 if field.kind == "money" else 0)
    if isinstance(s.get("exclusiveMaximum"), int | float):
        high = s["exclusiveMaximum"] - (1 if integer else 0.01 if field.kind == "money" else 0)
    attrs += [f'min="{low}"'] if isinstance(low, int | float) else []
    attrs += [f'max="{high}"'] if isinstance(high, int | float) else []
    return " ".join(attrs)


def _selected(yes: bool) -> str:
    return " selected" if yes else ""


def _input(field: Field, value: Any, present: bool) -> tuple[str, str]:
    """The control for one argument and the type the server reads it as."""
    name, need = h(PREFIX + field.name), " required" if field.required else ""
    if field.kind == "enum":
        choices = field.schema["enum"]
        typed = "text" if all(isinstance(c, str) for c in choices) else "json"
        blank = "" if field.required else '<option value="">(none)</option>'
        options = "".join(
            f'<option value="{h(c if typed == "text" else json.dumps(c))}"{_selected(present and c == value)}>'
            f"{h(c)}</option>"
            for c in choices
        )
        return f'<select name="{name}"{need}>{blank}{options}</select>', typed
    if field.kind == "boolean":
        chosen = {True: "true", False: "false"}.get(value, "") if present else ""
        options = "".join(
            f'<option value="{v}"{" selected" if v == chosen else ""}>{label}</option>'
            for v, label in (("true", "Yes"), ("false", "No"))
        )
        blank = "" if field.required else '<option value="">(none)</option>'
        return f'<select name="{name}"{need}>{blank}{options}</select>', "boolean"
    if field.kind in ("money", "integer", "number"):
        shown = h(value) if present and isinstance(value, int | float) and not isinstance(value, bool) else ""
        kind = "integer" if field.schema.get("type") == "integer" else "number"
        control = (
            f'<input type="number" inputmode="decimal" name="{name}" value="{shown}" {_number_attrs(field)}{need}>'
        )
        if field.kind == "money":
            currency = field.schema.get("x-currency") if isinstance(field.schema.get("x-currency"), str) else "$"
            control = f'<span class="money-input"><span aria-hidden="true">{h(currency)}</span>{control}</span>'
        return control, kind
    if field.kind == "text":
        text = value if present and isinstance(value, str) else ""
        limits = "".join(
            f' {attr}="{int(field.schema[key])}"'
            for key, attr in (("minLength", "minlength"), ("maxLength", "maxlength"))
            if isinstance(field.schema.get(key), int)
        )
        if len(text) > 80 or "\n" in text:
            return f'<textarea name="{name}" rows="3"{limits}{need}>{h(text)}</textarea>', "text"
        return f'<input type="text" name="{name}" value="{h(text)}"{limits}{need}>', "text"
    text = json.dumps(value, indent=2, ensure_ascii=False) if present else ""
    return f'<textarea name="{name}" rows="4" spellcheck="false" class="mono"{need}>{h(text)}</textarea>', "json"


def edit_fields(value: Any, schema: dict[str, Any] | None) -> str:
    """One labelled control per argument (empty when the schema names no properties to edit)."""
    fields = fields_of(schema)
    if not fields or not isinstance(value, dict):
        return ""
    rows = []
    for f in fields:
        control, typed = _input(f, value.get(f.name), f.name in value)
        about = f'<small class="about">{h(f.description)}</small>' if f.description else ""
        mark = ' <span class="req" title="required">*</span>' if f.required else ""
        rows.append(
            f'<label class="field" data-kind="{f.kind}"><span class="name">{h(f.title)}{mark}</span>{about}{control}'
            f'<input type="hidden" name="{h("type:" + f.name)}" value="{typed}"></label>'
        )
    return f'<div class="fields-form">{"".join(rows)}</div>'


def edited_args(form: dict[str, str], parse: Callable[[str], Any]) -> dict[str, Any] | None:
    """The arguments an edit form sends (``arg:NAME`` read as ``type:NAME`` says); None if it sends none.

    An empty field is left out (the tool's default applies); the tool's schema
    then judges the whole (:meth:`tether.Tool.validate`), as for any edit.
    Raises ``ValueError`` naming the field when a value is not of its type;
    ``parse`` reads a JSON field (the server's strict, depth-capped parser).
    """
    names = [k[len(PREFIX) :] for k in form if k.startswith(PREFIX)]
    if not names:
        return None
    args: dict[str, Any] = {}
    for name in names:
        text, typed = form[PREFIX + name], form.get("type:" + name, "text")
        if typed != "text" and not text.strip():
            continue
        args[name] = parse(text) if typed == "json" else _typed(name, text, typed)
    return args


def _typed(name: str, text: str, typed: str) -> Any:
    if typed == "text":
        return text
    if typed == "boolean":
        if text not in ("true", "false"):
            raise ValueError(f"{name}: must be yes or no")
        return text == "true"
    if typed in ("integer", "number"):
        try:
            number = float(text)
        except ValueError:
            raise ValueError(f"{name}: must be a number, got {text!r}") from None
        if number != number or number in (float("inf"), float("-inf")):
            raise ValueError(f"{name}: must be a finite number")
        if number.is_integer() and (typed == "integer" or "." not in text):
            return int(number)
        if typed == "integer":
            raise ValueError(f"{name}: must be a whole number, got {text!r}")
        return number
    raise ValueError(f"{name}: unknown field type {typed!r}")
