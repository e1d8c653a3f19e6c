"""The kit as one exercise hands it out: what the grader stages for the learner's kernel in its sandbox.

The learner's kernel imports no checkout of the kit. The grader writes a copy of the modules the exercise hands out
into a folder of its own (:func:`stage`) and the sandbox (:mod:`fastpath_lib.grading.engine.sandbox`) binds it where
the grader's own package lies:

* what the given cells of the exercise's notebook (as the course hands it out: a release's ``check-cells/``, else
  ``exercises/``) import or read (:func:`given_names`): ``import a.b``, ``from a import b``, ``fastpath_lib.x``,
  and ``ex.x`` for the façade;
* what the exercise's text offers beyond them (:data:`~fastpath_lib.grading.registry.HANDOUTS`);
* the modules that define the façade's materials (never a check; :data:`GIVEN_MODULE`, another exercise's answer,
  only where the given cells read one of its names), and what the grader's agent, which runs in the kernel, imports;
* and every module of the kit those import, found in their sources (:func:`closure`), with the data files they name.

The package's ``__init__`` and the façade ``fastpath_lib/exercises.py`` are generated from their public names
(:func:`package_source`, :func:`facade_source`): a plain constant is written out, a name whose module is staged is
imported from it, anything else (the checks, the kit's operator in exercise 01) is a stand-in that raises; a public
name of the package comes from a stand-in module at its module's path (:func:`stand_in_modules`). So no check, rule,
answer key or graded implementation is there for the kernel to import, read or compile.

A module is staged whole: a name an exercise hands out lives in a module that defines nothing the exercise's checks
forbid (:func:`fastpath_lib.grading.registry.forbidden`; ``tests/grading/test_grading_handout_forbidden.py`` holds
every exercise to it), so exercise 13 imports ``outcome`` from :mod:`fastpath_lib.bench.outcome`, not from
:mod:`fastpath_lib.bench.analysis` beside ``classify``.

>>> "fastpath_lib.rmsnorm.limits" in kernel_library("ex01")  # exercise 01 asks for default_eps: not handed out
False
>>> "fastpath_lib.boundary" in kernel_library("ex04"), "fastpath_lib.rmsnorm.predicate" in kernel_library("ex04")
(False, True)
>>> "fastpath_lib.bench.sweep" in kernel_library("ex10"), "fastpath_lib.bench.outcome" in kernel_library("ex10")
(False, True)
"""

from __future__ import annotations

import ast
import functools
import re
import shutil
import sys
import types
from pathlib import Path

from fastpath_lib import runtime
from fastpath_lib.runtime import parse_source

__all__ = ["PACKAGE", "FACADE", "ANSWER_MARKERS", "GIVEN_MODULE", "AGENT", "given_cells", "given_names", "closure",
           "handouts", "kernel_library", "kernel_modules", "literal", "facade_source", "package_source",
           "stand_in_modules", "stage"]

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
    for node in parse_source(path.read_text(encoding="utf-8")).body:
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
    package = dict(_package_names(root)[0])
    if len(parts) == 2 and parts[0] == PACKAGE and parts[1] in package:
        return package[parts[1]]
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
    for node in ast.walk(parse_source(path.read_text(encoding="utf-8"))):
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


def _stand_in(name: str, why: str, call: bool) -> list[str]:
    """Lines that make ``name`` a stand-in: reading it (through the module's ``__getattr__``) or, when ``call``,
    calling it raises ``RuntimeError(why)``."""
    lines = [f"_HIDDEN[{name!r}] = {why!r}"]
    if call:
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
            lines += _stand_in(name, why, callable(value))
    return "\n".join([*lines, _GETATTR]) + "\n"


@functools.cache
def _package_names(root: Path = runtime.ROOT) -> tuple[tuple[tuple[str, str], ...], str]:
    """``((public name, its module), ...)`` and ``__version__`` of the package, read from its ``__init__.py``'s
    source (the grader never needs to import the package's operator to say what it holds)."""
    tree = parse_source(_module_file(PACKAGE, root).read_text(encoding="utf-8"))
    where = {a.asname or a.name: node.module for node in tree.body if isinstance(node, ast.ImportFrom)
             for a in node.names}
    values = {t.id: node.value for node in tree.body if isinstance(node, ast.Assign) for t in node.targets
              if isinstance(t, ast.Name)}
    names = ast.literal_eval(values["__all__"])
    return tuple((n, where.get(n, "")) for n in names), ast.literal_eval(values["__version__"])


