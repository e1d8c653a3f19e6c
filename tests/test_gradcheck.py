"""The comparison of a route's values with the reference's (:mod:`fastpath_lib.gradcheck`): where a bf16 value that
differs under Triton's interpreter gets the hint that the interpreter's cast may be the cause, and where not."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

from fastpath_lib import gradcheck, launches, opspec, runtime
from fastpath_lib.bench import opcheck
from fastpath_lib.triton_casts import round_to

pytestmark = pytest.mark.skipif(not runtime.interpreter_enabled(), reason="the hint is the interpreter's")


@triton.jit
def _triple_kernel(X_ptr, Y_ptr, n, BLOCK: tl.constexpr, CASTS: tl.constexpr):
    """``y = 3 x`` in fp32, stored with the kit's cast (``CASTS``) or with Triton's own (which the interpreter
    truncates for bf16)."""
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.load(X_ptr + offs, mask=mask, other=0.0).to(tl.float32) * 3.0
    y = round_to(y, Y_ptr.dtype.element_ty) if CASTS else y.to(Y_ptr.dtype.element_ty)
    tl.store(Y_ptr + offs, y, mask=mask)


def _triple(x: torch.Tensor, casts: bool) -> torch.Tensor:
    y = torch.empty_like(x)
    _triple_kernel[(1,)](x, y, x.numel(), BLOCK=triton.next_power_of_2(x.numel()), CASTS=casts)
    return y


def _reference(x: torch.Tensor) -> torch.Tensor:
    return (x.float() * 3.0).to(x.dtype)  # torch rounds to nearest even


X = torch.randn(256, generator=torch.Generator().manual_seed(5)).to(torch.bfloat16)
BITWISE = {torch.bfloat16: (0.0, 0.0), torch.float16: (0.0, 0.0)}


def _mismatch(got, want, seen):
    return gradcheck.tensor_mismatch(got, want, 0.0, 0.0, "bitwise", seen) or ""


def test_the_bf16_hint_is_given_where_the_interpreters_cast_can_be_the_cause_and_nowhere_else():
    """A plain-cast bf16 kernel under the interpreter is off by one ulp here and there: the hint is given. It is not
    given to a value off by more than the interpreter's casts can move it (a wrong kernel, 25% off), to a call that
    launched no Triton kernel, nor to a kernel whose stores went through ``fastpath_lib.triton_casts``."""
    want = _reference(X)
    with launches.observe() as plain:
        got = _triple(X, casts=False)
    assert not torch.equal(got, want)  # the interpreter truncates: some values one ulp toward zero
    assert runtime.INTERPRETER_BF16 in _mismatch(got, want, plain)
    assert "max error" in _mismatch(got * 1.25, want, plain)
    assert runtime.INTERPRETER_BF16 not in _mismatch(got * 1.25, want, plain)  # 25% off: not a cast
    assert runtime.INTERPRETER_BF16 not in _mismatch(got, want, launches.Launched())  # no kernel ran
    assert runtime.INTERPRETER_BF16 not in _mismatch(got, want, None)  # launches not observed
    with launches.observe() as casts:
        exact = _triple(X, casts=True)
    assert torch.equal(exact, want) and launches.converts_with_casts(casts) and not launches.converts_with_casts(plain)
    assert runtime.INTERPRETER_BF16 not in _mismatch(got, want, casts)  # the same error, from a kernel with the casts
    half = X.to(torch.float16)
    assert runtime.INTERPRETER_BF16 not in _mismatch(_reference(half) * 1.001, _reference(half), plain)


def test_a_check_observes_the_call_s_launches_for_the_hint():
    """``check_call`` (bench's check before timing) watches the call: the plain-cast kernel's one-ulp errors get the
    hint; the same values from a call that launches no kernel, and a kernel with the kit's casts, get none."""
    launched = _triple(X, casts=False)
    spec = opspec.OpSpec("triple", lambda x: _triple(x, casts=False), _reference, tuple, str,
                         baselines={"b": _reference}, tolerances=BITWISE)
    assert runtime.INTERPRETER_BF16 in (opcheck.check_call(spec, spec.function, (X,), torch.bfloat16) or "")
    no_kernel = opcheck.check_call(spec, lambda x: launched.clone(), (X,), torch.bfloat16)
    assert "max error" in no_kernel and runtime.INTERPRETER_BF16 not in no_kernel
