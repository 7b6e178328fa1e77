"""Brains you train yourself: a small neural policy learned from recorded runs.

Swap the brain, keep the body: :class:`TrainedPolicy` implements the same
``async decide(context, tools) -> Message`` as a language model, so an
:class:`~tether.Agent` runs it unchanged.

* :func:`examples_from_store` reads the decisions recorded in any run store
  (what each brain saw, and the reply it gave).
* :func:`train` fits two tiny networks on CPU in seconds (``tether[brains]``:
  scikit-learn to train, numpy to run): one picks the next move (which tools,
  or which answer), one points at the spans of the notes to copy into its
  arguments.
* :meth:`TrainedPolicy.save` / :meth:`TrainedPolicy.load`: one ``.npz`` file,
  arrays and JSON, no pickle.

>>> from tether.brains import TrainedPolicy, examples_from_store, train
>>> brain = train(await examples_from_store(store))            # doctest: +SKIP
>>> brain.save("refund_brain.npz")                              # doctest: +SKIP
>>> Agent(TrainedPolicy.load("refund_brain.npz"), tools)        # doctest: +SKIP
"""

from __future__ import annotations

from .policy import Example, TrainedPolicy, train
from .records import examples_from_events, examples_from_store

__all__ = ["Example", "examples_from_events", "examples_from_store", "train", "TrainedPolicy"]
