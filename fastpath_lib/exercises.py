"""The checks learners call from the exercise notebooks (``exercises/exNN_*.ipynb``): a short façade.

The notebooks' materials (inputs, tables, texts) come from :mod:`fastpath_lib.grading.materials`, and exercise 07's
given classes from :mod:`fastpath_lib.grading.given`; in the grader's sandbox the learner's kernel imports a generated
copy of this façade (:func:`fastpath_lib.grading.engine.sandbox.facade_source`) in which the checks are stand-ins.

Each ``check_*`` function runs the learner's code on a fixed set of cases (and on cases drawn at each call) and
shows, per graded part, ``passed`` or a "yours vs expected" report. It never raises: a stub that still raises
``NotImplementedError`` (or returns ``None``) scores 0 with feedback. The checks live in
:mod:`fastpath_lib.grading`, one module per exercise; ``python -m fastpath_lib grade`` runs them itself on the
learner's functions, after restoring the distributed check cells, and never reads what a notebook displays.

Pass ``show=False`` to get the :class:`~fastpath_lib.grading.registry.Result` list back instead of displaying it.

>>> import torch
>>> from fastpath_lib import exercises
>>> [r.passed for r in exercises.check_default_eps(lambda dtype: 1e-6, show=False)]
[False]
"""

from fastpath_lib.grading.checks.ex01_reference import check_default_eps, check_reference
from fastpath_lib.grading.checks.ex02_kernel import (
    MEMORY_RULE,
    check_add_rms_norm_kernel,
    check_backward_with_saved_rstd,
)
from fastpath_lib.grading.checks.ex03_predicate import (
    check_alignment_condition,
    check_cols_condition,
    check_dtype_condition,
    check_v2_predicate,
)
from fastpath_lib.grading.checks.ex04_boundary import check_boundary_cases
from fastpath_lib.grading.checks.ex05_matrix import check_case_matrix
from fastpath_lib.grading.checks.ex06_classify import check_classification
from fastpath_lib.grading.checks.ex07_note import check_pr_note
from fastpath_lib.grading.checks.ex08_capstone import (
    check_capstone_dispatch,
    check_capstone_kernel,
    check_capstone_predicate,
    check_capstone_reference,
)
from fastpath_lib.grading.checks.ex08_evidence import check_capstone_evidence
from fastpath_lib.grading.checks.ex09_contract import check_contract_tests
from fastpath_lib.grading.checks.ex10_threshold import check_threshold
from fastpath_lib.grading.checks.ex11_commits import check_commit_plan
from fastpath_lib.grading.checks.ex12_inplace import check_inplace_tests, check_overlaps
from fastpath_lib.grading.checks.ex13_review import check_readiness
from fastpath_lib.grading.given import expected_classes
from fastpath_lib.grading.materials import (
    KINDS,
    KNOWN_OPS,
    SWEEP_LABEL,
    SYNTHETIC_LABEL,
    V2_ALIGN_BYTES,
    V2_DTYPES,
    V2_MAX_COLS,
    change_hunks,
    device,
    interpreter_environment,
    interpreter_results,
    sweep_table,
    synthetic_environment,
    synthetic_results,
)
from fastpath_lib.grading.vocabulary import OUTCOMES
from fastpath_lib.rmsnorm.layout import row_stride

__all__ = [
    "check_default_eps", "check_reference", "check_add_rms_norm_kernel", "check_backward_with_saved_rstd",
    "check_dtype_condition", "check_cols_condition", "check_alignment_condition", "check_v2_predicate",
    "check_boundary_cases", "check_case_matrix", "check_classification", "check_pr_note",
    "check_capstone_reference", "check_capstone_kernel", "check_capstone_predicate", "check_capstone_dispatch",
    "check_contract_tests", "check_threshold", "sweep_table", "SWEEP_LABEL", "check_commit_plan", "change_hunks",
    "KINDS", "check_overlaps", "check_inplace_tests", "check_readiness", "check_capstone_evidence",
    "synthetic_results", "synthetic_environment", "interpreter_results", "interpreter_environment",
    "expected_classes", "row_stride", "device", "SYNTHETIC_LABEL", "OUTCOMES", "KNOWN_OPS",
    "V2_MAX_COLS", "V2_ALIGN_BYTES", "V2_DTYPES", "MEMORY_RULE",
]
