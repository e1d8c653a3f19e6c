"""Which teachable item of the lessons is graded where: item -> lesson -> exercise part -> check.

The table is data (:data:`ITEMS`); the README's copy is rendered from it (:func:`markdown_table`) and
``tests/course/test_seed_coverage.py`` keeps the two the same, checks that every named part is registered
(:data:`~fastpath_lib.grading.registry.EXERCISES`) and that at least :data:`MIN_GRADED` items are graded.

>>> graded = [i for i in ITEMS if i.parts]
>>> len(graded) >= MIN_GRADED
True
"""

from __future__ import annotations

import dataclasses

from fastpath_lib.grading.registry import EXERCISES, mutant_part

__all__ = ["Item", "ITEMS", "MIN_GRADED", "graded", "markdown_table"]

#: At least this many items must be graded by a registered part (issue 16: 32 of the lessons' ~35).
MIN_GRADED = 32


@dataclasses.dataclass(frozen=True)
class Item:
    """One teachable item.

    Args:
        name: what a learner should be able to do.
        lessons: the lessons (``"03"``) that teach it.
        parts: ``(exercise, part)`` pairs that grade it; empty when nothing does.
        check: the check function that grades it (``exercises.<name>``), or why nothing does.
        note: what the grading leaves out, where it is partial.
    """

    name: str
    lessons: tuple[str, ...]
    parts: tuple[tuple[str, str], ...]
    check: str
    note: str = ""


def _all(exercise: str) -> tuple[tuple[str, str], ...]:
    """Every registered part of ``exercise`` (the parts grade the item together)."""
    return tuple((exercise, p) for p, _ in EXERCISES[exercise])


def _ex13(part: str) -> tuple[tuple[str, str], ...]:
    return (("ex13", part),)


