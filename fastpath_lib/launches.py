"""Which Triton kernels a call launched, seen at the launch itself: the route a call took, observed rather than
predicted.

A Triton kernel launched as ``kernel[grid](...)`` goes through ``JITFunction.run`` when compiled for a GPU and through
``InterpretedFunction.run`` under Triton's interpreter (an autotuned or heuristics-wrapped kernel reaches the same
method). :func:`observe` wraps both methods while its block runs and records the name of each kernel launched (a
``warmup`` compile launches nothing and is not recorded); :func:`taken` reads the route from that record: ``"triton"``
when the call launched a Triton kernel, ``"fallback"`` when it launched none. The generated boundary tests
(:func:`fastpath_lib.boundary.check_point`) and the bench's dispatched row (:mod:`fastpath_lib.bench.opbench`) compare
that route with the predicate's, so a dispatch that drifts from its predicate fails there. Under the interpreter a
kernel's calls of other ``@triton.jit`` functions are Python calls (``InterpretedFunction.__call__``), and
:func:`observe` records those too (:attr:`Launched.calls`): :func:`converts_with_casts` reads from them whether a
launch converted with :mod:`fastpath_lib.triton_casts`.

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

__all__ = ["Launched", "observe", "taken", "observable", "mismatch", "declared_mismatch", "watch",
           "converts_with_casts"]

_lock = threading.Lock()
_active: list[Launched] = []
_saved: dict = {}
#: the module whose device functions convert bf16 as a GPU does under the interpreter too
CASTS_MODULE = "fastpath_lib.triton_casts"


class Launched(list):
    """The names of the Triton kernels a block launched, in launch order (a list), and in :attr:`calls` the device
    functions (``module.name``) those kernels called, as the interpreter runs them (empty when compiled for a GPU,
    where a device function is inlined)."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.calls: list[str] = []


def observable() -> bool:
    """Whether a Triton kernel can run in this process (a CUDA device, or Triton's interpreter on), so that a call's
    launches say which route it took."""
    return runtime.interpreter_enabled() or runtime.cuda_available()


def _owners() -> list[type]:
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    return [JITFunction, InterpretedFunction]


def _name(fn) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__name__', type(fn).__name__)}"


def _hooked_call(original):
    def __call__(self, *args, **kwargs):  # a device function called by an interpreted kernel
        name = _name(getattr(self, "fn", None))
        with _lock:
            for seen in _active:
                seen.calls.append(name)
        return original(self, *args, **kwargs)

    return __call__


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
def observe() -> Iterator[Launched]:
    """Record the Triton kernels launched inside the block, by name, in launch order, and the device functions they
    call under the interpreter (:class:`Launched`; blocks nest, each sees the launches inside it). The launch methods
    are restored when the outermost block ends, also on error."""
    from triton.runtime.interpreter import InterpretedFunction

    seen = Launched()
    with _lock:
        if not _active:
            for owner in _owners():
                _saved[(owner, "run")] = owner.__dict__["run"]
                owner.run = _hooked(_saved[(owner, "run")])
            _saved[(InterpretedFunction, "__call__")] = InterpretedFunction.__dict__["__call__"]
            InterpretedFunction.__call__ = _hooked_call(_saved[(InterpretedFunction, "__call__")])
        _active.append(seen)
    try:
        yield seen
    finally:
        with _lock:
            _active.remove(seen)
            if not _active:
                for (owner, method), original in _saved.items():
                    setattr(owner, method, original)
                _saved.clear()


def watch():
    """:func:`observe` where a Triton kernel can run (:func:`observable`), else a block that observes nothing (it
    yields ``None``)."""
    return observe() if observable() else contextlib.nullcontext(None)


def converts_with_casts(seen: Launched) -> bool:
    """Whether the kernels of ``seen`` called a device function of :mod:`fastpath_lib.triton_casts` (its ``to_fp32``
    or ``round_to``), as the interpreter ran them."""
    return any(name.startswith(CASTS_MODULE + ".") for name in seen.calls)


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


def declared_mismatch(predicted: str, declared: str, reasons=()) -> str | None:
    """Why a call's route drifted where the op's spec declares its own ``route`` (``OpSpec.route``, the dispatch's
    own booleans) and that route is not the predicate's ``predicted`` (``None``: they agree); in the form of
    :func:`mismatch`, the predicate's route first, then what drifted from it (where the predicate says fallback, the
    conditions that failed, ``reasons``).

    >>> declared_mismatch("triton", "fallback")
    'the predicate says triton, OpSpec.route says fallback'
    >>> declared_mismatch("fallback", "triton", ["cols: 4097, at most 4096"])
    'the predicate says fallback (cols: 4097, at most 4096), OpSpec.route says triton'
    """
    if declared == predicted:
        return None
    why = f" ({'; '.join(reasons)})" if reasons else ""
    return f"the predicate says {predicted}{why}, OpSpec.route says {declared}"
