"""The checks learners call from the exercise notebooks (``exercises/exNN_*.ipynb``): a short façade.

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

from fastpath_lib.grading.ex01_reference import check_default_eps, check_reference
from fastpath_lib.grading.ex02_kernel import check_add_rms_norm_kernel, check_backward_with_saved_rstd
from fastpath_lib.grading.ex03_predicate import (
    V2_ALIGN_BYTES,
    V2_DTYPES,
    V2_MAX_COLS,
    check_alignment_condition,
    check_cols_condition,
    check_dtype_condition,
    check_v2_predicate,
)
from fastpath_lib.grading.ex04_boundary import check_boundary_cases
from fastpath_lib.grading.ex05_matrix import check_case_matrix
from fastpath_lib.grading.ex06_classify import (
    SYNTHETIC_LABEL,
    check_classification,
    expected_classes,
    interpreter_environment,
    interpreter_results,
    synthetic_environment,
    synthetic_results,
)
from fastpath_lib.grading.ex07_note import check_pr_note
from fastpath_lib.grading.ex08_capstone import (
    KNOWN_OPS,
    check_capstone_dispatch,
    check_capstone_kernel,
    check_capstone_predicate,
    check_capstone_reference,
)
from fastpath_lib.grading.ex08_evidence import check_capstone_evidence
from fastpath_lib.grading.ex09_contract import check_contract_tests
from fastpath_lib.grading.ex10_threshold import SWEEP_LABEL, check_threshold, sweep_table
from fastpath_lib.grading.ex11_commits import KINDS, change_hunks, check_commit_plan
from fastpath_lib.grading.ex12_inplace import check_inplace_tests, check_overlaps
from fastpath_lib.grading.ex13_review import check_readiness
from fastpath_lib.grading.feedback import device
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
    "V2_MAX_COLS", "V2_ALIGN_BYTES", "V2_DTYPES",
]
