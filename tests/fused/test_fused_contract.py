"""Fused residual-add + RMSNorm: boundary points generated from its predicate (aliasing included), both forms against
the composite, routes asserted, guard bands; and the contract's rounding points, which a tolerance alone cannot see.
Under Triton's interpreter every launch is watched by the traffic checker (no masked-in access outside its tensor)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import fastpath_lib
from fastpath_lib import routing, runtime
from fastpath_lib.cases import CaseSpec, output_guard_intact, poisoned_like
from fastpath_lib.fused import op, reference
from fastpath_lib.fused.cases import FusedCaseSpec, boundary_points
from fastpath_lib.fused.predicate import PREDICATE

POINTS = [p for p in boundary_points() if not (set(p.context) - {"forced", "interpret", "inplace"})]
FORMS = {False: fastpath_lib.fused_add_rms_norm, True: fastpath_lib.fused_add_rms_norm_}


@pytest.fixture(autouse=True)
def checked(traffic_checked):
    """Every kernel the test runs, under the interpreter's traffic checker (tests/conftest.py)."""
    return traffic_checked


def _same(got, want, route, dtype, what):
    """Bitwise on the composite; within the output tolerance on the Triton route (the residual: always bitwise)."""
    got, want = got.detach(), want.detach()
    assert got.shape == want.shape and got.dtype == want.dtype, what
    if route == "fallback" or what == "residual":
        assert torch.equal(got.nan_to_num(7.0), want.nan_to_num(7.0)), f"{what} differs from the composite"
    else:
        atol, rtol = reference.tolerance(dtype)
        torch.testing.assert_close(got, want, atol=atol, rtol=rtol, equal_nan=True, msg=what)


@pytest.mark.parametrize("point", POINTS, ids=[p.id for p in POINTS])
def test_boundary_point_both_forms(point, device, monkeypatch, checked):
    spec = point.spec if point.spec.device else dataclasses.replace(point.spec, device=device)
    case = spec.build(seed=7)
    if point.context.get("interpret") is False:
        monkeypatch.setattr(runtime, "interpreter_enabled", lambda: False)
    if point.context.get("forced"):
        monkeypatch.setattr(routing.state, "forced", True)
    for inplace, fn in FORMS.items():
        mine, theirs = case.fresh(), case.fresh()
        x, r, w = mine.args()
        decision = op.explain(x, r, w, inplace=inplace)
        if inplace == point.inplace:
            assert (point.condition not in decision.failed) == point.holds, decision.reasons
        composite = reference.native_ if inplace else reference.native
        try:
            want = composite(*theirs.args())
        except Exception as exc:  # the call is invalid (or an in-place op on a leaf): the same exception
            assert decision.route == "fallback"
            with fastpath_lib.record_routes() as routes, pytest.raises(type(exc)):
                fn(x, r, w)
            assert routes == {"fallback": 1}
            continue
        launched = len(checked.launches) if checked is not None else 0
        with fastpath_lib.record_routes() as routes:
            got = fn(x, r, w)
        assert routes == {decision.route: 1}, (inplace, decision)
        assert decision.route == ("triton" if not decision.failed else "fallback")
        if inplace:
            assert got[0] is x and got[1] is r
            _same(r, theirs.residual, decision.route, x.dtype, "residual")
            _same(x, theirs.x, decision.route, x.dtype, "output")
        else:
            _same(got[1], want[1], decision.route, x.dtype, "residual")
            _same(got[0], want[0], decision.route, x.dtype, "output")
            assert mine.outside_untouched() and all(
                torch.equal(b.nan_to_num(7.0), p.nan_to_num(7.0)) for b, p in zip(mine.buffers, mine.pristine)), \
                "the functional form wrote into an input"
        assert mine.outside_untouched(), "an element outside the views changed"
        if checked is not None:  # the checker saw one launch where the call took the kernel, none on the composite
            assert len(checked.launches) - launched == (decision.route == "triton"), decision


def test_points_cover_every_condition_and_aliasing():
    pts = boundary_points()
    assert {p.condition for p in pts} == {c.name for c in PREDICATE.conditions}
    alias = {p.spec.alias for p in pts if p.condition == "no_overlap"}
    assert {"same", "overlap", "disjoint", "interleaved", "weight_in_x"} <= alias
    assert {p.id for p in pts if p.holds and p.condition == "no_overlap"} == {
        "no_overlap[separate buffers]", "no_overlap[disjoint row slices of one buffer]",
        "no_overlap[residual is x, functional form]", "no_overlap[residual expanded, functional form]"}


