"""The kit's outcome words and its one win/neutral/loss rule, as the checks use them (both from the benchmark).

>>> OUTCOMES
('win', 'neutral', 'loss', 'fallback')
>>> outcome(0.8, 0.1)
'win'
"""

from fastpath_lib.bench.analysis import outcome
from fastpath_lib.bench.matrix import OUTCOMES

__all__ = ["OUTCOMES", "outcome"]
