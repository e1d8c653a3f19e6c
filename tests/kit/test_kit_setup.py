"""``./kit``'s set-up honours FASTPATH_TORCH_INDEX (issue 9 item 5) and carries on when that index is unreachable.

A fake ``python3`` on PATH creates a fake virtual environment whose ``python`` only logs its arguments (and fails the
torch-index install when told to), so nothing is downloaded or installed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

FAKE_PYTHON = """#!/bin/sh
echo "$*" >> "$KIT_LOG"
case "$*" in *--index-url*) [ -n "$KIT_INDEX_FAILS" ] && exit 1 ;; esac
exit 0
"""

FAKE_PYTHON3 = """#!/bin/sh
# python3 -m venv [--clear] DIR: make DIR/bin/python the logging fake (--clear: logged, DIR emptied first)
if [ "$1" = -m ] && [ "$2" = venv ]; then
  if [ "$3" = --clear ]; then echo "venv --clear" >> "$KIT_LOG"; rm -rf "$4"; shift; fi
  mkdir -p "$3/bin"; cp "$FAKE_PY" "$3/bin/python"; exit 0
fi
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
    assert not any("uninstall" in line for line in log)  # a fresh set-up has no torch to replace
    assert (tmp / "venv" / ".kit-torch-index").read_text().strip() == "cpu"
    # the same setting again, or none (issue 41: leaving it out on a later command rebuilt everything): nothing is
    # redone; another index is a new set-up
    for again in ({"FASTPATH_TORCH_INDEX": "cpu"}, {}):
        Path(env["KIT_LOG"]).unlink(missing_ok=True)
        res, log = _setup(env, **again)
        assert res.returncode == 0 and log == [], (again, log)
    res, log = _setup(env, FASTPATH_TORCH_INDEX="https://wheels.example/simple")
    assert _reinstalled_from(log, "https://wheels.example/simple"), log
    assert "the installed torch came from cpu; reinstalling it" in res.stderr
    assert (tmp / "venv" / ".kit-torch-index").read_text().strip() == "https://wheels.example/simple"


def _reinstalled_from(log: list[str], url: str) -> bool:
    """The set-up uninstalled torch, then installed it from ``url``, before the rest."""
    marks = [next((i for i, line in enumerate(log) if mark in line), -1)
             for mark in ("-m pip uninstall -y -q torch", f"--index-url {url}", "-e .[dev]")]
    return -1 not in marks and marks == sorted(marks)


