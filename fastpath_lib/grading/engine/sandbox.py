"""The learner's kernel isolated where the grading machine allows: bubblewrap (Debian's ``bwrap``), as autograders do.

Under :func:`command` (:data:`FLAGS`) the kernel runs as ``nobody`` in a user namespace of its own with no
capability (``--unshare-user --uid 65534 --gid 65534 --cap-drop ALL``: it cannot unmount a mask), in a PID namespace
with its own ``/proc`` (``--unshare-pid --proc /proc``: no ``/proc/<pid>/root`` leads out), in a session of its own,
killed with the grader (``--new-session --die-with-parent``), without network (``--unshare-net``). It sees the
machine read only (``--ro-bind / /``), an empty ``/tmp`` of its own (``--tmpfs /tmp``, ``TMPDIR`` there), and the
kit's checkout masked by an empty folder (``--tmpfs``) with only the library (``fastpath_lib/``) bound back read
only: no ``solutions/``, no ``tests/``, nothing the grader writes. Another copy of the kit that the virtual
environment's editable install points at (:func:`other_copies`), and a worktree's git folders outside it
(:func:`git_dirs`), are masked the same way. The interpreter's folders (:func:`interpreter_paths`: the virtual
environment as named and as resolved, its base) are bound back wherever a mask or ``/tmp`` hides them, so a venv
under ``/tmp`` runs. In the library:

* the grading folder shows only :data:`KERNEL_MODULES` (the package's ``__init__``, the notebooks' materials and the
  outcome words), and ``given.py`` to exercise 07 (:func:`kernel_modules`): no check, no answer key, no grader;
* ``fastpath_lib/exercises.py`` is replaced by a façade generated from its public names (:func:`facade_source`):
  the materials imported from the modules the kernel sees, plain constants written out, and everything else (the
  checks, another exercise's answers) a stand-in that raises with a clear message;
* the modules an exercise forbids are hidden from its kernel (:func:`hidden`: ``rmsnorm/kernels.py`` from exercises
  01, 02 and 08, ``boundary.py`` from 04, ...), each replaced by a module that raises ``ImportError`` when imported;
  a forbidden module that the kernel needs stays visible (:data:`NEEDED` says why), and the static rules and the
  checks' behaviour tests still catch its use. So exercises 05, 06 and 07 see of ``bench/`` only its ``__init__``
  (which imports none of its modules), ``schema.py`` and ``analysis.py`` (the outcome words and rule the notebooks
  import); exercise 10 does not see ``sweep.py``, nor 13 the bytes model (``bench/timing.py``,
  ``rmsnorm/cost.py``). A masked folder shows no ``__pycache__``: no compiled copy of a hidden module is left to
  read.

Two folders are bound writable: the notebook's working copy and the folder of the kernel's sockets (jupyter_client's
``transport="ipc"``: TCP cannot cross the network namespace). The generated files lie in a third folder of the
grader's, bound read only. Where the sandbox cannot start the kernel (``bwrap`` missing, user namespaces refused,
the interpreter not visible inside), :func:`problem` says why in words a learner can act on; ``--isolation bwrap``
(the autograder's) then refuses to grade (:func:`refusal`), and ``--isolation auto`` (self-study) grades without
isolation and says so and why (:func:`fallback_note`).

``./kit setup`` installs bubblewrap where ``apt-get`` can (optional, as for the browser check's Chromium).

>>> "fastpath_lib/grading/checks" in kernel_view("ex04")[1]  # the checks' folder, hidden whole
True
>>> "boundary.py" in hidden("ex04") and "boundary.py" not in hidden("ex05")
True
>>> "bench/sweep.py" in hidden("ex10") and "bench/analysis.py" not in hidden("ex06")
True
"""

from __future__ import annotations

import ast
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from jupyter_client.manager import AsyncKernelManager

from fastpath_lib import runtime

