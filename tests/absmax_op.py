"""An operator unlike RMSNorm, written the way a practitioner writes one outside the kit: a row-wise absmax scale
(``y = x / max(|x|)`` along the last dimension, as int8 quantizers compute it), forward only, no weight, on a batch of
sequences ``[batch, tokens, hidden]`` (a 3-d row shape), with a Triton kernel behind a predicate.

The kit's test of practitioner ops (``tests/test_practitioner_op.py``) registers it as ``--op
tests.absmax_op:SPEC`` and runs every documented command on it. Nothing here is RMSNorm's.
"""

from __future__ import annotations

import dataclasses

import torch
import triton
import triton.language as tl

from fastpath_lib import runtime
from fastpath_lib.eligibility import Boundary, Condition, Predicate
from fastpath_lib.opspec import Axes, HostCase, OpCase, OpSpec

MAX_COLS = 4096
DTYPES = (torch.float16, torch.bfloat16, torch.float32)


@triton.jit
def absmax_scale_kernel(
    X_ptr,  # input rows
    Y_ptr,  # output rows
    n_cols,  # row width
    BLOCK_SIZE: tl.constexpr,  # one block holds a whole row
):
    """``y = x / max(|x|)`` per row (a zero row stays zero)."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(X_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    peak = tl.max(tl.abs(x), axis=0)
    y = x / tl.where(peak > 0, peak, 1.0)
    tl.store(Y_ptr + row * n_cols + cols, y.to(Y_ptr.dtype.element_ty), mask=mask)


def fast(x: torch.Tensor) -> torch.Tensor:
    """The Triton route, called directly (contiguous input, at most :data:`MAX_COLS` wide)."""
    y = torch.empty_like(x)
    n = x.shape[-1]
    absmax_scale_kernel[(x.numel() // n,)](x, y, n, BLOCK_SIZE=triton.next_power_of_2(n))
    return y


def reference(x: torch.Tensor) -> torch.Tensor:
    """The contract, in plain torch (fp32 math, the input's dtype out)."""
    x32 = x.float()
    peak = x32.abs().amax(-1, keepdim=True)
    return (x32 / torch.where(peak > 0, peak, torch.ones_like(peak))).to(x.dtype)


@dataclasses.dataclass(frozen=True)
class Call:
    """What the predicate reads of a call."""

    x: torch.Tensor
    interpret: bool
    forced: bool = False


@dataclasses.dataclass(frozen=True)
class Limits:
    max_cols: int = MAX_COLS
    min_rows: int = 1


def _where(c: Call):
    return None if c.x.is_cuda or c.interpret else f"{c.x.device} without Triton's interpreter"


def _dtype(c: Call):
    return None if c.x.dtype in DTYPES else f"{c.x.dtype}"


def _width(c: Call):
    return None if c.x.shape[-1] <= MAX_COLS else f"{c.x.shape[-1]} columns, more than {MAX_COLS}"


def _contiguous(c: Call):
    return None if c.x.is_contiguous() else "not contiguous"


PREDICATE = Predicate("absmax scale", [
    Condition("device", "CUDA, or Triton's interpreter", _where, "device"),
    Condition("dtype", "fp16, bf16 or fp32", _dtype, "dtype",
              boundaries=(Boundary("bf16", {"dtype": torch.bfloat16}, True),
                          Boundary("fp64", {"dtype": torch.float64}, False))),
    Condition("cols", f"rows at most {MAX_COLS} wide", _width, "shape",
              boundaries=(Boundary("cols=max", lambda lim: {"cols": lim.max_cols}, True),
                          Boundary("cols=max+1", lambda lim: {"cols": lim.max_cols + 1}, False))),
    Condition("contiguous", "a contiguous input", _contiguous, "stride",
              boundaries=(Boundary("transposed", {"layout": "transposed"}, False),)),
])


def context(x) -> Call:
    return Call(x, runtime.interpreter_enabled())


def route(x) -> str:
    return PREDICATE.evaluate(context(x)).route


def absmax_scale(x: torch.Tensor) -> torch.Tensor:
    """The public op: the Triton route where the predicate holds, else the reference."""
    return fast(x) if route(x) == "triton" else reference(x)


@dataclasses.dataclass(frozen=True)
class Case:
    """The op's own case: ``[2, rows / 2, cols]`` (two sequences of tokens), or its transpose."""

    rows: int = 4
    cols: int = 64
    dtype: torch.dtype = torch.float32
    layout: str = "contiguous"
    pad: int = 0
    offset: int = 0
    device: str | None = None

    def label(self) -> str:
        return f"2x{self.rows // 2}x{self.cols} {str(self.dtype)[6:]} {self.layout}"

    def build(self, seed: int = 0, device=None):
        gen = torch.Generator().manual_seed(seed)
        x = torch.randn(2, max(1, self.rows // 2), self.cols, generator=gen).to(self.dtype)
        x = x.to(device or self.device or runtime.kernel_device())
        return Built(x.transpose(1, 2).contiguous().transpose(1, 2) if self.layout == "transposed" else x)


@dataclasses.dataclass
class Built:
    x: torch.Tensor


def _bytes(rows: int, cols: int, dtype, pass_: str = "forward") -> int:
    """Read x once, write y once."""
    return 2 * rows * cols * torch.empty((), dtype=dtype).element_size()


SPEC = OpSpec(
    name="absmax_scale",
    function=absmax_scale,
    reference=reference,
    args=lambda built: (built.x,),
    route=route,
    fast=fast,
    predicate=PREDICATE,
    boundary_base={"rows": 4, "cols": 64, "dtype": torch.float32},
    limits=lambda device: Limits(),
    context=context,
    case_spec=Case,
    tolerances={torch.float32: (1e-6, 1e-6), torch.float16: (1e-3, 1e-3), torch.bfloat16: (8e-3, 8e-3)},
    cases=[OpCase("tokens_fp16", 8, 256, "float16", "win", "a prefill's tokens: one pass instead of three",
                  quick=(4, 64)),
           OpCase("wide_fp32", 8, 8192, "float32", "fallback", "wider than one block: the reference runs",
                  quick=(2, 8192))],
    bytes_moved=_bytes,
    baselines={"torch_eager": reference},
    host_cases=(HostCase("host_decode_fp16", Case(rows=2, cols=8192, dtype=torch.float16),
                         "one decode token per sequence, too wide: the reference runs"),),
    axes=Axes(widths=(1024, 4096), quick=(1024,), off_gpu=(64,), hidden=1024),
    title="Row absmax scale: one Triton pass behind a predicate",
    pr_text={"noun": "absmax scale"},
)
