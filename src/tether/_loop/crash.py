"""Crash points for durability tests: ``TETHER_CRASH_AT=<point>[:<nth>]``.

When set, the process SIGKILLs itself the nth time (default: first) it passes
the named point, so tests can prove that a run killed anywhere resumes with
nothing lost and no ``once`` effect repeated. The loop's points sit on either
side of a commit (:data:`AROUND`: before or after an event of a kind is
committed); ``mid_tool`` is fired by test tools themselves. Unset, each check is
one comparison.
"""

from __future__ import annotations

import os
import signal

__all__ = ["AROUND", "POINTS", "armed", "crash_around", "crash_point"]

AROUND: dict[tuple[str, str], str] = {
    ("before", "model-replied"): "after_model_response",
    ("after", "model-replied"): "after_proposed_commit",
    ("after", "approval-decided"): "after_approval_commit",
    ("before", "tool-started"): "before_started_commit",
    ("after", "tool-started"): "after_started_commit",
    ("before", "tool-finished"): "after_tool_return",
    ("after", "tool-finished"): "after_result_commit",
    ("before", "paused"): "mid_state_serialize",
    ("after", "finished"): "after_run_complete",
}
POINTS = (
    "after_model_response",
    "after_proposed_commit",
    "after_approval_commit",
    "before_started_commit",
    "after_started_commit",
    "mid_tool",
    "after_tool_return",
    "after_result_commit",
    "mid_state_serialize",
    "after_run_complete",
)

_point, _, _nth = os.environ.get("TETHER_CRASH_AT", "").partition(":")
_remaining = int(_nth or 1)
armed = bool(_point)  # the loop checks this one flag before calling in


def crash_point(name: str) -> None:
    """SIGKILL this process if ``TETHER_CRASH_AT`` names this point (tests only)."""
    global _remaining
    if name != _point:
        return
    _remaining -= 1
    if _remaining <= 0:
        os.kill(os.getpid(), signal.SIGKILL)


def crash_around(when: str, kind: str) -> None:
    """The crash point ``when`` (before or after) committing an event of ``kind``, if armed."""
    name = AROUND.get((when, kind))
    if name is not None:
        crash_point(name)
