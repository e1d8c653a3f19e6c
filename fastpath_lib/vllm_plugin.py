"""The kit's two ops as providers of vLLM's IR ops, registered by vLLM's ``vllm.general_plugins`` entry point.

``pip install`` of the kit into a vLLM environment makes vLLM call :func:`register` at start-up (``pyproject.toml``:
``[project.entry-points."vllm.general_plugins"]``). It adds the provider :data:`PROVIDER` to

* ``vllm.ir.ops.rms_norm``: :func:`rms_norm`, calling the kit's opaque op ``torch.ops.fastpath.rms_norm``;
* ``vllm.ir.ops.fused_add_rms_norm`` (``inplace=True``): :func:`fused_add_rms_norm`, calling
  ``torch.ops.fastpath.fused_add_rms_norm_`` (``mutates_args=("x", "residual")``), which writes the output into ``x``
  and the sum into ``x_residual``.

A provider never launches a kernel itself: vLLM's lowering pass traces the chosen ``impl_fn`` into the graph
(``make_fx`` on FakeTensors), and only a registered op with a fake implementation survives that. Each
``supports_args`` reads what a FakeTensor knows (device, dtype, shape, strides, modes: the kit's
:func:`~fastpath_lib.fused.predicate.eligible`), returns a plain ``bool`` on a symbolic or unbacked token count
without guarding on it, and never reads a data pointer. What only run time knows (pointer alignment, overlap of
``x``, ``x_residual`` and the weight, and the row threshold when the token count was symbolic) is decided inside the
op on every call; a call that fails it takes the composite inside the op, so the result is right either way.

The kit's force switch is not consulted by ``supports_args`` (vLLM's rule: enablement is the priority list, never
global state). Nothing runs until the priority names the provider: ``with ir.ops.rms_norm.set_priority(
["fastpath_triton", "native"])`` (or vLLM's kernel config). Without ``vllm.ir`` :func:`register` does nothing.
"""

import os
import sys
from pathlib import Path

import torch
from torch import Tensor

import fastpath_lib.fused.op  # noqa: F401  (registers torch.ops.fastpath.fused_add_rms_norm_)
import fastpath_lib.rmsnorm.op  # noqa: F401  (registers torch.ops.fastpath.rms_norm)
from fastpath_lib import runtime
from fastpath_lib.fused.predicate import eligible as fused_eligible
from fastpath_lib.rmsnorm.limits import MIN_CAPABILITY, device_capability
from fastpath_lib.rmsnorm.predicate import eligible as rms_eligible

__all__ = ["PROVIDER", "supported", "rms_norm_supports_args", "rms_norm", "fused_add_rms_norm_supports_args",
           "fused_add_rms_norm", "register", "vllm_site", "load_vllm_ir"]

#: The provider's name in vLLM's registry and priority lists.
PROVIDER = "fastpath_triton"


def supported() -> bool:
    """vLLM's static ``supported=``: Triton can run here (CUDA sm_80 or newer, or the CPU under the interpreter)."""
    if runtime.interpreter_enabled():
        return True
    return runtime.cuda_available() and device_capability(torch.device("cuda")) >= MIN_CAPABILITY


def rms_norm_supports_args(x: Tensor, weight: Tensor | None, epsilon: float, variance_size: int | None = None) -> bool:
    """Per call, from metadata only: whole rows (``variance_size is None``), the weight in x's dtype (vLLM's native
    rounds the normalized value to the weight's dtype, the kernel does not), and the kit's static conditions."""
    return (variance_size is None and (weight is None or weight.dtype == x.dtype)
            and rms_eligible(x, x.shape[-1:], weight, False))


def rms_norm(x: Tensor, weight: Tensor | None, epsilon: float, variance_size: int | None = None) -> Tensor:
    """``torch.ops.fastpath.rms_norm``: the kernel where the run-time checks pass, ``F.rms_norm`` inside otherwise."""
    assert variance_size is None
    return torch.ops.fastpath.rms_norm(x, [x.shape[-1]], weight, epsilon)


def fused_add_rms_norm_supports_args(x: Tensor, x_residual: Tensor, weight: Tensor | None, epsilon: float,
                                     variance_size: int | None = None) -> bool:
    """Per call, from metadata only: whole rows and the kit's static conditions of the in-place form."""
    return variance_size is None and fused_eligible(x, x_residual, weight, False, True)


def fused_add_rms_norm(x: Tensor, x_residual: Tensor, weight: Tensor | None, epsilon: float,
                       variance_size: int | None = None) -> tuple[Tensor, Tensor]:
    """``torch.ops.fastpath.fused_add_rms_norm_`` writes the output into ``x`` and the sum into ``x_residual`` (the
    kernel where the run-time checks pass, the composite inside otherwise); returns ``(x, x_residual)``."""
    assert variance_size is None
    torch.ops.fastpath.fused_add_rms_norm_(x, x_residual, weight, epsilon)
    return x, x_residual


def register() -> bool:
    """Add :data:`PROVIDER` to both vLLM IR ops; ``False`` (and nothing done) where ``vllm.ir`` is absent.

    Idempotent: an op that already has a provider of that name (this plugin's, or an in-tree one) keeps it.
    """
    try:
        from vllm import ir
    except ModuleNotFoundError as e:
        if e.name in ("vllm", "vllm.ir"):
            return False
        raise
    ok = supported()
    for op, fn, check, inplace in ((ir.ops.rms_norm, rms_norm, rms_norm_supports_args, False),
                                   (ir.ops.fused_add_rms_norm, fused_add_rms_norm, fused_add_rms_norm_supports_args,
                                    True)):
        if PROVIDER not in op.impls:
            op.register_impl(PROVIDER, supported=ok, supports_args=check, inplace=inplace)(fn)
    return True


def vllm_site() -> Path:
    """Where ``./kit setup`` installs vLLM's wheel without its dependencies: ``<venv>/vllm-site``
    (``FASTPATH_VLLM_SITE`` overrides)."""
    return Path(os.environ.get("FASTPATH_VLLM_SITE") or Path(sys.prefix) / "vllm-site")


def load_vllm_ir():
    """``vllm.ir`` with this plugin registered, from an installed vLLM or else from :func:`vllm_site` (appended to
    ``sys.path``; importing vLLM sets a few environment variables and patches Inductor for vLLM's own ops).

    Raises:
        ModuleNotFoundError: neither has it (the message says where the kit looked).
    """
    site = vllm_site()
    if site.is_dir() and str(site) not in sys.path:
        sys.path.append(str(site))
    try:
        from vllm import ir
    except ModuleNotFoundError as e:
        raise ModuleNotFoundError(f"{e}; vLLM is not installed, nor in {site} (./kit setup puts its wheel there)",
                                  name=e.name) from None
    register()
    return ir
