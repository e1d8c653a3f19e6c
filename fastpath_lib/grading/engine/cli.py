"""``python -m fastpath_lib grade PATH... [--format table|json|gradescope] [--timeout S]``: execute and score notebooks.

Each notebook is copied into a temporary folder and executed there in a fresh ``python3`` kernel (nbclient), with
``allow_errors`` so that one failing cell does not stop later parts from being graded, and with a deadline for the
whole notebook. The graded files are only read, never written. Saved outputs never count, and neither does anything
the notebook displays.

The verdict is computed in the grader's own process; the learner's kernel only produces *answers*:

1. the grader restores the distributed check cells (the cells tagged ``grader-check`` of its own copy of the
   notebook: ``check-cells/`` in a course release's autograder, else ``solutions/``; matched by cell id;
   :mod:`fastpath_lib.grading.engine.notebook`), as nbgrader does with its read-only cells, and reads the learner's
   source (the other code cells) from the file *before* executing anything (:mod:`fastpath_lib.grading.engine.sources`);
2. it runs the learner's cells in order in the kernel; in place of each check cell it calls that check *in its own
   process* (:func:`fastpath_lib.grading.registry.check`, imported from disk by the grader), on stand-ins for the
   check cell's arguments (:mod:`fastpath_lib.grading.engine.remote`): calling one asks the kernel to call the learner's
   function on inputs the check draws now, and the answer comes back on the kernel's stdin channel, read with
   torch's restricted unpickler (``torch.load(weights_only=True)``: no class outside torch's allow-list). Data the
   learner built (cases, matrices) is copied the same way;
3. borrowed answers are judged from the learner's source as read from the file, resolved in the grader's process
   (:mod:`fastpath_lib.grading.rules.borrowed`; an import of a module the grader cannot find there, such as a kit file
   put on ``sys.path`` under another name, is refused), and from behaviour; the ops exercise 09's and exercise 12's
   tests probe run here, reaching the tests as stubs whose every call the grader answers, in an order the kernel
   cannot predict (:mod:`fastpath_lib.grading.checks.ex09_contract`, :mod:`fastpath_lib.grading.checks.ex12_inplace`);
   exercise 04's cases run against the mutants here;
4. source that replaces the kit's functions or state (:func:`fastpath_lib.grading.engine.notebook.static_evidence`),
   and what the kernel's tamper evidence records at run time (:mod:`~fastpath_lib.grading.engine.runner_evidence`),
   get the notebook reported as tampered, with no points for the affected parts.

What the verdict holds against, and what is out of scope: :data:`THREAT_MODEL` (``grade --help``). Where bubblewrap
runs, the kernel runs in a sandbox (:mod:`fastpath_lib.grading.engine.sandbox`); the report says "unisolated" elsewhere.

Every registered part of the notebook's exercise is listed; a part whose check never ran (the notebook hung, the kernel
died) is reported as failed ("check did not run"), with the notebook's first error.

``--format gradescope`` prints (``--output PATH``: writes) Gradescope's ``results.json``, validated against its
documented format (:mod:`fastpath_lib.grading.report.gradescope`); ``--json`` is ``--format json``. Exit status: 0
when every graded part passed, 1 when some did not, 2 on a usage error."""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import importlib
import importlib.util
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fastpath_lib import runtime
from fastpath_lib.grading.engine import notebook as NB
from fastpath_lib.grading.engine import absent, kernel_run, remote, sources
from fastpath_lib.grading.engine.submission import exercise_id as _exercise_id
from fastpath_lib.grading.engine.submission import handed_out_name, held_parts, one_per_exercise
from fastpath_lib.grading.engine.submission import shipped as _shipped
from fastpath_lib.grading.registry import CHECKS, EXERCISES, KIT_OPS, check
from fastpath_lib.grading.registry import absent as registry_absent
from fastpath_lib.grading.report.table import HELD, print_table

__all__ = ["main", "grade_notebook", "NotebookGrade"]

DEFAULT_TIMEOUT = 300

