"""The public RMSNorm operator: a front door that decides cheaply, and a ``torch.library.custom_op`` for compile.

:func:`rms_norm` evaluates :func:`~fastpath_lib.rmsnorm.predicate.eligible` (booleans, cheapest and most decisive
first) and calls ``torch.nn.functional.rms_norm`` directly when it fails: a call outside the region costs the
baseline plus that decision (held to :data:`~fastpath_lib.bench.ophost.TARGET_RATIO` of the baseline's host time by
the host family), and the fallback is the reference itself (values, strides, errors, autograd, forward-mode AD,
``torch.func`` transforms, subclasses). Reasons are computed only when asked (:func:`explain`,
``record_routes(reasons=True)``).

Inside the region:

* eager, no gradient needed: the forward launcher is called directly;
* eager, with autograd: a ``torch.autograd.Function`` around the launchers (the same ``setup_context`` and backward as
  the custom op);
* under ``torch.compile``, a ``__torch_dispatch__`` mode, or CUDA autocast: ``fastpath::rms_norm``, a ``custom_op``
  with ``register_fake`` (``F.rms_norm`` on the fake tensors), ``register_autograd``, ``register_autocast`` (fp32 on
  CUDA from torch 2.12, as ``F.rms_norm``) and ``register_vmap`` (the batch folds into rows). The static conditions
  became guards; the op re-checks what only run time knows (alignment, capture, and the sizes a tracer held
  symbolically: ``torch.export``'s dynamic dims, ``compile(dynamic=True)``) and falls back inside when needed, so one
  graph serves a dynamic range on both sides of the row threshold.

Both routes of the op return contiguous tensors of the input's dtype, as ``F.rms_norm`` does for eligible inputs.
A DTensor call is decided in one place, before any dispatch (:func:`_dtensor_call`): the op with its sharding rule
(:mod:`fastpath_lib.rmsnorm.sharding`), which runs it on each rank's local shard.
"""

from __future__ import annotations

import numbers

import torch
import torch.nn.functional as F

from fastpath_lib import routing
from fastpath_lib.eligibility import Decision
from fastpath_lib.rmsnorm import sharding
from fastpath_lib.rmsnorm.layout import PLAIN_TYPES, as_rows
from fastpath_lib.rmsnorm.predicate import PREDICATE, default_eps, eligible, make_call, runtime_eligible

__all__ = ["rms_norm", "explain", "autocast_fp32_devices"]

_state = routing.state
_kernels = None


def _k():
    """The kernel module, imported on first use so that the interpreter opt-in can come first."""
    global _kernels
    if _kernels is None:
        from fastpath_lib.rmsnorm import kernels

        _kernels = kernels
    return _kernels


def _torch_version() -> tuple[int, int]:
    major, minor = torch.__version__.split("+")[0].split(".")[:2]
    return int(major), int(minor)


def autocast_fp32_devices() -> tuple[str, ...]:
    """Device types on which this torch's autocast runs ``rms_norm`` in fp32 (CUDA from torch 2.12 on)."""
    return ("cuda",) if _torch_version() >= (2, 12) else ()


_CUDA_AUTOCAST = "cuda" in autocast_fp32_devices()


def explain(input: torch.Tensor, normalized_shape, weight: torch.Tensor | None = None,
            eps: float | None = None) -> Decision:
    """Say which route ``rms_norm`` would take for these arguments now, and why.

    Args:
        input, normalized_shape, weight, eps: as for :func:`rms_norm`.

    Returns:
        a :class:`~fastpath_lib.eligibility.Decision` with ``eligible``, ``route`` (``"triton"`` or ``"fallback"``)
        and ``reasons`` (one per failed condition, with the actual and the required value).

    Note:
        Safe on fake and meta tensors: conditions that need a data pointer report "unknown until run time". On a
        DTensor, the predicate runs on what this rank's call of the op receives
        (:func:`~fastpath_lib.rmsnorm.sharding.local_args`).

    >>> import torch
    >>> explain(torch.randn(16, 64).t(), [16]).route
    'fallback'
    """
    if type(input) not in PLAIN_TYPES and sharding.takes(input, normalized_shape, weight, eps, _state.forced):
        return sharding.explain(input, normalized_shape, weight, eps, _state.forced)
    return PREDICATE.evaluate(make_call(input, normalized_shape, weight, eps, forced=_state.forced))


