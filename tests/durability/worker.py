"""A worker process for the durability tests: drives scripted runs so a test can kill it.

    python tests/durability/worker.py --store URL --oracle FILE --plans FILE
        [--run-id ID ...] [--resume] [--approve-all]
        [--model-delay S] [--tool-delay S] [--stall S] [--barrier DIR --parties N] [--lease-ttl S]
        [--kill-after KIND:NTH]

Each run follows a *plan* (a list of turns, each a list of ``[tool, args]``)
written into its task message. The brain (a :class:`~tether.FunctionPolicy`)
decides from the context alone: the turn to play is the number of assistant
messages so far. So a worker started again after a kill continues the same
plan, with the same call ids.

A plan may delegate: ``["delegate", {"plan": PLAN}]`` calls the ``delegate``
tool, the next agent down used as a tool (``durable`` -> ``child`` ->
``grandchild``, each with the same four tools), so the call runs as a child
run ``<run id>/<call id>`` whose task carries ``PLAN`` and its own run id.

Every tool execution and every model request is appended to the *oracle*, a
file outside the store opened with ``O_APPEND`` and fsynced before the tool
returns (the side-effect oracle). A tool row carries the
attempt number of the ``tool-started`` event this process committed for it, so
a test can prove that no effect happened without its own committed start.

One worker drives all its runs concurrently in one event loop; a kill hits all
of them. It prints ``ready`` once the store is open and one JSON line per run
when that run stops (finished, paused, needs-decision, or ``lease-conflict``).
``TETHER_CRASH_AT`` (see :mod:`tether._loop.crash`) makes it kill itself at a named
point; the tools pass the ``mid_tool`` point after their effect is recorded.
``--kill-after KIND:NTH`` kills it right after the store took the nth event of
that kind (any run of the tree), for commits no named point follows.

The module is also imported by the tests, to build the same agent in-process
for un-killed reference runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import tether
from tether import (
    Agent,
    Context,
    Event,
    FunctionPolicy,
    Invocation,
    LeaseConflict,
    Paused,
    RunState,
    Tool,
    ToolCall,
    ToolStarted,
    tool,
)
from tether._loop.crash import crash_point
from tether.agent import RunResult
from tether.policy import Move
from tether.store import Lease, StoreWrapper, load_tree
from tether.stores import RunStore

Plan = list[list[list[Any]]]  # turns -> calls -> [tool name, args]; ["delegate", {"plan": Plan}] delegates
FINAL = "done"
LEVELS = ("durable", "child", "grandchild")  # the agents of a tree, each delegating to the next


class Oracle:
    """Append-only JSON lines, each fsynced before ``write`` returns."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, **record: Any) -> None:
        line = json.dumps({**record, "pid": os.getpid()}, sort_keys=True) + "\n"
        os.write(self._fd, line.encode())
        os.fsync(self._fd)

    async def awrite(self, **record: Any) -> None:
        """:meth:`write` in a thread, so concurrent runs overlap their fsyncs."""
        await asyncio.to_thread(self.write, **record)


def read_oracle(path: str | Path) -> list[dict[str, Any]]:
    """Every record of an oracle file (a torn line would fail loudly)."""
    p = Path(path)
    if not p.exists():
        return []
    return [json.loads(line) for line in p.read_text().splitlines() if line]


# -- the plan, written into the task so the brain can read it back -------------


def task_text(run_id: str, plan: Plan) -> str:
    return f"run {run_id}\nplan {json.dumps(plan, sort_keys=True)}"


def read_task(context: Context) -> tuple[str, Plan]:
    first = next(m for m in context if m.role == "user")
    return parse_task(first.content)


def parse_task(text: str) -> tuple[str, Plan]:
    head, _, body = text.partition("\nplan ")
    return head.removeprefix("run "), json.loads(body)


