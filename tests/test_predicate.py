"""The predicate on its own: declarations, reasons, fake tensors (no kernel launches)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import fastpath_lib
from fastpath_lib.boundary import boundary_points
from fastpath_lib.cases import CaseSpec
from fastpath_lib.eligibility import UNKNOWN, Boundary, Condition, Predicate
from fastpath_lib import routing
from fastpath_lib.rmsnorm import predicate as P

POINTS = boundary_points()


def _call_for(point, device):
    spec = point.spec if point.spec.device else dataclasses.replace(point.spec, device=device)
    x, ns, w = spec.build(seed=0).args()
    return dataclasses.replace(P.make_call(x, ns, w), **point.context)


def test_categories_cover_the_review_checklist():
    assert set(P.PREDICATE.categories()) >= {"device", "architecture", "dtype", "shape", "stride", "alignment",
                                              "mode"}


def test_every_condition_declares_boundaries_on_both_sides():
    for cond in P.PREDICATE.conditions:
        sides = {b.holds for b in cond.boundaries}
        assert sides == {True, False} or cond.name == "non_empty", f"{cond.name} declares only {sides}"
        assert cond.why and cond.requirement, cond.name


@pytest.mark.parametrize("point", POINTS, ids=[p.id for p in POINTS])
def test_declared_boundary_point(point, device):
    """The probed condition holds exactly when its declaration says so."""
    reason = P.PREDICATE.check_one(point.condition, _call_for(point, device))
    assert (reason is None) == point.holds, f"{point.id}: expected holds={point.holds}, got reason {reason!r}"
    if reason is not None:
        assert "need" in reason, f"reason should name the requirement: {reason!r}"


def test_base_case_is_eligible(device):
    x, ns, w = CaseSpec(**{**P.BASE_CASE, "rows": max(16, P.limits_for(device).min_rows)}).build().args()
    assert fastpath_lib.explain(x, ns, w).eligible


def test_every_failed_condition_is_reported_not_just_the_first():
    x = torch.randn(2, 3, 15, dtype=torch.float64).permute(1, 0, 2)
    d = fastpath_lib.explain(x, [15])
    assert d.route == "fallback" and not d.eligible
    assert {"dtype", "min_rows", "row_stride"} <= set(d.failed)
    assert len(d.reasons) == len(d.failed)
    assert any("float64" in r and "need" in r for r in d.reasons)


def test_reason_names_actual_and_required_values(device):
    d = fastpath_lib.explain(torch.randn(16, 17, device=device), [17])
    (reason,) = d.reasons
    assert reason.startswith("row_stride_alignment:") and "68 bytes" in reason and "16 bytes" in reason


def test_row_threshold_is_per_mode():
    assert P.limits_for("cpu", interpret=True).min_rows == P.INTERPRETER_MIN_ROWS == 8
    lim = P.limits_for("cuda", interpret=False, capability=(9, 0))
    assert lim.min_rows == P.CUDA_MIN_ROWS.get((9, 0), P.DEFAULT_CUDA_MIN_ROWS)


def test_the_architecture_is_read_from_the_device_when_not_given(monkeypatch):
    """On a real GPU the capability comes from the driver: a typo or a shadowed name here sends every call to the
    fallback with an "sm_00" reason, which no CPU-only test of the other conditions would notice."""
    from fastpath_lib.rmsnorm import limits as L

    seen = []
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda dev=None: seen.append(dev) or (9, 0))
    assert L.device_capability(torch.device("cuda", 0)) == (9, 0)
    lim = L.limits_for("cuda", interpret=False)
    assert lim.source.startswith("sweep for sm_90") or lim.source.endswith("(no sweep for sm_90)"), lim.source
    assert lim.min_rows == P.CUDA_MIN_ROWS.get((9, 0), P.DEFAULT_CUDA_MIN_ROWS)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda dev=None: (7, 5))
    assert L.limits_for("cuda", interpret=False).source.endswith("(no sweep for sm_75)")
    monkeypatch.setattr(P, "_cuda_min_rows", {})
    assert P._cuda_rows(0) == 0  # too old: the cached threshold says "never"
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda dev=None: (9, 0))
    monkeypatch.setattr(P, "_cuda_min_rows", {})
    assert P._cuda_rows(0) == lim.min_rows > 0
    assert seen


def test_explain_is_safe_on_fake_tensors(device):
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x = torch.empty(16, 64, device=device)
        w = torch.empty(64, device=device)
        d = fastpath_lib.explain(x, [64], w)
    assert not d.eligible and d.route == "fallback"
    assert set(d.failed) == {"input_alignment", "weight_alignment"}
    assert all(r.split(": ", 1)[1].startswith(UNKNOWN) for r in d.reasons)


def test_explain_on_meta_tensors():
    d = fastpath_lib.explain(torch.empty(16, 64, device="meta"), [64])
    assert "device" in d.failed and isinstance(d.reasons[0], str)


def test_decision_is_plain_python():
    d = fastpath_lib.explain(torch.randn(16, 64), [64])
    assert type(d.eligible) is bool and type(d.route) is str and all(type(r) is str for r in d.reasons)
    assert "route=" in str(d) and "<b>route" in d._repr_html_()


def test_forced_env_variable():
    """``FASTPATH_FORCE_FALLBACK=1`` is read once, at import, in a fresh process."""
    import os
    import subprocess
    import sys

    code = ("import torch, fastpath_lib; fastpath_lib.use_interpreter(force=True); "
            "print(fastpath_lib.explain(torch.randn(16, 64), [64]).failed)")
    for value, expected in (("1", "['forced']"), ("0", "[]")):
        env = {**os.environ, routing.FORCE_ENV: value}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        assert out.stdout.strip() == expected, out.stderr


def test_table_lists_every_condition():
    rows = P.PREDICATE.table()
    assert [r["condition"] for r in rows] == [c.name for c in P.PREDICATE.conditions]
    md = P.PREDICATE.markdown_table()
    assert md.count("\n") == len(rows) + 1 and "| min_rows |" in md


def test_generic_predicate_rejects_duplicate_names():
    c = Condition("a", "x", lambda ctx: None)
    with pytest.raises(ValueError, match="duplicate"):
        Predicate("p", [c, c])


def test_callable_boundary_uses_limits():
    b = Boundary("t-1", lambda lim: {"rows": lim.min_rows - 1}, False)
    assert b.overrides(P.Limits(min_rows=100)) == {"rows": 99}
