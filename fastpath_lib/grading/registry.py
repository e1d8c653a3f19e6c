"""Which graded parts each exercise has, and how many points each is worth: the one table checks and grader share.

A check call in a notebook reports one :class:`Result` per part (see :mod:`fastpath_lib.exercises`); the grader
(:mod:`fastpath_lib.grading.engine.cli`) looks up the parts of the notebook's exercise here, so a part whose check never
ran is still listed, as failed with "check did not run".
"""

from __future__ import annotations

import dataclasses
import json

from fastpath_lib.grading.rules.mutants import CATEGORIES

__all__ = ["MIME", "EXERCISES", "TITLES", "CHECKS", "KIT_OPS", "HANDOUTS", "Result", "points_of", "mutant_part",
           "check", "absent",
           "forbidden"]

#: MIME type of the machine-readable result a check displays next to its text.
MIME = "application/vnd.fastpath.grade.v1+json"


def mutant_part(category: str) -> str:
    """The ex04 part for one mutant category (:data:`fastpath_lib.grading.rules.mutants.CATEGORIES`)."""
    return f"{category} mutants"


#: exercise id -> ((part, points), ...), in the order the notebook checks them.
EXERCISES: dict[str, tuple[tuple[str, int], ...]] = {
    "ex01": (("default_eps", 1), ("reference", 2)),
    "ex02": (("add_rms_norm_kernel", 3), ("backward_with_saved_rstd (stretch)", 1)),
    "ex03": (("dtype_condition", 1), ("cols_condition", 1), ("alignment_condition", 2), ("predicate", 1)),
    "ex04": tuple((mutant_part(c), 1) for c in CATEGORIES),
    "ex05": (("size_coverage", 1), ("layout_coverage", 1), ("expectations", 1)),
    "ex06": (("classification", 2), ("summary_counts", 1)),
    "ex07": (("sections", 1), ("concise", 1), ("environment_and_scope", 1), ("consistent_with_data", 2),
             ("measurement_method", 1), ("no_claims_from_cpu_data", 1)),
    "ex08": (("reference", 1), ("kernel", 2), ("predicate_declarations", 2), ("dispatch", 1), ("evidence_package", 1)),
    "ex09": (("passes_correct_ops", 1), ("dtype", 1), ("layout", 1), ("aliasing", 1), ("eps", 1), ("autograd", 1),
             ("forward_ad", 1), ("exceptions", 1)),
    "ex10": (("thresholds", 2), ("no_threshold", 1)),
    "ex11": (("one_change_per_commit", 1), ("every_commit_green", 1), ("refactors_apart", 1)),
    "ex12": (("overlaps", 2), ("passes_correct_ops", 1), ("writes", 1), ("returns", 1), ("aliasing", 1),
             ("declared_mutation", 1), ("residual_rounding", 1), ("variance", 1), ("raises_cleanly", 1)),
    "ex13": (("route_conditions", 1), ("test_report", 2), ("results_table", 2), ("review_comments", 2),
             ("maintenance_cost", 2), ("contract_change", 1)),
}

TITLES = {
    "ex01": "the float64 reference", "ex02": "a fused residual-add RMSNorm kernel",
    "ex03": "predicate for a changed spec",
    "ex04": "boundary cases (graded by mutation)", "ex05": "the benchmark case matrix",
    "ex06": "classifying results", "ex07": "the PR note", "ex08": "capstone: the workflow on an operator you choose",
    "ex09": "contract-parity tests (graded by broken ops)",
    "ex10": "the per-architecture row threshold from a sweep",
    "ex11": "commit hygiene: one behaviour change per commit, every commit green",
    "ex12": "the fused op's overlap condition and in-place contract tests (graded by broken ops)",
    "ex13": "review readiness: the kit's artefacts read as a reviewer reads them",
}


#: check function -> the grading module that defines it: how the grader (:mod:`fastpath_lib.grading.engine.cli`) finds
# the
#: check a check cell calls, without the notebook façade (:mod:`fastpath_lib.exercises`).
CHECKS: dict[str, str] = {
    "check_default_eps": "checks.ex01_reference", "check_reference": "checks.ex01_reference",
    "check_add_rms_norm_kernel": "checks.ex02_kernel", "check_backward_with_saved_rstd": "checks.ex02_kernel",
    "check_dtype_condition": "checks.ex03_predicate", "check_cols_condition": "checks.ex03_predicate",
    "check_alignment_condition": "checks.ex03_predicate", "check_v2_predicate": "checks.ex03_predicate",
    "check_boundary_cases": "checks.ex04_boundary", "check_case_matrix": "checks.ex05_matrix",
    "check_classification": "checks.ex06_classify", "check_pr_note": "checks.ex07_note",
    "check_capstone_reference": "checks.ex08_capstone", "check_capstone_kernel": "checks.ex08_capstone",
    "check_capstone_predicate": "checks.ex08_capstone", "check_capstone_dispatch": "checks.ex08_capstone",
    "check_capstone_evidence": "checks.ex08_evidence", "check_contract_tests": "checks.ex09_contract",
    "check_threshold": "checks.ex10_threshold", "check_commit_plan": "checks.ex11_commits",
    "check_overlaps": "checks.ex12_inplace", "check_inplace_tests": "checks.ex12_inplace",
    "check_readiness": "checks.ex13_review",
}
#: The kit's ops the grader runs in its own process as correct controls (exercises 09 and 12): name -> where.
KIT_OPS: dict[str, str] = {"rms_norm": "fastpath_lib", "fused_add_rms_norm_": "fastpath_lib"}

