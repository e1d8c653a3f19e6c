"""Root conftest: settings for ``pytest --nbval`` on the lesson notebooks (notebooks/*.ipynb).

nbval compares each code cell's saved outputs with fresh ones. Warnings that torch and Triton print to stderr differ
between versions and runs, so stderr is not compared (``collector.skip_compare``); volatile stdout (addresses,
timings, paths, versions) is rewritten by ``nbval_sanitize.cfg`` and cells tagged ``nbval-ignore-output`` are not
compared at all.

Where the nbval plugin is installed, this conftest turns it on with the kit's settings (``--nbval``, the sanitizer
``nbval_sanitize.cfg``, a 300 s cell timeout) unless the command line already chose (``--nbval``/``--nbval-lax``, or
``-p no:nbval`` to leave the notebooks out). pyproject's ``addopts`` does not name nbval, and a test module that
imports a notebook package missing here is left out with a line saying so, so on the GPU machine's bare package set
``python -m pytest -m gpu tests`` collects and runs. Run the lessons alone:

    PYTHONPATH=. python -m pytest notebooks -p no:cacheprovider

SIGTERM (what a CI time limit sends) stops pytest as Ctrl-C does, with the fixtures' teardown run, so an interrupted
run leaves no JupyterLab server, kernel or browser behind (``tests/processes.py``); by default Python dies on
SIGTERM without running any teardown.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import signal
import sys
import tempfile
import threading
from pathlib import Path

import pytest

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


#: Packages of the ``dev`` extra that the GPU machine's bare package set lacks. A test module importing one of them at
#: its top level is left out where it is not installed (and the run says so), instead of failing collection.
NOTEBOOK_PACKAGES = frozenset({"nbformat", "nbclient", "nbconvert", "nbval", "jupytext", "markdown_it", "ipywidgets",
                               "ipykernel", "IPython", "jupyter_client", "jupyter_core", "jupyterlab", "playwright"})
_LEFT_OUT: list[tuple[str, list[str]]] = []


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def missing_notebook_packages(path: Path, _seen: frozenset = frozenset()) -> list[str]:
    """The :data:`NOTEBOOK_PACKAGES` a module imports at its top level, itself or through the kit's own test modules
    it imports from (``from tests.x import ...``), and this environment lacks."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return []
    names, missing = [], set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            names += [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module.split(".")[0])
            helper = ROOT.joinpath(*node.module.split(".")).with_suffix(".py")
            if node.module.startswith("tests.") and helper.is_file() and helper not in _seen:
                missing.update(missing_notebook_packages(helper, _seen | {path}))
    return sorted(missing | {n for n in names if n in NOTEBOOK_PACKAGES and not _installed(n)})


def pytest_ignore_collect(collection_path, config):
    if collection_path.suffix == ".py" and collection_path.name.startswith("test_"):
        missing = missing_notebook_packages(Path(collection_path))
        if missing:
            _LEFT_OUT.append((os.path.relpath(collection_path, ROOT), missing))
            return True
    return None


_SIGTERM_PREVIOUS: list = []


def _sigterm_to_interrupt(signum, frame):
    """SIGTERM -> ``KeyboardInterrupt``, once: pytest then stops as on Ctrl-C and runs the fixtures' teardown (the
    browser test's JupyterLab server, kernels and Chromium; the grader's nbclient kernels). Later SIGTERMs (CI
    runners send more than one while a job is cancelled) are ignored so they cannot cut that teardown short;
    SIGKILL, or Ctrl-C again, still ends the run at once."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sys.stderr.write("\npytest: SIGTERM received; stopping as on Ctrl-C (running teardown)\n")
    raise KeyboardInterrupt("SIGTERM")


def install_sigterm_handler() -> bool:
    """Install :func:`_sigterm_to_interrupt` where SIGTERM still has its default action (main thread only)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGTERM"):
        return False
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return False  # someone chose already (an embedding runner, a plugin): leave theirs
    _SIGTERM_PREVIOUS.append(signal.signal(signal.SIGTERM, _sigterm_to_interrupt))
    return True


def pytest_configure(config):
    install_sigterm_handler()
    if _enable_nbval(config):
        _patient_kernel_start()
    # the notebook kernels inherit the environment: make `import fastpath_lib` work from notebooks/
    path = os.environ.get("PYTHONPATH", "")
    if str(ROOT) not in path.split(os.pathsep):
        os.environ["PYTHONPATH"] = str(ROOT) + (os.pathsep + path if path else "")


#: How many times a notebook's kernel is started before its cells are reported as errors
KERNEL_STARTS = 3
_RETRIED = "nbval kernel start retried"


