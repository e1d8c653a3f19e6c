"""The learner's kernel isolated where the grading machine allows: bubblewrap (Debian's ``bwrap``), as autograders do.

Under :func:`command` (:data:`FLAGS`) the kernel runs as ``nobody`` in a user namespace of its own with no
capability (``--unshare-user --uid 65534 --gid 65534 --cap-drop ALL``: it cannot unmount anything), in a PID
namespace with its own ``/proc`` (``--unshare-pid --proc /proc``: no ``/proc/<pid>/root`` leads out), in a session of
its own, killed with the grader (``--new-session --die-with-parent``), without network (``--unshare-net``).

Its file system is an allow-list on an empty, read-only root; nothing else of the machine is there:

* the machine's programs and shared libraries, read only (:func:`system_binds`): ``/usr``, the top-level ``bin``,
  ``sbin`` and ``lib*`` folders (as the links they are on a merged-``/usr`` system), and the few files of ``/etc``
  that the loader and the C library read (:data:`ETC`);
* the kernel's Python, read only: ``sys.prefix``, ``sys.base_prefix`` and the interpreter's folder, as named and as
  resolved (:func:`interpreter_paths`), and the ``sys.path`` folder of each third-party package the staged kit
  imports and of ``ipykernel`` (:func:`_site_folders`). A virtual environment inside the kit's checkout is bound
  alone, never the checkout around it; a checkout, or the installed package, that lies inside a bound folder is
  masked by an empty folder;
* the kit as the exercise hands it out, staged by the grader (:mod:`~fastpath_lib.grading.engine.handout`) and bound
  where the grader's own package lies: the modules the given cells of the exercise's notebook import or read
  (:func:`given_names`), what the exercise's text offers beyond them (:data:`~fastpath_lib.grading.registry.HANDOUTS`),
  the modules of the façade's materials and what the grader's agent imports (:func:`handouts`), with everything they
  import (:func:`closure`); the package's ``__init__`` and the façade (``fastpath_lib/exercises.py``) generated from
  their public names (:func:`package_source`, :func:`facade_source`), a name whose module is not staged (the checks, the
  kit's operator in exercise 01) a stand-in that raises, from a stand-in module at that module's path for the package's
  names. No check, answer key or graded implementation is there to import, read or compile;
* a ``/proc`` and a minimal ``/dev`` of its own, an empty ``/tmp`` of its own (``HOME``, ``TMPDIR`` and the caches
  there);
* two folders writable: the notebook's working copy and the folder of the kernel's sockets (jupyter_client's
  ``transport="ipc"``: TCP cannot cross the network namespace).

Where the sandbox cannot start the kernel (``bwrap`` missing, user namespaces refused, the interpreter not visible
inside), :func:`problem` says why in words a learner can act on; ``--isolation bwrap`` (the autograder's) then refuses
to grade (:func:`refusal`), and ``--isolation auto`` (self-study) grades without isolation and says so and why
(:func:`fallback_note`).

``./kit grade`` and ``./kit test`` install Debian's bubblewrap where it is missing, when run as root with ``apt-get``
(optional, as ``./kit test`` does for the browser check's Chromium); ``./kit setup`` does not.
"""

from __future__ import annotations

import ast
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from jupyter_client.manager import AsyncKernelManager

from fastpath_lib import runtime
from fastpath_lib.grading.engine.handout import (
    ANSWER_MARKERS,
    PACKAGE,
    closure,
    facade_source,
    given_cells,
    given_names,
    handouts,
    kernel_library,
    kernel_modules,
    literal,
    package_source,
    stage,
)
from fastpath_lib.runtime import parse_source

__all__ = ["FLAGS", "BASE", "ETC", "ANSWER_MARKERS", "given_cells", "given_names", "closure", "handouts",
           "kernel_library", "kernel_modules", "facade_source", "package_source", "stage", "system_binds",
           "interpreter_paths", "NOT_INSTALLED", "find_problem", "problem",
           "available", "fallback_note", "refusal", "command", "for_children", "IsolatedKernelManager", "manager_class",
           "kernel_env", "ISOLATED", "UNISOLATED", "NOT_RUN", "literal"]

