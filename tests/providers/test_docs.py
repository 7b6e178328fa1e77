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


def test_the_fake_server_docstring_example_runs() -> None:
    from . import fakeserver

    lines = (fakeserver.__doc__ or "").split("::\n\n", 1)[1].splitlines()
    code = []
    for line in lines:
        if line and not line.startswith("    "):
            break
        code.append(line[4:])
    namespace: dict[str, object] = {}
    exec(compile("\n".join(code), str(fakeserver.__file__), "exec"), namespace)  # asserts inside
    assert namespace["result"].output == "2 + 3 = 5"  # type: ignore[attr-defined]
