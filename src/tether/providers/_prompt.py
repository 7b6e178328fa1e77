"""What the constrained protocol shows a small model: the reply schema, the prompt, the notebook.

The model replies in one of two JSON forms, and the schema allows nothing else:

* a **list of calls**, ``[{"name": <tool>, "arguments": {...}}, ...]``: one or
  several tools in one reply (two cities, three stock symbols);
* an **answer**, ``{"name": "final_answer", "arguments": {"text": ...}}``; for an
  agent with an output type, its output tool takes that place
  (``{"name": "final_result", "arguments": <a T, as JSON>}``), so the answer is
  decoded under T's own JSON Schema and prompts and nudges name that tool.

So the first character of a reply (``[`` or ``{``) is the choice between
using tools and answering, and the system prompt makes answering without a tool
a real choice: it says when to answer directly and shows a question that no
tool fits answered that way.

Each tool is shown with its whole parameter schema in a compact signature:
types, enum values, which arguments are optional and their defaults
(``read_file(path: string, start_line?: integer = 1)``). Without them small
models invent optional arguments and miss enum values.

>>> from tether import tool
>>> @tool(effect="none")
... def add(a: int, b: int = 0) -> int:
...     '''Add two integers.'''
...     return a + b
>>> signature(add)
'add(a: integer, b?: integer = 0)'
>>> [sorted(c) for c in choice_schema([add])["anyOf"]]
[['items', 'maxItems', 'minItems', 'type'], ['additionalProperties', 'properties', 'required', 'type']]
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any

from ..context import Context
from ..exceptions import UserError
from ..messages import Message
from ..output import OutputTool
from ..tools import Tool
from ._parts import refuse_parts
from ._times import spelled_out
from .openai_compat import openai_message

FINAL_ANSWER = "final_answer"
MAX_CALLS_PER_REPLY = 8
MAX_RESULT_CHARS = 6000  # a tool result longer than this is cut before the model sees it
# The nudges after results are worded as notes about the results, not as protocol
# instructions: a model that repeats one to the user then says nothing that is false
# or internal ("...call final_answer to explain the problem" reached a user that way).
NUDGE = "If this answers the question, write the answer for the user; otherwise call the tools you still need."
ERROR_NUDGE = "Fix the call and try again if you can; otherwise tell the user plainly what went wrong."
DENIED_NUDGE = (
    "The person declined, so this did not happen. Do not try it another way: tell the user it "
    "was not done, and say only what the results above show."
)
FINAL_ONLY = "Now answer the user with final_answer."
DENIED_PREFIX = "a human denied this call"  # how the loop's note for a denial begins (tether._loop.turn)


# -- the JSON Schema -------------------------------------------------------


def choice_schema(
    tools: Sequence[Tool], *, final_only: bool = False, calls_only: bool = False, max_calls: int = MAX_CALLS_PER_REPLY
) -> dict[str, Any]:
    """A JSON Schema whose instances are a list of calls of offered tools, or the answer.

    The list holds 1 to ``max_calls`` items, each ``{"name": const, "arguments":
    <that tool's parameters>}``; the answer is the ``final_answer`` object
    (alone when ``final_only``, left out when ``calls_only``), or the output
    tool's call when one is offered (:func:`output_tool`). Tool schemas' ``$defs`` are hoisted to the root
    under ``<tool>__<name>`` so their ``$ref`` s resolve.
    """
    check_tools(tools)
    final = output_tool(tools)
    defs: dict[str, Any] = {}
    if final is None:
        answer = _choice(FINAL_ANSWER, _FINAL_PARAMS)
    else:
        params, defs = _hoisted(final)
        answer = _choice(final.name, params)
    callable_tools = [t for t in tools if t is not final]
    if final_only or not callable_tools or max_calls < 1:
        return {"anyOf": [answer], "$defs": defs} if defs else {"anyOf": [answer]}
    calls = []
    for t in callable_tools:
        params, tool_defs = _hoisted(t)
        defs.update(tool_defs)
        calls.append(_choice(t.name, params))
    listed = {"type": "array", "items": {"anyOf": calls}, "minItems": 1, "maxItems": max_calls}
    schema: dict[str, Any] = {"anyOf": [listed] if calls_only else [listed, answer]}
    if defs:
        schema["$defs"] = defs
    return schema


def offered(schema: dict[str, Any]) -> list[str]:
    """The names a reply under ``schema`` may use (tools first, then ``final_answer``).

    >>> offered({"anyOf": [{"properties": {"name": {"const": "final_answer"}}}]})
    ['final_answer']
    """
    names = []
    for choice in schema["anyOf"]:
        for one in choice["items"]["anyOf"] if choice.get("type") == "array" else [choice]:
            names.append(one["properties"]["name"]["const"])
    return names


_FINAL_PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
    "additionalProperties": False,
}


def _choice(name: str, params: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"name": {"const": name}, "arguments": params},
        "required": ["name", "arguments"],
        "additionalProperties": False,
    }


def _hoisted(t: Tool) -> tuple[dict[str, Any], dict[str, Any]]:
    params = copy.deepcopy(t.parameters) or {"type": "object", "properties": {}}
    params.setdefault("additionalProperties", False)
    defs = params.pop("$defs", {})
    renames = {f"#/$defs/{k}": f"#/$defs/{t.name}__{k}" for k in defs}
    if renames:
        _rewrite_refs(params, renames)
        _rewrite_refs(defs, renames)
    return params, {f"{t.name}__{k}": v for k, v in defs.items()}


def _rewrite_refs(node: Any, renames: dict[str, str]) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref in renames:
            node["$ref"] = renames[ref]
        for value in node.values():
            _rewrite_refs(value, renames)
    elif isinstance(node, list):
        for item in node:
            _rewrite_refs(item, renames)


def output_tool(tools: Sequence[Tool]) -> Tool | None:
    """The output tool of an agent with an output type (``final_result``), when it is offered."""
    return next((t for t in tools if isinstance(t, OutputTool)), None)


def final_name(tools: Sequence[Tool]) -> str:
    """The name of the reply that answers: ``final_answer``, or the output tool's name."""
    final = output_tool(tools)
    return final.name if final is not None else FINAL_ANSWER


def check_tools(tools: Sequence[Tool]) -> None:
    """Refuse a tool that would shadow the protocol's own ``final_answer``."""
    if any(t.name == FINAL_ANSWER for t in tools):
        raise UserError(
            f"a tool is named {FINAL_ANSWER!r}, which the constrained protocol reserves "
            "for the model's answer; rename the tool"
        )


# -- the prompt --------------------------------------------------------------

FORMS = (
    "Reply with JSON only, in one of two forms:\n"
    '1. To use tools: a list of calls, [{"name": <tool>, "arguments": {...}}, ...]. Put every call '
    "the question needs in that one list (one per city, per symbol, per file...). Give the required "
    'arguments; leave out optional ones (marked "?") unless the user asked for them.\n'
    f'2. To answer the user: {{"name": "{FINAL_ANSWER}", "arguments": {{"text": <your answer>}}}}.'
)
WHEN_TO_ANSWER = (
    "When a tool does what the question asks (looks something up, computes, reads or changes a "
    "file), call it: never guess what a tool would tell you. Answer directly, without a tool, only "
    "when no tool is about the question (general knowledge, history, language, greetings, thanks) "
    "or when the results you have already answer it."
)


TYPED_ANSWER = '2. To answer the user: {{"name": "{name}", "arguments": <your answer, as JSON: {signature}>}}.'


def system_prompt(tools: Sequence[Tool], instructions: str = "") -> str:
    """The protocol's system prompt: instructions, the tools with their parameters, the two forms."""
    final = output_tool(tools)
    lines = [instructions.strip()] if instructions.strip() else []
    lines.append("Tools:")
    lines += [f"- {tool_line(t)}" for t in tools if t is not final]
    forms = FORMS
    if final is not None:  # the answer is the output tool's call, under its schema
        forms = FORMS[: FORMS.index("2. ")] + TYPED_ANSWER.format(name=final.name, signature=signature(final))
    lines += [forms, WHEN_TO_ANSWER]
    return "\n".join(lines)


def tool_line(t: Tool) -> str:
    """``name(a: type, b?: type = 1): what it does. a: what a is; b: ...`` on one line."""
    props: dict[str, Any] = (t.parameters or {}).get("properties", {})
    summary = " ".join(t.description.split()).split(". ")[0].rstrip(".") if t.description.strip() else ""
    line = signature(t) + (f": {summary}." if summary else "")
    hints = [f"{k}: {_clause(v['description'])}" for k, v in props.items() if v.get("description")]
    return line + (" " + "; ".join(hints) + "." if hints else "")


def signature(t: Tool) -> str:
    """The tool's parameters as a typed signature: ``?`` marks an optional one, ``=`` its default."""
    params = t.parameters or {}
    required = set(params.get("required", ()))
    parts = []
    for name, spec in params.get("properties", {}).items():
        part = f"{name}{'' if name in required else '?'}: {type_text(spec)}"
        if "default" in spec:
            part += f" = {json.dumps(spec['default'], ensure_ascii=False)}"
        parts.append(part)
    return f"{t.name}({', '.join(parts)})"


def type_text(spec: Any) -> str:
    """A JSON Schema fragment as a short type: ``string``, ``"a" | "b"``, ``list[integer]``...

    >>> type_text({"anyOf": [{"type": "integer"}, {"type": "null"}]}), type_text({"enum": ["C", "F"]})
    ('integer | null', '"C" | "F"')
    """
    if not isinstance(spec, dict):
        return "any"
    if "enum" in spec:
        return " | ".join(json.dumps(v, ensure_ascii=False) for v in spec["enum"])
    if "const" in spec:
        return json.dumps(spec["const"], ensure_ascii=False)
    if "$ref" in spec:
        return str(spec["$ref"]).rsplit("/", 1)[-1].split("__")[-1]
    for key in ("anyOf", "oneOf"):
        if key in spec:
            return " | ".join(type_text(s) for s in spec[key])
    kind = spec.get("type", "any")
    if isinstance(kind, list):
        return " | ".join(kind)
    if kind == "array":
        return f"list[{type_text(spec.get('items', {}))}]"
    return str(kind)


def _clause(text: Any) -> str:
    return " ".join(str(text).split()).rstrip(".")


# -- the notebook --------------------------------------------------------------


def render(context: Context, tools: Sequence[Tool], *, final_only: bool = False) -> list[dict[str, Any]]:
    """The notebook as OpenAI chat messages for the constrained protocol."""
    instructions = "\n\n".join(m.text for m in context if m.role == "system")
    final = final_name(tools)  # with an output type the answer is its tool, not final_answer
    out: list[dict[str, Any]] = [{"role": "system", "content": system_prompt(tools, instructions)}]
    messages = context.messages
    for i, m in enumerate(messages):
        if m.role == "user":
            out.append({"role": "user", "content": m.text})
        elif m.role == "assistant":
            out.append({"role": "assistant", "content": assistant_text(m, final)})
        elif m.role == "tool" and (i + 1 == len(messages) or messages[i + 1].role != "tool"):
            first = i
            while first > 0 and messages[first - 1].role == "tool":
                first -= 1
            append_user(out, results_text(messages[first : i + 1], final))
    if final_only:
        append_user(out, FINAL_ONLY.replace(FINAL_ANSWER, final))
    return out


def assistant_text(m: Message, final: str = FINAL_ANSWER) -> str:
    """A recorded reply as the model writes it: the answer object, or the list of calls.

    A call of the output tool (``final``) alone is the typed answer, written as one object.
    """
    if not m.tool_calls:
        return call_text(FINAL_ANSWER, {"text": m.text})
    if final != FINAL_ANSWER and len(m.tool_calls) == 1 and m.tool_calls[0].name == final:
        return call_text(final, _loads_or_raw(m.tool_calls[0].arguments))
    return calls_text([(c.name, _loads_or_raw(c.arguments)) for c in m.tool_calls])


def call_text(name: str, arguments: Any) -> str:
    """One call (or the answer) as the model writes it (``indent=2``, the way
    llama.cpp's grammar lets Qwen lay it out), so the server's prompt cache sees the same tokens."""
    return json.dumps({"name": name, "arguments": arguments}, indent=2, ensure_ascii=False)


def calls_text(calls: Sequence[tuple[str, Any]]) -> str:
    """A list of calls as the model writes it."""
    return json.dumps([{"name": n, "arguments": a} for n, a in calls], indent=2, ensure_ascii=False)


def _loads_or_raw(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments


def results_text(results: Sequence[Message], final: str = FINAL_ANSWER) -> str:
    """The results of one reply's calls, each on its own, then one nudge for what comes next.

    With an output type (``final`` is its tool) the nudges name that tool as the way to answer.
    """
    texts = [_result_text(m) for m in results]
    if any(_denied(m) for m in results):
        nudge = DENIED_NUDGE
    elif any(m.is_error for m in results):
        nudge = ERROR_NUDGE
    else:
        nudge = NUDGE
    if final != FINAL_ANSWER:
        nudge = nudge.replace("tell the user", f"answer with {final}, saying").replace(
            "write the answer for the user", f"give the answer with {final}"
        )
    return "\n\n".join(texts) + "\n" + nudge


def _denied(m: Message) -> bool:
    return m.is_error and m.text.startswith(DENIED_PREFIX)


def _result_text(m: Message) -> str:
    content = whole = m.text  # images and files a tool returned are placeholders: the protocol is text only
    if len(content) > MAX_RESULT_CHARS:
        content = content[:MAX_RESULT_CHARS] + f"\n[... cut: {len(whole):,} characters in all]"
    name = m.name or "the tool"
    if _denied(m):
        return f"{name} was not run: {content}"
    if m.is_error:
        return f"{name} failed: {content}"
    times = spelled_out(content)  # a small model reads "07:33:58+09:00" as a time in the evening
    return f"{name} returned: {content}" + (f"\n{times}" if times else "")


def append_user(out: list[dict[str, Any]], text: str) -> None:
    """Several results in a row become one user message (chat templates want turns to alternate)."""
    if out[-1]["role"] == "user":
        out[-1] = {"role": "user", "content": out[-1]["content"] + "\n\n" + text}
    else:
        out.append({"role": "user", "content": text})


def request(
    context: Context,
    tools: Sequence[Tool],
    *,
    final_only: bool = False,
    calls_only: bool = False,
    only: Sequence[Tool] | None = None,
    max_calls: int = MAX_CALLS_PER_REPLY,
) -> dict[str, Any]:
    """The messages and ``response_format`` of one constrained request.

    ``only`` narrows the calls the schema allows to those tools (the prompt
    still shows every tool, so it stays a prefix of the next request).
    Without tools there is nothing to choose: a plain chat request. Images and
    files are refused before any request: the protocol is text only.
    """
    refuse_parts(context, "this brain (constrained decoding: LocalModel, ConstrainedOpenAI)")
    if not tools:
        return {"messages": [openai_message(m) for m in context]}
    schema = choice_schema(tools, final_only=final_only, calls_only=calls_only, max_calls=max_calls)
    if only is not None:
        schema = choice_schema(only, calls_only=True, max_calls=max_calls)
    return {
        "messages": render(context, tools, final_only=final_only),
        "response_format": {"type": "json_schema", "json_schema": {"name": "tool_call", "schema": schema}},
    }


def since_user(context: Context) -> list[Message]:
    """The notes of the current task, newest first: back to and with the last user message."""
    out: list[Message] = []
    for m in reversed(context.messages):
        out.append(m)
        if m.role == "user":
            break
    return out
