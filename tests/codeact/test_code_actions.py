"""Code actions in one process: the result note, a traceback naming the line, typed output with a retry.

The real sandbox runs every program; the brains are scripted.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from tether import tool
from tether.codeact import code_agent, instructions_for
from tether.testing import ScriptedModel
from tether.toolkits import Sandbox

from .desk import REFUND, count, desk_tools, oracle_rows

pytestmark = pytest.mark.sandbox


def block(code: str) -> str:
    return f"```python\n{code}```"


def action_note(result: Any) -> str:
    notes = [m for m in result.context if m.role == "tool" and m.name == "python"]
    assert notes, "no code action ran"
    text: str = notes[0].text
    return text


def test_printed_output_and_the_last_expression_are_the_note(oracle: Path, workspace: Path) -> None:
    program = block('o = lookup("A7")\nprint("amount", o["amount"])\n{"order": o["order"], "n": 2 ** 10}\n')
    agent = code_agent(ScriptedModel([program, "done"]), desk_tools(oracle), sandbox=Sandbox(str(workspace)))
    result = agent.run_sync("look A7 up")
    note = action_note(result)
    assert result.status == "finished" and result.output == "done"
    assert note.startswith("The program ran to its end (1 tool call).")
    assert "[printed]\namount 79.0" in note and "[value]\n{'order': 'A7', 'n': 1024}" in note
    assert count(oracle, "lookup") == 1


def test_a_traceback_is_a_note_naming_the_line(oracle: Path, workspace: Path) -> None:
    program = block('o = lookup("A1")\nratio = o["amount"] / 0\nprint(ratio)\n')
    agent = code_agent(ScriptedModel([program, "gave up"]), desk_tools(oracle), sandbox=Sandbox(str(workspace)))
    note = action_note(agent.run_sync("divide"))
    assert "ZeroDivisionError: float division by zero" in note
    assert 'line 2: ratio = o["amount"] / 0' in note


def test_invalid_arguments_from_code_are_the_programs_tool_error(oracle: Path, workspace: Path) -> None:
    program = block('try:\n    lookup(42)\nexcept ToolError as e:\n    print("refused:", e)\n')
    agent = code_agent(ScriptedModel([program, "ok"]), desk_tools(oracle), sandbox=Sandbox(str(workspace)))
    note = action_note(agent.run_sync("bad call"))
    assert "refused: invalid arguments for tool 'lookup'" in note
    assert count(oracle, "lookup") == 0


def test_the_functions_carry_the_tools_signatures_and_docstrings(oracle: Path, workspace: Path) -> None:
    text = instructions_for(desk_tools(oracle), {})
    assert "def lookup(order: str):" in text and 'order: the order id, e.g. "A1".' in text
    assert "def refund(order: str, amount: float):" in text
    program = block("import inspect\nprint(inspect.signature(tag), tag.__doc__)\n")
    agent = code_agent(ScriptedModel([program, "ok"]), desk_tools(oracle), sandbox=Sandbox(str(workspace)))
    assert "(order: str, label: str) Put a label on an order." in action_note(agent.run_sync("look"))


class Refund(BaseModel):
    order: str
    amount: float


def test_typed_output_through_final_answer_with_a_validation_retry(oracle: Path, workspace: Path) -> None:
    first = block('o = lookup("A1")\nfinal_answer({"order": o["order"]})\n')  # amount missing
    second = block('o = lookup("A1")\nfinal_answer({"order": o["order"], "amount": o["amount"]})\n')
    model = ScriptedModel([first, second])
    agent = code_agent(model, desk_tools(oracle), sandbox=Sandbox(str(workspace)), output_type=Refund)
    result = agent.run_sync("what would A1's refund be?")
    assert result.status == "finished", result.error
    assert result.output == Refund(order="A1", amount=79.0)
    refused = [m for m in result.context if m.name == "final_result" and m.is_error]
    assert len(refused) == 1 and "amount" in refused[0].text  # the model read why, then wrote it again
    model.assert_consumed()


def test_final_answer_without_a_type_ends_the_run_with_its_text(oracle: Path, workspace: Path) -> None:
    agent = code_agent(ScriptedModel([block("final_answer('forty-two')\n")]), [], sandbox=Sandbox(str(workspace)))
    assert agent.run_sync("answer").output == "forty-two"


def programs_running() -> int:
    """Processes running a code action's program (the stub's text is on their command line)."""
    found = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            found += MARK in Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
    return found


MARK = b"The program's side of a code action"


def test_a_pause_leaves_no_program_behind_and_the_resume_replays_it(oracle: Path, workspace: Path) -> None:
    seen: list[int] = []

    @tool(effect="none")
    def look_around() -> int:
        """How many programs run now (called from one, so at least that one)."""
        seen.append(programs_running())
        return seen[-1]

    program = block("look_around()\n" + REFUND)
    tools = [*desk_tools(oracle), look_around]
    agent = code_agent(ScriptedModel([program]), tools, sandbox=Sandbox(str(workspace)))
    paused = agent.run_sync("refund A1")
    assert paused.status == "paused" and seen[0] >= 1  # the check below sees a running program (its processes)
    deadline = time.monotonic() + 20
    while programs_running() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert programs_running() == 0
    done = agent.run_sync(paused.state.approve(paused.items[0].id))
    assert done.output == "refunded 79 on A1"
    assert [r["tool"] for r in oracle_rows(oracle)] == ["lookup", "tag", "refund"]


def test_the_agents_approver_gates_calls_from_code(oracle: Path, workspace: Path) -> None:
    def careful(tool: Any, args: dict[str, Any], context: Any) -> bool:
        return bool(tool.name == "tag")

    agent = code_agent(
        ScriptedModel([block(REFUND)]), desk_tools(oracle), sandbox=Sandbox(str(workspace)), approver=careful
    )
    paused = agent.run_sync("refund A1")
    [item] = paused.items
    assert item.call.name == "tag" and [r["tool"] for r in oracle_rows(oracle)] == ["lookup"]


def test_the_program_runs_once_while_its_run_streams_and_again_after_a_pause(oracle: Path, workspace: Path) -> None:
    # The workspace outlives each execution of the program: each one leaves a line.
    program = block('open("runs.txt", "a").write("ran\\n")\n' + REFUND)
    agent = code_agent(ScriptedModel([program]), desk_tools(oracle), sandbox=Sandbox(str(workspace)))
    paused = agent.run_sync("refund A1")
    assert (workspace / "runs.txt").read_text() == "ran\n"  # lookup and tag answered to the same execution
    done = agent.run_sync(paused.state.approve(paused.items[0].id))
    assert done.output == "refunded 79 on A1"
    assert (workspace / "runs.txt").read_text() == "ran\nran\n"  # the resume ran it again from the top


async def test_the_models_text_streams_before_its_program_runs(oracle: Path, workspace: Path) -> None:
    model = ScriptedModel([block('print(lookup("A1")["amount"])\n'), "done"], stream=True)
    agent = code_agent(model, desk_tools(oracle), sandbox=Sandbox(str(workspace)))
    events = [ev async for ev in agent.stream("amount of A1?")]
    kinds = [ev.kind for ev in events]
    assert "token" in kinds and kinds.index("token") < kinds.index("tool-started")
    assert events[-1].kind == "finished" and count(oracle, "lookup") == 1
