"""Exercise 01: the default eps and the float64 reference.

The learner's reference must match the kit's float64 reference on fixed cases that each catch one mistake (the eps
default of fp16, an explicit ``eps=0.0``, two normalized dims, a row slice) and on cases drawn afresh at every call,
so answers recorded from the kit's reference beforehand do not pass. Handing back, or calling, the kit's reference,
its operator or ``F.rms_norm`` fails the part: the reference must be independent of both routes.

The cases span the reference's domain, not the fast path's: every floating dtype ``F.rms_norm`` takes (float64
included), each with ``eps=None`` on values small enough that the default eps moves the result (mean square near the
dtype's default eps), so a default eps that is right for some dtypes only decides a case wrongly.
"""

from __future__ import annotations

import random

import torch

from fastpath_lib.cases import CaseSpec
from fastpath_lib.grading.registry import Result
from fastpath_lib.grading.report.feedback import Fail, dtype_name, graded, passed, real, table
from fastpath_lib.grading.rules import borrowed
from fastpath_lib.rmsnorm import predicate as rms
from fastpath_lib.testing import compare, reference_rms_norm

__all__ = ["check_default_eps", "check_reference", "FIXED_CASES", "ABSENT"]

_DEFAULT_EPS = borrowed.kit("rmsnorm/limits.py", "default_eps", why="that is the kit's own rule") + borrowed.kit(
    "testing.py", "_eps_for", why="that is the kit's own rule") + borrowed.kit(
    "grading", why="that is the grader's own rule, check or answer key")
_REFERENCE = borrowed.KIT_REFERENCE + borrowed.TORCH_RMS_NORM + borrowed.KIT_OP + borrowed.KIT_KERNELS + _DEFAULT_EPS
#: torch's operators the grader's kernel lacks while this exercise is graded (every normalization operator): a
#: reference that calls one gets its refusal, however it reaches it
ABSENT = borrowed.absent("ex01", _REFERENCE)

#: the dtypes ``F.rms_norm`` takes, each graded with its default eps where it matters
DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _eps_scale(dtype: torch.dtype) -> float:
    """A value scale at which the default eps of ``dtype`` moves the result: a mean square near that eps."""
    return rms.default_eps(dtype) ** 0.5


#: (label, spec, eps): each catches one mistake.
FIXED_CASES = (
    ("7x33 fp32, eps=None", CaseSpec(7, 33), None),
    ("7x33 fp16 tiny values, eps=None", CaseSpec(7, 33, torch.float16, scale=1e-3), None),
    ("5x24 bf16 tiny values, eps=None", CaseSpec(5, 24, torch.bfloat16, scale=1e-3), None),
    ("6x16 fp64 values ~1e-8, eps=None", CaseSpec(6, 16, torch.float64, scale=1e-8), None),
    ("5x20 bf16 no weight, eps=1e-5", CaseSpec(5, 20, torch.bfloat16, weight=None), 1e-5),
    ("6x16 fp32 values ~1e-4, eps=None", CaseSpec(6, 16, scale=1e-4), None),
    ("6x16 fp32 values ~1e-4, eps=0.0", CaseSpec(6, 16, scale=1e-4), 0.0),
    ("2x3x10 fp32, normalized over 2 dims", CaseSpec(6, 10, norm_dims=2), None),
    ("4x9 fp32 row slice", CaseSpec(4, 9, layout="row_slice", pad=3), 1e-6),
)


def _fresh_cases():
    """Cases drawn at each call, one of each dtype: a recorded answer cannot know them."""
    rng = random.SystemRandom()
    out = []
    for dtype in DTYPES:
        spec = CaseSpec(rng.randint(2, 9), rng.randint(3, 40), dtype, weight=rng.choice(("same", None)),
                        scale=rng.choice((1.0, _eps_scale(dtype), 30.0)))
        eps = rng.choice((None, 1e-4))
        out.append((f"drawn now: {spec.label()} scale={spec.scale:g}, eps={eps}", spec, eps, rng.randrange(2 ** 31)))
    return out


def _grade_default_eps(my_default_eps) -> list[Result]:
    rows, bad = [], 0
    for d in DTYPES:
        yours = borrowed.run(my_default_eps, (d,), _DEFAULT_EPS)
        exp = rms.default_eps(d)
        ok = real(yours) == exp
        bad += not ok
        rows.append((dtype_name(d), yours, exp, "ok" if ok else "WRONG"))
    if bad:
        raise Fail(f"{bad} of {len(DTYPES)} dtypes wrong (hint: F.rms_norm computes fp16/bf16 in fp32)\n"
                   + table(rows, ("dtype", "yours", "expected", "")))
    return [passed("ex01", "default_eps")]


def check_default_eps(my_default_eps, *, show: bool = True):
    """``my_default_eps(dtype)`` must equal ``F.rms_norm``'s default eps for each floating dtype."""
    return graded("ex01", ("default_eps",), _grade_default_eps, my_default_eps, show=show)


def _grade_reference(my_reference) -> list[Result]:
    rows, bad = [], []
    cases = [(label, spec, eps, 1) for label, spec, eps in FIXED_CASES] + _fresh_cases()
    for label, spec, eps, seed in cases:
        built = spec.build(seed=seed, device="cpu")
        x, ns, w = built.args()
        yours = borrowed.run(my_reference, (x, ns, w, eps), _REFERENCE)
        if not isinstance(yours, torch.Tensor):
            problem = f"returned {type(yours).__name__}, expected a tensor"
        elif yours.dtype != torch.float64:
            problem = f"dtype {dtype_name(yours.dtype)}, expected float64"
        else:
            problem = compare(yours, reference_rms_norm(x, ns, w, eps), torch.float64)
        if problem is None and not built.inputs_untouched():
            problem = "your reference modified its input"
        rows.append((label, "ok" if problem is None else problem))
        if problem:
            bad.append(label)
    if bad:
        raise Fail(f"{len(bad)} of {len(rows)} cases differ from the expected float64 result\n"
                   + table(rows, ("case", "yours vs expected")))
    return [passed("ex01", "reference")]


def check_reference(my_reference, *, show: bool = True):
    """``my_reference(x, normalized_shape, weight=None, eps=None)`` vs the kit's float64 reference."""
    return graded("ex01", ("reference",), _grade_reference, my_reference, show=show)
