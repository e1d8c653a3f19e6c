"""Which Triton kernels a call launched, seen at the launch itself: the route a call took, observed rather than
predicted.

A Triton kernel launched as ``kernel[grid](...)`` goes through ``JITFunction.run`` when compiled for a GPU and through
``InterpretedFunction.run`` under Triton's interpreter (an autotuned or heuristics-wrapped kernel reaches the same
method). :func:`observe` wraps both methods while its block runs and records the name of each kernel launched (a
``warmup`` compile launches nothing and is not recorded); :func:`taken` reads the route from that record: ``"triton"``
when the call launched a Triton kernel, ``"fallback"`` when it launched none. The generated boundary tests
(:func:`fastpath_lib.boundary.check_point`) and the bench's dispatched row (:mod:`fastpath_lib.bench.opbench`) compare
that route with the predicate's, so a dispatch that drifts from its predicate fails there.

>>> import torch
>>> from fastpath_lib import launches
>>> with launches.observe() as seen:
...     _ = torch.ones(3) + 1   # torch's own ops launch no Triton kernel
>>> list(seen), launches.taken(seen)
([], 'fallback')
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from fastpath_lib import runtime

__all__ = ["observe", "taken", "observable", "mismatch"]

_lock = threading.Lock()
_active: list[list[str]] = []
_saved: dict = {}


def observable() -> bool:
    """Whether a Triton kernel can run in this process (a CUDA device, or Triton's interpreter on), so that a call's
    launches say which route it took."""
    return runtime.interpreter_enabled() or runtime.cuda_available()


def _owners() -> list[type]:
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    return [JITFunction, InterpretedFunction]


def _hooked(original):
    def run(self, *args, grid, warmup, **kwargs):
        if not warmup:
            name = getattr(getattr(self, "fn", None), "__name__", None) or type(self).__name__
            with _lock:
                for seen in _active:
                    seen.append(name)
        return original(self, *args, grid=grid, warmup=warmup, **kwargs)

    return run


@contextlib.contextmanager
def observe() -> Iterator[list[str]]:
    """Record the Triton kernels launched inside the block, by name, in launch order (blocks nest; each sees the
    launches inside it). The launch methods are restored when the outermost block ends, also on error."""
    seen: list[str] = []
    with _lock:
        if not _active:
            for owner in _owners():
                _saved[owner] = owner.__dict__["run"]
                owner.run = _hooked(_saved[owner])
        _active.append(seen)
    try:
        yield seen
    finally:
        with _lock:
            _active.remove(seen)
            if not _active:
                for owner, original in _saved.items():
                    owner.run = original
                _saved.clear()


def taken(seen: list[str]) -> str:
    """The route a call took, read from the kernels it launched (:func:`observe`)."""
    return "triton" if seen else "fallback"


def mismatch(predicted: str, seen: list[str]) -> str | None:
    """Why a call whose predicate decides ``predicted`` did not take that route (``None``: it did), naming what it
    launched."""
    if taken(seen) == predicted:
        return None
    did = (f"launched {', '.join(dict.fromkeys(seen))}: it took the Triton route" if seen
           else "launched no Triton kernel: it took the fallback")
    return f"the predicate says {predicted}, the call {did}"
