"""examples/train_refund_brain.py runs: it trains from scripted runs and its brain passes the refund desk."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_refund_brain_example_trains_and_evaluates(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "train_refund_brain.py"), "--out", str(tmp_path), "--no-local"],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "trained TrainedPolicy(" in out.stdout and "teacher -> trained: accuracy 100% ->" in out.stdout
    trained = json.loads((tmp_path / "trained.json").read_text())
    assert trained["summary"]["accuracy"] >= 0.8 and trained["label"] == "trained"
    assert (tmp_path / "refund_brain.npz").stat().st_size > 0 and (tmp_path / "trained.html").exists()
