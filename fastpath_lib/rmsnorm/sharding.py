"""RMSNorm on DTensors: the sharding rules of the kit's ops (``fastpath::rms_norm``, the fused op, their backwards).

RMSNorm reduces each row over its last dimension and nothing else, so a row shard is a whole problem: a DTensor
sharded on a leading dimension (``Shard(0)``, the token dim of a sequence- or data-parallel activation) with a
replicated weight runs the op on each rank's local rows and keeps its placement, with no communication. The rule
(:func:`forward_rule`, :func:`backward_rule`) says so to DTensor's sharding propagation, as torch's own rule for
``aten._fused_rms_norm`` does:

* forward: ``Shard(d)`` in and out for every leading dim ``d``, the weight ``Replicate``; or all ``Replicate``;
* backward: ``dx`` is sharded like the input; ``dw``, the sum over rows, is ``Partial("sum")``: each rank holds its
  rows' share, and reading it (``full_tensor()``, ``redistribute(..., [Replicate()])``) all-reduces, as for
  ``F.rms_norm`` on the same DTensor.

Any other placement is redistributed to one of those first, by DTensor, at the cost it chooses: an input sharded
on the normalized dim (``Shard(-1)``, where ``F.rms_norm`` raises in torch 2.13 and 2.14: its decomposition adds
``eps`` in place to a partial mean) is all-to-all'ed or gathered to rows; a partial input is reduced; a sharded
weight is gathered. The output then has the rule's placement, not the input's: a DTensor's value is the global
tensor, its placement a layout. The local calls are ordinary calls of the op, so each rank decides its own route
with the predicate on its local shard (rows, alignment, device), falls back inside the op where it fails, and
records it with :func:`fastpath_lib.record_routes`; :func:`explain` finds that shard with DTensor's own sharding
propagation, without communication, so ``fastpath_lib.explain`` on a DTensor says the route this rank's call takes.

The fused residual-add + RMSNorm (:mod:`fastpath_lib.fused.op`) gets the same rule with ``x`` and ``residual``
placed alike (:func:`fused_forward_rule`, :func:`fused_backward_rule`); its in-place form
(:func:`fused_inplace_rule`) takes the sharded route only where the placements are kept, since DTensor cannot write
a redistributed copy back into its arguments: elsewhere it takes the composite, as before.

Registering a rule is process-wide (DTensor keeps one table of rules), so importing the kit does not do it:
:func:`register` runs on the first DTensor call or ``explain`` of either op (or explicitly, before calling
``torch.ops.fastpath`` ops on DTensors yourself), and registers all five ops. Only the kit's own ops get a rule.

Note:
    This module imports ``torch.distributed.tensor`` only inside the functions a DTensor call reaches; a process
    that never made a DTensor never loads it, and :func:`is_dtensor` answers without importing it.
"""

from __future__ import annotations

import numbers
import sys

import torch
import torch.autograd.forward_ad as _fwad

from fastpath_lib.eligibility import Decision
from fastpath_lib.rmsnorm.predicate import PREDICATE, make_call

__all__ = ["OPS", "is_dtensor", "takes", "takes_fused", "local_shards", "local_args", "explain", "register",
           "registered", "like", "placed_like", "forward_rule", "backward_rule", "fused_forward_rule",
           "fused_inplace_rule", "fused_backward_rule", "rms_norm"]

#: The ops the rule covers, by their qualified names.
OPS = ("fastpath::rms_norm", "fastpath::rms_norm_backward", "fastpath::fused_add_rms_norm",
       "fastpath::fused_add_rms_norm_", "fastpath::fused_add_rms_norm_backward")

_registered = False


def is_dtensor(t) -> bool:
    """Whether ``t`` is a DTensor (``False`` in a process that never imported ``torch.distributed.tensor``)."""
    mod = sys.modules.get("torch.distributed.tensor")
    cls = getattr(mod, "DTensor", None) if mod is not None else None
    return cls is not None and isinstance(t, cls)


