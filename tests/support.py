"""Helpers shared by the whole suite (``tests/`` is on the path: ``from support import add``)."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import strategies as st

from tether import Action, Agent, Tool, tool
from tether.parts import File, Image, Text
from tether.testing import FunctionPolicy


@tool(effect="none")
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first number.
        b: the second number.
    """
    return a + b


@tool(effect="none", name="add")
def add_numbers(a: float, b: float) -> float:
    """Add two numbers.

    Args:
        a: the first number.
        b: the second number.
    """
    return a + b


def refund_tool(ran: list[str] | None = None) -> Tool:
    """The suite's gated refund tool: ``refund(order)`` runs only once a person approves it;
    each order it refunds is added to ``ran`` (when given), for tests that check what ran."""

    @tool(approval=True)
    def refund(order: str) -> str:
        """Refund an order (a person approves)."""
        if ran is not None:
            ran.append(order)
        return f"refunded {order}"

    return refund


refund = refund_tool()  # for tests that need not see what ran


def refund_desk(ran: list[str]) -> Agent:
    """A ``support`` agent that asks to refund order A1 and, once the refund ran, says "done"."""

    def brain(context: Any, tools: Any) -> Any:
        return "done" if any(m.role == "tool" for m in context) else Action("refund", {"order": "A1"})

    return Agent(FunctionPolicy(brain), [refund_tool(ran)], name="support")


# Random parts, for property tests of notes that hold images and files.
_images = st.builds(Image, st.binary(max_size=64), st.sampled_from(("image/jpeg", "image/png", "image/webp")))
_files = st.builds(
    File, st.binary(max_size=64), st.sampled_from(("application/pdf", "text/plain")), st.text(max_size=20)
)
_links = st.builds(lambda n: Image(url=f"https://example.com/{n}.png"), st.integers(0, 99))
parts = st.lists(st.one_of(st.builds(Text, st.text(max_size=30)), _images, _files, _links), min_size=1, max_size=5)


async def until(check: Any, what: str, *, seconds: float = 10.0, every: float = 0.005) -> None:
    """Wait until the async ``check()`` is true; fail naming ``what`` after ``seconds``."""
    for _ in range(max(1, int(seconds / every))):
        if await check():
            return
        await asyncio.sleep(every)
    raise AssertionError(f"never: {what}")


async def approve_through_the_api(client: Any, run_id: str, *, prefix: str = "", seconds: float = 10.0) -> None:
    """Through tether serve's API: wait for the run to pause, approve its first item, wait for it to finish."""
    run = f"{prefix}/api/runs/{run_id}"

    async def paused() -> bool:
        return bool((await client.get(run)).json()["items"])

    await until(paused, f"run {run_id} pauses", seconds=seconds)
    item = (await client.get(f"{prefix}/api/items")).json()["items"][0]
    approve = f"{run}/items/{item['call_id']}/approve"
    assert (await client.post(approve, json={"args_hash": item["args_hash"]})).status_code == 200

    async def finished() -> bool:
        return (await client.get(run)).json()["status"] == "finished"

    await until(finished, f"run {run_id} finishes after its approval", seconds=seconds)


def require_local_model(name: str = "qwen2.5-coder-1.5b") -> None:
    """Skip the test when the offline model ``name`` is not installed; fail instead when
    ``TETHER_REQUIRE_LOCAL_MODEL=1`` (CI), so a broken install cannot pass as a skip."""
    import os

    import pytest

    from tether.exceptions import UserError

    try:
        import xllamacpp  # noqa: F401

        from tether.providers._weights import gguf_path

        gguf_path(name)
    except (ImportError, UserError) as exc:
        if os.environ.get("TETHER_REQUIRE_LOCAL_MODEL") == "1":
            pytest.fail(f"the local model {name} is required here: {exc}")
        pytest.skip(f"the local model {name} is not installed: {exc}")
