"""The grader's sandbox holds, or says it does not (issues 35 and 41).

Seen from inside, as a learner who has read the grader would look: a probe runs under the exact ``bwrap`` prefix the
grader gives the learner's kernel (:func:`fastpath_lib.grading.engine.sandbox.command`), beside planted files the
kernel must not reach (another checkout of the kit, a course release, a classmate's notebook), and reports what it
saw; each test fails when the option it covers is taken out of :data:`~fastpath_lib.grading.engine.sandbox.FLAGS` or
the allow-list grows (``--ro-bind / /`` again). The kernel itself under that prefix (ipykernel over its ``ipc``
sockets) is graded in ``test_grading_channel.py`` and, from a virtual environment under ``/tmp``, below.

Where it cannot start: the autograder's ``--isolation bwrap`` refuses to grade, self-study's ``auto`` grades without
it and says why in one sentence (these tests need no bubblewrap).
"""

from __future__ import annotations

import inspect
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytest.importorskip("jupyter_client")  # the sandbox module starts kernels; the GPU machine's bare package set has none
from fastpath_lib.grading.engine import handout, sandbox  # noqa: E402
from tests.processes import same, started  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

needs_bwrap = pytest.mark.skipif(not sandbox.available(), reason="the sandbox cannot start here: the grader says so")


def _git_dirs(root: Path) -> list[Path]:
    """The git folders of the checkout ``root`` that lie outside it (a ``git worktree`` keeps them in the main
    checkout's ``.git``)."""
    dot = root / ".git"
    if not dot.is_file():
        return []
    gitdir = (root / dot.read_text(encoding="utf-8").strip().removeprefix("gitdir:").strip()).resolve()
    common = gitdir / "commondir"
    found = [gitdir] + ([(gitdir / common.read_text(encoding="utf-8").strip()).resolve()] if common.is_file() else [])
    return [d for d in found if root not in d.parents]


def _editable_checkouts() -> list[Path]:
    """The checkouts of the kit an editable install in this environment points at (the one the venv was made in)."""
    from importlib import metadata

    out = []
    for dist in metadata.distributions():
        if (dist.metadata["Name"] or "").lower().replace("_", "-") == "fastpath-kit":
            url = json.loads(dist.read_text("direct_url.json") or "{}").get("url", "")
            if url.startswith("file://") and (Path(url.removeprefix("file://")) / "solutions").is_dir():
                out.append(Path(url.removeprefix("file://")))
    return out


#: What the kit keeps from the learner: the solutions, the grader's own modules, the git objects (a worktree's too),
#: and the same in the checkout the environment's editable install points at.
SECRETS = [ROOT / "solutions" / "ex01_reference.py", ROOT / "fastpath_lib" / "grading" / "checks" / "ex01_reference.py",
           ROOT / "fastpath_lib" / "grading" / "engine" / "cli.py", ROOT / ".git"]
SECRETS += [p for d in _git_dirs(ROOT) for p in (d / "HEAD", d / "objects") if p.exists()]
SECRETS += [c / "solutions" / "ex01_reference.py" for c in _editable_checkouts() if c.resolve() != ROOT]

#: Planted beside the graded notebook's working copy: another checkout of the kit (its solutions, its git history, its
#: grader), a course release's autograder, and a classmate's filled notebook under nbgrader's submitted/ tree.
PLANTED = ("kit-copy/solutions/ex01_reference.py", "kit-copy/.git/HEAD",
           "kit-copy/fastpath_lib/grading/checks/ex01_reference.py",
           "release/autograder/fastpath_lib/grading/checks/ex10_threshold.py",
           "submitted/bob/ex01/ex01_reference.ipynb")