def child_plans(plan: Plan, run_id: str) -> dict[str, Plan]:
    """The plans of the child runs ``plan`` delegates to, by child run id, all the way down.

    Call ids are the brain's (``call_<len(context)>_<i>``); a run's context grows by one
    reply and its results per turn, after the task (no system message here).
    """
    out: dict[str, Plan] = {}
    size = 1
    for calls in plan:
        for i, (name, args) in enumerate(calls):
            if name == "delegate":
                child = f"{run_id}/call_{size}_{i}"
                out[child] = args["plan"]
                out.update(child_plans(args["plan"], child))
        size += 1 + len(calls)
    return out


def make_brain(oracle: Oracle, delay: float = 0.0) -> FunctionPolicy:
    """A deterministic brain: plays the plan's next turn, then answers ``done``."""

    async def brain(context: Context, tools: Sequence[Tool]) -> Move:
        run_id, plan = read_task(context)
        turn = sum(1 for m in context if m.role == "assistant")
        await oracle.awrite(ev="model", run=run_id, turn=turn)
        if delay:
            await asyncio.sleep(random.uniform(0, 2 * delay))
        await oracle.awrite(ev="reply", run=run_id, turn=turn)
        if turn < len(plan):
            return [call(run_id, f"call_{len(context)}_{i}", name, args) for i, (name, args) in enumerate(plan[turn])]
        return f"{FINAL}: {sum(len(t) for t in plan)} calls in {len(plan)} turns"

    def call(run_id: str, call_id: str, name: str, args: dict[str, Any]) -> ToolCall:
        if name == "delegate":  # the child's task names its run id, so its brain and oracle rows know it
            args = {"task": task_text(f"{run_id}/{call_id}", args["plan"])}
        return ToolCall.of(name, args, id=call_id)

    return FunctionPolicy(brain)


# -- tools: each records its effect in the oracle -----------------------------


class Ledger:
    """The attempt of each call's latest ``tool-started`` committed by this process."""

    def __init__(self) -> None:
        self.attempts: dict[tuple[str, str], int] = {}

    def note(self, run_id: str, events: Sequence[Event]) -> None:
        for ev in events:
            if isinstance(ev, ToolStarted):
                self.attempts[(run_id, ev.call.id)] = ev.attempt


def make_tools(oracle: Oracle, ledger: Ledger, delay: float = 0.0, stall: float = 0.0) -> list[Tool]:
    """``lookup`` (effect none), ``put`` (idempotent), ``send`` (once), ``refund`` (once, approval).

    Each waits about ``delay`` seconds around its effect, and ``stall`` more
    seconds after it (a call that hangs once the world has changed).
    """

    async def effect(name: str, call: Invocation, **fields: Any) -> None:
        if delay:
            await asyncio.sleep(random.uniform(0, delay))
        attempt = ledger.attempts.get((call.run_id, call.call_id))
        await oracle.awrite(
            ev="tool", tool=name, run=call.run_id, call=call.call_id, attempt=attempt,
            key=call.idempotency_key, **fields,
        )  # fmt: skip
        crash_point("mid_tool")
        if delay or stall:
            await asyncio.sleep(random.uniform(0, delay) + stall)

    @tool(effect="none")
    async def lookup(key: str, call: Invocation) -> str:
        """Read a value (no side effect)."""
        await effect("lookup", call)
        return f"{key} has length {len(key)}"

    @tool(effect="idempotent")
    async def put(key: str, value: str, call: Invocation) -> str:
        """Store a value; repeating it with the same idempotency key is harmless."""
        await effect("put", call, value=value)
        return f"stored {key}={value}"

    @tool(effect="once")
    async def send(to: str, text: str, call: Invocation) -> str:
        """Send a message (must not happen twice)."""
        await effect("send", call, text=text)
        return f"sent {text!r} to {to}"

    # Not support.refund: the crash matrix counts its effect by idempotency key (Invocation).
    @tool(effect="once", approval=True)
    async def refund(order: str, amount: int, call: Invocation) -> str:
        """Refund an order (a human approves first; must not happen twice)."""
        await effect("refund", call, amount=amount)
        return f"refunded ${amount} for {order}"

    return [lookup, put, send, refund]


EFFECTS = {"lookup": "none", "put": "idempotent", "send": "once", "refund": "once", "delegate": "idempotent"}


