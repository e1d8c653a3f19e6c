# SPDX-License-Identifier: Apache-2.0
"""A provider of ``vllm.ir.ops.fused_add_rms_norm``: the Fastpath Kit's one-pass Triton kernel, in place.

This is the file a learner submits to vLLM, in the shape its IR expects (``vllm/ir/op.py``): the native function
``fused_add_rms_norm(x, x_residual, weight, epsilon, variance_size=None) -> (out, residual)`` stays the contract, and a
provider registers with

* ``supported``: a static platform check, decided once at import: CUDA with compute capability 8.0 or newer (the
  kit's ``architecture`` condition; its ``device`` condition is per call, below);
* ``supports_args``: a per-call check with the native's own signature, built from the kit's per-call conditions
  (:data:`fastpath_lib.fused.predicate.PER_CALL`: dtypes, shapes, strides, alignment, no overlap between ``x``,
  ``x_residual`` and ``weight``, and the modes), plus ``variance_size is None`` (the kernel normalizes whole rows).
  The kit's force switch is *not* consulted: vLLM's rule is that enablement never hangs on global state such as an
  environment variable; vLLM's own priority list and the native fallback decide;
* ``inplace=True``: the kernel writes the output into ``x`` and the sum into ``x_residual`` and returns both.

The kit's tests import this file with a stub ``vllm`` (``tests/test_fused_upstream.py``) and check that
``supports_args`` agrees with the kit's dispatch on every boundary point of the fused predicate.
"""

import torch
from torch import Tensor
from vllm import ir

from fastpath_lib.fused import kernels
from fastpath_lib.fused.predicate import eligible, runtime_eligible
from fastpath_lib.rmsnorm.limits import MIN_CAPABILITY


def _platform_supported() -> bool:
    if not torch.cuda.is_available():
        return False
    return torch.cuda.get_device_capability() >= MIN_CAPABILITY


SUPPORTED = _platform_supported()
"""Static: CUDA, Ampere (sm_80) or newer."""


def supports_args(
    x: Tensor,
    x_residual: Tensor,
    weight: Tensor | None,
    epsilon: float,
    variance_size: int | None = None,
) -> bool:
    """The kit's per-call conditions for the in-place form, with the native signature."""
    return (
        variance_size is None
        and eligible(x, x_residual, weight, False, True)
        and runtime_eligible(x, x_residual, weight, True)
    )


@ir.ops.fused_add_rms_norm.register_impl(
    "fastpath_triton", supports_args=supports_args, supported=SUPPORTED, inplace=True
)
def fused_add_rms_norm(
    x: Tensor,
    x_residual: Tensor,
    weight: Tensor | None,
    epsilon: float,
    variance_size: int | None = None,
) -> tuple[Tensor, Tensor]:
    """One pass: read ``x`` and ``x_residual``, add in fp32, write the sum into ``x_residual`` (rounded to its
    dtype), normalize the unrounded sum and write the output into ``x``."""
    assert variance_size is None
    kernels.run_(x, x_residual, weight, epsilon)
    return x, x_residual
