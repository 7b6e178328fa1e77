"""The progress bar shows on a terminal, and stays silent otherwise."""

from __future__ import annotations

import io
import os
import pty

from tether.evals import Case, TrialResult, evaluate
from tether.evals.progress import PlainBar, RichBar, Silent, make_progress
from tether.testing import ScriptedModel


def test_no_bar_when_stderr_is_not_a_terminal() -> None:
    assert isinstance(make_progress(3, "x", stream=io.StringIO()), Silent)
    assert isinstance(make_progress(3, "x", enabled=False), Silent)


def test_a_bar_on_a_real_terminal() -> None:
    main, child = pty.openpty()
    with os.fdopen(child, "w") as tty:
        bar = make_progress(2, "demo", stream=tty)
        assert isinstance(bar, RichBar)  # the cli extra (rich) is installed in the test environment
        bar.advance(None)
        bar.close()
        out = os.read(main, 65536).decode(errors="replace")
    os.close(main)
    assert "demo" in out


def test_the_plain_bar_counts_trials_and_passes() -> None:
    stream = io.StringIO()
    bar = PlainBar(4, "demo", stream, width=8)

    bar.advance(TrialResult("a", 0, "r", True, 1.0, "finished"))
    bar.close()
    assert "demo [##......] 1/4 passed 1" in stream.getvalue()


async def test_evaluate_reports_progress_to_a_given_bar() -> None:
    stream = io.StringIO()
    bar = PlainBar(2, "e", stream)
    from tether import Agent

    cases = [Case("a", "x", expected="ok"), Case("b", "y", expected="no")]
    await evaluate(cases, lambda s: Agent(ScriptedModel(["ok"]), store=s.store), progress=bar)
    assert stream.getvalue().rstrip().endswith("2/2 passed 1")
