"""Progress on long evaluations: a bar on stderr, only when someone is watching.

:func:`make_progress` gives ``rich``'s bar when the ``cli`` extra is installed,
a plain one-line bar otherwise, and a silent one when stderr is not a terminal
(logs and CI stay clean) or when asked.

>>> bar = make_progress(10, "demo", enabled=False)
>>> bar.advance(None); bar.close()
"""

from __future__ import annotations

import sys
from typing import IO, Any, Protocol, runtime_checkable


@runtime_checkable
class Progress(Protocol):
    """Told about each finished trial, then closed."""

    def advance(self, result: Any) -> None: ...

    def close(self) -> None: ...


class Silent:
    """Shows nothing."""

    def advance(self, result: Any) -> None:
        pass

    def close(self) -> None:
        pass


class PlainBar:
    """``name [#####.....] 12/40 passed 10`` redrawn in place with a carriage return."""

    def __init__(self, total: int, name: str, stream: IO[str], width: int = 30) -> None:
        self.total, self.name, self.stream, self.width = total, name, stream, width
        self.done = self.passed = 0
        self._draw()

    def advance(self, result: Any) -> None:
        self.done += 1
        self.passed += bool(getattr(result, "passed", False))
        self._draw()

    def _draw(self) -> None:
        filled = self.width * self.done // max(self.total, 1)
        bar = "#" * filled + "." * (self.width - filled)
        self.stream.write(f"\r{self.name} [{bar}] {self.done}/{self.total} passed {self.passed}")
        self.stream.flush()

    def close(self) -> None:
        self.stream.write("\n")
        self.stream.flush()


class RichBar:
    """The same, drawn by ``rich`` (the ``cli`` extra)."""

    def __init__(self, total: int, name: str, stream: IO[str]) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("passed {task.fields[passed]}"),
            TimeElapsedColumn(),
            console=Console(file=stream),
            transient=False,
        )
        self._task = self._progress.add_task(name, total=total, passed=0)
        self.passed = 0
        self._progress.start()

    def advance(self, result: Any) -> None:
        self.passed += bool(getattr(result, "passed", False))
        self._progress.update(self._task, advance=1, passed=self.passed)

    def close(self) -> None:
        self._progress.stop()


def make_progress(total: int, name: str, *, enabled: bool | None = None, stream: IO[str] | None = None) -> Progress:
    """A bar for ``total`` trials: shown when ``enabled``, or when None and ``stream`` is a terminal."""
    stream = stream or sys.stderr
    if enabled is False or (enabled is None and not _is_tty(stream)):
        return Silent()
    try:
        import rich  # noqa: F401
    except ImportError:
        return PlainBar(total, name, stream)
    return RichBar(total, name, stream)


def _is_tty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
