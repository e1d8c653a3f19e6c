"""A second practitioner op unlike RMSNorm, with a backward and a per-column vector that is no weight: ``y = x * x + b``
(``x`` rows by cols, ``b`` one row wide), a Triton forward and a Triton backward (``dx = 2 x dy``; ``db``, the
column sums of ``dy``, by torch) behind a predicate.

The kit's tests use it where ``tests/absmax_op.py`` (forward only, no vector) cannot reach: the generated boundary
tests' gradient check, and the notes' traffic sentences for an op with a backward and a vector operand.
"""

from __future__ import annotations

import dataclasses

import torch
import triton
import triton.language as tl

from fastpath_lib import runtime
from fastpath_lib.eligibility import Boundary, Condition, Predicate
from fastpath_lib.opspec import OpCase, OpSpec
from fastpath_lib.triton_casts import round_to, to_fp32

MAX_COLS = 128
DTYPES = (torch.float16, torch.float32)


@triton.jit
def bias_square_fwd_kernel(
    X_ptr,  # input rows
    B_ptr,  # the vector added to every row
    Y_ptr,  # output rows
    n_cols,  # row width
    BLOCK_SIZE: tl.constexpr,  # one block holds a whole row
):
    """``y = x * x + b``, one program per row."""
    row, cols = tl.program_id(0).to(tl.int64), tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = to_fp32(tl.load(X_ptr + row * n_cols + cols, mask=mask, other=0.0))
    b = to_fp32(tl.load(B_ptr + cols, mask=mask, other=0.0))
    tl.store(Y_ptr + row * n_cols + cols, round_to(x * x + b, Y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def bias_square_bwd_kernel(
    DY_ptr,  # incoming gradient rows
    X_ptr,  # input rows
    DX_ptr,  # gradient of x
    n_cols,  # row width
    SCALE: tl.constexpr,  # the derivative's factor: 2 (a test's wrong backward passes another)
    BLOCK_SIZE: tl.constexpr,
):
    """``dx = SCALE * x * dy``, one program per row."""
    row, cols = tl.program_id(0).to(tl.int64), tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = to_fp32(tl.load(X_ptr + row * n_cols + cols, mask=mask, other=0.0))
    dy = to_fp32(tl.load(DY_ptr + row * n_cols + cols, mask=mask, other=0.0))
    tl.store(DX_ptr + row * n_cols + cols, round_to(SCALE * x * dy, DX_ptr.dtype.element_ty), mask=mask)


def _block(x):
    return triton.next_power_of_2(x.shape[-1])


def forward(x, b):
    y = torch.empty_like(x)
    bias_square_fwd_kernel[(x.shape[0],)](x, b, y, x.shape[-1], BLOCK_SIZE=_block(x))
    return y


def backward(dy, x, scale: float = 2.0):
    """``(dx, db)``: dx by the Triton kernel, db (column sums of dy) by torch."""
    dy = dy.contiguous()
    dx = torch.empty_like(x)
    bias_square_bwd_kernel[(x.shape[0],)](dy, x, dx, x.shape[-1], SCALE=scale, BLOCK_SIZE=_block(x))
    return dx, dy.sum(0)


def with_scale(scale: float):
    """The fast route as an autograd function whose backward multiplies by ``scale`` (2: right)."""

    class BiasSquare(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, b):
            ctx.save_for_backward(x)
            return forward(x, b)

        @staticmethod
        def backward(ctx, dy):
            (x,) = ctx.saved_tensors
            return backward(dy, x, scale)

    return BiasSquare.apply


fast = with_scale(2.0)


def fast_backward(dy, x, b):
    """The Triton forward then backward, launched directly: ``(dx, db)``."""
    forward(x, b)
    return backward(dy, x)


def reference(x, bias):
    """The contract, in plain torch (fp32 math, the input's dtype out)."""
    return (x.float() * x.float() + bias.float()).to(x.dtype)


@dataclasses.dataclass(frozen=True)
class Limits:
    max_cols: int = MAX_COLS
    min_rows: int = 1


def _device(c):
    return None if c[0].is_cuda or runtime.interpreter_enabled() else f"{c[0].device}"


def _dtype(c):
    x, b = c
    return None if x.dtype in DTYPES and b.dtype == x.dtype else f"{x.dtype}, bias {b.dtype}"


def _cols(c):
    return None if c[0].dim() == 2 and c[0].shape[-1] <= MAX_COLS else f"{tuple(c[0].shape)}"


def _contiguous(c):
    return None if c[0].is_contiguous() and c[1].is_contiguous() else "strided"


PREDICATE = Predicate("bias square", [
    Condition("device", "CUDA, or Triton's interpreter", _device, "device"),
    Condition("dtype", "fp16 or fp32, the bias in the input's dtype", _dtype, "dtype",
              boundaries=(Boundary("fp16", {"dtype": torch.float16}, True),
                          Boundary("fp64", {"dtype": torch.float64}, False))),
    Condition("cols", f"rows at most {MAX_COLS} wide", _cols, "shape",
              boundaries=(Boundary("cols=max", lambda lim: {"cols": lim.max_cols}, True),
                          Boundary("cols=max+1", lambda lim: {"cols": lim.max_cols + 1}, False))),
    Condition("contiguous", "contiguous input and bias", _contiguous, "stride",
              boundaries=(Boundary("transposed", {"layout": "transposed"}, False),)),
])


def bias_square(x, bias):
    """The public op: the Triton route where the predicate holds, else the reference."""
    return fast(x, bias) if PREDICATE.evaluate((x, bias)).eligible else reference(x, bias)


def _bytes(rows: int, cols: int, dtype, pass_: str = "forward") -> int:
    """Forward: x read, b read, y written; a backward case adds the backward kernel's dy and x read, dx written (db
    is torch's column sum, not a Triton launch)."""
    e = torch.empty((), dtype=dtype).element_size()
    return (2 + 3 * (pass_ == "backward")) * rows * cols * e + cols * e


SPEC = OpSpec(
    name="bias_square", function=bias_square, reference=reference, args=lambda built: (built.x, built.weight),
    baselines={"eager": reference}, fast=fast, fast_backward=fast_backward, predicate=PREDICATE,
    context=lambda x, b: (x, b), boundary_base={"rows": 4, "cols": 32, "dtype": torch.float32},
    limits=lambda device: Limits(),
    tolerances={torch.float32: (1e-5, 1e-5), torch.float16: (1e-3, 2**-10)},
    cases=[OpCase("rows_fp32", 4, 64, "float32", "win", "one pass instead of two"),
           OpCase("train_fp32", 4, 64, "float32", "win", "dx in one pass", pass_="backward"),
           OpCase("wide_fp32", 2, 256, "float32", "fallback", "wider than one block: the reference runs")],
    bytes_moved=_bytes,
    title="Bias square: one Triton pass forward and backward behind a predicate",
)
