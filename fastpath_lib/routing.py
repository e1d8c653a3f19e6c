"""The routing state: which route each call took, and the switch that forces the fallback.

Both live here, in one small object the dispatch reads without locks or environment lookups:
``FASTPATH_FORCE_FALLBACK=1`` is read once, when this module is imported.

>>> import torch, fastpath_lib
>>> with fastpath_lib.record_routes() as routes, fastpath_lib.force_fallback():
...     _ = fastpath_lib.rms_norm(torch.randn(16, 64), [64])
>>> routes
RouteCounter({'fallback': 1})
"""

from __future__ import annotations

import collections
import contextlib
import os
import threading
from collections.abc import Iterator

__all__ = ["FORCE_ENV", "RouteCounter", "state", "record_routes", "force_fallback", "record", "wants_reasons"]

FORCE_ENV = "FASTPATH_FORCE_FALLBACK"


class RouteCounter(collections.Counter):
    """Routes taken, e.g. ``RouteCounter({'triton': 3, 'fallback': 1})``.

    With ``record_routes(reasons=True)``, :attr:`reasons` counts the failed condition names of the fallback calls
    (computed only then: the reasons cost what :func:`fastpath_lib.explain` costs).
    """

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.reasons: collections.Counter = collections.Counter()


class _State:
    """The process-wide routing state: the force flag and the active recorders."""

    __slots__ = ("forced", "recorders", "reasons")

    def __init__(self) -> None:
        self.forced = os.environ.get(FORCE_ENV, "0").strip().lower() in ("1", "true", "yes", "on")
        self.recorders: list[tuple[str, RouteCounter, bool]] = []
        self.reasons = False  # some active recorder wants reasons


#: The one routing state of the process (``state.forced``, ``state.recorders``).
state = _State()
_lock = threading.Lock()


def record(phase: str, route: str, failed: list[str] | None = None) -> None:
    """Count ``route`` in every active recorder of ``phase`` (and the failed conditions, where reasons are wanted)."""
    with _lock:
        for p, counter, reasons in state.recorders:
            if p == phase:
                counter[route] += 1
                if reasons and failed:
                    counter.reasons.update(failed)


def wants_reasons(phase: str) -> bool:
    """Whether an active recorder of ``phase`` asked for reasons."""
    return state.reasons and any(p == phase and r for p, _, r in state.recorders)


@contextlib.contextmanager
def record_routes(phase: str = "forward", *, reasons: bool = False) -> Iterator[RouteCounter]:
    """Count the routes taken by ``rms_norm`` calls inside the block, keyed by ``Decision.route``.

    Args:
        phase: ``"forward"`` (calls of the op) or ``"backward"`` (its backward passes).
        reasons: also count, in ``counter.reasons``, the conditions each fallback call failed.

    Yields:
        a :class:`RouteCounter`, e.g. ``RouteCounter({'triton': 3, 'fallback': 1})``. Recorders nest.
    """
    if phase not in ("forward", "backward"):
        raise ValueError(f"phase must be 'forward' or 'backward', got {phase!r}")
    entry = (phase, RouteCounter(), bool(reasons))
    with _lock:
        state.recorders.append(entry)
        state.reasons = any(r for _, _, r in state.recorders)
    try:
        yield entry[1]
    finally:
        with _lock:
            state.recorders.remove(entry)
            state.reasons = any(r for _, _, r in state.recorders)


@contextlib.contextmanager
def force_fallback(enabled: bool = True) -> Iterator[None]:
    """Force every ``rms_norm`` call inside the block onto the fallback (``enabled=False`` lifts a force).

    ``FASTPATH_FORCE_FALLBACK=1`` in the environment (read at import) forces it process-wide. The previous state is
    restored on exit, also when the block raises.
    """
    prev, state.forced = state.forced, bool(enabled)
    try:
        yield
    finally:
        state.forced = prev
