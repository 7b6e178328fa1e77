"""Benchmarks for the offline local model (never run by the test suite).

    python bench/bench_local.py speed   [--model NAME] [--threads N] [--runs N]
    python bench/bench_local.py quality [--model NAME] [--threads N] [--toolset simple|workspace|finder]
    python bench/bench_local.py readme  [--model NAME] [--threads N] [--folders N] [--find]
    python bench/bench_local.py turns   [--model NAME] [--threads N] [--runs N] [--json FILE]

``speed``: tokens/s through tether (``LocalModel.decide`` and ``.stream``)
against calling the binding directly with the exact same request body, and the
milliseconds each path adds on top of the binding's own compute time; tether
should keep >= 0.95x of the binding's tokens/s.

``quality``: 20 prompts (17 need a tool, 3 do not) run as real agent runs in a
scratch folder: right tool with valid arguments, sensible final answer,
seconds per turn, and the process's peak RSS.

``readme``: the README's first command (``how many Python files are in this
folder?``) with the CLI's tools and instructions, in fresh project folders
holding 1 to 6 Python files: is the count in the answer right?

``turns``: time per model turn for the README command (the CLI's own agent:
its tools, instructions and ``ask_human``, in a fresh project folder) and the
refund desk (``examples/refund_agent.py``'s tools: a look-up, a policy check and
an approval-gated ``once`` refund, asked in the newcomer's two phrasings; a
pause is approved and the run resumed). Per turn: generation requests and of
which kind (decision, verdict, reply), prompt tokens, tokens the server had to
process past its cache, tokens generated, seconds, and the decision protocol's
share: its requests' whole time, and its extra (that time less the prompt the
reply then reads from the cache; see ``_timing.extra_seconds``).
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

from _timing import Recorder, summary

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


def find_files_tool(root: Path) -> Any:
    """A glob tool that does the counting for the model (a proposal for the toolkit)."""

    @tool(effect="none")
    def find_files(pattern: str) -> str:
        """Find files by name pattern and count them.

        Args:
            pattern: a glob pattern relative to the workspace, e.g. "*.py" or "src/**/*.md".
        """
        found = sorted(str(p.relative_to(root)) for p in root.glob(pattern) if p.is_file())
        return f"{len(found)} files match {pattern!r}" + (": " + ", ".join(found) if found else "")

    return find_files


def finder_toolset(root: Path) -> list[Any]:
    """The read-only file tools plus a glob tool that counts for the model."""
    from tether.toolkits import list_dir_tool, read_file_tool

    return [read_file_tool(str(root)), list_dir_tool(str(root)), find_files_tool(root)]


@dataclass
class Case:
    prompt: str
    tool: str | None  # the tool the first reply should call (None: answer directly)
    answer: str  # a substring the final answer must contain (case-insensitive; "a|b": either)
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
    Case("How many .json files are in this directory?", "count_files", "0|no .json", {"extension": "json"}),
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
        wanted = case.answer.lower().split("|")
        answer_ok = result.status == "finished" and bool(output) and any(w in output.lower() for w in wanted)
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


# -- the README's first command ---------------------------------------------------

README_QUESTION = "how many Python files are in this folder?"
CLI_INSTRUCTIONS = (
    "You are a careful assistant working in the directory {workspace}. Use the tools to look "
    "before you change anything; paths are relative to that directory. When you are done, "
    "answer in plain words."
)


def project(root: Path, n_py: int, seed: int) -> None:
    """A small project folder with ``n_py`` Python files among other files and a subfolder."""
    import random

    rng = random.Random(seed)
    names = ["main", "utils", "cli", "models", "views", "config", "helpers", "app"]
    rng.shuffle(names)
    for name in names[:n_py]:
        (root / f"{name}.py").write_text("print('hi')\n")
    others = ["README.md", "notes.txt", "requirements.txt", "setup.cfg", "data.json", "Makefile"]
    for name in rng.sample(others, 3 + seed % 3):
        (root / name).write_text("x\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_main.py").write_text("def test(): pass\n")


async def readme(model: LocalModel, folders: int, find: bool) -> None:
    """The README's first command, the way the CLI builds its agent, in fresh folders."""
    from tether.toolkits import workspace_tools

    model.load()
    ok = 0
    print(f"{'py files':>8} {'status':10} {'calls':40} {'s':>5}  answer")
    for i in range(folders):
        n_py = 1 + i % 6
        root = Path(tempfile.mkdtemp(prefix="tether-readme-"))
        project(root, n_py, i)
        tools = workspace_tools(str(root))
        if find:
            tools.insert(0, find_files_tool(root))
        agent = Agent(model, tools, instructions=CLI_INSTRUCTIONS.format(workspace=root), max_steps=8)
        t = time.perf_counter()
        result = await agent.run(README_QUESTION)
        elapsed = time.perf_counter() - t
        calls = [c.name + c.arguments for m in result.context for c in m.tool_calls]
        answer = (result.output or "").strip()
        good = result.status == "finished" and _says_number(answer, n_py)
        ok += good
        print(f"{n_py:8d} {result.status:10} {' '.join(calls)[:40]:40} {elapsed:5.1f}  {answer[:70]!r}")
    print(f"\nright count: {ok}/{folders}")


