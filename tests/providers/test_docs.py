"""The offline example in docs/providers.md runs as written."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "providers.md"


def test_the_offline_example_in_the_docs_runs() -> None:
    section = DOC.read_text().split("## Trying it offline", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match is not None
    namespace: dict[str, object] = {}
    exec(compile(match.group(1), str(DOC), "exec"), namespace)  # asserts inside the example
    assert namespace["result"].output == "Hello from a fake model!"  # type: ignore[attr-defined]
