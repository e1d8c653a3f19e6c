"""The numeric limits of the RMSNorm fast path, and the row threshold in force for a device.

``CUDA_MIN_ROWS`` is read once, at import, from ``thresholds.json`` (:mod:`fastpath_lib.rmsnorm.thresholds`), where
each value names the recorded GPU sweep it came from; architectures without one get ``DEFAULT_CUDA_MIN_ROWS``.

The architecture condition lives here too (:func:`check_arch`): compute capability 8.0 or newer, where Triton's
supported hardware starts. A learner on a T4 (sm_75, the GPU of free hosted notebooks) may admit it for fp16 and fp32
inside :func:`fastpath_lib.selftest.allow_sm75`, which runs the self-test on the device first: outside Triton's
support matrix, and unmeasured (no sweep: the conservative row threshold). Torch only, no Triton.
"""

from __future__ import annotations

import contextlib
import dataclasses

import torch

from fastpath_lib import runtime
from fastpath_lib.rmsnorm import thresholds

__all__ = ["MAX_COLS", "ALIGN_BYTES", "MIN_CAPABILITY", "INTERPRETER_MIN_ROWS", "CUDA_MIN_ROWS",
           "DEFAULT_CUDA_MIN_ROWS", "LEAST_MIN_ROWS", "SUPPORTED_DTYPES", "Limits", "limits_for", "device_capability",
           "default_eps", "SM75", "SM75_DTYPES", "check_arch", "sm75_admitted", "sm75_rows", "sm75_scope", "overriding"]

MAX_COLS = 16384
ALIGN_BYTES = 16
MIN_CAPABILITY = (8, 0)
INTERPRETER_MIN_ROWS = 8
#: Row threshold per CUDA architecture, from recorded GPU sweeps (``thresholds.json``, each entry with its source).
CUDA_MIN_ROWS: dict[tuple[int, int], int] = thresholds.load()
#: Used for architectures without a recorded sweep: conservative, so small launch-bound calls keep F.rms_norm.
DEFAULT_CUDA_MIN_ROWS = 1024
#: The smallest row threshold any device has: fewer rows fall back whatever the device (the dispatch tests it before
#: it reads the device's own threshold).
LEAST_MIN_ROWS = min(INTERPRETER_MIN_ROWS, DEFAULT_CUDA_MIN_ROWS, *CUDA_MIN_ROWS.values())
SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
#: Turing (T4): admitted only inside :func:`fastpath_lib.selftest.allow_sm75`, for inputs and weights of these dtypes.
SM75 = (7, 5)
SM75_DTYPES = (torch.float16, torch.float32)
_SUPPORT = "Triton supports NVIDIA GPUs of compute capability 8.0+"
_UNMEASURED = "sm_75 admitted by allow_sm75() after the self-test passed: outside Triton's support matrix, unmeasured"


class _Sm75:
    """Process-wide, like the force-fallback switch: open ``allow_sm75()`` blocks, and where the self-test passed."""

    depth = 0
    passed: set = set()


@dataclasses.dataclass(frozen=True)
class Limits:
    """The numeric limits in force for one device and mode.

    Only the row threshold (and its ``source``) differs between devices; ``max_cols`` and ``align_bytes`` read
    :data:`MAX_COLS` and :data:`ALIGN_BYTES`, the values the dispatch's cheap test uses, so the two cannot disagree.

    >>> Limits(min_rows=100).max_cols == MAX_COLS, Limits().align_bytes == ALIGN_BYTES
    (True, True)
    """

    min_rows: int = INTERPRETER_MIN_ROWS
    min_capability: tuple[int, int] = MIN_CAPABILITY
    source: str = "interpreter"

    @property
    def max_cols(self) -> int:
        """The widest row the kernels take (:data:`MAX_COLS`)."""
        return MAX_COLS

    @property
    def align_bytes(self) -> int:
        """The alignment of data pointers, row strides and row widths, in bytes (:data:`ALIGN_BYTES`)."""
        return ALIGN_BYTES


