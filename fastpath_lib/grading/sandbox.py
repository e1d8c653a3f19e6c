"""The learner's kernel isolated where the grading machine allows: bubblewrap (Debian's ``bwrap``), as autograders do.

Under :func:`command` the kernel sees the machine read only (``--ro-bind / /``), an empty ``/tmp`` of its own
(``--tmpfs /tmp``, ``TMPDIR`` there), no network (``--unshare-net``), and the kit's checkout masked by an empty
folder (``--tmpfs``) with only the library (``fastpath_lib/``) and the virtual environment bound back read only:
no ``solutions/``, no ``tests/``, nothing the grader writes. The check modules that compute verdicts from the
learner's answers (:data:`STUBBED`: exercise 04's per-mutant verdicts) are replaced there by stubs of their public
names (:func:`stub_source`): the notebook's façade still imports, the verdicts are not importable. Two folders are
bound writable: the notebook's working copy and the folder of the kernel's sockets (jupyter_client's
``transport="ipc"``: TCP cannot cross the network namespace). Where ``bwrap`` is missing or cannot run (no user
namespaces), :func:`available` says so and the grader runs the kernel unisolated, and says that in its report.

``./kit setup`` installs bubblewrap where ``apt-get`` can (optional, as for the browser check's Chromium).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

from jupyter_client.manager import AsyncKernelManager

from fastpath_lib import runtime

__all__ = ["STUBBED", "stub_source", "available", "command", "IsolatedKernelManager", "manager_class", "kernel_env",
           "ISOLATED", "UNISOLATED"]

#: Check modules the kernel sees as stubs (their verdicts run only in the grader).
STUBBED = ("ex04_boundary",)
ISOLATED = "isolated (bwrap)"
UNISOLATED = "unisolated"


@functools.cache
def available() -> bool:
    """Whether ``bwrap`` is installed and can start a process with the options :func:`command` uses."""
    exe = shutil.which("bwrap")
    if exe is None:
        return False
    try:
        done = subprocess.run([exe, "--ro-bind", "/", "/", "--dev", "/dev", "--tmpfs", "/tmp", "--unshare-net",
                               "--die-with-parent", "true"], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def stub_source(module: str) -> str:
    """A stand-in for ``fastpath_lib.grading.<module>`` in the sandbox: its ``__all__``, plain constants kept, every
    function one that says the grader runs it."""
    import ast
    import importlib

    mod = importlib.import_module(f"fastpath_lib.grading.{module}")
    lines = [f'"""Stand-in for fastpath_lib.grading.{module} in the grader\'s sandbox: the grader runs its checks."""',
             f"__all__ = {list(mod.__all__)!r}"]
    for name in mod.__all__:
        value = getattr(mod, name)
        if callable(value):
            lines.append(f"def {name}(*args, **kwargs):\n    raise RuntimeError('the grader runs {name} itself')")
        else:
            ast.literal_eval(repr(value))  # only plain constants travel
            lines.append(f"{name} = {value!r}")
    return "\n".join(lines) + "\n"


def command(workdir: str, sockets: str, root: Path = runtime.ROOT) -> list[str]:
    """The ``bwrap`` prefix of the kernel's command line (see the module's docstring); the stubs of
    :data:`STUBBED` are written into ``sockets`` (a folder of the grader's) and bound over the modules."""
    args = [shutil.which("bwrap") or "bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--tmpfs", "/tmp",
            "--unshare-net", "--die-with-parent", "--tmpfs", str(root)]
    back = [root / "fastpath_lib"]
    for prefix in {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()}:
        if prefix == root or root in prefix.parents:
            back.append(prefix)
    for path in back:
        if path.exists():
            args += ["--ro-bind", str(path), str(path)]
    for module in STUBBED:
        stub = Path(sockets) / f"{module}.py"
        stub.write_text(stub_source(module), encoding="utf-8")
        args += ["--ro-bind", str(stub), str(root / "fastpath_lib" / "grading" / f"{module}.py")]
    for path in (workdir, sockets):
        args += ["--bind", path, path]
    return args + ["--chdir", workdir]


def kernel_env(env: dict) -> dict:
    """The kernel's environment in the sandbox: temporary files and caches in its own ``/tmp``."""
    out = dict(env)
    out.update(TMPDIR="/tmp", IPYTHONDIR="/tmp/ipython", MPLCONFIGDIR="/tmp/matplotlib", XDG_CACHE_HOME="/tmp/cache",
               TRITON_CACHE_DIR="/tmp/triton", TORCHINDUCTOR_CACHE_DIR="/tmp/inductor")
    return out


class IsolatedKernelManager(AsyncKernelManager):
    """A kernel manager whose kernel starts under the ``sandbox`` command prefix, its sockets ``ipc`` files."""

    sandbox: list[str] = []

    def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
        return list(self.sandbox) + super().format_kernel_cmd(extra_arguments)


def manager_class(workdir: str, sockets: str) -> type:
    """A kernel manager class for one notebook (nbclient creates, owns and shuts down its instance), its kernel
    isolated; ``sockets`` is an empty folder of the grader's."""
    prefix = command(workdir, sockets)

    class Manager(IsolatedKernelManager):
        def __init__(self, **kwargs):
            super().__init__(transport="ipc", ip=os.path.join(sockets, "kernel"),
                             connection_file=os.path.join(sockets, "kernel.json"), **kwargs)
            self.sandbox = prefix

    return Manager
