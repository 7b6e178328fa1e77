"""Small statistics for reports: pass@k, mean, spread, percentiles (stdlib only)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def pass_at_k(n: int, c: int, k: int) -> float:
    """The chance that at least one of ``k`` trials drawn from ``n`` (``c`` correct) passes.

    The unbiased estimator of Chen et al. (2021): ``1 - C(n-c, k) / C(n, k)``.

    >>> round(pass_at_k(5, 1, 1), 6)
    0.2
    >>> pass_at_k(5, 1, 5)
    1.0
    """
    if k > n or n <= 0:
        raise ValueError(f"pass@{k} needs at least {k} trials, got {n}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def mean(values: Sequence[float]) -> float:
    """The mean (0.0 for no values)."""
    return statistics.fmean(values) if values else 0.0


def spread(values: Sequence[float]) -> float:
    """The sample standard deviation (0.0 for fewer than two values)."""
    return statistics.stdev(values) if len(values) > 1 else 0.0


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0 to 100), linearly interpolated; 0.0 for no values.

    >>> percentile([1.0, 2.0, 3.0, 4.0], 50)
    2.5
    """
    if not values:
        return 0.0
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    low, high = math.floor(pos), math.ceil(pos)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)
