"""The kit's one win/neutral/loss rule (:func:`outcome`) and the noise band it reads (:func:`noise_band`), alone.

A module of its own so that what an exercise hands out of it is all it holds: the grader's sandbox stages a module
whole (:mod:`fastpath_lib.grading.engine.handout`), and exercise 13 hands out these two while it forbids the kit's
reading of a results table (:func:`fastpath_lib.bench.analysis.classify` and its tables), which builds on them.
:mod:`fastpath_lib.bench.analysis` re-exports both.
"""

from __future__ import annotations

import math

from fastpath_lib.bench.schema import LOSS, NEUTRAL, WIN

__all__ = ["noise_band", "outcome", "isnan"]


def isnan(v) -> bool:
    """``v`` is no number: ``None``, NaN or anything ``float`` refuses."""
    try:
        return v is None or math.isnan(float(v))
    except (TypeError, ValueError):
        return True


def noise_band(q20: float, median: float, q80: float, base_q20: float, base_median: float, base_q80: float) -> float:
    """The relative noise band for one comparison: the larger 20-80 % spread of the two sample sets.

    >>> noise_band(9, 10, 11, 18, 20, 21)
    0.2
    """
    spreads = [(hi - lo) / med for lo, med, hi in ((q20, median, q80), (base_q20, base_median, base_q80))
               if med and not any(map(isnan, (lo, med, hi)))]
    return max(spreads) if spreads else math.nan


def outcome(ratio: float, band: float) -> str:
    """``"win"`` / ``"loss"`` / ``"neutral"`` for a time ratio (candidate / baseline) and a relative noise band.

    >>> outcome(0.8, 0.1), outcome(1.05, 0.1), outcome(1.3, 0.1)
    ('win', 'neutral', 'loss')
    """
    return WIN if ratio < 1 - band else LOSS if ratio > 1 + band else NEUTRAL
