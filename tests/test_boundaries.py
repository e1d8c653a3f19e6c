"""Generated boundary tests: both routes against the float64 reference, the route asserted, guard bands checked, and
under Triton's interpreter every launch watched by the traffic checker (no masked-in access outside its tensor)."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F

import fastpath_lib
from fastpath_lib import routing, runtime
from fastpath_lib.boundary import boundary_points
from fastpath_lib.cases import output_guard_intact, poisoned_like
from fastpath_lib.rmsnorm import predicate as P
from fastpath_lib.testing import compare, reference_rms_norm

# context-only points (architecture, capture, create_graph) are covered in test_predicate / test_contract
TENSOR_POINTS = [p for p in boundary_points() if not (set(p.context) - {"forced", "interpret"})]


@pytest.fixture(autouse=True)
def checked(traffic_checked):
    """Every kernel the test runs, under the interpreter's traffic checker (tests/conftest.py)."""
    return traffic_checked


def _kernel_can_run(x, ns, w) -> bool:
    """The kernel is correct (if maybe slower) on these inputs: everything but the speed-only limits holds."""
    call = P.make_call(x, ns, w)
    speed_only = {"forced", "min_rows", "input_alignment", "row_stride_alignment", "weight_alignment"}
    return set(P.PREDICATE.evaluate(call).failed) <= speed_only


@pytest.mark.parametrize("point", TENSOR_POINTS, ids=[p.id for p in TENSOR_POINTS])
def test_boundary_point_both_routes(point, device, monkeypatch, checked):
    spec = point.spec if point.spec.device else dataclasses.replace(point.spec, device=device)
    case = spec.build(seed=7)
    x, ns, w = case.args()
    if point.context.get("interpret") is False:
        monkeypatch.setattr(runtime, "interpreter_enabled", lambda: False)
    if point.context.get("forced"):
        monkeypatch.setattr(routing.state, "forced", True)
    decision = fastpath_lib.explain(x, ns, w)
    assert (point.condition not in decision.failed) == point.holds, decision.reasons

    try:
        expected = F.rms_norm(x, ns, w)
    except Exception as exc:  # invalid call: the fallback must raise the very same exception type
        assert decision.route == "fallback"
        with fastpath_lib.record_routes() as routes, pytest.raises(type(exc)):
            fastpath_lib.rms_norm(x, ns, w)
        assert routes == {"fallback": 1}
        return

    with fastpath_lib.record_routes() as routes:
        dispatched = fastpath_lib.rms_norm(x, ns, w)
    assert routes == {decision.route: 1}
    assert decision.route == ("triton" if not decision.failed else "fallback")
    if not point.holds:
        assert decision.route == "fallback", f"{point.id} is outside its condition but took {decision.route}"
    with fastpath_lib.record_routes() as forced_routes, fastpath_lib.force_fallback():
        fallback = fastpath_lib.rms_norm(x, ns, w)
    assert forced_routes == {"fallback": 1}

    ref = reference_rms_norm(x, ns, w)
    for name, out in (("dispatched", dispatched), ("fallback", fallback)):
        assert out.dtype == expected.dtype and out.shape == expected.shape and out.stride() == expected.stride()
        assert compare(out, ref, x.dtype) is None, f"{name}: {compare(out, ref, x.dtype)}"
    if _kernel_can_run(x, ns, w):  # the Triton route itself, even where dispatch keeps it off for speed
        from fastpath_lib.rmsnorm import kernels
        from fastpath_lib.rmsnorm.layout import as_rows

        y, buf, pristine = poisoned_like((x.numel() // x.shape[-1], x.shape[-1]), x.dtype, x.device)
        kernels.forward(as_rows(x), w, P.default_eps(x.dtype), out=y)
        assert compare(y.view(x.shape), ref, x.dtype) is None, compare(y.view(x.shape), ref, x.dtype)
        assert output_guard_intact(buf, pristine, 16), "the kernel wrote outside its output"
    if checked is not None:  # the checker saw every launch: the dispatched one where it took the kernel, the direct one
        assert len(checked.launches) == (decision.route == "triton") + _kernel_can_run(x, ns, w)
    assert case.inputs_untouched(), "an input buffer (view or poison around it) changed"


@pytest.mark.parametrize("cols", [1, 15, 16, 17, 255, 256, 257, P.MAX_COLS])
@pytest.mark.parametrize("rows", [P.INTERPRETER_MIN_ROWS - 1, P.INTERPRETER_MIN_ROWS, P.INTERPRETER_MIN_ROWS + 1])
def test_kernel_guard_bands_at_widths(rows, cols, device, checked):
    """Forward and backward kernels at odd/power-of-two widths: exact output region, poison around it untouched."""
    from fastpath_lib.cases import CaseSpec
    from fastpath_lib.rmsnorm import kernels
    from fastpath_lib.testing import reference_grads

    case = CaseSpec(rows=rows, cols=cols, layout="row_slice", pad=3).build(seed=rows * 7 + cols, device=device)
    x, ns, w = case.args()
    dy = torch.randn(rows, cols, device=device)
    y, ybuf, ypr = poisoned_like((rows, cols), x.dtype, x.device)
    dx, dxbuf, dxpr = poisoned_like((rows, cols), x.dtype, x.device)
    kernels.forward(x, w, 1e-6, out=y)
    _, dw = kernels.backward(dy, x, w, 1e-6, dx_out=dx)
    assert output_guard_intact(ybuf, ypr, 16) and output_guard_intact(dxbuf, dxpr, 16)
    assert case.inputs_untouched()
    assert compare(y, reference_rms_norm(x, ns, w, 1e-6), x.dtype) is None
    rdx, rdw = reference_grads(x, ns, w, 1e-6, dy)
    assert compare(dx, rdx, x.dtype, grad=True) is None
    assert compare(dw, rdw, x.dtype, grad=True) is None
    if checked is not None:  # each input row read, each output row written, none of the padding between them
        fwd, bwd = checked.launches
        nbytes = x.numel() * x.element_size()
        assert fwd.tensors["X_ptr"].loaded_distinct == bwd.tensors["X_ptr"].loaded_distinct == nbytes
        assert fwd.tensors["Y_ptr"].stored_distinct == bwd.tensors["DX_ptr"].stored_distinct == nbytes
