"""Evidence toolkit: the predeclared benchmark matrix, its harness, the analyses and the PR note.

The reviewer's *performance* claim rests on this package: a case matrix declared before anything runs
(:func:`load_cases`), a harness that times every case for every provider and records raw samples and the environment
(:func:`run_matrix`), a classification against the baseline with a noise band taken from the measured spread
(:func:`classify`), the dispatch-boundary plot (:func:`boundary_plot`), the row-threshold sweep
(:func:`threshold_sweep`), a workload replay (:func:`replay`), the maintenance cost (:func:`compile_cost`), run-to-run
drift (:func:`compare`) and a drafted PR note (:func:`pr_note`).

Note:
    Without CUDA the harness times F.rms_norm on the CPU and the Triton kernels in Triton's interpreter, with
    ``torch.utils.benchmark``; every such result is labelled "not a GPU measurement" and no speed-up is claimed from it.

>>> from fastpath_lib import bench
>>> len(bench.load_cases()) >= 12
True
"""

from fastpath_lib.bench.analysis import (  # noqa: F401
    boundary_plot,
    boundary_table,
    classify,
    compare,
    summary_table,
    threshold_sweep,
)
from fastpath_lib.bench.metadata import environment
from fastpath_lib.bench.harness import PROVIDERS, run_matrix
from fastpath_lib.bench.matrix import OUTCOMES, BenchCase, check_coverage, load_cases
from fastpath_lib.bench.report import pr_note
from fastpath_lib.bench.results import INCOMPLETE_MARKER, latest_gpu_results, load_results
from fastpath_lib.bench.workload import compile_cost, replay

__all__ = [
    "BenchCase", "INCOMPLETE_MARKER", "OUTCOMES", "PROVIDERS", "boundary_plot", "boundary_table", "check_coverage",
    "classify", "compare", "compile_cost", "environment", "latest_gpu_results", "load_cases", "load_results",
    "pr_note", "replay", "run_matrix", "summary_table", "threshold_sweep",
]