def takes(input, normalized_shape, weight, eps, forced: bool) -> bool:
    """Whether a call of :func:`fastpath_lib.rms_norm` takes the sharded route: cheap, and never raises.

    It does when the input is a DTensor normalized over its last dim only (``normalized_shape`` one int equal to its
    width), the weight is absent or a 1-d DTensor of that width on the input's mesh, ``eps`` is a number or
    ``None``, the fallback is not forced, and no forward-mode AD level or ``torch.func`` transform is active (those
    keep ``F.rms_norm``'s own rules, as for plain tensors). Everything else goes to ``F.rms_norm`` on the DTensor,
    which raises its own errors for invalid calls.
    """
    if forced or not is_dtensor(input) or _fwad._current_level >= 0 or torch._C._are_functorch_transforms_active():
        return False
    if eps is not None and (not isinstance(eps, numbers.Real) or isinstance(eps, bool)):
        return False
    try:
        if type(normalized_shape) not in (list, tuple, torch.Size) or len(normalized_shape) != 1 or not input.dim():
            return False
        n = input.shape[-1]
        if normalized_shape[0] != n or not isinstance(normalized_shape[0], int):
            return False
        return weight is None or (is_dtensor(weight) and weight.dim() == 1 and weight.shape[0] == n
                                  and weight.device_mesh == input.device_mesh)
    except (RuntimeError, TypeError):
        return False


def like(grad, ref):
    """``grad`` as a DTensor placed like ``ref`` where autograd handed a plain tensor for a DTensor output.

    Autograd materializes the gradient of an unused output as plain zeros of the global shape; each rank holds the
    same values, so each takes its own shard with no communication (``src_data_rank=None``).
    """
    if grad is None or not is_dtensor(ref) or is_dtensor(grad):
        return grad
    from torch.distributed.tensor import distribute_tensor

    return distribute_tensor(grad, ref.device_mesh, ref.placements, src_data_rank=None)


def placed_like(t, dst):
    """``t`` (a DTensor result) redistributed to the placements of ``dst``, the DTensor it will be written into.

    DTensor's ``copy_`` redistributes its source, but not to every placement: into a ``Partial`` it takes a
    ``Replicate`` source (a ``Shard`` one raises), and ``redistribute`` itself refuses to make a ``Partial``. So a
    result for a partial tensor is replicated, and ``copy_`` does the rest. Called before anything is written, so a
    call that cannot be placed raises with nothing written.
    """
    if not (is_dtensor(t) and is_dtensor(dst)) or tuple(t.placements) == tuple(dst.placements):
        return t
    from torch.distributed.tensor import Replicate

    return t.redistribute(dst.device_mesh, [Replicate() if p.is_partial() else p for p in dst.placements])


def local_shards(input, weight, *more):
    """``(local input, local weight, *local more)`` the op runs on where the rule keeps the placements, else ``None``.

    Kept: the input (and each of ``more``, with the input's placements) ``Replicate`` or ``Shard`` on a leading dim
    on every mesh dim, the weight absent or replicated.
    """
    from torch.distributed.tensor import Replicate, Shard

    rows = input.dim() - 1
    if not all(type(p) is Replicate or (type(p) is Shard and p.dim < rows) for p in input.placements):
        return None
    if weight is not None and not all(type(p) is Replicate for p in weight.placements):
        return None
    if any(m.placements != input.placements for m in more):
        return None
    return input.to_local(), (None if weight is None else weight.to_local()), *(m.to_local() for m in more)