#: The graded implementations exercise 01's kernel must not reach by any name built at run time: the kit's own
#: default_eps and rms_norm (exercise 01 asks for both), exercise 06's outcome rule, exercise 12's overlap rule.
REACH = {"modules": ["fastpath_lib.rmsnorm.limits", "fastpath_lib.rmsnorm.op", "fastpath_lib.testing",
                     "fastpath_lib.rmsnorm.kernels", "fastpath_lib.grading.vocabulary", "fastpath_lib.bench.analysis",
                     "fastpath_lib.fused.predicate", "fastpath_lib.grading.checks.ex01_reference",
                     "fastpath_lib.grading.registry"],
         "chains": ["rms_norm", "rmsnorm.limits.default_eps", "rmsnorm.op.rms_norm", "bench.analysis.outcome",
                    "grading.vocabulary.outcome", "fused.predicate", "exercises.check_default_eps"]}

PROBE = r"""
import ctypes, functools, importlib, inspect, json, os, socket, sys
secrets, planted, reach, texts = (json.loads(a) for a in sys.argv[1:5])
pids = sorted(p for p in os.listdir("/proc") if p.isdigit())
libc = ctypes.CDLL(None, use_errno=True)
unmounted = {m: libc.umount2(m.encode(), 2) for m in ("/", "/tmp", "/usr")}  # MNT_DETACH, as umount -l
status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
mounts = [line.split() for line in open("/proc/self/mountinfo").read().splitlines()]
def opened(path):
    try:
        with open(path, "rb"):
            return True
    except OSError:
        return False
def listed(folder):
    try:
        return sorted(os.listdir(folder))
    except OSError:
        return None
import fastpath_lib
from fastpath_lib import exercises as ex
from fastpath_lib.cases import CaseSpec
reached = []
for name in reach["modules"]:
    try:
        if not hasattr(importlib.import_module(name), "_HIDDEN"):  # a stand-in module raises on every name
            reached.append(name)
    except Exception:
        pass
for chain in reach["chains"]:
    try:
        found = functools.reduce(getattr, chain.split("."), fastpath_lib)
        if "_HIDDEN[" not in inspect.getsource(found):  # a stand-in says what is not handed out; anything else leaks
            reached.append(chain)
    except Exception:
        pass
package = os.path.dirname(fastpath_lib.__file__)
readable = {}
for folder, _, names in os.walk(package):
    for n in names:
        readable[os.path.join(folder, n)] = open(os.path.join(folder, n), errors="replace").read()
print(json.dumps({
    "seen": [s for s in secrets + planted if os.path.exists(s) or opened(s)],
    "through_proc": [f"/proc/{p}/root{s}" for p in pids + ["self"] for s in secrets + planted
                     if os.path.exists(f"/proc/{p}/root{s}")],
    "listed": {f: listed(f) for f in sorted({os.path.dirname(os.path.dirname(p)) for p in planted})},
    "beside_work": listed(os.path.dirname(os.getcwd())),
    "beside_venv": listed(os.path.dirname(os.path.realpath(sys.prefix))),
    "root_fs": next(m[m.index("-") + 1] for m in mounts if m[4] == "/"),
    "mounts": sorted({m[4] for m in mounts}),
    "own_proc": os.readlink("/proc/self") == str(os.getpid()),
    "pid1": open("/proc/1/cmdline", "rb").read().split(b"\0")[0].decode(),
    "unmounted": unmounted,
    "cap_eff": int(status["CapEff"], 16), "cap_bnd": int(status["CapBnd"], 16),
    "uid": os.getuid(), "gid": os.getgid(), "sid": os.getsid(0),
    "interfaces": sorted(n for _, n in socket.if_nameindex()),
    "reached": reached,
    "texts": sorted({t for t in texts for f, body in readable.items() if t in body}),
    "controls": [callable(fastpath_lib.use_interpreter), ex.synthetic_results().shape[0] > 5, CaseSpec.__name__,
                 package.startswith(os.environ["PYTHONPATH"])],
}))
"""


def _prefix(tmp_path: Path, exercise: str = "ex01") -> list[str]:
    work, files = tmp_path / "work", tmp_path / "files"
    work.mkdir()
    files.mkdir()
    return sandbox.command(str(work), str(work), str(files), exercise)


