"""Tools: the coworkers an agent can call.

A :class:`Tool` has a name, a description for the model, a JSON Schema of its
parameters and a function (sync or async). It also states its contract with the
loop: ``terminal`` (its result ends the run), ``approval`` (a human must decide
first), ``effect`` (what a crash between start and finish means; see
:data:`Effect`) and ``timeout``.

``@tool`` builds one from a plain function: the schema comes from its type hints,
the descriptions from its docstring (Google, NumPy or Sphinx style). Arguments
from the model are validated by pydantic before the function runs; a mistake is
reported back to the model, naming the field and showing the schema fragment.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import inspect
import json
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from dataclasses import replace as dataclass_replace
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, get_args, get_origin, get_type_hints, overload

from ._schema.docstrings import parse_docstring
from ._schema.signature import schema_of, signature_model, strip_titles

if TYPE_CHECKING:
    import pydantic

    from .context import Context

__all__ = [
    "Approval",
    "ArgumentsInvalid",
    "EFFECTS",
    "Effect",
    "Invocation",
    "SchemaTool",
    "Tool",
    "ToolTimedOut",
    "ask_human",
    "missing_deps",
    "parse_docstring",
    "result_text",
    "schema_of",
    "tool",
]

Effect = Literal["none", "idempotent", "once"]
"""What a tool does to the world, and so what resuming after a crash may do:

* ``"none"``: it only reads; run it again.
* ``"idempotent"``: repeating it with the same ``Invocation.idempotency_key`` is safe.
* ``"once"``: it must not happen twice; an interrupted call waits for a human.
"""

Approval = bool | Callable[[dict[str, Any], "Context"], bool]
EFFECTS: frozenset[str] = frozenset(("none", "idempotent", "once"))
DepsT = TypeVar("DepsT")


@dataclass(frozen=True, slots=True)
class Invocation(Generic[DepsT]):
    """What a tool may learn about the call it is serving, and the run's dependencies.

    Declare a parameter annotated ``Invocation`` and the loop passes it in; it is
    not part of the schema the model sees. ``deps`` is what the caller passed as
    ``agent.run(task, deps=...)`` (never persisted); annotate ``Invocation[MyDeps]``
    and a run without them fails before any tool runs, naming the parameter.
    Dynamic instructions (``Agent(instructions=callable)``) get one too, with
    empty ``call_id`` and ``tool_name``.

    >>> @tool(effect="idempotent")
    ... def charge(amount: int, call: Invocation) -> str:
    ...     return f"charged {amount} with key {call.idempotency_key}"
    >>> @tool(effect="none")
    ... def whoami(call: Invocation[dict]) -> str:
    ...     return call.deps["user"]
    >>> whoami.deps_type
    <class 'dict'>
    """

    run_id: str
    call_id: str
    tool_name: str
    deps: DepsT = None  # type: ignore[assignment]  # None when the run was given no deps

    @property
    def idempotency_key(self) -> str:
        """``run_id:call_id``: the same on every retry of this one call."""
        return f"{self.run_id}:{self.call_id}"


class ToolTimedOut(Exception):
    """The tool's own ``timeout`` ran out (becomes a ``timeout`` note)."""


class ArgumentsInvalid(ValueError):
    """The model's arguments do not fit the tool's schema (becomes a note)."""


