"""The predicate on its own: declarations, reasons, fake tensors (no kernel launches)."""

from __future__ import annotations

import dataclasses
import re

import pytest
import torch

import fastpath_lib
from fastpath_lib import opspec, routing
from fastpath_lib.boundary import boundary_points, overrides
from fastpath_lib.cases import CaseSpec
from fastpath_lib.eligibility import SPEED_PREDICTION, UNKNOWN, Boundary, Condition, Predicate
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


#: A comparison of times, which only the shared prediction clause may make.
_TIMED = re.compile(r"\b(?:slower|faster|outweighs?|launch-bound)\b", re.I)


@pytest.mark.parametrize("op", opspec.names())
def test_a_reason_of_speed_is_shown_as_a_prediction(op):
    """A ``why`` states what the condition protects in facts about the code, never a time comparison; a condition
    marked ``speed`` shows, in the text every table shows (lesson 03, docs/reference.md, the PR notes), its ``why``
    ending with the one clause that calls its cost a prediction until a GPU run measures it."""
    conditions = opspec.get(op).predicate.conditions
    for cond in conditions:
        assert not _TIMED.search(cond.why), f"{cond.name}'s why states a time comparison as a fact: {cond.why!r}"
    rows = {r["condition"]: r["why"] for r in opspec.get(op).predicate.table()}
    assert {c.name for c in conditions if rows[c.name].endswith(SPEED_PREDICTION)} == \
        {c.name for c in conditions if c.speed} != set()


def kernel_refusals(spec, device) -> list[str]:
    """The declared boundary points outside ``spec``'s speed conditions where its kernels take no call, with why: the
    launch rule has no binary at the point's shape (``spec.specialization`` gives ``None`` or raises), or, where the
    spec declares ``fast_unsupported``, the launcher refuses the point's tensors as built."""
    limits = spec.limits(device)
    base = {**spec.boundary_base, "rows": max(spec.boundary_base["rows"], limits.min_rows)}
    speed = [c for c in spec.predicate.conditions if c.speed]
    out = []
    for cond in speed:
        for b in (b for b in cond.boundaries if not b.holds):
            case = {**base, **overrides(b, limits)}
            try:
                binary, why = spec.specialization(case["rows"], case["cols"], case["dtype"]), "no binary"
            except ValueError as exc:
                binary, why = None, str(exc)
            if binary is None:
                out.append(f"{cond.name}[{b.label}]: the launch rule at {case['rows']}x{case['cols']}: {why}")
    if spec.fast_unsupported is not None:
        names = {c.name for c in speed}
        for p in boundary_points(spec=spec, device=device):
            if p.condition in names and not p.holds and not p.context:
                refused = spec.fast_unsupported(*spec.args(p.spec.build(seed=0)))
                out += [f"{p.id}: fast_unsupported: {refused}"] if refused else []
    return out


@pytest.mark.parametrize("op", opspec.names())
def test_a_speed_condition_has_a_kernel_on_both_sides(op, device):
    """A condition is marked ``speed`` only where the kernel runs outside it too: there the fast route is predicted
    slower than the baseline, a claim a GPU run can measure by timing both. A condition outside which the kernels take
    no call (the launch rule has no binary, or the launcher refuses the tensors) bounds what the kernels support, and
    is not a speed condition: no run can time a kernel that does not launch."""
    problems = kernel_refusals(opspec.get(op), device)
    assert not problems, "speed conditions outside which no kernel runs (mark them as support, not speed):\n" + \
        "\n".join(problems)


def test_the_kernel_check_finds_a_width_the_launch_rule_refuses(device):
    """Marked speed, ``cols`` would be found twice at each wider point: no binary, and the launcher refuses it."""
    spec = opspec.get("rms_norm")
    marked = Predicate(P.PREDICATE.name, [dataclasses.replace(c, speed=c.speed or c.name == "cols")
                                        for c in P.PREDICATE.conditions])
    found = kernel_refusals(dataclasses.replace(spec, predicate=marked), device)
    assert {f.split(":")[0] for f in found} == {"cols[cols=max+16B]", "cols[cols=max+1]"}, found
    assert sum("launch rule" in f for f in found) == 2 and sum("fast_unsupported" in f for f in found) == 2, found


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