def _graded_sources() -> list[str]:
    """The first lines of the graded implementations' sources (as the grader's process reads them)."""
    from fastpath_lib.bench import analysis
    from fastpath_lib.fused import predicate
    from fastpath_lib.rmsnorm import limits, op

    overlap = [v for v in vars(predicate).values() if inspect.isfunction(v) and "overlap" in v.__name__]
    return ["\n".join(inspect.getsource(fn).splitlines()[:3])
            for fn in (limits.default_eps, op.rms_norm, analysis.outcome, *overlap)]


@pytest.fixture(scope="module")
def inside(tmp_path_factory) -> dict:
    """What the probe saw from inside the sandbox of exercise 01's kernel, beside the planted files (outside /tmp
    where the machine allows, so that the sandbox's own /tmp does not hide them)."""
    assert all(s.exists() for s in SECRETS), [s for s in SECRETS if not s.exists()]
    var = Path("/var/tmp")
    base = Path(tempfile.mkdtemp(prefix="fastpath-sandbox-test-", dir=var if os.access(var, os.W_OK) else None))
    try:
        for rel in PLANTED:
            (base / rel).parent.mkdir(parents=True, exist_ok=True)
            (base / rel).write_text("def answer():\n    return 42\n")
        prefix = _prefix(base)
        done = subprocess.run([*prefix, sys.executable, "-c", PROBE, json.dumps([str(s) for s in SECRETS]),
                               json.dumps([str(base / p) for p in PLANTED]), json.dumps(REACH),
                               json.dumps(_graded_sources())],
                              env=sandbox.kernel_env(dict(os.environ)), capture_output=True, text=True, timeout=300,
                              check=False)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout)
    seen["base"], seen["prefix"] = str(base), prefix
    return seen


@needs_bwrap
def test_the_kernel_sees_its_own_processes_and_no_proc_root_reaches_the_checkout(inside):
    # --unshare-pid with --proc /proc: /proc lists the sandbox's processes only, pid 1 is bubblewrap's init
    assert inside["own_proc"] and Path(inside["pid1"]).name == "bwrap", inside
    assert inside["seen"] == [] and inside["through_proc"] == [], inside


@needs_bwrap
def test_the_kernel_cannot_list_or_open_another_checkout_a_release_or_a_classmates_notebook(inside):
    """The file system is an allow-list: beside the graded copy there is nothing, wherever it lies; the root is an
    empty tmpfs; every mount is one the allow-list names; a venv inside a checkout is bound alone."""
    assert inside["seen"] == [] and all(v is None for v in inside["listed"].values()), inside["listed"]
    assert inside["beside_work"] == ["work"], inside["beside_work"]  # the working copy alone, no sibling
    assert inside["root_fs"] == "tmpfs", inside["root_fs"]
    venv = Path(sys.prefix).resolve()
    if (venv.parent / "solutions").is_dir() or (venv.parent / ".git").exists():  # the kit's own .venv in a checkout
        assert set(inside["beside_venv"]) <= {venv.name, "fastpath_lib"}, inside["beside_venv"]  # its kit: staged
    args = inside["prefix"]
    allowed = {"/", "/proc", "/tmp", "/usr", *(f"/etc/{n}" for n in sandbox.ETC)}
    allowed |= {args[i + 2] for i, a in enumerate(args) if a in ("--ro-bind", "--bind")}
    allowed |= {args[i + 1] for i, a in enumerate(args) if a == "--tmpfs"}
    named = {str(p) for p in sandbox.interpreter_paths()} | {str(Path(inside["base"]) / n) for n in ("work", "files")}
    named.add(str(ROOT / "fastpath_lib"))  # the staged kit, where the grader's own package lies
    for mount in inside["mounts"]:
        assert mount in allowed or mount.startswith(("/dev", "/proc/")), mount  # bubblewrap's own /dev and /proc
        assert mount in {"/", "/proc", "/tmp", "/usr"} or mount.startswith(("/dev", "/proc/", "/etc/")) or any(
            mount == n or mount.startswith(n + "/") for n in named) or "site-packages" in mount, mount