__all__ = ["KERNEL_MODULES", "HIDDEN", "NEEDED", "FLAGS", "BASE", "kernel_modules", "hidden", "kernel_view",
           "facade_source", "other_copies", "git_dirs", "interpreter_paths", "NOT_INSTALLED", "find_problem", "problem",
           "available", "fallback_note", "refusal", "command", "for_children", "IsolatedKernelManager", "manager_class",
           "kernel_env", "ISOLATED", "UNISOLATED", "NOT_RUN", "literal"]

ISOLATED = "isolated (bwrap)"
UNISOLATED = "unisolated"
NOT_RUN = "not run"  # --isolation bwrap, and the sandbox could not start: not graded

#: The files of ``fastpath_lib/grading/`` the kernel sees: what the notebooks import, never a check or an answer key.
KERNEL_MODULES = ("__init__.py", "materials.py", "vocabulary.py")
#: Further grading files one exercise's kernel sees: exercise 07 is given exercise 06's classes.
_GIVEN = {"ex07": ("given.py",)}

#: file or folder of ``fastpath_lib/`` -> the exercises whose kernel does not see it (each forbids it: see the check
#: modules' :mod:`~fastpath_lib.grading.rules.borrowed` rules); a folder means each file in it but those :data:`NEEDED`
# keeps.
HIDDEN = {
    "rmsnorm/kernels.py": ("ex01", "ex02", "ex08"),  # the kit's kernels: the reference, the kernel, the capstone
    "testing.py": ("ex01", "ex02"),  # the kit's float64 reference and its default eps
    "boundary.py": ("ex04",),  # the kit's boundary generator writes the cases exercise 04 asks for
    # the evidence toolkit: the predeclared matrix (cases.json, matrix.py, harness.py) of 05, the outcome rule of 06
    # beside the timers, the PR note (report.py, note_*.py) of 07
    "bench": ("ex05", "ex06", "ex07"),
    "bench/sweep.py": ("ex10",),  # the kit's own threshold rule
    "bench/timing.py": ("ex13",),  # re-exports the bytes model exercise 13 asks the learner to apply
    "rmsnorm/cost.py": ("ex13",),  # the bytes model itself
    "fused/kernels.py": ("ex12",),  # the kit's fused kernels
}

#: file or folder of ``fastpath_lib/`` that some exercise forbids, visible to its kernel all the same, and why.
NEEDED = {
    "rmsnorm/op.py": "forbidden in exercises 01, 02 and 08, but `import fastpath_lib` imports it (the package's "
                     "rms_norm), as it does rmsnorm/module.py",
    "rmsnorm/module.py": "forbidden in exercises 01 and 02, but `import fastpath_lib` imports it (RMSNorm)",
    "rmsnorm/limits.py": "exercise 01 forbids its default_eps, but the predicate every notebook imports is built on it",
    "rmsnorm/predicate.py": "exercises 12 and 13 forbid it, but `import fastpath_lib` imports it and the notebooks of "
                            "exercises 03, 04 and 13 import PREDICATE or MAX_COLS from it",
    "rmsnorm/capture.py": "exercise 13 forbids it (the reader of capture.json), but the predicate, which `import "
                          "fastpath_lib` imports, reads capture.json through it",
    "eligibility.py": "exercise 04 forbids Boundary.overrides, but every predicate is built from this module",
    "fused/op.py": "exercise 12 forbids it, but `import fastpath_lib` imports it (fused_add_rms_norm)",
    "fused/predicate.py": "exercise 12 forbids it, but fused/op.py, which the package imports, imports it",
    "bench/__init__.py": "exercises 05, 06 and 07 forbid all of bench, but the two files below are imported as "
                         "modules of the package; it imports none of its modules itself (each loads on first use)",
    "bench/schema.py": "exercises 05, 06 and 07 forbid all of bench, but the outcome words every notebook imports "
                       "(grading/vocabulary.py, through fastpath_lib.exercises) live there, and analysis.py imports it",
    "bench/analysis.py": "exercises 05, 06 and 07 forbid all of bench, and 13 its classify, summary_table, "
                         "boundary_table and outcome_counts, but grading/vocabulary.py, which every notebook imports, "
                         "takes the outcome rule from it, and the notebooks of 10 and 13 import noise_band and outcome",
}