def _eps(input: torch.Tensor, eps: float | None) -> float:
    return default_eps(input.dtype) if eps is None else float(eps)


def _record_fallback(phase, input, normalized_shape, weight, eps) -> None:
    failed = None
    if routing.wants_reasons(phase):
        failed = explain(input, normalized_shape, weight, eps).failed
    routing.record(phase, PREDICATE.fallback_route, failed)


def _recorded_fallback(input, normalized_shape, weight, eps):
    """``F.rms_norm`` while someone records routes: count this call, and its backward pass when it comes."""
    _record_fallback("forward", input, normalized_shape, weight, eps)
    out = F.rms_norm(input, normalized_shape, weight, eps)
    if out.grad_fn is not None:
        out.grad_fn.register_hook(lambda *_: _state.recorders and routing.record("backward",
                                                                                 PREDICATE.fallback_route))
    return out


def _now_eligible(input, normalized_shape, weight, path: str | None) -> bool:
    """Inside the custom ops (``path="custom_op"``) and the backward both paths share (``path=None``)."""
    return eligible(input, normalized_shape, weight, _state.forced) and runtime_eligible(input, weight, path=path)


def _forward(input, weight, eps):
    """The Triton forward on an eligible input: a new contiguous tensor of the input's shape and dtype."""
    return _k().forward(as_rows(input), weight, _eps(input, eps)).view(input.shape)


def _backward_impl(grad, input, normalized_shape, weight, eps):
    """``(dx, dw)``; the Triton backward where eligible, else the reference's (``dw`` empty without weight)."""
    if _now_eligible(input, normalized_shape, weight, None):
        if _state.recorders:
            routing.record("backward", PREDICATE.fast_route)
        grad_rows = grad.contiguous().view(-1, input.shape[-1])  # upstream grads are often expanded (stride 0)
        dx, dw = _k().backward(grad_rows, as_rows(input), weight, _eps(input, eps))
        return dx.view(input.shape), (dw if dw is not None else input.new_empty(0))
    if _state.recorders:
        _record_fallback("backward", input, normalized_shape, weight, eps)
    dx, dw = _reference_grads(grad, input, normalized_shape, weight, eps, create_graph=False)
    return dx.contiguous(), (dw.contiguous() if dw is not None else input.new_empty(0))


@torch.library.custom_op("fastpath::rms_norm", mutates_args=())
def _rms_norm_op(input: torch.Tensor, normalized_shape: list[int], weight: torch.Tensor | None,
                 eps: float | None) -> torch.Tensor:
    if _now_eligible(input, normalized_shape, weight, "custom_op"):
        if _state.recorders:
            routing.record("forward", PREDICATE.fast_route)
        return _forward(input, weight, eps)
    if _state.recorders:
        _record_fallback("forward", input, normalized_shape, weight, eps)
    return F.rms_norm(input, normalized_shape, weight, eps).contiguous()


@_rms_norm_op.register_fake
def _(input, normalized_shape, weight, eps):
    return F.rms_norm(input, normalized_shape, weight, eps).contiguous()


@torch.library.custom_op("fastpath::rms_norm_backward", mutates_args=())
def _rms_norm_backward_op(grad: torch.Tensor, input: torch.Tensor, normalized_shape: list[int],
                          weight: torch.Tensor | None, eps: float | None) -> tuple[torch.Tensor, torch.Tensor]:
    return _backward_impl(grad, input, normalized_shape, weight, eps)


@_rms_norm_backward_op.register_fake
def _(grad, input, normalized_shape, weight, eps):
    dw = torch.empty_like(weight, memory_format=torch.contiguous_format) if weight is not None else input.new_empty(0)
    return torch.empty_like(input, memory_format=torch.contiguous_format), dw


