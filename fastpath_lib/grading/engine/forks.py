"""The kernel run's processes that hold no value (:mod:`~fastpath_lib.grading.engine.kernel_run`'s child and its steps).

:func:`held_apart` keeps the values' bytes in memory no fork gets, :func:`forked` runs a step in a forked copy,
:func:`end_strays` ends what a step left behind, :func:`prctl` sets the child's process flags (not dumpable, the
subreaper of what its steps leave).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable

__all__ = ["prctl", "end_strays", "held_apart", "forked"]


def prctl(option: int, value: int) -> None:
    """``prctl(option, value)`` on Linux (raises where it fails); nothing elsewhere."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if hasattr(libc, "prctl") and libc.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}, {value}) failed")


def end_strays() -> None:
    """Kill every process left by the record's (it ended; this process is their subreaper): none outlives it to
    read the values the replay is given."""
    import signal

    for _ in range(100):
        strays = []
        for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as fh:
                        if int(fh.read().rpartition(")")[2].split()[1]) == os.getpid():
                            strays.append(int(entry))
                except (OSError, ValueError, IndexError):
                    continue
        if not strays:
            return
        for pid in strays:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        for pid in strays:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def held_apart(path: str):
    """The values file's bytes, in memory that no forked process has (``MADV_DONTFORK``); the file is removed."""
    import mmap

    size = os.path.getsize(path)
    held = mmap.mmap(-1, max(size, 1))
    with contextlib.suppress(AttributeError, OSError):
        held.madvise(mmap.MADV_DONTFORK)
    with open(path, "rb", buffering=0) as fh:
        fh.readinto(memoryview(held)[:size])
    os.unlink(path)
    return held, size


def forked(work: Callable[[], None]) -> int:
    """Run ``work`` in a forked copy of this process; its wait status."""
    import gc

    gc.freeze()  # the copy's collector leaves what it inherits alone: no page of it is copied for a collection
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            work()
            code = 0
        finally:
            os._exit(code)  # no atexit, no teardown of what the parent still uses
    return os.waitpid(pid, 0)[1]
