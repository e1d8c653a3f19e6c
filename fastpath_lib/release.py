"""``python -m fastpath_lib release OUT``: a course release, as nbgrader and otter write one.

Two artefacts from one checkout (``otter assign`` writes the same pair, nbgrader's ``generate_assignment`` the first):

* ``OUT/student/``: what a learner is handed. The lessons (``notebooks/``), the exercises (``exercises/``, each with
  its FILL ME IN cells and check cells), the library, and what runs them (``pyproject.toml``, ``constraints.txt``,
  ``environment.yml``, ``kit``, ``data/`` with its notice, ``upstream/``, ``docs/``, JupyterLab's settings,
  ``check-cells/`` as the autograder has it, the README under a preface that says what the release leaves out). No
  ``solutions/``, no ``tests/``, and none of the files of :data:`GRADER_ONLY`: the seeded faults, broken ops, answer
  keys and scenario keys a learner could grade against offline. Their checks become stand-ins (in the student's
  ``fastpath_lib/grading/held.py``, imported by its ``exercises.py``) that say the course's autograder runs them;
  every other check runs in the check cell as advice, and the student's grader grades its parts as the autograder
  does. The README and the exercises name nothing the folder lacks (:func:`without_absent`). A kept module that
  imports a plain constant from a grader-only file (the registry takes exercise 04's category names from
  ``mutants.py``) gets a stub of that file holding only those constants.
* ``OUT/autograder/``, ``OUT/autograder.zip`` and ``OUT/gradescope/exNN.zip`` (the same, pinned to one exercise by
  its ``assignment.txt``): the grader, for the instructor's machine only. The whole library,
  the exercise notebooks in ``check-cells/``, with the check cells released (the grader restores each from them, so a
  submission's edited check cell changes nothing and no ``solutions/`` is needed:
  :func:`fastpath_lib.grading.engine.notebook.original_for`), Gradescope's ``setup.sh`` and ``run_autograder``, and
  ``grade`` for plain CI; :mod:`fastpath_lib.grading.engine.autograde` is the entry for Gradescope, PrairieLearn-style
  runners and nbgrader's ``submitted/`` layout. The zip holds the folder's files at its root, as Gradescope wants.

The release checks itself before it returns: no distinctive line of a solution (the ``# BEGIN SOLUTION`` regions of
``solutions/``) appears anywhere in the student folder (:func:`leaked_solution_lines`), and no module the students
get imports more than plain constants from a grader-only file.

>>> "grading/rules/ex13_scenarios.py" in GRADER_ONLY and "grading/materials.py" not in GRADER_ONLY
True
"""

from __future__ import annotations

import argparse
import ast
import re
import shutil
import sys
import textwrap
import zipfile
from pathlib import Path

from fastpath_lib import runtime
from fastpath_lib.release_text import offered_commands, tell_what_ships, without_absent
from fastpath_lib.runtime import parse_source

__all__ = ["GRADER_ONLY", "STUDENT_FILES", "CHECK_CELLS", "ReleaseError", "release", "student", "autograder",
           "solution_lines", "leaked_solution_lines", "main"]

#: File of ``fastpath_lib/`` -> what it holds that only the autograder may: data a learner could grade against
#: offline, or a check built on such data. Every other file of the library ships to students.
GRADER_ONLY: dict[str, str] = {
    "grading/rules/mutants.py": "exercise 04's seeded faults",
    "grading/rules/mutant_kernels.py": "exercise 04's faulty kernels",
    "grading/checks/ex04_boundary.py": "exercise 04's check, which runs the cases against the seeded faults",
    "grading/checks/ex08_evidence.py":
        "exercise 08's evidence check, which computes the expected plot the exercise asks for",
    "grading/checks/ex09_contract.py": "exercise 09's broken ops and its check",
    "grading/checks/ex10_threshold.py":
        "exercise 10's check, which computes the expected thresholds by the exercise's rule",
    "grading/checks/ex11_commits.py": "exercise 11's answer key (each hunk's kind and dependencies) and its check",
    "grading/rules/fused_mutants.py": "exercise 12's broken in-place ops",
    "grading/checks/ex12_inplace.py": "exercise 12's checks, which run the tests against the broken ops",
    "grading/rules/ex13_scenarios.py": "exercise 13's scenario keys (what each drawn scenario expects)",
    "grading/rules/ex13_cost.py": "exercise 13's part 5 key (the expected maintenance cost and owner of a scenario)",
    "grading/checks/ex13_review.py": "exercise 13's check, which grades against the scenario keys",
    "release.py": "the release tool itself, which reads solutions/ and every grading file",
}