#: What the verdict holds against (``grade --help`` and the README's grading section say the same).
THREAT_MODEL = """\
threat model (for instructors):
  The learner has read the kit and this grader, and writes arbitrary Python in any cell. The verdict is computed
  in the grader's process, on inputs drawn at grading time; the learner's kernel only answers with what the
  learner's code returns, and holds nothing the grader keeps: no expected value, no table of which op is which,
  no verdict (exercises 09 and 12: the ops under test run in the grader, reached through stubs). The agent in the
  kernel shares it with the learner's code, so whatever it answers counts as the learner's own answer: a second
  answer to one request is refused, and answers are read with torch's restricted unpickler
  (torch.load(weights_only=True)), which constructs no class outside torch's allow-list. Held against: patched
  modules, tracers, hooks, threads, a replaced or impersonated agent, tests that fingerprint the op or count runs,
  writes into a check's inputs (a failure where the check declares its outputs), source that replaces the kit's
  functions or reads solutions/.
  In the sandbox (bubblewrap; docs/grading-sandbox.md) the kernel runs as nobody with no capability, in its own
  PID namespace and /proc, and sees no solutions/, no tests/, no .git, no network and a /tmp of its own; of the
  grading package only the notebooks' materials (no check, no answer key, no grader), a façade
  whose checks are stand-ins, and not the kit modules its exercise forbids (the kit's kernels, reference, boundary
  generator, bench modules: matrix, PR note, sweep, bytes model; those the kernel needs to import stay, e.g. the
  outcome words and rule of bench/schema.py and analysis.py, and the static rules refuse them). Where it cannot
  start, --isolation bwrap (the default with --format gradescope) grades nothing and says why, and auto grades
  without it, says why, and the report says "unisolated". Grade with the checkout's own venv (./kit grade):
  another copy of the kit on the machine (one a venv's editable install points at is masked too) would be readable.
  Out of scope: a classmate's notebook handed in as one's own, a solution copied by hand into the cells (do not
  hand out solutions/), and an answer borrowed in a way the source does not show (an exec string, a name built at
  run time, found by introspection), which is judged by its behaviour only: the source rules read the answer's own
  code to say what an answer is (a reference must not call the operator it checks), not to stop hidden calls.
"""


@dataclasses.dataclass
class PartGrade:
    exercise: str
    part: str
    points: int
    earned: int
    passed: bool
    feedback: str


@dataclasses.dataclass
class NotebookGrade:
    path: str
    exercise: str | None
    status: str  # "ok", "errors", "timeout", "unreadable", "unknown exercise", "kernel died", "tampered", DUPLICATE
    reason: str
    seconds: float
    parts: list[PartGrade]
    notes: list[str] = dataclasses.field(default_factory=list)  # e.g. check cells restored
    isolation: str = "unisolated"  # how the learner's kernel ran: sandbox.ISOLATED or sandbox.UNISOLATED

    @property
    def earned(self) -> int:
        return sum(p.earned for p in self.parts)

    @property
    def points(self) -> int:
        return sum(p.points for p in self.parts)


def _kernel_env() -> dict:
    env = runtime.child_env()
    env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    return env


@dataclasses.dataclass
class _Run:
    """What the grader gathered while executing one notebook."""

    answers: list[dict] = dataclasses.field(default_factory=list)  # one per grader-run check
    evidence: list[tuple] = dataclasses.field(default_factory=list)  # the kernel's tamper evidence: (check, what)
    status: str = "ok"
    reason: str = ""


def _arguments(args: str) -> list[str]:
    """The source of each positional argument of a check call."""
    tree = ast.parse(f"f({args})", mode="eval")
    return [ast.get_source_segment(f"f({args})", a) or "" for a in tree.body.args]


def _check(session, name: str, args: str, kwargs: list[tuple[str, str]], learner: list[str]) -> dict:
    """Run the check ``name`` (:func:`~fastpath_lib.grading.registry.check`) in this process, on what the kernel answers
    for the check cell's arguments."""
    session.check = name  # what the tamper evidence records during the check's calls is this check's
    try:
        values = [session.get(a) for a in _arguments(args)]
        named = {k: session.get(v) for k, v in kwargs}
        if not _shipped(CHECKS[name]):  # a student release: the autograder runs it (held_parts says which parts)
            return {"check": name, "results": [], "error": None}
        with sources.using(learner):
            results = check(name)(*values, **named, show=False)
        return {"check": name, "results": [r.to_dict() for r in results or []], "error": None}
    except Exception as exc:  # noqa: BLE001 - e.g. the learner never defined the function the check cell names
        text = str(exc).strip().splitlines()
        return {"check": name, "results": [], "error": f"{type(exc).__name__}: {text[0] if text else ''}"}