def local_args(op, args) -> tuple:
    """``args`` as each call of ``op`` on this rank receives them, found without communication.

    DTensor's sharding propagation (the one that runs the call, with the rules registered) picks each DTensor
    argument's placements. An argument it keeps is its local tensor; one it redistributes reaches the op as the
    redistribution's result, a new contiguous tensor of the local shape the new placements give this rank: here a new
    tensor of that shape, dtype and device stands for it (allocated, as the redistribution allocates it). Other
    arguments are returned as they are.
    """
    register()
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

    dispatcher = DTensor._op_dispatcher
    info = dispatcher.unwrap_to_op_info(op, tuple(args), {})
    dispatcher.sharding_propagator.propagate(info)
    sharding_out = info.output_sharding
    target = info.flat_args_schema
    if sharding_out.needs_redistribute and sharding_out.redistribute_schema is not None:
        target = sharding_out.redistribute_schema.args_schema
    local = []
    for arg, spec, local_arg, to in zip(args, info.flat_args_schema, info.local_args, target):
        if not is_dtensor(arg) or spec == to:
            local.append(local_arg if is_dtensor(arg) else arg)
            continue
        shape, _ = compute_local_shape_and_global_offset(to.shape, to.mesh, to.placements)
        local.append(torch.empty(shape, dtype=local_arg.dtype, device=local_arg.device))
    return tuple(local)


def explain(input, normalized_shape, weight, eps, forced: bool) -> Decision:
    """The decision for a DTensor call :func:`takes` accepted: the predicate on what this rank's call of the op
    receives (:func:`local_args`), its local shards or, where the rule redistributes, the redistributed ones."""
    x, _, w, _ = local_args(torch.ops.fastpath.rms_norm.default, (input, list(normalized_shape), weight,
                                                                  None if eps is None else float(eps)))
    return PREDICATE.evaluate(make_call(x, normalized_shape, w, eps, forced=forced))


def _leading_dims(input_spec, normalized_shape) -> range:
    return range(input_spec.ndim - len(normalized_shape))


def forward_rule(input, normalized_shape, weight, eps):
    """The acceptable ``(output placements, input placements)`` of ``fastpath::rms_norm`` on one mesh dim.

    ``input`` and ``weight`` are DTensor's specs (``weight`` may be ``None``); the non-tensor arguments get ``None``.
    """
    from torch.distributed.tensor import Replicate, Shard

    w = Replicate() if weight is not None else None
    rules = [([Replicate()], [Replicate(), None, w, None])]
    rules += [([Shard(d)], [Shard(d), None, w, None]) for d in _leading_dims(input, normalized_shape)]
    return rules


def backward_rule(grad, input, normalized_shape, weight, eps):
    """The acceptable placements of ``fastpath::rms_norm_backward``: ``(dx, dw)`` from ``(grad, input, weight)``.

    ``dw`` sums over rows, so under a row shard each rank holds a partial sum; without a weight the op returns an
    empty ``dw``, replicated.
    """
    from torch.distributed.tensor import Partial, Replicate, Shard

    w = Replicate() if weight is not None else None
    rules = [([Replicate(), Replicate()], [Replicate(), Replicate(), None, w, None])]
    for d in _leading_dims(input, normalized_shape):
        dw = Partial("sum") if weight is not None else Replicate()
        rules.append(([Shard(d), dw], [Shard(d), Shard(d), None, w, None]))
    return rules


def takes_fused(x, residual, weight, eps, forced: bool, inplace: bool) -> bool:
    """Whether a call of :func:`fastpath_lib.fused_add_rms_norm` (``inplace``: ``fused_add_rms_norm_``) takes the
    sharded route: ``x`` and ``residual`` DTensors of one shape on one mesh, the weight as for :func:`takes`.

    The in-place form also needs placements the rule keeps (:func:`local_shards`: DTensor cannot write a
    redistributed copy back into its argument) and no input that requires grad (as for plain tensors, such calls
    take the composite, which raises autograd's own error).
    """
    if not (is_dtensor(x) and is_dtensor(residual) and x.dim()) or not takes(x, [x.shape[-1]], weight, eps, forced):
        return False
    if residual.shape != x.shape or residual.device_mesh != x.device_mesh:
        return False
    if not inplace:
        return True
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (x, residual, weight)):
        return False
    return local_shards(x, weight, residual) is not None