class TrackedStore(StoreWrapper):
    """A store wrapper for the worker: notes started attempts; optional lease barrier.

    With a barrier, the first ``acquire`` of each run's lease waits until
    ``parties`` workers have reached it, so racing workers really race for it.
    """

    def __init__(
        self, inner: RunStore, ledger: Ledger, barrier: Path | None = None, parties: int = 2, kill_after: str = ""
    ) -> None:
        super().__init__(inner)
        self.ledger, self.barrier, self.parties = ledger, barrier, parties
        self._waited: set[tuple[str, str]] = set()
        kind, _, nth = kill_after.partition(":")
        self._kill_kind, self._kill_left = kind, int(nth or 1)

    async def append(
        self, run_id: str, events: Sequence[Event], *, expected_seq: int, lease: Lease | None = None
    ) -> int:
        seq = await self.inner.append(run_id, events, expected_seq=expected_seq, lease=lease)
        self.ledger.note(run_id, events)
        for ev in events:
            if ev.kind == self._kill_kind:
                self._kill_left -= 1
                if self._kill_left == 0:  # committed, and the process dies before anyone hears of it
                    os.kill(os.getpid(), signal.SIGKILL)
        return seq

    async def acquire(self, run_id: str, owner: str, ttl: float, *, take_over: str | None = None) -> Lease:
        await self._wait_for_the_others(run_id, "reached")
        try:
            return await self.inner.acquire(run_id, owner, ttl, take_over=take_over)
        finally:  # the winner goes on only once every worker has tried: the race is real under load too
            await self._wait_for_the_others(run_id, "tried")

    async def _wait_for_the_others(self, run_id: str, stage: str) -> None:
        if self.barrier is not None and (run_id, stage) not in self._waited:
            self._waited.add((run_id, stage))
            (self.barrier / f"{run_id}.{stage}.{os.getpid()}").touch()
            deadline = asyncio.get_running_loop().time() + 30
            while len(list(self.barrier.glob(f"{run_id}.{stage}.*"))) < self.parties:
                if asyncio.get_running_loop().time() > deadline:
                    raise TimeoutError(f"the other workers never reached run {run_id!r}")
                await asyncio.sleep(0.001)


def build_agent(
    store: RunStore | None, oracle: Oracle, ledger: Ledger, *, model_delay: float = 0.0,
    tool_delay: float = 0.0, stall: float = 0.0, lease_ttl: float = 30.0,
) -> Agent:  # fmt: skip
    tools = make_tools(oracle, ledger, tool_delay, stall)
    brain = make_brain(oracle, model_delay)
    below: list[Tool] = []
    for name in reversed(LEVELS):  # grandchild first: each level delegates to the one below it
        agent = Agent(brain, [*tools, *below], store=store if name == LEVELS[0] else None, name=name,
                      max_steps=50, lease_ttl=lease_ttl)  # fmt: skip
        below = [agent.as_tool(name="delegate", description=f"Hand a plan to the {name} agent.")]
    return agent


# -- driving one run -------------------------------------------------------------


def last_pause(events: list[Event]) -> Paused | None:
    return next((e for e in reversed(events) if isinstance(e, Paused)), None)


async def approve_all(agent: Agent, state: RunState) -> RunResult:
    """Approve every item of the tree waiting for approval, in this process (fires after_approval_commit)."""
    for p in state.items():
        if p.status == "awaiting-approval" and state.decision(p.id) is None:
            state = state.approve(p.id, by="worker")
    return await agent.run(state)


async def resume_paused(agent: Agent, store: RunStore, run_id: str, approve: bool) -> RunResult | None:
    """Continue a paused run if every item of its tree it waits for is decided (or we may approve)."""
    events = await store.load(run_id)
    state, pause = await load_tree(store, run_id), last_pause(events)
    waiting = [p for p in state.items() if pause and p.id in pause.call_ids]
    undecided = [p for p in waiting if state.decision(p.id) is None]
    if not undecided:
        return await agent.run(run_id=run_id)
    if approve and all(p.status == "awaiting-approval" for p in undecided):
        return await approve_all(agent, state)
    return None