def _execute(nb, workdir: str, timeout: float, kernel_name: str, check_ids: set, exercise: str,
             learner: list[str], isolated: bool = False, files: str = "", tamper_evidence: bool = True) -> _Run:
    """Run every code cell, and the grader's own check in place of each check cell, with one deadline; with
    ``isolated``, the kernel in the sandbox (:mod:`fastpath_lib.grading.engine.sandbox`), its generated files in
    ``files`` (a folder of the grader's outside ``workdir``); ``tamper_evidence``: see :func:`grade_notebook`."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    lacks = absent.merge(registry_absent(exercise))  # the exercise's check modules, imported before the clock starts
    env, managers = _kernel_env(), {}
    if isolated:
        from fastpath_lib.grading.engine import sandbox

        sockets = tempfile.mkdtemp(prefix="fastpath-sockets-", dir=workdir)
        managers = {"kernel_manager_class": sandbox.manager_class(workdir, sockets, files, exercise)}
        env = sandbox.kernel_env(env)
    client = NotebookClient(nb, timeout=int(timeout), kernel_name=kernel_name, allow_errors=True, **managers,
                            interrupt_on_timeout=False, resources={"metadata": {"path": workdir}},
                            record_timing=False, shutdown_kernel="immediate")  # the answers are in: no teardown
    deadline = time.monotonic() + timeout
    run = _Run()
    try:
        with client.setup_kernel(env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), \
                kernel_run.lacking(lacks):  # not the report's output; the grader's children lack them too
            session = remote.Session(client, deadline, _kit_ops(), tamper_evidence=tamper_evidence)
            run.evidence = session.evidence  # the same list, filled until the run ends
            if lacks and (why := session.prepare(lacks)):  # without it the checks would grade what they forbid
                run.status, run.reason = "errors", why
                return run
            session.start()
            for index, cell in enumerate(nb.cells):
                if cell.get("cell_type") != "code":
                    continue
                if deadline - time.monotonic() <= 0 or session.timed_out:
                    run.status, run.reason = "timeout", f"notebook ran past its {timeout:g} s limit before cell {index}"
                    return run
                try:
                    if cell.get("id") in check_ids:
                        for name, args, kwargs in NB.calls(cell.source):
                            run.answers.append(_check(session, name, args, kwargs, learner))
                    else:
                        client.timeout = max(1, int(deadline - time.monotonic()))
                        client.execute_cell(cell, index)
                except CellTimeoutError:
                    run.status, run.reason = "timeout", f"cell {index} ran past the notebook's {timeout:g} s limit"
                    return run
                except DeadKernelError as exc:
                    run.status, run.reason = "kernel died", f"the kernel died in cell {index}: {exc}"
                    return run
                except Exception as exc:  # noqa: BLE001 - its code ran: never a reason to rerun it unsandboxed
                    run.status, run.reason = "errors", f"cell {index} broke the run: {type(exc).__name__}: {exc}"
                    return run
            if session.timed_out:
                run.status, run.reason = "timeout", f"a check ran past the notebook's {timeout:g} s limit"
    except (CellTimeoutError, DeadKernelError, remote.RemoteTimeout) as exc:  # raised while starting or cleaning up
        run.status = "kernel died" if not isinstance(exc, remote.RemoteTimeout) else "timeout"
        run.reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return run


def _kit_ops() -> dict:
    """The grader's own kit ops (:data:`~fastpath_lib.grading.registry.KIT_OPS`), which exercises 09 and 12 run as
    their correct controls (never the kernel's)."""
    return {name: getattr(importlib.import_module(where), name) for name, where in KIT_OPS.items()}


def _first_error(nb) -> str:
    for index, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            if out.get("output_type") == "error":
                return f"cell {index} raised {out.get('ename')}: {str(out.get('evalue', ''))[:200]}"
    return ""


def _held_grade(ex: str, part: str) -> PartGrade:
    return PartGrade(ex, part, 0, 0, False, f"{HELD}: this copy of the kit (a course's student release) leaves out "
                                            f"the check; submit the notebook to your course's autograder for it")


def _parts(ex: str, run: _Run, static: list[tuple[str, str]], reassigned: bool) -> tuple[list[PartGrade], list[str]]:
    found: dict[str, dict] = {}
    produced_by: dict[str, set[str]] = {}
    errors, evidence = [], list(static) + [(check or NB.ALL, what) for check, what in run.evidence]
    for ans in run.answers:
        for res in ans.get("results", []):
            if res.get("exercise") == ex:
                found[str(res.get("part"))] = res
                produced_by.setdefault(ans.get("check", ""), set()).add(str(res.get("part")))
        if ans.get("error"):
            errors.append(f"{ans.get('check')}: {ans['error']}")
    evidence = list(dict.fromkeys(evidence))
    subjects = {r.get("subject") for r in found.values() if r.get("subject")}
    parts, held = [], held_parts(ex)
    for name, pts in EXERCISES[ex]:
        res = found.get(name)
        if name in held and res is None:
            parts.append(_held_grade(ex, name))
            continue
        hits = [what for scope, what in evidence if scope == NB.ALL or name in produced_by.get(scope, ())]
        if hits:
            parts.append(PartGrade(ex, name, pts, 0, False, "tampered: " + "; ".join(hits)))
        elif res is None:
            why = "check did not run" + (f" ({run.reason})" if run.reason else "") + (
                f" ({errors[0]})" if errors else "")
            parts.append(PartGrade(ex, name, pts, 0, False, why))
        elif res.get("subject") and (len(subjects) > 1 or reassigned):
            parts.append(PartGrade(ex, name, pts, 0, False, f"OP_NAME must name one operator for every check; "
                                   f"the checks saw {sorted(subjects)}" + (" and OP_NAME is assigned more than "
                                                                           "once" if reassigned else "")))
        else:
            ok = bool(res.get("passed"))
            parts.append(PartGrade(ex, name, pts, pts if ok else 0, ok, str(res.get("feedback", ""))))
    return parts, [what for _, what in evidence]


#: The status of a notebook that ``--isolation bwrap`` refused to grade outside the sandbox.
NOT_GRADED = "not graded"
#: ``--isolation``: ``bwrap`` grades only in the sandbox (the autograder's), ``auto`` falls back saying why
#: (self-study), ``none`` never isolates.
ISOLATION = ("auto", "bwrap", "none")


def _sandbox_problem(isolation: str) -> tuple[bool, str | None]:
    """``(isolated, why not)``: whether the kernel runs in the sandbox, and why the sandbox cannot start here."""
    from fastpath_lib.grading.engine import sandbox

    why = None if isolation == "none" else sandbox.problem()
    return isolation != "none" and why is None, why


def _refused(path: Path, ex: str, why: str, notes: list[str], t0: float) -> NotebookGrade:
    from fastpath_lib.grading.engine import sandbox

    reason = sandbox.refusal(why)
    return NotebookGrade(str(path), ex, NOT_GRADED, reason, round(time.monotonic() - t0, 1), _missing(ex, reason),
                         notes, sandbox.NOT_RUN)


def grade_notebook(path: str | Path, *, timeout: float = DEFAULT_TIMEOUT, kernel_name: str = "python3",
                   isolation: str = "auto", tamper_evidence: bool = True) -> NotebookGrade:
    """Execute a copy of one notebook and grade it; never raises for a broken notebook. ``isolation``: ``auto``
    (the kernel in the sandbox where it starts, else without, and a note says why), ``bwrap`` (in the sandbox or not
    at all: the notebook is reported "not graded", saying why) or ``none``. ``tamper_evidence=False`` (tests only:
    each other defence shown to hold alone) grades without :mod:`~fastpath_lib.grading.engine.runner_evidence`."""
    import nbformat

    path = Path(path)
    t0 = time.monotonic()
    try:
        raw = path.read_bytes()
        nb = nbformat.reads(raw.decode("utf-8"), as_version=4)
    except Exception as exc:  # noqa: BLE001
        ex = _exercise_id(None, path)
        reason = f"could not read notebook: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        return NotebookGrade(str(path), ex, "unreadable", reason, 0.0, _missing(ex, reason))
    ex = _exercise_id(nb, path)
    if ex is None:
        reason = "not an exercise notebook (no metadata.fastpath.exercise and no exNN_ file name)"
        return NotebookGrade(str(path), None, "unknown exercise", reason, 0.0, [])
    if len(held_parts(ex)) == len(EXERCISES[ex]):  # nothing here can grade it: say so, run nothing
        return NotebookGrade(str(path), ex, HELD, "this copy of the kit (a course's student release) leaves out "
                             f"{ex}'s checks; submit the notebook to your course's autograder", 0.0,
                             [_held_grade(ex, part) for part, _ in EXERCISES[ex]], [], "not run")
    for cell in nb.cells:  # saved outputs must never count: only what runs now is graded
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
    notes = []
    original = NB.original_for(ex)
    if original is not None:
        check_ids, notes = NB.restore(nb, nbformat.read(original, as_version=4))
    else:
        check_ids = [c.get("id") for c in nb.cells if c.get("cell_type") == "code" and NB.calls(c.source)]
        notes.append(f"no solutions/ or {NB.CHECK_CELLS}/ here: the notebook's own check cells were graded")
    ids = set(check_ids)
    learner = [c.source for c in nb.cells if c.get("cell_type") == "code" and c.get("id") not in ids]
    static = NB.static_evidence(learner)
    reassigned = NB.assignments(learner, "OP_NAME") > 1
    isolated, why = _sandbox_problem(isolation)
    if why is not None:
        from fastpath_lib.grading.engine import sandbox

        if isolation == "bwrap":
            return _refused(path, ex, why, notes, t0)
        notes.append(sandbox.fallback_note(why))
    with tempfile.TemporaryDirectory(prefix="fastpath-grade-") as tmp, \
            tempfile.TemporaryDirectory(prefix="fastpath-sandbox-") as files:
        notes.extend(NB.copy_data_files(path.parent, Path(tmp)))
        copy = Path(tmp) / path.name
        copy.write_bytes(raw)
        try:
            from fastpath_lib.grading.engine import kernel_run, sandbox

            children = kernel_run.sandboxed(sandbox.for_children(ex, files)) if isolated else contextlib.nullcontext()
            with children:  # the grader's runs of the learner's Triton source are sandboxed like the kernel
                run = _execute(nb, tmp, timeout, kernel_name, ids, ex, learner, isolated, files, tamper_evidence)
        except Exception as exc:  # noqa: BLE001 - no such kernel, or one that did not start: no learner code has run
            run = _Run(status="errors", reason=f"could not execute: {type(exc).__name__}: {exc}")
            if isolated:  # the sandbox could not start this kernel: bwrap refuses, auto says why and goes on without
                from fastpath_lib.grading.engine import sandbox

                why = sandbox.find_problem(ex) or ("the kernel did not start inside it, though a test process did "
                                                   "(--isolation none shows the kernel's own error)")
                if isolation == "bwrap":
                    return _refused(path, ex, why, notes, t0)
                notes.append(sandbox.fallback_note(why))
                isolated = False
                try:
                    run = _execute(nb, tmp, timeout, kernel_name, ids, ex, learner, False, "", tamper_evidence)
                except Exception as again:  # noqa: BLE001
                    run = _Run(status="errors", reason=f"could not execute: {type(again).__name__}: {again}")
    err = _first_error(nb)
    if run.status == "ok" and err:  # a cell may have compared with an operator absent from the kernel: say so
        run.status, run.reason = "errors", err + absent.note(absent.merge(registry_absent(ex)))
    parts, evidence = _parts(ex, run, static, reassigned)
    status, reason = run.status, run.reason
    if evidence:
        status, reason = "tampered", "; ".join(evidence) + (f" ({reason})" if reason else "")
    return NotebookGrade(str(path), ex, status, reason, round(time.monotonic() - t0, 1), parts, notes,
                         "isolated (bwrap)" if isolated else "unisolated")  # sandbox.ISOLATED, UNISOLATED


#: The status of a copy of an exercise that another copy in the same submission stands for.
DUPLICATE = "another copy graded"


def grade_notebooks(paths, **kwargs) -> list[NotebookGrade]:
    """:func:`grade_notebook` for each of ``paths``, one grade per exercise (:func:`one_per_exercise`): each other
    copy of an exercise is listed, without points, naming the copy graded and why; it is not run."""
    paths = [Path(p) for p in paths]
    kept, others = one_per_exercise(paths)
    graded = {p: grade_notebook(p, **kwargs) for p in kept}
    out = []
    for p in paths:
        if p in graded:
            out.append(graded[p])
            continue
        ex, chosen = others[p]
        name = handed_out_name(ex)
        rule = f"the one named {name} as handed out" if chosen.name == name else "the first by path"
        out.append(NotebookGrade(str(p), ex, DUPLICATE, f"one grade per exercise: {chosen} is the copy of {ex} "
                                 f"graded ({rule}); this copy is not counted", 0.0, [], [], "not run"))
    return out


def _missing(ex, reason):
    return [] if ex is None else [PartGrade(ex, n, p, 0, False, reason) for n, p in EXERCISES[ex]]


def _expand(paths: list[str]) -> list[Path]:
    out = []
    for p in map(Path, paths):
        if p.is_dir():
            out += sorted(q for q in p.glob("*.ipynb") if re.match(r"ex\d\d", q.name))
        else:
            out.append(p)
    return out


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m fastpath_lib grade``."""
    ap = argparse.ArgumentParser(prog="python -m fastpath_lib grade",
                                 description="Execute exercise notebooks (on a copy, in a fresh kernel) and score "
                                             "them. A folder means its exNN_*.ipynb notebooks.",
                                 epilog=THREAT_MODEL, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="+", help="notebooks or folders")
    ap.add_argument("--format", choices=("table", "json", "gradescope"), default="table",
                    help="table (default); json: one JSON object; gradescope: Gradescope's autograder results.json")
    ap.add_argument("--json", action="store_true", help="the same as --format json")
    ap.add_argument("--output", metavar="PATH",
                    help="with --format gradescope: write results.json there (e.g. /autograder/results/results.json) "
                         "instead of printing it")
    ap.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                    help=f"seconds per notebook (default {DEFAULT_TIMEOUT})")
    ap.add_argument("--kernel", default="python3", help="Jupyter kernel name (default python3)")
    ap.add_argument("--isolation", choices=ISOLATION, default=None,
                    help="run the learner's kernel in the sandbox (bubblewrap): bwrap (the default with --format "
                         "gradescope: grade only in the sandbox, exit 2 where it cannot start), auto (the default "
                         "otherwise, for self-study: where it starts, else without it, saying why), none")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every part's full feedback (a passed part's "
                    "too: the free prose an exercise shows for a person to read is there)")
    try:
        args = ap.parse_args(argv)
        if args.json and args.format not in ("table", "json"):
            ap.error("--json and --format gradescope exclude each other")
        if args.output and args.format != "gradescope":
            ap.error("--output goes with --format gradescope")
    except SystemExit as exc:
        return 0 if exc.code == 0 else 2
    fmt = "json" if args.json else args.format
    # like ./kit: without CUDA the grader's own kernel launches (exercise 04's mutants) run in Triton's interpreter,
    # switched on before anything imports triton (a plain ``python -m fastpath_lib grade`` in CI or Gradescope)
    runtime.use_interpreter()
    notebooks = _expand(args.paths)
    missing = [str(p) for p in notebooks if not p.exists()]
    if missing or not notebooks:
        print(f"grade: no such notebook(s): {', '.join(missing) or ' '.join(args.paths)}", file=sys.stderr)
        return 2
    isolation = args.isolation or ("bwrap" if fmt == "gradescope" else "auto")
    why = _sandbox_problem(isolation)[1] if isolation == "bwrap" else None
    if why is not None:
        from fastpath_lib.grading.engine import sandbox

        print(f"grade: {sandbox.refusal(why)} (nothing was graded)", file=sys.stderr)
        return 2
    grades = grade_notebooks(notebooks, timeout=args.timeout, kernel_name=args.kernel, isolation=isolation)
    total, maximum = sum(g.earned for g in grades), sum(g.points for g in grades)
    if fmt == "gradescope":
        from fastpath_lib.grading.report import gradescope

        if args.output:
            gradescope.write(grades, args.output)
        else:
            doc = gradescope.results_json(grades)
            errors = gradescope.validate(doc)
            if errors:
                raise ValueError("results.json does not match Gradescope's format:\n" + "\n".join(errors))
            print(json.dumps(doc, indent=2))
    elif fmt == "json":
        print(json.dumps({"score": total, "max": maximum,
                          "notebooks": [{**{k: v for k, v in dataclasses.asdict(g).items() if k != "parts"},
                                         "earned": g.earned, "points": g.points,
                                         "parts": [dataclasses.asdict(p) for p in g.parts]} for g in grades]},
                         indent=2))
    else:
        print_table(grades, args.verbose)
    if any(g.status == NOT_GRADED for g in grades):
        return 2
    return 0 if total == maximum else 1


if __name__ == "__main__":
    sys.exit(main())
