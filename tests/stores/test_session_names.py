"""A session name every store can hold works the same everywhere; any other is refused up front."""

from __future__ import annotations

import pytest

from tether import Agent, UserError
from tether.testing import ScriptedModel

from .conftest import Backend


@pytest.mark.parametrize("name", ["a\x00b", "\ud800", "x\udfffy", "", "x" * 201])
async def test_a_session_name_no_store_can_hold_is_refused_with_a_user_error(backend: Backend, name: str) -> None:
    store = await backend.open()
    with pytest.raises(UserError, match="a session name is a non-empty string"):
        await Agent(ScriptedModel(["never"]), store=store).run("hi", session=name)
    assert await store.list_runs() == []


@pytest.mark.parametrize("name", [" ", "x" * 200, "é/..%_*", "\n", "客户-42"])
async def test_an_odd_but_holdable_session_name_goes_on_run_after_run(backend: Backend, name: str) -> None:
    store = await backend.open()
    agent = Agent(ScriptedModel(["one", "two"]), store=store)
    await agent.run("hi", session=name)
    await agent.run("again", session=name)
    (info,) = await store.sessions(name)
    assert (info.name, info.runs) == (name, 2)
