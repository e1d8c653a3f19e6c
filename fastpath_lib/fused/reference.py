"""The written contract of fused residual-add + RMSNorm: vLLM's native semantics, in plain torch.

vLLM's IR (``vllm/ir/ops/layernorm.py``) declares ``fused_add_rms_norm(x, x_residual, weight, epsilon)`` returning
``(out, residual)`` and lets providers write both results into their inputs (``allow_inplace=True``). Its native
function is the contract every provider matches; it fixes where each intermediate is rounded::

    s            = float32(x) + float32(residual)              # the sum, in fp32
    new_residual = s rounded to x's dtype                        # what the caller keeps for the next layer
    n            = s * rsqrt(mean(s ** 2) + eps)                 # variance of the *unrounded* fp32 sum
    out          = (n rounded to the weight's dtype) * weight    # the product in the weight's dtype
    out          = out rounded to x's dtype                      # (without weight: n rounded to x's dtype)

:func:`native` is that function, differentiable; it is also the op's fallback, so a call outside the predicate's
region computes exactly the contract. :func:`native_` is the in-place composite: it computes both results from the
inputs first, then writes the sum into ``residual`` and the output into ``x`` (in that order, with ``copy_``, so
autograd sees in-place ops on leaves and views as PyTorch defines them, and overlapping inputs end with the output
written last). :func:`reference_grads` differentiates the same formula in float64, roundings left out.

Tolerances (:data:`TOLERANCES`, for comparing a route's output with :func:`native` in the input dtype): both compute
in fp32 and round at the same points, so they differ only by the order of the fp32 mean-square reduction (relative
about ``1e-6`` over at most 16384 terms). That moves ``n`` by a few fp32 ulps, which flips the rounding of an fp16 or
bf16 output by one unit in the last place on a small fraction of elements: one ulp of the output dtype relative,
plus an ``atol`` for outputs near zero, as RMSNorm's table (:mod:`fastpath_lib.testing`). vLLM overrides fp16 to
``atol=1e-2, rtol=2e-3`` for its largest shapes (32768x16384); the kit's own table is tighter and holds on the shapes
it tests. The new residual is one fp32 addition rounded once, the same in every route: it must match **bitwise**.
Gradients use RMSNorm's gradient tolerances against the float64 reference.

Torch only, no Triton.
"""

from __future__ import annotations

import torch

from fastpath_lib.rmsnorm.limits import default_eps

__all__ = ["native", "native_", "reference_grads", "TOLERANCES", "GRAD_TOLERANCES", "VLLM_TOLERANCES", "tolerance",
           "bytes_moved"]

#: dtype -> (atol, rtol) for the output, against :func:`native` (the new residual must match bitwise).
TOLERANCES = {
    torch.float32: (1e-5, 2e-6),
    torch.float16: (1e-3, 2 ** -10),
    torch.bfloat16: (8e-3, 2 ** -7),
}
#: dtype -> (atol, rtol) for gradients, against the float64 :func:`reference_grads`.
GRAD_TOLERANCES = {d: (4 * a, 4 * r) for d, (a, r) in TOLERANCES.items()}
#: What vLLM's IR declares for this op (torch's defaults, fp16 overridden for its largest shapes).
VLLM_TOLERANCES = {torch.float16: (1e-2, 2e-3)}


def tolerance(dtype: torch.dtype, *, grad: bool = False) -> tuple[float, float]:
    """``(atol, rtol)`` for ``dtype`` (other dtypes, which only the fallback serves: tight fp64 tolerances)."""
    return (GRAD_TOLERANCES if grad else TOLERANCES).get(dtype, (1e-10, 1e-10))


def _eps(x: torch.Tensor, eps: float | None) -> float:
    return default_eps(x.dtype) if eps is None else float(eps)


def native(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None = None,
           eps: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(out, new_residual)`` by vLLM's native semantics (module docstring); differentiable, never in place.

    >>> x, r = torch.ones(2, 4, dtype=torch.float16), torch.full((2, 4), 2.0, dtype=torch.float16)
    >>> out, s = native(x, r, torch.ones(4, dtype=torch.float16))
    >>> s[0, 0].item(), out[0, 0].item()
    (3.0, 1.0)
    """
    dtype = x.dtype
    s = x.to(torch.float32) + residual.to(torch.float32)
    new_residual = s.to(dtype)
    n = s * torch.rsqrt(s.pow(2).mean(dim=-1, keepdim=True) + _eps(x, eps))
    out = n.to(weight.dtype) * weight if weight is not None else n
    return out.to(dtype), new_residual


def native_(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None = None,
            eps: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The in-place composite: both results from the inputs, then ``residual.copy_(sum)`` and ``x.copy_(out)``.

    Returns ``(x, residual)``, the caller's own tensors. Raises what ``copy_`` raises (a leaf that requires grad, a
    shape ``x`` cannot hold).
    """
    out, new_residual = native(x, residual, weight, eps)
    residual.copy_(new_residual)
    x.copy_(out)
    return x, residual


def reference_grads(x, residual, weight, eps, grad_out, grad_residual=None):
    """``(dx, dresidual, dweight)`` of the formula in float64 by autograd, roundings left out (``dweight`` ``None``
    without a weight). ``grad_residual`` is the gradient flowing into the new residual (``None``: zero)."""
    x64 = x.detach().to(torch.float64).requires_grad_(True)
    r64 = residual.detach().to(torch.float64).requires_grad_(True)
    w64 = None if weight is None else weight.detach().to(torch.float64).requires_grad_(True)
    s = x64 + r64
    out = s * torch.rsqrt(s.pow(2).mean(dim=-1, keepdim=True) + _eps(x, eps))
    out = out * w64 if w64 is not None else out
    wanted = [t for t in (x64, r64, w64) if t is not None]
    outs, grads = [out], [grad_out.to(torch.float64)]
    if grad_residual is not None:
        outs.append(s)
        grads.append(grad_residual.to(torch.float64))
    got = torch.autograd.grad(outs, wanted, grads)
    return got[0], got[1], (got[2] if w64 is not None else None)


def bytes_moved(rows: int, cols: int, element_size: int, weight_element_size: int = 0, *,
                fused: bool = True) -> int:
    """Bytes a memory-bound implementation moves for one call (the mechanism of the fusion's saving).

    Fused: read ``x`` and ``residual``, write the new residual and the output, 4 passes over ``rows x cols``.
    Unfused (add, then RMSNorm): read ``x``, ``residual``, write the sum; read the sum, write the output: 5 passes.
    The weight is read once per call in both (it stays in cache).

    >>> bytes_moved(1, 4096, 2, 2), bytes_moved(1, 4096, 2, 2, fused=False)
    (40960, 49152)
    """
    passes = 4 if fused else 5
    return passes * rows * cols * element_size + cols * weight_element_size
