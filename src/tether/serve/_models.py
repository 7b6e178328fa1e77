"""The shapes the HTTP API reads and writes, as pydantic models.

Request bodies are validated with them (unknown fields are refused); response
models exist for the OpenAPI document (:mod:`tether.serve._openapi`), which is
generated from these classes, so what is documented is what is checked. The
responses themselves are built as plain dicts by :mod:`tether.serve._views`;
the schemathesis test holds the two together.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator

from ..events import RESERVED_LABELS
from ..pending import VERBS, Payload, Verdict
from ..state import Status

__all__ = [
    "BODIES",
    "MODELS",
    "PAYLOADS",
    "Agents",
    "CancelBody",
    "Decided",
    "Error",
    "EventList",
    "ItemList",
    "Run",
    "RunList",
    "StartRun",
]

RUN_ID = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
By = Field(default=None, max_length=100, description="Who decides, as recorded with the decision.")
Hash = Field(min_length=1, max_length=128, description="The `args_hash` of the item as you were shown it.")
Message = Field(default="", max_length=20_000, description="What the model reads as the call's result.")


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StartRun(_Body):
    """Start a run of a served agent."""

    agent: str = Field(min_length=1, max_length=100, description="The name of a served agent.")
    input: str = Field(min_length=1, max_length=200_000, description="The task, in plain words.")
    run_id: str | None = Field(default=None, pattern=RUN_ID, description="Your own id for the run (idempotent).")
    meta: dict[str, str] = Field(
        default_factory=dict,
        max_length=50,
        description=f"Labels kept with the run (not {' or '.join(sorted(RESERVED_LABELS))}: tether sets those).",
    )
    inputs: dict[str, Any] = Field(
        default_factory=dict, description="JSON the server's deps factory makes the run's dependencies from."
    )

    @field_validator("meta")
    @classmethod
    def _not_reserved(cls, meta: dict[str, str]) -> dict[str, str]:
        # A run labelled session=X would join session X, and X's next turn would continue from its notebook.
        if reserved := sorted(RESERVED_LABELS.intersection(meta)):
            raise ValueError(f"the label(s) {reserved} are reserved: only tether sets them")
        return meta


PAYLOADS: dict[Payload, dict[str, Any]] = {
    "args": {
        "args": (dict[str, Any] | None, Field(default=None, description="Edited arguments, instead of the model's."))
    },
    "message": {"message": (str, Message)},
    "answer": {
        "answer": (Any, Field(description="The answer (never null).", json_schema_extra={"not": {"type": "null"}}))
    },
    "nothing": {},
}
"""The field of each payload a verdict takes (:data:`tether.pending.VERBS` says which)."""


def _body(verdict: Verdict) -> type[_Body]:
    """The body of a decision: the hash of what the person was shown, the verdict's payload, who decides."""
    verb = VERBS[verdict]
    fields: dict[str, Any] = {"args_hash": (str, Hash), **PAYLOADS[verb.takes], "by": (str | None, By)}
    return create_model(verdict.title(), __base__=_Body, __doc__=verb.says, __module__=__name__, **fields)


BODIES: dict[Verdict, type[_Body]] = {verdict: _body(verdict) for verdict in VERBS}
"""The request body of each verdict, one model per verdict (``Approve``, ``Deny``, ...), built from the table."""


class CancelBody(_Body):
    """End a run for good."""

    reason: str = Field(default="", max_length=2_000)
    by: str | None = By


# -- responses (documentation of what the views write) -------------------------------


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorDetail(_Out):
    code: str = Field(description="Stable, machine-readable: no-such-run, stale, already-decided, ...")
    message: str


class DecisionOut(_Out):
    verdict: Verdict
    by: str
    at: float | None
    args_hash: str
    args: dict[str, Any] | None
    message: str
    answer: Any


class Item(_Out):
    run_id: str
    call_id: str = Field(description="The item's id: a call id, or a path of call ids into a child run (c1/c7).")
    kind: Literal["approval", "question", "outcome-unknown"]
    tool: str
    label: str = Field(description="Where an item of a child run waits (agent › agent › tool); empty at the top.")
    arguments: Any = Field(description="The full arguments as JSON (the raw text when it is not JSON).")
    arguments_text: str
    args_hash: str = Field(description="Name it in your decision: what you saw is what you sign.")
    note: str
    question: str | None
    since: float | None
    verdicts: list[Verdict]
    parameters: dict[str, Any] | None = Field(description="The tool's JSON Schema (edited arguments must fit).")
    answer_schema: dict[str, Any] | None
    decision: DecisionOut | None


class Usage(_Out):
    input_tokens: int
    output_tokens: int
    requests: int


class RunSummary(_Out):
    run_id: str
    agent: str
    status: Status
    seq: int = Field(description="How many events the run has (the position of its last event).")
    created_at: float | None
    updated_at: float | None
    task: str
    waiting: int = Field(description="How many of its items wait for a person.")


class Run(RunSummary):
    meta: dict[str, str]
    usage: Usage
    output: str | None
    error: str | None
    closed: bool = Field(description="Cancelled for good: it will never run again.")
    trace: str = Field(description="The run's story so far, as text.")
    items: list[Item]


class Error(_Out):
    error: ErrorDetail
    run: Run | None = None


class RunList(_Out):
    runs: list[RunSummary]
    next_offset: int | None


class ItemList(_Out):
    items: list[Item]
    next_offset: int | None = Field(description="Pass as ?offset= for the next page (null: this is the last).")


class Decided(_Out):
    run: Run


class EventOut(_Out):
    position: int
    kind: str
    at: float | None
    event: dict[str, Any]


class EventList(_Out):
    events: list[EventOut]
    next: int = Field(description="Pass as ?after= to get what comes next.")


class ToolOut(_Out):
    name: str
    description: str
    parameters: dict[str, Any]
    approval: bool
    question: bool


class AgentOut(_Out):
    name: str
    tools: list[ToolOut]


class Agents(_Out):
    agents: list[AgentOut]


MODELS: tuple[type[BaseModel], ...] = (
    StartRun,
    *BODIES.values(),
    CancelBody,
    Error,
    Run,
    RunList,
    ItemList,
    Decided,
    EventList,
    Agents,
)