def _says_number(answer: str, n: int) -> bool:
    import re

    words = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight"]
    found = {int(x) for x in re.findall(r"\b\d+\b", answer)}
    found |= {i for i, w in enumerate(words) if re.search(rf"\b{w}\b", answer.lower())}
    return found == {n}


# -- time per turn ---------------------------------------------------------------

REFUND_PHRASINGS = (
    "Please refund order A1234, it arrived broken.",
    "Order A1234 arrived broken. Please refund what I paid.",
)


class Turns:
    """A Policy around a LocalModel that records each decision's requests (``_timing.Recorder``)."""

    def __init__(self, model: LocalModel) -> None:
        self.model = model
        self.recorder = Recorder(model)
        self.turns: list[dict[str, Any]] = []

    async def decide(self, context: Context, tools: Any) -> Message:
        mark = self.recorder.mark()
        message = await self.model.decide(context, tools)
        requests = self.recorder.since(mark)
        moves = [c.name for c in message.tool_calls] or ["answer"]
        self.turns.append({**summary(requests), "kinds": [r.kind for r in requests], "moves": moves})
        return message


def readme_agent(policy: Any) -> Agent:
    """The agent ``tether run`` builds (its tools, instructions and ask_human), in a fresh folder."""
    from tether.cli._config import INSTRUCTIONS
    from tether.toolkits import workspace_tools
    from tether.tools import ask_human

    root = Path(tempfile.mkdtemp(prefix="tether-turns-"))
    project(root, 3, 0)
    tools = [*workspace_tools(str(root)), ask_human()]
    return Agent(policy, tools, instructions=INSTRUCTIONS.format(workspace=root), max_steps=8)


def refund_agent(policy: Any) -> Agent:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
    import refund_agent as example

    tools = [example.look_up_order, example.check_policy, example.issue_refund]
    return Agent(policy, tools, name="support", max_steps=8)


async def run_to_end(agent: Agent, prompt: str) -> tuple[str, str, list[str]]:
    """Run, approving every pause; returns the status, the answer and the calls made."""
    result = await agent.run(prompt)
    while result.status == "paused":
        state = result.state
        for p in result.pending:
            state = state.approve(p.call.id)
        result = await agent.run(state)
    calls = [c.name for m in result.context for c in m.tool_calls]
    return result.status, (result.output or "").strip(), calls


async def turns(model_name: str, threads: list[int], runs: int, out: str | None, only: str | None = None) -> None:
    rows = []
    for n in threads:
        model = LocalModel(model_name, threads=n, max_tokens=512)
        model.load()
        policy = Turns(model)
        cases = [("readme", readme_agent, README_QUESTION)] + [("refund", refund_agent, p) for p in REFUND_PHRASINGS]
        cases = [c for c in cases if only in (None, c[0])]
        for _ in range(runs):
            for name, build, prompt in cases:
                start, load = len(policy.turns), os.getloadavg()[0]
                t = time.perf_counter()
                status, answer, calls = await run_to_end(build(policy), prompt)
                row = {"case": name, "prompt": prompt, "threads": n, "status": status, "answer": answer[:200],
                       "calls": calls, "seconds": round(time.perf_counter() - t, 1), "load": round(load, 2),
                       "turns": policy.turns[start:]}  # fmt: skip
                rows.append(row)
                print(_turn_line(row), flush=True)
                if out:  # after every run, so a stopped benchmark keeps what it measured
                    Path(out).write_text(json.dumps(rows, indent=1, ensure_ascii=False))
    print()
    print(turn_table(rows))


def _turn_line(row: dict[str, Any]) -> str:
    moves = " ".join("+".join(t["moves"]) for t in row["turns"])
    return (f"{row['case']:6} t={row['threads']} {row['status']:9} {row['seconds']:6.1f}s load {row['load']:4.1f} "
            f"turns {len(row['turns'])}: {moves[:60]}  {row['answer'][:60]!r}")  # fmt: skip


