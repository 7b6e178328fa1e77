"""Typed output: a run that ends with a value of a given type instead of text.

``Agent(output_type=T)`` offers the model one more tool, ``final_result``,
whose parameters are ``T``'s JSON Schema (a pydantic model, a dataclass or a
TypedDict as it is; anything else, such as ``list[...]``, ``Literal[...]`` or a
union, wrapped as ``{"value": ...}``). It is terminal: a call that validates
ends the run, and its JSON is the call's result in the notebook and the
``finished`` event's ``output``, so the journal (and a store) keeps it and
:meth:`OutputSpec.load` rebuilds the ``T`` instance from it, in any process.

The loop treats it like any tool, with two additions it reads from here:

* a call that fails validation is a note naming each bad field with its
  resolved schema (:mod:`tether._schema.notes`); a text reply is refused with a note
  (:meth:`OutputSpec.refusal`); after ``retries`` such notes more the run ends
  ``failed`` (:meth:`OutputSpec.exhausted`);
* a child run with an output type answers its parent with the JSON.

Pydantic is imported only when an agent with an output type is built.

>>> from typing import Literal
>>> spec = OutputSpec(Literal["yes", "no"])
>>> spec.tool.parameters["properties"]["value"]
{'enum': ['yes', 'no'], 'type': 'string'}
>>> spec.validate({"value": "yes"}), spec.load('"no"')
('yes', 'no')
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._schema.signature import strip_titles
from .context import Context
from .events import Failed, Noted
from .exceptions import UserError
from .messages import Message
from .tools import ArgumentsInvalid, Tool

__all__ = ["OUTPUT_TOOL", "OutputSpec", "OutputTool", "with_output"]

OUTPUT_TOOL = "final_result"


@dataclass(frozen=True, eq=False)
class OutputTool(Tool):
    """The terminal tool of an agent with an output type; its arguments are validated as ``T``.

    Its validated arguments are ``{"value": <the T instance>}``, whatever the
    schema's shape; running it writes the value's JSON as the call's result.
    """

    spec: Any = field(default=None, repr=False)  # the OutputSpec it belongs to

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        """``{"value": T instance}``, or :class:`~tether.tools.ArgumentsInvalid` with a note that helps."""
        return {"value": self.spec.validate(args)}


class OutputSpec:
    """What an output type means to a run: its tool, its validation, its JSON both ways.

    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class City:
    ...     name: str
    ...     population: int
    >>> spec = OutputSpec(City)
    >>> city = spec.validate({"name": "Lyon", "population": "522250"})
    >>> city, spec.dump(city)
    (City(name='Lyon', population=522250), '{"name":"Lyon","population":522250}')
    """

    def __init__(self, output_type: Any, retries: int = 2, *, name: str = OUTPUT_TOOL) -> None:
        import pydantic

        if not (isinstance(retries, int) and not isinstance(retries, bool) and retries >= 0):
            raise UserError(f"output_retries must be a whole number >= 0, got {retries!r}")
        self.type = output_type
        self.retries = retries
        try:
            self.adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(output_type)
            schema = self.adapter.json_schema()
        except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError, TypeError) as exc:
            raise UserError(f"output_type {output_type!r} has no JSON Schema pydantic can build: {exc}") from exc
        about = schema.get("description", "")
        strip_titles(schema)
        self.wrapped = not (schema.get("type") == "object" and "properties" in schema)
        if self.wrapped:  # tool parameters are an object: put the value under one key
            defs = schema.pop("$defs", None)
            schema = {"type": "object", "properties": {"value": schema}, "required": ["value"]}
            if defs:
                schema["$defs"] = defs
        schema["additionalProperties"] = False
        self.schema = schema
        text = "Give your final answer with this tool, once you have it; it ends the task."
        self.tool = OutputTool(
            name=name, description=f"{text} {about}".strip(), parameters=schema, fn=self._emit, terminal=True,
            effect="none", spec=self,
        )  # fmt: skip

    def __repr__(self) -> str:
        return f"OutputSpec({_type_name(self.type)})"

    @property
    def name(self) -> str:
        """The output tool's name (``final_result``)."""
        return self.tool.name

    def validate(self, args: Mapping[str, Any]) -> Any:
        """The ``T`` instance the tool's arguments describe (lax: ``"5"`` for an int is 5), or
        :class:`ArgumentsInvalid` whose message is the note the model reads."""
        import pydantic

        if self.wrapped and set(args) != {"value"}:
            raise ArgumentsInvalid(
                f"invalid arguments for tool {self.name!r}: send exactly one field, 'value'\n  expected: {self.shown()}"
            )
        try:
            return self.adapter.validate_python(args["value"] if self.wrapped else dict(args))
        except pydantic.ValidationError as exc:
            errors = exc.errors(include_url=False)
            if self.wrapped:
                errors = [{**e, "loc": ("value", *e["loc"])} for e in errors]
            raise ArgumentsInvalid(self.tool._explain(_Errors(errors), dict(args), self._check)) from None

    def shown(self) -> str:
        """The tool's schema as a note shows it: every ``$ref`` written out (small models cannot follow one)."""
        from ._schema.notes import inline

        text = json.dumps(inline(self.schema, self.schema), sort_keys=True, ensure_ascii=False)
        return text if len(text) <= 3000 else text[:3000] + " ...(cut)"

    def _check(self, args: Any) -> Any:
        return self.adapter.validate_python(args["value"] if self.wrapped else args)

    def dump(self, value: Any) -> str:
        """The JSON text of a ``T`` value (what the journal keeps)."""
        return self.adapter.dump_json(value).decode()

    def load(self, text: str) -> Any:
        """The ``T`` instance a :meth:`dump` text describes (on resume, in another process)."""
        return self.adapter.validate_json(text)

    async def _emit(self, value: Any) -> str:
        return self.dump(value)

    # -- what the loop asks ------------------------------------------------

    def refusal(self) -> Noted:
        """The note that answers a text-only reply: the answer must come through the tool."""
        text = (
            f"A plain text reply cannot end this task: call the {self.name!r} tool with your final answer, "
            f"as arguments matching its schema: {self.shown()}"
        )
        return Noted(Message("user", text, name=self.name, is_error=True))

    def exhausted(self, context: Context) -> Failed | None:
        """The run's ending once the model has failed to give a valid output more than ``retries`` times."""
        notes = [m for m in context if m.name == self.name and m.is_error]
        if len(notes) <= self.retries:
            return None
        return Failed(
            f"the model did not give a valid {_type_name(self.type)} after {len(notes)} tries "
            f"(output_retries={self.retries}); the last note it read:\n{notes[-1].content}",
            "OutputInvalid",
        )

    def noted(self, steps: Sequence[Any]) -> bool:
        """Whether a turn's planned notes include one for the output tool (then count the tries)."""
        results = (getattr(getattr(s, "event", None), "result", None) for s in steps)
        return any(r is not None and r.name == self.name for r in results)

    def answer_in(self, messages: Sequence[Message]) -> str | None:
        """The output's JSON in a finished run's notes: its output tool's last valid result."""
        for m in reversed(messages):
            if m.role == "tool" and m.name == self.name and not m.is_error:
                return m.text
        return None


def with_output(tools: dict[str, Tool], output_type: Any, retries: int) -> OutputSpec | None:
    """The spec of ``output_type`` (None without one), its tool added to ``tools`` (an agent's, by name)."""
    if output_type is None:
        return None
    spec = OutputSpec(output_type, retries)
    if spec.name in tools:
        raise UserError(f"a tool is named {spec.name!r}, which an agent with an output type reserves")
    tools[spec.name] = spec.tool
    return spec


class _Errors:
    """pydantic's errors with their locations adjusted, for :meth:`Tool._explain`."""

    def __init__(self, errors: list[Any]) -> None:
        self._errors = errors

    def errors(self, include_url: bool = False) -> list[Any]:
        return self._errors


def _type_name(t: Any) -> str:
    return t.__name__ if isinstance(t, type) else repr(t).replace("typing.", "")
