"""tether's offline model on the Berkeley Function Calling Leaderboard's single-turn data.

Set-up (once, kept out of tether's own dependencies)::

    pip install --no-deps bfcl-eval==2026.3.23

That is all: the harness reads BFCL's data files from the installed package and
imports only its AST checker. The checker's module imports
``bfcl_eval.constants.model_config``, which imports every provider's SDK
(anthropic, openai, mistralai, cohere, google-genai, qwen-agent, boto3...)
only to ask whether a model's function names had their dots turned into
underscores; tether keeps the names as BFCL writes them (``math.factorial``),
so the harness puts a one-entry stand-in for that module in ``sys.modules``
before importing the checker, and no other package is needed. Without
bfcl-eval installed the harness says so and exits.

Usage::

    python bench/bench_bfcl.py run --model qwen2.5-coder-1.5b --n 50 --seed 0 --threads 1 \\
        --out bench/out/bfcl-1.5b.json [--category simple_python ...] [--policy FILE.py:make]
    python bench/bench_bfcl.py table bench/out/bfcl-1.5b.json [more reports...]
    python bench/bench_bfcl.py misses bench/out/bfcl-1.5b.json [--category C]

``run`` takes a seeded sample of ``--n`` items per category (the same items for
the same seed and N, whatever the model or protocol), turns each item's
function docs into tether tools (``Tool.from_schema``, BFCL's types mapped to
JSON Schema the way BFCL maps them for function-calling models) and asks the
model for ONE decision (``policy.decide``: the calls it makes, or an answer).
The calls are scored by BFCL's own AST checker; ``irrelevance`` passes when
no call is made, as BFCL scores it. Items go round-robin over the categories,
and the report (JSON: per-item calls, text, pass/fail, the checker's error,
requests, tokens, seconds) is rewritten after every item, so a stopped run
keeps what it measured and ``run`` with the same ``--out`` resumes it.
``--shard K/N`` runs every N-th item from the K-th, so N processes can share a
sample (one report each; ``table`` and ``misses`` read several).

``--cache DIR`` stores every reply and replays a request identical to one
stored (see ``_timing.py``): a variant that changes only the decision then
costs only the decision's requests. Its seconds are not timings.

``--policy FILE.py:make`` swaps in another protocol for experiments: ``make(model,
threads)`` returns a Policy (``decide(context, tools)``); a LocalModel it returns
(or exposes as ``.model``) has its requests timed. No benchmark item is ever
shown to the model as an example: each item is asked on its own.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import importlib.util
import json
import os
import random
import sys
import time
import types
from pathlib import Path
from typing import Any

from _timing import Recorder, summary

from tether import Context, Message, Tool
from tether.providers.local import LocalModel

CATEGORIES = ["simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance", "live_simple"]
# Qwen2.5-1.5B-Instruct (FC) on BFCL's leaderboard, the figures the issue sets as targets.
PUBLISHED = {"simple_python": 92.3, "multiple": 87.0, "parallel": 81.5, "parallel_multiple": 75.5,
             "irrelevance": 62.7, "live_simple": 74.0}  # fmt: skip
PYTHON_HINT = " Note that the provided function is in Python 3 syntax."  # BFCL adds it to every function doc


# -- BFCL: data and checker ------------------------------------------------------


def bfcl_root() -> Path:
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or spec.origin is None:
        sys.exit("bfcl-eval is not installed: pip install --no-deps bfcl-eval==2026.3.23 (see this file's docstring)")
    return Path(spec.origin).parent


def load_category(category: str) -> list[dict[str, Any]]:
    """BFCL's items of a category, each with its ``ground_truth`` (none for irrelevance)."""
    data = bfcl_root() / "data"
    items = [json.loads(line) for line in (data / f"BFCL_v4_{category}.json").read_text().splitlines() if line]
    answers_file = data / "possible_answer" / f"BFCL_v4_{category}.json"
    if answers_file.exists():
        answers = {a["id"]: a["ground_truth"] for a in map(json.loads, answers_file.read_text().splitlines()) if a}
        for item in items:
            item["ground_truth"] = answers[item["id"]]
    return items


