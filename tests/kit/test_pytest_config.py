"""The pytest configuration works with and without nbval: the GPU machine's bare package set has no notebook tools;
and the root conftest's hooks (nbval settings, modules needing missing notebook packages, the SIGTERM handler).

``tools/bare_packages.py`` hides every installed distribution outside torch, triton, numpy, pandas, matplotlib, pytest
and hypothesis (and their dependencies), so these tests run the bare machine's commands here.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import types
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


def _root_conftest():
    spec = importlib.util.spec_from_file_location("fastpath_root_conftest", ROOT / "conftest.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_addopts_do_not_need_nbval():
    opts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert "nbval" not in opts["addopts"]
    assert opts["python_files"] == ["test_*.py"]


def test_bare_packages_hide_the_notebook_tools():
    """One child (a torch import each costs seconds): the notebook tools hidden, the bare set importable, then the
    wrapper's own ``-m fastpath_lib --help`` (every module imported before it was imported with the hiding on)."""
    probe = ("import sys; sys.path.insert(0, 'tools'); import bare_packages as b; b.install()\n"
             "for m in ('nbformat', 'nbval', 'ipywidgets', 'jupyter_client'):\n"
             "    try:\n        __import__(m)\n    except ModuleNotFoundError:\n        pass\n"
             "    else:\n        raise SystemExit(m + ' still importable')\n"
             "import torch, triton, numpy, pandas, matplotlib, pytest, hypothesis, fastpath_lib\n"
             "print('ok', flush=True)\n"
             "sys.exit(b.main(['-m', 'fastpath_lib', '--help']))")
    res = _run("-c", probe)
    assert res.returncode == 0 and res.stdout.splitlines()[0] == "ok", res.stdout + res.stderr
    assert "usage: python -m fastpath_lib COMMAND" in res.stdout, res.stdout + res.stderr


def test_gpu_marker_runs_on_the_bare_package_set():
    """``python -m pytest -m gpu tests`` collects every test module and exits 0 without nbval (issue 9 item 2)."""
    res = _run("tools/bare_packages.py", "-m", "pytest", "-m", "gpu", "tests", "-q", "-p", "no:cacheprovider")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "error" not in res.stdout.splitlines()[-1].lower()
    if "cuda" not in res.stdout.lower():  # on a CPU every gpu test skips, naming CUDA
        assert "needs a CUDA device" in res.stdout


def test_nbval_is_enabled_with_the_kits_settings_where_installed():
    pytest.importorskip("nbval")
    mod = _root_conftest()
    opt = types.SimpleNamespace(nbval=False, nbval_lax=False, nbval_sanitize_with=None, nbval_cell_timeout=2000)
    cfg = types.SimpleNamespace(option=opt, pluginmanager=types.SimpleNamespace(hasplugin=lambda n: n == "nbval"))
    assert mod._enable_nbval(cfg) is True
    assert opt.nbval is True and opt.nbval_cell_timeout == 300
    assert Path(opt.nbval_sanitize_with) == ROOT / "nbval_sanitize.cfg" and Path(opt.nbval_sanitize_with).exists()
    # an explicit choice on the command line wins
    opt = types.SimpleNamespace(nbval=False, nbval_lax=True, nbval_sanitize_with="mine.cfg", nbval_cell_timeout=5)
    cfg.option = opt
    mod._enable_nbval(cfg)
    assert (opt.nbval, opt.nbval_sanitize_with, opt.nbval_cell_timeout) == (False, "mine.cfg", 5)
    # without the plugin nothing is touched
    cfg.pluginmanager = types.SimpleNamespace(hasplugin=lambda n: False)
    opt = types.SimpleNamespace(nbval=False)
    cfg.option = opt
    assert mod._enable_nbval(cfg) is False and opt.nbval is False


def test_notebooks_are_collected_under_nbval_and_left_out_without_it():
    pytest.importorskip("nbval")
    nb = "notebooks/00_setup.ipynb"
    with_nbval = _run("-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", nb)
    assert with_nbval.returncode == 0 and "::Cell 0" in with_nbval.stdout, with_nbval.stdout + with_nbval.stderr
    without = _run("-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-p", "no:nbval", nb)
    assert "::Cell" not in without.stdout


def test_modules_needing_missing_notebook_packages_are_named(tmp_path, monkeypatch):
    mod = _root_conftest()
    f = tmp_path / "test_x.py"
    f.write_text("import os\nimport nbformat\nfrom IPython.display import HTML\nimport torch\n"
                 "def f():\n    import jupytext\n")
    monkeypatch.setattr(mod, "_installed", lambda name: False)
    assert mod.missing_notebook_packages(f) == ["IPython", "nbformat"]  # top-level imports only, known packages only
    monkeypatch.setattr(mod, "_installed", lambda name: name != "nbformat")
    assert mod.missing_notebook_packages(f) == ["nbformat"]


