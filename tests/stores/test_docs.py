"""The runnable example in docs/stores.md runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).parents[2] / "docs" / "stores.md"


def test_the_pause_and_resume_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    example = next(b for b in blocks if "asyncio.run(main(" in b)
    exec(compile(example, str(DOC), "exec"), {"__name__": "docs_example"})
    assert "refused: run " in capsys.readouterr().out
