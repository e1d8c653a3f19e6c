"""Which graded parts each exercise has, and how many points each is worth: the one table checks and grader share.

A check call in a notebook reports one :class:`Result` per part (see :mod:`fastpath_lib.exercises`); the grader
(:mod:`fastpath_lib.grading.cli`) looks up the parts of the notebook's exercise here, so a part whose check never ran
is still listed, as failed with "check did not run".
"""

from __future__ import annotations

import dataclasses
import json

__all__ = ["MIME", "EXERCISES", "TITLES", "Result", "points_of", "MUTANTS"]

#: MIME type of the machine-readable result a check displays next to its text.
MIME = "application/vnd.fastpath.grade.v1+json"

#: The seeded faulty variants ex04's boundary cases must catch (names only; they live in grading/mutants.py).
MUTANTS = (
    "min_rows_off_by_one", "max_cols_off_by_one", "no_row_stride_check", "no_last_dim_check",
    "alignment_modulus_8", "no_row_stride_alignment", "accepts_fp64", "weight_alignment_ignored",
    "kernel_mean_over_block", "kernel_ignores_row_stride", "kernel_unmasked_tail", "kernel_eps_outside_sqrt",
    "kernel_weight_always_applied",
)

#: exercise id -> ((part, points), ...), in the order the notebook checks them.
EXERCISES: dict[str, tuple[tuple[str, int], ...]] = {
    "ex01": (("default_eps", 1), ("reference", 2)),
    "ex02": (("forward_kernel", 3), ("backward_kernel (stretch)", 1)),
    "ex03": (("dtype_condition", 1), ("cols_condition", 1), ("alignment_condition", 2), ("predicate", 1)),
    "ex04": tuple((f"catches {m}", 1) for m in MUTANTS),
    "ex05": (("size_coverage", 1), ("layout_coverage", 1), ("expectations", 1)),
    "ex06": (("classification", 2), ("summary_counts", 1)),
    "ex07": (("sections", 1), ("consistent_with_data", 2), ("no_claims_from_cpu_data", 1)),
    "ex08": (("reference", 1), ("kernel", 2), ("predicate_declarations", 2), ("dispatch", 1)),
}

TITLES = {
    "ex01": "the float64 reference", "ex02": "the forward Triton kernel", "ex03": "predicate for a changed spec",
    "ex04": "boundary cases (graded by mutation)", "ex05": "the benchmark case matrix",
    "ex06": "classifying results", "ex07": "the PR note", "ex08": "capstone: a second operator",
}


def points_of(exercise: str, part: str) -> int:
    """Points of one part (``KeyError`` if the part is not registered)."""
    for name, pts in EXERCISES[exercise]:
        if name == part:
            return pts
    raise KeyError(f"{exercise} has no part {part!r}")


@dataclasses.dataclass(frozen=True)
class Result:
    """The outcome of one graded part: what a check displays and what the grader parses."""

    exercise: str
    part: str
    points: int
    passed: bool
    feedback: str = ""

    @property
    def earned(self) -> int:
        return self.points if self.passed else 0

    def text(self) -> str:
        head = f"{self.exercise} · {self.part} ({self.earned}/{self.points} points): "
        head += "passed" if self.passed else "FAILED"
        if self.feedback:
            head += "\n" + "\n".join("    " + line for line in self.feedback.splitlines())
        return head

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def bundle(self) -> dict:
        """The display bundle: readable text for people, JSON for the grader."""
        return {"text/plain": self.text(), MIME: json.loads(json.dumps(self.to_dict()))}