ISOLATED = "isolated (bwrap)"
UNISOLATED = "unisolated"
NOT_RUN = "not run"  # --isolation bwrap, and the sandbox could not start: not graded

#: bubblewrap's isolation, each flag tested from inside the sandbox (``tests/grading/test_grading_sandbox.py``).
FLAGS = (
    "--unshare-user", "--uid", "65534", "--gid", "65534",  # nobody, in a user namespace of its own (not root)
    "--unshare-pid",  # a process tree of its own: /proc/<pid>/root reaches no process outside the sandbox
    "--unshare-net",  # no network: the kernel's sockets are files (jupyter_client's ipc transport)
    "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
    "--cap-drop", "ALL",  # no capability: the masks below cannot be unmounted
    "--die-with-parent",  # killed with the grader
    "--new-session",  # no controlling terminal to push keystrokes into (TIOCSTI)
)
#: A /proc of the sandbox's own processes, a minimal /dev, an empty /tmp of its own; every other folder is bound
#: by :func:`command` from an allow-list, and the root itself is read only.
BASE = ("--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp")
#: The files of ``/etc`` the kernel's processes read: the dynamic loader's cache and configuration, the user and
#: group names (``nobody``), the name-service switch, the time zone, the links ``/usr/bin`` tools go through.
ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "passwd", "group", "nsswitch.conf", "localtime", "alternatives")


NOT_INSTALLED = "bubblewrap (bwrap) is not installed (install Debian's bubblewrap: apt-get install bubblewrap)"


def _sysctl(name: str) -> str | None:
    try:
        return Path("/proc/sys", *name.split(".")).read_text().strip()
    except OSError:
        return None


def _said(stderr: str) -> str:
    lines = [s.strip() for s in (stderr or "").strip().splitlines() if s.strip()]
    return lines[-1][:200] if lines else "no message"


def _namespace_cause(stderr: str) -> str:
    """Why ``bwrap`` could not make its namespaces, from the machine's settings where one of them says so."""
    if _sysctl("user.max_user_namespaces") == "0":
        return "user namespaces are disabled on this machine (sysctl user.max_user_namespaces is 0)"
    if _sysctl("kernel.unprivileged_userns_clone") == "0":
        return ("unprivileged user namespaces are disabled on this machine (sysctl kernel.unprivileged_userns_clone "
                "is 0)")
    if os.geteuid() != 0 and _sysctl("kernel.apparmor_restrict_unprivileged_userns") == "1":
        return ("AppArmor forbids unprivileged user namespaces on this machine (sysctl "
                "kernel.apparmor_restrict_unprivileged_userns is 1; an AppArmor profile for bwrap allows them)")
    return f"this machine does not let bubblewrap make its namespaces (bwrap said: {_said(stderr)})"


