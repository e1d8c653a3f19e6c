"""An interrupted test run leaves no process behind (issue 16 item 5): ``tests/processes.py`` and the root conftest
(whose SIGTERM handler is unit-tested in ``tests/kit/test_pytest_config.py``, beside its other hooks).

A stand-in session runs in a subprocess with the same machinery as the browser test and the grader: a "server"
started with :func:`tests.processes.spawn` (in a session of its own) that starts a child in a session of *its* own,
as JupyterLab starts kernels, and an nbclient kernel started the way the grader starts one, busy in a cell. The
stand-in is sent SIGTERM, as a CI time limit does, and every process it had started must be gone. A few seconds
(one kernel start).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.processes import Tree, alive, descendants, spawn, started

ROOT = Path(__file__).resolve().parents[2]

STANDIN = textwrap.dedent('''
    import sys
    import time

    import nbformat
    import pytest
    from nbclient import NotebookClient

    from tests.processes import spawn

    SERVER = ("import subprocess, sys, time\\n"
              "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], start_new_session=True)\\n"
              "time.sleep(600)\\n")


    @pytest.fixture(scope="session")
    def server():
        tree = spawn([sys.executable, "-c", SERVER])
        try:
            yield tree
        finally:
            tree.end()


    def test_busy(server):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import time\\ntime.sleep(600)")])
        client = NotebookClient(nb, kernel_name="python3", timeout=600, allow_errors=True)
        with client.setup_kernel():
            while not server.track():  # the server's own child is up
                time.sleep(0.05)
            print("READY", flush=True)
            client.execute_cell(nb.cells[0], 0)
''')


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _start_standin(tmp_path, *plugins: str) -> tuple[subprocess.Popen, list[int], Path]:
    """Start the stand-in session; return it once READY, with the ids of what it started and its output file (a file,
    not a pipe: a surviving child holding a pipe open would block the reading)."""
    (tmp_path / "test_standin.py").write_text(STANDIN)
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYDEVD_DISABLE_FILE_VALIDATION="1")
    env.pop("PYTEST_ADDOPTS", None)
    out = tmp_path / "standin.out"
    with open(out, "w") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "pytest", "test_standin.py", "-q", "-s", "-p",
                                 "no:cacheprovider", "--rootdir", str(tmp_path), *plugins], cwd=tmp_path, env=env,
                                stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while "READY" not in out.read_text() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "READY" in out.read_text(), out.read_text()[-3000:]
    return proc, descendants(proc.pid), out


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process tree from Linux /proc")
def test_sigterm_mid_test_leaves_no_server_child_or_kernel(tmp_path):
    pytest.importorskip("nbclient")
    proc, started, out = _start_standin(tmp_path, "-p", "conftest")  # the root conftest, as every run of the suite
    leftovers = Tree(proc.pid, proc)
    leftovers.remember(started)
    try:
        kinds = {p: _cmdline(p) for p in started}
        assert sum("ipykernel" in c for c in kinds.values()) == 1, kinds  # the kernel
        assert sum("time.sleep(600)" in c for c in kinds.values()) == 2, kinds  # the server and its own child
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        deadline = time.monotonic() + 10
        while any(alive(p) for p in started) and time.monotonic() < deadline:
            time.sleep(0.1)
        survivors = {p: kinds[p] for p in started if alive(p)}
        text = out.read_text()
        assert not survivors, f"still running after SIGTERM to pytest: {survivors}\n{text[-2000:]}"
        assert proc.returncode == 2 and "SIGTERM received" in text, (proc.returncode, text[-2000:])
    finally:
        leftovers.end(grace=2)


def test_tree_ends_a_session_and_what_it_started(tmp_path):
    """:meth:`Tree.end` ends the root's group and each remembered descendant, also one in a session of its own."""
    code = ("import subprocess, sys, time\n"
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], start_new_session=True)\n"
            "subprocess.Popen([sys.executable, '-c', 'import signal, time; signal.signal(signal.SIGTERM, "
            "signal.SIG_IGN); time.sleep(600)'])\n"  # one that ignores SIGTERM: SIGKILL after the grace period
            "time.sleep(600)\n")
    tree = spawn([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 30
        while len(tree.track()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        pids = [tree.pid, *tree.pids]
        assert len(pids) == 3 and all(alive(p) for p in pids)
        t0 = time.monotonic()
        assert tree.end(grace=1.0) == []
        assert not any(alive(p) for p in pids) and time.monotonic() - t0 < 10
    finally:
        tree.end(grace=1.0)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux only")
def test_a_spawned_process_goes_when_the_test_process_is_killed(tmp_path):
    """SIGKILL (no teardown, no atexit) to a process that spawned a server: the server is sent SIGTERM and goes."""
    code = ("import sys, time; sys.path.insert(0, sys.argv[1]); from tests.processes import spawn\n"
            "t = spawn([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
            "print(t.pid, flush=True); time.sleep(600)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(ROOT)], stdout=subprocess.PIPE, text=True)
    server = None
    try:
        server = int(proc.stdout.readline())
        assert alive(server)
        proc.kill()
        proc.wait(timeout=10)
        deadline = time.monotonic() + 10
        while alive(server) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(server), f"process {server} outlived the SIGKILLed process that spawned it"
    finally:
        proc.kill()
        proc.wait(timeout=10)
        proc.stdout.close()
        if server is not None and alive(server):
            os.kill(server, signal.SIGKILL)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads start times from Linux /proc")
def test_an_id_handed_on_to_another_process_is_left_alone():
    """A tree remembers processes by id and start time: once a remembered process is gone, its id may name a new,
    unrelated process (a later test's kernel), which :meth:`Tree.end` must not signal. Stood in for here by a live
    process remembered under another start time; the tree's own live member is still ended."""
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    tree = spawn([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        assert started(bystander.pid) is not None
        tree.pids[bystander.pid] = started(bystander.pid) - 1  # the id as it was, held by an earlier process
        assert tree.end(grace=1.0) == []
        assert tree.popen.poll() is not None, "the tree's own process was not ended"
        assert bystander.poll() is None, "a process that only shares a remembered id was signalled"
    finally:
        bystander.kill()
        bystander.wait()
        tree.end(grace=1.0)
