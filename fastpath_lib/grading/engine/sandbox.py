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
* the kit as the exercise hands it out, staged by the grader (:func:`stage`) and named by ``PYTHONPATH``: the modules
  the given cells of the exercise's notebook import or read (:func:`given_names`), what the exercise's text offers
  beyond them (:data:`~fastpath_lib.grading.registry.HANDOUTS`), the modules of the façade's materials and what the
  grader's agent imports (:func:`handouts`), with everything they import (:func:`closure`); the package's
  ``__init__`` and the façade (``fastpath_lib/exercises.py``) generated from their public names
  (:func:`package_source`, :func:`facade_source`), a name whose module is not staged (the checks, the kit's operator
  in exercise 01) a stand-in that raises. No check, answer key or graded implementation is there to import, read or
  compile;
* a ``/proc`` and a minimal ``/dev`` of its own, an empty ``/tmp`` of its own (``HOME``, ``TMPDIR`` and the caches
  there);
* two folders writable: the notebook's working copy and the folder of the kernel's sockets (jupyter_client's
  ``transport="ipc"``: TCP cannot cross the network namespace).

Where the sandbox cannot start the kernel (``bwrap`` missing, user namespaces refused, the interpreter not visible
inside), :func:`problem` says why in words a learner can act on; ``--isolation bwrap`` (the autograder's) then refuses
to grade (:func:`refusal`), and ``--isolation auto`` (self-study) grades without isolation and says so and why
(:func:`fallback_note`).

``./kit setup`` installs bubblewrap where ``apt-get`` can (optional, as for the browser check's Chromium).

>>> "fastpath_lib.rmsnorm.limits" in kernel_library("ex01")  # exercise 01 asks for default_eps: not handed out
False
>>> "fastpath_lib.boundary" in kernel_library("ex04"), "fastpath_lib.rmsnorm.predicate" in kernel_library("ex04")
(False, True)
>>> "fastpath_lib.bench.sweep" in kernel_library("ex10"), "fastpath_lib.bench.analysis" in kernel_library("ex10")
(False, True)
"""

from __future__ import annotations

import ast
import functools
import re
import os
import shutil
import subprocess
import sys
import tempfile
import types
from pathlib import Path

from jupyter_client.manager import AsyncKernelManager

from fastpath_lib import runtime

__all__ = ["FLAGS", "BASE", "ETC", "ANSWER_MARKERS", "given_cells", "given_names", "closure", "handouts",
           "kernel_library", "kernel_modules", "facade_source", "package_source", "stage", "system_binds",
           "interpreter_paths", "NOT_INSTALLED", "find_problem", "problem",
           "available", "fallback_note", "refusal", "command", "for_children", "IsolatedKernelManager", "manager_class",
           "kernel_env", "ISOLATED", "UNISOLATED", "NOT_RUN", "literal"]

ISOLATED = "isolated (bwrap)"
UNISOLATED = "unisolated"
NOT_RUN = "not run"  # --isolation bwrap, and the sandbox could not start: not graded

PACKAGE = "fastpath_lib"
#: The façade the notebooks import (``from fastpath_lib import exercises as ex``), generated for each kernel.
FACADE = f"{PACKAGE}.exercises"
#: Lines of a code cell that mark it as the learner's to write (the exercise's) or as the solution (the kit's).
ANSWER_MARKERS = ("FILL ME IN", "# BEGIN SOLUTION")
#: The floor module that holds what one exercise is given as the answer of another: handed out only where the
#: notebook's given cells read one of its names.
GIVEN_MODULE = f"{PACKAGE}.grading.given"
#: The grader's agent, which runs as source text in the learner's kernel (:mod:`~fastpath_lib.grading.engine.runner`).
AGENT = f"{PACKAGE}.grading.engine.runner"


def _module_file(module: str, root: Path) -> Path | None:
    """The source file of ``module`` of the kit (``__init__.py`` for a package), or ``None``."""
    base = root.joinpath(*module.split("."))
    for path in (base / "__init__.py", base.with_suffix(".py")):
        if path.is_file():
            return path
    return None


def _defining_module(value, holders) -> str | None:
    """The module of the kit that defines ``value``: a function's or class's own module, else the first of
    ``holders`` (module names) whose source assigns the name at its top level."""
    mod = getattr(value, "__module__", None) if callable(value) or isinstance(value, type) else None
    if mod and mod.startswith(PACKAGE):
        return mod
    for name, holder in holders:
        module = sys.modules.get(holder)
        if module is not None and getattr(module, name, None) is value and name in _top_level_names(holder):
            return holder
    return None


@functools.cache
def _top_level_names(module: str, root: Path = runtime.ROOT) -> frozenset[str]:
    path = _module_file(module, root)
    if path is None:
        return frozenset()
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AnnAssign, ast.AugAssign)) else []
        names |= {t.id for t in targets if isinstance(t, ast.Name)}
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
    return frozenset(names)


@functools.cache
def _resolve(dotted_name: str, root: Path) -> str | None:
    """The module of the kit that ``a.b.c`` names, or that defines the object it names (``fastpath_lib.explain`` ->
    ``fastpath_lib.rmsnorm.op``); ``None`` for the package itself or a name that is not the kit's."""
    import importlib

    parts = dotted_name.split(".")
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        if _module_file(module, root) is None:
            continue
        if cut == len(parts):
            return None if module == PACKAGE else module
        try:
            value = importlib.import_module(module)
            for attr in parts[cut:]:
                value = getattr(value, attr)
        except (ImportError, AttributeError):
            return None
        if isinstance(value, types.ModuleType):
            return value.__name__ if value.__name__ != PACKAGE else None
        holders = [(parts[-1], m) for m in sorted(m for m in sys.modules if m.startswith(PACKAGE))]
        return _defining_module(value, holders)
    return None


def given_cells(exercise: str, root: Path = runtime.ROOT) -> list[str]:
    """The code cells of ``exercise``'s notebook as the course hands it out, less the learner's answers and the
    checks: read from the grader's own copy (a release's ``check-cells/``), else the handed-out notebook
    (``exercises/``: the kit and a student folder), else the solution."""
    import nbformat

    from fastpath_lib.grading.engine import notebook

    found = [*sorted((root / notebook.CHECK_CELLS).glob(f"{exercise}_*.ipynb")),
             *sorted((root / "exercises").glob(f"{exercise}_*.ipynb")), notebook.solution_for(exercise, root)]
    path = next((f for f in found if f is not None), None)
    if path is None:
        return []
    nb = nbformat.read(path, as_version=4)
    return [c.source for c in nb.cells if c.get("cell_type") == "code" and c not in notebook.check_cells(nb)
            and not any(marker in c.source for marker in ANSWER_MARKERS)]


@functools.cache
def given_names(exercise: str, root: Path = runtime.ROOT) -> tuple[frozenset[str], frozenset[str]]:
    """``(names of the kit, names of the façade)`` the given cells of ``exercise`` import or read: ``import a.b``,
    ``from a import b`` (``a.b``), ``fastpath_lib.x`` read as an attribute; and ``ex.x`` for the façade imported as
    ``ex``."""
    from fastpath_lib.grading.engine import sources

    kit, facade = set(), set()
    for text in given_cells(exercise, root):
        tree = sources.parse(text)
        if tree is None:
            continue
        aliases = {PACKAGE: PACKAGE}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] == PACKAGE:
                        kit.add(a.name)
                        aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else PACKAGE
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == PACKAGE:
                kit.add(node.module)  # the module runs, then each name is read from it
                for a in node.names:
                    kit.add(f"{node.module}.{a.name}")
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
                full = f"{aliases[node.value.id]}.{node.attr}"
                (facade.add(node.attr) if aliases[node.value.id] == FACADE else kit.add(full))
    return frozenset(kit), frozenset(facade)


@functools.cache
def _imports(module: str, root: Path) -> frozenset[str]:
    """The modules of the kit ``module``'s source imports (anywhere in it: a function's import runs too) and the
    non-Python files beside it are found by :func:`_data_files`)."""
    path = _module_file(module, root)
    if path is None:
        return set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            out.add(base)
            out |= {f"{base}.{a.name}" for a in node.names}
    return frozenset(m for m in out if m.split(".")[0] == PACKAGE and _module_file(m, root) is not None)


def closure(seeds, root: Path = runtime.ROOT) -> tuple[str, ...]:
    """The modules of the kit that importing ``seeds`` can import: each seed, its packages' ``__init__`` and what
    their sources import, transitively. The package's own ``__init__`` and the façade are generated for the kernel
    (:func:`package_source`, :func:`facade_source`) and are not followed."""
    seen, todo = set(), [m for m in seeds if m]
    while todo:
        module = todo.pop()
        if module in seen or _module_file(module, root) is None:
            continue
        seen.add(module)
        parts = module.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]
        if module not in (PACKAGE, FACADE):
            todo += sorted(_imports(module, root))
    return tuple(sorted(seen))


