"""Every docstring example in src/tether runs, and the public API's examples are never skipped."""

from __future__ import annotations

import doctest
import importlib
import inspect

import pytest

import tether
from test_layout import modules  # tests/ is on sys.path (rootdir-relative imports)

FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
NOT_IMPORTED = {"tether.__main__"}  # importing it runs the command line


@pytest.mark.parametrize("name", sorted(set(modules()) - NOT_IMPORTED))
def test_the_docstring_examples_of_each_module_pass(name: str) -> None:
    module = importlib.import_module(name)
    failed, _ = doctest.testmod(module, optionflags=FLAGS, report=False)
    assert failed == 0, f"{failed} doctest example(s) of {name} failed (run: python -m doctest -v on it)"


@pytest.mark.parametrize("name", tether.__all__)
def test_no_example_of_a_public_symbol_is_skipped(name: str) -> None:
    doc = inspect.getdoc(getattr(tether, name)) or ""
    assert "+SKIP" not in doc, f"tether.{name}'s docstring example is skipped: make it run"