@pytest.mark.parametrize("cols", [1, 17, 64, 257])
@pytest.mark.parametrize("rows", [7, 9])
def test_kernel_guard_bands(rows, cols, device):
    """The kernels write exactly their rows (functional outputs, in-place views in NaN buffers, the backward)."""
    from fastpath_lib.fused import kernels

    case = FusedCaseSpec(rows=rows, cols=cols, layout="row_slice", pad=3, residual_layout="row_slice",
                         residual_pad=5).build(seed=rows + cols, device=device)
    x, r, w = case.args()
    want_y, want_s = reference.native(x, r, w, 1e-6)
    y, ybuf, ypr = poisoned_like((rows, cols), x.dtype, x.device)
    s, sbuf, spr = poisoned_like((rows, cols), x.dtype, x.device)
    kernels.forward(x, r, w, 1e-6, out=y, new_residual=s)
    assert output_guard_intact(ybuf, ypr, 16) and output_guard_intact(sbuf, spr, 16)
    assert torch.equal(s, want_s) and case.outside_untouched()
    torch.testing.assert_close(y, want_y, atol=1e-5, rtol=2e-6)
    dy, ds = torch.randn(rows, cols, device=device), torch.randn(rows, cols, device=device)
    dx, dw = kernels.backward(dy, ds, x, r, w, 1e-6)
    rdx, rdr, rdw = reference.reference_grads(x, r, w, 1e-6, dy, ds)
    atol, rtol = reference.tolerance(x.dtype, grad=True)
    torch.testing.assert_close(dx.double(), rdx, atol=atol, rtol=rtol)
    torch.testing.assert_close(dw.double(), rdw, atol=atol * cols, rtol=rtol)
    kernels.run_(x, r, w, 1e-6)  # in place, on the strided views
    assert torch.equal(r, want_s) and case.outside_untouched()
    torch.testing.assert_close(x, want_y, atol=1e-5, rtol=2e-6)


# --- the rounding points of the contract ----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype,wdtype", [(torch.float16, torch.float16), (torch.bfloat16, torch.bfloat16),
                                          (torch.float16, torch.float32), (torch.float32, torch.bfloat16)])
def test_low_precision_matches_the_native_bit_for_bit(dtype, wdtype, device):
    """Same fp32 arithmetic, same rounding points: the residual is bitwise, and at most 1% of the outputs differ, by
    one unit in the last place (the mean square is summed in another order). A residual rounded before the
    variance or the weight's rounding skipped changes far more elements than that."""
    case = FusedCaseSpec(rows=16, cols=256, dtype=dtype, weight=wdtype).build(seed=3, device=device)
    x, r, w = case.args()
    with fastpath_lib.record_routes() as routes:
        out, s = fastpath_lib.fused_add_rms_norm(x, r, w)
    want_out, want_s = reference.native(x, r, w)
    assert routes == {"triton": 1} and torch.equal(s, want_s)
    differ = out != want_out
    assert differ.float().mean() <= 0.01, f"{int(differ.sum())} of {out.numel()} outputs differ from the native"
    ulp = torch.finfo(dtype).eps * want_out.float().abs().clamp_min(torch.finfo(dtype).tiny)
    assert ((out.float() - want_out.float()).abs() <= ulp).all()


#: fp32 NaNs other than the canonical ``0x7FC00000``: mantissa all ones (what a buffer filled with ``0xFF`` holds),
#: signalling, negative, with a payload. Rounding to bf16 on the bits by adding ``0x7FFF`` carries an all-ones mantissa
#: into the sign bit: the NaN becomes ``-0.0`` and its whole row normalizes to zeros.
NAN_BITS = (0x7FFFFFFF, 0xFFFFFFFF, 0x7F800001, 0xFFC00000, 0x7FC12345)


