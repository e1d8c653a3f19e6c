"""The public fused residual-add + RMSNorm: a functional and an in-place form, and their ``torch.library`` ops.

:func:`fused_add_rms_norm` returns ``(out, new_residual)`` and leaves its inputs alone; :func:`fused_add_rms_norm_`
writes the output into ``x`` and the sum into ``residual`` and returns ``(x, residual)`` (PyTorch's trailing
underscore; vLLM's providers with ``inplace=True``). Both follow RMSNorm's dispatch (:mod:`fastpath_lib.rmsnorm.op`):
the predicate's booleans first, the composite (:mod:`fastpath_lib.fused.reference`, the contract itself) when they
fail; inside the region the launchers directly in eager mode, and the custom ops under ``torch.compile`` or a dispatch
mode:

* ``fastpath::fused_add_rms_norm`` (``mutates_args=()``): ``register_fake``, ``register_autograd`` (a Triton backward
  for ``x``, ``residual`` and the weight; ``create_graph`` differentiates the composite) and ``register_vmap``
  (the batch folds into rows);
* ``fastpath::fused_add_rms_norm_`` (``mutates_args=("x", "residual")``, returns nothing): functionalization under
  ``torch.compile`` turns it into the functional op plus copies; its fake writes nothing and returns nothing. It never
  sees autograd: the predicate sends an in-place call whose input requires grad to the composite.

Both ops re-check at run time what only run time knows (alignment, overlap) and take the composite inside when needed.
Routes are counted by :func:`fastpath_lib.record_routes`, and :func:`fastpath_lib.force_fallback` applies. DTensor
calls are decided in one place, before any dispatch (:func:`_dtensor_call`): the ops with their sharding rules
(:mod:`fastpath_lib.rmsnorm.sharding`; the in-place form only where the placements are kept), the composite
elsewhere, whose in-place form writes its results back into any placements. ``torch.ops.fastpath.fused_add_rms_norm_``
called on DTensors placed otherwise raises, naming the placements: DTensor would write a redistributed copy.
"""

from __future__ import annotations

import functools
import numbers

import torch

from fastpath_lib import routing
from fastpath_lib.eligibility import Decision
from fastpath_lib.fused import reference as ref
from fastpath_lib.fused.predicate import BACKWARD_MAX_COLS, PREDICATE, eligible, make_call, runtime_eligible
from fastpath_lib.rmsnorm import sharding
from fastpath_lib.rmsnorm.layout import PLAIN_TYPES, as_rows
from fastpath_lib.rmsnorm.limits import default_eps

__all__ = ["fused_add_rms_norm", "fused_add_rms_norm_", "explain", "fast_route", "fast_route_"]

_state = routing.state


@functools.cache
def _k():
    """The kernel module, imported on first use (after the interpreter opt-in)."""
    from fastpath_lib.fused import kernels

    return kernels


def explain(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None = None, eps: float | None = None,
            *, inplace: bool = False) -> Decision:
    """The route :func:`fused_add_rms_norm` (or, with ``inplace=True``, :func:`fused_add_rms_norm_`) takes, and why.

    >>> import torch
    >>> x = torch.randn(16, 64)
    >>> "no_overlap" in explain(x, x, inplace=True).failed
    True
    """
    if type(x) not in PLAIN_TYPES and sharding.takes_fused(x, residual, weight, eps, _state.forced, inplace):
        op = torch.ops.fastpath.fused_add_rms_norm_ if inplace else torch.ops.fastpath.fused_add_rms_norm
        # a DTensor: what this rank's call of the op receives (its shards, redistributed where the rule says)
        x, residual, weight, _ = sharding.local_args(op.default, (x, residual, weight,
                                                                  None if eps is None else float(eps)))
    return PREDICATE.evaluate(make_call(x, residual, weight, eps, inplace=inplace, forced=_state.forced))


def _distributed(x, residual) -> bool:
    """Whether a call has a DTensor among ``x`` and ``residual`` (cheap for plain tensors: one type test)."""
    return (type(x) not in PLAIN_TYPES or type(residual) not in PLAIN_TYPES) and (
        sharding.is_dtensor(x) or sharding.is_dtensor(residual))


