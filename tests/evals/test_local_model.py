"""The harness with the real offline model (0.5B): a few shipped cases, end to end (slow).

These measure; they do not assert that the small model is right (that is what
the reports are for). They assert that the harness drives a real model
through the same loop: tokens and latency are counted, calls are graded, the
HTML and JSON reports are written, and a second evaluation reads every trial
back from the store instead of asking the model again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tether.evals import evaluate
from tether.evals.datasets import load
from tether.exceptions import UserError
from tether.stores.sqlite import SQLiteStore

pytestmark = [pytest.mark.slow, pytest.mark.local_model]
MODEL = "qwen2.5-coder-0.5b"
CASES = ["choose-weather", "several-weather", "no-tool-history"]


@pytest.fixture(scope="module")
def local_model():  # type: ignore[no-untyped-def]
    try:
        import xllamacpp  # noqa: F401

        from tether.providers._weights import gguf_path

        gguf_path(MODEL)
    except (ImportError, UserError) as exc:
        if os.environ.get("TETHER_REQUIRE_LOCAL_MODEL") == "1":
            pytest.fail(f"the local model is required here but {exc}")
        pytest.skip(str(exc))
    from tether.providers import LocalModel

    return LocalModel(MODEL)


async def test_the_local_model_on_a_few_shipped_cases(local_model, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ds = load("toolbox").cases + load("no-tool").cases
    from tether.evals import Dataset
    from tether.evals.datasets import make_agent

    subset = Dataset("local-subset", [c for c in ds if c.id in CASES], make_agent)
    store = SQLiteStore(tmp_path / "evals.db")
    report = await evaluate(subset, brain=local_model, store=store, concurrency=1, name="local", label=MODEL)
    print("\n" + report.table())  # the measurement, for whoever runs -s
    s = report.summary()
    assert s.trials == 3 and s.errors == 0
    assert s.input_tokens > 0 and s.output_tokens > 0 and s.seconds_mean > 0
    assert all(r.status == "finished" and r.replies >= 1 for r in report.results)
    assert json.loads(report.save(tmp_path / "local.json").read_text())["label"] == MODEL
    again = await evaluate(subset, brain=local_model, store=store, concurrency=1, name="local")
    assert again.summary().read_back == 3
    await store.aclose()
