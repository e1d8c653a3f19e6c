"""The numerical extremes, in every dtype pair the predicates admit, both ops, forward and backward, every route.

Inputs hold the values at the edges of each dtype (:data:`fastpath_lib.testing.EXTREMES`: NaNs of every kind, signed
zeros and infinities, subnormals, the smallest normal and the largest finite values), one per row among normal values
and alone in whole rows, in ``x``, the residual and the weight; the backward's upstream gradient holds them too. NaN
and sign must match the reference exactly, values within the tolerance (:func:`~fastpath_lib.testing.compare_extremes`).

The forward's reference is the contract, computed in fp32 (``F.rms_norm``; the fused op's
:func:`~fastpath_lib.fused.reference.native`, whose new residual must match bit for bit). The gradients' reference is
the definition's, in float64, on the rows where the fp32 contract is in range
(:func:`~fastpath_lib.testing.overflowing_rows`); the largest finite weight and upstream gradient stay in the forward
for the same reason (their fp32 products overflow where float64's do not). The fallback's gradient is autograd's
through the contract's rounding points, so it gets the tolerance of the coarser of ``x``'s and the weight's dtypes.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import fastpath_lib
from fastpath_lib.fused import reference as fused_ref
from fastpath_lib.testing import (
    EXTREMES,
    compare_extremes,
    extreme_rows,
    extreme_values,
    overflowing_rows,
    reference_grads,
    tolerance,
)

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
#: Every (x, weight) pair both predicates admit: the residual has x's dtype.
PAIRS = [(d, w) for d in DTYPES for w in (None, *DTYPES)]
PAIR_IDS = [f"{str(d)[6:]}-w{str(w)[6:] if w else 'none'}" for d, w in PAIRS]
#: The public function on the fast path, the same forced to the fallback, and ``torch.ops.fastpath`` called directly.
ROUTES = ("triton", "fallback", "op")
COLS = 32
#: Weight and upstream-gradient extremes the backward takes (the largest finite ones overflow fp32 products).
SMALL = tuple(n for n in EXTREMES if "max" not in n)
OPS = torch.ops.fastpath


@pytest.fixture(autouse=True)
def checked(traffic_checked):
    return traffic_checked


def _weight(wdtype, names, device):
    """``1 + 0.5 N(0, 1)`` with the named extremes of its dtype at columns 8 and on."""
    if wdtype is None:
        return None
    w = (1 + 0.5 * torch.randn(COLS, generator=torch.Generator().manual_seed(1), dtype=torch.float64)).to(wdtype)
    w[8:8 + len(names)] = extreme_values(wdtype, names)
    return w.to(device)


def _upstream(like: torch.Tensor) -> torch.Tensor:
    """A normal upstream gradient with the small extremes at columns 16 to 23 of rows 3 on."""
    dy = torch.randn(like.shape, generator=torch.Generator().manual_seed(2), dtype=torch.float64).to(like.dtype)
    for i, v in enumerate(extreme_values(like.dtype, SMALL)):
        dy[3 + i, 16 + i % 8] = v
    return dy.to(like.device)


def _coarser(*dtypes):
    return max((d for d in dtypes if d is not None), key=lambda d: torch.finfo(d).eps)


def _check(got, want, atol, rtol, what):
    problem = compare_extremes(got, want, atol, rtol)
    assert problem is None, f"{what}: {problem}"


def _routed(route, phases=("forward",)):
    """Record the routes of ``phases`` and force the fallback on the fallback route."""
    import contextlib

    stack = contextlib.ExitStack()
    counters = [stack.enter_context(fastpath_lib.record_routes(p)) for p in phases]
    stack.enter_context(fastpath_lib.force_fallback(route == "fallback"))
    return stack, counters


def _bits(t):
    return t.view({4: torch.int32, 2: torch.int16}[t.element_size()]).tolist()


def _taken(route):
    return {"fallback" if route == "fallback" else "triton": 1}


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("dtype,wdtype", PAIRS, ids=PAIR_IDS)
def test_rms_norm(dtype, wdtype, route, device):
    x = extreme_rows(dtype, COLS, device=device)
    w = _weight(wdtype, EXTREMES, device)
    stack, (fwd,) = _routed(route)
    with stack:
        y = OPS.rms_norm(x, [COLS], w, None) if route == "op" else fastpath_lib.rms_norm(x, [COLS], w)
    assert fwd == _taken(route)
    _check(y, F.rms_norm(x, [COLS], w), *tolerance(dtype), "output")

    x = x[~overflowing_rows(x)].clone().requires_grad_()
    w = _weight(wdtype, SMALL, device)
    w = w.requires_grad_() if w is not None else None
    dy = _upstream(x)
    stack, (fwd, bwd) = _routed(route, ("forward", "backward"))
    with stack:
        y = OPS.rms_norm(x, [COLS], w, None) if route == "op" else fastpath_lib.rms_norm(x, [COLS], w)
        got = torch.autograd.grad(y, [t for t in (x, w) if t is not None], dy)
    assert fwd == _taken(route) and (route == "fallback" or bwd == _taken(route))
    want = reference_grads(x, [COLS], w, None, dy)
    coarse = _coarser(dtype, wdtype) if route == "fallback" else dtype
    _check(got[0], want[0], *tolerance(coarse, grad=True), "dx")
    if w is not None:
        _check(got[1], want[1], *tolerance(_coarser(wdtype, coarse), grad=True), "dw")


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("dtype,wdtype", PAIRS, ids=PAIR_IDS)
def test_fused_add_rms_norm(dtype, wdtype, route, device):
    x = extreme_rows(dtype, COLS, device=device)
    r = extreme_rows(dtype, COLS, seed=1, device=device).roll(5, 0).flip(1)  # extremes meet extremes, at other columns
    w = _weight(wdtype, EXTREMES, device)
    want_out, want_s = fused_ref.native(x, r, w)
    atol, rtol = fused_ref.tolerance(dtype)
    for inplace in (False, True):
        xi, ri = x.clone(), r.clone()
        stack, (fwd,) = _routed(route)
        with stack:
            if route == "op" and inplace:
                OPS.fused_add_rms_norm_(xi, ri, w, None)
                out, s = xi, ri
            elif route == "op":
                out, s = OPS.fused_add_rms_norm(xi, ri, w, None)
            else:
                out, s = (fastpath_lib.fused_add_rms_norm_ if inplace else fastpath_lib.fused_add_rms_norm)(xi, ri, w)
        form = "in place" if inplace else "functional"
        assert fwd == _taken(route), form
        if inplace:
            assert out is xi and s is ri, form
        else:
            assert _bits(xi) == _bits(x) and _bits(ri) == _bits(r), "the functional form wrote into its inputs"
        _check(out, want_out, atol, rtol, f"{form}: output")
        _check(s, want_s, 0.0, 0.0, f"{form}: new residual (bit for bit)")

    keep = ~overflowing_rows(x, r)
    x, r = x[keep].clone().requires_grad_(), r[keep].clone().requires_grad_()
    w = _weight(wdtype, SMALL, device)
    w = w.requires_grad_() if w is not None else None
    dy = _upstream(x)
    stack, (fwd, bwd) = _routed(route, ("forward", "backward"))
    with stack:
        out, _ = OPS.fused_add_rms_norm(x, r, w, None) if route == "op" else fastpath_lib.fused_add_rms_norm(x, r, w)
        got = torch.autograd.grad(out, [t for t in (x, r, w) if t is not None], dy)
    assert fwd == _taken(route) and (route == "fallback" or bwd == _taken(route))
    want = fused_ref.reference_grads(x, r, w, None, dy)
    coarse = _coarser(dtype, wdtype) if route == "fallback" else dtype
    for name, g, e in zip(("dx", "dresidual"), got, want):
        _check(g, e, *fused_ref.tolerance(coarse, grad=True), name)
    if w is not None:
        _check(got[2], want[2], *fused_ref.tolerance(_coarser(wdtype, coarse), grad=True), "dw")


def test_the_inputs_hold_every_extreme():
    """Every named extreme reaches x (the residual and the weight are built the same way), bit for bit."""
    for dtype in DTYPES:
        x = extreme_rows(dtype, COLS)
        assert set(_bits(extreme_values(dtype))) <= {b for row in _bits(x) for b in row}
        assert int(overflowing_rows(x).sum()) == (0 if dtype == torch.float16 else 4)  # +-max: in a row, alone


def test_the_poison_around_every_case_is_a_non_canonical_nan():
    """The guard bands every case is built in (:func:`fastpath_lib.cases.poison`) hold every byte ``0xFF``: a NaN with
    the sign and every mantissa bit set, the NaN a rounding on the bits that forgets NaN turned into ``-0.0``, so an
    out-of-bounds read through such a rounding would have hidden in the output."""
    from fastpath_lib.cases import CaseSpec, poison

    for dtype in DTYPES:
        p = poison(4, dtype, "cpu")
        assert p.isnan().all() and set(_bits(p)) == {-1}
        assert not set(_bits(p)) & set(_bits(extreme_values(dtype, ("nan",))))
        built = CaseSpec(rows=4, cols=16, dtype=dtype, layout="row_slice", pad=4).build()
        assert set(_bits(built.x_buffer[16:20])) == {-1}, "the pad after the first row"