def _rows_rules(n_out_rows, row_inputs, weight, dims, partial_last=False):
    """Rules for ops on row tensors: every row tensor ``Shard(d)`` for a leading dim ``d`` in ``dims``, or all
    ``Replicate``. The inputs are ``row_inputs`` (``None`` entries stay ``None``), then the weight, then ``eps``; the
    outputs ``n_out_rows`` row tensors, then (``partial_last``) a weight gradient, partial under a row shard."""
    from torch.distributed.tensor import Partial, Replicate, Shard

    w = Replicate() if weight is not None else None
    last = Partial("sum") if weight is not None else Replicate()
    rules = []
    for p in [Replicate(), *(Shard(d) for d in dims)]:
        out = [p] * n_out_rows + ([last if isinstance(p, Shard) else Replicate()] if partial_last else [])
        rules.append((out, [None if t is None else p for t in row_inputs] + [w, None]))
    return rules


def fused_forward_rule(x, residual, weight, eps):
    """``fastpath::fused_add_rms_norm``: ``(out, new_residual)`` placed like ``x`` and ``residual``."""
    return _rows_rules(2, [x, residual], weight, range(x.ndim - 1))


def fused_inplace_rule(x, residual, weight, eps):
    """``fastpath::fused_add_rms_norm_``: no outputs; writes ``x`` and ``residual`` where they are.

    So both keep their placements: they must be placed alike, and each ``Replicate`` or ``Shard`` on a leading dim.
    DTensor would otherwise redistribute to this rule's placements, and the op would write a redistributed *copy*
    (DTensor refuses that only for the first argument of an in-place op): the caller's residual would silently keep
    its old values. Such a call raises here, naming the placements (:func:`fastpath_lib.fused_add_rms_norm_` writes
    its result back into any placements).
    """
    rows = x.ndim - 1
    kept = all(type(p).__name__ == "Replicate" or (type(p).__name__ == "Shard" and p.dim < rows)
               for p in x.placements)
    if not kept or tuple(residual.placements) != tuple(x.placements):
        raise ValueError(
            f"fastpath::fused_add_rms_norm_ writes x and residual in place, so both keep their placements: they must "
            f"be placed alike, each Replicate() or Shard(d) on a leading dim d < {rows}; got x {tuple(x.placements)} "
            f"and residual {tuple(residual.placements)}. Redistribute them first, or call "
            f"fastpath_lib.fused_add_rms_norm_, which writes its result back into any placements")
    return _rows_rules(0, [x, residual], weight, range(rows))


def fused_backward_rule(grad_out, grad_res, x, residual, weight, eps):
    """``fastpath::fused_add_rms_norm_backward``: ``dx`` placed like ``x``, ``dw`` a partial sum under a row shard."""
    return _rows_rules(1, [grad_out, grad_res, x, residual], weight, range(x.ndim - 1), partial_last=True)


def register() -> None:
    """Register the rules with DTensor for the kit's ops (:data:`OPS`; process-wide, once; later calls do nothing).

    The ops must be defined first (importing :mod:`fastpath_lib` defines them). DTensor caches a rule's answer per
    input placements and per flattened non-tensor arguments, so ``normalized_shape``'s length, which decides the
    leading dims, is part of the key (``tests/rmsnorm/test_sharding.py`` checks it).
    """
    global _registered
    if _registered:
        return
    from torch.distributed.tensor.experimental import register_sharding

    ops = torch.ops.fastpath
    for op, rule in ((ops.rms_norm, forward_rule), (ops.rms_norm_backward, backward_rule),
                     (ops.fused_add_rms_norm, fused_forward_rule), (ops.fused_add_rms_norm_, fused_inplace_rule),
                     (ops.fused_add_rms_norm_backward, fused_backward_rule)):
        register_sharding(op.default)(rule)
    _registered = True


def registered() -> bool:
    """Whether :func:`register` has run in this process."""
    return _registered


def rms_norm(input, normalized_shape, weight, eps):
    """``fastpath::rms_norm`` on DTensors (a call :func:`takes` accepted): the rule registered first."""
    register()
    return torch.ops.fastpath.rms_norm(input, list(normalized_shape), weight, None if eps is None else float(eps))