def test_naming_an_index_after_a_default_setup_replaces_its_torch(kit_env):
    """pip keeps an installed torch of the pinned version whatever index it came from, so ``FASTPATH_TORCH_INDEX=cpu``
    after a set-up from PyPI (the CUDA build) uninstalls that torch before it installs the CPU build."""
    tmp, env = kit_env
    assert _setup(env)[0].returncode == 0
    Path(env["KIT_LOG"]).unlink()
    res, log = _setup(env, FASTPATH_TORCH_INDEX="cpu")
    assert res.returncode == 0 and _reinstalled_from(log, "https://download.pytorch.org/whl/cpu"), (log, res.stderr)
    assert (tmp / "venv" / ".kit-torch-index").read_text().strip() == "cpu"


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
    """The provider tests import ``vllm.ir`` from ``<venv>/vllm-site`` (tests/upstream/test_vllm_providers.py): vLLM's
    pinned wheel and ``regex``, with ``--no-deps`` (nothing else in the environment changes); a failed install (offline)
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
    assert "the vllm.ir provider tests will skip what needs vLLM" in res.stderr
    assert (tmp / "venv" / ".kit-installed").exists()


def _fake(tmp: Path, name: str, body: str) -> None:
    (tmp / "bin" / name).write_text("#!/bin/sh\n" + body + "\n")
    (tmp / "bin" / name).chmod(0o755)


def test_grade_reads_relative_paths_from_where_it_is_run(kit_env):
    """Issue 41: ``./kit grade answers/ex10.ipynb`` from outside the kit's folder said "no such notebook" (./kit
    changes into its own folder); option values stay as given, ``--output`` is a path too."""
    tmp, env = kit_env
    _fake(tmp, "apt-get", 'echo "apt-get $*" >> "$KIT_LOG"')  # no real install where bwrap is missing
    (tmp / "answers").mkdir()
    res = subprocess.run(["bash", str(ROOT / "kit"), "grade", "answers/ex10.ipynb", "--timeout", "60", "--output",
                          "r.json", str(ROOT / "exercises")], cwd=tmp, env=env, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    (run,) = [line for line in Path(env["KIT_LOG"]).read_text().splitlines() if "fastpath_lib grade" in line]
    assert run.split()[3:] == [f"{tmp}/answers/ex10.ipynb", "--timeout", "60", "--output", f"{tmp}/r.json",
                               str(ROOT / "exercises")], run


def test_bench_and_python_run_where_kit_is_run_and_lessons_and_release_read_paths_from_there(kit_env):
    """prac13 F12: ``./kit bench --op my_ops:SPEC --out results/x`` from the op's folder looked for ``my_ops`` in the
    kit's folder and would have written ``results/x`` into the kit's checkout (./kit changes into its own folder).
    bench and python run in the caller's folder with their arguments as given (``opspec.load`` imports the module
    from the working directory); lessons and release read their paths from there, a kit-only path stays the kit's."""
    tmp, env = kit_env
    assert _setup(env)[0].returncode == 0
    logged = tmp / "venv" / "bin" / "python"
    logged.write_text('#!/bin/sh\necho "$PWD | $*" >> "$KIT_LOG"\n')
    logged.chmod(0o755)
    work = tmp / "work"
    work.mkdir()
    (work / "mine.ipynb").touch()
    calls = [["bench", "--op", "my_ops:SPEC", "--quick", "--out", "results/x"], ["python", "-m", "pytest", "t.py"],
             ["lessons", "--timeout", "60", "mine.ipynb", "--root=kitcopy", "notebooks/00_setup.py"],
             ["release", "out", "--force"]]
    for call in calls:
        Path(env["KIT_LOG"]).unlink(missing_ok=True)
        res = subprocess.run(["bash", str(ROOT / "kit"), *call], cwd=work, env=env, capture_output=True, text=True,
                             timeout=120)
        assert res.returncode == 0, (call, res.stderr)
        (run,) = Path(env["KIT_LOG"]).read_text().splitlines()
        where, args = run.split(" | ")
        if call[0] in ("bench", "python"):
            assert where == str(work) and args.split()[-len(call) + 1:] == call[1:], run
        else:
            assert where == str(ROOT), run
    assert args.split()[-2:] == [f"{work}/out", "--force"], run
    Path(env["KIT_LOG"]).unlink()
    subprocess.run(["bash", str(ROOT / "kit"), *calls[2]], cwd=work, env=env, capture_output=True, timeout=120)
    (run,) = Path(env["KIT_LOG"]).read_text().splitlines()
    assert run.split(" | ")[1].split()[1:] == ["--timeout", "60", f"{work}/mine.ipynb", f"--root={work}/kitcopy",
                                              "notebooks/00_setup.py"], run


