"""Every exception tether raises, in one tree.

Errors the *model* makes (an unknown tool, bad arguments, a tool that raised)
are not exceptions: they become notes in the context that the model reads and
fixes. What is raised here is what the *developer* or the *environment* got
wrong::

    TetherError
    ├── UserError                 misuse of the API or bad configuration
    │   └── ScriptExhausted       a ScriptedModel was asked for more replies than it has
    ├── ModelRequestsBlocked      a real model call was attempted while blocked (tests)
    ├── ProviderError             a model provider failed (status_code, body, retryable)
    ├── StateError                a RunState or decision cannot be used
    │   ├── StateTampered         signature or hash mismatch: refused, nothing ran
    │   └── StateIncompatible     unknown schema version or changed tool definitions
    ├── StoreError                the run store failed or refused a write
    │   └── LeaseConflict         another worker owns the run
    └── SandboxUnavailable        no OS sandbox could be set up (and unsafe mode is off)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import ModuleType

__all__ = [
    "LeaseConflict",
    "ModelRequestsBlocked",
    "ProviderError",
    "SandboxUnavailable",
    "ScriptExhausted",
    "StateError",
    "StateIncompatible",
    "StateTampered",
    "StoreError",
    "TetherError",
    "UserError",
    "import_extra",
    "install_hint",
]


class TetherError(Exception):
    """Base class of every exception raised by tether."""


class UserError(TetherError):
    """The API was used in a way it does not support, or configuration is wrong."""


class ScriptExhausted(UserError):
    """A ScriptedModel was asked for a reply after its last one."""


class ModelRequestsBlocked(TetherError):
    """A real network model request was made while model requests are blocked."""


class ProviderError(TetherError):
    """A model provider failed.

    ``status_code`` and ``body`` are the HTTP status and response text when there
    was a response; ``retryable`` says whether trying again may help.
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        body: str | None = None,
        retryable: bool = False,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.body = body
        self.retryable = retryable


class StateError(TetherError):
    """A RunState or a decision cannot be used."""


class StateTampered(StateError):
    """A state or decision failed its integrity check; nothing was executed."""


class StateIncompatible(StateError):
    """A state comes from an unknown schema version or different tool definitions."""


class StoreError(TetherError):
    """The run store failed or refused an operation."""


class LeaseConflict(StoreError):
    """Another worker holds the run's lease; this one must not write.

    ``holder`` names the lease's owner when a live lease is the reason.
    """

    def __init__(self, message: str, *, holder: str | None = None) -> None:
        super().__init__(message)
        self.holder = holder


class SandboxUnavailable(TetherError):
    """No OS sandbox could be set up and unsandboxed execution was not allowed."""


def install_hint(extra: str) -> str:
    """How to install one of tether's extras, from PyPI or from a checkout.

    >>> install_hint("postgres")
    "pip install 'tether[postgres]' (in a checkout: pip install -e '.[postgres]')"
    """
    return f"pip install 'tether[{extra}]' (in a checkout: pip install -e '.[{extra}]')"


def import_extra(module: str, *, extra: str, needs: str) -> ModuleType:
    """Import ``module`` of an optional extra, or raise a UserError saying ``needs`` and how to install it.

    >>> try:
    ...     import_extra("no_such_module_here", extra="postgres", needs="PostgresStore needs psycopg 3")
    ... except UserError as exc:
    ...     print(str(exc).split(" (in a checkout")[0])
    PostgresStore needs psycopg 3: pip install 'tether[postgres]'
    """
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise UserError(f"{needs}: {install_hint(extra)}") from exc