#: A held check whose stand-in in the student release is an advisory check that ships: check -> (module, function).
#: Exercise 04's advice judges the cases against the predicate and the exercise's properties, never the seeded faults.
ADVISORY: dict[str, tuple[str, str]] = {
    "check_boundary_cases": ("fastpath_lib.grading.checks.ex04_advice", "advise_boundary_cases"),
}

#: What a learner is handed besides the library (paths relative to the checkout's root; folders are copied whole).
STUDENT_FILES = ("notebooks", "exercises", "data", "upstream", "docs", "pyproject.toml", "constraints.txt",
                 "environment.yml", "kit", ".jupyter", ".gitignore")
#: Gradescope's ``setup.sh`` and ``run_autograder``, ``grade`` for CI and the autograder's README.
_SCRIPTS = "tools/autograder"
#: What a release is not made without (the student files above, the library, the autograder's scripts).
_REQUIRED = ("notebooks", "exercises", "data", "pyproject.toml", "constraints.txt", "kit", "README.md", "fastpath_lib",
             _SCRIPTS)
#: The autograder's copy of the exercise notebooks, whose check cells the grader restores.
CHECK_CELLS = "check-cells"
#: What the autograder holds besides the library and the check cells (exercise 12's rule compares a learner's tests
#: with the kit's own, in ``tests/``).
_AUTOGRADER_FILES = ("pyproject.toml", "constraints.txt", "kit", "tests")



def _modules(root: Path) -> tuple[str, ...]:
    """The top-level modules ``pyproject.toml`` installs beside the package (``py-modules``): without them the
    release's ``pip install -e .`` fails."""
    import tomllib

    setup = tomllib.loads((root / "pyproject.toml").read_text("utf-8")).get("tool", {}).get("setuptools", {})
    return tuple(f"{m}.py" for m in setup.get("py-modules", ()))


_FACADE = "exercises.py"
_BEGIN = re.compile(r"^\s*# BEGIN SOLUTION\s*$")
_END = re.compile(r"^\s*# END SOLUTION\s*$")
#: A solution line shorter than this (stripped) is too common to call distinctive (``return out``, ``x = x.float()``).
_DISTINCT = 24


class ReleaseError(RuntimeError):
    """The release cannot be written as asked (the message says why and what to do)."""


def _ignore(_dir, names):
    return [n for n in names if n in ("__pycache__", ".ipynb_checkpoints") or n.endswith(".pyc")]


def _copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        shutil.copytree(src, dst, ignore=_ignore)
    else:
        shutil.copy2(src, dst)


# --- the student library ------------------------------------------------------------------------------------------


def _module_file(lib: Path, module: str) -> str | None:
    """``fastpath_lib.a.b`` -> ``a/b.py`` (or ``a/b/__init__.py``), relative to ``lib``; ``None`` if not the kit's."""
    parts = module.split(".")
    if parts[0] != "fastpath_lib":
        return None
    rel = "/".join(parts[1:])
    if not rel:
        return "__init__.py"
    if (lib / f"{rel}.py").exists():
        return f"{rel}.py"
    if (lib / rel / "__init__.py").exists():
        return f"{rel}/__init__.py"
    return None


def _kit_imports(lib: Path, source: str) -> list[tuple[str, str | None]]:
    """``(file imported, name taken from it or None for the whole module)`` for each import of the kit in
    ``source`` (module level and inside functions alike)."""
    out = []
    for node in ast.walk(parse_source(source)):
        if isinstance(node, ast.Import):
            out += [(f, None) for a in node.names if (f := _module_file(lib, a.name))]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            base = _module_file(lib, node.module)
            for a in node.names:
                sub = _module_file(lib, f"{node.module}.{a.name}")
                if sub is not None:
                    out.append((sub, None))
                elif base is not None:
                    out.append((base, a.name))
    return out


def _stub(rel: str, names: set[str]) -> str:
    """A grader-only file's stand-in: only the plain constants kept modules import from it."""
    import importlib

    from fastpath_lib.grading.engine import sandbox

    module = importlib.import_module("fastpath_lib." + rel[:-3].replace("/", "."))
    lines = [f'"""Held by the course\'s autograder: {GRADER_ONLY[rel]}.', "",
             'This student release keeps only the constants other modules import (``python -m fastpath_lib release``).',
             '"""', ""]
    for name in sorted(names):
        text = sandbox.literal(getattr(module, name, None)) if hasattr(module, name) else None
        if text is None:
            raise ReleaseError(f"fastpath_lib/{rel} is held by the autograder, but a module the students get imports "
                               f"{name} from it, which is not a plain constant: move {name} to a module students may "
                               f"read, or hold the importing module back too (GRADER_ONLY in fastpath_lib/release.py)")
        lines.append(f"{name} = {text}")
    return "\n".join(lines) + "\n"