def _dtensor_call(x, residual, weight, eps, inplace: bool):
    """Both forms on DTensors, decided here, before any dispatch (the one place the fused op handles DTensor).

    Where :func:`~fastpath_lib.rmsnorm.sharding.takes_fused` accepts (the in-place form: ``x`` and ``residual``
    placed alike, rows only), the op runs under its sharding rule on each rank's local shards, which the in-place form
    writes directly. Elsewhere the composite computes both results on the DTensors and, in the in-place form, places
    each like the tensor it goes into before writing either (:func:`~fastpath_lib.rmsnorm.sharding.placed_like`):
    the caller's ``x`` and ``residual`` hold the results whatever their placements, and a call that raises writes
    nothing.
    """
    if sharding.takes_fused(x, residual, weight, eps, _state.forced, inplace):
        sharding.register()  # the op runs on each rank's local shards (rmsnorm/sharding.py)
        eps = None if eps is None else float(eps)
        if not inplace:
            return _fused_op(x, residual, weight, eps)
        _fused_inplace_op(x, residual, weight, eps)
        return x, residual
    if _state.recorders and not torch.compiler.is_compiling():
        _record(PREDICATE.fallback_route, x, residual, weight, eps, inplace)
    if not inplace:
        return ref.native(x, residual, weight, eps)
    if not (sharding.is_dtensor(x) and sharding.is_dtensor(residual)):
        return ref.native_(x, residual, weight, eps)  # a DTensor with a plain tensor: DTensor's own error
    ref.check_inplace(x, residual, weight)
    out, new_residual = ref.native(x, residual, weight, eps)
    out, new_residual = sharding.placed_like(out, x), sharding.placed_like(new_residual, residual)
    ref.check_inplace(x, residual, weight, results=(out, new_residual))
    residual.copy_(new_residual)
    x.copy_(out)
    return x, residual


def _eps(x: torch.Tensor, eps: float | None) -> float:
    return default_eps(x.dtype) if eps is None else float(eps)


def _record(route: str, x, residual, weight, eps, inplace: bool, phase: str = "forward") -> None:
    failed = None
    if route == PREDICATE.fallback_route and routing.wants_reasons(phase):
        failed = explain(x, residual, weight, eps, inplace=inplace).failed
    routing.record(phase, route, failed)


def fast_route(x, residual, weight, eps):
    """The Triton forward on an eligible call: new contiguous ``(out, new_residual)`` of x's shape."""
    return _k().run(x, residual, weight, eps)


def fast_route_(x, residual, weight, eps) -> None:
    """The Triton forward writing into ``x`` and ``residual`` (an eligible in-place call: no overlap)."""
    _k().run_(x, residual, weight, eps)


def _backward_impl(grad_out, grad_res, x, residual, weight, eps):
    """``(dx, dw)`` of the functional form (``dw`` empty without weight); Triton where eligible."""
    if x.shape[-1] <= BACKWARD_MAX_COLS and eligible(x, residual, weight, _state.forced, False) \
            and runtime_eligible(x, residual, weight, False, None):  # wider: a forward without grad (a compiled graph)
        if _state.recorders:
            routing.record("backward", PREDICATE.fast_route)
        n = x.shape[-1]
        dy = grad_out.reshape(-1, n)
        ds = grad_res.reshape(-1, n) if grad_res is not None else None
        dx, dw = _k().backward(dy, ds, as_rows(x), as_rows(residual), weight, _eps(x, eps))
        return dx.view(x.shape), (dw if dw is not None else x.new_empty(0))
    if _state.recorders:
        _record(PREDICATE.fallback_route, x, residual, weight, eps, False, "backward")
    dx, dw = _first_order_grads(grad_out, grad_res, x, residual, weight, eps)
    return dx.contiguous(), (dw.contiguous() if dw is not None else x.new_empty(0))


