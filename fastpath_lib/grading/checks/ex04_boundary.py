"""Exercise 04: boundary cases, graded by mutation.

The learner's cases must catch every seeded mutant of :mod:`fastpath_lib.grading.rules.mutants`: a predicate that is too
loose or too strict, a faulty forward or backward kernel, wrong numerics. The mutants are drawn afresh at every check
(:func:`~fastpath_lib.grading.rules.mutants.drawn`: how far past a limit, which modulus, which dtype), so cases fitted
offline to a fixed list carry no guarantee; a case at each limit and one step past it catches every draw. One graded
part per mutant *category*; feedback says which categories still have survivors (and, for the predicate, on which side)
and the kinds of input on which the survivors differ from the correct code (a regime such as "a width that is not a
power of two", never a case and never the mutant's name).

Limits: at most :data:`MAX_CASES` cases of at most :data:`MAX_ELEMENTS` elements each, built from
:class:`~fastpath_lib.cases.CaseSpec` by hand: generating them with the kit's boundary generator fails the check.
"""

from __future__ import annotations

import dataclasses
import random

import torch

from fastpath_lib.cases import CaseSpec, output_guard_intact, poisoned_like
from fastpath_lib.grading.checks.ex04_advice import MAX_CASES, MAX_ELEMENTS  # the exercise's limits, one source
from fastpath_lib.grading.materials import device
from fastpath_lib.grading.registry import Result, mutant_part
from fastpath_lib.grading.report.feedback import Fail, call, case_label, graded
from fastpath_lib.grading.rules import borrowed
from fastpath_lib.grading.rules import mutant_kernels as K
from fastpath_lib.grading.rules import mutants as M
from fastpath_lib.grading.rules.mutation import category_result
from fastpath_lib.rmsnorm import predicate as rms
from fastpath_lib.rmsnorm.layout import as_rows
from fastpath_lib.testing import compare, reference_grads, reference_rms_norm

__all__ = ["check_boundary_cases", "MAX_CASES", "MAX_ELEMENTS"]


_GENERATED = borrowed.kit("boundary.py", why="the kit's boundary generator writes them for you") + borrowed.kit(
    "boundary.py", "overrides", why="those are the predicate's own declared boundaries") + borrowed.kit(
    "grading", why="that is the grader's own answer")


def _exercise_call(x, ns, w):
    """The predicate context with the interpreter's limits (min_rows 8, max_cols 16384) on any machine."""
    c = rms.make_call(x, ns, w)
    return dataclasses.replace(c, limits=rms.Limits(source="exercise limits"),
                               interpret=c.interpret or x.device.type == "cpu")


def _kernel_problem(y, expected, dtype, buf, pristine, built, *, grad=False) -> str | None:
    bad = compare(y, expected, dtype, grad=grad)
    if bad is None and not output_guard_intact(buf, pristine, 16):
        return "wrote outside the output"
    if bad is None and not built.inputs_untouched():
        return "changed the input"
    return bad


def _kernel_verdicts(built, x, ns, w, caught: dict, errors: list, mutants: tuple) -> None:
    if not any(m.kind in ("forward", "backward") and not caught[m.name] for m in mutants):
        return  # no kernel mutant left to catch: the references below would go unused
    x2d = as_rows(x)
    expected = reference_rms_norm(x, ns, w, None)
    g = torch.Generator().manual_seed(6)
    dy = torch.randn(x2d.shape, generator=g, dtype=torch.float64).to(x.dtype).to(x.device)
    eps = rms.default_eps(x.dtype)
    edx, edw = reference_grads(x2d, (x2d.shape[-1],), w, eps, dy)
    for kind in ("forward", "backward"):
        todo = [m for m in mutants if m.kind == kind and not caught[m.name]]
        if not todo:
            continue
        for m in [None] + todo:
            code = 0 if m is None else m.code
            if kind == "forward":
                y, buf, pristine = poisoned_like(x2d.shape, x.dtype, x.device)
                K.run_forward(code, x2d, w, None, y)
                bad = _kernel_problem(y.view(x.shape), expected, x.dtype, buf, pristine, built)
            else:
                dx, buf, pristine = poisoned_like(x2d.shape, x.dtype, x.device)
                dw = K.run_backward(code, dy, x2d, w, eps, dx, programs=0 if m is None else m.programs)
                bad = _kernel_problem(dx, edx, x.dtype, buf, pristine, built, grad=True)
                if bad is None and w is not None:
                    bad = compare(dw, edw, w.dtype, grad=True)
            if m is None and bad:
                errors.append(f"{case_label(built.spec)}: the correct {kind} kernel fails here ({bad}); "
                              f"not a usable case")
                break
            if m is not None and bad:
                caught[m.name] = True


