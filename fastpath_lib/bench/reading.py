"""What the lessons read as evidence, under the names they import: the newest recorded GPU run and the dispatch's
host cost drawn side by side. Nothing is decided here: :mod:`fastpath_lib.bench.results` reads the folders
(:func:`recorded_gpu_run`; which folder counts: :func:`~fastpath_lib.bench.schema.is_gpu_run_folder`), and the plot
is :func:`fastpath_lib.bench.host.host_plot`.
"""

from fastpath_lib.bench.host import host_plot
from fastpath_lib.bench.results import RESULTS_ROOT, Recorded, recorded_gpu_run

__all__ = ["RESULTS_ROOT", "Recorded", "recorded_gpu_run", "host_plot"]