def test_an_architecture_without_a_recorded_sweep_gets_the_conservative_default(monkeypatch):
    """Lesson 06's recap: a threshold comes only from a recorded sweep (naming its folder, tests/rmsnorm/
    test_thresholds.py); an architecture without one runs on the 1024-row default."""
    from fastpath_lib.rmsnorm import limits as L

    monkeypatch.setattr(L, "CUDA_MIN_ROWS", {})
    lim = L.limits_for("cuda", interpret=False, capability=(9, 0))
    assert (lim.min_rows, lim.source) == (L.DEFAULT_CUDA_MIN_ROWS, "conservative default (no sweep for sm_90)")
    assert L.DEFAULT_CUDA_MIN_ROWS == 1024
    monkeypatch.setattr(L, "CUDA_MIN_ROWS", {(9, 0): 512})
    assert L.limits_for("cuda", interpret=False, capability=(9, 0)).min_rows == 512


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


def test_forced_env_variable_set_after_import_changes_nothing(monkeypatch):
    """The variable is read when the routing state is built (at import): setting it in a running process leaves the
    route as it was, and the PR note's maintenance line says so (no "at run time" for the variable)."""
    from fastpath_lib.rmsnorm import spec

    monkeypatch.setenv(routing.FORCE_ENV, "1")
    monkeypatch.setattr(routing.state, "forced", False)
    assert fastpath_lib.explain(torch.randn(16, 64), [64]).failed == []
    assert routing._State().forced  # what an import in a process started with it reads
    line = next(x for x in spec._maintenance() if x.startswith("- Fallback:"))
    assert "read when the kit is imported" in line and "run time" not in line


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
    assert overrides(b, P.Limits(min_rows=100)) == {"rows": 99}


# --- a learner's T4: sm_75 only inside allow_sm75(), after the self-test passed, fp16 and fp32 ------------------------

@pytest.fixture
def fake_t4(monkeypatch):
    """A CUDA device of compute capability ``capability[0]`` (7.5 unless changed) and a self-test that passes unless
    told otherwise; the calls to it are counted."""
    from fastpath_lib import runtime, selftest
    from fastpath_lib.rmsnorm import limits as L

    state = {"capability": (7, 5), "ok": True, "runs": []}
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda dev=None: state["capability"])
    monkeypatch.setattr(runtime, "kernel_device", lambda: "cuda")
    monkeypatch.setattr(selftest, "_passed_on", set())
    monkeypatch.setattr(L._Sm75, "passed", set())
    monkeypatch.setattr(P, "_cuda_min_rows", {})

    def run(dtypes=None):
        state["runs"].append(dtypes)
        return selftest.SelfTestResult(state["ok"], "cuda", {}, [] if state["ok"] else ["float16 3x16 dx: wrong"])

    monkeypatch.setattr(selftest, "run", run)
    return state


def _on(capability, dtype=torch.float16, weight=True, wdtype=None):
    x = torch.randn(16, 64, dtype=dtype)
    w = torch.ones(64, dtype=wdtype or dtype) if weight else None
    return dataclasses.replace(P.make_call(x, [64], w), device_type="cuda", interpret=False, capability=capability)


def test_gpus_older_than_sm80_are_refused_with_the_true_reason(fake_t4):
    """The T4 (sm_75) and older GPUs, the P100 (sm_60) among them, are refused by the architecture condition alone."""
    (reason,) = P.PREDICATE.evaluate(_on((7, 5))).reasons
    assert reason.startswith("architecture: sm_75, need sm_80 or newer") and "compute capability 8.0+" in reason
    assert "allow_sm75()" in reason
    for old in ((7, 0), (6, 0)):
        (reason,) = P.PREDICATE.evaluate(_on(old)).reasons
        assert reason.startswith(f"architecture: sm_{old[0]}{old[1]}, need sm_80 or newer"), reason
        assert "compute capability 8.0+" in reason and "allow_sm75" not in reason  # the opt-in is for sm_75 alone


