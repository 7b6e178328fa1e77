"""``tether runs`` shows what each run cost; ``tether show`` how long each step took and what it used."""

from __future__ import annotations

import json
from pathlib import Path

from tether import Agent, Message, ToolCall, Usage, tool
from tether.stores.sqlite import SQLiteStore
from tether.testing import ScriptedModel


@tool(effect="none")
def look_up(order: str) -> str:
    """Look an order up."""
    return f"{order}: delivered"


def stored_run(ws: Path) -> str:
    """A finished gpt-4o run with usage, in the workspace's default store."""
    (ws / ".tether").mkdir(exist_ok=True)
    model = ScriptedModel([
        Message("assistant", "", (ToolCall.of("look_up", {"order": "A1"}, id="c1"),), usage=Usage(1_000, 100, 1)),
        Message("assistant", "Delivered.", usage=Usage(1_200, 20, 1)),
    ])  # fmt: skip
    model.model = "gpt-4o"  # type: ignore[attr-defined]  # the name a provider's policy carries
    result = Agent(model, [look_up], store=SQLiteStore(ws / ".tether" / "runs.db")).run_sync("Where is A1?")
    return result.run_id


COST = (2_200 * 2.50 + 120 * 10.00) / 1e6  # $0.0067


def test_runs_lists_the_cost_of_each_run(tether, ws: Path) -> None:
    rid = stored_run(ws)
    table = tether("runs")
    assert table.code == 0, table.err
    header, row = table.lines()
    assert header.split() == ["RUN", "STATUS", "UPDATED", "COST", "TASK"]
    assert row.startswith(rid) and f"${COST:.4f}  Where is A1?" in row
    (line,) = tether("runs", "--json").lines()
    assert json.loads(line)["cost"] == COST


def test_show_gives_the_time_and_tokens_of_each_step_and_the_total(tether, ws: Path) -> None:
    rid = stored_run(ws)
    shown = tether("show", rid[:8])
    assert shown.code == 0, shown.err
    lines = shown.lines()
    report = lines[lines.index("time and usage:") + 1 :]
    assert [line.split()[:3] for line in (report[0], report[2])] == [["step", "1", "model"], ["step", "2", "model"]]
    assert report[1].split()[0] == "look_up"
    assert report[0].endswith("1,000 in / 100 out tokens") and report[2].endswith("1,200 in / 20 out tokens")
    assert report[1].split()[-1] in ("ms", "s")
    assert report[3] == f"  total: 2,200 in / 120 out tokens in 2 request(s), cost ${COST:.4f}"