#: The module of stand-ins for the checks a student release leaves out (:mod:`fastpath_lib.grading.held`).
HELD_MODULE = "grading/held.py"


def _facade(lib: Path, source: str) -> tuple[str, str | None]:
    """The student's ``exercises.py`` and the lines of its :data:`HELD_MODULE` (``None``: nothing held). Each check
    from a grader-only module comes instead from a stand-in there, in a module of its own as the checks are: the
    grader's sandbox writes the kernel's façade from each name's module, which must not be the façade itself."""
    from fastpath_lib.grading.registry import TITLES

    tree = parse_source(source)
    lines = source.splitlines()
    held_module = "fastpath_lib." + HELD_MODULE[:-3].replace("/", ".")
    swaps: list[tuple[int, int, str]] = []
    standins: list[str] = []
    for node in tree.body:
        if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module):
            continue
        rel = _module_file(lib, node.module)
        if rel not in GRADER_ONLY:
            continue
        ex = m.group(1) if (m := re.match(r"grading/checks/(ex\d\d)", rel)) else ""
        standins += [f"from {ADVISORY[a.name][0]} import {ADVISORY[a.name][1]} as {a.name}" if a.name in ADVISORY
                     else f"{a.name} = held_by_autograder({a.name!r}, {ex!r}, {TITLES.get(ex, '')!r}, "
                     f"{GRADER_ONLY[rel]!r})" for a in node.names]
        names = ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in node.names)
        swaps.append((node.lineno - 1, node.end_lineno, f"from {held_module} import {names}"))
    if not swaps:
        return source, None
    for start, end, text in sorted(swaps, reverse=True):
        lines[start:end] = [text]
    return "\n".join(lines) + "\n", "\n".join(standins) + "\n"


def _student_library(root: Path, dst: Path) -> list[str]:
    """Copy ``fastpath_lib/`` into ``dst`` less :data:`GRADER_ONLY`; returns the files written as stubs."""
    lib = root / "fastpath_lib"
    missing = [rel for rel in GRADER_ONLY if not (lib / rel).exists()]
    if missing:
        raise ReleaseError(f"GRADER_ONLY names files the library no longer has: {', '.join(missing)} (update "
                           f"fastpath_lib/release.py to the library's layout)")
    kept = sorted(p.relative_to(lib).as_posix() for p in lib.rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts and not p.name.endswith(".pyc"))
    kept = [rel for rel in kept if rel not in GRADER_ONLY]
    wanted: dict[str, set[str]] = {}
    held = None
    for rel in kept:
        target = dst / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if not rel.endswith(".py"):
            shutil.copy2(lib / rel, target)
            continue
        source = (lib / rel).read_text(encoding="utf-8")
        if rel == _FACADE:
            source, held = _facade(lib, source)
        for imported, name in _kit_imports(lib, source):
            if imported in GRADER_ONLY:
                if name is None:
                    raise ReleaseError(f"fastpath_lib/{rel} imports fastpath_lib/{imported}, which is held by the "
                                       f"autograder ({GRADER_ONLY[imported]}): hold {rel} back too, or import only "
                                       f"plain constants from it (GRADER_ONLY in fastpath_lib/release.py)")
                wanted.setdefault(imported, set()).add(name)
        target.write_text(source, encoding="utf-8")
        shutil.copymode(lib / rel, target)
    for rel, names in wanted.items():
        (dst / rel).write_text(_stub(rel, names), encoding="utf-8")
    if held is not None:
        (dst / HELD_MODULE).write_text((lib / HELD_MODULE).read_text("utf-8") + "\n\n" + held, encoding="utf-8")
    return sorted(wanted)


_PREFACE = """\
# Course release: your copy of Fastpath Kit

This folder is a course release made by `python -m fastpath_lib release`. It holds the lessons (`notebooks/`), the
exercises (`exercises/`) and the library; it has no {absent}. Each check cell gives you advisory feedback as you
work; your grade comes from your instructor's autograder, which restores the check cells (as `./kit grade` does here,
from `check-cells/`) and runs the checks on inputs it draws at grading time. These run in the autograder only, as
they grade against faults or answer keys a release cannot show you: {held} ({advisory} gives advice in its cell, no
points); `./kit grade` grades the rest.

Set up and open JupyterLab with `./kit lab`; `./kit help` lists what this copy runs. The kit's README follows; where
the lessons or the docs mention {absent}, those stay with the full kit ([docs/course-release.md](docs/course-release.md)
says what a release holds).

---

"""

