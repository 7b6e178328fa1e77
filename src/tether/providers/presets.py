"""Named OpenAI-compatible endpoints: where each lives, where its key is, and what its wire accepts.

A :class:`Preset` is data: the base URL, the environment variable that holds the
key (and whether the endpoint refuses requests without one), and the quirks
that differ between vendors who all say "OpenAI-compatible":

* ``stream_usage``: the server accepts ``stream_options: {"include_usage": true}``
  (without it, a server that sends usage on its last chunk anyway is read all the same);
* ``parallel_tool_calls``: the server accepts the ``parallel_tool_calls`` field
  (asking for it elsewhere is a :class:`~tether.exceptions.UserError`);
* ``send_reasoning``: the reasoning of a turn that called tools goes back as
  ``reasoning_content`` on that assistant message. DeepSeek's thinking mode
  requires it (a 400 otherwise) and ignores reasoning of turns without tool
  calls, which is not sent; Groq answers 400 to any reasoning field sent back,
  so every other preset sends none.

Reasoning is *read* from every endpoint alike (``reasoning_content`` or
``reasoning``, whole or streamed), and so are cached-token counts
(``prompt_tokens_details.cached_tokens``, DeepSeek's ``prompt_cache_hit_tokens``).

>>> OpenAICompatible("llama-3.3-70b-versatile", preset="groq")          # doctest: +SKIP
>>> split_model("ollama:llama3.1:8b")
(Preset('ollama', base_url='http://127.0.0.1:11434/v1'), 'llama3.1:8b')
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ..exceptions import UserError

__all__ = ["PRESETS", "Preset", "preset", "split_model"]


@dataclass(frozen=True, slots=True)
class Preset:
    """One named OpenAI-compatible endpoint and its quirks (see the module docstring).

    >>> PRESETS["deepseek"].send_reasoning
    True
    """

    name: str
    label: str
    base_url: str
    key_env: str = ""
    needs_key: bool = True  # the endpoint refuses requests without a key
    stream_usage: bool = True
    parallel_tool_calls: bool = True
    send_reasoning: bool = False

    def __repr__(self) -> str:
        return f"Preset({self.name!r}, base_url={self.base_url!r})"


# Sources: each vendor's API reference and guides (DeepSeek "Thinking Mode" and
# "Create Chat Completion"; Groq "Reasoning" and "Prompt Caching"; Together
# "Reasoning"; OpenRouter "API reference" and "Reasoning tokens"; Ollama "OpenAI
# compatibility"; vLLM "OpenAI-compatible server" and "Reasoning outputs").
_ALL = (
    Preset("openai", "OpenAI", "https://api.openai.com/v1", "OPENAI_API_KEY"),
    # No parallel_tool_calls in DeepSeek's reference; reasoning goes back on tool-call turns.
    Preset(
        "deepseek",
        "DeepSeek",
        "https://api.deepseek.com",
        "DEEPSEEK_API_KEY",
        parallel_tool_calls=False,
        send_reasoning=True,
    ),
    # Reasoning arrives as `reasoning` (reasoning_format "parsed"); sending it back is a 400.
    # Streamed usage also arrives as x_groq.usage on the last chunk.
    Preset("groq", "Groq", "https://api.groq.com/openai/v1", "GROQ_API_KEY"),
    # Together puts usage on its last streamed chunk unasked; stream_options is not in its reference.
    Preset("together", "Together", "https://api.together.xyz/v1", "TOGETHER_API_KEY", stream_usage=False),
    # OpenRouter sends usage on the last chunk and keep-alive comments; reasoning as `reasoning`.
    Preset("openrouter", "OpenRouter", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
    # Ollama's OpenAI layer lists stream_options but not parallel_tool_calls; it needs no key.
    Preset("ollama", "Ollama", "http://127.0.0.1:11434/v1", needs_key=False, parallel_tool_calls=False),
    # vLLM reads a key only if its server was started with --api-key (or VLLM_API_KEY).
    Preset("vllm", "vLLM", "http://127.0.0.1:8000/v1", "VLLM_API_KEY", needs_key=False),
)
PRESETS: Mapping[str, Preset] = MappingProxyType({p.name: p for p in _ALL})
"""Every preset by name: ``openai``, ``deepseek``, ``groq``, ``together``, ``openrouter``, ``ollama``, ``vllm``."""


def preset(name: str | Preset) -> Preset:
    """The preset called ``name`` (a Preset is returned as is), or a UserError naming them all.

    >>> preset("groq").base_url
    'https://api.groq.com/openai/v1'
    """
    if isinstance(name, Preset):
        return name
    found = PRESETS.get(name)
    if found is None:
        raise UserError(f"unknown provider preset {name!r}; known: {', '.join(PRESETS)}")
    return found


def split_model(text: str) -> tuple[Preset, str] | None:
    """``"groq:NAME"`` as ``(the groq preset, "NAME")``; None when the prefix names no preset.

    Only the first colon splits, so Ollama names keep theirs (``ollama:llama3.1:8b``).

    >>> split_model("llama3.1:8b") is None
    True
    """
    prefix, colon, rest = text.partition(":")
    found = PRESETS.get(prefix) if colon and rest else None
    return (found, rest) if found is not None else None