@dataclass(frozen=True, eq=False)
class Tool:
    """A callable coworker with a contract.

    Prefer the :func:`tool` decorator; build a Tool directly when the schema is
    written by hand (then ``validator`` may be None and arguments pass as given).
    """

    name: str
    description: str
    parameters: dict[str, Any]
    fn: Callable[..., Any]
    terminal: bool = False
    approval: Approval = False
    effect: Effect = "once"
    timeout: float | None = None
    validator: type[pydantic.BaseModel] | None = field(default=None, repr=False)
    inject: str | None = field(default=None, repr=False)  # name of the Invocation parameter
    deps_type: Any = field(default=None, repr=False)  # the D of an Invocation[D] parameter: the run needs deps
    answer: dict[str, Any] | None = None  # set: a question for a person, this is the answer's JSON Schema
    answer_validator: Any = field(default=None, repr=False)  # a pydantic TypeAdapter of the answer
    agent: Any = field(default=None, repr=False)  # set: calling it runs this agent as a child run
    continues: bool = False  # with agent: each call's child run starts from the notebook the last one left
    handoff: Any = field(default=None, repr=False)  # set: calling it hands the run over to this agent

    def __post_init__(self) -> None:
        from .exceptions import UserError

        if not _NAME.fullmatch(self.name):
            raise UserError(f"tool name {self.name!r} must match {_NAME.pattern}")
        if self.effect not in EFFECTS:
            raise UserError(f"tool {self.name!r}: effect must be one of {sorted(EFFECTS)}")
        if self.timeout is not None and self.timeout <= 0:
            raise UserError(f"tool {self.name!r}: timeout must be positive")

    def definition(self) -> dict[str, Any]:
        """``{"name", "description", "parameters"}``: what a model is shown."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    def fingerprint(self) -> str:
        """A hash of everything about this tool that a paused run relies on."""
        gate = "callable" if callable(self.approval) else bool(self.approval)
        parts = [self.definition(), self.terminal, gate, self.effect]
        if self.answer is not None:
            parts.append({"answer": self.answer})
        blob = json.dumps(parts, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @functools.cached_property
    def is_async(self) -> bool:
        """Whether the function is a coroutine function (else it runs in a worker thread)."""
        return inspect.iscoroutinefunction(self.fn)

    @property
    def is_question(self) -> bool:
        """Whether this tool asks a person instead of running (see :func:`ask_human`)."""
        return self.answer is not None

    def check_answer(self, value: Any) -> Any:
        """A person's answer, validated against :attr:`answer` (``ArgumentsInvalid`` if it does not fit)."""
        if self.answer_validator is None:
            return value
        import pydantic

        try:
            return self.answer_validator.validate_python(value)
        except pydantic.ValidationError as exc:
            errors = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'answer'}: {e['msg']}" for e in exc.errors())
            raise ArgumentsInvalid(f"the answer to {self.name!r} does not fit its schema: {errors}") from None

    def answer_text(self, value: Any) -> str:
        """How a validated answer is written for the model: text as it is, anything else as JSON
        of the validated value (so extra or mistyped fields the person sent never reach it)."""
        if isinstance(value, str):
            return value
        data = self.answer_validator.dump_python(value, mode="json") if self.answer_validator is not None else value
        return json.dumps(data, sort_keys=True, ensure_ascii=False)

    def needs_approval(self, args: dict[str, Any], context: Context) -> bool:
        """Whether this call must wait for a human decision."""
        if callable(self.approval):
            return bool(self.approval(args, context))
        return bool(self.approval)

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        """Validated (and safely coerced) arguments, or :class:`ArgumentsInvalid`."""
        if self.validator is None:
            return dict(args)
        import pydantic

        try:
            model = self.validator.model_validate(args)
        except pydantic.ValidationError as exc:
            raise ArgumentsInvalid(self._explain(exc, args, self.validator.model_validate)) from None
        return {name: getattr(model, name) for name in type(model).model_fields}

    def _explain(self, exc: Any, args: Any, check: Callable[[Any], Any] | None = None) -> str:
        """The note the model reads: each bad field, its resolved schema, a corrected example if mechanical."""
        from ._schema.notes import explain

        header = f"invalid arguments for tool {self.name!r}:"
        return explain(header, self.parameters, exc.errors(include_url=False), args, check)

    async def invoke(self, args: dict[str, Any], invocation: Invocation[Any]) -> Any:
        """Run the function with validated ``args`` (sync functions in a thread)."""
        kwargs = dict(args)
        if self.inject:
            kwargs[self.inject] = invocation
        if self.is_async:
            call: Awaitable[Any] = self.fn(**kwargs)
        else:
            call = asyncio.to_thread(self.fn, **kwargs)
        if self.timeout is None:
            return await call
        limit = asyncio.timeout(self.timeout)
        try:
            async with limit:
                return await call
        except TimeoutError:
            if limit.expired():
                raise ToolTimedOut(f"tool {self.name!r} timed out after {self.timeout:g} seconds") from None
            raise

    @classmethod
    def from_schema(
        cls,
        name: str,
        description: str,
        parameters: Mapping[str, Any],
        fn: Callable[..., Any],
        *,
        terminal: bool = False,
        approval: Approval = False,
        effect: Effect = "once",
        timeout: float | None = None,
    ) -> Tool:
        """A tool whose JSON Schema comes from elsewhere (MCP, OpenAPI, a registry).

        Arguments are checked against ``parameters`` before ``fn`` runs, with
        the same notes and the same lax coercion as ``@tool`` (``"5"`` for an
        integer becomes ``5``); ``fn`` gets them as keyword arguments, defaults
        filled in, plus the :class:`Invocation` if it declares a parameter
        annotated with it. The JSON-Schema subset checked is listed in
        :mod:`tether._schema.check` and ``docs/mcp.md``.

        >>> echo = Tool.from_schema("echo", "Say it back.",
        ...     {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        ...     lambda n: n, effect="none")
        >>> echo.validate({"n": "5"})
        {'n': 5}
        """
        from ._schema.check import compile_schema
        from .exceptions import UserError

        if not isinstance(parameters, Mapping) or parameters.get("type", "object") != "object":
            raise UserError(f"tool {name!r}: parameters must be a JSON Schema of type 'object'")
        try:
            hints = get_type_hints(fn)
        except Exception:  # unresolvable forward references, or nothing to read (a builtin)
            hints = {}
        found = [(p, _deps_of(h)) for p, h in hints.items() if _is_invocation(h) and p != "return"]
        inject, deps_type = found[0] if found else (None, None)
        if inject is not None and inject in (parameters.get("properties") or {}):
            raise UserError(f"tool {name!r}: parameter {inject!r} is both the Invocation and a schema property")
        try:
            checker = compile_schema(parameters)
        except Exception as exc:  # pydantic-core refused what we built: a schema we cannot read
            raise UserError(f"tool {name!r}: cannot read its JSON Schema: {exc}") from exc
        return SchemaTool(
            name=name, description=description, parameters=dict(parameters), fn=fn, terminal=terminal,
            approval=approval, effect=effect, timeout=timeout, inject=inject, checker=checker, deps_type=deps_type,
        )  # fmt: skip


