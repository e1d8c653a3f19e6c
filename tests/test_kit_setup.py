"""``./kit``'s set-up honours FASTPATH_TORCH_INDEX (issue 9 item 5) and carries on when that index is unreachable.

A fake ``python3`` on PATH creates a fake virtual environment whose ``python`` only logs its arguments (and fails the
torch-index install when told to), so nothing is downloaded or installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FAKE_PYTHON = """#!/bin/sh
echo "$*" >> "$KIT_LOG"
case "$*" in *--index-url*) [ -n "$KIT_INDEX_FAILS" ] && exit 1 ;; esac
exit 0
"""

FAKE_PYTHON3 = """#!/bin/sh
# python3 -m venv DIR: make DIR/bin/python the logging fake
if [ "$1" = -m ] && [ "$2" = venv ]; then mkdir -p "$3/bin"; cp "$FAKE_PY" "$3/bin/python"; exit 0; fi
exec /usr/bin/env python3 "$@"
"""


@pytest.fixture
def kit_env(tmp_path):
    if shutil.which("bash") is None:
        pytest.skip("needs bash")
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (tmp_path / "fake_python").write_text(FAKE_PYTHON)
    (tmp_path / "fake_python").chmod(0o755)
    (fake_bin / "python3").write_text(FAKE_PYTHON3)
    (fake_bin / "python3").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FASTPATH_", "TRITON_"))}
    env.update(PATH=f"{fake_bin}{os.pathsep}{env['PATH']}", FASTPATH_VENV=str(tmp_path / "venv"),
               FAKE_PY=str(tmp_path / "fake_python"), KIT_LOG=str(tmp_path / "log"), TRITON_INTERPRET="1")
    return tmp_path, env


def _setup(env, **extra) -> tuple[subprocess.CompletedProcess, list[str]]:
    env = dict(env, **extra)
    res = subprocess.run(["bash", str(ROOT / "kit"), "setup"], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120)
    log = Path(env["KIT_LOG"])
    return res, (log.read_text().splitlines() if log.exists() else [])


def test_default_setup_names_no_torch_index(kit_env):
    tmp, env = kit_env
    res, log = _setup(env)
    assert res.returncode == 0, res.stderr
    assert not any("--index-url" in line for line in log)
    assert any("-c constraints.txt -e .[dev]" in line for line in log)
    # the stamp is what it was before the setting existed, so existing set-ups are not redone
    assert (tmp / "venv" / ".kit-installed").read_bytes() == (ROOT / "constraints.txt").read_bytes() + (
        ROOT / "pyproject.toml").read_bytes()


def test_cpu_index_installs_the_pinned_torch_first(kit_env):
    tmp, env = kit_env
    res, log = _setup(env, FASTPATH_TORCH_INDEX="cpu")
    assert res.returncode == 0, res.stderr
    pin = next(line for line in (ROOT / "constraints.txt").read_text().splitlines() if line.startswith("torch=="))
    idx = next(i for i, line in enumerate(log) if "--index-url" in line)
    assert log[idx].endswith(f"--index-url https://download.pytorch.org/whl/cpu {pin}")
    assert idx < next(i for i, line in enumerate(log) if "-e .[dev]" in line)
    assert "torch-index=cpu" in (tmp / "venv" / ".kit-installed").read_text()
    # the same setting again: nothing is redone
    Path(env["KIT_LOG"]).unlink()
    res, log = _setup(env, FASTPATH_TORCH_INDEX="cpu")
    assert res.returncode == 0 and log == []


def test_an_unreachable_index_does_not_break_setup(kit_env):
    tmp, env = kit_env
    res, log = _setup(env, FASTPATH_TORCH_INDEX="https://wheels.invalid/simple", KIT_INDEX_FAILS="1")
    assert res.returncode == 0, res.stderr
    assert "could not install torch from https://wheels.invalid/simple" in res.stderr
    assert any("-e .[dev]" in line for line in log)


def test_kit_test_ends_with_the_slowest_tests(kit_env):
    """``./kit test ARGS`` runs pytest over three worker processes, one test file each at a time (``-n 3 --dist
    loadfile``: a file's module fixtures, a notebook's cells and the browser test's JupyterLab stay in one process),
    with ``--durations=25`` before the caller's arguments (issue 16 item 6), so the test budget is printed at the end
    of every full run and a caller's own ``-n`` or ``--durations`` still wins; ``FASTPATH_TEST_WORKERS`` sets the
    number of workers."""
    tmp, env = kit_env
    fake_apt = tmp / "bin" / "apt-get"  # where chromium is missing, set-up must not install anything for real
    fake_apt.write_text('#!/bin/sh\necho "apt-get $*" >> "$KIT_LOG"\n')
    fake_apt.chmod(0o755)
    res = subprocess.run(["bash", str(ROOT / "kit"), "test", "-k", "nothing", "-q"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    runs = [line for line in Path(env["KIT_LOG"]).read_text().splitlines() if line.startswith("-m pytest")]
    assert runs == ["-m pytest -n 3 --dist loadfile --no-loadscope-reorder --durations=25 -k nothing -q"], runs
    res = subprocess.run(["bash", str(ROOT / "kit"), "test", "-k", "nothing"], cwd=ROOT,
                         env=dict(env, FASTPATH_TEST_WORKERS="0"), capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    runs = [line for line in Path(env["KIT_LOG"]).read_text().splitlines() if line.startswith("-m pytest")]
    assert runs[-1] == "-m pytest -n 0 --dist loadfile --no-loadscope-reorder --durations=25 -k nothing", runs


def test_setup_installs_vllms_wheel_without_dependencies_into_its_own_folder(kit_env):
    """The provider tests import ``vllm.ir`` from ``<venv>/vllm-site`` (tests/test_vllm_providers.py): vLLM's pinned
    wheel and ``regex``, with ``--no-deps`` (nothing else in the environment changes); a failed install (offline)
    does not break set-up, the provider tests then say why they skip."""
    tmp, env = kit_env
    pins = [line for line in (ROOT / "constraints.txt").read_text().splitlines()
            if line.startswith(("vllm==", "regex=="))]
    assert len(pins) == 2
    res, log = _setup(env)
    assert res.returncode == 0, res.stderr
    (line,) = [line for line in log if "vllm==" in line]
    assert line.startswith("-m pip install -q --no-compile --no-deps --upgrade --target ")
    assert line.split()[8] == str(tmp / "venv" / "vllm-site") and set(line.split()[9:]) == set(pins)
    dev = next(i for i, x in enumerate(log) if "-e .[dev]" in x)
    assert log.index(line) > dev and "--no-compile" in log[dev].split()
    # then every module byte-compiled once, on every core: under PYTHONDONTWRITEBYTECODE no later import writes a .pyc
    (compiled,) = [i for i, x in enumerate(log) if x.startswith("-m compileall")]
    assert compiled > log.index(line) and log[compiled].split()[-1] == str(tmp / "venv" / "vllm-site")
    assert "-j 0" in log[compiled]


def test_a_failed_vllm_install_does_not_break_setup(kit_env):
    tmp, env = kit_env
    fail = tmp / "fake_python"
    fail.write_text(FAKE_PYTHON.replace('esac', 'esac\ncase "$*" in *vllm==*) exit 1 ;; esac'))
    res, log = _setup(env)
    assert res.returncode == 0, res.stderr
    assert "the vLLM provider tests will be skipped" in res.stderr
    assert (tmp / "venv" / ".kit-installed").exists()
