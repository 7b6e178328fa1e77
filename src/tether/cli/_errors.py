"""The command line's own error: what stops a command before it runs (exit status 2)."""

from __future__ import annotations

from ..exceptions import UserError


class ConfigError(UserError):
    """The command line is not configured well enough to run (exit status 2)."""