@needs_bwrap
def test_names_built_at_run_time_reach_no_graded_implementation(inside):
    """importlib, getattr chains and inspect.getsource inside exercise 01's kernel: the kit's default_eps and rms_norm,
    exercise 06's outcome rule and exercise 12's overlap rule are neither importable nor readable (no file the kernel
    can read holds their source); what the exercise hands out works."""
    assert inside["reached"] == [] and inside["texts"] == [], (inside["reached"], inside["texts"])
    assert inside["controls"] == [True, True, "CaseSpec", True], inside["controls"]


@needs_bwrap
def test_the_kernel_holds_no_capability_and_cannot_unmount_anything(inside):
    # --cap-drop ALL: a detach (umount -l) of the root, /tmp or /usr fails
    assert inside["cap_eff"] == 0 and inside["cap_bnd"] == 0, inside
    assert set(inside["unmounted"].values()) == {-1}, inside
    assert inside["seen"] == [], inside


@needs_bwrap
def test_the_kernel_is_not_root_has_no_network_and_a_session_of_its_own(inside):
    # --unshare-user --uid/--gid 65534, --unshare-net, --new-session (outside it, getsid names no process here: 0)
    assert inside["uid"] == inside["gid"] == 65534, inside
    assert inside["interfaces"] == ["lo"], inside
    assert inside["sid"] != 0, inside


#: exercise -> the graded implementations its kernel is not handed (module, function or "*" for the whole module).
GRADED = {
    "ex01": (("fastpath_lib.rmsnorm.limits", "default_eps"), ("fastpath_lib.rmsnorm.op", "rms_norm"),
             ("fastpath_lib.testing", "*")),
    "ex02": (("fastpath_lib.rmsnorm.kernels", "*"), ("fastpath_lib.rmsnorm.op", "*"), ("fastpath_lib.testing", "*")),
    "ex04": (("fastpath_lib.boundary", "*"),),
    "ex05": (("fastpath_lib.bench.matrix", "*"), ("fastpath_lib.bench.harness", "*")),
    "ex06": (("fastpath_lib.bench.analysis", "outcome"), ("fastpath_lib.grading.vocabulary", "outcome"),
             ("fastpath_lib.grading.given", "expected_classes")),
    "ex07": (("fastpath_lib.bench.report", "*"),),
    "ex08": (("fastpath_lib.rmsnorm.kernels", "*"), ("fastpath_lib.rmsnorm.op", "*")),
    "ex10": (("fastpath_lib.bench.sweep", "*"),),
    "ex12": (("fastpath_lib.fused.predicate", "*"), ("fastpath_lib.fused.op", "*"),
             ("fastpath_lib.fused.kernels", "*")),
    "ex13": (("fastpath_lib.bench.timing", "*"), ("fastpath_lib.rmsnorm.cost", "*")),
}


