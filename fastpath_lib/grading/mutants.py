"""Seeded faulty variants of the RMSNorm fast path, used to grade boundary cases by mutation (exercise 04).

A set of boundary cases is good when it *catches* every mutant: some case gets a different route from a faulty
predicate than from the correct one, or a wrong result (or a write outside the output, or a changed input) from a
faulty kernel. Predicate mutants replace one condition of :data:`~fastpath_lib.rmsnorm.predicate.PREDICATE`; kernel
mutants are one Triton kernel with a ``MUTANT`` constexpr switch, run only on cases the correct predicate sends to
Triton. Every kernel mutant stays inside the 16 poison elements :class:`~fastpath_lib.cases.CaseSpec` puts after each
buffer, so a faulty kernel never touches memory it does not own.
"""

from __future__ import annotations

import dataclasses

from fastpath_lib.eligibility import Condition, Predicate
from fastpath_lib.rmsnorm import predicate as rms

__all__ = ["PREDICATE_MUTANTS", "KERNEL_MUTANTS", "HINTS", "mutant_predicate", "run_kernel"]


def _rows(c):
    return rms._rows_cols(c)[0]


def _min_rows_gt(c):  # '>' where '>=' is meant
    return None if _rows(c) > c.limits.min_rows else f"{_rows(c)} rows"


def _cols_lt(c):  # '<' where '<=' is meant
    n = c.input.shape[-1] if c.input.dim() else 1
    return None if n < c.limits.max_cols else f"{n} columns"


def _holds(c):
    return None


def _align8(c):
    if c.input.numel() == 0:
        return None
    return None if c.input.data_ptr() % 8 == 0 else "misaligned"


def _dtype_fp64(c):
    import torch

    return None if c.input.dtype in rms.SUPPORTED_DTYPES + (torch.float64,) else "dtype"


#: mutant name -> (condition replaced, faulty check)
PREDICATE_MUTANTS = {
    "min_rows_off_by_one": ("min_rows", _min_rows_gt),
    "max_cols_off_by_one": ("cols", _cols_lt),
    "no_row_stride_check": ("row_stride", _holds),
    "no_last_dim_check": ("last_dim_contiguous", _holds),
    "alignment_modulus_8": ("input_alignment", _align8),
    "no_row_stride_alignment": ("row_stride_alignment", _holds),
    "accepts_fp64": ("dtype", _dtype_fp64),
    "weight_alignment_ignored": ("weight_alignment", _holds),
}

#: mutant name -> MUTANT constexpr of the faulty kernel
KERNEL_MUTANTS = {
    "kernel_mean_over_block": 1,
    "kernel_ignores_row_stride": 2,
    "kernel_unmasked_tail": 3,
    "kernel_eps_outside_sqrt": 4,
    "kernel_weight_always_applied": 5,
}

HINTS = {
    "min_rows_off_by_one": "no case sits exactly at the row threshold (rows == min_rows, eligible)",
    "max_cols_off_by_one": "no eligible case sits exactly at the column limit (cols == max_cols)",
    "no_row_stride_check": "no case has leading dims that do not collapse to one row stride (a permuted 3-d input)",
    "no_last_dim_check": "no case has a non-contiguous last dimension (a transposed input)",
    "alignment_modulus_8": "no case has an input pointer aligned to 8 but not 16 bytes",
    "no_row_stride_alignment": "no case has a row stride that is not a multiple of 16 bytes",
    "accepts_fp64": "no case has an unsupported input dtype with every other condition holding (mind the weight)",
    "weight_alignment_ignored": "no case has a misaligned weight",
    "kernel_mean_over_block": "no eligible case has a row width that is not a power of two",
    "kernel_ignores_row_stride": "no eligible case has a row stride different from its width (row slice, step)",
    "kernel_unmasked_tail": "no eligible case has a row width that is not a multiple of 16 elements",
    "kernel_eps_outside_sqrt": "no eligible case has values small enough for eps to matter (try scale=1e-2)",
    "kernel_weight_always_applied": "no eligible case runs without a weight",
}


def mutant_predicate(name: str) -> Predicate:
    """:data:`~fastpath_lib.rmsnorm.predicate.PREDICATE` with one condition replaced by the faulty check."""
    target, check = PREDICATE_MUTANTS[name]
    conds = [dataclasses.replace(c, check=check) if c.name == target else c for c in rms.PREDICATE.conditions]
    return Predicate(f"mutant:{name}", conds)


_kernel = None


def _get_kernel():
    global _kernel
    if _kernel is not None:
        return _kernel
    import triton
    import triton.language as tl

    @triton.jit
    def mutant_fwd_kernel(
        X_ptr,  # input rows, last dim contiguous
        W_ptr,  # weight [n_cols] (X_ptr when there is none)
        Y_ptr,  # output rows, contiguous
        X_row_stride,  # elements between input rows
        Y_row_stride,  # elements between output rows
        n_cols,  # row width
        eps,  # added to the mean square
        HAS_WEIGHT: tl.constexpr,  # multiply by W
        BLOCK_SIZE: tl.constexpr,  # power of two >= n_cols (+16 for the unmasked-tail mutant)
        MUTANT: tl.constexpr,  # 0: correct; see KERNEL_MUTANTS
    ):
        """RMSNorm forward with one seeded fault selected by MUTANT."""
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK_SIZE)
        if MUTANT == 3:
            mask = cols < (n_cols + 15) // 16 * 16  # assumes rows padded to 16 elements: reads/writes the tail
        else:
            mask = cols < n_cols
        if MUTANT == 2:
            x_row = X_ptr + row * n_cols  # ignores the row stride
        else:
            x_row = X_ptr + row * X_row_stride
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        if MUTANT == 1:
            mean_sq = tl.sum(x * x, axis=0) / BLOCK_SIZE
        else:
            mean_sq = tl.sum(x * x, axis=0) / n_cols
        if MUTANT == 4:
            rstd = 1.0 / (tl.sqrt(mean_sq) + eps)
        else:
            rstd = 1.0 / tl.sqrt(mean_sq + eps)
        y = x * rstd
        if HAS_WEIGHT or MUTANT == 5:
            w = tl.load(W_ptr + cols, mask=mask, other=0.0).to(tl.float32)
            y = y * w
        tl.store(Y_ptr + row * Y_row_stride + cols, y.to(Y_ptr.dtype.element_ty), mask=mask)

    _kernel = mutant_fwd_kernel
    return _kernel


def run_kernel(mutant: int, x2d, weight, eps, out) -> None:
    """Launch the kernel variant ``mutant`` (0 = correct) writing into ``out`` (a ``[rows, cols]`` view)."""
    import numpy as np
    import triton

    n_rows, n_cols = x2d.shape
    block = triton.next_power_of_2(max(n_cols, 1))
    if mutant == 3:
        block = triton.next_power_of_2((n_cols + 15) // 16 * 16)
    with np.errstate(all="ignore"):
        _get_kernel()[(n_rows,)](x2d, weight if weight is not None else x2d, out, x2d.stride(0), out.stride(0),
                                 n_cols, eps, HAS_WEIGHT=weight is not None, BLOCK_SIZE=block, MUTANT=mutant)