def _first_order_grads(grad_out, grad_res, x, residual, weight, eps):
    """The backward's formula in torch, fp32 (autograd is below an op's implementation, so no autograd.grad here):
    ``ds = rstd * (g - n * mean(g * n)) + grad_res`` with ``s = x + r``, ``n = s * rstd``, ``g = dy * w``;
    ``dw = sum over rows of dy * n``. ``dx`` (= the residual's gradient) of x's dtype, ``dw`` of the weight's."""
    s = x.float() + residual.float()
    rstd = torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + _eps(x, eps))
    n, dy = s * rstd, grad_out.float()
    g = dy * weight.float() if weight is not None else dy
    ds = rstd * (g - n * (g * n).mean(-1, keepdim=True))
    if grad_res is not None:
        ds = ds + grad_res.float()
    dw = (dy * n).reshape(-1, x.shape[-1]).sum(0).to(weight.dtype) if weight is not None else None
    return ds.to(x.dtype), dw


def _composite_grads(grad_out, grad_res, x, residual, weight, eps):
    """Gradients of the composite by autograd, keeping the graph (``create_graph=True``: higher orders work)."""
    with torch.enable_grad():
        leaves = [t for t in (x, residual, weight) if t is not None]
        xs, rs = leaves[0], leaves[1]
        ws = leaves[2] if weight is not None else None
        out, s = ref.native(xs, rs, ws, eps)
        outs, grads = [out], [grad_out]
        if grad_res is not None:
            outs.append(s)
            grads.append(grad_res)
        wanted = [t for t in leaves if t.requires_grad]
        got = dict(zip(map(id, wanted), torch.autograd.grad(outs, wanted, grads, create_graph=True,
                                                             allow_unused=True)))
    zeros = torch.zeros_like
    dx = got.get(id(xs)) if got.get(id(xs)) is not None else zeros(x)
    dr = got.get(id(rs)) if got.get(id(rs)) is not None else zeros(residual)
    dw = got.get(id(ws)) if ws is not None else None
    return dx, dr, dw


@torch.library.custom_op("fastpath::fused_add_rms_norm", mutates_args=())
def _fused_op(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None,
              eps: float | None) -> tuple[torch.Tensor, torch.Tensor]:
    if eligible(x, residual, weight, _state.forced, False) and runtime_eligible(x, residual, weight, False,
                                                                                  "custom_op"):
        if _state.recorders:
            routing.record("forward", PREDICATE.fast_route)
        return fast_route(x, residual, weight, eps)
    if _state.recorders:
        _record(PREDICATE.fallback_route, x, residual, weight, eps, False)
    out, s = ref.native(x, residual, weight, eps)
    return out.contiguous(), s.contiguous()


@_fused_op.register_fake
def _(x, residual, weight, eps):
    out, s = ref.native(x, residual, weight, eps)
    return out.contiguous(), s.contiguous()


@torch.library.custom_op("fastpath::fused_add_rms_norm_", mutates_args=("x", "residual"))
def _fused_inplace_op(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None,
                      eps: float | None) -> None:
    if eligible(x, residual, weight, _state.forced, True) and runtime_eligible(x, residual, weight, True,
                                                                                 "custom_op"):
        if _state.recorders:
            routing.record("forward", PREDICATE.fast_route)
        fast_route_(x, residual, weight, eps)
        return
    if _state.recorders:
        _record(PREDICATE.fallback_route, x, residual, weight, eps, True)
    ref.native_(x, residual, weight, eps)


@_fused_inplace_op.register_fake
def _(x, residual, weight, eps):
    return None


def _unwrapped(t):
    """The tensor inside a functional wrapper, its pending updates applied (others as they are: a captured weight)."""
    if t is None or not torch._is_functional_tensor(t):
        return t
    torch._sync(t)
    return torch._from_functional_tensor(t)


