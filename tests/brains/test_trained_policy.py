"""The trained brain: learns a synthetic task from recorded runs, and drives the same loop as any brain."""

from __future__ import annotations

import asyncio
import io
import json
import tracemalloc
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import synthetic as S

from tether import Agent, Context, Message, UserError
from tether.brains import TrainedPolicy, examples_from_events, examples_from_store, train
from tether.brains.policy import MAX_BRAIN_BYTES
from tether.evals import evaluate, run_id_for
from tether.stores.memory import MemoryStore
from tether.testing import ScriptedModel


def recorded(n: int = 300, seed: int = 1) -> MemoryStore:
    """The teacher's runs on ``n`` generated requests, journaled in a store."""
    store = MemoryStore()
    agent = Agent(S.brain(), S.TOOLS, store=store)

    async def go() -> None:
        for i, task in enumerate(S.tasks(n, S.TRAIN_CITIES, seed)):
            await agent.run(task, run_id=f"demo-{i}")

    asyncio.run(go())
    return store


@pytest.fixture(scope="module")
def brain(tmp_path_factory: pytest.TempPathFactory) -> TrainedPolicy:
    store = recorded()
    trained = train(asyncio.run(examples_from_store(store)))
    path = trained.save(tmp_path_factory.mktemp("brain") / "brain.npz")
    return TrainedPolicy.load(path)  # every test uses the brain as loaded from its file


def test_it_learns_the_synthetic_task_to_at_least_95_percent_on_held_out_cities(brain: TrainedPolicy) -> None:
    cases = S.cases(100, S.TEST_CITIES, seed=2)  # cities never seen in training
    report = asyncio.run(evaluate(cases, lambda s: Agent(brain, S.TOOLS, store=s.store)))
    accuracy = report.summary().accuracy
    assert accuracy >= 0.95, report.table()


def test_it_runs_through_agent_unchanged_with_several_calls_in_one_reply(brain: TrainedPolicy) -> None:
    result = Agent(brain, S.TOOLS).run_sync("What's the weather in Quito and in Riga?")
    first = next(m for m in result.context if m.tool_calls)
    assert [json.loads(c.arguments) for c in first.tool_calls] == [{"city": "Quito"}, {"city": "Riga"}]
    teacher = Agent(S.brain(), S.TOOLS).run_sync("What's the weather in Quito and in Riga?")
    assert result.status == "finished" and result.output == teacher.output


def test_arguments_are_converted_to_the_schema_types(brain: TrainedPolicy) -> None:
    reply = asyncio.run(brain.decide(Context([Message.user("Convert 250 EUR to JPY.")]), S.TOOLS))
    (call,) = reply.tool_calls
    assert call.name == "convert" and json.loads(call.arguments) == {"amount": 250, "source": "EUR", "target": "JPY"}


def test_it_answers_without_a_tool_when_the_teacher_did(brain: TrainedPolicy) -> None:
    reply = asyncio.run(brain.decide(Context([Message.user("Good morning")]), S.TOOLS))
    assert reply.tool_calls == () and reply.content == "Hello! I can tell you the weather or convert money."


def test_saved_and_loaded_brains_decide_the_same(brain: TrainedPolicy, tmp_path: Path) -> None:
    again = TrainedPolicy.load(brain.save(tmp_path / "copy.npz"))
    for task in S.tasks(20, S.TEST_CITIES, seed=5):
        ctx = Context([Message.user(task)])
        assert asyncio.run(again.decide(ctx, S.TOOLS)) == asyncio.run(brain.decide(ctx, S.TOOLS))


def test_the_file_is_arrays_and_json_that_load_without_pickle(brain: TrainedPolicy, tmp_path: Path) -> None:
    path = brain.save(tmp_path / "b.npz")
    with np.load(path, allow_pickle=False) as data:
        header = json.loads(str(data["header"]))
        assert header["format"] == "tether-trained-brain" and all(data[k].dtype != object for k in data.files)