def kernel_modules(exercise: str | None) -> tuple[str, ...]:
    """The files of ``fastpath_lib/grading/`` the kernel of ``exercise`` sees."""
    return KERNEL_MODULES + _GIVEN.get(exercise or "", ())


def hidden(exercise: str | None, root: Path = runtime.ROOT) -> tuple[str, ...]:
    """The files of ``fastpath_lib/`` (outside the grading folder) hidden from the kernel of ``exercise``: a folder of
    :data:`HIDDEN` stands for its entries, less those :data:`NEEDED` keeps visible."""
    lib, out = root / "fastpath_lib", []
    for rel, exercises in HIDDEN.items():
        if exercise not in exercises:
            continue
        entries = [rel]
        if (lib / rel).is_dir():
            entries = [p.relative_to(lib).as_posix() for p in sorted((lib / rel).iterdir()) if p.name != "__pycache__"]
        out += [e for e in entries if e not in NEEDED and e not in out]
    return tuple(out)


def kernel_view(exercise: str | None, root: Path = runtime.ROOT) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(visible, hidden)``: the library's files the kernel sees and those it does not (paths relative to
    ``root``), in the folders the sandbox masks."""
    lib, visible, gone = root / "fastpath_lib", [], []
    for folder, keep in _masked_folders(exercise, lib).items():
        for entry in sorted(folder.iterdir()):
            (visible if entry.name in keep else gone).append(entry.relative_to(root).as_posix())
    return tuple(visible), tuple(gone)


def _masked_folders(exercise: str | None, lib: Path, grading: tuple[str, ...] = ()) -> dict[Path, set[str]]:
    """folder -> the names in it bound back; every other entry, ``__pycache__`` included, is hidden."""
    out = {lib / "grading": set(kernel_modules(exercise))}
    for rel in grading:  # "engine/kernel_run.py": its folder shown too, with its __init__.py and the file alone
        parts = Path(rel).parts
        out[lib / "grading"].add(parts[0])
        for depth in range(1, len(parts)):
            folder = lib / "grading" / Path(*parts[:depth])
            out.setdefault(folder, {"__init__.py"} & {p.name for p in folder.iterdir()}).add(parts[depth])
    for rel in hidden(exercise, lib.parent):
        folder = (lib / rel).parent
        names = out.setdefault(folder, {p.name for p in folder.iterdir() if p.name != "__pycache__"})
        names.discard(Path(rel).name)
    return dict(sorted(out.items(), key=lambda kv: len(kv[0].parts)))  # parents before their subfolders


def literal(value) -> str | None:
    """``repr(value)`` when it reads back as an equal plain constant, else ``None``."""
    if callable(value) or isinstance(value, type):
        return None
    try:
        text = repr(value)
        return text if ast.literal_eval(text) == value else None
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _origin(name: str, value, modules: set[str]) -> str | None:
    """A module the kernel sees that holds ``value`` under ``name``, or ``None``."""
    candidates = [getattr(value, "__module__", None)] if callable(value) else []
    candidates += sorted(modules)
    for mod in candidates:
        if mod and mod in modules | _library_modules(mod) and getattr(sys.modules.get(mod), name, None) is value:
            return mod
    return None


def _library_modules(mod: str) -> set[str]:
    """``{mod}`` when it is a module of the kit outside the grading package (or not the kit's), else empty."""
    return set() if mod.startswith("fastpath_lib.grading") else {mod}


def facade_source(exercise: str | None) -> str:
    """The source of the ``fastpath_lib.exercises`` the kernel of ``exercise`` imports in the sandbox.

    Generated from :mod:`fastpath_lib.exercises`'s ``__all__``: a name that a module the kernel sees holds is imported
    from it, a plain constant is written out, and anything else (the checks, another exercise's answer, a name whose
    module is hidden) is a stand-in that raises ``RuntimeError`` saying why, when called or read.
    """
    from fastpath_lib import exercises

    lib = Path(exercises.__file__).resolve().parent
    gone = {str(lib / rel) for rel in hidden(exercise, lib.parent)}
    visible = {f"fastpath_lib.grading.{Path(m).stem}" for m in kernel_modules(exercise) if m != "__init__.py"}
    lines = [f'"""fastpath_lib.exercises as the kernel of {exercise} sees it in the grader\'s sandbox: generated by '
             'fastpath_lib.grading.engine.sandbox.facade_source; the grader runs the checks itself."""',
             f"__all__ = {list(exercises.__all__)!r}", "_HIDDEN = {}"]
    for name in exercises.__all__:
        value = getattr(exercises, name)
        literal_text, origin = literal(value), _origin(name, value, visible)
        if origin is not None and str(getattr(sys.modules[origin], "__file__", "")) in gone:
            origin = None
        if literal_text is not None:
            lines.append(f"{name} = {literal_text}")
        elif origin is not None:
            lines.append(f"from {origin} import {name}")
        else:
            why = (f"the grader runs {name} itself: in `python -m fastpath_lib grade` the check cells run in the "
                   "grader's process, not in this kernel" if name.startswith("check_") else
                   f"{name} is not available to {exercise}'s code in the grader's sandbox (it belongs to the "
                   f"grader: {getattr(value, '__module__', 'fastpath_lib.grading')})")
            lines.append(f"_HIDDEN[{name!r}] = {why!r}")
            if callable(value):
                lines.append(f"def {name}(*args, **kwargs):\n    raise RuntimeError(_HIDDEN[{name!r}])")
    lines.append("def __getattr__(name):\n    if name in _HIDDEN:\n        raise RuntimeError(_HIDDEN[name])\n"
                 "    raise AttributeError(f'module fastpath_lib.exercises has no attribute {name!r}')")
    return "\n".join(lines) + "\n"


def _hidden_stub(rel: str, exercise: str | None) -> str:
    mod = "fastpath_lib." + rel.removesuffix(".py").replace("/", ".")
    return (f"raise ImportError({mod!r} ' is hidden from the kernel of {exercise} in the grader\\'s sandbox: the "
            f"exercise forbids using it')\n")


def other_copies(root: Path = runtime.ROOT) -> tuple[Path, ...]:
    """Checkouts of the kit other than ``root`` that an editable install in this environment points at (a
    virtual environment made in another checkout): the sandbox masks them too."""
    from importlib import metadata

    out = set()
    for dist in metadata.distributions():
        if (dist.metadata["Name"] or "").lower().replace("_", "-") != "fastpath-kit":
            continue
        try:
            info = json.loads(dist.read_text("direct_url.json") or "{}")
        except (OSError, ValueError):
            continue
        url = str(info.get("url", ""))
        if info.get("dir_info", {}).get("editable") and url.startswith("file://"):
            path = Path(url.removeprefix("file://")).resolve()
            if path != root.resolve() and (path / "fastpath_lib").is_dir():
                out.add(path)
    return tuple(sorted(out))


#: bubblewrap's isolation, each flag tested from inside the sandbox (``tests/test_grading_sandbox.py``).
FLAGS = (
    "--unshare-user", "--uid", "65534", "--gid", "65534",  # nobody, in a user namespace of its own (not root)
    "--unshare-pid",  # a process tree of its own: /proc/<pid>/root reaches no process outside the sandbox
    "--unshare-net",  # no network: the kernel's sockets are files (jupyter_client's ipc transport)
    "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
    "--cap-drop", "ALL",  # no capability: the masks below cannot be unmounted
    "--die-with-parent",  # killed with the grader
    "--new-session",  # no controlling terminal to push keystrokes into (TIOCSTI)
)
#: The machine read only, with a /proc of the sandbox's own processes, a minimal /dev and an empty /tmp.
BASE = ("--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp")


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
        done = subprocess.run([exe, *FLAGS, *BASE, "true"], capture_output=True, text=True, timeout=60, check=False)
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
    as named and as resolved: a virtual environment under ``/tmp``, or reached through a link, is bound back there."""
    named = [Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).parent]
    found = [Path(os.path.abspath(p)) for p in named] + [p.resolve() for p in named]
    found.append(Path(sys.executable).resolve().parent)
    return tuple(sorted(set(found), key=lambda p: (len(p.parts), str(p))))


def git_dirs(root: Path = runtime.ROOT) -> tuple[Path, ...]:
    """The git folders of the checkout ``root`` that lie outside it (a ``git worktree`` keeps its objects in the main
    checkout's ``.git``): the sandbox masks them too."""
    dot = root / ".git"
    if not dot.is_file():
        return ()
    text = dot.read_text(encoding="utf-8", errors="replace").strip()
    if not text.startswith("gitdir:"):
        return ()
    gitdir = (root / text.removeprefix("gitdir:").strip()).resolve()
    out = {gitdir}
    common = gitdir / "commondir"
    if common.is_file():
        out.add((gitdir / common.read_text(encoding="utf-8").strip()).resolve())
    return tuple(sorted(p for p in out if root.resolve() not in p.parents))


def command(workdir: str, sockets: str, files: str, exercise: str | None = None,
            root: Path = runtime.ROOT, grading: tuple[str, ...] = ()) -> list[str]:
    """The ``bwrap`` prefix of the kernel's command line (see the module's docstring); the generated façade and the
    hidden modules' stand-ins are written into ``files`` (a folder of the grader's, bound read only). ``grading``:
    further files of the grading folder the process sees (the grader's runner of a learner's Triton source,
    :mod:`~fastpath_lib.grading.engine.kernel_run`, which holds no answer)."""
    # in its PID namespace the kernel's parent is bwrap's init (pid 1), which ipykernel's parent poller takes for "the
    # grader has exited": told its parent is pid 1 it polls nothing (and prints nothing), and --die-with-parent ends
    # it with the grader
    args = [shutil.which("bwrap") or "bwrap", *FLAGS, "--setenv", "JPY_PARENT_PID", "1", *BASE]
    prefixes = interpreter_paths()
    masks = [Path("/tmp")]
    for checkout in (root.resolve(), *other_copies(root), *git_dirs(root)):
        if any(checkout == p or p in checkout.parents for p in prefixes):  # installed into the environment
            continue
        if not any(m == checkout or m in checkout.parents for m in masks):
            masks.append(checkout)
    for mask in masks[1:]:
        args += ["--tmpfs", str(mask)]
    back = [root / "fastpath_lib"] + [p for p in prefixes if any(m in p.parents for m in masks)]
    for path in back:
        if path.exists() and not any(b in path.parents for b in back):  # a folder bound back brings its own
            args += ["--ro-bind", str(path), str(path)]
    lib, out = root / "fastpath_lib", Path(files)
    for folder, keep in _masked_folders(exercise, lib, grading).items():
        args += ["--tmpfs", str(folder)]
        for name in sorted(keep):
            if (folder / name).exists():
                args += ["--ro-bind", str(folder / name), str(folder / name)]
    for rel in hidden(exercise, root):
        if rel.endswith(".py"):
            stub = out / ("hidden-" + rel.replace("/", "-"))
            stub.write_text(_hidden_stub(rel, exercise), encoding="utf-8")
            args += ["--ro-bind", str(stub), str(lib / rel)]
    facade = out / "exercises.py"
    facade.write_text(facade_source(exercise), encoding="utf-8")
    args += ["--ro-bind", str(facade), str(lib / "exercises.py")]
    for path in (workdir, sockets):
        args += ["--bind", path, path]
    return args + ["--chdir", workdir]


def for_children(exercise: str | None, files: str):
    """``(folder, env) -> (prefix, env)`` for the grader's children that run the learner's Triton source
    (:func:`fastpath_lib.grading.engine.kernel_run.sandboxed`): the kernel's view of ``exercise``, with
    ``engine/kernel_run.py``, ``folder`` writable; their generated files go in folders under ``files``."""
    def prefix(folder: str, env: dict) -> tuple[list[str], dict]:
        own = tempfile.mkdtemp(prefix="child-", dir=files)
        return command(folder, folder, own, exercise, grading=("engine/kernel_run.py",)), kernel_env(env)
    return prefix


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
