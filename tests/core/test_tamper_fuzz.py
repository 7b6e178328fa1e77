"""Any change to a signed, decided state is refused before a tool runs."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tether import Action, Agent, RunState, StateError, tool
from tether.testing import ScriptedModel

KEY = b"fuzz-key-0123456789abcdef0123456"
executions: list[str] = []


@tool(approval=True)
def transfer(to: str, amount: int) -> str:
    executions.append(f"{to}:{amount}")
    return "sent"


def _agent(*replies: object) -> Agent:
    return Agent(ScriptedModel(list(replies)), [transfer], signing_key=KEY)


_paused = _agent(Action("transfer", {"to": "bob", "amount": 5})).run_sync("pay bob", run_id="run-1").state
GOOD = _paused.approve("call_1_0", key=KEY, by="ann").to_dict()


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


PATHS = _paths(GOOD)


def _mutate(value: Any, how: int) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + (1 if how % 2 else -1)
    if isinstance(value, str):
        return value + "x" if how % 3 else (value[:-1] if value else "y")
    if value is None:
        return "x" if how % 2 else 0
    if isinstance(value, list):
        return value[:-1] if value and how % 2 else [*value, copy.deepcopy(value[0]) if value else {}]
    if isinstance(value, dict):
        return {**value, "extra": 1} if how % 2 else dict(list(value.items())[1:])
    raise AssertionError(value)


@settings(max_examples=1200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(PATHS), st.integers(0, 5), st.booleans())
def test_every_mutation_of_a_signed_decided_state_is_refused(path: tuple, how: int, delete: bool) -> None:
    data = copy.deepcopy(GOOD)
    parent = data
    for p in path[:-1]:
        parent = parent[p]
    last = path[-1]
    if delete and isinstance(parent, dict):
        del parent[last]
    else:
        parent[last] = _mutate(parent[last], how)
    if data == GOOD:
        return  # the mutation was a no-op
    before = len(executions)
    try:
        state = RunState.from_json(json.dumps(data))
        result = _agent("done").run_sync(state)
    except StateError:
        refused = True
    else:
        # Only acceptable without an error: nothing ran and the run is still waiting.
        refused = result.status == "paused"
    assert refused, f"mutation at {path} was accepted"
    assert len(executions) == before


def test_the_unmodified_state_is_accepted_every_time() -> None:
    for _ in range(20):
        before = len(executions)
        result = _agent("done").run_sync(RunState.from_json(json.dumps(GOOD)))
        assert result.status == "finished"
        assert len(executions) == before + 1