def handouts(exercise: str | None, root: Path = runtime.ROOT) -> tuple[str, ...]:
    """The modules of the kit that the kernel of ``exercise`` is handed, before their imports: what the given cells
    import or read (:func:`given_names`), what the exercise's text offers beyond them
    (:data:`~fastpath_lib.grading.registry.HANDOUTS`), and the modules that define the façade's materials (never a
    check; :data:`GIVEN_MODULE` only where the given cells read one of its names), and what the grader's agent
    (:data:`AGENT`) imports of the kit."""
    from fastpath_lib import exercises
    from fastpath_lib.grading.registry import HANDOUTS

    kit, read = given_names(exercise, root) if exercise else (frozenset(), frozenset())
    seeds = {_resolve(name, root) for name in kit | frozenset(HANDOUTS.get(exercise or "", ()))}
    seeds |= _imports(AGENT, root)  # the grader's agent runs in the kernel: what it imports of the kit (CaseSpec)
    for name in exercises.__all__:
        value = getattr(exercises, name)
        if name.startswith("check_") or literal(value) is not None:
            continue
        module = _resolve(f"{FACADE}.{name}", root) or getattr(value, "__module__", None)
        if module == GIVEN_MODULE and name not in read:
            continue
        seeds.add(module)
    return tuple(sorted(m for m in seeds if m and m != FACADE and _module_file(m, root) is not None))


