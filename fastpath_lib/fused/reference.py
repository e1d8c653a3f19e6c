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

A call that raises writes nothing: :func:`check_inplace` runs every check either write could fail before the first
one, in the order PyTorch reports them, with PyTorch's messages. First the rules about the two written tensors, ``x``
then ``residual`` (vmap: a result batched where the tensor is not; an inference tensor outside inference mode;
autograd, while it records: a leaf that requires grad, a view of one, a view PyTorch refuses to rebase, made in
no_grad mode or one of several outputs); then the arithmetic (``x + residual``, the weight), which raises by itself;
then whether each result fits where it is written: no rows sharing memory, the broadcast shape of ``x`` and
``residual``, and a dtype the result may be cast to.

Dtypes: the kit follows PyTorch's in-place arithmetic. The new residual is the sum rounded to ``x``'s dtype (the
contract), stored in ``residual``'s dtype: with ``x`` fp32 and ``residual`` fp16 it is the fp32 sum rounded to
fp16, bit for bit what ``residual.add_(x)`` stores; a cast to another kind (a float sum into an integer or bool
residual) raises, as ``residual.add_(x)`` does. With ``x`` fp16 and ``residual`` fp32, ``residual`` holds the sum
rounded to fp16 (vLLM's rounding point), not ``residual.add_(x)``'s fp32 sum. Only the composite serves mixed dtypes.

Tolerances (:data:`TOLERANCES`, for comparing a route's output with :func:`native` in the input dtype): both compute
in fp32 and round at the same points, so they differ only by the order of the fp32 mean-square reduction (relative
about ``1e-6`` over at most 16384 terms). That moves ``n`` by a few fp32 ulps, which flips the rounding of an fp16 or
bf16 output by one unit in the last place on a small fraction of elements: one ulp of the output dtype relative,
plus an ``atol`` for outputs near zero, as RMSNorm's table (:mod:`fastpath_lib.testing`). vLLM overrides fp16 to
``atol=1e-2, rtol=2e-3`` for its largest shapes (32768x16384); the kit's own table is tighter and holds on the shapes
it tests. The new residual is one fp32 addition rounded once, the same in every route: it must match **bitwise**.
Gradients use RMSNorm's gradient tolerances against the float64 reference.

Baselines that normalize the rounded sum (:data:`ROUNDED_SUM_TOLERANCES`, :func:`rounded_sum_tolerance`): an unfused
pair (an add in x's dtype, then an RMSNorm) and vLLM's own CUDA kernel (``fused_add_rms_norm_kernel`` in vLLM's
``csrc/layernorm_kernels.cu`` stores the sum in x's dtype and takes both the mean square and the scaled values from
that stored sum) compute the same function with one more rounding: ``h = s`` rounded to x's dtype. Rounding to nearest
gives ``h_i = s_i (1 + d_i)`` with ``|d_i| <= u``, ``u = eps / 2`` of the dtype. Then ``mean(h ** 2) + eps_norm`` lies
within the factor ``(1 +- u) ** 2`` of ``mean(s ** 2) + eps_norm``, so its ``rsqrt`` is within ``[1 / (1 + u),
1 / (1 - u)]`` of the contract's, and each normalized value ``h_i * rsqrt(...)`` within a relative ``(1 + u) / (1 - u)
- 1 = 2u / (1 - u)`` (about one ``eps``) of the contract's ``n_i``. What follows (the rounding to the weight's dtype,
the product, the rounding to x's dtype) is what the op's own routes do too, and the op's tolerance covers it. So such a
baseline is held to the op's ``atol`` and the op's ``rtol`` plus ``2u / (1 - u)``: about two ulps where the op's own
routes get one. Its new residual is ``h``, the contract's: bitwise. For fp32 inputs the sum is not rounded again (the
contract's own sum is fp32): the op's tolerance.

Torch only, no Triton.
"""

from __future__ import annotations

import torch

from fastpath_lib.rmsnorm.limits import default_eps

__all__ = ["native", "native_", "check_inplace", "reference_grads", "TOLERANCES", "GRAD_TOLERANCES",
           "VLLM_TOLERANCES", "ROUNDED_SUM_TOLERANCES", "tolerance", "rounded_sum_tolerance", "bytes_moved"]

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


def rounded_sum_tolerance(dtype: torch.dtype) -> tuple[float, float]:
    """``(atol, rtol)`` of the output of an implementation that normalizes the sum rounded to ``dtype`` (module
    docstring): the op's ``atol``, and its ``rtol`` plus the rounding's relative error carried through the
    normalization, ``2u / (1 - u)`` with ``u = eps / 2`` (``u = 0`` for fp32: the contract's own sum).

    >>> rounded_sum_tolerance(torch.bfloat16)[1] / torch.finfo(torch.bfloat16).eps  # about two ulps
    2.003921568627451
    >>> rounded_sum_tolerance(torch.float32) == tolerance(torch.float32)
    True
    """
    atol, rtol = tolerance(dtype)
    u = torch.finfo(dtype).eps / 2 if torch.finfo(dtype).eps > torch.finfo(torch.float32).eps else 0.0
    return atol, rtol + 2 * u / (1 - u)


#: dtype -> (atol, rtol) of the output of a baseline that normalizes the rounded sum (the dtypes whose sum is rounded
#: again: fp16 and bf16); the new residual stays bitwise.
ROUNDED_SUM_TOLERANCES = {d: rounded_sum_tolerance(d) for d in TOLERANCES
                          if rounded_sum_tolerance(d) != tolerance(d)}


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

    Returns ``(x, residual)``, the caller's own tensors. Raises before its first write what either write would raise
    (:func:`check_inplace`): a call that raises leaves ``x`` and ``residual`` as they were.

    >>> x, r = torch.randn(1, 4), torch.randn(2, 4)
    >>> r0 = r.clone()
    >>> native_(x, r)
    Traceback (most recent call last):
    RuntimeError: output with shape [1, 4] doesn't match the broadcast shape [2, 4]
    >>> torch.equal(r, r0)
    True
    """
    check_inplace(x, residual, weight)
    out, new_residual = native(x, residual, weight, eps)
    check_inplace(x, residual, weight, results=(out, new_residual))
    residual.copy_(new_residual)
    x.copy_(out)
    return x, residual


_VMAP = ("vmap: inplace arithmetic(self, *extra_args) is not possible because there exists a Tensor `other` in "
         "extra_args that has more elements than `self`. This happened due to `other` being vmapped over but `self` "
         "not being vmapped over in a vmap. Please try to use out-of-place operators instead of inplace arithmetic. "
         "If said operator is being called inside the PyTorch framework, please file a bug report instead.")
_INFERENCE = ("Inplace update to inference tensor outside InferenceMode is not allowed.You can make a clone to get a "
              "normal tensor before doing inplace update.See https://github.com/pytorch/rfcs/pull/17 for more details.")
_TRACKED = ("Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify your code by "
            "moving both the view and the inplace either both inside the {block} block (if you don't want the "
            "inplace to be tracked) or both outside (if you want the inplace to be tracked).")
#: creation of a view -> PyTorch's message when autograd refuses to rebase it on an in-place write
_REFUSED_VIEWS = {
    "NO_GRAD_MODE": "A view was created in no_grad mode and is being modified inplace with grad mode enabled. "
                    + _TRACKED.format(block="no_grad"),
    "INFERENCE_MODE": "A view was created in inference mode and is being modified inplace in normal mode. "
                      + _TRACKED.format(block="inference_mode"),
    "MULTI_OUTPUT_NODE": "Output {i} of {fn} is a view and is being modified inplace. This view is the output of a "
                         "function that returns multiple views. Such functions do not allow the output views to be "
                         "modified inplace. You should replace the inplace operation by an out-of-place one.",
    "IN_CUSTOM_FUNCTION": "Output {i} of {fn} is a view and is being modified inplace. This view was created inside a "
                          "custom Function (or because an input was returned as-is) and the autograd logic to handle "
                          "view+inplace would override the custom backward associated with the custom Function, "
                          "leading to incorrect gradients. This behavior is forbidden. You can fix this by cloning "
                          "the output of the custom Function.",
}
_OVERLAP = ("unsupported operation: more than one element of the written-to tensor refers to a single memory "
            "location. Please clone() the tensor before performing the operation.")
_WRAPPED = torch._C._functorch.is_functorch_wrapped_tensor


def _batch_level(t: torch.Tensor | None) -> int:
    """The vmap level ``t`` is batched at (-1: not batched)."""
    if t is None or not torch._C._functorch.is_batchedtensor(t):
        return -1
    return torch._C._functorch.maybe_get_level(t)


def _view_refused(t: torch.Tensor) -> str | None:
    """PyTorch's message for a view autograd refuses to rebase on an in-place write (``None``: not such a view)."""
    meta = torch._C._autograd._get_creation_meta(t).name
    if meta == "DEFAULT":
        return None
    fn = t.grad_fn.name().rstrip("0123456789").removesuffix("Backward") if t.grad_fn is not None else "a function"
    return _REFUSED_VIEWS.get(meta, f"A view ({meta}) is being modified inplace with grad mode enabled.").format(
        i=t.output_nr, fn=fn)


def check_inplace(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None = None, *,
                  results: tuple[torch.Tensor, torch.Tensor] | None = None) -> None:
    """Raise what writing the in-place form's results into ``x`` and ``residual`` would raise, before either write.

    Without ``results``: the rules about the written tensors themselves, ``x`` first (vmap batching, inference
    tensors, autograd's in-place rules while it records). With ``results=(out, new_residual)``: whether each fits
    where it goes (no rows sharing memory, the broadcast shape, a dtype ``copy_`` may cast to as PyTorch's in-place
    arithmetic allows). Under ``torch.compile`` the composite is traced on fake tensors before anything runs, so a
    write that cannot happen fails the trace; these eager checks are skipped there.

    >>> check_inplace(torch.randn(2, 4, requires_grad=True), torch.randn(2, 4))
    Traceback (most recent call last):
    RuntimeError: a leaf Variable that requires grad is being used in an in-place operation.
    """
    if torch.compiler.is_compiling():
        return
    written = (x, residual)
    if results is None:
        top = max(_batch_level(t) for t in (x, residual, weight))
        recording = torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (x, residual, weight))
        for t in written:
            if top > -1 and _batch_level(t) < top:
                raise RuntimeError(_VMAP)
            if t.is_inference() and not torch.is_inference_mode_enabled():
                raise RuntimeError(_INFERENCE)
            if not recording or _WRAPPED(t):
                continue
            refused = _view_refused(t) if t._is_view() else None
            if refused:
                raise RuntimeError(refused)
            if t.requires_grad and t._is_view() and t._base.is_leaf:
                raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place "
                                   "operation.")
            if t.requires_grad and t.is_leaf:
                raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
        return
    for dst, src in zip(written, results):
        if not _WRAPPED(dst) and torch._debug_has_internal_overlap(dst) == 1:
            raise RuntimeError(_OVERLAP)
        if dst.shape != src.shape:
            raise RuntimeError(f"output with shape {list(dst.shape)} doesn't match the broadcast shape "
                               f"{list(src.shape)}")
        if not torch.can_cast(torch.promote_types(src.dtype, dst.dtype), dst.dtype):
            torch.empty(0, dtype=dst.dtype).add_(torch.empty(0, dtype=src.dtype))  # raises PyTorch's own message
            raise RuntimeError(f"result type {src.dtype} can't be cast to the desired output type {dst.dtype}")


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
