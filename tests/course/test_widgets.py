"""The route explorer widget, driven from Python: changing a control changes the displayed route and reasons.

The browser test (``tests/browser/test_jupyterlab.py``) checks the same panel renders and reacts in JupyterLab.
"""

from __future__ import annotations

import html

import pytest

ipywidgets = pytest.importorskip("ipywidgets")  # before fastpath_lib.widgets: a bare GPU machine has no ipywidgets

import fastpath_lib  # noqa: E402
from fastpath_lib import runtime  # noqa: E402
from fastpath_lib.rmsnorm.predicate import limits_for  # noqa: E402
from fastpath_lib.widgets import MAX_ELEMENTS, MODES, RouteExplorer, route_explorer  # noqa: E402


def shown(ex: RouteExplorer) -> tuple[str, str]:
    """The text the panel displays in its route and reasons outputs."""
    return ex.route.value, ex.reasons.value


def test_default_case_is_eligible_and_says_so():
    ex = route_explorer()
    assert isinstance(ex, ipywidgets.VBox)
    assert ex.decision.route == "triton"
    route, reasons = shown(ex)
    assert "route: triton" in route
    assert reasons == "all conditions hold"


def test_dom_classes_for_the_browser_test():
    ex = route_explorer()
    assert "fastpath-explorer" in ex._dom_classes
    assert "fastpath-route" in ex.route._dom_classes
    assert "fastpath-reasons" in ex.reasons._dom_classes
    for name, control in ex.controls.items():
        assert f"fastpath-{name}" in control._dom_classes


@pytest.mark.parametrize("control, value, condition", [
    ("layout", "transposed", "last_dim_contiguous"),
    ("layout", "permuted", "row_stride"),
    ("dtype", "float64", "dtype"),
    ("weight", "float64", "weight_dtype"),
    ("offset", 1, "input_alignment"),
    ("cols", 17, "row_stride_alignment"),
    ("cols", 16385, "cols"),
    ("rows", 0, "non_empty"),
])
def test_changing_a_control_changes_route_and_reasons(control, value, condition):
    ex = route_explorer()
    before = shown(ex)
    ex.controls[control].value = value
    assert ex.error is None
    assert condition in ex.decision.failed
    route, reasons = shown(ex)
    assert (route, reasons) != before
    assert "route: fallback" in route
    assert html.escape(next(r for r in ex.decision.reasons if r.startswith(condition + ":"))) in reasons


def test_row_threshold_matches_the_limits_in_force():
    ex = route_explorer()
    threshold = limits_for(ex.device).min_rows
    ex.controls["rows"].value = threshold
    assert ex.decision.route == "triton"
    ex.controls["rows"].value = threshold - 1
    assert ex.decision.failed == ["min_rows"]
    assert "min_rows" in ex.reasons.value


def test_row_slice_uses_the_pad_control():
    ex = route_explorer(layout="row_slice")
    assert ex.decision.route == "triton"  # default pad 4: stride 68 fp32 = 272 bytes
    ex.controls["pad"].value = 2
    assert ex.decision.failed == ["row_stride_alignment"]
    ex.controls["layout"].value = "contiguous"  # pad ignored outside row_slice
    assert ex.decision.route == "triton"


@pytest.mark.parametrize("mode, condition", [
    ("force_fallback()", "forced"),
    ("backward with create_graph=True", "grad_order"),
    ("during CUDA graph capture", "cuda_graph_capture"),
    pytest.param("interpreter off", "device", marks=pytest.mark.skipif(
        runtime.kernel_device() == "cuda",
        reason="on CUDA without the interpreter, turning it off changes nothing")),
])
def test_modes_that_are_not_tensor_properties(mode, condition):
    assert mode in MODES
    ex = route_explorer()
    ex.controls["mode"].value = mode
    assert condition in ex.decision.failed
    assert condition in ex.reasons.value
    ex.controls["mode"].value = "normal"
    assert ex.decision.route == "triton"
    assert ex.reasons.value == "all conditions hold"


def test_normal_mode_agrees_with_explain_on_the_same_case():
    ex = route_explorer(layout="step", offset=1, dtype="float16")
    x, ns, w = ex.spec().build(seed=0, device=ex.device).args()
    expected = fastpath_lib.explain(x, ns, w)
    assert ex.decision == expected
    assert expected.route == "fallback"


def test_too_large_case_is_reported_not_raised():
    ex = route_explorer()
    ex.controls["cols"].value = 16384
    ex.controls["rows"].value = MAX_ELEMENTS // 16384 + 1
    assert ex.decision is None
    assert "at most" in ex.error
    assert "no case" in ex.route.value
    ex.controls["rows"].value = 16
    assert ex.decision is not None and ex.error is None
