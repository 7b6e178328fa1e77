"""The public API is what tether/__init__.py exports: curated, sorted, complete."""

from __future__ import annotations

import subprocess
import sys

import tether


def test_all_is_sorted_case_insensitively_and_unique() -> None:
    assert tether.__all__ == sorted(tether.__all__, key=str.lower)
    assert len(set(tether.__all__)) == len(tether.__all__)


def test_every_public_name_is_exported_and_every_export_exists() -> None:
    import types

    public = {n for n, v in vars(tether).items() if not n.startswith("_") and not isinstance(v, types.ModuleType)}
    assert public == set(tether.__all__)


def test_every_export_has_a_docstring() -> None:
    missing = [n for n in tether.__all__ if not (getattr(tether, n).__doc__ or "").strip()]
    assert missing == []


def test_import_tether_stays_light() -> None:
    code = "import sys, tether; print(sorted(m for m in ('pydantic', 'httpx', 'sqlite3', 'psycopg', 'rich', 'click', 'xllamacpp') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
