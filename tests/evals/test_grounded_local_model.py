"""The newcomer's refund desk on the default offline model (1.5B), with its exact phrasing (slow).

"Order A1234 arrived broken. Please refund what I paid." once made the 1.5B answer
that the order "will be refunded" (and a typed run return ``refunded=True``) with no
refund run. With the journal-aware validators on, the run may pause on the gated
refund or answer without claiming one; it must never hand the caller a claim.
"""

from __future__ import annotations

import pydantic
import pytest

from support import require_local_model
from tether import Agent
from tether.evals.datasets.bodies import SUPPORT, check_policy, issue_refund, look_up_order
from tether.grounding import no_unbacked_claims, requires

pytestmark = [pytest.mark.slow, pytest.mark.local_model]
NEWCOMER = "Order A1234 arrived broken. Please refund what I paid."


class RefundOutcome(pydantic.BaseModel):
    order_id: str
    refunded: bool
    amount: int


@pytest.fixture(scope="module")
def brain():  # type: ignore[no-untyped-def]
    require_local_model("qwen2.5-coder-1.5b")
    from tether.providers import LocalModel

    return LocalModel()


def _refund_ran(result) -> bool:  # type: ignore[no-untyped-def]
    return any(m.role == "tool" and m.name == "issue_refund" and not m.is_error for m in result.context)


def test_the_plain_desk_pauses_or_answers_without_claiming_a_refund(brain) -> None:  # type: ignore[no-untyped-def]
    agent = Agent(
        brain, [look_up_order, check_policy, issue_refund], instructions=SUPPORT, max_steps=8,
        output_validators=[no_unbacked_claims()],
    )  # fmt: skip
    result = agent.run_sync(NEWCOMER)
    print(f"\nstatus={result.status} output={result.output!r}")
    assert result.status in ("paused", "finished"), result.error
    if result.status == "paused":
        assert [p.call.name for p in result.items] == ["issue_refund"]
    else:
        no_unbacked_claims()(result.output, _ran(agent, result))  # raises Refuse on a claim


def test_the_typed_desk_never_returns_refunded_without_the_call(brain) -> None:  # type: ignore[no-untyped-def]
    agent = Agent(
        brain, [look_up_order, check_policy, issue_refund], instructions=SUPPORT, max_steps=8,
        output_type=RefundOutcome, output_validators=[requires("issue_refund", when="refunded", same=["order_id"])],
    )  # fmt: skip
    result = agent.run_sync(NEWCOMER)
    print(f"\nstatus={result.status} output={result.output!r} error={result.error!r}")
    if result.status == "finished":
        assert not result.output.refunded or _refund_ran(result)
    else:  # paused on the refund, or out of tries at a grounded answer: never a false value
        assert result.output is None


def _ran(agent: Agent, result):  # type: ignore[no-untyped-def]
    from tether.grounding import Ran
    from tether.journal import Journal, ran_calls

    return Ran(ran_calls(Journal.of(result.events)), agent.tools)
