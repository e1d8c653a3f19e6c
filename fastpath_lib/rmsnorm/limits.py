"""The numeric limits of the RMSNorm fast path, and the row threshold in force for a device.

``CUDA_MIN_ROWS`` is read once, at import, from ``thresholds.json`` (:mod:`fastpath_lib.rmsnorm.thresholds`), where
each value names the recorded GPU sweep it came from; architectures without one get ``DEFAULT_CUDA_MIN_ROWS``.
Torch only, no Triton.
"""

from __future__ import annotations

import dataclasses

import torch

from fastpath_lib import runtime
from fastpath_lib.rmsnorm import thresholds

__all__ = ["MAX_COLS", "ALIGN_BYTES", "MIN_CAPABILITY", "INTERPRETER_MIN_ROWS", "CUDA_MIN_ROWS", "DEFAULT_CUDA_MIN_ROWS",
           "LEAST_MIN_ROWS", "SUPPORTED_DTYPES", "Limits", "limits_for", "device_capability", "default_eps"]

MAX_COLS = 16384
ALIGN_BYTES = 16
MIN_CAPABILITY = (8, 0)
INTERPRETER_MIN_ROWS = 8
#: Row threshold per CUDA architecture, from recorded GPU sweeps (``thresholds.json``, each entry with its source).
CUDA_MIN_ROWS: dict[tuple[int, int], int] = thresholds.load()
#: Used for architectures without a recorded sweep: conservative, so small launch-bound calls keep the old path.
DEFAULT_CUDA_MIN_ROWS = 1024
#: The smallest row threshold any device has: fewer rows fall back whatever the device (the dispatch tests it before
#: it reads the device's own threshold).
LEAST_MIN_ROWS = min(INTERPRETER_MIN_ROWS, DEFAULT_CUDA_MIN_ROWS, *CUDA_MIN_ROWS.values())
SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


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
