"""Evidence toolkit: the predeclared benchmark matrix, its harness, the analyses, the PR note and the evidence run.

The reviewer's *performance* claim rests on this package: a case matrix declared before anything runs
(:func:`load_cases`), a harness that times every case for every provider and records raw samples and the environment
(:func:`run_matrix`), a classification against the baseline with a noise band taken from the measured spread
(:func:`classify`), the dispatch-boundary plot (:func:`boundary_plot`), the row-threshold sweep
(:func:`threshold_sweep`), the dispatch's host cost (:func:`measure_host`), a workload replay (:func:`replay`), the
maintenance cost (:func:`compile_cost`), run-to-run drift (:func:`compare`) and a drafted PR note (:func:`pr_note`).
``python -m fastpath_lib evidence`` runs all of it on a GPU in one time-boxed command (:mod:`.evidence`).

Modules, one job each: ``schema`` (what a result means: the columns, the unit, the outcome words, the labels, the
GPU-run rule), ``matrix`` (the declared cases), ``timing``, ``metadata`` (``environment.json``), ``harness`` (running
the matrix), ``hostmethod`` (the one host-timing method), ``ophost`` (any op's host cost), ``host`` (RMSNorm's host
cost and the host tables), ``vllmhost`` (vLLM's dispatch with the kit's provider, in a child process), ``sweep``
(the row threshold), ``workload`` (decoder replay, compile cost, compiled facts), ``trace`` (a serving trace weighted
by call counts), ``buildcost`` (ahead-of-time compile time and cache bytes), ``analysis`` (table arithmetic),
``plot``, ``results`` (folders, and which one is the recorded GPU run), ``reading`` (the names the lessons import from
results and host), ``peer`` (a peer's published GPU data, read critically), ``drift``, ``report`` (the PR note),
``evidence`` and ``evidence_steps`` (the one-command GPU run) with ``pytest_deadline``, and ``cli``.

Note:
    Without CUDA the harness times F.rms_norm on the CPU and the Triton kernels in Triton's interpreter, with
    ``torch.utils.benchmark``; every such result is labelled "not a GPU measurement", its outcome reads *unmeasured*,
    and no speed-up is claimed from it. Times are in microseconds everywhere.

>>> from fastpath_lib import bench
>>> len(bench.load_cases()) >= 12
True
"""

from fastpath_lib.bench.analysis import boundary_table, classify, summary_table
from fastpath_lib.bench.drift import compare
from fastpath_lib.bench.harness import PROVIDERS, run_matrix
from fastpath_lib.bench.host import host_table, measure_host
from fastpath_lib.bench.matrix import BenchCase, check_coverage, load_cases
from fastpath_lib.bench.metadata import environment
from fastpath_lib.bench.plot import boundary_plot
from fastpath_lib.bench.report import pr_note
from fastpath_lib.bench.results import latest_gpu_results, load_results
from fastpath_lib.bench.schema import CSV_COLUMNS, INCOMPLETE_MARKER, OUTCOMES, TIME_UNIT
from fastpath_lib.bench.sweep import threshold_sweep
from fastpath_lib.bench.workload import compile_cost, replay

__all__ = [
    "BenchCase", "CSV_COLUMNS", "INCOMPLETE_MARKER", "OUTCOMES", "PROVIDERS", "TIME_UNIT", "boundary_plot",
    "boundary_table", "check_coverage", "classify", "compare", "compile_cost", "environment", "host_table",
    "latest_gpu_results", "load_cases", "load_results", "measure_host", "pr_note", "replay", "run_matrix",
    "summary_table", "threshold_sweep",
]
