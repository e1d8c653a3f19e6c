"""The public RMSNorm operator: a ``torch.library.custom_op`` that decides its route at run time.

``fastpath::rms_norm`` and ``fastpath::rms_norm_backward`` each evaluate :data:`~fastpath_lib.rmsnorm.predicate.PREDICATE`
on the real tensors they receive. Eligible calls launch the Triton kernels; every other call runs
``torch.nn.functional.rms_norm`` (forward) or its autograd (backward), so a fast-path limit never becomes a new error.

* ``register_fake`` runs ``F.rms_norm`` on the fake tensors, so shapes, dtypes, strides and exceptions seen while
  tracing are the reference's own. Both routes return contiguous tensors of the input's dtype, as ``F.rms_norm`` does.
* ``register_autograd`` saves the inputs and calls the backward op; with ``create_graph=True`` it differentiates the
  reference instead, so higher-order gradients work as they do for ``F.rms_norm``.
* ``register_autocast``: torch 2.12 put ``rms_norm`` on CUDA autocast's fp32 list; the op carries the same policy
  there (and none on the CPU, matching ``F.rms_norm``), so the kernels see already-cast inputs.
"""

from __future__ import annotations

import numbers

import torch
import torch.nn.functional as F

from fastpath_lib import routing
from fastpath_lib.eligibility import Decision
from fastpath_lib.rmsnorm.predicate import PREDICATE, default_eps, make_call

__all__ = ["rms_norm", "explain", "autocast_fp32_devices"]

_kernels = None


def _k():
    """The kernel module, imported on first use so that ``TRITON_INTERPRET`` is already set."""
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


def explain(input: torch.Tensor, normalized_shape, weight: torch.Tensor | None = None,
            eps: float | None = None) -> Decision:
    """Say which route ``rms_norm`` would take for these arguments now, and why.

    Args:
        input, normalized_shape, weight, eps: as for :func:`rms_norm`.

    Returns:
        a :class:`~fastpath_lib.eligibility.Decision` with ``eligible``, ``route`` (``"triton"`` or ``"fallback"``)
        and ``reasons`` (one per failed condition, with the actual and the required value).

    Note:
        Safe on fake and meta tensors: conditions that need a data pointer report "unknown until run time".

    >>> import torch
    >>> explain(torch.randn(16, 64).t(), [16]).route
    'fallback'
    """
    return PREDICATE.evaluate(make_call(input, normalized_shape, weight, eps))


def _eps(input: torch.Tensor, eps: float | None) -> float:
    return default_eps(input.dtype) if eps is None else float(eps)


def _as_rows(t: torch.Tensor) -> torch.Tensor:
    """A 2-D ``[rows, cols]`` view (the predicate guarantees one exists)."""
    return t.view(-1, t.shape[-1]) if t.is_contiguous() else _strided_rows(t)


def _strided_rows(t: torch.Tensor) -> torch.Tensor:
    from fastpath_lib.rmsnorm.predicate import _row_stride

    rows = t.numel() // t.shape[-1]
    return t.as_strided((rows, t.shape[-1]), (_row_stride(t), 1))


@torch.library.custom_op("fastpath::rms_norm", mutates_args=())
def _rms_norm_op(input: torch.Tensor, normalized_shape: list[int], weight: torch.Tensor | None,
                 eps: float | None) -> torch.Tensor:
    decision = PREDICATE.evaluate(make_call(input, normalized_shape, weight, eps))
    routing.record("forward", decision.route)
    if not decision.eligible:
        return F.rms_norm(input, normalized_shape, weight, eps).contiguous()
    y = _k().forward(_as_rows(input), weight, _eps(input, eps))
    return y.view(input.shape)


@_rms_norm_op.register_fake
def _(input, normalized_shape, weight, eps):
    return F.rms_norm(input, normalized_shape, weight, eps).contiguous()


@torch.library.custom_op("fastpath::rms_norm_backward", mutates_args=())
def _rms_norm_backward_op(grad: torch.Tensor, input: torch.Tensor, normalized_shape: list[int],
                          weight: torch.Tensor | None, eps: float | None) -> tuple[torch.Tensor, torch.Tensor]:
    decision = PREDICATE.evaluate(make_call(input, normalized_shape, weight, eps))
    routing.record("backward", decision.route)
    if decision.eligible:
        grad_rows = grad.contiguous().view(-1, input.shape[-1])  # upstream grads are often expanded (stride 0)
        dx, dw = _k().backward(grad_rows, _as_rows(input), weight, _eps(input, eps))
        return dx.view(input.shape), (dw if dw is not None else input.new_empty(0))
    dx, dw = _reference_grads(grad, input, normalized_shape, weight, eps, create_graph=False)
    return dx.contiguous(), (dw.contiguous() if dw is not None else input.new_empty(0))


