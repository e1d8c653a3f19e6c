"""Exercise 04's advisory self-check: boundary cases judged against the predicate and the exercise's properties.

The graded check (:mod:`fastpath_lib.grading.checks.ex04_boundary`) runs the learner's cases against seeded faults
that a course release does not ship. This check needs none of them: it evaluates each case with the kit's own
predicate (under the interpreter's limits, as the exercise states them) and says which of the exercise's stated
properties the set has:

* for each condition the exercise names (the shape limits, the layout, the alignment, the dtype), a case on which
  that condition alone fails while every other condition holds (one step past its limit); for the two numeric
  limits, an eligible case exactly at the limit too (``rows == min_rows``, ``cols == max_cols``);
* an eligible case of each supported dtype, of each eligible layout, with and without a weight;
* at most :data:`MAX_CASES` cases of at most :data:`MAX_ELEMENTS` elements.

It is advice, not a grade: it returns no points, and meeting every line does not guarantee that every drawn mutant is
caught (the autograder grades that). In the student release the exercise's check cell runs this check.
"""

from __future__ import annotations

import dataclasses

from fastpath_lib.cases import CaseSpec
from fastpath_lib.grading.report.feedback import case_label
from fastpath_lib.rmsnorm import predicate as rms

__all__ = ["advise_boundary_cases", "Advice", "CONDITIONS", "MAX_CASES", "MAX_ELEMENTS"]

#: At most this many cases, each of at most :data:`MAX_ELEMENTS` elements (the exercise's limits).
MAX_CASES = 24
MAX_ELEMENTS = 8 * rms.MAX_COLS * 2
#: The exercise's categories of the predicate -> the predicate's conditions each one is about.
CONDITIONS = {
    "shape limits": ("min_rows", "cols"),
    "layout": ("row_stride", "last_dim_contiguous"),
    "alignment": ("input_alignment", "row_stride_alignment", "weight_alignment"),
    "dtype": ("dtype",),
}
#: The eligible layouts a set of boundary cases shows the fast path on.
_LAYOUTS = ("contiguous", "batched", "row_slice", "step")


@dataclasses.dataclass(frozen=True)
class Advice:
    """One property of the set: ``what`` it asks for, whether the cases have it, and which cases show it (or why
    not)."""

    what: str
    ok: bool
    detail: str = ""


def _call(x, ns, w):
    c = rms.make_call(x, ns, w)
    return dataclasses.replace(c, limits=rms.Limits(source="exercise limits"),
                               interpret=c.interpret or x.device.type == "cpu")


def _evaluated(specs):
    """``(spec, built, failing condition names, eligible)`` per case that builds; and the cases that do not."""
    out, broken = [], []
    for s in specs:
        try:
            built = s.build(seed=5, device="cpu")
        except Exception as exc:  # noqa: BLE001 - a case that cannot be built is advice
            broken.append(f"{case_label(s)}: cannot build ({type(exc).__name__}: {exc})")
            continue
        c = _call(*built.args())
        failing = {cond.name for cond in rms.PREDICATE.conditions if rms.PREDICATE.check_one(cond.name, c)}
        out.append((s, built, failing, not failing))
    return out, broken


def _labels(rows) -> str:
    return ", ".join(case_label(s) for s in rows[:3]) + (" ..." if len(rows) > 3 else "")


def advice(specs) -> list[Advice]:
    """The advisory lines for ``specs`` (see the module docstring)."""
    specs = list(specs)
    small = len(specs) <= MAX_CASES and all(s.rows * s.cols <= MAX_ELEMENTS for s in specs)
    out = [Advice(f"at most {MAX_CASES} cases, each of at most {MAX_ELEMENTS} elements", small, f"{len(specs)} cases")]
    rows, broken = _evaluated(specs)
    out += [Advice("every case builds", not broken, "; ".join(broken))]
    limits = rms.Limits(source="exercise limits")
    eligible = [r for r in rows if r[3]]
    for category, names in CONDITIONS.items():
        for name in names:
            alone = [s for s, _, failing, _ in rows if failing == {name}]
            out.append(Advice(f"{category}: a case on which {name} alone fails (one step past it, every other "
                              f"condition met)", bool(alone), _labels(alone)))
    at_rows = [s for s, _, _, _ in eligible if s.rows == limits.min_rows]
    at_cols = [s for s, _, _, _ in eligible if s.cols == limits.max_cols]
    out.append(Advice(f"shape limits: an eligible case exactly at the row threshold ({limits.min_rows} rows)",
                      bool(at_rows), _labels(at_rows)))
    out.append(Advice(f"shape limits: an eligible case exactly at the column limit ({limits.max_cols} columns)",
                      bool(at_cols), _labels(at_cols)))
    for dtype in rms.SUPPORTED_DTYPES:
        have = [s for s, _, _, _ in eligible if s.dtype == dtype]
        out.append(Advice(f"an eligible {str(dtype).replace('torch.', '')} case", bool(have), _labels(have)))
    for layout in _LAYOUTS:
        have = [s for s, _, _, _ in eligible if s.layout == layout]
        out.append(Advice(f"an eligible {layout} case", bool(have), _labels(have)))
    for label, weighted in (("with a weight", True), ("without a weight", False)):
        have = [s for s, _, _, _ in eligible if (s.weight is not None) == weighted]
        out.append(Advice(f"an eligible case {label}", bool(have), _labels(have)))
    return out


def advise_boundary_cases(my_cases, *, show: bool = True):
    """Advice on ``my_cases() -> list[CaseSpec]`` against the predicate and the exercise's properties (no points; the
    autograder grades the cases against seeded faults). With ``show=False`` returns the :class:`Advice` lines."""
    try:
        specs = my_cases() if callable(my_cases) else my_cases
        if specs is None or not all(isinstance(s, CaseSpec) for s in specs):
            raise TypeError("my_boundary_cases() must return a list of CaseSpec")
        lines = advice(specs)
    except NotImplementedError:
        lines = [Advice("my_boundary_cases is implemented", False, "it still raises NotImplementedError")]
    except Exception as exc:  # noqa: BLE001 - advice, never a crash
        lines = [Advice("my_boundary_cases returns a list of CaseSpec", False, f"{type(exc).__name__}: {exc}")]
    if not show:
        return lines
    missing = sum(not a.ok for a in lines)
    print("ex04 · advisory self-check, no points: the graded check runs in your course's autograder only, against "
          "seeded faults this release does not hold")
    for a in lines:
        print(("ok       " if a.ok else "MISSING  ") + a.what + (f"  [{a.detail}]" if a.detail else ""))
    print("every property above holds" if not missing else f"{missing} of {len(lines)} properties missing")
    return None
