"""Finding a dataset from what a person typed: a shipped name, a JSON Lines file, or a Python file."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from ..exceptions import UserError
from .cases import Dataset, load_jsonl


def load_dataset(spec: str) -> Dataset:
    """``refund-desk`` (shipped), ``cases.jsonl`` or ``evals.py`` (which defines ``dataset``).

    A JSON Lines file whose cases name a shipped body (``data.body``) runs on
    that body; a Python file may define its own ``Dataset`` with any agent.

    >>> load_dataset("no-tool").name
    'no-tool'
    """
    from . import datasets

    if spec in datasets.names():
        return datasets.load(spec)
    path = Path(spec)
    if path.suffix == ".jsonl":
        return load_jsonl(path, agent=datasets.make_agent)
    if path.suffix == ".py":
        return _from_python(path)
    raise UserError(f"unknown dataset {spec!r}: a shipped name ({', '.join(datasets.names())}), a .jsonl or a .py file")


def _from_python(path: Path) -> Dataset:
    if not path.is_file():
        raise UserError(f"no dataset file {str(path)!r}")
    name = f"tether_eval_dataset_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UserError(f"cannot import {str(path)!r}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    found = getattr(module, "dataset", None)
    if callable(found) and not isinstance(found, Dataset):
        found = found()
    if not isinstance(found, Dataset):
        raise UserError(f"{str(path)!r} must define `dataset`: a tether.evals.Dataset (or a function returning one)")
    return found