def test_allow_sm75_admits_fp16_and_fp32_inside_the_block_only(fake_t4):
    from fastpath_lib.rmsnorm import limits as L
    from fastpath_lib.selftest import allow_sm75

    x16, x32, xbf = (torch.empty(16, 64, dtype=d) for d in (torch.float16, torch.float32, torch.bfloat16))
    assert L.sm75_rows(x16, None) == 0
    with allow_sm75() as note:
        assert "outside Triton's support matrix" in note and "unmeasured" in note
        assert fake_t4["runs"] == [L.SM75_DTYPES]  # the self-test ran on entry, fp16 and fp32
        for dtype in (torch.float16, torch.float32):
            assert P.PREDICATE.check_one("architecture", _on((7, 5), dtype)) is None
            assert P.PREDICATE.check_one("architecture", _on((7, 5), dtype, weight=False)) is None
        for call in (_on((7, 5), torch.bfloat16), _on((7, 5), torch.float16, wdtype=torch.bfloat16)):
            reason = P.PREDICATE.check_one("architecture", call)
            assert "bfloat16" in reason and "need float16 or float32" in reason
        # just outside on either side: another old architecture stays refused, Ampere needs no opt-in
        assert "need sm_80" in P.PREDICATE.check_one("architecture", _on((7, 2)))
        assert P.PREDICATE.check_one("architecture", _on((8, 0), torch.bfloat16)) is None
        # the dispatch's cheap test agrees, and the threshold is the unmeasured default
        assert L.sm75_rows(x16, None) == L.sm75_rows(x32, torch.ones(64)) == L.DEFAULT_CUDA_MIN_ROWS
        assert L.sm75_rows(xbf, None) == 0 == L.sm75_rows(x16, torch.ones(64, dtype=torch.bfloat16))
        assert P._cuda_rows(0) == 0  # the cached per-device answer stays the default predicate's
        lim = L.limits_for("cuda", interpret=False)
        assert "outside Triton's support matrix" in lim.source and "unmeasured" in lim.source
        assert lim.min_rows == L.DEFAULT_CUDA_MIN_ROWS
        with allow_sm75():  # nested: the self-test ran once
            assert P.PREDICATE.check_one("architecture", _on((7, 5))) is None
        assert P.PREDICATE.check_one("architecture", _on((7, 5))) is None  # still inside the outer block
    assert fake_t4["runs"] == [L.SM75_DTYPES]
    assert "need sm_80" in P.PREDICATE.check_one("architecture", _on((7, 5)))  # after the block: refused again
    assert L.sm75_rows(x16, None) == 0 and "no sweep for sm_75" in L.limits_for("cuda", interpret=False).source


def test_allow_sm75_admits_nothing_without_a_passed_selftest(fake_t4):
    from fastpath_lib.rmsnorm import limits as L
    from fastpath_lib.selftest import allow_sm75

    fake_t4["ok"] = False
    with pytest.raises(RuntimeError, match="self-test failed on this sm_75 device"), allow_sm75():
        pytest.fail("the block must not run")
    assert "need sm_80" in P.PREDICATE.check_one("architecture", _on((7, 5)))
    with L.sm75_scope(None):  # a block without the self-test's pass (the scope alone) admits nothing
        reason = P.PREDICATE.check_one("architecture", _on((7, 5)))
        assert "without a passed self-test" in reason and "need" in reason
        assert L.sm75_rows(torch.empty(16, 64, dtype=torch.float16), None) == 0


def test_allow_sm75_changes_nothing_on_other_devices(fake_t4):
    from fastpath_lib.selftest import allow_sm75

    fake_t4["capability"] = (9, 0)
    with allow_sm75() as note:
        assert "nothing to admit here (sm_90)" in note
        assert P.PREDICATE.check_one("architecture", _on((9, 0), torch.bfloat16)) is None
        assert "need sm_80" in P.PREDICATE.check_one("architecture", _on((7, 5)))
    assert fake_t4["runs"] == []


def test_the_fused_op_shares_the_opt_in(fake_t4):
    from fastpath_lib.fused import predicate as FP
    from fastpath_lib.selftest import allow_sm75

    def fused_call(dtype):
        x = torch.randn(16, 64, dtype=dtype)
        return dataclasses.replace(FP.make_call(x, x.clone(), torch.ones(64, dtype=dtype)), device_type="cuda",
                                   interpret=False, capability=(7, 5))

    assert "architecture" in FP.PREDICATE.evaluate(fused_call(torch.float16)).failed
    with allow_sm75():
        assert "architecture" not in FP.PREDICATE.evaluate(fused_call(torch.float16)).failed
        assert "architecture" in FP.PREDICATE.evaluate(fused_call(torch.bfloat16)).failed