def test_each_kernel_is_handed_what_its_notebook_imports_and_no_graded_implementation(tmp_path):
    """The staged kit of every exercise (no sandbox needed): no module of the grader (checks, rules, engine, report),
    no graded implementation, not even its source text in another file; and every module the given cells import is
    there (the notebook's first cell runs)."""
    import importlib

    from fastpath_lib.grading.registry import EXERCISES

    for ex in EXERCISES:
        staged = set(sandbox.kernel_library(ex))
        grader = [m for m in staged if m.startswith("fastpath_lib.grading.") and m.count(".") > 2]
        assert grader == [], (ex, grader)
        kit, _ = sandbox.given_names(ex)
        imported = {n for n in kit if (ROOT / Path(*n.split("."))).with_suffix(".py").is_file()} - {handout.FACADE}
        assert imported <= staged and {"fastpath_lib.runtime", "fastpath_lib.cases"} & staged, (ex, imported - staged)
        tree = sandbox.stage(ex, tmp_path / ex)
        texts = [p.read_text(encoding="utf-8") for p in tree.rglob("*.py")]
        for module, name in GRADED.get(ex, ()):
            staged_file = (tree / Path(*module.split("."))).with_suffix(".py")  # absent, or a stand-in that raises
            assert not staged_file.exists() or "_HIDDEN = {}" in staged_file.read_text(), (ex, module)
            mod = importlib.import_module(module)
            fns = [getattr(mod, name)] if name != "*" else [v for v in vars(mod).values() if inspect.isfunction(v)
                                                            and v.__module__ == module and v.__name__[0] != "_"]
            for fn in fns:
                head = "\n".join(inspect.getsource(fn).splitlines()[:3])
                assert not any(head in t for t in texts), (ex, module, fn.__name__)
    assert {p.name for p in (tmp_path / "ex01" / "fastpath_lib" / "grading").iterdir()} == {"__init__.py",
                                                                                           "materials.py"}
    assert "def rms_norm(*args, **kwargs):\n    raise RuntimeError" in (tmp_path / "ex01" / "fastpath_lib" / "rmsnorm" /
                                                                        "op.py").read_text()  # a stand-in


def test_a_venv_in_a_checkout_is_bound_alone_and_a_checkout_inside_a_bound_folder_is_masked(tmp_path, monkeypatch):
    """Wherever the checkout lies (under /tmp, /srv or beside the venv), the prefix binds no folder holding it; an
    environment folder inside it is bound alone; a checkout inside a bound folder is covered by an empty one."""
    checkout = tmp_path / "kit"
    shutil.copytree(ROOT / "fastpath_lib", checkout / "fastpath_lib", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "solutions", checkout / "solutions", ignore=shutil.ignore_patterns("*.ipynb"))
    (checkout / "exercises").mkdir()
    venv = checkout / ".venv"
    monkeypatch.setattr(sandbox, "interpreter_paths", lambda: (venv,))
    venv.mkdir()
    (tmp_path / "files").mkdir()
    args = sandbox.command(str(tmp_path / "work"), str(tmp_path / "work"), str(tmp_path / "files"), "ex01",
                           root=checkout)
    binds = [args[i + 1] for i, a in enumerate(args) if a in ("--ro-bind", "--bind", "--ro-bind-try")]
    assert "/" not in binds and not any(checkout == Path(b) or Path(b) in checkout.parents for b in binds), binds
    assert str(venv) in binds, binds
    # the environment holds the checkout (a prefix under which the kit was unpacked): bound, the checkout masked,
    # the environment inside it bound again after the mask
    monkeypatch.setattr(sandbox, "interpreter_paths", lambda: (tmp_path, venv))
    args = sandbox.command(str(tmp_path / "work"), str(tmp_path / "work"), str(tmp_path / "files"), "ex01",
                           root=checkout)
    at = args.index("--tmpfs", args.index(str(tmp_path)))
    assert args[at + 1] == str(checkout) and args[at + 2:at + 5] == ["--ro-bind", str(venv), str(venv)], args


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