async def drive(agent: Agent, store: RunStore, run_id: str, plan: Plan, approve: bool) -> str:
    """Take one run as far as it goes without a human; return its status."""
    info = await store.get(run_id)
    if info is None:
        result: RunResult | None = await agent.run(task_text(run_id, plan), run_id=run_id)
    elif info.status == "running":
        result = await agent.run(run_id=run_id)
    elif info.status in ("paused", "needs-decision"):
        result = await resume_paused(agent, store, run_id, approve)
    else:
        return info.status
    while result is not None and result.status == "paused" and approve:
        result = await approve_all(agent, result.state)
    if result is None:
        info = await store.get(run_id)
        return info.status if info else "missing"
    return result.status


async def drive_reported(agent: Agent, store: RunStore, run_id: str, plan: Plan, approve: bool) -> None:
    try:
        status = await drive(agent, store, run_id, plan, approve)
    except LeaseConflict as exc:
        status = f"lease-conflict: {exc}"
    print(json.dumps({"run": run_id, "status": status, "pid": os.getpid()}), flush=True)


async def record_decisions(store: RunStore, run_id: str, rules: dict[str, str]) -> RunState:
    """What a human does from another process: decide on a paused run (``tether.record_decisions``).

    ``rules`` maps a call *status* to the verdict for its undecided calls (in child runs
    too, addressed by path), e.g. ``{"started": "skip", "awaiting-approval": "approve"}``;
    returns the state decided on.
    """

    def decide(state: RunState) -> RunState:
        for p in state.items():
            verdict = rules.get(p.status)
            if verdict is not None and state.decision(p.id) is None:
                state = getattr(state, verdict)(p.id, by="test")
        return state

    return await tether.record_decisions(store, run_id, decide)


# -- entry point -------------------------------------------------------------------


async def main_async(args: argparse.Namespace) -> int:
    from tether.stores import open_store

    plans: dict[str, Plan] = json.loads(Path(args.plans).read_text())
    run_ids = args.run_id or list(plans)
    oracle, ledger = Oracle(args.oracle), Ledger()
    barrier = Path(args.barrier) if args.barrier else None
    store = TrackedStore(open_store(args.store), ledger, barrier, args.parties, args.kill_after)
    if not args.resume and any([await store.get(r) for r in run_ids]):
        print("some runs already exist; pass --resume to continue them", file=sys.stderr)
        return 2
    agent = build_agent(
        store, oracle, ledger, model_delay=args.model_delay, tool_delay=args.tool_delay, stall=args.stall,
        lease_ttl=args.lease_ttl,
    )  # fmt: skip
    await store.list_runs(limit=1)  # connected (and migrated) before we say so
    print("ready", flush=True)
    try:
        await asyncio.gather(*(drive_reported(agent, store, r, plans[r], args.approve_all) for r in run_ids))
    finally:
        await store.aclose()
    return 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--store", required=True, help="store URL (sqlite:////abs.db, postgresql://...)")
    p.add_argument("--oracle", required=True, help="side-effect oracle file (JSON lines)")
    p.add_argument("--plans", required=True, help="JSON file: {run_id: plan}")
    p.add_argument("--run-id", action="append", help="drive only these runs (default: all)")
    p.add_argument("--resume", action="store_true", help="continue runs already in the store")
    p.add_argument("--approve-all", action="store_true", help="approve every approval request")
    p.add_argument("--model-delay", type=float, default=0.0, help="mean seconds the brain thinks")
    p.add_argument("--tool-delay", type=float, default=0.0, help="mean seconds each tool takes")
    p.add_argument("--stall", type=float, default=0.0, help="seconds each tool hangs after its effect")
    p.add_argument("--barrier", help="directory for the load barrier of racing workers")
    p.add_argument("--parties", type=int, default=2)
    p.add_argument("--lease-ttl", type=float, default=30.0, help="seconds a run's lease lasts unless renewed")
    p.add_argument("--kill-after", default="", help="KIND:NTH: SIGKILL right after the nth commit of that kind")
    return p.parse_args(argv)


if __name__ == "__main__":
    sys.exit(asyncio.run(main_async(parse_args())))
