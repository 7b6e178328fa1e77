"""A small multi-layer perceptron: trained with scikit-learn, run and stored with numpy alone.

Training uses ``sklearn.neural_network.MLPClassifier`` (ReLU hidden layers,
Adam, early stopping off: the data sets are tiny). The fitted weights are
copied out into plain arrays, so running the network needs only numpy, and a
saved brain is arrays plus JSON, never a pickle.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..exceptions import UserError, import_extra, install_hint

if TYPE_CHECKING:
    import numpy as np

    from ._encode import Row

INSTALL = install_hint("brains")


def numpy() -> Any:
    """numpy, or a UserError naming the extra."""
    return import_extra("numpy", extra="brains", needs="a trained brain needs numpy")


class MLP:
    """Weights and biases of a ReLU network; ``out`` is ``softmax`` (classes) or ``logistic`` (yes/no)."""

    def __init__(self, weights: Sequence[np.ndarray], biases: Sequence[np.ndarray], out: str) -> None:
        self.weights, self.biases, self.out = list(weights), list(biases), out

    def forward(self, rows: Sequence[Row]) -> np.ndarray:
        """Output per row: class probabilities (softmax) or the probability of yes (logistic)."""
        np = numpy()
        first = self.weights[0]
        h = np.tile(self.biases[0], (len(rows), 1))
        for n, row in enumerate(rows):
            if row:
                idx = np.fromiter(row.keys(), dtype=np.int64)
                val = np.fromiter(row.values(), dtype=np.float64)
                h[n] += val @ first[idx]
        for w, b in zip(self.weights[1:], self.biases[1:], strict=True):
            h = np.maximum(h, 0.0) @ w + b
        if self.out == "logistic":
            return 1.0 / (1.0 + np.exp(-h[:, 0]))  # type: ignore[no-any-return]
        h = h - h.max(axis=1, keepdims=True)
        e = np.exp(h)
        return e / e.sum(axis=1, keepdims=True)  # type: ignore[no-any-return]

    def arrays(self, prefix: str) -> dict[str, np.ndarray]:
        """The weights as named arrays (for ``numpy.savez``)."""
        out = {f"{prefix}.w{i}": w for i, w in enumerate(self.weights)}
        out |= {f"{prefix}.b{i}": b for i, b in enumerate(self.biases)}
        return out

    @classmethod
    def from_arrays(cls, prefix: str, data: Any, layers: int, out: str) -> MLP:
        weights = [data[f"{prefix}.w{i}"] for i in range(layers)]
        biases = [data[f"{prefix}.b{i}"] for i in range(layers)]
        return cls(weights, biases, out)


def fit(rows: Sequence[Row], labels: Sequence[int], dim: int, *, hidden: int, seed: int, epochs: int) -> MLP:
    """Train a network on hashed rows; ``labels`` are class numbers (0/1 for a yes/no network)."""
    try:
        from scipy.sparse import csr_matrix  # type: ignore[import-untyped]
        from sklearn.exceptions import ConvergenceWarning  # type: ignore[import-untyped]
        from sklearn.neural_network import MLPClassifier  # type: ignore[import-untyped]
        from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]
    except ImportError as exc:
        raise UserError(f"training a brain needs scikit-learn ({exc.name!r} is missing): {INSTALL}") from None
    import warnings

    np = numpy()
    data = [v for r in rows for v in r.values()]
    cols = [i for r in rows for i in r]
    ptr = np.cumsum([0, *(len(r) for r in rows)])
    x = csr_matrix((data, cols, ptr), shape=(len(rows), dim))
    # Big batches: each Adam step updates every weight, so fewer steps is most of the speed.
    net = MLPClassifier(
        hidden_layer_sizes=(hidden,),
        random_state=seed,
        max_iter=epochs,
        alpha=1e-4,
        batch_size=min(512, len(rows)),
        learning_rate_init=1e-2,
    )
    # One BLAS thread: these matrices are small, and on a busy machine threads only wait on each other
    # (measured: 4x slower with the default pool on 2 shared cores).
    with warnings.catch_warnings(), threadpool_limits(1):
        warnings.simplefilter("ignore", ConvergenceWarning)  # a fixed budget of epochs is the point
        net.fit(x, np.asarray(labels))
    weights = [np.asarray(w, dtype=np.float32) for w in net.coefs_]
    biases = [np.asarray(b, dtype=np.float32) for b in net.intercepts_]
    if list(net.classes_) != sorted(set(labels)):
        raise UserError("the network's classes do not match its labels")  # cannot happen with sklearn's encoding
    return MLP(weights, biases, str(net.out_activation_))
