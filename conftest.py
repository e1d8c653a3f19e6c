"""Root conftest: settings for ``pytest --nbval`` on the lesson notebooks (notebooks/*.ipynb).

nbval compares each code cell's saved outputs with fresh ones. Warnings that torch and Triton print to stderr differ
between versions and runs, so stderr is not compared (``collector.skip_compare``); volatile stdout (addresses,
timings, paths, versions) is rewritten by ``nbval_sanitize.cfg`` and cells tagged ``nbval-ignore-output`` are not
compared at all. Run:

    PYTHONPATH=. python -m pytest --nbval --nbval-sanitize-with nbval_sanitize.cfg notebooks -p no:cacheprovider
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent


def pytest_configure(config):
    # the notebook kernels inherit the environment: make `import fastpath_lib` work from notebooks/
    path = os.environ.get("PYTHONPATH", "")
    if str(ROOT) not in path.split(os.pathsep):
        os.environ["PYTHONPATH"] = str(ROOT) + (os.pathsep + path if path else "")


def pytest_collectstart(collector):
    if collector.fspath and collector.fspath.ext == ".ipynb" and hasattr(collector, "skip_compare"):
        skip = tuple(collector.skip_compare)
        if "stderr" not in skip:
            collector.skip_compare = skip + ("stderr",)
