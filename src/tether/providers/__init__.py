"""Model providers: LLMs as tether policies.

* :class:`OpenAICompatible`: any chat-completions endpoint (OpenAI, DeepSeek,
  Groq, Together, OpenRouter, Ollama, vLLM, llama.cpp server...).
* :class:`Anthropic`: Claude through the native Messages API.
* :class:`LocalModel`: a small GGUF model in-process, offline (``tether[local]``).
* :class:`ConstrainedOpenAI`: JSON-Schema-constrained tool calls over any
  OpenAI-compatible server that supports ``response_format`` (small models).
* :class:`Fallback`: a primary policy and its backups, tried in turn after a
  provider failure.

:class:`HTTPOptions` holds the connection settings the HTTP providers share;
a :class:`Preset` names an OpenAI-compatible endpoint tether knows
(``OpenAICompatible(name, preset="groq")``; all of them are in
:data:`tether.providers.presets.PRESETS`).

Both stream, retry transient faults with backoff, and raise
:class:`~tether.exceptions.ProviderError` when retries run out (the agent then
ends the run as ``failed``, resumable). Names are imported on first use, so
``import tether.providers`` stays cheap.

>>> from tether import Agent
>>> from tether.providers import OpenAICompatible
>>> model = OpenAICompatible("llama3.2", base_url="http://127.0.0.1:11434/v1")
>>> agent = Agent(model, instructions="Answer in one line.")
"""

from __future__ import annotations

import importlib as _importlib
import typing as _typing

if _typing.TYPE_CHECKING:
    from .anthropic import Anthropic
    from .constrained import ConstrainedOpenAI
    from .fallback import Fallback
    from .local import LocalModel
    from .openai_compat import OpenAICompatible
    from .options import HTTPOptions
    from .presets import Preset

__all__ = [
    "Anthropic",
    "ConstrainedOpenAI",
    "Fallback",
    "HTTPOptions",
    "LocalModel",
    "OpenAICompatible",
    "Preset",
]

_HOMES = {
    "Anthropic": ".anthropic",
    "ConstrainedOpenAI": ".constrained",
    "Fallback": ".fallback",
    "HTTPOptions": ".options",
    "LocalModel": ".local",
    "OpenAICompatible": ".openai_compat",
    "Preset": ".presets",
}


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_importlib.import_module(home, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return list(__all__)


del annotations  # the __future__ import binds a name; the namespace holds only the public API