def find_problem(exercise: str | None = None) -> str | None:
    """Why the sandbox cannot start the kernel here, as a clause a learner can act on (``None`` when it can): bwrap
    missing, namespaces refused, or the kernel's interpreter unable to start under :func:`command`."""
    exe = shutil.which("bwrap")
    if exe is None:
        return NOT_INSTALLED
    try:
        done = subprocess.run([exe, *FLAGS, *BASE, *system_binds(), "true"], capture_output=True, text=True,
                              timeout=60, check=False)
        if done.returncode != 0:
            return _namespace_cause(done.stderr)
        with tempfile.TemporaryDirectory(prefix="fastpath-probe-") as tmp:
            probe = [*command(tmp, tmp, tmp, exercise), sys.executable, "-c", "import ipykernel.kernelapp"]
            done = subprocess.run(probe, env=kernel_env(dict(os.environ)), capture_output=True, text=True,
                                  timeout=120, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bubblewrap could not be run ({getattr(exc, 'strerror', None) or type(exc).__name__})"
    if done.returncode == 0:
        return None
    said = _said(done.stderr)
    if "execvp" in said or "No such file or directory" in said:
        return f"the Python environment at {sys.prefix} is not visible inside the sandbox (bwrap said: {said})"
    if "ModuleNotFoundError" in said or "ImportError" in said:
        return f"a folder of the Python environment at {sys.prefix} is hidden inside the sandbox ({said})"
    return f"the kernel's Python fails inside the sandbox (it said: {said})"


@functools.cache
def problem() -> str | None:
    """:func:`find_problem` for any exercise, found once per process."""
    return find_problem()


def available() -> bool:
    """Whether the sandbox starts the kernel's interpreter here (:func:`problem` says why not)."""
    return problem() is None


def fallback_note(cause: str) -> str:
    """What ``--isolation auto`` tells the learner when it grades without the sandbox."""
    return f"the sandbox could not start because {cause}, so this grade was computed without isolation"


def refusal(cause: str) -> str:
    """What ``--isolation bwrap`` says instead of a grade."""
    return (f"not graded: the sandbox could not start because {cause}, and --isolation bwrap grades only inside "
            "the sandbox")


def interpreter_paths() -> tuple[Path, ...]:
    """The folders the kernel's interpreter lives in (``sys.prefix``, ``sys.base_prefix``, the executable's folder),
    as named and as resolved: a virtual environment under ``/tmp``, or reached through a link, is bound there."""
    named = [Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).parent]
    found = [Path(os.path.abspath(p)) for p in named] + [p.resolve() for p in named]
    found.append(Path(sys.executable).resolve().parent)
    return tuple(sorted(set(found), key=lambda p: (len(p.parts), str(p))))


def system_binds() -> list[str]:
    """bubblewrap's options for the machine's programs and shared libraries: ``/usr`` and the top-level ``bin``,
    ``sbin`` and ``lib*`` folders, read only (a link into ``/usr``, as on a merged-``/usr`` system, made again as
    the same link), and the files of :data:`ETC` there are."""
    out = []
    for entry in sorted(Path("/").iterdir()):
        if entry.name not in ("usr", "bin", "sbin") and not entry.name.startswith("lib"):
            continue
        if entry.is_symlink():
            out += ["--symlink", os.readlink(entry), str(entry)]
        elif entry.is_dir():
            out += ["--ro-bind", str(entry), str(entry)]
    for name in ETC:
        if os.path.lexists(f"/etc/{name}"):
            out += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    return out


