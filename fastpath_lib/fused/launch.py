"""The launch rule of the fused kernels: RMSNorm's (:mod:`fastpath_lib.rmsnorm.launch`), but the backward keeps the
forward's warps.

The fused backward holds more per row than RMSNorm's (the sum ``x + r`` and the incoming residual gradient beside
``dy``, the weight and its ``dw`` share), so RMSNorm's 32 warps from 8192 columns (at most 64 registers a thread) spill
it: 56 bytes at 8192 columns, fp16 and bf16, 4 rows per program, on sm_86 and sm_89 (Triton 3.8). With the forward's 16
warps (128 registers a thread) it compiles spill-free on each of sm_75, sm_80, sm_86, sm_89, sm_90 and sm_120. Above
8192 columns it spills at any warp count, so calls autograd records stop there
(:data:`fastpath_lib.fused.predicate.BACKWARD_MAX_COLS`). Compile-time facts, from ``tests/rmsnorm/test_compiled.py``;
no GPU has timed either setting. Imports neither Triton nor the kernels.

>>> launch_settings(8192, "backward"), launch_settings(4096, "backward")
((8192, 16), (4096, 8))
"""

from __future__ import annotations

from fastpath_lib.rmsnorm import launch

__all__ = ["launch_settings"]


def launch_settings(n_cols: int, kernel: str = "forward") -> tuple[int, int]:
    """``(BLOCK_SIZE, num_warps)`` of the fused ``kernel`` (``"forward"`` or ``"backward"``) for a row width: the
    forward's rule for both (:func:`fastpath_lib.rmsnorm.launch.launch_settings`)."""
    if kernel not in launch.KERNELS:
        raise ValueError(f"kernel must be one of {launch.KERNELS}, got {kernel!r}")
    return launch.launch_settings(n_cols, "forward")
