"""``tether eval``: run a dataset against a brain, report, compare two reports.

    tether eval list                               the shipped datasets
    tether eval run refund-desk --model local      evaluate a brain on a dataset
    tether eval run cases.jsonl --trials 5 --json out.json --html out.html
    tether eval compare before.json after.json     which cases regressed (exit 1 if any)

The brain is ``--model`` as for ``tether run`` (``local``, ``openai:NAME``, an
OpenAI-compatible name with ``--base-url``...), or ``reference`` (each case's
reference replies, played back), or ``trained:FILE.npz`` (a brain from
:mod:`tether.brains`). Runs are journaled in ``--store`` (default
``sqlite:///.tether/evals.db``) under the evaluation's ``--name``; running the
same command again after an interruption resumes it.
"""

from __future__ import annotations

import asyncio
import functools
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ..exceptions import TetherError, UserError
from ._render import visible

if TYPE_CHECKING:
    from ..evals import Report

F = TypeVar("F", bound=Callable[..., Any])
DEFAULT_STORE = "sqlite:///.tether/evals.db"


def _errors(fn: F) -> F:
    """One line and exit status 2 for what a user can get wrong, as the other commands do."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except UserError as exc:
            click.echo(visible(f"error: {exc}"), err=True)
            sys.exit(2)
        except TetherError as exc:
            click.echo(visible(f"error: {type(exc).__name__}: {exc}"), err=True)
            sys.exit(1)

    return wrapper  # type: ignore[return-value]


@click.group("eval")
def eval_group() -> None:
    """Evaluate a brain on a dataset of tasks; compare reports."""


@eval_group.command("list")
def list_datasets() -> None:
    """The datasets tether ships, with their case counts and tags."""
    from ..evals import datasets

    for name in datasets.names():
        ds = datasets.load(name)
        tags = sorted({t for c in ds.cases for t in c.tags})
        click.echo(visible(f"{name:<14} {len(ds):>3} cases  {ds.description or ', '.join(tags)}"))


@eval_group.command("run")
@click.argument("dataset")
@click.option("--model", metavar="MODEL", help="The brain: local, openai:NAME, ..., reference, trained:FILE.npz.")
@click.option("--base-url", metavar="URL", help="The model's endpoint (OpenAI-compatible).")
@click.option("--api-key-env", metavar="VAR", help="Environment variable holding the API key.")
@click.option("--trials", type=int, default=1, show_default=True, help="Runs per case (pass@k up to this k).")
@click.option("--concurrency", type=int, default=4, show_default=True, help="Trials running at once.")
@click.option("--tag", "tags", multiple=True, metavar="TAG", help="Only cases with this tag (repeatable).")
@click.option("--case", "case_ids", multiple=True, metavar="ID", help="Only this case (repeatable).")
@click.option("--name", metavar="NAME", help="Evaluation name (run ids) [default: DATASET-MODEL].")
@click.option("--store", metavar="URL", default=DEFAULT_STORE, show_default=True, help="Where runs are journaled.")
@click.option(
    "--unfinished",
    type=click.Choice(["restart", "resume"]),
    default="restart",
    show_default=True,
    help="What to do with a run an interruption left unfinished.",
)
@click.option("--price", metavar="IN,OUT", help="Dollars per million input and output tokens, for the cost.")
@click.option("--json", "json_path", type=click.Path(path_type=Path), help="Write the report as JSON here.")
@click.option("--html", "html_path", type=click.Path(path_type=Path), help="Write the report as an HTML page here.")
@click.option("--min-accuracy", type=float, metavar="X", help="Exit 1 when the accuracy is below X (0 to 1).")
@click.option("--progress/--no-progress", default=None, help="Progress bar [default: when stderr is a terminal].")
@_errors
def run_eval(dataset: str, **opts: Any) -> None:
    """Run every case of DATASET (a shipped name, a .jsonl or a .py file) with a brain, and report."""
    from ..evals import evaluate, load_dataset
    from ..stores import open_store

    ds = load_dataset(dataset).select(tags=opts["tags"], ids=opts["case_ids"])
    if not ds.cases:
        raise UserError(f"no case of {dataset!r} matches the --tag/--case filters")
    brain, label = _brain(opts)
    name = opts["name"] or _slug(f"{ds.name}-{label}")
    store = open_store(opts["store"])
    settings = {"trials": opts["trials"], "concurrency": opts["concurrency"], "unfinished": opts["unfinished"]}

    async def go() -> Report:
        try:
            return await evaluate(
                ds,
                brain=brain,
                name=name,
                store=store,
                price=_price(opts["price"]),
                label=label,
                progress=opts["progress"],
                **settings,
            )
        finally:
            await store.aclose()

    report = asyncio.run(go())
    click.echo(visible(report.table(width=_width())))
    for path in (opts["json_path"], opts["html_path"]):
        if path is not None:
            click.echo(visible(f"wrote {report.save(path)}"))
    floor = opts["min_accuracy"]
    if floor is not None and report.summary().accuracy < floor:
        sys.exit(1)


@eval_group.command("compare")
@click.argument("before", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("after", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@_errors
def compare_reports(before: Path, after: Path) -> None:
    """Which cases regressed from BEFORE to AFTER (JSON reports); exit 1 if any did."""
    from ..evals import compare, load_report

    result = compare(load_report(before), load_report(after))
    click.echo(visible(result.table()))
    if result.regressed:
        sys.exit(1)


def _brain(opts: dict[str, Any]) -> tuple[Any, str]:
    """The policy (or per-case brain function) ``--model`` names, and a label for it."""
    model = opts["model"] or ""
    if model == "reference":
        from ..evals import reference_brain

        return reference_brain, "reference"
    if model.startswith("trained:"):
        from ..brains import TrainedPolicy

        path = model.removeprefix("trained:")
        return TrainedPolicy.load(path), f"trained-{Path(path).stem}"
    from ._config import load_settings, make_policy

    settings = load_settings(model=model or None, base_url=opts["base_url"], api_key_env=opts["api_key_env"])
    return make_policy(settings), settings.model or "local"


def _price(text: str | None) -> tuple[float, float] | None:
    if not text:
        return None
    try:
        low, high = (float(v) for v in text.split(","))
    except ValueError:
        raise UserError(f"--price must be two numbers, IN,OUT (dollars per million tokens), not {text!r}") from None
    return low, high


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")


def _width() -> int:
    import shutil

    return max(80, shutil.get_terminal_size((100, 24)).columns)
