"""The grader's sandbox holds, or says it does not (issue 35, item 2).

Seen from inside, as a learner who has read the grader would look: each test runs a probe under the exact ``bwrap``
prefix the grader gives the learner's kernel (:func:`fastpath_lib.grading.engine.sandbox.command`), and fails when the
flag it covers is taken out of :data:`~fastpath_lib.grading.engine.sandbox.FLAGS`. The kernel itself under that prefix
(ipykernel over its ``ipc`` sockets) is graded in ``test_grading_channel.py`` and, from a virtual environment under
``/tmp``, below.

Where it cannot start: the autograder's ``--isolation bwrap`` refuses to grade, self-study's ``auto`` grades without
it and says why in one sentence (these tests need no bubblewrap).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("jupyter_client")  # the sandbox module starts kernels; the GPU machine's bare package set has none
from fastpath_lib.grading.engine import sandbox  # noqa: E402
from tests.processes import same, started  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

needs_bwrap = pytest.mark.skipif(not sandbox.available(), reason="the sandbox cannot start here: the grader says so")

#: What the kit keeps from the learner: the solutions, the grader's own modules, the git objects (a worktree's too).
SECRETS = [ROOT / "solutions" / "ex01_reference.py", ROOT / "fastpath_lib" / "grading" / "checks" / "ex01_reference.py",
           ROOT / "fastpath_lib" / "grading" / "engine" / "cli.py", ROOT / ".git"]
SECRETS += [p for d in sandbox.git_dirs(ROOT) for p in (d / "HEAD", d / "objects") if p.exists()]

PROBE = r"""
import ctypes, json, os, socket, sys
secrets, masks = json.loads(sys.argv[1]), json.loads(sys.argv[2])
pids = sorted(p for p in os.listdir("/proc") if p.isdigit())
libc = ctypes.CDLL(None, use_errno=True)
unmounted = {m: libc.umount2(m.encode(), 2) for m in masks}  # MNT_DETACH, as umount -l
status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
print(json.dumps({
    "seen": [s for s in secrets if os.path.exists(s)],
    "through_proc": [f"/proc/{p}/root{s}" for p in pids + ["self"] for s in secrets
                     if os.path.exists(f"/proc/{p}/root{s}")],
    "own_proc": os.readlink("/proc/self") == str(os.getpid()),
    "pid1": open("/proc/1/cmdline", "rb").read().split(b"\0")[0].decode(),
    "unmounted": unmounted,
    "cap_eff": int(status["CapEff"], 16), "cap_bnd": int(status["CapBnd"], 16),
    "uid": os.getuid(), "gid": os.getgid(), "sid": os.getsid(0),
    "interfaces": sorted(n for _, n in socket.if_nameindex()),
}))
"""


def _prefix(tmp_path: Path, exercise: str = "ex01") -> list[str]:
    work, files = tmp_path / "work", tmp_path / "files"
    work.mkdir()
    files.mkdir()
    return sandbox.command(str(work), str(work), str(files), exercise)


@pytest.fixture(scope="module")
def inside(tmp_path_factory) -> dict:
    """What the probe saw from inside the sandbox of exercise 01's kernel."""
    assert all(s.exists() for s in SECRETS), [s for s in SECRETS if not s.exists()]
    masks = [str(ROOT), str(ROOT / "fastpath_lib" / "grading"), "/tmp"]
    with pytest.MonkeyPatch.context() as mp:  # no other checkout masked: a worktree's git objects are masked as such
        mp.setattr(sandbox, "other_copies", lambda root=ROOT: ())
        prefix = _prefix(tmp_path_factory.mktemp("sandbox"))
    done = subprocess.run([*prefix, sys.executable, "-c", PROBE,
                           json.dumps([str(s) for s in SECRETS]), json.dumps(masks)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@needs_bwrap
def test_the_kernel_sees_its_own_processes_and_no_proc_root_reaches_the_checkout(inside):
    # --unshare-pid with --proc /proc: /proc lists the sandbox's processes only, pid 1 is bubblewrap's init
    assert inside["own_proc"] and Path(inside["pid1"]).name == "bwrap", inside
    assert inside["seen"] == [] and inside["through_proc"] == [], inside


@needs_bwrap
def test_the_kernel_holds_no_capability_and_cannot_unmount_the_masks(inside):
    # --cap-drop ALL: a detach (umount -l) of the checkout's mask or the grading folder's fails; nothing shows
    assert inside["cap_eff"] == 0 and inside["cap_bnd"] == 0, inside
    assert set(inside["unmounted"].values()) == {-1}, inside
    assert inside["seen"] == [], inside


@needs_bwrap
def test_the_kernel_is_not_root_has_no_network_and_a_session_of_its_own(inside):
    # --unshare-user --uid/--gid 65534, --unshare-net, --new-session (outside it, getsid names no process here: 0)
    assert inside["uid"] == inside["gid"] == 65534, inside
    assert inside["interfaces"] == ["lo"], inside
    assert inside["sid"] != 0, inside


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


@needs_bwrap
def test_the_graders_run_of_a_learners_triton_source_is_sandboxed_too(tmp_path):
    """ex02 and ex08: the grader runs the learner's kernel source in a child of its own (kernel_run); while it
    grades in the sandbox, that child is in the sandbox too (this function, run there, is what a launcher could do)."""
    import torch

    from fastpath_lib.grading.engine import kernel_run

    text = (f"import os\nimport torch\ndef peek(x):\n    return torch.tensor([os.getuid()] + "
            f"[int(os.path.exists(p)) for p in {[str(s) for s in SECRETS]!r}])\n")
    calls = [(None, (torch.zeros(1),), {})]
    outside = kernel_run.run(text, "peek", calls).calls[0]
    with kernel_run.sandboxed(sandbox.for_children("ex02", str(tmp_path))):
        inside = kernel_run.run(text, "peek", calls).calls[0]
    assert outside.out.tolist() == [os.getuid()] + [1] * len(SECRETS), outside
    assert inside.out.tolist() == [65534] + [0] * len(SECRETS), inside


def test_the_grader_sandboxes_its_runs_of_the_learners_source_while_the_kernel_is_sandboxed(monkeypatch):
    from fastpath_lib.grading.engine import cli, kernel_run

    seen = []
    monkeypatch.setattr(sandbox, "problem", lambda: None)
    monkeypatch.setattr(cli, "_execute", lambda *a, **k: seen.append(kernel_run._SANDBOX.get()) or cli._Run())
    cli.grade_notebook(SOLUTION, isolation="bwrap")
    cli.grade_notebook(SOLUTION, isolation="none")
    assert callable(seen[0]) and seen[1] is None, seen