def _site_folders(library: Path) -> list[Path]:
    """The ``sys.path`` folders that hold the third-party packages the staged kit (``library``) imports, and the
    kernel's own (``ipykernel``): each found where this interpreter finds it."""
    import importlib.util

    names = {"ipykernel", "torch"}
    for path in library.rglob("*.py"):
        for node in ast.walk(parse_source(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names.add(node.module.split(".")[0])
    out = set()
    for name in sorted(names - {PACKAGE} - set(sys.stdlib_module_names)):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        origin = (spec.submodule_search_locations or [spec.origin])[0] if spec else None
        if origin:
            entry = Path(origin).resolve().parent
            out.add(entry)
    return sorted(out)


def _covered(path: Path, folders) -> bool:
    return any(path == f or f in path.parents for f in folders)


def command(workdir: str, sockets: str, files: str, exercise: str | None = None,
            root: Path = runtime.ROOT, grading: tuple[str, ...] = ()) -> list[str]:
    """The ``bwrap`` prefix of the kernel's command line (see the module's docstring). The kit as the kernel sees it
    is staged into ``files`` (:func:`stage`, a folder of the grader's) and bound read only where the grader's own
    package lies, so that a file the kernel reports is the kit's name for it; ``PYTHONPATH`` names its parent.
    ``grading``: modules of the grading package the process needs beyond the exercise's (the grader's runner of a
    learner's Triton source, :mod:`~fastpath_lib.grading.engine.kernel_run`, which holds no answer)."""
    library = stage(exercise, Path(files) / "kit", root, grading) / PACKAGE
    package = root.resolve() / PACKAGE  # where the grader imports the kit from: the kernel's reports name its files
    # in its PID namespace the kernel's parent is bwrap's init (pid 1), which ipykernel's parent poller takes for "the
    # grader has exited": told its parent is pid 1 it polls nothing (and prints nothing), and --die-with-parent ends
    # it with the grader
    args = [shutil.which("bwrap") or "bwrap", *FLAGS, "--setenv", "JPY_PARENT_PID", "1",
            "--setenv", "PYTHONPATH", str(package.parent), *BASE, *system_binds()]
    usr = [Path("/usr")] if Path("/usr").is_dir() else []
    folders = [p for p in sorted(set(interpreter_paths()) | set(_site_folders(library.parent)),
                                 key=lambda p: (len(p.parts), str(p))) if p.exists()]
    bound = []
    for path in folders:
        if not _covered(path, usr + bound):
            args += ["--ro-bind", str(path), str(path)]
            bound.append(path)
    # the checkout, then the package wherever it lies (an install into the environment): masked where a bound folder
    # holds it, a folder of the environment inside the mask bound again
    for mask in dict.fromkeys([root.resolve(), Path(__file__).resolve().parents[2]]):
        if mask.is_dir() and mask not in bound and _covered(mask, usr + bound):
            args += ["--tmpfs", str(mask)]
            again: list[Path] = []
            for path in folders:
                if mask in path.parents and not _covered(path, again):
                    args += ["--ro-bind", str(path), str(path)]
                    again.append(path)
    for path in dict.fromkeys((workdir, sockets)):
        args += ["--bind", path, path]
    args += ["--ro-bind", str(library), str(package)]  # over the package where a bound folder holds it
    return [*args, "--remount-ro", "/", "--chdir", workdir]


def for_children(exercise: str | None, files: str):
    """``(folder, env) -> (prefix, env)`` for the grader's children that run the learner's Triton source
    (:func:`fastpath_lib.grading.engine.kernel_run.sandboxed`): the kernel's view of ``exercise``, with
    :mod:`~fastpath_lib.grading.engine.kernel_run` and the kit's modules it imports (their import closure, as for the
    kernel's own handouts) staged, ``folder`` writable; their staged kit goes in folders under ``files``."""
    def prefix(folder: str, env: dict) -> tuple[list[str], dict]:
        own = tempfile.mkdtemp(prefix="child-", dir=files)
        return command(folder, folder, own, exercise, grading=(f"{PACKAGE}.grading.engine.kernel_run",)), \
            kernel_env(env)
    return prefix


def kernel_env(env: dict) -> dict:
    """The kernel's environment in the sandbox: its home, temporary files and caches in its own ``/tmp`` (the
    grader's home is not in the sandbox)."""
    out = dict(env)
    out.update(HOME="/tmp", TMPDIR="/tmp", IPYTHONDIR="/tmp/ipython", MPLCONFIGDIR="/tmp/matplotlib",
               XDG_CACHE_HOME="/tmp/cache",
               TRITON_CACHE_DIR="/tmp/triton", TORCHINDUCTOR_CACHE_DIR="/tmp/inductor")
    return out


class IsolatedKernelManager(AsyncKernelManager):
    """A kernel manager whose kernel starts under the ``sandbox`` command prefix, its sockets ``ipc`` files."""

    sandbox: list[str] = []

    def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
        return list(self.sandbox) + super().format_kernel_cmd(extra_arguments)


def manager_class(workdir: str, sockets: str, files: str, exercise: str | None = None) -> type:
    """A kernel manager class for one notebook of ``exercise`` (nbclient creates, owns and shuts down its instance),
    its kernel isolated; ``sockets`` and ``files`` are empty folders of the grader's."""
    prefix = command(workdir, sockets, files, exercise)

    class Manager(IsolatedKernelManager):
        def __init__(self, **kwargs):
            super().__init__(transport="ipc", ip=os.path.join(sockets, "kernel"),
                             connection_file=os.path.join(sockets, "kernel.json"), **kwargs)
            self.sandbox = prefix

    return Manager