@dataclass(frozen=True, eq=False)
class SchemaTool(Tool):
    """A :class:`Tool` whose arguments are checked against its JSON Schema (made by :meth:`Tool.from_schema`).

    >>> Tool.from_schema("t", "", {"properties": {"n": {"type": "integer"}}}, lambda n=0: n).validate({"n": "2"})
    {'n': 2}
    """

    checker: Any = field(default=None, repr=False)  # a pydantic_core.SchemaValidator

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        """Validated (and safely coerced) arguments, defaults filled, or :class:`ArgumentsInvalid`."""
        if self.checker is None:
            return dict(args)
        import pydantic_core

        try:
            return dict(self.checker.validate_python(args))
        except pydantic_core.ValidationError as exc:
            raise ArgumentsInvalid(self._explain(exc, args, self.checker.validate_python)) from None


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    terminal: bool = False,
    approval: Approval = False,
    effect: Effect = "once",
    timeout: float | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    terminal: bool = False,
    approval: Approval = False,
    effect: Effect = "once",
    timeout: float | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a :class:`Tool` from a function, its type hints and its docstring.

    >>> @tool(effect="none")
    ... def add(a: int, b: int = 0) -> int:
    ...     '''Add two numbers.
    ...
    ...     Args:
    ...         a: the first number.
    ...         b: the second number.
    ...     '''
    ...     return a + b
    >>> add.parameters["properties"]["a"]
    {'description': 'the first number.', 'type': 'integer'}
    """

    def build(f: Callable[..., Any]) -> Tool:
        summary, param_docs = parse_docstring(inspect.getdoc(f) or "")
        validator, aside = signature_model(f, param_docs, _is_invocation)
        inject, deps_type = (aside[0], _deps_of(aside[1])) if aside else (None, None)
        return Tool(
            name=name or f.__name__,
            description=description if description is not None else summary,
            parameters=schema_of(validator),
            fn=f,
            terminal=terminal,
            approval=approval,
            effect=effect,
            timeout=timeout,
            validator=validator,
            inject=inject,
            deps_type=deps_type,
        )

    return build(fn) if fn is not None else build


def _is_invocation(hint: Any) -> bool:
    return hint is Invocation or get_origin(hint) is Invocation


def _deps_of(hint: Any) -> Any:
    """The deps type an ``Invocation[D]`` annotation asks for (None for a bare ``Invocation``)."""
    args = get_args(hint)
    return args[0] if args and args[0] is not Any else None


def missing_deps(tools: Iterable[Tool], deps: Any) -> str | None:
    """Why ``deps`` cannot serve ``tools`` (a tool declares ``Invocation[D]``), or None when they can.

    >>> @tool(effect="none")
    ... def me(call: Invocation[dict]) -> str:
    ...     return call.deps["user"]
    >>> missing_deps([me], None)
    "tool 'me' needs run dependencies (its parameter 'call' is Invocation[dict]): pass deps=... to run()"
    """
    for t in tools:
        want = t.deps_type
        if want is None or (deps is not None and not isinstance(want, type)):
            continue  # no deps needed, or a type we cannot check at run time (a union, a generic)
        shown = f"{t.name!r} needs run dependencies (its parameter {t.inject!r} is Invocation[{_name(want)}])"
        if deps is None and not _allows_none(want):
            return f"tool {shown}: pass deps=... to run()"
        if deps is not None and not isinstance(deps, want):
            return f"tool {shown}, got deps of type {type(deps).__name__}"
    return None


def _allows_none(want: Any) -> bool:
    return want is type(None) or type(None) in get_args(want)


def _name(t: Any) -> str:
    return t.__name__ if isinstance(t, type) else str(t)


def result_text(value: Any) -> str:
    """How a tool's return value is written into the notebook."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    import pydantic_core

    return pydantic_core.to_json(value, fallback=str).decode()


