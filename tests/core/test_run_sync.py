"""run_sync: its errors arrive as they were raised, not chained under the event-loop probe."""

from __future__ import annotations

import asyncio
import traceback
from typing import Any

import pytest

from tether import Agent, FunctionPolicy
from tether.exceptions import UserError


def test_an_error_out_of_run_sync_is_not_chained_under_no_running_event_loop() -> None:
    def broken(context: Any, tools: Any) -> Any:
        raise KeyError("the brain broke")

    with pytest.raises(KeyError) as caught:
        Agent(FunctionPolicy(broken)).run_sync("go")
    printed = "".join(traceback.format_exception(caught.value))
    assert "no running event loop" not in printed
    assert caught.value.__context__ is None or "event loop" not in str(caught.value.__context__)


def test_run_sync_inside_a_running_loop_is_refused() -> None:
    async def inside() -> None:
        Agent(FunctionPolicy(lambda c, t: "hi")).run_sync("go")

    with pytest.raises(UserError, match=r"await agent\.run"):
        asyncio.run(inside())
