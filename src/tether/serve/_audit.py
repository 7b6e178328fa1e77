"""The audit log: who signed in, saw, decided, was refused, and what expired, as JSON lines.

One line per step in ``audit.jsonl`` in the server's home (mode 0600), each
written and flushed to disk before the step's answer goes out::

    {"at": 1767312000.5, "step": "decided", "who": "user:ana", "run_id": "r1",
     "call_id": "c1", "tool": "issue_refund", "verdict": "approve", "args_hash": "..."}

Steps: ``signed-in``, ``sign-in-refused``, ``signed-out``, ``saw`` (an item was
shown to a person; once per person and item while the server runs),
``approved`` (one approval of several a rule asks for), ``decided``,
``refused`` (403: the rules do not let this person decide it), ``escalated``
and ``expired``. Read it in the inbox (``/audit``), from the API
(``GET /api/audit``, JSON lines) or with ``tether audit export``.
The two-person rule counts its approvals from this log, so they survive a restart.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["Audit", "read_lines"]


class Audit:
    """Appends steps to the log file (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._seen: set[tuple[str, str, str]] = set()
        self._escalated: set[tuple[str, str]] | None = None  # (run, call), read from the log once
        self._approved: dict[tuple[str, str, str], list[str]] | None = None  # (run, call, hash) -> who, in order

    def write(self, step: str, who: str = "", **fields: Any) -> dict[str, Any]:
        entry = {"at": round(time.time(), 3), "step": step, "who": who, **{k: v for k, v in fields.items() if v}}
        line = json.dumps(entry, ensure_ascii=False, sort_keys=True, default=str) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, line.encode("utf-8", "replace"))
            os.fsync(fd)
        finally:
            os.close(fd)
        if step == "escalated" and self._escalated is not None:
            self._escalated.add((str(fields.get("run_id")), str(fields.get("call_id"))))
        if step == "approved" and self._approved is not None:
            self._index_approval(entry)
        return entry

    def _index_approval(self, e: dict[str, Any]) -> None:
        assert self._approved is not None
        people = self._approved.setdefault((str(e.get("run_id")), str(e.get("call_id")), str(e.get("args_hash"))), [])
        if e.get("who") not in people:
            people.append(str(e.get("who")))

    def saw(self, who: str, run_id: str, call_id: str, tool: str) -> None:
        """Log that ``who`` was shown an item (the first time this server shows it to them)."""
        key = (who, run_id, call_id)
        if key not in self._seen:
            self._seen.add(key)
            self.write("saw", who, run_id=run_id, call_id=call_id, tool=tool)

    def entries(self, *, since: float = 0.0, run_id: str = "") -> list[dict[str, Any]]:
        return [
            e for e in read_lines(self.path) if e.get("at", 0) >= since and (not run_id or e.get("run_id") == run_id)
        ]

    def approvals(self, run_id: str, call_id: str, args_hash: str) -> list[str]:
        """Who has approved this exact item so far (distinct, in order), under a several-approver rule."""
        if self._approved is None:
            self._approved = {}
            for e in read_lines(self.path):
                if e.get("step") == "approved":
                    self._index_approval(e)
        return list(self._approved.get((run_id, call_id, args_hash), []))

    def escalated(self, run_id: str, call_id: str) -> bool:
        """Whether this item was escalated (its second group may decide it from then on)."""
        if self._escalated is None:
            self._escalated = {
                (str(e.get("run_id")), str(e.get("call_id")))
                for e in read_lines(self.path)
                if e.get("step") == "escalated"
            }
        return (run_id, call_id) in self._escalated


def read_lines(path: Path) -> Iterator[dict[str, Any]]:
    """The log's entries, oldest first (a torn last line, from a crash mid-write, is skipped)."""
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if isinstance(entry, dict):
                    yield entry
    except FileNotFoundError:
        return
