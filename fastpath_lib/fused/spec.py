"""What the operator spec (the bench pipeline's, the graders') needs of fused residual-add + RMSNorm, in one place.

:data:`FUSED_SPEC` names, for one operator: its reference (the contract), its predicate (with ``make_call`` to build
the context), the fast routes callable directly (functional and in place, no predicate), the public entry points by
name, the tolerances, the boundary-point generator and the case spec it builds from, and the bytes-moved model of the
fused and the unfused implementations (4 and 5 passes over ``rows x cols``).

>>> FUSED_SPEC.name, FUSED_SPEC.bytes_moved(8, 4096, 2, 2), FUSED_SPEC.bytes_moved(8, 4096, 2, 2, fused=False)
('fused_add_rms_norm', 270336, 335872)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from fastpath_lib.eligibility import Predicate
from fastpath_lib.fused import cases, predicate, reference

__all__ = ["OpParts", "FUSED_SPEC"]


@dataclasses.dataclass(frozen=True)
class OpParts:
    """The parts of one operator a pipeline reads (plain references, no behaviour of its own)."""

    name: str
    reference: Callable[..., Any]
    reference_inplace: Callable[..., Any]
    reference_grads: Callable[..., Any]
    predicate: Predicate
    make_call: Callable[..., Any]
    eligible: Callable[..., bool]
    runtime_eligible: Callable[..., bool]
    fast_route: Callable[..., Any]
    fast_route_inplace: Callable[..., Any]
    public: str
    public_inplace: str
    tolerance: Callable[..., tuple[float, float]]
    tolerances: dict
    case_spec: type
    boundary_points: Callable[..., list]
    bytes_moved: Callable[..., int]
    notes: str = ""


def _fast(inplace: bool) -> Callable[..., Any]:
    """The Triton route, imported on the first call (importing Triton decorates the kernels: after the opt-in)."""

    def call(x, residual, weight=None, eps=None):
        from fastpath_lib.fused import kernels

        return (kernels.run_ if inplace else kernels.run)(x, residual, weight, eps)

    call.__name__ = "fast_route_" if inplace else "fast_route"
    return call


FUSED_SPEC = OpParts(
    name="fused_add_rms_norm",
    reference=reference.native,
    reference_inplace=reference.native_,
    reference_grads=reference.reference_grads,
    predicate=predicate.PREDICATE,
    make_call=predicate.make_call,
    eligible=predicate.eligible,
    runtime_eligible=predicate.runtime_eligible,
    fast_route=_fast(False),
    fast_route_inplace=_fast(True),
    public="fastpath_lib.fused_add_rms_norm",
    public_inplace="fastpath_lib.fused_add_rms_norm_",
    tolerance=reference.tolerance,
    tolerances=reference.TOLERANCES,
    case_spec=cases.FusedCaseSpec,
    boundary_points=cases.boundary_points,
    bytes_moved=reference.bytes_moved,
    notes="new residual bitwise; output within one ulp of the input dtype against the native function",
)
