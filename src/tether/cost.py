"""Cost: what the tokens of a run cost, from a table of list prices.

A :class:`Price` says what a model charges per million tokens: fresh input,
output, cached input read back (a prompt-cache hit) and input written to the
cache. :data:`PRICES` holds the list prices of a handful of well-known models,
copied by hand on :data:`PRICES_AS_OF`; vendors change their prices, so check
yours and override them (``Agent(prices={...})`` is looked up before the
table). Prices are in US dollars.

:func:`cost_of` prices one :class:`~tether.messages.Usage`; :func:`total_cost`
prices a run's usage per model (``Journal.usage_by_model``), so a run whose
replies came from several models is priced model by model, and the usage of
several runs (a run tree) adds up before it is priced.

Cached tokens are counted inside ``input_tokens`` (as OpenAI reports them):
``Usage.cache_read_tokens`` and ``Usage.cache_write_tokens``, when a provider
reports them, move that many input tokens to their own price.

>>> cost_of(Usage(input_tokens=1_000_000, output_tokens=100_000), "gpt-4o")
3.5
>>> cost_of(Usage(input_tokens=10), "a-model-nobody-priced") is None
True
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from .messages import Usage

__all__ = ["PRICES", "PRICES_AS_OF", "Price", "cost_of", "price_of", "total_cost", "unpriced_models"]

PRICES_AS_OF = "2026-12-01"
"""The day the shipped list prices were copied by hand; they may be out of date."""


@dataclass(frozen=True, slots=True)
class Price:
    """What a model charges, in US dollars per million tokens.

    ``cached_input`` (a prompt-cache hit) and ``cache_write`` (input written
    to the cache) default to the plain ``input`` price when the vendor has no
    separate one.

    >>> Price(input=3.0, output=15.0, cached_input=0.3).cost(Usage(input_tokens=2_000_000, output_tokens=0))
    6.0
    """

    input: float
    output: float
    cached_input: float | None = None
    cache_write: float | None = None

    def cost(self, usage: Usage) -> float:
        """The cost of ``usage`` at this price."""
        read, written = usage.cache_read_tokens, usage.cache_write_tokens  # 0 unless the provider says
        fresh = max(usage.input_tokens - read - written, 0)
        dollars = (
            fresh * self.input
            + read * _or(self.cached_input, self.input)
            + written * _or(self.cache_write, self.input)
            + usage.output_tokens * self.output
        )
        return dollars / 1_000_000


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


PRICES: Mapping[str, Price] = MappingProxyType(
    {
        # OpenAI (cached input is a prompt-cache hit; writing the cache costs nothing extra)
        "gpt-4o": Price(2.50, 10.00, cached_input=1.25),
        "gpt-4o-mini": Price(0.15, 0.60, cached_input=0.075),
        "gpt-4.1": Price(2.00, 8.00, cached_input=0.50),
        "gpt-4.1-mini": Price(0.40, 1.60, cached_input=0.10),
        "gpt-5": Price(1.25, 10.00, cached_input=0.125),
        "gpt-5-mini": Price(0.25, 2.00, cached_input=0.025),
        "o4-mini": Price(1.10, 4.40, cached_input=0.275),
        # Anthropic (cache_write is the 5-minute cache write)
        "claude-opus-4-1": Price(15.00, 75.00, cached_input=1.50, cache_write=18.75),
        "claude-sonnet-4-5": Price(3.00, 15.00, cached_input=0.30, cache_write=3.75),
        "claude-sonnet-4": Price(3.00, 15.00, cached_input=0.30, cache_write=3.75),
        "claude-haiku-4-5": Price(1.00, 5.00, cached_input=0.10, cache_write=1.25),
        "claude-3-5-haiku": Price(0.80, 4.00, cached_input=0.08, cache_write=1.00),
        # DeepSeek (cached input is a cache hit)
        "deepseek-chat": Price(0.28, 0.42, cached_input=0.028),
        "deepseek-reasoner": Price(0.28, 0.42, cached_input=0.028),
        # Groq
        "llama-3.3-70b-versatile": Price(0.59, 0.79),
        "llama-3.1-8b-instant": Price(0.05, 0.08),
    }
)
"""List prices of well-known models as of :data:`PRICES_AS_OF` (USD per million tokens)."""

_DATED = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2}|latest)$")  # a snapshot's suffix: -20250929, -2024-08-06


def price_of(model: str | None, prices: Mapping[str, Price] | None = None) -> Price | None:
    """The price of ``model``: from ``prices`` first, then :data:`PRICES`; a dated snapshot
    name (``claude-sonnet-4-5-20250929``) falls back to its undated name.

    >>> price_of("gpt-4o-2024-08-06").output
    10.0
    >>> price_of("my-model", {"my-model": Price(1.0, 2.0)}).input
    1.0
    """
    if model is None:
        return None
    for name in (model, _DATED.sub("", model)):
        found = (prices or {}).get(name) or PRICES.get(name)
        if found is not None:
            return found
    return None


def cost_of(usage: Usage, model: str | None, prices: Mapping[str, Price] | None = None) -> float | None:
    """What ``usage`` by ``model`` costs in US dollars, or None when the model has no price."""
    price = price_of(model, prices)
    return None if price is None else price.cost(usage)


def total_cost(
    by_model: Mapping[str, Usage], prices: Mapping[str, Price] | None = None, *, default_model: str = ""
) -> float | None:
    """The cost of usage kept per model; usage under ``""`` (replies whose model is not
    recorded) is priced as ``default_model``. None when any of the models has no price.

    >>> total_cost({"gpt-4o": Usage(1_000_000, 0), "": Usage(0, 1_000_000)}, default_model="gpt-4o-mini")
    3.1
    """
    total = 0.0
    for model, usage in by_model.items():
        if _spent(usage):
            cost = cost_of(usage, model or default_model, prices)
            if cost is None:
                return None
            total += cost
    return total


def unpriced_models(
    by_model: Mapping[str, Usage], prices: Mapping[str, Price] | None = None, *, default_model: str = ""
) -> list[str]:
    """The models that spent tokens and have no price (``""``: a brain with no model name).

    >>> unpriced_models({"gpt-4o": Usage(5, 1), "house-model": Usage(5, 1), "idle": Usage()})
    ['house-model']
    """
    names = [model or default_model for model, usage in by_model.items() if _spent(usage)]
    return [name for name in dict.fromkeys(names) if price_of(name, prices) is None]


def _spent(usage: Usage) -> bool:
    return usage.input_tokens > 0 or usage.output_tokens > 0
