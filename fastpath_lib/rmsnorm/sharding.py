"""RMSNorm on DTensors: the sharding rule of ``fastpath::rms_norm`` and its backward, and the route that uses it.

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
on the normalized dim (``Shard(-1)``, where ``F.rms_norm`` raises in torch 2.13 because its decomposition adds
``eps`` in place to a partial mean) is all-to-all'ed or gathered to rows; a partial input is reduced; a sharded
weight is gathered. The output then has the rule's placement, not the input's: a DTensor's value is the global
tensor, its placement a layout. The local calls are ordinary calls of the op, so each rank decides its own route
with the predicate on its local shard (rows, alignment, device), falls back inside the op where it fails, and
records it with :func:`fastpath_lib.record_routes`.

Registering a rule is process-wide (DTensor keeps one table of rules), so importing the kit does not do it:
:func:`register` runs on the first DTensor call of :func:`fastpath_lib.rms_norm` (or explicitly, before calling
``torch.ops.fastpath.rms_norm`` on DTensors yourself). Only the kit's own ops get a rule.

Note:
    This module imports ``torch.distributed.tensor`` only inside :func:`register`; a process that never made a
    DTensor never loads it, and :func:`is_dtensor` answers without importing it.
"""

from __future__ import annotations

import dataclasses
import numbers
import sys

import torch
import torch.autograd.forward_ad as _fwad

from fastpath_lib.eligibility import UNKNOWN, Decision
from fastpath_lib.rmsnorm.predicate import PREDICATE, make_call

__all__ = ["OPS", "is_dtensor", "takes", "local_shards", "explain", "register", "registered", "forward_rule",
           "backward_rule", "rms_norm"]

#: The ops the rule covers, by their qualified names.
OPS = ("fastpath::rms_norm", "fastpath::rms_norm_backward")

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


def local_shards(input, weight):
    """``(local input, local weight)`` the op runs on where the rule keeps the placements, else ``None``.

    Kept: the input ``Replicate`` or ``Shard`` on a leading dim on every mesh dim, the weight absent or replicated.
    """
    from torch.distributed.tensor import Replicate, Shard

    rows = input.dim() - 1
    if not all(type(p) is Replicate or (type(p) is Shard and p.dim < rows) for p in input.placements):
        return None
    if weight is not None and not all(type(p) is Replicate for p in weight.placements):
        return None
    return input.to_local(), (None if weight is None else weight.to_local())


def explain(input, normalized_shape, weight, eps, forced: bool) -> Decision:
    """The decision for a DTensor call :func:`takes` accepted: the predicate on this rank's local shards.

    Where the rule redistributes first, the local tensors are not known before the op runs: ``tensor_kind`` says so
    as "unknown until run time", and the op decides on each rank when it runs.
    """
    local = local_shards(input, weight)
    if local is not None:
        return PREDICATE.evaluate(make_call(local[0], normalized_shape, local[1], eps, forced=forced))
    placed = ", ".join(repr(p) for p in input.placements)
    if weight is not None:
        placed += f" (weight {', '.join(repr(p) for p in weight.placements)})"
    kind = f"{UNKNOWN}DTensor placed {placed}, which the sharding rule redistributes before each rank's local " \
           f"tensor is checked"
    return PREDICATE.evaluate(dataclasses.replace(make_call(input, normalized_shape, weight, eps, forced=forced),
                                                  kind=kind))


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


def register() -> None:
    """Register the rule with DTensor for both ops (process-wide, once; later calls do nothing).

    The ops must be defined first (importing :mod:`fastpath_lib` defines them). DTensor caches a rule's answer per
    input placements and per flattened non-tensor arguments, so ``normalized_shape``'s length, which decides the
    leading dims, is part of the key (``tests/test_sharding.py`` checks it).
    """
    global _registered
    if _registered:
        return
    from torch.distributed.tensor.experimental import register_sharding

    register_sharding(torch.ops.fastpath.rms_norm.default)(forward_rule)
    register_sharding(torch.ops.fastpath.rms_norm_backward.default)(backward_rule)
    _registered = True


def registered() -> bool:
    """Whether :func:`register` has run in this process."""
    return _registered


def rms_norm(input, normalized_shape, weight, eps):
    """``fastpath::rms_norm`` on DTensors (a call :func:`takes` accepted): the rule registered first."""
    register()
    return torch.ops.fastpath.rms_norm(input, list(normalized_shape), weight, None if eps is None else float(eps))
