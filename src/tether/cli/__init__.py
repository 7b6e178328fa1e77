"""The ``tether`` command line (``pip install 'tether[cli]'``, or ``pip install -e '.[cli]'`` in a checkout).

``tether run``, ``chat``, ``runs``, ``show``, ``approve``, ``deny``, ``retry``,
``skip``, ``resume`` and ``cancel``; see ``docs/cli.md`` or ``tether --help``.
The commands live in :mod:`tether.cli._commands`; this module only checks that
the extra is installed, so that a missing one is a one-line error.

>>> from tether.cli import main
>>> main(["runs", "--status", "paused"])  # doctest: +SKIP
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``) and exit."""
    try:
        import click  # noqa: F401
        import rich  # noqa: F401
    except ImportError as exc:
        sys.stderr.write(
            f"error: the tether command line needs tether[cli] ({exc.name!r} is missing): "
            "pip install 'tether[cli]' (in a checkout: pip install -e '.[cli]')\n"
        )
        sys.exit(2)
    from ._commands import cli

    cli.main(args=list(argv) if argv is not None else None, prog_name="tether")
