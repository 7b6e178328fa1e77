"""Code actions: what a call from code costs over a direct call, and what acting in code saves.

Run: ``python bench/bench_codeact.py [calls] [rounds]`` (default 40 calls, 3 rounds;
needs bubblewrap). Prints two tables and the load average.

1. **Bridge overhead per call.** The same trivial tool called N times by one
   code action and by N direct calls (a scripted brain, one call per turn), in
   memory, no store. CPU per call is the host's CPU (``process_time``) plus the
   sandbox processes' (``RUSAGE_CHILDREN``), with a run of 0 calls subtracted so
   the sandbox's start is not counted per call; the start is shown on its own.
   The modes alternate within each round (interleaved) and the medians are shown.
2. **Tokens and turns on a data-moving task.** Read a 2,000-line document with
   one tool, keep the lines that matter, write them with another: a function
   brain does it with direct calls (the document passes through its notebook)
   and in code (one program; the document stays in a variable). Tokens are
   estimated as characters / 4 of every request (instructions, tool schemas and
   notebook) the brain receives; turns are the requests.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tether import Action, Agent, FunctionPolicy, tool
from tether.codeact import code_agent
from tether.context import Context
from tether.testing import ScriptedModel
from tether.toolkits import Sandbox
from tether.tools import Tool


@tool(effect="none")
def ping(n: int) -> int:
    """Answer n + 1."""
    return n + 1


def cpu() -> float:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def measure(run: Callable[[], Any]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one run."""
    c, w = cpu(), time.perf_counter()
    run()
    return cpu() - c, time.perf_counter() - w


def direct(calls: int) -> Callable[[], Any]:
    def go() -> Any:
        script: list[Any] = [Action("ping", {"n": i}) for i in range(calls)] + ["done"]
        return Agent(ScriptedModel(script), [ping], max_steps=calls + 2).run_sync("ping")

    return go


def in_code(calls: int, sandbox: Sandbox) -> Callable[[], Any]:
    program = f"```python\nfor i in range({calls}):\n    ping(i)\nfinal_answer('done')\n```"

    def go() -> Any:
        result = code_agent(ScriptedModel([program]), [ping], sandbox=sandbox, max_calls=calls + 1).run_sync("ping")
        assert result.output == "done", result.error
        return result

    return go


def overhead(calls: int, rounds: int, sandbox: Sandbox) -> None:
    modes = {"direct 0": direct(0), f"direct {calls}": direct(calls), "code 0": in_code(0, sandbox),
             f"code {calls}": in_code(calls, sandbox)}  # fmt: skip
    seen: dict[str, list[tuple[float, float]]] = {m: [] for m in modes}
    for _ in range(rounds):
        for name, run in modes.items():  # interleaved: every mode once per round
            seen[name].append(measure(run))
    med = {m: (statistics.median(c for c, _ in v), statistics.median(w for _, w in v)) for m, v in seen.items()}
    per_direct = (med[f"direct {calls}"][0] - med["direct 0"][0]) / calls
    per_code = (med[f"code {calls}"][0] - med["code 0"][0]) / calls
    wall_direct = (med[f"direct {calls}"][1] - med["direct 0"][1]) / calls
    wall_code = (med[f"code {calls}"][1] - med["code 0"][1]) / calls
    print(f"\n1. one tool call, {calls} calls x {rounds} rounds, medians")
    print("| | CPU per call | wall per call |\n|---|---|---|")
    print(f"| direct call (one turn each) | {per_direct * 1e6:,.0f} µs | {wall_direct * 1e6:,.0f} µs |")
    print(f"| call from code (bridge + child turn) | {per_code * 1e6:,.0f} µs | {wall_code * 1e6:,.0f} µs |")
    print(f"| ratio code / direct | {per_code / per_direct:.2f} | {wall_code / wall_direct:.2f} |")
    start_cpu, start_wall = med["code 0"][0] - med["direct 0"][0], med["code 0"][1] - med["direct 0"][1]
    print(f"a code action's fixed cost (sandbox start, program, child run): "
          f"{start_cpu * 1e3:.0f} ms CPU, {start_wall * 1e3:.0f} ms wall")  # fmt: skip


DOCUMENT = "\n".join(
    f"{i:04d} | {'ERROR disk full on node-' + str(i % 13) if i % 97 == 5 else 'ok heartbeat from node-' + str(i % 13)}"
    for i in range(2000)
)
written: list[str] = []


@tool(effect="none")
def read_document() -> str:
    """The service log, one line per event."""
    return DOCUMENT


@tool(effect="idempotent")
def write_summary(text: str) -> str:
    """Save the summary for the on-call engineer."""
    written.append(text)
    return f"saved {len(text)} characters"


def extract(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if "ERROR" in line)


class Counting:
    """A policy wrapper that counts requests and their size (instructions, tool schemas, notebook)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.requests, self.chars = inner, 0, 0

    async def decide(self, context: Context, tools: Sequence[Tool]) -> Any:
        self.requests += 1
        self.chars += sum(len(m.text) for m in context) + sum(
            len(json.dumps(t.parameters)) + len(t.description) for t in tools
        )
        return await self.inner.decide(context, tools)


def direct_brain(context: Context, tools: object) -> Any:
    results = [m for m in context if m.role == "tool"]
    if not results:
        return Action("read_document", {})
    if len(results) == 1:
        return Action("write_summary", {"text": extract(results[0].text)})
    return "saved the errors"


CODE = """\
```python
errors = [line for line in read_document().splitlines() if "ERROR" in line]
print(write_summary("\\n".join(errors)), len(errors), "errors")
final_answer("saved the errors")
```"""


def data_moving(sandbox: Sandbox) -> None:
    print("\n2. data-moving task: read a 2,000-line log, keep the errors, write them")
    print("| | turns (requests) | tokens sent (chars / 4) | notebook at the end |\n|---|---|---|---|")
    written.clear()
    brain = Counting(FunctionPolicy(direct_brain))
    result = Agent(brain, [read_document, write_summary]).run_sync("Save the errors of today's log.")
    notebook = sum(len(m.text) for m in result.context) // 4
    print(f"| direct calls | {brain.requests} | {brain.chars // 4:,} | {notebook:,} |")
    expected = written[-1]
    code_brain = Counting(FunctionPolicy(lambda context, tools: CODE))
    agent = code_agent(code_brain, [read_document, write_summary], sandbox=sandbox)
    result = agent.run_sync("Save the errors of today's log.")
    assert result.output == "saved the errors" and written[-1] == expected, result.error
    notebook = sum(len(m.text) for m in result.context) // 4
    print(f"| code action | {code_brain.requests} | {code_brain.chars // 4:,} | {notebook:,} |")


def main() -> None:
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    workspace = tempfile.mkdtemp(prefix="tether-bench-")
    Path(workspace).chmod(0o755)
    os.chdir("/")
    try:
        sandbox = Sandbox(workspace)
        print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        overhead(calls, rounds, sandbox)
        data_moving(sandbox)
        print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        shutil.rmtree(workspace, ignore_errors=True)


if __name__ == "__main__":
    main()
