"""The kit's outcome words, measurement labels and its one win/neutral/loss rule, as the checks use them.

The words and labels are owned by :mod:`fastpath_lib.bench.schema`, the rule by :mod:`fastpath_lib.bench.outcome`;
this module only passes them on, so a check names ``WIN`` or ``NOT_GPU`` and never types the word.

>>> OUTCOMES
('win', 'neutral', 'loss', 'fallback')
>>> outcome(0.8, 0.1) == WIN
True
"""

from fastpath_lib.bench.outcome import outcome
from fastpath_lib.bench.schema import FALLBACK, LOSS, NEUTRAL, NOT_GPU, OUTCOMES, TIMED_OUTCOMES, WIN

__all__ = ["OUTCOMES", "TIMED_OUTCOMES", "WIN", "NEUTRAL", "LOSS", "FALLBACK", "NOT_GPU", "outcome"]