def _reference_grads(grad, input, normalized_shape, weight, eps, *, create_graph):
    """Gradients of ``F.rms_norm`` itself (the fallback's backward); ``(dx, dw)``, ``dw`` ``None`` without weight.

    With ``create_graph`` (called at the autograd level) ``torch.autograd.grad`` keeps the graph for higher orders.
    Inside an op's implementation autograd is already below us, so the first-order gradients are the reference's
    formula, computed in its op-math dtype (fp32, or fp64 for fp64 tensors) like ``F.rms_norm``'s own backward:
    ``dx = rstd * (g*w - x * rstd^2 * mean(g*w*x))`` and ``dw = sum over rows of g * x * rstd``.
    """
    if create_graph:
        wanted = [t for t in (input, weight) if t is not None and t.requires_grad]
        got = torch.autograd.grad(F.rms_norm(input, normalized_shape, weight, eps), wanted, grad, create_graph=True)
        by_id = {id(t): g for t, g in zip(wanted, got)}
        return by_id.get(id(input)), (by_id.get(id(weight)) if weight is not None else None)
    wide = input.dtype == torch.float64 or (weight is not None and weight.dtype == torch.float64)
    acc = torch.float64 if wide else torch.float32
    dims = tuple(range(-len(normalized_shape), 0))
    x, g = input.to(acc), grad.to(acc)
    rstd = torch.rsqrt(x.pow(2).mean(dims, keepdim=True) + _eps(input, eps))
    gw = g * weight.to(acc) if weight is not None else g
    dx = (rstd * (gw - x * rstd.pow(2) * (gw * x).mean(dims, keepdim=True))).to(input.dtype)
    if weight is None:
        return dx, None
    lead = tuple(range(input.dim() - len(normalized_shape)))
    gxr = g * x * rstd
    return dx, (gxr.sum(lead) if lead else gxr).to(weight.dtype)


def _setup_context(ctx, inputs, output):
    input, normalized_shape, weight, eps = inputs
    ctx.save_for_backward(input, weight)
    ctx.normalized_shape, ctx.eps = normalized_shape, eps


def _backward_with(first_order):
    """The autograd formula, given how to compute first-order ``(dx, dw)`` (the custom op, or eagerly)."""

    def backward(ctx, grad):
        input, weight = ctx.saved_tensors
        if torch.is_grad_enabled():  # create_graph=True: differentiate the reference so higher orders work
            if _state.recorders:
                routing.record("backward", PREDICATE.fallback_route, ["grad_order"])
            dx, dw = _reference_grads(grad, input, ctx.normalized_shape, weight, ctx.eps, create_graph=True)
        else:
            dx, dw = first_order(grad, input, ctx.normalized_shape, weight, ctx.eps)
        need_x, _, need_w, _ = ctx.needs_input_grad
        return (dx if need_x else None), None, (dw if weight is not None and need_w else None), None

    return backward


_rms_norm_op.register_autograd(_backward_with(_rms_norm_backward_op), setup_context=_setup_context)
for _device_type in autocast_fp32_devices():
    torch.library.register_autocast("fastpath::rms_norm", _device_type, torch.float32)


@torch.library.register_vmap("fastpath::rms_norm")
def _vmap_rule(info, in_dims, input, normalized_shape, weight, eps):
    """Fold the vmapped batch into rows (one launch for the whole batch); per-sample weights use the reference."""
    x_dim, _, w_dim, _ = in_dims
    if w_dim is not None:
        x = input.movedim(x_dim, 0) if x_dim is not None else input.expand(info.batch_size, *input.shape)
        w = weight.movedim(w_dim, 0)
        return torch.stack([F.rms_norm(x[i], normalized_shape, w[i], eps) for i in range(info.batch_size)]), 0
    return _rms_norm_op(input.movedim(x_dim, 0), normalized_shape, weight, eps), 0