def limits_for(device: torch.device | str | None = None, *, interpret: bool | None = None,
               capability: tuple[int, int] | None = None) -> Limits:
    """Limits for ``device`` (default: CUDA if present): the row threshold depends on the architecture."""
    interpret = runtime.interpreter_enabled() if interpret is None else interpret
    dev = torch.device(device) if device is not None else torch.device("cuda" if runtime.cuda_available() else "cpu")
    if dev.type == "cuda" and not interpret:
        cap = capability if capability is not None else device_capability(dev)
        if sm75_admitted(cap):
            return Limits(min_rows=DEFAULT_CUDA_MIN_ROWS, source=_UNMEASURED)
        if cap in CUDA_MIN_ROWS:
            return Limits(min_rows=CUDA_MIN_ROWS[cap], source=f"sweep for sm_{cap[0]}{cap[1]}")
        return Limits(min_rows=DEFAULT_CUDA_MIN_ROWS, source=f"conservative default (no sweep for sm_{cap[0]}{cap[1]})")
    return Limits()


def device_capability(dev: torch.device) -> tuple[int, int]:
    """``(major, minor)`` of a CUDA device; ``(0, 0)`` when it cannot be read (no driver): the arch check fails."""
    try:
        return tuple(torch.cuda.get_device_capability(dev))
    except (RuntimeError, AssertionError, AttributeError):
        return (0, 0)


def default_eps(dtype: torch.dtype) -> float:
    """``F.rms_norm``'s default eps: the machine epsilon of the dtype it computes in (fp32 for fp16/bf16/fp32)."""
    opmath = torch.float64 if dtype == torch.float64 else torch.float32
    return torch.finfo(opmath).eps


def sm75_admitted(capability) -> bool:
    """Whether ``capability`` is sm_75, inside an ``allow_sm75()`` block, with the self-test passed there."""
    return _Sm75.depth > 0 and tuple(capability or ()) == SM75 and SM75 in _Sm75.passed


@contextlib.contextmanager
def overriding(cache: dict, min_rows: int):
    """Inside the block every CUDA device's cached row threshold in ``cache`` (the predicate's) is ``min_rows``: CUDA
    calls take the fast route from that many rows (never below :data:`LEAST_MIN_ROWS`, every other condition
    unchanged), which the row sweep needs to time the dispatched call on both sides of a threshold not yet recorded.
    The cache is put back on exit."""
    before = dict(cache)
    cache.update(dict.fromkeys(range(torch.cuda.device_count()), int(min_rows)))
    try:
        yield
    finally:
        cache.clear()
        cache.update(before)


@contextlib.contextmanager
def sm75_scope(selftest_passed_on: tuple[int, int] | None):
    """Admit sm_75 inside the block once the self-test passed on a device of that capability (``None``: it did not
    run here). :func:`fastpath_lib.selftest.allow_sm75` is the entry point: it runs the self-test and passes its
    device's capability."""
    if selftest_passed_on is not None:
        _Sm75.passed.add(tuple(selftest_passed_on))
    _Sm75.depth += 1
    try:
        yield
    finally:
        _Sm75.depth -= 1


def sm75_rows(input: torch.Tensor, weight: torch.Tensor | None) -> int:
    """The row threshold of a CUDA call on a device only ``allow_sm75()`` admits (0: not admitted): the dispatch's
    cheap test, after the architecture's own threshold said 0."""
    if not _Sm75.depth or input.dtype not in SM75_DTYPES or (weight is not None
                                                              and getattr(weight, "dtype", None) not in SM75_DTYPES):
        return 0
    return DEFAULT_CUDA_MIN_ROWS if sm75_admitted(device_capability(input.device)) else 0


def check_arch(c) -> str | None:
    """The predicate's architecture condition on a call context (``device_type``, ``interpret``, ``capability``,
    ``limits``, ``input``, ``weight``): ``None`` when it holds, else the reason."""
    if c.device_type != "cuda" or c.interpret:
        return None
    cap, need = tuple(c.capability or (0, 0)), c.limits.min_capability
    if cap >= need:
        return None
    refused = f"sm_{cap[0]}{cap[1]}, need sm_{need[0]}{need[1]} or newer ({_SUPPORT})"
    if cap != SM75:
        return refused
    if not _Sm75.depth:
        return refused[:-1] + "; a learner on a T4 may opt in for fp16 and fp32: fastpath_lib.selftest.allow_sm75())"
    if SM75 not in _Sm75.passed:
        return "sm_75 inside allow_sm75() without a passed self-test on it, need the self-test passed there"
    bad = [str(t.dtype).replace("torch.", "") for t in (c.input, c.weight)
           if t is not None and getattr(t, "dtype", None) not in SM75_DTYPES]
    if bad:
        return f"sm_75 under allow_sm75() with {', '.join(bad)}, need float16 or float32 there (no bfloat16)"
    return None