def test_loading_refuses_what_is_not_a_brain(tmp_path: Path) -> None:
    np.savez(tmp_path / "other.npz", x=np.zeros(3))
    with pytest.raises(UserError, match="is not a saved tether brain"):
        TrainedPolicy.load(tmp_path / "other.npz")
    np.save(tmp_path / "objects.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(UserError, match="is not a saved tether brain"):
        TrainedPolicy.load(tmp_path / "objects.npy")


def test_it_only_makes_moves_the_offered_tools_allow(brain: TrainedPolicy) -> None:
    ctx = Context([Message.user("What's the weather in Quito?")])
    reply = asyncio.run(brain.decide(ctx, [S.convert]))  # get_weather not offered
    assert all(c.name == "convert" for c in reply.tool_calls)


def test_examples_come_from_finished_runs_and_skip_grade_records() -> None:
    store = recorded(8)
    asyncio.run(
        evaluate(
            S.cases(2, S.TEST_CITIES, 3), lambda s: Agent(S.brain(), S.TOOLS, store=s.store), store=store, name="graded"
        )
    )
    examples = asyncio.run(examples_from_store(store))
    events = asyncio.run(store.load("demo-0"))
    assert len(examples) == sum(
        len(examples_from_events(asyncio.run(store.load(r.run_id))))
        for r in asyncio.run(store.list_runs())
        if not r.run_id.endswith("#grade")
    )
    assert examples_from_events(events)[0].context.last().role == "user"
    assert asyncio.run(store.get(run_id_for("graded", "t0", 0) + "#grade")) is not None


def test_training_needs_examples() -> None:
    with pytest.raises(UserError, match="at least one recorded decision"):
        train([])


def test_one_move_is_enough_to_train_a_brain() -> None:
    store = MemoryStore()
    asyncio.run(Agent(ScriptedModel(["hello"]), store=store).run("hi", run_id="r"))
    brain = train(asyncio.run(examples_from_store(store)))
    assert asyncio.run(brain.decide(Context([Message.user("hey")]), [])).content == "hello"


def _bomb(path: Path, brain: TrainedPolicy, name: str, header: dict[str, Any], body: int) -> Path:
    """A brain file whose member ``name`` is a .npy with ``header`` and ``body`` zero bytes, zipped
    (zeros shrink about a thousandfold: a small file that decompresses to a lot)."""
    good = brain.save(path.with_suffix(".good.npz"))
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
        for info in src.infolist():
            if info.filename != name:
                out.writestr(info, src.read(info))
        with out.open(name, "w", force_zip64=True) as f:
            head = io.BytesIO()
            np.lib.format.write_array_header_1_0(head, header)
            f.write(head.getvalue())
            chunk = bytes(2**20)
            for _ in range(body // len(chunk)):
                f.write(chunk)
    return path


def test_a_decompression_bomb_is_refused_before_it_is_inflated(brain: TrainedPolicy, tmp_path: Path) -> None:
    # The attack: 0.25 MB on disk, 256 MB once inflated (the review's 0.5 MB file cost +511 MB on load).
    n = 2**28
    header = {"descr": "<f8", "fortran_order": False, "shape": (n // 8,)}
    path = _bomb(tmp_path / "bomb.npz", brain, "move.w0.npy", header, n)
    assert path.stat().st_size < 2**20
    tracemalloc.start()
    try:
        with pytest.raises(UserError, match="decompress"):
            TrainedPolicy.load(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < MAX_BRAIN_BYTES // 4, f"loading the bomb took {peak:,} bytes"


def test_an_array_header_that_claims_more_than_its_data_is_refused(brain: TrainedPolicy, tmp_path: Path) -> None:
    # A small member whose .npy header says it holds 8 GB: numpy would set that much aside first.
    header = {"descr": "<f8", "fortran_order": False, "shape": (2**30,)}
    path = _bomb(tmp_path / "liar.npz", brain, "move.w0.npy", header, 2**20)
    with pytest.raises(UserError, match="is not a saved tether brain"):
        TrainedPolicy.load(path)