def student(root: Path, out: Path) -> list[str]:
    """Write the student folder ``out`` from the checkout ``root``; returns the stubbed grader-only files."""
    from fastpath_lib.grading.registry import CHECKS

    for rel in _REQUIRED:
        if not (root / rel).exists():
            raise ReleaseError(f"the checkout at {root} has no {rel}: run the release from a complete checkout")
    out.mkdir(parents=True)
    for rel in STUDENT_FILES + _modules(root):
        if (root / rel).exists():
            _copy(root / rel, out / rel)
    stubs = _student_library(root, out / "fastpath_lib")
    held_checks = {name: name in ADVISORY for name, mod in CHECKS.items()
                   if f"grading/{mod.replace('.', '/')}.py" in GRADER_ONLY}
    held = sorted(f"`ex.{name}`" for name in held_checks)
    absent = sorted(tell_what_ships(out, root, held_checks))
    # the student's grader restores the check cells from the exercises as released, as the autograder does
    _check_cells(out / "exercises", out)
    readme = without_absent((root / "README.md").read_text("utf-8"), set(absent), offered_commands(out / "kit"))
    preface = _PREFACE.format(held=", ".join(held), absent=", ".join(f"`{a}/`" for a in absent),
                              advisory=" and ".join(f"`ex.{n}`" for n in sorted(ADVISORY)))
    preface = "\n\n".join(p if p.startswith(("#", "---")) else textwrap.fill(p, 118, break_on_hyphens=False)
                           for p in preface.split("\n\n"))
    (out / "README.md").write_text(preface + readme, encoding="utf-8")
    return stubs


# --- the autograder -------------------------------------------------------------------------------------------------


def autograder(root: Path, out: Path) -> Path:
    """Write the autograder folder ``out``, its zip beside it (``<out>.zip``) and one zip per exercise in
    ``gradescope/`` beside it (``exNN.zip``, whose ``assignment.txt`` pins the exercise); returns the first zip's
    path."""
    out.mkdir(parents=True)
    _copy(root / "fastpath_lib", out / "fastpath_lib")
    for rel in _AUTOGRADER_FILES + _modules(root):
        if (root / rel).exists():
            _copy(root / rel, out / rel)
    cells = _check_cells(root / "exercises", out)
    for path in sorted((root / _SCRIPTS).iterdir()):  # setup.sh, run_autograder, grade, README.md (modes kept)
        shutil.copy2(path, out / path.name)
    archive = out.with_suffix(".zip")
    _zip(out, archive)
    per = out.parent / "gradescope"
    per.mkdir()
    for nb in sorted(cells.glob("ex[0-9][0-9]_*.ipynb")):
        _zip(out, per / f"{nb.name[:4]}.zip", {"assignment.txt": nb.name[:4] + "\n"})
    return archive


def _check_cells(exercises: Path, out: Path) -> Path:
    """``out/check-cells/``: the exercises of the folder ``exercises``, whose check cells a grader restores
    (``NB.original_for``)."""
    cells = out / CHECK_CELLS
    cells.mkdir()
    for nb in sorted(exercises.glob("ex[0-9][0-9]_*.ipynb")):
        shutil.copy2(nb, cells / nb.name)
    return cells


def _zip(folder: Path, archive: Path, extra: dict[str, str] | None = None) -> None:
    """``folder``'s files at the root of ``archive`` (modes kept: Gradescope runs ``setup.sh`` and
    ``run_autograder``), and ``extra`` files (name -> text)."""
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                info = zipfile.ZipInfo.from_file(path, path.relative_to(folder).as_posix())
                info.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(info, path.read_bytes())
        for name, text in (extra or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, text)


# --- the release's own check ------------------------------------------------------------------------------------------


def solution_lines(root: Path) -> set[str]:
    """The distinctive lines of the solutions' ``# BEGIN SOLUTION`` regions: stripped, at least 24 characters, not a
    comment, and not found in what learners have whether or not they take a course (the exercises, the lessons, the
    library outside ``grading/``, and the grading files the sandbox shows a learner's kernel: the notebooks'
    materials, and exercise 06's classes given to exercise 07)."""
    lines: set[str] = set()
    for path in sorted((root / "solutions").glob("ex[0-9][0-9]_*.py")):
        inside = False
        for line in path.read_text(encoding="utf-8").splitlines():
            if _BEGIN.match(line):
                inside = True
            elif _END.match(line):
                inside = False
            elif inside and len(line.strip()) >= _DISTINCT and not line.strip().startswith("#"):
                lines.add(line.strip())
    from fastpath_lib.grading.engine import sandbox
    from fastpath_lib.grading.registry import EXERCISES

    public = [root / "exercises", root / "notebooks", root / "upstream", root / "data"]
    public += [p for p in (root / "fastpath_lib").iterdir() if p.name != "grading"]
    public += [root / "fastpath_lib" / "grading" / name for name in sorted({m for ex in EXERCISES
                                                                            for m in sandbox.kernel_modules(ex)})]
    for folder in public:
        for path in [folder] if folder.is_file() else folder.rglob("*"):
            if path.is_file() and b"\0" not in (raw := path.read_bytes()):  # every text file (a .patch included)
                text = raw.decode("utf-8", errors="replace")
                lines = {x for x in lines if x not in text and x.replace('"', '\\"') not in text}
    return lines