def turn_table(rows: list[dict[str, Any]]) -> str:
    """Means per turn, by case and thread count."""
    lines = [
        "| case | threads | runs | turns/run | requests/turn | prompt tokens | processed/turn | generated/turn "
        "| s/turn | decision share (whole / extra) | load |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for case in dict.fromkeys(r["case"] for r in rows):
        for n in dict.fromkeys(r["threads"] for r in rows):
            picked = [r for r in rows if r["case"] == case and r["threads"] == n]
            ts = [t for r in picked for t in r["turns"]]
            if not ts:
                continue

            def mean(key: str, ts: list[dict[str, Any]] = ts) -> float:
                return sum(t[key] for t in ts) / len(ts)

            secs = sum(t["seconds"] for t in ts)
            whole = sum(t["decision_seconds"] for t in ts) / secs if secs else 0
            extra = sum(t["extra_seconds"] for t in ts) / secs if secs else 0
            load = sum(r["load"] for r in picked) / len(picked)
            lines.append(
                f"| {case} | {n} | {len(picked)} | {len(ts) / len(picked):.1f} | {mean('requests'):.1f} "
                f"| {mean('prompt_tokens'):.0f} | {mean('prompt_processed'):.0f} | {mean('generated'):.0f} "
                f"| {mean('seconds'):.1f} | {100 * whole:.0f} % / {100 * extra:.0f} % | {load:.1f} |"
            )
    return "\n".join(lines)


# -- speed -------------------------------------------------------------------


LONG_PROMPT = (
    "Write a detailed explanation, in plain prose, of how a hash table works: hashing, "
    "buckets, collisions, open addressing versus chaining, resizing and load factors."
)


async def speed(model: LocalModel, runs: int) -> None:
    """The same request body three ways: the binding's own call, LocalModel.decide, LocalModel.stream.

    Each request's wall time is set against the binding's own timings (prompt +
    generation), so the table shows both tokens/s and what each path adds on top.
    """
    server = model.load()
    ctx = Context([Message.user(LONG_PROMPT)])
    body = {**model.sampling, **request(ctx, [])}
    computed: list[float] = []
    original = model.complete_sync

    def timed_complete(request_body: dict[str, Any]) -> dict[str, Any]:
        data = original(request_body)
        computed.append((data["timings"]["prompt_ms"] + data["timings"]["predicted_ms"]) / 1000)
        return data

    model.complete_sync = timed_complete  # type: ignore[method-assign]

    async def binding() -> tuple[int, float | None]:
        data = await asyncio.to_thread(server.handle_chat_completions, dict(body))
        t = data["timings"]
        return data["usage"]["completion_tokens"], (t["prompt_ms"] + t["predicted_ms"]) / 1000

    async def decide() -> tuple[int, float | None]:
        message = await model.decide(ctx, [])
        assert message.usage is not None
        return message.usage.output_tokens, computed[-1]

    async def stream() -> tuple[int, float | None]:
        pieces = [p async for p in model.stream(ctx, [])]
        final = pieces[-1]
        assert isinstance(final, Message) and final.usage is not None
        return final.usage.output_tokens, None

    sides = {"binding": binding, "decide": decide, "stream": stream}
    rows: dict[str, list[tuple[int, float, float | None]]] = {name: [] for name in sides}
    order = list(sides)
    await binding()  # warm up: first-request costs are not what we measure
    for i in range(runs):
        for name in order[i % 3 :] + order[: i % 3]:  # rotate so no side always goes first
            t = time.perf_counter()
            n, compute = await sides[name]()
            rows[name].append((n, time.perf_counter() - t, compute))
    print(f"{'path':8} {'tokens':>6} {'wall s':>7} {'tok/s (wall)':>12} {'overhead ms':>11}   (medians of {runs})")
    rates = {}
    for name, items in rows.items():
        rates[name] = _median([n / wall for n, wall, _ in items])
        over = [1000 * (wall - c) for _, wall, c in items if c is not None]
        over_text = f"{_median(over):11.1f}" if over else f"{'-':>11}"
        wall = _median([w for _, w, _ in items])
        print(f"{name:8} {items[0][0]:6d} {wall:7.2f} {rates[name]:12.2f} {over_text}")
    for name in ("decide", "stream"):
        print(f"{name} / binding tokens/s: {rates[name] / rates['binding']:.3f} (target >= 0.95)")


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("speed", "quality", "readme", "turns"))
    parser.add_argument("--folders", type=int, default=6)
    parser.add_argument("--find", action="store_true", help="readme: add the proposed find_files tool")
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--threads", type=int, action="append", help="turns: give it twice (1 and 2) for both")
    parser.add_argument("--json", help="turns: write the per-turn rows here")
    parser.add_argument("--case", choices=("readme", "refund"), help="turns: only this case")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--toolset", choices=("simple", "workspace", "finder"), default="simple")
    args = parser.parse_args()
    threads = args.threads or [1]
    if args.what == "turns":
        asyncio.run(turns(args.model, threads, args.runs, args.json, args.case))
        return
    model = LocalModel(args.model, threads=threads[0], max_tokens=args.max_tokens)
    t = time.perf_counter()
    model.load()
    print(
        f"model {args.model!r}, {threads[0]} thread(s), loaded in {time.perf_counter() - t:.1f} s, "
        f"{os.cpu_count()} CPUs",
        file=sys.stderr,
    )
    if args.what == "speed":
        asyncio.run(speed(model, args.runs))
    elif args.what == "readme":
        asyncio.run(readme(model, args.folders, args.find))
    else:
        asyncio.run(quality(model, args.toolset))


if __name__ == "__main__":
    main()
