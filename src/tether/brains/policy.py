"""The trained brain: a move network and a pointer network, as one Policy.

:func:`train` reads recorded decisions (:class:`Example`: the notebook a brain
saw and the reply it gave), turns every reply into a template
(:mod:`~tether.brains._moves`) and fits two small networks:

* the **move network** reads a hashed bag of the recent notes and picks a
  template: which tools to call (several in one reply, if that is what was
  recorded) or which answer to give;
* the **pointer network** scores each candidate span of the notes for each
  slot of that template (``get_weather.city#0``, the first answer value...),
  and the best one is copied in, converted to the type the tool's schema asks.

:class:`TrainedPolicy` implements ``async decide(context, tools) -> Message``,
so it drives :class:`~tether.Agent` like any other brain. It saves to one
``.npz`` file: arrays and a JSON header, loaded without pickle.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..context import Context
from ..exceptions import UserError
from ..messages import Message
from ..tools import Tool
from . import _moves
from ._encode import context_features, hashed, slot_rows
from ._mlp import MLP, fit, numpy
from ._npz import MAX_BRAIN_BYTES as MAX_BRAIN_BYTES  # the cap, named where brains are loaded
from ._npz import load_arrays
from ._text import Candidate, candidates

FORMAT = "tether-trained-brain"
VERSION = 1
MOVE_DIM, SLOT_DIM = 1 << 12, 1 << 12


@dataclass(frozen=True, slots=True)
class Example:
    """One recorded decision: the notebook the brain saw, and the reply it gave."""

    context: Context
    reply: Message


class TrainedPolicy:
    """A brain trained on recorded runs (see the module docstring).

    >>> brain = TrainedPolicy.load("refund_brain.npz")        # doctest: +SKIP
    >>> Agent(brain, [look_up_order, check_policy]).run_sync("Where is A1234?")  # doctest: +SKIP
    """

    def __init__(
        self,
        templates: Sequence[_moves.Template],
        move: MLP | None,
        pointer: MLP | None,
        defaults: dict[str, str],
        info: dict[str, Any] | None = None,
    ) -> None:
        self.templates = list(templates)
        self.move, self.pointer, self.defaults = move, pointer, defaults
        self.info = dict(info or {})

    def __repr__(self) -> str:
        return f"TrainedPolicy({len(self.templates)} moves, trained on {self.info.get('examples', '?')} examples)"

    async def decide(self, context: Context, tools: Sequence[Tool]) -> Message:
        """Pick the likeliest move the offered tools allow, and fill its slots from the notes."""
        cands = candidates(context)
        template = self.templates[self._choose(context, tools)]
        return _moves.fill(template, cands, tools, self._pick, f"call_{len(context)}")

    def _choose(self, context: Context, tools: Sequence[Tool]) -> int:
        names = {t.name for t in tools}
        allowed = [i for i, t in enumerate(self.templates) if _moves.uses_tools(t) <= names]
        if not allowed:
            raise UserError("none of the trained brain's moves fits the offered tools")
        if self.move is None:
            return allowed[0]
        row = hashed(context_features(context), MOVE_DIM)
        probs = self.move.forward([row])[0]
        return max(allowed, key=lambda i: float(probs[i]))

    def _pick(self, slot: str, cands: list[Candidate]) -> Candidate | None:
        if not cands:
            default = self.defaults.get(slot)
            return None if default is None else Candidate(default, "default", 0, "token", "^", "$", False)
        if self.pointer is None:
            return cands[0]
        scores = self.pointer.forward(slot_rows(slot, cands, SLOT_DIM))
        return cands[int(scores.argmax())]

    # -- files -------------------------------------------------------------------

    def save(self, path: str | Path) -> Path:
        """Write the brain to one ``.npz`` file (numpy arrays and a JSON header)."""
        np = numpy()
        header = {
            "format": FORMAT,
            "version": VERSION,
            "templates": self.templates,
            "defaults": self.defaults,
            "info": self.info,
            "move": None if self.move is None else {"layers": len(self.move.weights), "out": self.move.out},
            "pointer": None if self.pointer is None else {"layers": len(self.pointer.weights), "out": self.pointer.out},
        }
        arrays = {"header": np.array(json.dumps(header))}
        for name, net in (("move", self.move), ("pointer", self.pointer)):
            if net is not None:
                arrays |= net.arrays(name)
        path = Path(path)
        with path.open("wb") as f:
            np.savez_compressed(f, **arrays)
        return path

    @classmethod
    def load(cls, path: str | Path) -> TrainedPolicy:
        """A brain saved by :meth:`save` (refuses anything else, and never unpickles)."""
        data = load_arrays(path, numpy())
        try:
            header = json.loads(str(data["header"]))
        except (ValueError, KeyError) as exc:
            raise UserError(f"{str(path)!r} is not a saved tether brain: {exc}") from None
        if header.get("format") != FORMAT or header.get("version") != VERSION:
            raise UserError(f"{str(path)!r} is not a version-{VERSION} tether brain")
        nets = {}
        for name in ("move", "pointer"):
            spec = header.get(name)
            nets[name] = None if spec is None else MLP.from_arrays(name, data, spec["layers"], spec["out"])
        return cls(header["templates"], nets["move"], nets["pointer"], header["defaults"], header.get("info"))


def train(examples: Iterable[Example], *, hidden: int = 32, epochs: int = 60, seed: int = 0) -> TrainedPolicy:
    """Fit a :class:`TrainedPolicy` to recorded decisions (seconds on a CPU for hundreds of them).

    >>> brain = train(await examples_from_store(store))   # doctest: +SKIP
    """
    examples = list(examples)
    if not examples:
        raise UserError("train() needs at least one recorded decision")
    templates: dict[str, _moves.Template] = {}
    contents: dict[str, Counter[str]] = {}
    move_rows, move_labels, slot_data = [], [], []
    defaults: dict[str, Counter[str]] = {}
    for ex in examples:
        cands = candidates(ex.context)
        template, values = _moves.template_of(ex.reply, cands)
        k = _moves.key(template)
        templates.setdefault(k, template)
        contents.setdefault(k, Counter())[template.get("content", "")] += 1
        move_rows.append(hashed(context_features(ex.context), MOVE_DIM))
        move_labels.append(list(templates).index(k))
        for slot, value in values:
            defaults.setdefault(slot, Counter())[str(value)] += 1
            slot_data.append((slot, value, cands))
    for k, t in templates.items():
        if t["kind"] == "calls":
            t["content"] = contents[k].most_common(1)[0][0]
    move = (
        fit(move_rows, move_labels, MOVE_DIM, hidden=hidden, seed=seed, epochs=epochs) if len(templates) > 1 else None
    )
    pointer = _fit_pointer(slot_data, hidden=hidden, seed=seed, epochs=epochs)
    info = {"examples": len(examples), "moves": len(templates), "slots": len(slot_data)}
    best = {slot: c.most_common(1)[0][0] for slot, c in defaults.items()}
    return TrainedPolicy(list(templates.values()), move, pointer, best, info)


def _fit_pointer(slot_data: list[tuple[str, Any, list[Candidate]]], **kw: Any) -> MLP | None:
    from ._text import matches

    rows, labels = [], []
    for slot, value, cands in slot_data:
        rows += slot_rows(slot, cands, SLOT_DIM)
        labels += [int(matches(c.text, value)) for c in cands]
    if len(set(labels)) < 2:
        return None
    return fit(rows, labels, SLOT_DIM, **kw)
