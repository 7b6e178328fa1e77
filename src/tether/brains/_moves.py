"""Moves as templates: what a recorded reply did, with the copied values cut out as slots.

A reply with tool calls becomes ``{"kind": "calls", "calls": [{"name", "args"}]}``
where each argument is a constant or a slot (``{"slot": "get_weather.city#0"}``:
the first call of ``get_weather``, argument ``city``). A final answer becomes
``{"kind": "answer", "text": "It is {0} in {1}."}`` where each ``{n}`` was a
value copied from the notes. The move network picks a template; the pointer
network fills each slot with a candidate span; :func:`fill` builds the reply.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from ..messages import Message, ToolCall
from ..tools import Tool
from ._text import Candidate, copyable, matches

Template = dict[str, Any]
SlotValues = list[tuple[str, Any]]
Pick = Callable[[str, list[Candidate]], Candidate | None]
_TOKEN = re.compile(r"\S+")
_EDGE = ".,;:!?()[]{}\"'\u2018\u2019\u201c\u201d"


def key(template: Template) -> str:
    """A stable name for a template (what the move network predicts)."""
    core = {k: v for k, v in template.items() if k != "content"}
    return hashlib.sha256(json.dumps(core, sort_keys=True).encode()).hexdigest()[:12]


def template_of(reply: Message, cands: list[Candidate]) -> tuple[Template, SlotValues]:
    """The template of a recorded reply, and the (slot, value) pairs it cut out."""
    if reply.tool_calls:
        return _calls_template(reply, cands)
    return _answer_template(reply.text, cands)


def _calls_template(reply: Message, cands: list[Candidate]) -> tuple[Template, SlotValues]:
    calls: list[dict[str, Any]] = []
    values: SlotValues = []
    seen: dict[str, int] = {}  # calls so far per tool name
    for call in reply.tool_calls:
        k = seen.get(call.name, 0)
        seen[call.name] = k + 1
        try:
            args = json.loads(call.arguments or "{}")
        except ValueError:
            args = {}
        spec = {}
        for name, value in args.items() if isinstance(args, dict) else ():
            slot = f"{call.name}.{name}#{k}"
            if not isinstance(value, dict | list) and any(matches(c.text, value) for c in cands):
                spec[name] = {"slot": slot}
                values.append((slot, value))
            else:
                spec[name] = {"const": value}
        calls.append({"name": call.name, "args": spec})
    return {"kind": "calls", "calls": calls, "content": reply.content}, values


def _answer_template(text: str, cands: list[Candidate]) -> tuple[Template, SlotValues]:
    singles = [c for c in cands if c.kind in ("token", "number")]
    pieces: list[str] = []
    copied: list[str] = []
    last = 0
    for m in _TOKEN.finditer(text):
        core = m.group().strip(_EDGE)
        if not core or not copyable(core) or not any(matches(c.text, core) for c in singles):
            continue
        start = m.start() + m.group().index(core)
        pieces.append(_escape(text[last:start]) + "{" + str(len(copied)) + "}")
        copied.append(core)
        last = start + len(core)
    pattern = "".join(pieces) + _escape(text[last:])
    name = hashlib.sha256(pattern.encode()).hexdigest()[:10]
    slots = [f"answer:{name}#{i}" for i in range(len(copied))]
    return {"kind": "answer", "text": pattern, "slots": slots}, list(zip(slots, copied, strict=True))


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def uses_tools(template: Template) -> set[str]:
    """The tools a template calls (none for an answer)."""
    return {c["name"] for c in template.get("calls", ())}


def slots(template: Template) -> list[str]:
    """Every slot a template needs filled, in order."""
    if template["kind"] == "answer":
        return list(template["slots"])
    return [a["slot"] for c in template["calls"] for a in c["args"].values() if "slot" in a]


def fill(template: Template, cands: list[Candidate], tools: Sequence[Tool], pick: Pick, call_prefix: str) -> Message:
    """The reply a template makes in this context, each slot filled by ``pick``."""
    if template["kind"] == "answer":
        values = [_text_of(pick(slot, cands)) for slot in template["slots"]]
        return Message.assistant(template["text"].format(*values))
    schemas = {t.name: t.parameters.get("properties", {}) for t in tools}
    calls = []
    for i, spec in enumerate(template["calls"]):
        args = {}
        for name, how in spec["args"].items():
            if "const" in how:
                args[name] = how["const"]
            else:
                args[name] = _typed(_text_of(pick(how["slot"], cands)), schemas.get(spec["name"], {}).get(name, {}))
        calls.append(ToolCall.of(spec["name"], args, id=f"{call_prefix}_{i}"))
    return Message.assistant(template.get("content", ""), calls)


def _text_of(candidate: Candidate | None) -> str:
    return candidate.text if candidate is not None else ""


def _typed(text: str, schema: dict[str, Any]) -> Any:
    """A copied span converted to the type the tool's schema asks for (left as text if it does not parse)."""
    kind = schema.get("type")
    try:
        if kind == "integer":
            return int(float(text))
        if kind == "number":
            value = float(text)
            return int(value) if value.is_integer() else value
        if kind == "boolean":
            return text.strip().lower() in ("true", "yes", "1")
    except ValueError:
        return text
    return text