def test_the_selftest_leaves_bf16_out_below_sm80(fake_t4):
    from fastpath_lib import selftest

    assert selftest.default_dtypes() == (torch.float16, torch.float32)
    fake_t4["capability"] = (8, 0)
    assert set(selftest.default_dtypes()) == {torch.float16, torch.float32, torch.bfloat16}


@pytest.mark.parametrize("cols", [8192, 8196])
def test_fused_backward_takes_the_kernel_up_to_its_width_limit(cols):
    """The fused backward's own decision (a compiled graph runs it without the forward's grad): the kernel up to
    BACKWARD_MAX_COLS, torch's formula wider; the predicate says why for a call autograd records."""
    from fastpath_lib.fused import op as fop
    from fastpath_lib.fused.predicate import BACKWARD_MAX_COLS
    from fastpath_lib.fused.reference import native

    x, r, dy = (torch.randn(8, cols, generator=torch.Generator().manual_seed(i)) for i in range(3))
    w = torch.ones(cols)
    with fastpath_lib.record_routes("backward") as routes:
        dx, dw = torch.ops.fastpath.fused_add_rms_norm_backward(dy, None, x, r, w, None)
    assert routes == {"triton" if cols <= BACKWARD_MAX_COLS else "fallback": 1}
    x64, r64, w64 = (t.double().requires_grad_() for t in (x, r, w))
    want_dx, want_dw = torch.autograd.grad(native(x64, r64, w64)[0], (x64, w64), dy.double())
    torch.testing.assert_close(dx, want_dx.float(), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(dw, want_dw.float(), atol=1e-3, rtol=1e-4)
    d = fop.explain(x.requires_grad_(), r, w)
    assert ("backward_cols" in d.failed) == (cols > BACKWARD_MAX_COLS)
    assert all("need at most 8192" in s for s in d.reasons if s.startswith("backward_cols"))


@pytest.mark.parametrize("capability, kernels", [((7, 5), True), ((7, 0), False)])
def test_lesson_device_tells_an_old_gpu_what_runs_where(monkeypatch, capsys, capability, kernels):
    from fastpath_lib import runtime
    from fastpath_lib.rmsnorm import limits as L

    assert (runtime.TRITON_MIN_CAPABILITY, runtime.T4_CAPABILITY) == (L.MIN_CAPABILITY, L.SM75)
    monkeypatch.setattr(runtime, "cuda_available", lambda: True)
    monkeypatch.setattr(runtime, "interpreter_enabled", lambda: False)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: capability)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "Tesla T4")
    assert runtime.lesson_device() == "cuda"
    out = capsys.readouterr().out
    assert "timings are GPU measurements of the fallback, not the kernels" in out
    assert "every dispatched call" in out and "below Triton's supported 8.0" in out
    assert ("selftest.allow_sm75()" in out) == kernels and ("unmeasured" in out) == kernels
    assert all(len(line) <= 110 for line in out.splitlines()), "a line the notebook would wrap"


def test_lesson_device_names_versions_older_than_tested(monkeypatch, capsys):
    import re

    from fastpath_lib import runtime

    floors = dict(re.findall(r'"(torch|triton)>=(\d+\.\d+)"', (runtime.ROOT / "pyproject.toml").read_text()))
    assert {k: tuple(map(int, v.split("."))) for k, v in floors.items()} == runtime.TESTED_FLOORS  # pyproject's

    monkeypatch.setattr(runtime, "versions", lambda: {"python": "3.11", "torch": "2.9.1+cu126", "triton": "3.5.1",
                                                      "numpy": "2.1"})
    runtime.lesson_device()
    assert "untested: torch 2.9.1+cu126 (tested from 2.11), triton 3.5.1 (tested from 3.6)" in capsys.readouterr().out
    monkeypatch.setattr(runtime, "versions", lambda: {"python": "3.11", "torch": "2.13.0", "triton": "3.10.0",
                                                      "numpy": "2.1"})
    runtime.lesson_device()
    assert "untested" not in capsys.readouterr().out
