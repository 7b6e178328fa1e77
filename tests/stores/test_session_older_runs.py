"""An older run of a session stays where it was once a newer run continued the session, on every store."""

from __future__ import annotations

import pytest

from support import refund
from tether import Action, Agent, LeaseConflict, UserError, tool
from tether.testing import ScriptedModel

from .conftest import Backend


def _charging() -> tuple[list[str], object]:
    calls: list[str] = []

    @tool
    def charge(order: str) -> str:
        """Charge an order."""
        calls.append(order)
        return f"charged {order}"

    return calls, charge


async def _moved_on(backend: Backend):
    """r1 runs out of calls with A and B pending; r2 continues the session and charges B."""
    store = await backend.open()
    calls, charge = _charging()
    two = [Action("charge", {"order": "A"}), Action("charge", {"order": "B"})]
    r1 = await Agent(ScriptedModel([two, "done"]), [charge], store=store, max_tool_calls=1).run("pay", session="s")
    assert r1.status == "limit-reached" and calls == [] and len(r1.items) == 2
    r2 = await Agent(ScriptedModel([Action("charge", {"order": "B"}), "paid B"]), [charge], store=store).run(
        "retry", session="s"
    )
    assert r2.status == "finished" and calls == ["B"]
    return store, calls, charge, r1, r2


async def test_an_older_run_of_a_session_resumed_by_id_is_refused_once_a_newer_run_continued_it(
    backend: Backend,
) -> None:
    store, calls, charge, r1, r2 = await _moved_on(backend)
    again = Agent(ScriptedModel(["done"]), [charge], store=store)
    with pytest.raises(LeaseConflict, match=rf"session 's' moved on to run {r2.run_id!r}"):
        await again.run(run_id=r1.run_id)
    assert calls == ["B"]
    (info,) = await store.sessions("s")
    assert info.last_run == r2.run_id and info.runs == 2


async def test_an_older_run_of_a_session_resumed_from_its_state_is_refused_once_a_newer_run_continued_it(
    backend: Backend,
) -> None:
    store, calls, charge, r1, r2 = await _moved_on(backend)
    with pytest.raises(LeaseConflict, match=rf"moved on to run {r2.run_id!r}"):
        await Agent(ScriptedModel(["done"]), [charge], store=store).run(r1.state)
    assert calls == ["B"]


async def test_the_older_run_goes_on_again_once_the_newer_run_is_deleted(backend: Backend) -> None:
    store, _, charge, r1, r2 = await _moved_on(backend)
    await store.delete(r2.run_id)
    done = await Agent(ScriptedModel(["done"]), [charge], store=store).run(run_id=r1.run_id)
    assert done.status == "finished"


async def test_a_new_run_of_a_session_is_refused_while_its_last_run_is_leased(backend: Backend) -> None:
    store = await backend.open()
    first = await Agent(ScriptedModel(["hi"]), store=store).run("hello", session="s")
    await store.acquire(first.run_id, "elsewhere:0-0:1:worker", 60)  # another process just took it to resume it
    with pytest.raises(LeaseConflict, match=rf"last run {first.run_id!r} is being advanced by 'elsewhere"):
        await Agent(ScriptedModel(["again"]), store=store).run("more", session="s")
    (info,) = await store.sessions("s")
    assert info.last_run == first.run_id and info.runs == 1


@pytest.mark.parametrize("labels", [("session", "continues"), ("continues",), ("session",)])
async def test_session_labels_are_reserved_for_the_session_code(backend: Backend, labels: tuple[str, ...]) -> None:
    store = await backend.open()
    paused = await Agent(ScriptedModel([Action("refund", {"order": "A"})]), [refund], store=store).run("r", session="s")
    meta = {"session": "s", "continues": paused.run_id}
    with pytest.raises(UserError, match="reserved"):  # past its paused last run, were they taken
        await Agent(ScriptedModel(["x"]), store=store).run("next", meta={k: meta[k] for k in labels})
    (info,) = await store.sessions("s")
    assert info.last_run == paused.run_id and info.runs == 1
