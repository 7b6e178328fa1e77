"""Offloading, with real parts: a 2 MB tool result goes to a workspace file, the notebook keeps its
path and a preview, the model reads a window from the middle, compaction drops the preview and keeps
the path, and a run resumed by another agent on the same SQLite file reads the file again."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tether import Action, Agent, FunctionPolicy, UserError, tool
from tether.context import Context
from tether.events import Compacted, ToolFinished
from tether.memory import compactor, default_summary
from tether.stores.sqlite import SQLiteStore
from tether.toolkits import file_tools, offload_results
from tether.toolkits.offload import keeping_saved

ROWS = [f"order {i:06d}: shipped\n" for i in range(100_000)]  # 2.2 MB
EXPORT = "".join(ROWS)
SAVED = re.compile(r"(\.tool-results/\S+?\.txt)")  # in the note, or listed under a compaction's summary


@tool(effect="none")
def export_orders() -> str:
    """Every order, one per line."""
    return EXPORT


@tool(effect="once", approval=True)
def notify(text: str) -> str:
    """Tell the team."""
    return "sent"


def _path(ctx: Context) -> str:
    found = [m.group(1) for note in ctx for m in [SAVED.search(note.text)] if m]
    assert found, "the notebook lost the path of the offloaded result"
    return found[-1]


def _brain(steps: list[int], seen: list[str]) -> FunctionPolicy:
    """Export, read from the middle three times (the notebook grows past the compactor's limit
    twice), notify (a pause), read again, answer; ``seen`` gets each window read. ``steps`` counts
    the brain's turns across agents, since compaction changes how many notes there are."""

    def decide(ctx: Context, tools: object) -> Action | str:
        step = len(steps)
        steps.append(step)
        if step in (2, 3, 4, 6):
            seen.append(ctx[-1].text)
        if step == 0:
            return Action("export_orders")
        if step in (1, 2, 3):
            return Action("read_file", {"path": _path(ctx), "offset": 1_000_000 + 100 * step})
        if step == 4:
            return Action("notify", {"text": "export read"})
        if step == 5:
            return Action("read_file", {"path": _path(ctx), "offset": 2_190_000})
        return "done"

    return FunctionPolicy(decide)


def test_a_2mb_result_is_offloaded_read_in_part_and_survives_compaction_and_a_resume(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    db = tmp_path / "runs.db"
    steps: list[int] = []
    seen: list[str] = []

    def agent() -> Agent:
        tools = offload_results([export_orders, notify, *file_tools(ws, approval=False)], ws, over=20_000)
        shorter = compactor(max_messages=6, keep_last=2, summarize=keeping_saved(default_summary))
        return Agent(_brain(steps, seen), tools, store=SQLiteStore(db), compactor=shorter)

    paused = agent().run_sync("export the orders and check the middle")
    assert paused.status == "paused", paused.events[-1]
    run_id = paused.state.run_id
    path = f".tool-results/{run_id}/call_1_0.txt"
    assert (ws / path).read_text() == EXPORT  # the whole result, in the workspace

    first = next(ev.result for ev in paused.events if isinstance(ev, ToolFinished))
    assert first.text.startswith(f"[saved to {path}: the {len(EXPORT):,}-character result of export_orders")
    assert first.text.endswith(EXPORT[:2000]) and len(first.text) < 2400  # a path and a preview, no more

    data = EXPORT.encode()
    for window, step in zip(seen[:3], (1, 2, 3), strict=True):  # windows from the middle, as the file has them
        start = 1_000_000 + 100 * step
        assert window.startswith(data[start : start + 1000].decode())
        assert window.endswith(
            f"[... bytes {start}-{start + 50_000} of {len(data)}; call read_file with offset={start + 50_000} for more]"
        )
    state = paused.state.approve(paused.state.open_calls[0].call.id)
    resumed = agent().run_sync(state)  # another agent, on the same SQLite file
    assert resumed.status == "finished" and resumed.output == "done"
    assert (
        seen[-1] == data[2_190_000:].decode() + f"\n[... bytes 2190000-{len(data)} of {len(data)}; the end of the file]"
    )
    compactions = [ev for ev in (*paused.events, *resumed.events) if isinstance(ev, Compacted)]
    assert len(compactions) >= 2  # before the pause, and after the resume the summary itself
    for ev in compactions:  # each dropped the preview but kept the path
        summary = ev.messages[0].text
        assert summary.startswith("Summary of earlier notes") and f"- {path}" in summary
        assert EXPORT[:2000] not in summary

    total = sum(len(ev.result.text) for ev in (*paused.events, *resumed.events) if isinstance(ev, ToolFinished))
    assert total < 250_000  # the journal never held the 2 MB


def test_small_results_and_bad_sizes(tmp_path: Path) -> None:
    @tool(effect="none")
    def small() -> dict[str, int]:
        return {"a": 1}

    [wrapped] = offload_results([small], tmp_path, over=100, preview=10)
    result = Agent(FunctionPolicy(lambda ctx, t: Action("small") if len(ctx) == 1 else "ok"), [wrapped]).run_sync("x")
    assert result.context[2].text == '{"a":1}' and not (tmp_path / ".tool-results").exists()
    with pytest.raises(UserError, match="preview < over"):
        offload_results([small], tmp_path, over=100, preview=100)