@_rms_norm_backward_op.register_fake
def _(grad, input, normalized_shape, weight, eps):
    dw = torch.empty_like(weight, memory_format=torch.contiguous_format) if weight is not None else input.new_empty(0)
    return torch.empty_like(input, memory_format=torch.contiguous_format), dw


def _reference_grads(grad, input, normalized_shape, weight, eps, *, create_graph):
    """Gradients of ``F.rms_norm`` itself (the fallback's backward); ``(dx, dw)``, ``dw`` ``None`` without weight.

    Inside an op's implementation autograd is already below us, so ``torch.func.vjp`` differentiates the reference.
    With ``create_graph`` (called at the autograd level) ``torch.autograd.grad`` keeps the graph for higher orders.
    """
    if create_graph:
        wanted = [t for t in (input, weight) if t is not None and t.requires_grad]
        got = torch.autograd.grad(F.rms_norm(input, normalized_shape, weight, eps), wanted, grad, create_graph=True)
        by_id = {id(t): g for t, g in zip(wanted, got)}
        return by_id.get(id(input)), (by_id.get(id(weight)) if weight is not None else None)
    if weight is None:
        _, vjp = torch.func.vjp(lambda a: F.rms_norm(a, normalized_shape, None, eps), input)
        return vjp(grad)[0], None
    _, vjp = torch.func.vjp(lambda a, b: F.rms_norm(a, normalized_shape, b, eps), input, weight)
    return vjp(grad)


def _setup_context(ctx, inputs, output):
    input, normalized_shape, weight, eps = inputs
    ctx.save_for_backward(input, weight)
    ctx.normalized_shape, ctx.eps = normalized_shape, eps


def _backward(ctx, grad):
    input, weight = ctx.saved_tensors
    if torch.is_grad_enabled():  # create_graph=True: differentiate the reference so higher orders work
        routing.record("backward", PREDICATE.fallback_route)
        dx, dw = _reference_grads(grad, input, ctx.normalized_shape, weight, ctx.eps, create_graph=True)
    else:
        dx, dw = _rms_norm_backward_op(grad, input, ctx.normalized_shape, weight, ctx.eps)
    need_x, _, need_w, _ = ctx.needs_input_grad
    return (dx if need_x else None), None, (dw if weight is not None and need_w else None), None


_rms_norm_op.register_autograd(_backward, setup_context=_setup_context)
for _device_type in autocast_fp32_devices():
    torch.library.register_autocast("fastpath::rms_norm", _device_type, torch.float32)


def rms_norm(input: torch.Tensor, normalized_shape, weight: torch.Tensor | None = None,
             eps: float | None = None) -> torch.Tensor:
    """RMSNorm with the contract of ``torch.nn.functional.rms_norm`` and a Triton fast path where eligible.

    Args:
        input: tensor whose trailing dims match ``normalized_shape``.
        normalized_shape: list, tuple or ``torch.Size`` of the normalized trailing dims.
        weight: optional elementwise scale of shape ``normalized_shape``.
        eps: added to the mean square; ``None`` uses ``F.rms_norm``'s default.

    Returns:
        a new contiguous tensor of the input's dtype and shape.

    Note:
        Without CUDA the Triton route runs only under Triton's interpreter (``TRITON_INTERPRET=1``, which importing
        ``fastpath_lib`` sets when it is unset). :func:`explain` says which route a call takes;
        :func:`fastpath_lib.record_routes` counts the routes taken.

    >>> import torch
    >>> x = torch.randn(16, 64)
    >>> torch.allclose(rms_norm(x, [64]), torch.nn.functional.rms_norm(x, [64]), atol=1e-5)
    True
    """
    if not (isinstance(input, torch.Tensor) and isinstance(normalized_shape, (list, tuple, torch.Size))
            and all(isinstance(d, numbers.Integral) and not isinstance(d, bool) for d in normalized_shape)
            and (weight is None or isinstance(weight, torch.Tensor))
            and (eps is None or (isinstance(eps, numbers.Real) and not isinstance(eps, bool)))):
        return F.rms_norm(input, normalized_shape, weight, eps)  # raises F.rms_norm's own error for bad types
    return _rms_norm_op(input, list(normalized_shape), weight, eps)