@pytest.mark.parametrize("uid", ["0", "1000"])
def test_lab_as_root_passes_allow_root_and_says_so(kit_env, uid):
    """Issue 41: ``./kit lab`` as root (a container) stopped at "Running as root is not recommended"."""
    tmp, env = kit_env
    _fake(tmp, "id", f'if [ "$1" = -u ]; then echo {uid}; else exec /usr/bin/id "$@"; fi')
    assert _setup(env)[0].returncode == 0
    _fake(tmp / "venv", "jupyter", 'echo "jupyter $*" >> "$KIT_LOG"')  # the set-up made venv/bin
    res = subprocess.run(["bash", str(ROOT / "kit"), "lab", "--no-browser"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    (run,) = [line for line in Path(env["KIT_LOG"]).read_text().splitlines() if line.startswith("jupyter lab")]
    assert ("--allow-root" in run.split()) == (uid == "0") == ("--allow-root" in res.stderr), (run, res.stderr)
    assert run.split()[-1] == "--no-browser"


def test_a_copy_without_tests_offers_no_test_command(kit_env):
    """A course's student release has no tests/, tools/ or solutions/: its ./kit leaves those commands out of its help
    and refuses them (``./kit test`` as root would apt-get a browser for tests that are not there); set-up says
    what vLLM's wheel is for in that copy."""
    tmp, env = kit_env
    copy = tmp / "student"
    copy.mkdir()
    for name in ("kit", "constraints.txt", "pyproject.toml"):
        shutil.copy2(ROOT / name, copy / name)
    _fake(tmp, "apt-get", 'echo "apt-get $*" >> "$KIT_LOG"')
    full = subprocess.run(["bash", str(ROOT / "kit"), "help"], env=env, capture_output=True, text=True).stdout
    mine = subprocess.run(["bash", str(copy / "kit"), "help"], env=env, capture_output=True, text=True).stdout
    gone = {"test", "lessons", "release", "gpu-versions"}
    assert all(f"./kit {c}" in full for c in gone) and not any(f"./kit {c}" in mine for c in gone), mine
    assert "./kit lab" in mine and "./kit grade" in mine and "triton 3.6" not in mine  # gpu-versions' second line
    said = re.search(r"the help of the student's `\./kit` lists ((?:`\w[\w-]*`(?:, | and ))+`\w[\w-]*`)",
                     " ".join((ROOT / "docs" / "course-release.md").read_text().split()))
    assert said and re.findall(r"`([\w-]+)`", said.group(1)) == re.findall(r"^#   \./kit ([\w-]+)", mine, re.M), mine
    res = subprocess.run(["bash", str(copy / "kit"), "test"], env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "needs tests" in res.stderr, res.stderr
    assert not Path(env["KIT_LOG"]).exists()  # nothing set up, nothing installed
    res = subprocess.run(["bash", str(copy / "kit"), "setup"], env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and "lesson 09" in res.stderr and "provider tests" not in res.stderr, res.stderr


@pytest.mark.parametrize("fails", ["", "1"])
def test_the_autograders_setup_falls_back_to_pips_index(kit_env, fails):
    """Issue 41: Gradescope's ``setup.sh`` installed torch only from PyTorch's CPU index, under ``set -e``: where that
    index could not be reached, set-up stopped. It goes on with pip's own index, which installs the pinned torch with
    the rest."""
    tmp, env = kit_env
    folder = tmp / "autograder"
    folder.mkdir()
    for src in (ROOT / "tools/autograder/setup.sh", ROOT / "constraints.txt"):
        shutil.copy2(src, folder / src.name)
    _fake(tmp, "apt-get", 'echo "apt-get $*" >> "$KIT_LOG"')
    res = subprocess.run(["bash", str(folder / "setup.sh")], env=dict(env, KIT_INDEX_FAILS=fails),
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    log = Path(env["KIT_LOG"]).read_text().splitlines()
    pin = next(x for x in (ROOT / "constraints.txt").read_text().splitlines() if x.startswith("torch=="))
    (first,) = [x for x in log if "--index-url" in x]
    assert first.endswith(f"--index-url https://download.pytorch.org/whl/cpu {pin}")
    assert log.index(first) < next(i for i, x in enumerate(log) if "-c constraints.txt -e ." in x)
    assert ("going on with pip's own index settings" in res.stderr) == bool(fails), res.stderr


@pytest.mark.parametrize("uid", ["0", "1000"])
def test_the_autograders_setup_runs_apt_get_only_as_root(kit_env, uid):
    """course-release.md: in CI or a shell, ``./setup.sh`` once. As root (Gradescope's image build) it installs Python
    and bubblewrap with apt-get; as another user it sets up with the ``python3`` on PATH and says so."""
    tmp, env = kit_env
    folder = tmp / "autograder"
    folder.mkdir()
    for src in (ROOT / "tools/autograder/setup.sh", ROOT / "constraints.txt"):
        shutil.copy2(src, folder / src.name)
    _fake(tmp, "apt-get", 'echo "apt-get $*" >> "$KIT_LOG"')
    _fake(tmp, "id", f'if [ "$1" = -u ]; then echo {uid}; else exec /usr/bin/id "$@"; fi')
    res = subprocess.run(["bash", str(folder / "setup.sh")], env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    log = Path(env["KIT_LOG"]).read_text().splitlines()
    assert any(x.startswith("apt-get install -y -qq python3") for x in log) == (uid == "0"), log
    assert ("using the python3 on PATH" in res.stderr) == (uid != "0"), res.stderr
    assert any("-c constraints.txt -e ." in x for x in log), log


@pytest.mark.parametrize("apt", ["exit 100", 'echo "apt-get $*" >> "$KIT_LOG"'])
def test_the_browser_step_never_stops_the_run(kit_env, apt):
    """``./kit test`` as root installs Debian's chromium where it is missing; where apt-get fails (offline, no such
    package) the run goes on to pytest and the browser test skips with its reason. The kit's ``browser`` function,
    taken from the script, runs under the script's ``set -euo pipefail`` with a Chromium path that is missing."""
    tmp, env = kit_env
    _fake(tmp, "id", 'if [ "$1" = -u ]; then echo 0; else exec /usr/bin/id "$@"; fi')
    _fake(tmp, "apt-get", apt)
    text = (ROOT / "kit").read_text()
    func = re.search(r"^browser\(\) \{.*?^\}$", text, re.M | re.S).group(0)
    kit_path = re.search(r"^CHROMIUM=(\S+)", text, re.M).group(1)
    browser_test = re.search(r'^CHROMIUM = Path\("([^"]+)"\)', (ROOT / "tests/browser/conftest.py").read_text(), re.M)
    assert browser_test and kit_path == browser_test.group(1)  # the kit installs the browser the test launches
    script = f"set -euo pipefail\n{func}\nCHROMIUM={tmp}/no-chromium\nbrowser\necho went-on\n"
    res = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=30)
    assert res.returncode == 0 and res.stdout.strip() == "went-on", (res.returncode, res.stdout, res.stderr)
    assert "installing Debian's chromium" in res.stderr
    assert ("could not install chromium; the browser test will be skipped" in res.stderr) == apt.startswith("exit")


def test_the_help_names_every_lesson_that_imports_vllm():
    """``./kit help`` says who imports ``.venv/vllm-site``; every lesson whose source imports vLLM or the kit's vLLM
    parts (``vllm_plugin``, ``bench.vllmhost``) is named there, so trimming the set-up loses nothing unannounced."""
    text = (ROOT / "kit").read_text()
    said = re.search(r"in \.venv/vllm-site \((.*?)\)\.", " ".join(line.lstrip("# ") for line in text.splitlines()))
    users = re.compile(r"^\s*(?:from|import) (?:vllm\b|fastpath_lib(?:\.bench)?\.vllm(?:host|_plugin)\b|"
                       r"fastpath_lib(?:\.bench)? import .*\bvllm(?:host|_plugin)\b)", re.M)
    lessons = sorted(p.name[:2] for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.py") if users.search(p.read_text()))
    assert said and lessons, (said, lessons)
    named = set(re.findall(r"lessons? (\d\d)", said.group(1)))
    assert set(lessons) <= named, (lessons, said.group(1))
    assert all(word in said.group(1) for word in ("bench", "evidence", "provider tests")), said.group(1)


def test_gpu_versions_rebuilds_its_venv_for_another_torch_index(kit_env):
    """``./kit gpu-versions`` takes FASTPATH_TORCH_INDEX as set-up does; a new index (or pin) makes a fresh venv, so the
    torch installed from the old index does not satisfy the pin and stay."""
    tmp, env = kit_env
    env = dict(env, FASTPATH_GPU_VENV=str(tmp / "gpu"))
    runs = []
    for index in ("cpu", "cpu", "https://wheels.example/simple"):
        Path(env["KIT_LOG"]).unlink(missing_ok=True)
        res = subprocess.run(["bash", str(ROOT / "kit"), "gpu-versions", "-k", "nothing"], cwd=ROOT,
                             env=dict(env, FASTPATH_TORCH_INDEX=index), capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        runs.append(Path(env["KIT_LOG"]).read_text().splitlines())
    first, again, other = runs
    assert first[0] == "venv --clear" and "venv --clear" not in again, (first, again)
    assert other[0] == "venv --clear" and any("--index-url https://wheels.example/simple" in x for x in other), other