@needs_bwrap
def test_the_sandbox_dies_with_the_grader(tmp_path):
    """--die-with-parent: the grader killed (SIGKILL, no cleanup), bubblewrap and the kernel go with it."""
    marker = "61.2345"  # a sleep no other process runs
    starter = "import subprocess, sys, time\nprint(subprocess.Popen(sys.argv[1:]).pid, flush=True)\ntime.sleep(60)"
    grader = subprocess.Popen([sys.executable, "-c", starter, *_prefix(tmp_path), "sleep", marker],
                              stdout=subprocess.PIPE, text=True)
    bwrap = int(grader.stdout.readline())
    bwrap_start = started(bwrap)  # its id may go to another process once it exits: kill only this one
    deadline = time.monotonic() + 20
    while not _sleepers(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _sleepers(marker), "the sandboxed command never started"
    grader.kill()
    grader.wait()
    grader.stdout.close()
    while (same(bwrap, bwrap_start) or _sleepers(marker)) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = ([bwrap] if same(bwrap, bwrap_start) else []) + _sleepers(marker)  # _sleepers lists live ones only
    for pid in left:  # only the processes this test started
        os.kill(pid, signal.SIGKILL)
    assert not left, "the sandbox outlived the grader"


def _sleepers(marker: str) -> list[int]:
    out = []
    for p in Path("/proc").iterdir():
        try:
            if p.name.isdigit() and (p / "cmdline").read_bytes().split(b"\0")[:2] == [b"sleep", marker.encode()]:
                out.append(int(p.name))
        except OSError:
            continue
    return [p for p in out if _alive(p)]


@needs_bwrap
def test_a_virtual_environment_under_tmp_starts_the_kernel_in_the_sandbox(tmp_path):
    """The sandbox's /tmp is empty: the interpreter's prefix is bound back there (the venv reached through a link
    under /tmp, as a venv made there is), and a solution gets full marks with --isolation bwrap."""
    venv = tmp_path / "venv"
    venv.symlink_to(Path(sys.prefix).resolve(), target_is_directory=True)
    python = venv / "bin" / "python"
    env = dict(os.environ, PYTHONPATH=str(ROOT), TRITON_INTERPRET="1")
    prefix = subprocess.run([str(python), "-c", "import sys; print(sys.prefix)"], capture_output=True, text=True,
                            env=env, check=True).stdout.strip()
    assert prefix == str(venv) and Path(prefix).is_relative_to("/tmp"), prefix
    done = subprocess.run([str(python), "-m", "fastpath_lib", "grade", str(ROOT / "solutions/ex01_reference.ipynb"),
                           "--isolation", "bwrap", "--json", "--timeout", "120"], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=300, check=False)
    graded = json.loads(done.stdout)["notebooks"][0]
    assert graded["isolation"] == sandbox.ISOLATED and graded["earned"] == graded["points"] > 0, (graded, done.stderr)
    assert done.returncode == 0


# --- when the sandbox cannot start -----------------------------------------------------------------------------------

SOLUTION = ROOT / "solutions" / "ex01_reference.ipynb"


def _fake_bwrap(tmp_path: Path, monkeypatch, script: str) -> None:
    exe = tmp_path / "bwrap"
    exe.write_text("#!/bin/sh\n" + script)
    exe.chmod(0o755)
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: str(exe) if name == "bwrap" else None)


def test_why_the_sandbox_cannot_start_is_found_and_said_in_plain_words(tmp_path, monkeypatch):
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    assert sandbox.find_problem() == sandbox.NOT_INSTALLED
    refused = "bwrap: No permissions to creating new namespace, likely because the kernel does not allow it"
    _fake_bwrap(tmp_path, monkeypatch, f"echo '{refused}' >&2; exit 1\n")
    settings = {"user.max_user_namespaces": "0"}
    monkeypatch.setattr(sandbox, "_sysctl", settings.get)
    assert sandbox.find_problem() == ("user namespaces are disabled on this machine (sysctl "
                                      "user.max_user_namespaces is 0)")
    settings.clear()
    assert sandbox.find_problem() == (f"this machine does not let bubblewrap make its namespaces (bwrap said: "
                                      f"{refused})")
    # namespaces start, the interpreter does not: a venv the sandbox does not show
    missing = "echo 'bwrap: execvp /tmp/v/bin/python: No such file or directory' >&2; exit 1\n"
    _fake_bwrap(tmp_path, monkeypatch, 'for a; do last=$a; done\n[ "$last" = true ] && exit 0\n' + missing)
    why = sandbox.find_problem()
    assert why.startswith(f"the Python environment at {sys.prefix} is not visible inside the sandbox"), why
    note = sandbox.fallback_note(why)
    assert note.startswith("the sandbox could not start because the Python environment") and note.endswith(
        "so this grade was computed without isolation")


