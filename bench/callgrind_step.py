"""Instructions per loop step, counted by callgrind: the stable figure on a shared machine.

Run: python bench/callgrind_step.py  (needs valgrind; prints instructions per step)

It runs the 10-step async-tool agent of bench_core.py (scripted brain, no store)
in a fresh interpreter under ``valgrind --tool=callgrind`` twice, with 5 and with
25 runs, and divides the difference by the 200 extra steps: start-up and imports
cancel out, and the figure does not move with the machine's load. The hash seed is
fixed, so two measurements of one commit agree to the instruction.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile

PROGRAM = """
import asyncio, sys
from tether import Agent, Message, tool
from tether.messages import ToolCall
from tether.testing import ScriptedModel

@tool(effect="none")
async def ping(n: int) -> int:
    '''Return n.'''
    return n

def replies():
    calls = [Message.assistant("", [ToolCall(f"c{i}", "ping", '{"n": 1}')]) for i in range(9)]
    return [*calls, "done"]

async def main(runs):
    for _ in range(runs):
        result = await Agent(ScriptedModel(replies()), [ping]).run("go")
        assert result.status == "finished"

asyncio.run(main(int(sys.argv[1])))
"""


def instructions(runs: int) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, "-c", PROGRAM, str(runs)],
            capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"},
        )  # fmt: skip
        if done.returncode != 0:
            raise SystemExit(f"the measured program failed:\n{done.stderr[-3000:]}")
        found = re.search(r"Collected : (\d+)", done.stderr)
        assert found, done.stderr[-2000:]
        return int(found.group(1))


if __name__ == "__main__":
    subprocess.run([sys.executable, "-c", PROGRAM, "1"], check=True)  # compile every module first: both runs read .pyc
    low, high = instructions(5), instructions(25)
    print(f"instructions per step: {(high - low) / 200:,.0f}  (5 runs: {low:,}, 25 runs: {high:,})")