def sample(category: str, n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` items of ``category``, the same ones for the same seed (in file order)."""
    items = load_category(category)
    picked = sorted(random.Random(f"{seed}:{category}").sample(range(len(items)), min(n, len(items))))
    return [items[i] for i in picked]


def checker() -> Any:
    """BFCL's ``ast_checker``, imported without the provider SDKs its model table pulls in."""
    bfcl_root()
    if "bfcl_eval.constants.model_config" not in sys.modules:
        stand_in = types.ModuleType("bfcl_eval.constants.model_config")
        stand_in.MODEL_CONFIG_MAPPING = {"tether": types.SimpleNamespace(underscore_to_dot=False)}  # type: ignore[attr-defined]
        sys.modules["bfcl_eval.constants.model_config"] = stand_in
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker

    return ast_checker


def score(item: dict[str, Any], category: str, calls: list[dict[str, Any]]) -> tuple[bool, str]:
    """Pass or fail, and the checker's error, as BFCL scores the item."""
    if category == "irrelevance" or "irrelevance" in category:
        return (not calls), ("" if not calls else "called a tool when none fits")
    if not calls:
        return False, "no call"
    from bfcl_eval.constants.enums import Language

    result = checker()(item["function"], calls, item["ground_truth"], Language.PYTHON, category, "tether")
    return bool(result["valid"]), "; ".join(map(str, result.get("error", [])))[:500]


# -- BFCL function docs as tether tools ---------------------------------------------


def json_schema(node: dict[str, Any]) -> dict[str, Any]:
    """BFCL's parameter types (``dict``, ``float``, ``tuple``, ``any``...) as JSON Schema types."""
    from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI

    out = dict(node)
    if isinstance(out.get("type"), str):
        out["type"] = GORILLA_TO_OPENAPI.get(out["type"], "string")
    if isinstance(out.get("properties"), dict):
        out["properties"] = {k: json_schema(v) for k, v in out["properties"].items()}
    if isinstance(out.get("items"), dict):
        out["items"] = json_schema(out["items"])
    return out


def tools_of(item: dict[str, Any]) -> list[Tool]:
    """The item's functions as tether tools (they are never run: one decision is scored)."""
    tools = []
    for fn in item["function"]:
        params = json_schema(copy.deepcopy(fn["parameters"]))
        params["type"] = "object"
        params["required"] = [r for r in params.get("required", []) if r in params.get("properties", {})]
        tools.append(Tool.from_schema(fn["name"], fn["description"] + PYTHON_HINT, params, _never, effect="none"))
    return tools


def _never(**_: Any) -> None:
    raise AssertionError("BFCL tools are scored, never run")


def context_of(item: dict[str, Any]) -> Context:
    made = {"system": Message.system, "user": Message.user, "assistant": Message.assistant}
    return Context([made[m["role"]](m["content"]) for m in item["question"][0]])


# -- running ---------------------------------------------------------------------


def make_policy(spec: str | None, model: str, threads: int) -> tuple[Any, LocalModel | None]:
    if spec is None:
        local = LocalModel(model, threads=threads)
        return local, local
    path, _, name = spec.partition(":")
    module_spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    policy = getattr(module, name or "make")(model, threads)
    local = policy if isinstance(policy, LocalModel) else getattr(policy, "model", None)
    return policy, local if isinstance(local, LocalModel) else None


async def run_item(policy: Any, recorder: Recorder | None, item: dict[str, Any], category: str) -> dict[str, Any]:
    mark = recorder.mark() if recorder else 0
    log = getattr(policy, "log", None)  # a variant may note what it saw (probabilities, answers)
    noted = len(log) if isinstance(log, list) else 0
    t = time.perf_counter()
    try:
        reply = await policy.decide(context_of(item), tools_of(item))
        error = ""
    except Exception as exc:  # a provider error is a miss, kept with its message
        reply, error = Message.assistant(""), f"{type(exc).__name__}: {exc}"
    seconds = time.perf_counter() - t
    calls, bad = [], []
    for c in reply.tool_calls:
        try:
            calls.append({c.name: json.loads(c.arguments)})
        except ValueError:
            bad.append(c.arguments)
    passed, why = score(item, category, calls) if not (bad or error) else (False, error or "arguments not JSON")
    row = {"id": item["id"], "category": category, "question": item["question"][0][-1]["content"],
           "tools": [f["name"] for f in item["function"]], "calls": calls, "text": reply.text,
           "passed": passed, "error": why, "seconds": round(seconds, 2),
           "expected": item.get("ground_truth")}  # fmt: skip
    if isinstance(log, list):
        row["notes"] = log[noted:]
    if recorder:
        reqs = recorder.since(mark)
        row["turn"] = summary(reqs)
        row["requests"] = [r.to_dict() for r in reqs]
    return row


async def run(args: argparse.Namespace) -> None:
    out = Path(args.out)
    report = json.loads(out.read_text()) if out.exists() else {"items": []}
    done = {r["id"] for r in report["items"]}
    policy, local = make_policy(args.policy, args.model, args.threads)
    recorder = Recorder(local, args.cache) if local is not None else None
    if local is not None:
        local.load()
    queues = [[(c, i) for i in sample(c, args.n, args.seed)] for c in args.category or CATEGORIES]
    order = [x for round_ in zip(*_padded(queues), strict=True) for x in round_ if x is not None]
    k, _, of = (args.shard or "0/1").partition("/")
    order = order[int(k) :: int(of)]  # shard k of K: every K-th item, so each shard stays balanced
    report.update(model=args.model, policy=args.policy or "shipped", n=args.n, seed=args.seed, threads=args.threads)
    for category, item in order:
        if item["id"] in done:
            continue
        load = os.getloadavg()[0]
        row = await run_item(policy, recorder, item, category)
        row["load"] = round(load, 2)
        report["items"].append(row)
        _save(out, report)
        mark = "ok  " if row["passed"] else "MISS"
        print(f"{mark} {row['id']:28} {row['seconds']:6.1f}s load {load:4.1f}  {_brief(row)}", flush=True)
    print(table([report]))


def _padded(queues: list[list[Any]]) -> list[list[Any]]:
    longest = max(map(len, queues), default=0)
    return [q + [None] * (longest - len(q)) for q in queues]


def _save(out: Path, report: dict[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(report, indent=1, ensure_ascii=False))
    tmp.replace(out)


def _brief(row: dict[str, Any]) -> str:
    said = json.dumps(row["calls"], ensure_ascii=False) if row["calls"] else f"answer: {row['text']!r}"
    return said[:150]


# -- reading reports ---------------------------------------------------------------


def table(reports: list[dict[str, Any]]) -> str:
    """Pass rates per category (N and the mean load average), one column per report."""
    head = "| category | " + " | ".join(f"{r.get('model', '?')} {r.get('policy', '')}" for r in reports)
    lines = [head + " | published |", "|---|" + "---:|" * (len(reports) + 1)]
    for c in CATEGORIES:
        cells = []
        for r in reports:
            rows = [x for x in r["items"] if x["category"] == c]
            ok = sum(x["passed"] for x in rows)
            cells.append(f"{100 * ok / len(rows):.0f} % ({ok}/{len(rows)})" if rows else "-")
        lines.append(f"| {c} | " + " | ".join(cells) + f" | {PUBLISHED[c]} |")
    for label, key in (("median s/item", "seconds"), ("mean load", "load")):
        cells = []
        for r in reports:
            values = sorted(x[key] for x in r["items"])
            cells.append(f"{values[len(values) // 2] if key == 'seconds' else sum(values) / len(values):.1f}"
                         if values else "-")  # fmt: skip
        lines.append(f"| {label} | " + " | ".join(cells) + " | |")
    return "\n".join(lines)


def misses(report: dict[str, Any], category: str | None) -> str:
    out = []
    for r in report["items"]:
        if r["passed"] or (category and r["category"] != category):
            continue
        want = json.dumps(r["expected"], ensure_ascii=False)[:200]
        out.append(f"{r['id']}: {r['question'][:200]!r}\n  tools {r['tools']}\n  got   {_brief(r)}\n"
                   f"  want  {want}\n  why   {r['error'][:200]}")  # fmt: skip
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    r = sub.add_parser("run")
    r.add_argument("--model", default="qwen2.5-coder-1.5b")
    r.add_argument("--n", type=int, default=10)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--threads", type=int, default=1)
    r.add_argument("--category", action="append", choices=CATEGORIES)
    r.add_argument("--policy", help="FILE.py:make, a protocol variant to measure instead of the shipped one")
    r.add_argument("--out", required=True)
    r.add_argument("--shard", help="K/N: run every N-th item from the K-th (several processes, one report each)")
    r.add_argument("--cache", help="DIR of stored replies: identical requests are replayed (for variants)")
    t = sub.add_parser("table")
    t.add_argument("reports", nargs="+")
    m = sub.add_parser("misses")
    m.add_argument("reports", nargs="+")
    m.add_argument("--category", choices=CATEGORIES)
    args = parser.parse_args()
    if args.what == "run":
        asyncio.run(run(args))
    elif args.what == "table":
        print(table(merged(args.reports)))
    else:
        for report in merged(args.reports):
            print(misses(report, args.category))


def merged(paths: list[str]) -> list[dict[str, Any]]:
    """Reports of the same model, protocol and seed (the shards of one run) as one report each."""
    groups: dict[tuple[Any, ...], dict[str, Any]] = {}
    for path in paths:
        report = json.loads(Path(path).read_text())
        key = (report.get("model"), report.get("policy"), report.get("seed"))
        if key in groups:
            groups[key]["items"] += report["items"]
        else:
            groups[key] = report
    return list(groups.values())


if __name__ == "__main__":
    main()
