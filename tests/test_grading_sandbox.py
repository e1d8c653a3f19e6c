"""The grader's sandbox holds (issue 35, item 2): seen from inside, as a learner who has read the grader would look.

Each test runs a probe under the exact ``bwrap`` prefix the grader gives the learner's kernel
(:func:`fastpath_lib.grading.sandbox.command`), and fails when the flag it covers is taken out of
:data:`~fastpath_lib.grading.sandbox.FLAGS`. The kernel itself under that prefix (ipykernel over its ``ipc`` sockets)
is graded in ``test_grading_channel.py`` and, from a virtual environment under ``/tmp``, below.
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

from fastpath_lib.grading import sandbox

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(not sandbox.available(), reason="bubblewrap cannot start here: the grader says so")

#: What the kit keeps from the learner: the solutions, the grader's own modules, the git objects (a worktree's too).
SECRETS = [ROOT / "solutions" / "ex01_reference.py", ROOT / "fastpath_lib" / "grading" / "ex01_reference.py",
           ROOT / "fastpath_lib" / "grading" / "cli.py", ROOT / ".git"]
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


def test_the_kernel_sees_its_own_processes_and_no_proc_root_reaches_the_checkout(inside):
    # --unshare-pid with --proc /proc: /proc lists the sandbox's processes only, pid 1 is bubblewrap's init
    assert inside["own_proc"] and Path(inside["pid1"]).name == "bwrap", inside
    assert inside["seen"] == [] and inside["through_proc"] == [], inside


def test_the_kernel_holds_no_capability_and_cannot_unmount_the_masks(inside):
    # --cap-drop ALL: a detach (umount -l) of the checkout's mask or the grading folder's fails; nothing shows
    assert inside["cap_eff"] == 0 and inside["cap_bnd"] == 0, inside
    assert set(inside["unmounted"].values()) == {-1}, inside
    assert inside["seen"] == [], inside


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


def test_the_sandbox_dies_with_the_grader(tmp_path):
    """--die-with-parent: the grader killed (SIGKILL, no cleanup), bubblewrap and the kernel go with it."""
    marker = "61.2345"  # a sleep no other process runs
    starter = "import subprocess, sys, time\nprint(subprocess.Popen(sys.argv[1:]).pid, flush=True)\ntime.sleep(60)"
    grader = subprocess.Popen([sys.executable, "-c", starter, *_prefix(tmp_path), "sleep", marker],
                              stdout=subprocess.PIPE, text=True)
    bwrap = int(grader.stdout.readline())
    deadline = time.monotonic() + 20
    while not _sleepers(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _sleepers(marker), "the sandboxed command never started"
    grader.kill()
    grader.wait()
    grader.stdout.close()
    while (_alive(bwrap) or _sleepers(marker)) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [p for p in [bwrap, *_sleepers(marker)] if _alive(p)]
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