def package_source(exercise: str | None, root: Path = runtime.ROOT) -> str:
    """The source of the ``fastpath_lib/__init__.py`` the kernel of ``exercise`` imports in the sandbox: each public
    name of the package imported from its module, which is the kit's own where it is staged (:func:`kernel_library`)
    and a stand-in module elsewhere (:func:`stand_in_modules`: ``fastpath_lib.rms_norm`` in exercise 01, whose
    kernel is not handed the kit's operator)."""
    names, version = _package_names(root)
    lines = [f'"""fastpath_lib as the kernel of {exercise} sees it in the grader\'s sandbox: only what the exercise '
             'hands out (generated by fastpath_lib.grading.engine.handout.package_source)."""',
             f"__version__ = {version!r}", f"__all__ = {[n for n, _ in names]!r}"]
    lines += [f"from {origin} import {name}" for name, origin in names]
    return "\n".join(lines) + "\n"


def stand_in_modules(exercise: str | None, root: Path = runtime.ROOT) -> dict[str, str]:
    """module -> the source of a stand-in for it, for each module that defines a public name of the package and is not
    staged for ``exercise``: at the module's own path, each such name a function of the same name that raises
    ``RuntimeError`` (so a check cell's ``fastpath_lib.rms_norm`` is still the kit's op by name and file, while the
    grader runs its own copy), anything else read from it an error too."""
    staged = set(kernel_library(exercise, root))
    out: dict[str, list[str]] = {}
    for name, origin in _package_names(root)[0]:
        if origin and origin not in staged:
            why = f"fastpath_lib.{name} is not handed out to {exercise} in the grader's sandbox"
            out.setdefault(origin, [f'"""{origin} is not handed out to {exercise} in the grader\'s sandbox: '
                                    'a stand-in (fastpath_lib.grading.engine.handout.stand_in_modules)."""',
                                    "_HIDDEN = {}"])
            out[origin] += _stand_in(name, why, True)  # every public name of the package is a function or a class
    return {m: "\n".join([*lines, _GETATTR]) + "\n" for m, lines in out.items()}


@functools.cache
def _data_files(module: str, root: Path) -> tuple[Path, ...]:
    """The non-Python files beside ``module``'s source that it names in a string (``"capture.json"``)."""
    path = _module_file(module, root)
    if path is None:
        return ()
    names = {n.value for n in ast.walk(parse_source(path.read_text(encoding="utf-8")))
             if isinstance(n, ast.Constant) and isinstance(n.value, str) and re.fullmatch(r"[\w.-]+\.\w+", n.value)}
    return tuple(sorted(path.parent / n for n in names if not n.endswith(".py") and (path.parent / n).is_file()))


def stage(exercise: str | None, dest: Path, root: Path = runtime.ROOT, extra: tuple[str, ...] = ()) -> Path:
    """Write the kit as the kernel of ``exercise`` sees it into ``dest`` (a folder of the grader's): the sources of
    :func:`kernel_library` and the data files they name, the package's ``__init__`` (:func:`package_source`), the
    stand-ins for the modules of its names that are not handed out (:func:`stand_in_modules`) and the façade
    (:func:`facade_source`) generated; nothing else of the kit, no ``__pycache__``. Returns ``dest``, which holds the
    package folder the sandbox binds where the grader's own package lies."""
    for module in kernel_library(exercise, root, extra):
        if module in (PACKAGE, FACADE):
            continue
        src = _module_file(module, root)
        for path in (src, *_data_files(module, root)):
            target = dest / path.relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
    for module, text in stand_in_modules(exercise, root).items():
        target = dest.joinpath(*module.split(".")).with_suffix(".py")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    (dest / PACKAGE).mkdir(parents=True, exist_ok=True)
    (dest / PACKAGE / "__init__.py").write_text(package_source(exercise, root), encoding="utf-8")
    (dest / PACKAGE / "exercises.py").write_text(facade_source(exercise, root), encoding="utf-8")
    return dest
