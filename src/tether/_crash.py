"""Crash points for durability tests: ``TETHER_CRASH_AT=<point>[:<nth>]``.

When set, the process SIGKILLs itself the nth time (default: first) it passes
the named point of the loop, so tests can prove that a run killed anywhere
resumes with nothing lost and no ``once`` effect repeated. Unset, each check is
one comparison.
"""

from __future__ import annotations

import os
import signal

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


def crash_point(name: str) -> None:
    """SIGKILL this process if ``TETHER_CRASH_AT`` names this point (tests only)."""
    global _remaining
    if name != _point:
        return
    _remaining -= 1
    if _remaining <= 0:
        os.kill(os.getpid(), signal.SIGKILL)