def test_the_autograders_mode_refuses_to_grade_outside_the_sandbox(monkeypatch, capsys):
    from fastpath_lib.grading.engine import cli

    monkeypatch.setattr(sandbox, "problem", lambda: sandbox.NOT_INSTALLED)
    g = cli.grade_notebook(SOLUTION, isolation="bwrap")
    assert (g.status, g.earned, g.isolation) == (cli.NOT_GRADED, 0, sandbox.NOT_RUN), g
    assert g.reason == sandbox.refusal(sandbox.NOT_INSTALLED) and "bubblewrap (bwrap) is not installed" in g.reason
    assert g.parts and all(p.feedback == g.reason for p in g.parts)
    # the CLI: nothing graded, exit 2, the reason on stderr; --format gradescope (an autograder) is bwrap by default
    for argv in ([str(SOLUTION), "--isolation", "bwrap"], [str(SOLUTION), "--format", "gradescope"]):
        assert cli.main(argv) == 2, argv
        assert "not graded: the sandbox could not start because bubblewrap" in capsys.readouterr().err, argv
    seen = []
    monkeypatch.setattr(sandbox, "problem", lambda: None)
    monkeypatch.setattr(cli, "grade_notebook", lambda path, **kw: seen.append(kw["isolation"]) or g)
    assert cli.main([str(SOLUTION), "--format", "gradescope"]) == 2  # a notebook not graded: exit 2 too
    cli.main([str(SOLUTION)])
    assert seen == ["bwrap", "auto"]


def test_a_kernel_the_sandbox_cannot_start_is_not_graded_by_the_autograders_mode(monkeypatch):
    from fastpath_lib.grading.engine import cli

    monkeypatch.setattr(sandbox, "problem", lambda: None)  # bubblewrap runs, but this kernel does not start in it
    monkeypatch.setattr(sandbox, "command", lambda *a, **k: ["false"])
    monkeypatch.setattr(sandbox, "find_problem", lambda exercise=None: "the kernel's Python fails inside the sandbox")
    g = cli.grade_notebook(SOLUTION, timeout=60, isolation="bwrap")
    assert (g.status, g.earned, g.isolation) == (cli.NOT_GRADED, 0, sandbox.NOT_RUN), g
    assert g.reason == sandbox.refusal("the kernel's Python fails inside the sandbox")


def test_self_study_grades_without_the_sandbox_and_says_why_in_one_sentence(monkeypatch):
    from fastpath_lib.grading.engine import cli

    monkeypatch.setattr(sandbox, "problem", lambda: sandbox.NOT_INSTALLED)
    g = cli.grade_notebook(SOLUTION, timeout=120, isolation="auto")
    assert g.isolation == sandbox.UNISOLATED and g.earned == g.points > 0, (g.status, g.reason)
    said = [n for n in g.notes if "sandbox" in n]
    assert said == [("the sandbox could not start because bubblewrap (bwrap) is not installed (install Debian's "
                     "bubblewrap: apt-get install bubblewrap), so this grade was computed without isolation")], g.notes


def test_the_autograder_grades_only_in_the_sandbox_and_its_results_say_why_not(tmp_path, monkeypatch, capsys):
    from fastpath_lib.grading.engine import autograde

    monkeypatch.setattr(sandbox, "problem", lambda: sandbox.NOT_INSTALLED)
    (tmp_path / "submitted/ann/ex01").mkdir(parents=True)
    (tmp_path / "submitted/ann/ex01/ex01_reference.ipynb").write_bytes(SOLUTION.read_bytes())
    assert autograde.main(["nbgrader", str(tmp_path / "submitted")]) == 0  # bwrap by default; the results are written
    assert "not graded: the sandbox could not start because bubblewrap" in capsys.readouterr().err
    rows = (tmp_path / "autograded/grades.csv").read_text().splitlines()
    assert rows[1].split(",")[4:] == ["0", "3", "not graded"], rows
    doc = json.loads((tmp_path / "autograded/ann/ex01/results.json").read_text())
    assert {p["feedback"] for p in doc["notebooks"][0]["parts"]} == {sandbox.refusal(sandbox.NOT_INSTALLED)}, doc