@pytest.mark.parametrize("inplace", [False, True], ids=["functional", "in_place"])
@pytest.mark.parametrize("bits", NAN_BITS, ids=hex)
def test_a_nan_of_any_bits_stays_nan(bits, inplace, device):
    """fp32 x and residual, a bf16 weight (the normalized row is rounded to bf16 before the product): one NaN in row 3
    makes row 3 of the output all NaN, as in the composite, and the new residual NaN exactly where the sum is."""
    gen = torch.Generator().manual_seed(7)
    x, r = (torch.randn(16, 64, generator=gen).to(device) for _ in range(2))
    w = (1 + 0.5 * torch.randn(64, generator=gen)).to(device, torch.bfloat16)
    x.view(torch.int32)[3, 5] = bits - (1 << 32 if bits >= 1 << 31 else 0)
    assert x[3, 5].isnan()
    want_out, want_s = reference.native(x, r, w)
    with fastpath_lib.record_routes() as routes:
        out, s = FORMS[inplace](x, r, w)
    assert routes == {"triton": 1}
    assert out[3].isnan().all(), f"row 3 of the output: {out[3, :4].tolist()}..., the composite's is NaN"
    assert torch.equal(out.isnan(), want_out.isnan()) and torch.equal(s.isnan(), want_s.isnan())
    assert torch.equal(s.nan_to_num(7.0), want_s.nan_to_num(7.0))
    atol, rtol = reference.tolerance(x.dtype)
    torch.testing.assert_close(out, want_out, atol=atol, rtol=rtol, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_variance_is_of_the_unrounded_sum(dtype, device):
    """Constant rows normalize to exactly 1 when the variance comes from the fp32 sum. Here the sum is not
    representable in the input dtype (it rounds up by most of an ulp), so a variance of the rounded residual gives
    1 - ulp instead."""
    ulp = torch.finfo(dtype).eps
    x = torch.ones(16, 64, dtype=dtype, device=device)
    r = torch.full((16, 64), 0.6 * ulp, dtype=dtype, device=device)  # 1 + 0.6 ulp rounds to 1 + ulp
    with fastpath_lib.record_routes() as routes:
        out, s = fastpath_lib.fused_add_rms_norm(x, r, eps=0.0)
    assert routes == {"triton": 1}
    assert torch.equal(s, torch.full_like(s, 1 + ulp)), "the residual is the sum rounded to the input dtype"
    assert torch.equal(out, torch.ones_like(out)), f"got {out[0, 0].item()!r}: variance of the rounded residual?"


def test_in_place_reads_both_rows_before_writing(device):
    """``residual`` is ``x`` (the composite's route) and the kernel on its own: both give the composite's values."""
    from fastpath_lib.fused import kernels

    x = torch.randn(16, 64, device=device)
    w = 1 + 0.1 * torch.randn(64, device=device)
    want, _ = reference.native(x, x.clone(), w, 1.0)  # eps = 1: the output depends on the sum's scale
    y = x.clone()
    kernels.run_(y, y, w, 1.0)  # one program writes the rows it read: the same result
    torch.testing.assert_close(y, want, atol=1e-5, rtol=2e-6)
    z = x.clone()
    with fastpath_lib.record_routes() as routes:
        fastpath_lib.fused_add_rms_norm_(z, z, w, 1.0)
    assert routes == {"fallback": 1} and torch.equal(z, want)


# --- the in-place form as PyTorch's in-place ops ------------------------------------------------------------------

def test_in_place_bumps_versions_and_returns_its_inputs(device):
    x, _, w = CaseSpec(rows=16, cols=64).build(seed=1, device=device).args()
    r = torch.randn_like(x)
    vx, vr = x._version, r._version
    with fastpath_lib.record_routes() as routes:
        got = fastpath_lib.fused_add_rms_norm_(x, r, w)
    assert routes == {"triton": 1} and got[0] is x and got[1] is r
    assert x._version > vx and r._version > vr


def test_in_place_on_a_leaf_that_requires_grad_raises_as_torch_does(device):
    x = torch.randn(16, 64, device=device, requires_grad=True)
    r = torch.randn(16, 64, device=device)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        x.add_(1)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        fastpath_lib.fused_add_rms_norm_(x, r)
    with torch.no_grad():  # outside autograd it is a plain in-place call, on the fast path
        with fastpath_lib.record_routes() as routes:
            fastpath_lib.fused_add_rms_norm_(x, r)
    assert routes == {"triton": 1}


def test_the_known_gap_a_direct_call_of_the_registered_op_writes_a_leaf_that_requires_grad():
    """docs/reference.md's known gap: ``torch.ops.fastpath.fused_add_rms_norm_`` runs below autograd, so it writes a
    leaf that requires grad without the error the public function raises. When torch closes the gap this fails:
    reword the sentence."""
    x, r = torch.randn(4, 64, requires_grad=True), torch.randn(4, 64)
    before = x.detach().clone()
    torch.ops.fastpath.fused_add_rms_norm_(x, r, None, None)
    assert not torch.equal(x.detach(), before)


def test_in_place_on_views_is_recorded_by_autograd(device):
    """On non-leaf views the in-place form keeps autograd's history: gradients equal the functional form's."""
    a0 = torch.randn(16, 64, device=device)
    b0 = torch.randn(16, 64, device=device)
    w0 = 1 + 0.1 * torch.randn(64, device=device)
    grads = []
    for inplace in (False, True):
        a, b, w = (t.clone().requires_grad_() for t in (a0, b0, w0))
        x, r = a * 1.0, b * 1.0
        if inplace:
            fastpath_lib.fused_add_rms_norm_(x, r, w)
            out, s = x, r
        else:
            out, s = fastpath_lib.fused_add_rms_norm(x, r, w)
        (out * s).sum().backward()
        grads.append((a.grad, b.grad, w.grad))
    for g_func, g_inpl in zip(*grads):
        torch.testing.assert_close(g_inpl, g_func, atol=1e-4, rtol=1e-4)


def test_spec_parts_are_the_ops_own(device):
    """FUSED_SPEC hands the operator spec the op's own pieces: its fast routes compute the native's results, its
    bytes model counts 4 passes fused and 5 unfused, and its generator is the predicate's boundary points."""
    from fastpath_lib.fused.spec import FUSED_SPEC

    x, r, w = FusedCaseSpec(rows=16, cols=64).build(seed=4, device=device).args()
    want_out, want_s = FUSED_SPEC.reference(x, r, w)
    out, s = FUSED_SPEC.fast_route(x, r, w)
    assert torch.equal(s, want_s) and FUSED_SPEC.predicate is PREDICATE
    torch.testing.assert_close(out, want_out, atol=1e-5, rtol=2e-6)
    FUSED_SPEC.fast_route_inplace(x, r, w)
    assert torch.equal(r, want_s) and torch.equal(x, out)
    rows, cols = 8, 4096
    assert FUSED_SPEC.bytes_moved(rows, cols, 2) == 4 * rows * cols * 2
    assert FUSED_SPEC.bytes_moved(rows, cols, 2, fused=False) == 5 * rows * cols * 2
    assert [p.id for p in FUSED_SPEC.boundary_points()] == [p.id for p in boundary_points()]


# --- a call that raises writes nothing ------------------------------------------------------------------------------

def _leaf(t):
    return t.detach().clone().requires_grad_()  # the case's tensors are views of guarded buffers


def _leaf_view(x, r, w):
    base = torch.randn(2, *x.shape, requires_grad=True)
    return base[0], r, w


def _no_grad_view(x, r, w):
    base = torch.randn(2, *x.shape, requires_grad=True) * 1.0
    with torch.no_grad():
        view = base[0]
    return view, r, w


def _inference(x, r, w):
    with torch.inference_mode():
        return x.clone(), r, w


#: name -> (make(x, r, w) -> (x, r, w), PyTorch's own in-place op that raises the same: the message to match)
RAISING = {
    "leaf x": (lambda x, r, w: (_leaf(x), r, w), lambda x, r, w: x.add_(r)),
    "leaf residual": (lambda x, r, w: (x, _leaf(r), w), lambda x, r, w: r.add_(x)),
    "view of a leaf as x": (_leaf_view, lambda x, r, w: x.add_(r)),
    "no_grad view as x, weight requires grad": (
        lambda x, r, w: _no_grad_view(x, r, w.requires_grad_()), lambda x, r, w: x.mul_(w)),
    "one of unbind's views as residual": (
        lambda x, r, w: (x, (torch.randn(2, *r.shape, requires_grad=True) * 1.0).unbind(0)[1], w),
        lambda x, r, w: r.add_(x)),
    "inference x": (_inference, lambda x, r, w: x.add_(r)),
    "x one row, broadcasts": (lambda x, r, w: (x[:1], r, w), lambda x, r, w: x.add_(r)),
    "x rows expanded from one": (lambda x, r, w: (x[:1].expand_as(x), r, w), lambda x, r, w: x.add_(r)),
    "residual of another width": (lambda x, r, w: (x, r[:, :32], w), lambda x, r, w: x.add_(r)),
    "weight of the wrong width": (lambda x, r, w: (x, r, w[:32]), lambda x, r, w: x.mul_(w)),
    "integer residual": (lambda x, r, w: (x, r.long(), w), lambda x, r, w: r.add_(x)),
}

# Every raising call fails the predicate (the residual's match, the weight, in-place autograd or inference), so the
# custom op, which serves only eligible calls under torch.compile or a dispatch mode, never sees one: the test
# asserts the route. Not here: a direct call of torch.ops.fastpath.fused_add_rms_norm_ (shape cases take the same
# composite inside it; torch.library runs a mutating op's kernel without autograd's in-place rules) and
# torch.compile (a write that cannot happen fails the trace, on fake tensors, before anything runs).
ROUTES = {"public": fastpath_lib.fused_add_rms_norm_, "composite": reference.native_}


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("case", RAISING)
def test_a_call_that_raises_writes_nothing(case, route):
    """Every check either write could fail runs before the first write, on every route, with PyTorch's message."""
    make, torch_op = RAISING[case]
    x, r, w = make(*FusedCaseSpec(rows=16, cols=64).build(seed=5).args())
    with pytest.raises(RuntimeError) as want:
        torch_op(x, r, w)  # PyTorch refuses it too, before writing
    x0, r0 = x.detach().clone(), r.detach().clone()
    with fastpath_lib.record_routes() as routes, pytest.raises(RuntimeError) as got:
        ROUTES[route](x, r, w)
    assert routes == ({"fallback": 1} if route == "public" else {})
    assert torch.equal(x.detach(), x0) and torch.equal(r.detach(), r0), "a call that raised wrote into its inputs"
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("batched", ["residual", "x"])
def test_vmap_raises_before_writing(batched):
    """Under vmap a result batched where the written tensor is not raises (PyTorch's message), before either write."""
    x, r, w = FusedCaseSpec(rows=4, cols=64).build(seed=6).args()
    xs, rs = torch.stack([x, x + 1]), torch.stack([r, r + 1])
    x0, r0, xs0, rs0 = x.clone(), r.clone(), xs.clone(), rs.clone()
    if batched == "residual":
        call = torch.vmap(lambda rb: fastpath_lib.fused_add_rms_norm_(x, rb, w))
        args = (rs,)
    else:
        call = torch.vmap(lambda xb: fastpath_lib.fused_add_rms_norm_(xb, r, w))
        args = (xs,)
    with pytest.raises(RuntimeError, match="vmap: inplace arithmetic"):
        call(*args)
    assert all(torch.equal(a, b) for a, b in ((x, x0), (r, r0), (xs, xs0), (rs, rs0)))


def test_mixed_dtypes_follow_torch_in_place_arithmetic():
    """x fp32, residual fp16: the fp32 sum rounded to fp16, bit for bit ``residual.add_(x)``. x fp16, residual fp32:
    the sum rounded to fp16 (the contract's rounding point), where ``residual.add_(x)`` keeps the fp32 sum."""
    x, r, w = FusedCaseSpec(rows=16, cols=64).build(seed=8).args()
    r16 = (r * 1000).half()  # large values: fp32 and fp16 sums differ
    want = r16.clone().add_(x)
    out, _ = reference.native(x, r16, w)
    got = fastpath_lib.fused_add_rms_norm_(x.clone(), r16, w)
    assert torch.equal(got[1], want) and got[1].dtype == torch.float16 and torch.equal(got[0], out)
    x16, r32 = (x * 1000).half(), r.clone()
    plain = r32.clone().add_(x16)
    fastpath_lib.fused_add_rms_norm_(x16, r32, w.half())
    assert torch.equal(r32, plain.half().float()) and not torch.equal(r32, plain)