#: What an exercise's text offers the learner's code beyond what its given cells import: exercise -> names of the
#: kit. The grader's sandbox hands the learner's kernel these, the given cells' imports and the façade's materials,
#: with what they import, and nothing else of the kit (:func:`fastpath_lib.grading.engine.sandbox.kernel_library`).
HANDOUTS: dict[str, tuple[str, ...]] = {
    # "`fastpath_lib.explain(*CaseSpec(...).build().args())`", and the route under the check's limits
    "ex04": ("fastpath_lib.explain", "fastpath_lib.rmsnorm.predicate.PREDICATE",
             "fastpath_lib.rmsnorm.predicate.Limits", "fastpath_lib.rmsnorm.predicate.make_call"),
    "ex13": ("fastpath_lib.bench.CSV_COLUMNS",),  # "the columns of `fastpath_lib.bench.CSV_COLUMNS`"
}


def absent(exercise: str) -> list[dict]:
    """What the check modules of ``exercise`` that this copy of the kit holds declare absent from the processes
    that run the learner's code (their ``ABSENT``: :func:`fastpath_lib.grading.rules.borrowed.absent`), each module
    imported here."""
    import importlib

    out = []
    for module in sorted({m for m in CHECKS.values() if m.startswith(f"checks.{exercise}")}):
        try:
            out.append(getattr(importlib.import_module(f"fastpath_lib.grading.{module}"), "ABSENT", None))
        except ModuleNotFoundError:  # a course's student release leaves it out
            continue
    return [spec for spec in out if spec]


def forbidden(exercise: str, kind: str = "Forbidden") -> tuple[tuple[str, str, str], ...]:
    """The ``(file or folder, qualified name or "*", why)`` targets the check modules of ``exercise`` declare at their
    top level (a :class:`~fastpath_lib.grading.rules.borrowed.Forbidden`, alone or as the values of a dict), or with
    ``kind="Given"`` the functions they hand the learner's code: what the test of the grader's sandbox holds the
    modules staged for the exercise's kernel (:func:`fastpath_lib.grading.engine.handout.kernel_library`) against.

    >>> sorted(q for f, q, _ in forbidden("ex13") if f.endswith("analysis.py"))
    ['boundary_table', 'classify', 'outcome_counts', 'summary_table']
    """
    import importlib

    out: dict[tuple[str, str, str], None] = {}
    for module in sorted({m for m in CHECKS.values() if m.startswith(f"checks.{exercise}")}):
        try:
            values = vars(importlib.import_module(f"fastpath_lib.grading.{module}")).values()
        except ModuleNotFoundError:  # a course's student release leaves it out
            continue
        for value in values:
            for item in value.values() if isinstance(value, dict) else (value,):
                if type(item).__name__ == kind and hasattr(item, "targets"):
                    out.update(dict.fromkeys(item.targets))
    return tuple(out)


def check(name: str):
    """The check function ``name`` (a key of :data:`CHECKS`), imported from its module on first use (``LookupError``
    in a course's student release that leaves its module out: :mod:`fastpath_lib.release`)."""
    import importlib

    if name not in CHECKS:
        raise KeyError(f"no check {name!r}")
    module = f"fastpath_lib.grading.{CHECKS[name]}"
    try:
        return getattr(importlib.import_module(module), name)
    except ModuleNotFoundError as exc:
        if exc.name != module:
            raise
        raise LookupError(f"{name} runs in the course's autograder only: this copy of the kit (a student release) "
                          f"has no fastpath_lib/grading/{CHECKS[name].replace('.', '/')}.py") from None


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
    subject: str = ""  # what was graded when a notebook chooses it (exercise 08's operator)

    @property
    def earned(self) -> int:
        return self.points if self.passed else 0

    def with_subject(self, subject: str) -> Result:
        """This result, naming what it graded."""
        return dataclasses.replace(self, subject=subject)

    def text(self) -> str:
        about = f" [{self.subject}]" if self.subject else ""
        head = f"{self.exercise} · {self.part}{about} ({self.earned}/{self.points} points): "
        head += "passed" if self.passed else "FAILED"
        if self.feedback:
            head += "\n" + "\n".join("    " + line for line in self.feedback.splitlines())
        return head

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def bundle(self) -> dict:
        """The display bundle: readable text for people, JSON for the grader."""
        return {"text/plain": self.text(), MIME: json.loads(json.dumps(self.to_dict()))}
