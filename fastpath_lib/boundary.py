"""Boundary points generated from a predicate's declarations, not written by hand.

:func:`boundary_points` walks every condition of a predicate and every :class:`~fastpath_lib.eligibility.Boundary`
it declares, applies the change to the eligible base case under the limits in force, and returns a
:class:`BoundaryPoint`: either a *tensor* change (a new :class:`~fastpath_lib.cases.CaseSpec`, run through both
routes) or a *context* change (forced fallback, capture, ``create_graph``, interpreter off, another architecture,
forward-mode AD, a ``torch.func`` transform, a tensor subclass), checked on the predicate's context.

>>> pts = boundary_points()
>>> any(p.condition == "min_rows" and p.label == "threshold-1" and not p.holds for p in pts)
True
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fastpath_lib.cases import CaseSpec
from fastpath_lib.eligibility import Predicate

__all__ = ["CONTEXT_KEYS", "BoundaryPoint", "boundary_points", "declared_points"]

#: Overrides that change the execution context rather than the tensors.
CONTEXT_KEYS = frozenset({"forced", "capturing", "create_graph", "interpret", "capability", "device_type",
                          "forward_ad", "transform", "kind"})


@dataclasses.dataclass(frozen=True)
class BoundaryPoint:
    """One generated boundary point.

    Attributes:
        condition: the condition it probes.
        label: the declared label, e.g. ``"cols=17"``.
        holds: whether the condition should hold.
        spec: the tensor case (the base case with the tensor overrides applied).
        context: execution-context overrides (see :data:`CONTEXT_KEYS`); empty for pure tensor changes.
    """

    condition: str
    label: str
    holds: bool
    spec: CaseSpec
    context: dict[str, Any]

    @property
    def id(self) -> str:
        return f"{self.condition}[{self.label}]"


def boundary_points(predicate: Predicate | None = None, base: dict[str, Any] | None = None,
                    limits: Any = None, device: str | None = None) -> list[BoundaryPoint]:
    """All declared boundary points of ``predicate`` (default: the RMSNorm predicate) under ``limits``.

    The base case's row count is raised to the row threshold when the threshold is above it, so that the base case
    is eligible on every device.
    """
    from fastpath_lib.rmsnorm import predicate as rms

    return declared_points(predicate or rms.PREDICATE, base or rms.BASE_CASE, limits or rms.limits_for(device), device)


def declared_points(predicate: Predicate, base: dict[str, Any], limits: Any, device: str | None = None, *,
                    spec_type: type = CaseSpec, context_keys: frozenset = CONTEXT_KEYS,
                    point_type: type = BoundaryPoint) -> list:
    """The walk every operator's boundary generator shares: each declared boundary of each condition of ``predicate``,
    applied to ``base`` under ``limits``.

    Args:
        predicate: the operator's predicate.
        base: its eligible base case (the row count is raised to ``limits.min_rows`` when below it).
        limits: the limits in force (the boundaries' overrides read them).
        device: the device the cases are built on (``None``: the case type's default).
        spec_type: the operator's case type, built from the base case and the tensor overrides.
        context_keys: the overrides that change the call's context rather than the tensors.
        point_type: the point type, built as ``point_type(condition, label, holds, spec, context)``.
    """
    base = dict(base)
    base["rows"] = max(base.get("rows", 1), getattr(limits, "min_rows", 1))
    points = []
    for cond in predicate.conditions:
        for b in cond.boundaries:
            change = b.overrides(limits)
            ctx = {k: v for k, v in change.items() if k in context_keys}
            tensor = {k: v for k, v in change.items() if k not in context_keys}
            spec = spec_type(**{**base, **tensor, **({"device": device} if device else {})})
            points.append(point_type(cond.name, b.label, b.holds, spec, ctx))
    return points