@functools.cache
def kernel_library(exercise: str | None, root: Path = runtime.ROOT, extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The modules of the kit staged for the kernel of ``exercise`` (:func:`stage`): the import :func:`closure` of
    its :func:`handouts` and of ``extra`` (the grader's runner of a learner's Triton source, for its children)."""
    return closure((*handouts(exercise, root), *extra), root)


def kernel_modules(exercise: str | None, root: Path = runtime.ROOT) -> tuple[str, ...]:
    """The files of ``fastpath_lib/grading/`` the kernel of ``exercise`` sees (its floor modules handed out)."""
    prefix = f"{PACKAGE}.grading."
    return tuple(sorted(f"{m.removeprefix(prefix)}.py" if m != f"{PACKAGE}.grading" else "__init__.py"
                        for m in kernel_library(exercise, root) if m == f"{PACKAGE}.grading"
                        or (m.startswith(prefix) and "." not in m.removeprefix(prefix))))


def literal(value) -> str | None:
    """``repr(value)`` when it reads back as an equal plain constant, else ``None``."""
    if callable(value) or isinstance(value, type):
        return None
    try:
        text = repr(value)
        return text if ast.literal_eval(text) == value else None
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _stand_in(name: str, why: str, value) -> list[str]:
    lines = [f"_HIDDEN[{name!r}] = {why!r}"]
    if callable(value):
        lines.append(f"def {name}(*args, **kwargs):\n    raise RuntimeError(_HIDDEN[{name!r}])")
    return lines


_GETATTR = ("def __getattr__(name):\n    if name in _HIDDEN:\n        raise RuntimeError(_HIDDEN[name])\n"
            "    raise AttributeError(f'module {__name__} has no attribute {name!r}')")


def facade_source(exercise: str | None, root: Path = runtime.ROOT) -> str:
    """The source of the ``fastpath_lib.exercises`` the kernel of ``exercise`` imports in the sandbox.

    Generated from :mod:`fastpath_lib.exercises`'s ``__all__``: a plain constant is written out, a name that a module
    staged for the kernel (:func:`kernel_library`) defines is imported from it, and anything else (the checks, another
    exercise's answer) is a stand-in that raises ``RuntimeError`` saying why, when called or read.
    """
    from fastpath_lib import exercises

    staged = set(kernel_library(exercise, root))
    lines = [f'"""fastpath_lib.exercises as the kernel of {exercise} sees it in the grader\'s sandbox: generated by '
             'fastpath_lib.grading.engine.sandbox.facade_source; the grader runs the checks itself."""',
             f"__all__ = {list(exercises.__all__)!r}", "_HIDDEN = {}"]
    for name in exercises.__all__:
        value = getattr(exercises, name)
        literal_text = literal(value)
        origin = None if literal_text is not None else _resolve(f"{FACADE}.{name}", root)
        if literal_text is not None:
            lines.append(f"{name} = {literal_text}")
        elif origin in staged:
            lines.append(f"from {origin} import {name}")
        else:
            why = (f"the grader runs {name} itself: in `python -m fastpath_lib grade` the check cells run in the "
                   "grader's process, not in this kernel" if name.startswith("check_") else
                   f"{name} is not available to {exercise}'s code in the grader's sandbox (it belongs to the "
                   f"grader: {getattr(value, '__module__', 'fastpath_lib.grading')})")
            lines += _stand_in(name, why, value)
    return "\n".join([*lines, _GETATTR]) + "\n"


def package_source(exercise: str | None, root: Path = runtime.ROOT) -> str:
    """The source of the ``fastpath_lib/__init__.py`` the kernel of ``exercise`` imports in the sandbox: each public
    name of the package imported from its module where that module is staged (:func:`kernel_library`), a stand-in
    that raises ``RuntimeError`` elsewhere (``fastpath_lib.rms_norm`` in exercise 01: the kit's operator is not
    handed out there)."""
    import fastpath_lib

    staged = set(kernel_library(exercise, root))
    lines = [f'"""fastpath_lib as the kernel of {exercise} sees it in the grader\'s sandbox: only what the exercise '
             'hands out (generated by fastpath_lib.grading.engine.sandbox.package_source)."""',
             f"__version__ = {fastpath_lib.__version__!r}", f"__all__ = {list(fastpath_lib.__all__)!r}",
             "_HIDDEN = {}"]
    for name in fastpath_lib.__all__:
        value = getattr(fastpath_lib, name)
        origin = _resolve(f"{PACKAGE}.{name}", root)
        if origin in staged:
            lines.append(f"from {origin} import {name}")
        else:
            lines += _stand_in(name, f"fastpath_lib.{name} is not handed out to {exercise} in the grader's sandbox",
                               value)
    return "\n".join([*lines, _GETATTR]) + "\n"


@functools.cache
def _data_files(module: str, root: Path) -> tuple[Path, ...]:
    """The non-Python files beside ``module``'s source that it names in a string (``"capture.json"``)."""
    path = _module_file(module, root)
    if path is None:
        return ()
    names = {n.value for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(n, ast.Constant) and isinstance(n.value, str) and re.fullmatch(r"[\w.-]+\.\w+", n.value)}
    return tuple(sorted(path.parent / n for n in names if not n.endswith(".py") and (path.parent / n).is_file()))


def stage(exercise: str | None, dest: Path, root: Path = runtime.ROOT, extra: tuple[str, ...] = ()) -> Path:
    """Write the kit as the kernel of ``exercise`` sees it into ``dest`` (a folder of the grader's): the sources of
    :func:`kernel_library` and the data files they name, the package's ``__init__`` (:func:`package_source`) and the
    façade (:func:`facade_source`) generated; nothing else of the kit, no ``__pycache__``. Returns ``dest``, the
    folder the kernel's ``PYTHONPATH`` names."""
    for module in kernel_library(exercise, root, extra):
        if module in (PACKAGE, FACADE):
            continue
        src = _module_file(module, root)
        for path in (src, *_data_files(module, root)):
            target = dest / path.relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
    (dest / PACKAGE).mkdir(parents=True, exist_ok=True)
    (dest / PACKAGE / "__init__.py").write_text(package_source(exercise, root), encoding="utf-8")
    (dest / PACKAGE / "exercises.py").write_text(facade_source(exercise, root), encoding="utf-8")
    return dest


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
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
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
    is staged into ``files`` (:func:`stage`, a folder of the grader's bound read only) and named by ``PYTHONPATH``;
    ``grading``: modules of the grading package the process needs beyond the exercise's (the grader's runner of a
    learner's Triton source, :mod:`~fastpath_lib.grading.engine.kernel_run`, which holds no answer)."""
    library = stage(exercise, Path(files) / "kit", root, grading)
    # in its PID namespace the kernel's parent is bwrap's init (pid 1), which ipykernel's parent poller takes for "the
    # grader has exited": told its parent is pid 1 it polls nothing (and prints nothing), and --die-with-parent ends
    # it with the grader
    args = [shutil.which("bwrap") or "bwrap", *FLAGS, "--setenv", "JPY_PARENT_PID", "1",
            "--setenv", "PYTHONPATH", str(library), *BASE, *system_binds()]
    usr = [Path("/usr")] if Path("/usr").is_dir() else []
    folders = [p for p in sorted(set(interpreter_paths()) | set(_site_folders(library)),
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
    args += ["--ro-bind", str(library), str(library)]
    return [*args, "--remount-ro", "/", "--chdir", workdir]


def for_children(exercise: str | None, files: str):
    """``(folder, env) -> (prefix, env)`` for the grader's children that run the learner's Triton source
    (:func:`fastpath_lib.grading.engine.kernel_run.sandboxed`): the kernel's view of ``exercise``, with
    ``engine/kernel_run.py`` staged, ``folder`` writable; their staged kit goes in folders under ``files``."""
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