@torch.library.impl("fastpath::fused_add_rms_norm_", "Functionalize")
def _functionalized(x, residual, weight, eps):
    """The in-place op under ``torch.func.functionalize``: the functional op, then both results committed to the
    caller's tensors (PyTorch's C++ functionalization has no rule for a mutable custom op and raised; the compiler's
    own functionalization, ``auto_functionalize``, does the same in a graph)."""
    inner = [_unwrapped(t) for t in (x, residual, weight)]
    with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(torch._C.DispatchKey.Functionalize)):
        out, new_residual = _fused_op(*inner, eps)
    for dst, src in ((residual, new_residual), (x, out)):
        torch._functionalize_replace(dst, src)
        torch._functionalize_commit_update(dst)
        torch._functionalize_sync(dst)


@torch.library.custom_op("fastpath::fused_add_rms_norm_backward", mutates_args=())
def _backward_op(grad_out: torch.Tensor, grad_res: torch.Tensor | None, x: torch.Tensor, residual: torch.Tensor,
                 weight: torch.Tensor | None, eps: float | None) -> tuple[torch.Tensor, torch.Tensor]:
    return _backward_impl(grad_out, grad_res, x, residual, weight, eps)


@_backward_op.register_fake
def _(grad_out, grad_res, x, residual, weight, eps):
    dw = torch.empty_like(weight, memory_format=torch.contiguous_format) if weight is not None else x.new_empty(0)
    return torch.empty_like(x, memory_format=torch.contiguous_format), dw


def _setup_context(ctx, inputs, output):
    x, residual, weight, eps = inputs
    ctx.save_for_backward(x, residual, weight)
    ctx.eps = eps


def _backward_with(first_order):
    def backward(ctx, grad_out, grad_res):
        x, residual, weight = ctx.saved_tensors
        grad_out, grad_res = sharding.like(grad_out, x), sharding.like(grad_res, x)  # DTensor: unused output's zeros
        need_x, need_r, need_w, _ = ctx.needs_input_grad
        if torch.is_grad_enabled():  # create_graph=True: differentiate the composite so higher orders work
            if _state.recorders:
                routing.record("backward", PREDICATE.fallback_route, ["grad_order"])
            dx, dr, dw = _composite_grads(grad_out, grad_res, x, residual, weight, ctx.eps)
        else:
            dx, dw = first_order(grad_out, grad_res, x, residual, weight, ctx.eps)
            dr = dx.clone() if need_x and need_r else dx  # two gradients, two tensors
        return (dx if need_x else None), (dr if need_r else None), (dw if weight is not None and need_w else None), \
            None

    return backward


_fused_op.register_autograd(_backward_with(_backward_op), setup_context=_setup_context)


@torch.library.register_vmap("fastpath::fused_add_rms_norm")
def _vmap_rule(info, in_dims, x, residual, weight, eps):
    """The vmapped batch folds into rows (one launch); a per-sample weight uses the composite."""
    x_dim, r_dim, w_dim, _ = in_dims
    size = info.batch_size
    xb = x.movedim(x_dim, 0) if x_dim is not None else x.expand(size, *x.shape)
    rb = residual.movedim(r_dim, 0) if r_dim is not None else residual.expand(size, *residual.shape)
    if w_dim is not None:
        wb = weight.movedim(w_dim, 0)
        outs = [ref.native(xb[i], rb[i], wb[i], eps) for i in range(size)]
        return (torch.stack([o for o, _ in outs]), torch.stack([s for _, s in outs])), (0, 0)
    return _fused_op(xb, rb, weight, eps), (0, 0)


class _EagerFused(torch.autograd.Function):
    """Eager autograd around the launchers (no custom-op dispatch on the way)."""

    @staticmethod
    def forward(x, residual, weight, eps):
        return fast_route(x, residual, weight, eps)

    setup_context = staticmethod(_setup_context)
    backward = staticmethod(_backward_with(_backward_impl))


def _wants_op(x: torch.Tensor) -> bool:
    return torch.compiler.is_compiling() or torch._C._len_torch_dispatch_stack() > 0 or type(x) is not torch.Tensor


def _valid_eps(eps) -> bool:
    return eps is None or (isinstance(eps, numbers.Real) and not isinstance(eps, bool))


_FALLBACK, _OP, _FAST = 0, 1, 2


