"""Benchmarks for the offline local model (never run by the test suite).

    python bench/bench_local.py speed   [--model NAME] [--threads N] [--runs N]
    python bench/bench_local.py quality [--model NAME] [--threads N] [--toolset simple|workspace|finder]

``speed``: generation tokens/s through tether (``LocalModel.decide``, the
constrained protocol included) against calling the binding directly with the
exact same request body; tether should keep >= 0.95x of the binding.

``quality``: 20 prompts (17 need a tool, 3 do not) run as real agent runs in a
scratch folder: right tool with valid arguments, sensible final answer,
seconds per turn, and the process's peak RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tether import Agent, Context, Message, tool
from tether.providers.constrained import request
from tether.providers.local import LocalModel

# -- quality -------------------------------------------------------------------


def make_folder() -> Path:
    root = Path(tempfile.mkdtemp(prefix="tether-bench-"))
    for name in ("main.py", "utils.py", "test_main.py"):
        (root / name).write_text("print('hello')\n")
    (root / "notes.txt").write_text("The secret word is banana.\n")
    (root / "todo.txt").write_text("1. buy milk\n2. call Anna\n")
    (root / "README.md").write_text("# Demo project\n")
    (root / "VERSION").write_text("2.4.1\n")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("x = 1\n")
    (root / "src" / "cli.py").write_text("y = 2\n")
    return root


def simple_tools(root: Path) -> list[Any]:
    @tool(effect="none")
    def count_files(directory: str, extension: str) -> int:
        """Count the files in a directory whose names end with an extension.

        Args:
            directory: the directory, relative to the current folder ("." for this folder).
            extension: the file extension, e.g. "py" or "txt".
        """
        ext = "." + extension.lstrip(".*")
        return sum(1 for p in (root / directory).iterdir() if p.is_file() and p.name.endswith(ext))

    @tool(effect="none")
    def read_file(path: str) -> str:
        """Read a text file.

        Args:
            path: the file path, relative to the current folder.
        """
        return (root / path).read_text()

    @tool(effect="none")
    def add(a: float, b: float) -> float:
        """Add two numbers.

        Args:
            a: the first number.
            b: the second number.
        """
        return a + b

    return [count_files, read_file, add]


def workspace_toolset(root: Path) -> list[Any]:
    from tether.toolkits import file_tools

    return file_tools(str(root), approval=False)


def finder_toolset(root: Path) -> list[Any]:
    """The read-only file tools plus a glob tool that counts for the model."""
    from tether.toolkits import list_dir_tool, read_file_tool

    @tool(effect="none")
    def find_files(pattern: str) -> str:
        """Find files by name pattern and count them.

        Args:
            pattern: a glob pattern relative to the workspace, e.g. "*.py" or "src/**/*.md".
        """
        found = sorted(str(p.relative_to(root)) for p in root.glob(pattern) if p.is_file())
        return f"{len(found)} files match {pattern!r}" + (": " + ", ".join(found) if found else "")

    return [read_file_tool(str(root)), list_dir_tool(str(root)), find_files]


@dataclass
class Case:
    prompt: str
    tool: str | None  # the tool the first reply should call (None: answer directly)
    answer: str  # a substring the final answer must contain (case-insensitive)
    args: dict[str, Any] | None = None  # argument values that must match


CASES = [
    Case("how many Python files are in this folder?", "count_files", "3", {"extension": "py"}),
    Case("How many .txt files are in the current directory?", "count_files", "2", {"extension": "txt"}),
    Case("What is 1234 + 4321?", "add", "5555"),
    Case("Add 17.5 and 24.5", "add", "42"),
    Case("What does notes.txt say?", "read_file", "banana", {"path": "notes.txt"}),
    Case("Read todo.txt and tell me the first task.", "read_file", "milk", {"path": "todo.txt"}),
    Case("How many markdown files are there in this folder?", "count_files", "1", {"extension": "md"}),
    Case("What's the sum of 99 and 1?", "add", "100"),
    Case("Show me the contents of main.py", "read_file", "print", {"path": "main.py"}),
    Case("Count the Python files in the src folder", "count_files", "2", {"extension": "py"}),
    Case("what is 250 plus 750?", "add", "1000"),
    Case("What is the secret word in notes.txt?", "read_file", "banana", {"path": "notes.txt"}),
    Case("How many .json files are in this directory?", "count_files", "0", {"extension": "json"}),
    Case("Please add 3 and 4, then tell me the result.", "add", "7"),
    Case("What version is written in the VERSION file?", "read_file", "2.4.1", {"path": "VERSION"}),
    Case("What is 0.5 plus 0.25?", "add", "0.75"),
    Case("Read README.md and tell me the project's title.", "read_file", "demo", {"path": "README.md"}),
    Case("hi", None, ""),
    Case("thanks!", None, ""),
    Case("What is the capital of France?", None, "paris"),
]

FINDER_CASES = [
    Case("how many Python files are in this folder?", "find_files", "3"),
    Case("How many text files are there here?", "find_files", "2"),
    Case("What does notes.txt say?", "read_file", "banana", {"path": "notes.txt"}),
    Case("List the files in the src folder.", "list_dir", "app.py"),
    Case("What version is written in the VERSION file?", "read_file", "2.4.1", {"path": "VERSION"}),
    Case("Which Python files are in the src folder?", "find_files", "cli.py"),
    Case("hi", None, ""),
]

WORKSPACE_CASES = [
    Case("how many Python files are in this folder?", "list_dir", "3"),
    Case("What does notes.txt say?", "read_file", "banana", {"path": "notes.txt"}),
    Case("List the files in the src folder.", "list_dir", "app.py"),
    Case("What version is written in the VERSION file?", "read_file", "2.4.1", {"path": "VERSION"}),
    Case("hi", None, ""),
]


class Timed:
    """Wraps a policy to time each decision."""

    def __init__(self, policy: LocalModel) -> None:
        self.policy = policy
        self.seconds: list[float] = []
        self.tokens: list[int] = []

    async def decide(self, context: Context, tools: Any) -> Message:
        t = time.perf_counter()
        message = await self.policy.decide(context, tools)
        self.seconds.append(time.perf_counter() - t)
        self.tokens.append(message.usage.output_tokens if message.usage else 0)
        return message


def _args_ok(case: Case, arguments: str) -> bool:
    got = json.loads(arguments)
    for key, want in (case.args or {}).items():
        value = str(got.get(key, "")).lstrip(".*").lower()
        if value != str(want).lower():
            return False
    return True


async def quality(model: LocalModel, toolset: str) -> None:
    root = make_folder()
    tools = {"simple": simple_tools, "workspace": workspace_toolset, "finder": finder_toolset}[toolset](root)
    cases = {"simple": CASES, "workspace": WORKSPACE_CASES, "finder": FINDER_CASES}[toolset]
    model.load()
    timed = Timed(model)
    agent = Agent(timed, tools, max_steps=6)
    right = answered = 0
    print(f"{'prompt':50} {'first move':45} {'tool?':5} {'answer?':7} turns  s")
    for case in cases:
        n0 = len(timed.seconds)
        t = time.perf_counter()
        result = await agent.run(case.prompt)
        elapsed = time.perf_counter() - t
        first = next(m for m in result.context if m.role == "assistant")
        move = f"{first.tool_calls[0].name}{first.tool_calls[0].arguments}" if first.tool_calls else "answer"
        if case.tool is None:
            tool_ok = not first.tool_calls
        else:
            tool_ok = (
                bool(first.tool_calls)
                and first.tool_calls[0].name == case.tool
                and _args_ok(case, first.tool_calls[0].arguments)
            )
        output = (result.output or "").strip()
        answer_ok = result.status == "finished" and bool(output) and case.answer.lower() in output.lower()
        right += tool_ok
        answered += answer_ok
        turns = len(timed.seconds) - n0
        print(
            f"{case.prompt[:50]:50} {move[:45]:45} {'ok' if tool_ok else 'NO':5} "
            f"{'ok' if answer_ok else 'NO':7} {turns:5} {elapsed:5.1f}  {output[:60]!r}"
        )
    n = len(cases)
    need = sum(c.tool is not None for c in cases)
    print()
    print(f"right first move (tool + args, or no tool): {right}/{n}")
    print(f"sensible final answer: {answered}/{n} (tool prompts need the expected value)")
    secs = sorted(timed.seconds)
    print(
        f"turns: {len(secs)}, seconds per turn: median {secs[len(secs) // 2]:.2f}, "
        f"mean {sum(secs) / len(secs):.2f}, max {secs[-1]:.2f}"
    )
    print(f"peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB  ({need} prompts need a tool)")


# -- speed -------------------------------------------------------------------


LONG_PROMPT = (
    "Write a detailed explanation, in plain prose, of how a hash table works: hashing, "
    "buckets, collisions, open addressing versus chaining, resizing and load factors."
)


async def speed(model: LocalModel, runs: int) -> None:
    """Same request body both ways: tether's decide vs the binding's handle_chat_completions."""
    server = model.load()
    ctx = Context([Message.user(LONG_PROMPT)])
    body = {**model.sampling, **request(ctx, [])}
    rows = []
    for i in range(runs):
        # Alternate the order so neither side always gets the warmer cache.
        for side in ("binding", "tether") if i % 2 == 0 else ("tether", "binding"):
            t = time.perf_counter()
            if side == "binding":
                data = server.handle_chat_completions(dict(body))
                n = data["usage"]["completion_tokens"]
            else:
                message = await model.decide(ctx, [])
                assert message.usage is not None
                n = message.usage.output_tokens
            rows.append((side, n, time.perf_counter() - t))
    print(f"{'side':8} {'tokens':>6} {'seconds':>8} {'tok/s':>7}")
    for side, n, s in rows:
        print(f"{side:8} {n:6d} {s:8.2f} {n / s:7.2f}")
    tps = {
        s: sum(r[1] for r in rows if r[0] == s) / sum(r[2] for r in rows if r[0] == s) for s in ("binding", "tether")
    }
    print(
        f"\nbinding {tps['binding']:.2f} tok/s, tether {tps['tether']:.2f} tok/s, "
        f"ratio {tps['tether'] / tps['binding']:.3f} (target >= 0.95)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("speed", "quality"))
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--toolset", choices=("simple", "workspace", "finder"), default="simple")
    args = parser.parse_args()
    model = LocalModel(args.model, threads=args.threads, max_tokens=args.max_tokens)
    t = time.perf_counter()
    model.load()
    print(
        f"model {args.model!r}, {args.threads} thread(s), loaded in {time.perf_counter() - t:.1f} s, "
        f"{os.cpu_count()} CPUs",
        file=sys.stderr,
    )
    if args.what == "speed":
        asyncio.run(speed(model, args.runs))
    else:
        asyncio.run(quality(model, args.toolset))


if __name__ == "__main__":
    main()
