"""Which route each call took, and a switch that forces the fallback.

>>> import torch, fastpath_lib
>>> with fastpath_lib.record_routes() as routes, fastpath_lib.force_fallback():
...     _ = fastpath_lib.rms_norm(torch.randn(16, 64), [64])
>>> routes
Counter({'fallback': 1})
"""

from __future__ import annotations

import collections
import contextlib
import threading
from collections.abc import Iterator

from fastpath_lib.rmsnorm import predicate

__all__ = ["record_routes", "force_fallback", "record"]

_lock = threading.Lock()
_recorders: list[tuple[str, collections.Counter]] = []


def record(phase: str, route: str) -> None:
    """Called by the op on every call: counts ``route`` in every active recorder of ``phase``."""
    if _recorders:
        with _lock:
            for p, counter in _recorders:
                if p == phase:
                    counter[route] += 1


@contextlib.contextmanager
def record_routes(phase: str = "forward") -> Iterator[collections.Counter]:
    """Count the routes taken by ``rms_norm`` calls inside the block, keyed by ``Decision.route``.

    Args:
        phase: ``"forward"`` (calls of the op) or ``"backward"`` (its backward passes).

    Yields:
        a :class:`collections.Counter`, e.g. ``Counter({'triton': 3, 'fallback': 1})``. Recorders nest.
    """
    if phase not in ("forward", "backward"):
        raise ValueError(f"phase must be 'forward' or 'backward', got {phase!r}")
    entry = (phase, collections.Counter())
    with _lock:
        _recorders.append(entry)
    try:
        yield entry[1]
    finally:
        with _lock:
            _recorders.remove(entry)


@contextlib.contextmanager
def force_fallback(enabled: bool = True) -> Iterator[None]:
    """Force every ``rms_norm`` call inside the block onto the fallback (``enabled=False`` lifts a force).

    The environment variable ``FASTPATH_FORCE_FALLBACK=1`` forces it process-wide. The previous state is restored on
    exit, also when the block raises.
    """
    prev = predicate.set_forced(enabled)
    try:
        yield
    finally:
        predicate.set_forced(prev)