def test_each_submission_is_graded_alone(tmp_path, monkeypatch):
    """nbgrader's submitted/ tree: each notebook's kernel gets a working copy of its own with its learner's own data
    files (a link to a classmate's file is not followed), and its sandbox binds nothing of submitted/."""
    from fastpath_lib.grading.engine import autograde, cli

    for who in ("ann", "bob"):
        folder = tmp_path / "submitted" / who / "ex01"
        folder.mkdir(parents=True)
        (folder / "ex01_reference.ipynb").write_bytes(SOLUTION.read_bytes())
        (folder / "notes.txt").write_text(f"{who}'s notes\n")
    (tmp_path / "submitted/ann/ex01/bobs.txt").symlink_to(tmp_path / "submitted/bob/ex01/notes.txt")
    seen = []

    def execute(nb, workdir, *args, **kwargs):
        files = inspect.signature(real_execute).bind(nb, workdir, *args, **kwargs).arguments.get("files", "")
        prefix = sandbox.command(workdir, workdir, files, "ex01")
        binds = {prefix[i + 1] for i, a in enumerate(prefix) if a in ("--ro-bind", "--bind", "--ro-bind-try")}
        seen.append(({p.name: p.read_text() for p in Path(workdir).iterdir() if p.suffix == ".txt"}, binds))
        return cli._Run()

    monkeypatch.setattr(sandbox, "problem", lambda: None)
    real_execute = cli._execute
    monkeypatch.setattr(cli, "_execute", execute)
    assert autograde.main(["nbgrader", str(tmp_path / "submitted")]) == 0
    assert [texts for texts, _ in seen] == [{"notes.txt": "ann's notes\n"}, {"notes.txt": "bob's notes\n"}], seen
    assert not any(str(tmp_path) in b for _, binds in seen for b in binds), seen


@needs_bwrap
def test_the_graders_run_of_a_learners_triton_source_is_sandboxed_too(tmp_path):
    """ex02 and ex08: the grader runs the learner's kernel source in a child of its own (kernel_run); while it
    grades in the sandbox, that child is in the sandbox too (this function, run there, is what a launcher could do)."""
    import torch

    from fastpath_lib.grading.engine import kernel_run

    text = (f"import os\ndef peek(x):\n    raise LookupError(repr([os.getuid()] + "
            f"[int(os.path.exists(p)) for p in {[str(s) for s in SECRETS]!r}]))\n")  # told in its exception
    calls = [(None, (torch.zeros(1),), {})]
    outside = kernel_run.run(text, "peek", calls).calls[0]
    with kernel_run.sandboxed(sandbox.for_children("ex02", str(tmp_path))):
        inside = kernel_run.run(text, "peek", calls).calls[0]
    assert outside.error == ("LookupError", repr([os.getuid()] + [1] * len(SECRETS))), outside
    assert inside.error == ("LookupError", repr([65534] + [0] * len(SECRETS))), inside


def test_the_grader_sandboxes_its_runs_of_the_learners_source_while_the_kernel_is_sandboxed(monkeypatch):
    from fastpath_lib.grading.engine import cli, kernel_run

    seen = []
    monkeypatch.setattr(sandbox, "problem", lambda: None)
    monkeypatch.setattr(cli, "_execute", lambda *a, **k: seen.append(kernel_run._SANDBOX.get()) or cli._Run())
    cli.grade_notebook(SOLUTION, isolation="bwrap")
    cli.grade_notebook(SOLUTION, isolation="none")
    assert callable(seen[0]) and seen[1] is None, seen
