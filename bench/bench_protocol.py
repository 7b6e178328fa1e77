"""Variants of the constrained protocol that lost, kept so their numbers can be re-measured.

    python bench/bench_protocol.py VARIANT [--model qwen2.5-coder-0.5b] [--tag T ...] [--out DIR]

Variants (each patched over the shipped protocol of ``tether.providers._prompt``):

* ``shipped``: the protocol as it ships (decide first, then a list of calls or the answer);
* ``no-decision``: one request, a list of calls or the answer, the first character
  (``[`` or ``{``) being the choice;
* ``native``: no decision; the system prompt in Qwen2.5's own tool-calling layout
  (the ``# Tools`` block with each tool's JSON Schema inside ``<tools>``), the
  reply still constrained to our two forms;
* ``examples``: no decision; the prompt ends with a worked example of declining
  (a question no tool fits, answered directly).

The report goes to ``DIR/<variant>-<model>.json`` and its table to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

from tether.evals import evaluate
from tether.evals.datasets import load
from tether.providers import _prompt
from tether.providers.local import LocalModel
from tether.stores.sqlite import SQLiteStore

NATIVE = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{tools}\n</tools>\n\n"
    "For each function call, return a json object with function name and arguments; several calls go in one "
    'JSON list: [{{"name": <function-name>, "arguments": <args-json-object>}}, ...]. To answer the user '
    'without a function, return {{"name": "final_answer", "arguments": {{"text": <your answer>}}}}.'
)
EXAMPLE = (
    'For example, if the only tool is a stock price tool, "Who painted the Mona Lisa?" is answered directly: '
    '{"name": "final_answer", "arguments": {"text": "Leonardo da Vinci painted the Mona Lisa."}}'
)


def native_prompt(tools, instructions=""):  # type: ignore[no-untyped-def]
    listed = "\n".join(
        json.dumps({"type": "function", "function": {"name": t.name, "description": t.description,
                                                     "parameters": t.parameters}}, ensure_ascii=False)
        for t in tools
    )  # fmt: skip
    head = instructions.strip() + "\n\n" if instructions.strip() else ""
    return head + NATIVE.format(tools=listed)


def patch(variant: str) -> bool:
    """Patch the protocol for ``variant``; returns whether the model decides first."""
    if variant == "native":
        _prompt.system_prompt = native_prompt  # render() looks it up at call time
    elif variant == "examples":
        _prompt.WHEN_TO_ANSWER = _prompt.WHEN_TO_ANSWER + " " + EXAMPLE  # system_prompt() reads it at call time
    return variant == "shipped"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("variant", choices=["shipped", "no-decision", "native", "examples"])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--tag", action="append", default=[])
    parser.add_argument("--out", default="bench/out")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model = LocalModel(args.model, decide_first=patch(args.variant))
    name = f"{args.variant}-{args.model}"
    report = await evaluate(
        load("tether-tasks").select(tags=args.tag), brain=model, store=SQLiteStore(out / f"{name}.db"),
        name=name, concurrency=1, progress=False,
    )  # fmt: skip
    report.save(out / f"{name}.json")
    print(report.table())


if __name__ == "__main__":
    asyncio.run(main())
