"""A learner's kernel graded where it matters and as a GPU runs it (issue 41, attack round 9): bf16 arithmetic in a
kernel means what it means on a GPU (C9)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fastpath_lib import runtime
from fastpath_lib.grading.engine import bf16_arith, sources

from tests.grading.test_grading_kernel_run import KERNEL, _graded, _in_process  # noqa: E402

interpreted = pytest.mark.skipif(not runtime.interpreter_enabled(), reason="Triton's interpreter only")

#: the sum taken in the input dtype (one correctly rounded add, as the spec's ``h = x + r``): right on a GPU, bit
#: pattern arithmetic under Triton's interpreter (attack 9, C9)
NATIVE_ADD = KERNEL.replace("""    x = tl.load(X + row * xs + cols, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(R + row * rs + cols, mask=mask, other=0.0).to(tl.float32)
    h = (x + r).to(H.dtype.element_ty)""", """    x = tl.load(X + row * xs + cols, mask=mask, other=0.0)
    r = tl.load(R + row * rs + cols, mask=mask, other=0.0)
    h = x + r""")

BF16_OPS = '''
import triton
import triton.language as tl

@triton.jit
def ops(A, B, OUT, F, N: tl.constexpr):
    i = tl.arange(0, N)
    a = tl.load(A + i)
    b = tl.load(B + i)
    tl.store(OUT + i, a + b)
    tl.store(OUT + N + i, a * b)
    tl.store(OUT + 2 * N + i, a - b)
    tl.store(OUT + 3 * N + i, tl.maximum(a, b) + (-a))
    tl.store(OUT + 4 * N + i, tl.where(a < b, a, b))
    tl.store(OUT + 5 * N + i, (a.to(tl.float32) * 1.01).to(tl.bfloat16))
    tl.store(F + i, a.to(tl.float32))
'''


@interpreted
def test_bf16_arithmetic_in_a_kernel_is_what_a_gpu_computes_in_the_grader():
    """Triton's interpreter adds, multiplies and orders bf16 as 16-bit integers (1.5 + 2.0 is NaN) and truncates
    its fp32-to-bf16 casts; under :func:`bf16_arith.as_on_gpu` each is the correctly rounded operation on the values,
    torch's, on the values where rounding shows (subnormals, signed zeros, infinities, NaN); outside it the
    interpreter is as it was."""
    ns: dict = {}
    exec(compile(BF16_OPS, "<ops>", "exec"), ns)  # noqa: S102 - the test's own kernel
    g = torch.Generator().manual_seed(0)
    a = torch.randn(64, generator=g).to(torch.bfloat16)
    b = torch.randn(64, generator=g).to(torch.bfloat16)
    a[:8] = torch.tensor([1.5, -2.0, 1e-40, -0.0, float("inf"), float("nan"), 3e38, -1e-39])
    b[:8] = torch.tensor([2.0, 0.5, 1e-40, 0.0, 1.0, 1.0, 3e38, 2e-39])
    expected = torch.cat([a + b, a * b, a - b, torch.maximum(a, b) - a, torch.where(a < b, a, b),
                          (a.float() * 1.01).to(torch.bfloat16)])

    def run():
        out, f = torch.empty(6 * 64, dtype=torch.bfloat16), torch.empty(64)
        with np.errstate(all="ignore"):
            ns["ops"][(1,)](a, b, out, f, N=64)
        return out, f
    with bf16_arith.as_on_gpu():
        out, f = run()
    assert torch.equal(out.view(torch.int16), expected.view(torch.int16)) or torch.allclose(
        out.float(), expected.float(), rtol=0, atol=0, equal_nan=True), (out - expected).abs().max()
    assert torch.equal(f, a.float()) or torch.allclose(f, a.float(), rtol=0, atol=0, equal_nan=True)
    plain, _ = run()
    assert not torch.allclose(plain.float(), expected.float(), equal_nan=True)  # the patch was scoped to the block


def test_an_honest_kernel_adding_in_bf16_scores_in_the_grader_and_its_notebook():
    """Attack 9, C9: ``h = x + r`` on the loaded bf16 values (a GPU adds them correctly rounded) scored 0 with "got
    5.4e37, expected -1.5": the interpreter's bit-pattern sum reported as the learner's values."""
    assert NATIVE_ADD != KERNEL
    for check in [_graded] + ([_in_process] if runtime.interpreter_enabled() else []):
        r = check(NATIVE_ADD)
        assert r.passed, r.feedback
    assert sources  # the sources the graded check reads (test_grading_kernel_run._graded)