def leaked_solution_lines(folder: Path, lines: set[str]) -> list[tuple[str, str]]:
    """``(file, line)`` for each of ``lines`` found in a text file under ``folder``."""
    found = []
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or path.suffix in (".zip", ".pyc"):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        found += [(path.relative_to(folder).as_posix(), x) for x in sorted(lines)
                  if x in text or x.replace('"', '\\"') in text]
    return found


def release(out: str | Path, root: Path = runtime.ROOT, force: bool = False) -> dict:
    """Write ``out/student/``, ``out/autograder/``, ``out/autograder.zip`` and ``out/gradescope/exNN.zip``; returns
    what was written.

    Raises :class:`ReleaseError` when ``out`` already holds a release (unless ``force``) or another file, when the
    checkout lacks what a release is made from, or when the student folder would carry a solution's line."""
    out = Path(out).resolve()
    root = Path(root).resolve()
    inside = [rel for rel in STUDENT_FILES + ("fastpath_lib", "solutions", "tests") if (root / rel) == out
              or (root / rel) in out.parents]
    if out == root or inside:
        raise ReleaseError(f"{out} is part of the checkout: write the release to a folder of its own")
    ours = {"student", "autograder", "autograder.zip", "gradescope"}
    if out.exists() and any(out.iterdir()):
        others = sorted(p.name for p in out.iterdir() if p.name not in ours)
        if others:
            raise ReleaseError(f"{out} holds other files ({', '.join(others[:5])}): pick an empty or new folder")
        if not force:
            raise ReleaseError(f"{out} already holds a release: pass --force to replace it")
        for name in ours:
            p = out / name
            if p.is_dir():
                shutil.rmtree(p)
            elif p.exists():
                p.unlink()
    out.mkdir(parents=True, exist_ok=True)
    stubs = student(root, out / "student")
    archive = autograder(root, out / "autograder")
    lines = solution_lines(root) if (root / "solutions").is_dir() else set()
    leaks = leaked_solution_lines(out / "student", lines)
    if leaks:
        shutil.rmtree(out / "student")
        raise ReleaseError("the student folder would carry solution lines (removed it): " +
                           "; ".join(f"{f}: {x!r}" for f, x in leaks[:5]))
    return {"student": out / "student", "autograder": out / "autograder", "zip": archive,
            "per_exercise": out / "gradescope", "stubs": stubs,
            "checked_lines": len(lines)}


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m fastpath_lib release``."""
    ap = argparse.ArgumentParser(prog="python -m fastpath_lib release",
                                 description="Write a course release: OUT/student/ (lessons, exercises, the library; "
                                             "no solutions, answer keys or hidden checks) and OUT/autograder/ with "
                                             "OUT/autograder.zip (Gradescope's setup.sh and run_autograder, ./grade "
                                             "for CI). See docs/course-release.md.")
    ap.add_argument("out", help="folder to write (new or empty; with --force, one that holds an earlier release)")
    ap.add_argument("--force", action="store_true", help="replace the release already in OUT")
    try:
        args = ap.parse_args(argv)
    except SystemExit as exc:
        return 0 if exc.code == 0 else 2
    if not (runtime.ROOT / "solutions").is_dir():
        print("release: this copy has no solutions/ (a student release?): make releases from the kit's checkout",
              file=sys.stderr)
        return 2
    try:
        done = release(args.out, force=args.force)
    except ReleaseError as exc:
        print(f"release: {exc}", file=sys.stderr)
        return 2
    print(f"student folder:   {done['student']}  (hand this to learners)")
    print(f"autograder:       {done['autograder']}  (instructors only; ./grade FOLDER in CI)")
    print(f"Gradescope zip:   {done['zip']}  (one per exercise: {done['per_exercise']}/exNN.zip)")
    print(f"checked: none of {done['checked_lines']} distinctive solution lines is in the student folder")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
