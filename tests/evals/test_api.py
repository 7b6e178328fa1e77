"""tether.evals and tether.brains: curated, sorted, documented public names."""

from __future__ import annotations

import subprocess
import sys

import pytest

import tether.brains
import tether.evals


@pytest.mark.parametrize("module", [tether.evals, tether.brains])
def test_all_is_sorted_and_every_name_is_documented(module: object) -> None:
    names = module.__all__  # type: ignore[attr-defined]
    assert names == sorted(names, key=str.lower)
    assert [n for n in names if not (getattr(module, n).__doc__ or "").strip()] == []


def test_importing_tether_does_not_import_the_harness_or_numpy() -> None:
    code = "import sys, tether; print([m for m in ('tether.evals', 'tether.brains', 'numpy', 'sklearn') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_trained_brain_is_importable_without_loading_scikit_learn() -> None:
    code = "import sys, tether.brains; print('sklearn' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