def test_the_run_summary_names_each_module_left_out(tmp_path, monkeypatch):
    mod = _root_conftest()
    f = tmp_path / "test_needs_nbformat.py"
    f.write_text("import nbformat\n")
    monkeypatch.setattr(mod, "_installed", lambda name: False)
    assert mod.pytest_ignore_collect(f, config=None) is True
    lines = []
    reporter = types.SimpleNamespace(write_line=lines.append, stats={}, section=lambda *a, **k: None)
    mod.pytest_terminal_summary(reporter)
    assert [line for line in lines if "test_needs_nbformat.py" in line and "nbformat" in line], lines


def test_sigterm_handler_interrupts_once_and_leaves_a_chosen_handler_alone():
    mod = _root_conftest()
    saved = signal.getsignal(signal.SIGTERM)
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        assert mod.install_sigterm_handler() is True
        assert signal.getsignal(signal.SIGTERM) is mod._sigterm_to_interrupt
        with pytest.raises(KeyboardInterrupt):
            mod._sigterm_to_interrupt(signal.SIGTERM, None)
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN  # a second SIGTERM cannot cut the teardown short
        mod.pytest_unconfigure(None)
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
        # Ctrl-C first (a CI job cancelled: SIGINT, then SIGTERM): the SIGTERM that follows must not cut the teardown
        assert mod.install_sigterm_handler() is True
        mod.pytest_keyboard_interrupt(None)
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
        mod.pytest_unconfigure(None)
        mine = lambda signum, frame: None  # noqa: E731 - a handler someone else installed
        signal.signal(signal.SIGTERM, mine)
        assert mod.install_sigterm_handler() is False and signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, saved)


def test_a_kernel_that_dies_at_start_is_started_again_and_its_stderr_kept(monkeypatch):
    """nbval starts a notebook's kernel once (stderr to /dev/null); the root conftest starts one that dies before it
    answers again, up to KERNEL_STARTS times, and a kernel that always dies fails with each try's stderr."""
    nbval_kernel = pytest.importorskip("nbval.kernel")
    mod = _root_conftest()
    deaths = []

    def start_new_kernel(startup_timeout, kernel_name, stderr, cwd):
        if len(deaths) < dying:
            deaths.append(kernel_name)
            stderr.write(f"zmq.error.ZMQError: Address already in use (death {len(deaths)})\n")
            stderr.flush()
            raise RuntimeError("Kernel died before replying to kernel_info")
        return "km", "kc"

    class Kernel:
        def _ensure_iopub_up(self):
            self.iopub = True

    monkeypatch.setattr(nbval_kernel, "start_new_kernel", start_new_kernel)
    monkeypatch.setattr(nbval_kernel, "RunningKernel", Kernel)
    assert mod._patient_kernel_start()
    dying = mod.KERNEL_STARTS - 1
    k = Kernel("python3", cwd=str(ROOT), startup_timeout=5)
    assert (k.km, k.kc, k.iopub) == ("km", "kc", True) and len(deaths) == dying
    assert len(k.start_failures) == dying and "Address already in use (death 1)" in k.start_failures[0]
    deaths.clear()
    dying = mod.KERNEL_STARTS
    with pytest.raises(RuntimeError, match=r"(?s)start 1: Kernel died.*death 1.*start 3: .*death 3"):
        Kernel("python3")


def test_the_slowest_files_start_first_and_each_keeps_its_order():
    """The root conftest moves the files of SLOW_FIRST to the front, in that order, each file's tests in theirs; every
    entry names a file or folder that exists (a renamed file would silently start last again)."""
    mod = _root_conftest()
    assert all((ROOT / p.rstrip("/")).exists() for p in mod.SLOW_FIRST), mod.SLOW_FIRST
    first, second = mod.SLOW_FIRST[0], mod.SLOW_FIRST[1].rstrip("/") + "/test_x.py"

    def item(rel: str, name: str):
        return types.SimpleNamespace(fspath=ROOT / rel, name=name)

    items = [item("tests/test_a.py", "a1"), item(second, "s1"), item("tests/test_a.py", "a2"), item(first, "f1"),
             item(second, "s2"), item(first, "f2")]
    mod.pytest_collection_modifyitems(None, items)
    assert [i.name for i in items] == ["f1", "f2", "s1", "s2", "a1", "a2"]
