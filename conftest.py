"""Root conftest: settings for ``pytest --nbval`` on the lesson notebooks (notebooks/*.ipynb).

nbval compares each code cell's saved outputs with fresh ones. Warnings that torch and Triton print to stderr differ
between versions and runs, so stderr is not compared (``collector.skip_compare``); volatile stdout (addresses,
timings, paths, versions) is rewritten by ``nbval_sanitize.cfg`` and cells tagged ``nbval-ignore-output`` are not
compared at all.

Where the nbval plugin is installed, this conftest turns it on with the kit's settings (``--nbval``, the sanitizer
``nbval_sanitize.cfg``, a 300 s cell timeout) unless the command line already chose (``--nbval``/``--nbval-lax``, or
``-p no:nbval`` to leave the notebooks out). pyproject's ``addopts`` does not name nbval, so on a machine without it
(the GPU machine's bare package set) ``python -m pytest -m gpu tests`` collects and runs. Run the lessons alone:

    PYTHONPATH=. python -m pytest notebooks -p no:cacheprovider
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent

#: nbval settings applied where the plugin is present (option dest -> value)
NBVAL_OPTIONS = {"nbval_sanitize_with": str(ROOT / "nbval_sanitize.cfg"), "nbval_cell_timeout": 300.0}
_NBVAL_DEFAULTS = {"nbval_sanitize_with": None, "nbval_cell_timeout": 2000}


def _enable_nbval(config) -> bool:
    """Turn nbval on with the kit's settings when the plugin is loaded and the command line did not choose."""
    if not config.pluginmanager.hasplugin("nbval"):
        return False
    opt = config.option
    if not (getattr(opt, "nbval", False) or getattr(opt, "nbval_lax", False)):
        opt.nbval = True
    for dest, value in NBVAL_OPTIONS.items():
        if getattr(opt, dest, None) == _NBVAL_DEFAULTS[dest]:
            setattr(opt, dest, value)
    return True


def pytest_configure(config):
    _enable_nbval(config)
    # the notebook kernels inherit the environment: make `import fastpath_lib` work from notebooks/
    path = os.environ.get("PYTHONPATH", "")
    if str(ROOT) not in path.split(os.pathsep):
        os.environ["PYTHONPATH"] = str(ROOT) + (os.pathsep + path if path else "")


def pytest_collectstart(collector):
    if collector.fspath and collector.fspath.ext == ".ipynb" and hasattr(collector, "skip_compare"):
        skip = tuple(collector.skip_compare)
        if "stderr" not in skip:
            collector.skip_compare = skip + ("stderr",)