def _patient_kernel_start() -> bool:
    """nbval starts each notebook's kernel once, with the kernel's stderr sent to /dev/null, and every cell of the
    notebook is an error when that one start fails. A kernel can die at start for reasons outside the notebook: the
    ports ``jupyter_client`` picked are free when it picks them and may be taken before the kernel binds them (two
    workers, the grader's kernels and a JupyterLab server all start kernels). Here a kernel that dies before it answers
    is started again, up to :data:`KERNEL_STARTS` times, its stderr kept: a notebook that always kills its kernel still
    fails, with each try's stderr in the error, and a retry that worked is listed at the end of the run."""
    try:
        from nbval import kernel as nbval_kernel
    except ImportError:
        return False
    cls = nbval_kernel.RunningKernel
    if getattr(cls, "_patient", False):
        return True

    def start(self, kernel_name, cwd=None, startup_timeout=60):
        self.start_failures = []
        for attempt in range(1, KERNEL_STARTS + 1):
            err = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # the kernel holds its own fd
            try:
                self.km, self.kc = nbval_kernel.start_new_kernel(startup_timeout=startup_timeout,
                                                                 kernel_name=kernel_name, stderr=err, cwd=cwd)
            except RuntimeError as exc:
                err.seek(0)
                said = err.read().strip()[-1500:] or "(nothing)"
                self.start_failures.append(f"start {attempt}: {exc}; the kernel's stderr: {said}")
                if attempt == KERNEL_STARTS:
                    raise RuntimeError("\n".join(self.start_failures)) from exc
            else:
                break
            finally:
                err.close()
        self._ensure_iopub_up()

    cls.__init__ = start
    cls._patient = True
    return True


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Mark the first report of a notebook whose kernel needed more than one start
    (see :func:`_patient_kernel_start`)."""
    outcome = yield
    kernel = getattr(item.parent, "kernel", None)
    failures = getattr(kernel, "start_failures", None)
    if call.when == "setup" and failures and not getattr(kernel, "start_reported", False):
        kernel.start_reported = True
        outcome.get_result().user_properties.append((_RETRIED, f"{item.parent.nodeid}: " + " | ".join(failures)))


def pytest_terminal_summary(terminalreporter):
    """The test modules left out for a missing notebook package, and the notebook kernels started again."""
    for path, missing in _LEFT_OUT:
        terminalreporter.write_line(f"left out {path}: needs {', '.join(missing)} (not installed here)")
    said = [value for reports in terminalreporter.stats.values() for r in reports
            for name, value in getattr(r, "user_properties", ()) if name == _RETRIED]
    if said:
        terminalreporter.section("notebook kernels started again after dying at start")
        for line in said:
            terminalreporter.write_line(line)


def pytest_collectstart(collector):
    if collector.fspath and collector.fspath.ext == ".ipynb" and hasattr(collector, "skip_compare"):
        skip = tuple(collector.skip_compare)
        if "stderr" not in skip:
            collector.skip_compare = skip + ("stderr",)


def pytest_keyboard_interrupt(excinfo):
    """Interrupted by Ctrl-C too (CI runners cancelling a job send SIGINT, then SIGTERM a few seconds later): ignore
    SIGTERM from here on, so the teardown that follows runs to its end."""
    if _SIGTERM_PREVIOUS and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


def pytest_unconfigure(config):
    while _SIGTERM_PREVIOUS:
        signal.signal(signal.SIGTERM, _SIGTERM_PREVIOUS.pop())


#: Test files that take 15 s or more of one worker each, longest first (measured on 2 cores, a full run under
#: ``./kit test``): they start first, so that under ``--dist loadfile`` no long file begins when the other workers are
#: nearly done. xdist keeps this order only with ``--no-loadscope-reorder`` (``./kit test`` passes it); by default it
#: sorts files by their number of tests, and a file of seven one-minute tests then starts last. test_compiled.py
#: comes second: on a cold Triton cache it compiles for about 200 CPU-s (about 20 s warm), work that fills the cores
#: while the other workers wait on kernel starts.
SLOW_FIRST = ("tests/grading/test_grading_solutions.py", "tests/browser/", "tests/grading/test_grading.py",
              "tests/grading/test_grading_kernel_run.py", "tests/bench/test_evidence.py",
              "tests/grading/test_grading_integrity.py", "notebooks/05_benchmark_matrix.ipynb",
              "tests/grading/test_grading_checks.py",
              "tests/rmsnorm/test_compiled.py",
              "tests/grading/test_grading_honest.py", "tests/course/test_release.py",
              "tests/grading/test_grading_channel.py",
              "tests/grading/test_grading_attacks.py", "tests/grading/test_grading_sandbox.py",
              "tests/upstream/test_vllm_upstream.py",
              "tests/upstream/test_vllm_plugin.py", "tests/bench/test_bench.py", "tests/kit/test_pytest_config.py",
              "notebooks/07_pr_note.ipynb", "notebooks/09_upstream_review.ipynb")


def _slow_rank(item) -> int:
    path = Path(str(item.fspath)).resolve()
    rel = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.as_posix()
    return next((i for i, prefix in enumerate(SLOW_FIRST) if rel.startswith(prefix)), len(SLOW_FIRST))


def pytest_collection_modifyitems(config, items):
    """The files of :data:`SLOW_FIRST` first, in that order; every file's own tests keep their order."""
    items[:] = sorted(items, key=_slow_rank)  # a stable sort: each file's items stay together and in order