class _EagerRMSNorm(torch.autograd.Function):
    """Eager autograd around the launchers: no custom-op dispatch on the way in or out."""

    @staticmethod
    def forward(input, normalized_shape, weight, eps):
        return _forward(input, weight, eps)

    setup_context = staticmethod(_setup_context)
    backward = staticmethod(_backward_with(_backward_impl))


def _wants_op(input: torch.Tensor) -> bool:
    """Calls that must see ``fastpath::rms_norm`` itself: compile, dispatch modes, tracing tensors, CUDA autocast."""
    return (torch.compiler.is_compiling() or torch._C._len_torch_dispatch_stack() > 0 or type(input) is not torch.Tensor
            or (_CUDA_AUTOCAST and input.is_cuda and torch.is_autocast_enabled("cuda")))


def _distributed(input) -> bool:
    """Whether the input is a DTensor (cheap for plain tensors: one type test)."""
    return type(input) not in PLAIN_TYPES and sharding.is_dtensor(input)


def _dtensor_call(input, normalized_shape, weight, eps):
    """A DTensor call, decided here before any dispatch (the one place the op handles DTensor): the op under its
    sharding rule where :func:`~fastpath_lib.rmsnorm.sharding.takes` accepts, which runs it on each rank's local
    shard; ``F.rms_norm`` on the DTensor otherwise."""
    if sharding.takes(input, normalized_shape, weight, eps, _state.forced):
        return sharding.rms_norm(input, normalized_shape, weight, eps)
    if _state.recorders and not torch.compiler.is_compiling():
        return _recorded_fallback(input, normalized_shape, weight, eps)
    return F.rms_norm(input, normalized_shape, weight, eps)


def rms_norm(input: torch.Tensor, normalized_shape, weight: torch.Tensor | None = None,
             eps: float | None = None) -> torch.Tensor:
    """RMSNorm with the contract of ``torch.nn.functional.rms_norm`` and a Triton fast path where eligible.

    Args:
        input: tensor whose trailing dims match ``normalized_shape``.
        normalized_shape: list, tuple or ``torch.Size`` of the normalized trailing dims.
        weight: optional elementwise scale of shape ``normalized_shape``.
        eps: added to the mean square; ``None`` uses ``F.rms_norm``'s default.

    Returns:
        what ``F.rms_norm`` returns: a tensor of the input's dtype and shape (contiguous on the Triton route).

    Note:
        Without CUDA the Triton route runs only under Triton's interpreter (:func:`fastpath_lib.use_interpreter`);
        otherwise every CPU call is ``F.rms_norm``. :func:`explain` says which route a call takes and why;
        :func:`fastpath_lib.record_routes` counts the routes taken.

    >>> import torch
    >>> x = torch.randn(16, 64)
    >>> torch.allclose(rms_norm(x, [64]), torch.nn.functional.rms_norm(x, [64]), atol=1e-5)
    True
    """
    if _distributed(input):
        return _dtensor_call(input, normalized_shape, weight, eps)
    if not eligible(input, normalized_shape, weight, _state.forced) or not (
            eps is None or (isinstance(eps, numbers.Real) and not isinstance(eps, bool))):
        if _state.recorders and not torch.compiler.is_compiling():  # compiled: plain F.rms_norm in the graph
            return _recorded_fallback(input, normalized_shape, weight, eps)
        return F.rms_norm(input, normalized_shape, weight, eps)
    if _wants_op(input):
        return _rms_norm_op(input, list(normalized_shape), weight, None if eps is None else float(eps))
    if not runtime_eligible(input, weight):
        if _state.recorders:
            return _recorded_fallback(input, normalized_shape, weight, eps)
        return F.rms_norm(input, normalized_shape, weight, eps)
    if _state.recorders:
        routing.record("forward", PREDICATE.fast_route)
    if torch.is_grad_enabled() and (input.requires_grad or (weight is not None and weight.requires_grad)):
        return _EagerRMSNorm.apply(input, normalized_shape, weight, eps)
    return _forward(input, weight, eps)