ITEMS: tuple[Item, ...] = (
    Item("a float64 semantic reference of the op", ("01",), (("ex01", "reference"),), "check_reference"),
    Item("the reference's default eps", ("01",), (("ex01", "default_eps"),), "check_default_eps"),
    Item("contract-parity tests: dtype, layout, aliasing, eps, gradients, forward AD, exceptions", ("01",),
         tuple(("ex09", p) for p in ("dtype", "layout", "aliasing", "eps", "autograd", "forward_ad", "exceptions")),
         "check_contract_tests"),
    Item("a Triton forward kernel (masked loads, fp32 accumulation)", ("02",), (("ex02", "add_rms_norm_kernel"),),
         "check_add_rms_norm_kernel"),
    Item("a backward kernel from the saved rstd", ("02",), (("ex02", "backward_with_saved_rstd (stretch)"),),
         "check_backward_with_saved_rstd"),
    Item("eligibility conditions, each with its reason", ("03",),
         (("ex03", "dtype_condition"), ("ex03", "cols_condition"), ("ex03", "alignment_condition")),
         "check_dtype_condition, check_cols_condition, check_alignment_condition"),
    Item("the predicate as named conditions, all evaluated", ("03",), (("ex03", "predicate"),), "check_v2_predicate"),
    Item("boundary cases at each of the predicate's limits", ("04",),
         tuple(("ex04", mutant_part(c)) for c in ("shape limits", "layout", "alignment", "dtype")),
         "check_boundary_cases", note="lesson 04 generates them from the predicate's declarations; ex04 grades cases "
         "the learner writes and refuses an answer that calls the generator"),
    Item("both routes against the reference: kernel faults caught", ("04",),
         tuple(("ex04", mutant_part(c)) for c in ("forward kernel", "numerics", "backward kernel")),
         "check_boundary_cases"),
    Item("a predeclared benchmark matrix: sizes and layouts", ("05",),
         (("ex05", "size_coverage"), ("ex05", "layout_coverage")), "check_case_matrix"),
    Item("expectations declared before measuring", ("05",), (("ex05", "expectations"),), "check_case_matrix"),
    Item("win / neutral / loss / fallback with a noise band", ("05",),
         (("ex06", "classification"), ("ex06", "summary_counts")), "check_classification"),
    Item("environment metadata with the results: device and versions, timer, warm-up, synchronization, "
         "statistic and spread, raw samples; the scope: the predicate's column limit and dtypes", ("05", "07"),
         (("ex07", "environment_and_scope"), ("ex07", "measurement_method")), "check_pr_note"),
    Item("the PR note, graded on what a program can decide: concise, sections, the performance table, the Outcomes "
         "counts and a case line with a figure for each loss and neutral case, each held to the data", ("07",),
         (("ex07", "sections"), ("ex07", "concise"), ("ex07", "consistent_with_data")), "check_pr_note"),
    Item("no speed-up claimed from non-GPU data", ("05", "07"), (("ex07", "no_claims_from_cpu_data"),),
         "check_pr_note"),
    Item("the per-architecture row threshold from a sweep", ("06",),
         (("ex10", "thresholds"), ("ex10", "no_threshold")), "check_threshold"),
    Item("reviewable commits: one behaviour change each (its tests with or before it, its docs with or after it), "
         "every commit green, refactors apart", ("07",),
         _all("ex11"), "check_commit_plan"),
    Item("the workflow on an operator you choose (capstone)", ("02", "03", "04"),
         tuple(("ex08", p) for p in ("reference", "kernel", "predicate_declarations", "dispatch")),
         "check_capstone_reference, check_capstone_kernel, check_capstone_predicate, check_capstone_dispatch"),
    Item("the mechanism: bytes moved, GB/s against the copy bandwidth", ("02", "05"), _ex13("results_table"),
         "check_readiness"),
    Item("unsupported-GPU and CUDA-graph-capture conditions", ("03", "06"), _ex13("route_conditions"),
         "check_readiness"),
    Item("determinism, autocast and torch.compile preserved", ("01", "04"), _ex13("test_report"), "check_readiness",
         "as claims a test report supports or not"),
    Item("fake-tensor, opcheck and compiled tests", ("04",), _ex13("test_report"), "check_readiness"),
    Item("non-finite inputs", ("04",), _ex13("test_report"), "check_readiness"),
    Item("sanitizers on a GPU (guard bands on a CPU)", ("04",), _ex13("test_report"), "check_readiness"),
    Item("small CI on every push, GPU sweeps on a schedule", ("06",), _ex13("test_report"), "check_readiness",
         "a skipped GPU test supports no claim"),
    Item("mature baselines: why not an existing primitive or torch.compile?", ("05", "06"),
         _ex13("results_table") + _ex13("review_comments"), "check_readiness"),
    Item("the workload replay: per-call times weighted by counts", ("06",), _ex13("maintenance_cost"),
         "check_readiness"),
    Item("compile time and binary size", ("06",), _ex13("maintenance_cost"), "check_readiness"),
    Item("the fallback switch and a named owner", ("06",), _ex13("maintenance_cost"), "check_readiness"),
    Item("the dispatch-boundary plot", ("05",), (("ex08", "evidence_package"),) + _ex13("results_table"),
         "check_capstone_evidence, check_readiness"),
    Item("an intentional contract change: its own commit, justification and migration evidence", ("07",),
         _ex13("contract_change"), "check_readiness",
         "scored on the commit, the callers affected and their pins; the justification is shown for a person to read"),
    Item("readability is part of the performance work", ("07",), _ex13("review_comments"), "check_readiness"),
    Item("answering review by strengthening the evidence, not defending the work", ("07",),
         _ex13("review_comments"), "check_readiness"),
    Item("the knowledge-check answers", ("00", "01", "02", "03", "04", "05", "06", "07"), (),
         "not graded: free-text recall, answered in the lessons' answer guides"),
    Item("the capstone's evidence package (matrix and boundary plot for the learner's own op)", ("05",),
         (("ex08", "evidence_package"),), "check_capstone_evidence"),
)


def graded() -> list[Item]:
    """The items some registered part grades."""
    return [i for i in ITEMS if i.parts and all(e in EXERCISES and p in dict(EXERCISES[e]) for e, p in i.parts)]


def markdown_table() -> str:
    """The README's table: item, lessons, exercise parts, check (and the total graded)."""
    rows = ["| item | lesson | exercise · part | check |", "|---|---|---|---|"]
    for it in ITEMS:
        parts = ", ".join(f"{e} · {p}" for e, p in it.parts) or "—"
        check = f"`{it.check}`" if it.parts else it.check
        if it.note:
            check += f" ({it.note})"
        rows.append(f"| {it.name} | {', '.join(it.lessons)} | {parts} | {check} |")
    rows.append("")
    rows.append(f"{len(graded())} of {len(ITEMS)} items graded.")
    return "\n".join(rows)