def ask_human(
    name: str = "ask_human",
    description: str = (
        "Ask a person a question and wait for the answer. Use it when you need a fact, a choice "
        "or a confirmation that only a person can give."
    ),
    *,
    answer: Any = str,
) -> Tool:
    """A tool that asks a person: the run pauses with a *question* item and the answer becomes the result.

    ``answer`` is the type of the answer (``str`` by default; a pydantic model,
    a dataclass, a ``Literal`` ...); an answer that does not fit is refused when
    the run resumes. The question is bound to its call and exact text, like an
    approval, and is journaled and resumable.

    >>> from tether import Action, Agent, RunState
    >>> from tether.testing import ScriptedModel
    >>> agent = Agent(ScriptedModel([Action("ask_human", {"question": "Which size?"}), "Ordered."]), [ask_human()])
    >>> paused = agent.run_sync("order a shirt")
    >>> paused.items[0].status, paused.items[0].call.arguments
    ('awaiting-answer', '{"question": "Which size?"}')
    >>> done = agent.run_sync(paused.state.answer(paused.items[0].call.id, "large"))
    >>> done.context[-2].content, done.output
    ('large', 'Ordered.')
    """
    import pydantic

    def ask(question: str) -> str:
        raise RuntimeError("a question tool never runs: the loop waits for a person's answer")

    ask.__doc__ = f"{description}\n\nArgs:\n    question: the question, in plain words, for a person to answer."
    made = tool(name=name, effect="none")(ask)
    adapter = pydantic.TypeAdapter(answer)
    schema = adapter.json_schema()
    strip_titles(schema)
    return dataclass_replace(made, answer=schema, answer_validator=adapter)