def _route(x, residual, weight, eps, inplace: bool) -> int:
    """Where one call goes, for both forms: :data:`_FALLBACK` (the composite), :data:`_OP` (the custom op, for a
    tracer, a dispatch mode or a tensor subclass, which decides again inside) or :data:`_FAST` (the launchers). The
    cheap static test first, then the run-time one; the route is recorded when someone listens."""
    if not eligible(x, residual, weight, _state.forced, inplace) or not _valid_eps(eps):
        if _state.recorders and not torch.compiler.is_compiling():
            _record(PREDICATE.fallback_route, x, residual, weight, eps, inplace)
        return _FALLBACK
    if _wants_op(x):
        return _OP
    if not runtime_eligible(x, residual, weight, inplace):
        if _state.recorders:
            _record(PREDICATE.fallback_route, x, residual, weight, eps, inplace)
        return _FALLBACK
    if _state.recorders:
        routing.record("forward", PREDICATE.fast_route)
    return _FAST


def fused_add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None = None,
                       eps: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``new_residual = x + residual``, ``out = rms_norm(new_residual) * weight``, with vLLM's rounding points.

    Args:
        x: the sub-layer's output, ``[..., cols]``.
        residual: the residual stream, x's shape and dtype.
        weight: optional ``[cols]`` scale (its dtype sets where the normalized value is rounded).
        eps: added to the mean square; ``None`` uses ``F.rms_norm``'s default for x's dtype.

    Returns:
        ``(out, new_residual)``, new tensors of x's dtype; the inputs are not modified.

    Note:
        The contract is :func:`fastpath_lib.fused.reference.native`. Without CUDA the Triton route runs only under
        the interpreter (:func:`fastpath_lib.use_interpreter`); everything else takes the composite.
        :func:`fastpath_lib.fused.op.explain` says which route and why.

    >>> import torch
    >>> x, r = torch.randn(16, 64), torch.randn(16, 64)
    >>> out, new_residual = fused_add_rms_norm(x, r, torch.ones(64))
    >>> torch.equal(new_residual, x + r)
    True
    """
    if _distributed(x, residual):
        return _dtensor_call(x, residual, weight, eps, False)
    route = _route(x, residual, weight, eps, False)
    if route == _FALLBACK:
        return ref.native(x, residual, weight, eps)
    if route == _OP:
        return _fused_op(x, residual, weight, None if eps is None else float(eps))
    if torch.is_grad_enabled() and (x.requires_grad or residual.requires_grad
                                    or (weight is not None and weight.requires_grad)):
        return _EagerFused.apply(x, residual, weight, eps)
    return fast_route(x, residual, weight, eps)


def fused_add_rms_norm_(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None = None,
                        eps: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """In-place :func:`fused_add_rms_norm`: writes the output into ``x`` and the sum into ``residual``.

    Returns:
        ``(x, residual)``, the caller's own tensors, now holding ``(out, new_residual)``.

    Note:
        Behaves like PyTorch's in-place ops: raises on a leaf that requires grad, records the writes on views, and
        bumps both version counters. ``x``, ``residual`` and ``weight`` may share memory: such calls take the
        composite, which computes both results first, then writes the residual, then ``x``.

    >>> import torch
    >>> x, r = torch.randn(16, 64), torch.randn(16, 64)
    >>> expected = fused_add_rms_norm(x, r)
    >>> out = fused_add_rms_norm_(x, r)
    >>> out[0] is x and torch.allclose(x, expected[0]) and torch.equal(r, expected[1])
    True
    """
    if _distributed(x, residual):
        return _dtensor_call(x, residual, weight, eps, True)
    route = _route(x, residual, weight, eps, True)
    if route == _FALLBACK:
        return ref.native_(x, residual, weight, eps)
    if route == _OP:
        _fused_inplace_op(x, residual, weight, None if eps is None else float(eps))
        return x, residual
    fast_route_(x, residual, weight, eps)
    torch.autograd.graph.increment_version(x)
    torch.autograd.graph.increment_version(residual)
    return x, residual