def _verdicts(specs: list[CaseSpec], mutants: tuple = M.ALL) -> tuple[dict[str, bool], list[str]]:
    """Mutant name -> caught, and the cases that could not be used (grader-internal: never shown per mutant), for
    ``mutants`` (the published hardest ones by default; the check draws its own, :func:`~.mutants.drawn`)."""
    caught = {m.name: False for m in mutants}
    errors: list[str] = []
    predicates = {m.name: M.mutant_predicate(m) for m in mutants if m.kind == "predicate"}
    for s in specs:
        try:
            built = s.build(seed=5, device=device())
        except Exception as exc:  # noqa: BLE001 - a case that cannot be built is feedback
            errors.append(f"{case_label(s)}: cannot build ({type(exc).__name__}: {exc})")
            continue
        x, ns, w = built.args()
        c = _exercise_call(x, ns, w)
        route = rms.PREDICATE.evaluate(c).route
        for name, pred in predicates.items():
            if not caught[name] and pred.evaluate(c).route != route:
                caught[name] = True
        if route == "triton":
            _kernel_verdicts(built, x, ns, w, caught, errors, mutants)
    return caught, errors


def _validate(specs) -> list[CaseSpec]:
    specs = list(specs)
    if not specs:
        raise Fail("your function returned no cases")
    if len(specs) > MAX_CASES:
        raise Fail(f"{len(specs)} cases; at most {MAX_CASES}, please: boundary cases are chosen, not swept")
    for s in specs:
        if not isinstance(s, CaseSpec):
            raise Fail(f"every case must be a CaseSpec, got {type(s).__name__}: {s!r:.80}")
        if s.rows * s.cols > MAX_ELEMENTS:
            raise Fail(f"{case_label(s)} is too large for a unit test (> {MAX_ELEMENTS} elements)")
    return specs


def _survivors(category: str, caught: dict[str, bool]) -> str | None:
    """What the surviving mutants of ``category`` do (``None``: every one was caught)."""
    alive = [m for m in M.by_category(category) if not caught[m.name]]  # names and sides are the same in a draw
    if not alive:
        return None
    sides = sorted({m.side for m in alive})
    regimes = "; ".join(dict.fromkeys(m.regime for m in alive if m.regime))
    where = f"; they differ from the correct code on {regimes}" if regimes else ""
    if sides == ["wrong result"]:
        return f"{category} mutants that compute a wrong result on some eligible input{where}"
    return f"{category} mutants that are {' and '.join(sides)}" + {
        "too loose": " (they accept a call the kit sends to the fallback)",
        "too strict": " (they send an eligible call to the fallback)"}.get(sides[0] if len(sides) == 1 else "", "") \
        + where


def _grade(my_cases, rng=None) -> list[Result]:
    specs = _validate(borrowed.run(my_cases, (), _GENERATED) if callable(my_cases) else call(my_cases))
    caught, errors = _verdicts(specs, M.drawn(rng or random.SystemRandom()))
    results = []
    for category in M.CATEGORIES:
        survivors = _survivors(category, caught)
        r = category_result("ex04", mutant_part(category), survivors,
                            f"caught all {len(M.by_category(category))} {category} mutants")
        results.append(dataclasses.replace(r, feedback=r.feedback + "\n" + "\n".join(errors))
                       if errors and survivors else r)
    return results


def check_boundary_cases(my_cases, *, show: bool = True):
    """``my_cases() -> list[CaseSpec]`` must catch every seeded mutant (one part per mutant category)."""
    return graded("ex04", [mutant_part(c) for c in M.CATEGORIES], _grade, my_cases, show=show)
