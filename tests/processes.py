"""Processes a test session starts, remembered by id and ended by id however the session ends (issue 16 item 5).

The browser fixture starts a JupyterLab server (which starts a kernel per notebook) and Playwright's driver (which
starts Chromium); the grader's tests start nbclient kernels. An interrupted run must leave none of them behind:

* :func:`spawn` starts a command in a session (and so a process group) of its own, as ``jupyter_client`` starts
  kernels, so a Ctrl-C in the terminal reaches pytest only and pytest's teardown ends the server in order (kernels
  first); the :class:`Tree` it returns remembers the ids of everything the process starts, as they appear;
* :meth:`Tree.end` ends a tree by id: the process group with SIGTERM, then each remembered id, then SIGKILL for what is
  still alive after a grace period;
* every :class:`Tree` not yet ended is ended when the interpreter exits (``atexit``), a last resort for a session that
  stopped without running its fixtures' teardown; and on Linux a spawned process gets SIGTERM when the test process
  dies, even by SIGKILL (CI runners follow SIGTERM with SIGKILL a few seconds later), which a JupyterLab server
  answers by shutting its kernels down;
* the root ``conftest.py`` turns SIGTERM (what a CI time limit sends) into ``KeyboardInterrupt``, as Ctrl-C is, so
  pytest runs the fixtures' teardown on SIGTERM too (by default SIGTERM ends Python without any teardown).

Linux ``/proc`` is read for the process tree; elsewhere :func:`descendants` finds nothing and only the direct ids are
ended.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["Tree", "alive", "descendants", "same", "spawn", "started"]


def descendants(pid: int) -> list[int]:
    """Ids of all live descendants of ``pid`` (Linux ``/proc``; empty elsewhere)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def started(pid: int) -> int | None:
    """When ``pid`` started (``/proc/<pid>/stat`` field 22, clock ticks after boot), ``None`` where unknown or gone.

    An id alone does not name a process: once it exits, the kernel may hand the id to a later process (ids wrap at
    ``/proc/sys/kernel/pid_max``, 32768 by default, counted over every process and thread of the pid namespace, other
    jobs' included on a shared host). The id with its start time does."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def same(pid: int, start: int | None) -> bool:
    """Whether ``pid`` is alive and is still the process that started at ``start`` (no start known: alive only)."""
    return alive(pid) and (start is None or started(pid) == start)


_OPEN: list[Tree] = []


class Tree:
    """One process and everything it starts, remembered by id (see the module docstring).

    Args:
        pid: the root process.
        popen: its :class:`subprocess.Popen`, when this process started it (then :meth:`end` also reaps it).
        own_group: whether the root leads a process group of its own (started with ``start_new_session``); only
            then is the whole group signalled.
    """

    def __init__(self, pid: int, popen: subprocess.Popen | None = None, own_group: bool = False) -> None:
        self.pid, self.popen, self.own_group = pid, popen, own_group
        self.start = started(pid)
        self.pids: dict[int, int | None] = {}  # id -> start time: what is signalled later is that very process
        atexit.unregister(_end_open_trees)  # registered once, on first use: importing this module changes nothing
        atexit.register(_end_open_trees)
        _OPEN.append(self)

    def remember(self, pids) -> None:
        """Remember these live processes (by id and start time) as part of the tree."""
        for pid in pids:
            start = started(pid)
            if alive(pid) and pid not in self.pids:
                self.pids[pid] = start

    def track(self) -> dict[int, int | None]:
        """Remember the root's live descendants (call it while they run: an orphan loses its parent)."""
        if same(self.pid, self.start):
            self.remember(descendants(self.pid))
        return self.pids

    def living(self) -> list[int]:
        """The remembered processes (the root included) still alive under the id they had: an id the kernel has
        handed on to an unrelated process since (a later test's kernel, say) is not in the tree."""
        ids = {self.pid: self.start, **self.pids}
        return sorted(p for p, start in ids.items() if same(p, start))

    def _signal(self, sig: int) -> None:
        if self.own_group and same(self.pid, self.start):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, sig)
        for pid in self.living():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

    def _wait(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.popen is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.popen.wait(timeout=0.05)
            if not self.living():
                return
            time.sleep(0.1)

    def end(self, grace: float = 5.0) -> list[int]:
        """SIGTERM to the tree, SIGKILL to what is alive ``grace`` seconds later; returns the ids that survived."""
        self.track()
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if not self.living():
                break
            self._signal(sig)
            self._wait(grace)
        if self.popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=1)
        with contextlib.suppress(ValueError):
            _OPEN.remove(self)
        return self.living()


def _parent_death_signal():
    """Linux: a ``preexec_fn`` that asks the kernel to send the child SIGTERM when this process dies, even by SIGKILL
    (``prctl(PR_SET_PDEATHSIG)``), so a server outlives no hard-killed test run; ``None`` elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here: the child only calls it
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(1, int(signal.SIGTERM))  # 1 = PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before the request took effect
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec


def spawn(cmd: list[str], **popen_kwargs) -> Tree:
    """Start ``cmd`` in a session of its own (``subprocess.Popen`` arguments pass through); returns its tree. On
    Linux the process is sent SIGTERM if this one dies without ending it (SIGKILL included)."""
    proc = subprocess.Popen(cmd, start_new_session=True, preexec_fn=_parent_death_signal(), **popen_kwargs)
    return Tree(proc.pid, proc, own_group=True)


def _end_open_trees() -> None:
    for tree in list(_OPEN):
        with contextlib.suppress(Exception):
            tree.end(grace=2.0)
