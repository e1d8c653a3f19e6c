# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""Triton providers of vllm.ir.ops.rms_norm and vllm.ir.ops.fused_add_rms_norm."""

import torch
from torch import Tensor
from torch.library import triton_op, wrap_triton

from vllm import ir
from vllm.platforms import current_platform
from vllm.triton_utils import HAS_TRITON, tl, triton

# One program holds a row in registers; wider rows go to the next provider.
_MAX_HIDDEN_SIZE = 16384
_SUPPORTED_DTYPES = {torch.float16, torch.bfloat16, torch.float32}


@triton.jit
def _rms_norm_kernel(
    x_ptr,  # input rows, contiguous
    residual_ptr,  # rows added to x before the norm (if HAS_RESIDUAL)
    weight_ptr,  # [hidden_size] (if HAS_WEIGHT)
    output_ptr,  # normalized rows, contiguous
    residual_out_ptr,  # x + residual in x's dtype (if HAS_RESIDUAL)
    hidden_size,
    epsilon,
    HAS_RESIDUAL: tl.constexpr,
    HAS_WEIGHT: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    offsets = tl.arange(0, BLOCK_SIZE)
    mask = offsets < hidden_size
    row_start = row * hidden_size

    x = tl.load(x_ptr + row_start + offsets, mask=mask, other=0.0).to(tl.float32)
    if HAS_RESIDUAL:
        residual = tl.load(residual_ptr + row_start + offsets, mask=mask, other=0.0)
        x += residual.to(tl.float32)
        tl.store(residual_out_ptr + row_start + offsets, x, mask=mask)
    variance = tl.sum(x * x, axis=0) / hidden_size
    # Round where native rounds: the normalized row to the weight's dtype, the
    # product to the weight's dtype, then to the output's dtype.
    x = x * (1.0 / tl.sqrt(variance + epsilon))
    if HAS_WEIGHT:
        weight_dtype = weight_ptr.dtype.element_ty
        weight = tl.load(weight_ptr + offsets, mask=mask).to(tl.float32)
        x = x.to(weight_dtype).to(tl.float32) * weight
        x = x.to(weight_dtype)
    tl.store(output_ptr + row_start + offsets, x, mask=mask)


def _supports_rms_norm(
    x: Tensor, weight: Tensor | None, epsilon: float, variance_size: int | None = None
) -> bool:
    if (
        x.device.type != current_platform.device_type
        or x.dtype not in _SUPPORTED_DTYPES
        or x.ndim == 0
        or not x.is_contiguous()
        or variance_size is not None
        or not 0 < x.shape[-1] <= _MAX_HIDDEN_SIZE
    ):
        return False
    return weight is None or (
        weight.dtype in _SUPPORTED_DTYPES
        and weight.shape == x.shape[-1:]
        and weight.is_contiguous()
    )


def _supports_fused_add_rms_norm(
    x: Tensor,
    x_residual: Tensor,
    weight: Tensor | None,
    epsilon: float,
    variance_size: int | None = None,
) -> bool:
    return (
        x_residual.shape == x.shape
        and x_residual.dtype == x.dtype
        and x_residual.is_contiguous()
        and _supports_rms_norm(x, weight, epsilon, variance_size)
    )


def _launch(
    x: Tensor,
    x_residual: Tensor | None,
    weight: Tensor | None,
    epsilon: float,
    output: Tensor,
    residual_out: Tensor,
) -> None:
    if x.numel() == 0:
        return
    hidden_size = x.shape[-1]
    n_rows = x.numel() // hidden_size

    def grid(meta):
        return (n_rows,)

    block_size = triton.next_power_of_2(hidden_size)
    num_warps = min(max(block_size // 256, 1), 8)
    # Absent operands are passed as x and never read.
    wrap_triton(_rms_norm_kernel)[grid](
        x,
        x if x_residual is None else x_residual,
        x if weight is None else weight,
        output,
        residual_out,
        hidden_size,
        epsilon,
        HAS_RESIDUAL=x_residual is not None,
        HAS_WEIGHT=weight is not None,
        BLOCK_SIZE=block_size,
        num_warps=num_warps,
    )


@triton_op("vllm::rms_norm_triton", mutates_args=())
def _rms_norm_triton_op(x: Tensor, weight: Tensor | None, epsilon: float) -> Tensor:
    output = torch.empty_like(x)
    _launch(x, None, weight, epsilon, output, output)
    return output


# In place: each program reads its row whole before it writes the row back.
@triton_op("vllm::fused_add_rms_norm_triton", mutates_args=("x", "x_residual"))
def _fused_add_rms_norm_triton_op(
    x: Tensor, x_residual: Tensor, weight: Tensor | None, epsilon: float
) -> None:
    _launch(x, x_residual, weight, epsilon, x, x_residual)


_SUPPORTED = HAS_TRITON and current_platform.is_cuda()


@ir.ops.rms_norm.register_impl(
    "triton", supported=_SUPPORTED, supports_args=_supports_rms_norm
)
def rms_norm_triton(
    x: Tensor, weight: Tensor | None, epsilon: float, variance_size: int | None = None
) -> Tensor:
    assert variance_size is None
    return _rms_norm_triton_op(x, weight, epsilon)


@ir.ops.fused_add_rms_norm.register_impl(
    "triton",
    supported=_SUPPORTED,
    supports_args=_supports_fused_add_rms_norm,
    inplace=True,
)
def fused_add_rms_norm_triton(
    x: Tensor,
    x_residual: Tensor,
    weight: Tensor | None,
    epsilon: float,
    variance_size: int | None = None,
) -> tuple[Tensor, Tensor]:
    assert variance_size is None
    _fused_add_rms_norm_triton_op(x, x_residual, weight, epsilon)
    return x, x_residual
