"""Tools: schemas from hints and docstrings, validation, contracts."""

from __future__ import annotations

import asyncio
from typing import Annotated, Literal

import pydantic
import pytest
from inline_snapshot import snapshot

from tether import Invocation, Tool, UserError, tool
from tether.tools import ArgumentsInvalid, parse_docstring, result_text


class Address(pydantic.BaseModel):
    city: str
    zip_code: str | None = None


@tool(effect="none")
def ship(order_id: str, speed: Literal["slow", "fast"] = "slow", copies: int = 1, to: Address | None = None) -> str:
    """Ship an order.

    Longer explanation on a second paragraph.

    Args:
        order_id: the order to ship.
        speed: how fast; fast costs more.
        copies (int): how many copies,
            at least one.
        to: where to send it.
    """
    return f"{order_id} {speed} x{copies} {to.city if to else ''}"


def test_google_docstring_and_hints_make_the_schema() -> None:
    assert ship.name == "ship"
    assert ship.description == "Ship an order.\n\nLonger explanation on a second paragraph."
    assert ship.parameters == snapshot(
        {
            "$defs": {
                "Address": {
                    "properties": {
                        "city": {"type": "string"},
                        "zip_code": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
                    },
                    "required": ["city"],
                    "type": "object",
                }
            },
            "properties": {
                "order_id": {"description": "the order to ship.", "type": "string"},
                "speed": {
                    "default": "slow",
                    "description": "how fast; fast costs more.",
                    "enum": ["slow", "fast"],
                    "type": "string",
                },
                "copies": {"default": 1, "description": "how many copies, at least one.", "type": "integer"},
                "to": {
                    "anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}],
                    "default": None,
                    "description": "where to send it.",
                },
            },
            "required": ["order_id"],
            "type": "object",
            "additionalProperties": False,
        }
    )


def test_numpy_and_sphinx_docstrings_are_understood() -> None:
    numpy_doc = "Sum things.\n\nParameters\n----------\nx : int\n    The first.\ny : str\n    The second,\n    continued.\n\nReturns\n-------\nint\n"
    sphinx_doc = "Sum things.\n\n:param x: The first.\n:param int y: The second.\n:returns: the sum\n"
    assert parse_docstring(numpy_doc) == ("Sum things.", {"x": "The first.", "y": "The second, continued."})
    assert parse_docstring(sphinx_doc) == ("Sum things.", {"x": "The first.", "y": "The second."})


def test_validation_coerces_safely_and_keeps_models() -> None:
    args = ship.validate({"order_id": "A1", "copies": "3", "to": {"city": "Oslo"}})
    assert args["copies"] == 3 and isinstance(args["to"], Address)
    with pytest.raises(ArgumentsInvalid, match="field 'speed'") as err:
        ship.validate({"order_id": "A1", "speed": "warp"})
    assert "expected:" in str(err.value) and '"enum": ["slow", "fast"]' in str(err.value)


def test_invocation_is_injected_and_hidden_from_the_schema() -> None:
    @tool(effect="idempotent")
    async def charge(amount: int, call: Invocation) -> str:
        return f"{amount}@{call.idempotency_key}"

    assert list(charge.parameters["properties"]) == ["amount"]
    out = asyncio.run(charge.invoke({"amount": 5}, Invocation("run1", "c9", "charge")))
    assert out == "5@run1:c9"


def test_contract_fields_are_checked() -> None:
    def noop() -> None: ...

    with pytest.raises(UserError, match="effect must be one of"):
        tool(effect="twice")(noop)  # type: ignore[call-overload]
    with pytest.raises(UserError, match="tool name"):
        Tool("has spaces", "", {}, print)
    with pytest.raises(UserError, match="timeout must be positive"):
        tool(timeout=0)(noop)

    def star(*args: int) -> None: ...

    with pytest.raises(UserError, match="named parameter"):
        tool(star)


def test_approval_may_depend_on_the_arguments() -> None:
    from tether import Context

    # Not support.refund: the gate here is a threshold on the arguments.
    @tool(approval=lambda args, ctx: args["amount"] > 100)
    def refund(amount: int) -> str:
        return "ok"

    assert refund.needs_approval({"amount": 500}, Context()) is True
    assert refund.needs_approval({"amount": 5}, Context()) is False


def test_fingerprint_changes_when_the_contract_changes() -> None:
    def f(x: int) -> int:
        return x

    assert tool(f).fingerprint() == tool(f).fingerprint()
    assert tool(f).fingerprint() != tool(approval=True)(f).fingerprint()
    assert tool(f).fingerprint() != tool(name="g")(f).fingerprint()


def test_results_become_text() -> None:
    assert result_text("x") == "x"
    assert result_text(None) == ""
    assert result_text({"a": [1, 2]}) == '{"a":[1,2]}'
    assert result_text(Address(city="Oslo")) == '{"city":"Oslo","zip_code":null}'


def test_annotated_constraints_reach_the_schema_and_the_check() -> None:
    # An amount's cap, written in the signature, is what the inbox's edit form and the server both enforce.
    @tool
    def refund(amount: Annotated[float, pydantic.Field(gt=0, le=500, json_schema_extra={"format": "money"})]) -> str:
        """Refund.

        Args:
            amount: dollars.
        """
        return f"{amount}"

    assert refund.parameters["properties"]["amount"] == {
        "description": "dollars.",
        "exclusiveMinimum": 0,
        "format": "money",
        "maximum": 500,
        "type": "number",
    }
    with pytest.raises(ArgumentsInvalid, match="less than or equal to 500"):
        refund.validate({"amount": 9999})
    assert refund.validate({"amount": 200}) is not None
