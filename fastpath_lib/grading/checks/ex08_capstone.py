"""Exercise 08, the capstone: the whole workflow on a row-wise operator the learner chooses.

The learner picks one operator of :data:`KNOWN_OPS` (``OP_NAME``) and every check compares against the *kit's*
float64 reference for it, never against the learner's own. The kernel check and the dispatch check watch the calls:
the Triton route must really launch the learner's Triton kernel (not the kit's, and not torch's op under a Triton
label), and the fallback must not claim Triton; in the grader the Triton route's values must be what the launcher the
op calls computes when the grader runs it with the learner's kernel in its own child. The predicate check counts a
category only when one of its conditions rejects a declared boundary point that every condition of the other
categories accepts, so one condition copied under three categories counts once. Each result names the operator it
was checked for; the grader requires the same operator in every part. The kernel part runs the int32 row-offset
probe (:mod:`~fastpath_lib.grading.engine.far_rows`) and, in the grader, the int64 source rule on any layout
(:mod:`~fastpath_lib.grading.rules.row_offsets`); the dispatch part calls the op at the extremes of the region
the predicate admits (:mod:`~fastpath_lib.grading.rules.region`). Both run bf16 arithmetic as a GPU does
(:func:`fastpath_lib.interpreted.as_on_gpu`).
"""

from __future__ import annotations

import random

import torch
import torch.nn.functional as F

from fastpath_lib import boundary, interpreted
from fastpath_lib.cases import CaseSpec
from fastpath_lib.grading.engine import far_rows, kernel_run, remote, sources
from fastpath_lib.grading.materials import KNOWN_OPS, device
from fastpath_lib.grading.registry import Result
from fastpath_lib.grading.report.feedback import (Fail, call, case_label, describe_error, graded, hold, passed,
                                                  table)
from fastpath_lib.grading.rules import borrowed, ex08_faults, kernel_body, kernel_source, region, row_offsets
from fastpath_lib.grading.rules.ex08_faults import regime_cases as _regime_cases
from fastpath_lib.testing import compare

__all__ = ["check_capstone_reference", "check_capstone_kernel", "check_capstone_predicate", "check_capstone_dispatch",
           "KNOWN_OPS", "ABSENT", "STATED"]


def _f64(x):
    return x.detach().to(torch.float64)


#: op name -> (the kit's float64 reference over the last dim, torch names a reference or kernel must not call); the
#: grader's oracle, which no answer may reach (:func:`~fastpath_lib.grading.rules.borrowed.source_problem` refuses a
# table
#: of the grader's functions too)
_REFERENCES = {
    "softmax": (lambda x: torch.softmax(_f64(x), dim=-1), ("softmax", "log_softmax", "softmin")),
    "log_softmax": (lambda x: torch.log_softmax(_f64(x), dim=-1), ("log_softmax", "softmax", "softmin")),
    "l2_normalize": (lambda x: F.normalize(_f64(x), dim=-1), ("normalize",)),
    "layer_norm": (lambda x: F.layer_norm(_f64(x), (x.shape[-1],), eps=1e-5), ("layer_norm",)),
}
assert set(_REFERENCES) == set(KNOWN_OPS), "materials.KNOWN_OPS names the operators of _REFERENCES"

_KIT = (borrowed.kit("grading", why="that is the grader's own answer") + borrowed.KIT_KERNELS
        + borrowed.kit("rmsnorm/op.py", why="that is the kit's own operator"))
#: op name -> what an answer for it must not call
_FORBIDDEN = {op: _KIT + borrowed.torch_op(*names, why=f"that is torch's own {op}") for op, (_, names) in
              _REFERENCES.items()}
#: torch's operators the grader's kernel (and its runs of the learner's kernel) lack while this exercise is graded: the
#: families of every operator a notebook may choose. The learner's fallback route calls torch's operator honestly, so
#: there an absent operator returns :data:`~fastpath_lib.grading.rules.borrowed.MARKER`, which the dispatch part
#: accepts on the fallback route only; the reference, the kernel and the Triton route need true values.
ABSENT = borrowed.absent("ex08", *_FORBIDDEN.values(), marker=True,
                         why="the reference and the Triton route compute the operator themselves, and the checks "
                             "accept what the absent operator returns on the fallback route only")
#: the rules beyond forbidden calls the kernel and dispatch parts apply in the grader, in the exercise's words
STATED = (kernel_body.PUBLISHED_RULE, kernel_run.RACE_RULE, row_offsets.INT64_RULE, kernel_body.DECORATOR_RULE)
_CASES = (CaseSpec(7, 33, weight=None), CaseSpec(5, 100, torch.float16, weight=None),
          CaseSpec(3, 781, torch.bfloat16, weight=None, scale=4.0),
          CaseSpec(6, 48, weight=None, layout="row_slice", pad=5), CaseSpec(1, 1, weight=None))


def _run_case(fn, args, forbidden, **kw):
    """``(what fn returned, None)``, or ``(None, what it raised)`` on one case: one case that raises (exp overflowing
    into a warning the interpreter raises) is that case's row, not the whole part. A stub still raises."""
    try:
        return borrowed.run(fn, args, forbidden, **kw), None
    except (Fail, NotImplementedError):
        raise
    except Exception as exc:  # noqa: BLE001 - one failing case is feedback
        return None, f"raised {describe_error(exc)}"


def _op(op_name: str):
    if op_name not in KNOWN_OPS:
        raise Fail(f"OP_NAME {op_name!r}: choose one of {sorted(KNOWN_OPS)} (the checks compare with the kit's "
                   f"reference for it)")
    return _REFERENCES[op_name][0], _FORBIDDEN[op_name]


def _borrowed(y, op_name: str) -> str | None:
    """Why ``y`` is what torch's operator returns in the grader's kernel, where it is absent, or ``None``."""
    if not borrowed.is_marker(y):
        return None
    return (f"every element is {borrowed.MARKER:g}, what torch's {op_name} returns while exercise 08 is graded (the "
            f"grader's kernel lacks it: only the fallback route may call it): compute it yourself")


def _drawn_case() -> CaseSpec:
    rng = random.SystemRandom()
    return CaseSpec(rng.randint(2, 9), rng.randint(5, 300), rng.choice((torch.float32, torch.float16)), weight=None)


def _inputs(op_name: str, device_) -> list[tuple[str, object]]:
    """The labelled inputs of the reference and kernel parts: the fixed shapes, one drawn shape and the op's regime
    cases, their values drawn at each check (a seed from ``SystemRandom``), so no answer can be fitted to them."""
    seed = random.SystemRandom().randrange(1 << 20)
    return ([(case_label(spec), spec.build(seed=seed, device=device_)) for spec in _CASES + (_drawn_case(),)]
            + _regime_cases(op_name, seed, device_))


def _own_kernels(launched: list) -> list:
    """The launched kernels that are not the kit's."""
    kit = borrowed.KIT_KERNELS + borrowed.kit("grading", why="")
    return [fn for fn in launched if fn is not None and not kit.names(fn.__code__)]


def _subject(op_name) -> str:
    """What the part graded, as its result names it: the operator the notebook chose."""
    return op_name if isinstance(op_name, str) else repr(op_name)


def _grade_reference(op_name: str, reference) -> list[Result]:
    ref, forbidden = _op(op_name)
    rows, bad = [], 0
    for label, built in _inputs(op_name, "cpu"):
        x = built.x
        y, raised = _run_case(reference, (x,), forbidden)
        if raised:
            problem = raised
        elif not isinstance(y, torch.Tensor) or y.dtype != torch.float64 or y.shape != x.shape:
            problem = "must return a float64 tensor of the input's shape"
        else:
            problem = _borrowed(y, op_name) or compare(y, ref(x), torch.float64)
        bad += problem is not None
        rows.append((label, "ok" if problem is None else problem))
    if bad:
        raise Fail(f"{bad} of {len(rows)} cases wrong\n" + table(rows, ("case", "yours vs expected")))
    return [passed("ex08", "reference")]


def check_capstone_reference(op_name: str, reference, *, show: bool = True):
    """``reference(x)`` returns float64 and matches the kit's reference for ``op_name`` (one of :data:`KNOWN_OPS`)."""
    return graded("ex08", ("reference",), _grade_reference, op_name, reference, show=show, subject=_subject(op_name))


def _remote_launches(launch, forbidden, cases) -> tuple[list[tuple], str | None]:
    """In the grader: ``launch`` run as data (:mod:`~fastpath_lib.grading.engine.kernel_run`) on each case's input,
    ``(y, names of the kernels it launched, problem)`` per case; and the int32 row-offset probe's verdict
    (:mod:`~fastpath_lib.grading.engine.far_rows`)."""
    borrowed.reject_handed_back(launch, forbidden)
    source, root = sources.learner_source(), remote.root(launch)
    if kernel_source.still_a_stub(source, root):
        raise NotImplementedError("the stub is still in place")
    problem = kernel_source.launcher_problem(source, root)  # before anything of it runs
    if problem:
        raise Fail(problem)
    probes, programs = far_rows.calls([far_rows.inputs().to(device())], len(cases))
    outcome = kernel_run.run(kernel_source.program(source, root), root,
                             [(None, [c.x], {}) for c in cases] + probes, programs=programs)
    if outcome.compile_problem:
        raise Fail(outcome.compile_problem)
    out = []
    for built, ran in zip(cases, outcome.calls):
        kernel_run.copy_back([built.x], ran.args)
        y = ran.out.to(built.x.device) if isinstance(ran.out, torch.Tensor) else ran.out
        error = f"raised {ran.error[0]}: {ran.error[1]}" if ran.error else None
        if ran.races:  # the values a racing kernel gives on a GPU are not the interpreter's
            raise Fail(_row_fault(ran.races[0], built.x, y) or ran.races[0])
        oob = (_row_fault(ran.oob[0], built.x, y) or ran.oob[0]) if ran.oob else None
        out.append((y, ran.launches, error or oob))
    return out, far_rows.verdict(outcome.calls[len(cases):])


def _row_fault(record: str, x, y) -> str | None:
    """The access outside its program's row a race or out-of-bounds ``record`` shows, named as the mask's fix
    (:func:`~fastpath_lib.grading.rules.ex08_faults.out_of_row`), or ``None``."""
    if x.dim() != 2:
        return None
    out = y.stride(0) if isinstance(y, torch.Tensor) and y.dim() == 2 else x.shape[-1]
    return ex08_faults.out_of_row(record, {"load": x.stride(0), "store": out}, x.shape[-1])


@interpreted.as_on_gpu()  # the interpreter's bf16 arithmetic is not the learner's
def _grade_kernel(op_name: str, launch) -> list[Result]:
    ref, forbidden = _op(op_name)
    labelled = _inputs(op_name, device())
    cases = [built for _, built in labelled]
    far = None
    if remote.is_proxy(launch):
        answers, far = _remote_launches(launch, forbidden, cases)
    else:
        answers = []
        for built in cases:
            launched: list = []
            raced: list = []
            with kernel_run.races(raced):
                y, raised = _run_case(launch, (built.x,), forbidden, launches=launched)
            if raced:
                raise Fail(_row_fault(raced[0], built.x, y) or raced[0])
            answers.append((y, _own_kernels(launched), raised))
    rows, bad = [], 0
    for (label, built), (y, launched, problem) in zip(labelled, answers):
        x = built.x
        if problem is None and not launched:
            problem = "no Triton kernel of yours was launched"
        elif problem is None and not isinstance(y, torch.Tensor):
            problem = f"returned {type(y).__name__}, expected a tensor"
        elif problem is None:
            problem = _borrowed(y, op_name) or compare(y, ref(x.cpu()), x.dtype)
        if problem is None and y.dtype != x.dtype:
            problem = f"output dtype {str(y.dtype).replace('torch.', '')}, expected the input's"
        if problem is None and not built.inputs_untouched():
            problem = "modified the input"
        bad += problem is not None
        rows.append((label, problem))
    rows = [(label, problem or "ok") for label, problem in ex08_faults.named_fixes(rows, [b.x for b in cases])]
    if bad:
        raise Fail(f"{bad} of {len(rows)} cases wrong\n" + table(rows, ("case", "yours vs expected")))
    far = far if remote.is_proxy(launch) else far_rows.in_process(launch, [far_rows.inputs().to(device())])
    if far:
        raise Fail(f"every case is right, but {far}")
    return [passed("ex08", "kernel")]


def check_capstone_kernel(op_name: str, launch, *, show: bool = True):
    """``launch(x2d) -> y``: launches your Triton kernel; ``y`` matches the kit's reference for ``op_name`` within
    the input dtype's tolerance, on irregular shapes. In the grader ``launch`` and your kernels run as data, from the
    notebook's source, in the grader's own process (:mod:`~fastpath_lib.grading.engine.kernel_run`): which kernels
    launch is measured there, compiled for a GPU by Triton's frontend, with no out-of-bounds access."""
    return graded("ex08", ("kernel",), _grade_kernel, op_name, launch, show=show, subject=_subject(op_name))


def _categories(pred, make_ctx, base: dict) -> tuple[dict[str, str], list[tuple], list[str]]:
    """Category -> a condition that alone rejects one of its declared points; the table rows; the problems."""
    conds = list(pred.conditions)
    rows, problems, distinct = [], [], {}
    for c in conds:
        if not any(not b.holds for b in c.boundaries):
            problems.append(f"{c.name}: declares no boundary where it fails")
        if not any(b.holds for b in c.boundaries):
            problems.append(f"{c.name}: declares no boundary where it holds")
        for b in c.boundaries:
            ctx = make_ctx(CaseSpec(**{**base, **boundary.overrides(b, None)}).build(seed=10, device=device()).x)
            holds = c.check(ctx) is None
            rows.append((f"{c.name}[{b.label}]", hold(b.holds), hold(holds)))
            if holds != b.holds:
                problems.append(f"{c.name}[{b.label}]: declared {hold(b.holds)}, the check says {hold(holds)}")
            elif not b.holds and all(o.check(ctx) is None for o in conds if o.category != c.category):
                distinct.setdefault(c.category, c.name)
    return distinct, rows, problems


def _grade_predicate(make_predicate, make_ctx, base: dict) -> list[Result]:
    pred = call(make_predicate)
    problems = []
    d0 = pred.evaluate(make_ctx(CaseSpec(**base).build(seed=10, device=device()).x))
    if not d0.eligible:
        problems.append(f"the base case is not eligible: {d0.reasons}")
    distinct, rows, more = _categories(pred, make_ctx, base)
    problems += more
    cats = sorted({c.category for c in pred.conditions})
    if len(distinct) < 3:
        problems.append(f"{len(distinct)} categories have a condition of their own (one that alone rejects one "
                        f"of its declared points) among {cats}; need >= 3 (a condition copied under several "
                        f"categories counts once)")
    if problems:
        raise Fail("\n".join(problems) + "\n" + table(rows, ("boundary", "declared", "check")))
    return [passed("ex08", "predicate_declarations", f"{len(rows)} declared boundary points hold as declared; "
                   f"categories: {', '.join(sorted(distinct))}")]


def check_capstone_predicate(make_predicate, make_ctx, base: dict, *, show: bool = True):
    """The predicate's declared boundaries hold as declared, and >= 3 categories each have a condition of their own.

    Args:
        make_predicate: ``() -> Predicate`` whose conditions declare :class:`~fastpath_lib.eligibility.Boundary`
            changes to ``base`` (CaseSpec fields, e.g. ``{"cols": 8193}``).
        make_ctx: ``(x) -> ctx`` the object the conditions check.
        base: an eligible base case as CaseSpec fields.
    """
    return graded("ex08", ("predicate_declarations",), _grade_predicate, make_predicate, make_ctx, base, show=show)


#: the dispatch part's cases: two of the kernel's (7 and 5 rows), two at and above the row threshold lessons 03 and
#: 05 teach under the interpreter (8 rows, ``limits.INTERPRETER_MIN_ROWS``), so a predicate with that threshold
#: still sends a case to the fast path, and two the fast path must refuse. (A GPU's 1024 rows would cost the
#: interpreter about ten seconds a call: too slow for a check cell.)
_DISPATCH_CASES = _CASES[:2] + (CaseSpec(8, 48, weight=None), CaseSpec(16, 40, torch.float16, weight=None),
                                CaseSpec(8, 16, weight=None, layout="transposed"),
                                CaseSpec(8, 16, torch.float64, weight=None))


def _dispatch_call(op, x, watch, launched, in_grader):
    """``op(x)`` with ``x`` an input only: in the grader the call declares no output, so a write into ``x`` fails
    there (:func:`~fastpath_lib.grading.engine.remote.outputs`) and the grader's ``x`` keeps what it drew; here a write
    is seen by comparing with a copy. Returns ``(out, problem)``."""
    before = x.clone()
    try:
        if in_grader:
            with remote.outputs():
                out = borrowed.run(op, (x,), watch)
        else:
            out = borrowed.run(op, (x,), watch, launches=launched)
    except remote.InputWritten:
        return None, "wrote into its input, which it must only read"
    if not torch.equal(x, before):
        return None, "wrote into its input, which it must only read"
    return out, None


def _launchers_ruled(op) -> list[str]:
    """In the grader: the launchers ``op`` calls (:func:`~fastpath_lib.grading.rules.kernel_source.launchers_called`),
    each held to the launcher and kernel rules; the first they refuse fails the part in the rules' words (checked
    before the op runs: a kernel the rules refuse, under ``@triton.autotune`` say, may fail there in other words)."""
    source, root = sources.learner_source(), remote.root(op)
    names = kernel_source.launchers_called(source, root)
    for name in names:
        problem = kernel_source.launcher_problem(source, name)
        if problem:
            raise Fail(f"your op's Triton route calls {name}: {problem}")
    return names


def _launcher_values(op, xs: list) -> list[list[tuple]]:
    """In the grader: each launcher ``op`` calls (:func:`~fastpath_lib.grading.rules.kernel_source.launchers_called`)
    run as data on each of ``xs`` (:mod:`~fastpath_lib.grading.engine.kernel_run`, one child for all), per x
    ``[(launcher, y, what went wrong or None), ...]``: the values the learner's kernel computes there."""
    source = sources.learner_source()
    names = _launchers_ruled(op)
    if not names or not xs:
        return [[] for _ in xs]
    outcome = kernel_run.run(kernel_source.program(source, *names), names[0],
                             [(None, [x], {}, name) for x in xs for name in names])
    if outcome.compile_problem:
        raise Fail(outcome.compile_problem)
    ran = iter(outcome.calls)
    out = []
    for _ in xs:
        row = []
        for name in names:
            c = next(ran)
            if c.races:
                raise Fail(f"your op's Triton route calls {name}: {c.races[0]}")
            problem = f"raised {c.error[0]}: {c.error[1]}" if c.error else (c.oob[0] if c.oob else None)
            if problem is None and not c.launches:
                problem = "launched no Triton kernel"
            row.append((name, c.out if isinstance(c.out, torch.Tensor) else None, problem))
        out.append(row)
    return out


def _route_problem(y, x, ran: list[tuple]) -> str | None:
    """Why ``y``, the op's Triton-route answer on ``x``, is not what one of its launchers computes on ``x`` in the
    grader (``ran``: :func:`_launcher_values`'s row for ``x``), or ``None``."""
    if not ran:
        return ("says triton, but calls no launcher of yours (a function that launches your Triton kernel): the "
                "grader runs the launcher itself, and the Triton route returns what it returns")
    why = []
    for name, theirs, problem in ran:
        if problem is None and theirs is None:
            problem = "returned no tensor"
        problem = problem or compare(y, theirs.to(torch.float64), x.dtype)
        if problem is None:
            return None
        why.append(f"{name}(x) there: {problem}")
    return ("your op's Triton route returns values your kernel does not compute in the grader (the grader runs "
            "your launcher and kernel on the same input; " + "; ".join(why) + ")")


@interpreted.as_on_gpu()
def _dispatch_cases(pred, make_ctx, seed: int) -> list[tuple[str, CaseSpec]]:
    """``(label, spec)``: :data:`_DISPATCH_CASES`, then the extremes of the region ``pred`` admits
    (:func:`~fastpath_lib.grading.rules.region.extremes`: its widest and narrowest width, at its fewest rows), found
    from the first of those cases it sends to the fast path."""
    def admits(spec: CaseSpec) -> bool:
        return pred.evaluate(make_ctx(spec.build(seed=seed, device=device()).x)).route == "triton"
    fixed = [(spec.label(), spec) for spec in _DISPATCH_CASES]
    base = next((spec for spec in _DISPATCH_CASES if admits(spec)), None)
    return fixed + ([(f"{spec.label()}, {what}", spec) for what, spec in region.extremes(admits, base)] if base else [])


def _grade_dispatch(op_name: str, op, make_predicate, make_ctx) -> list[Result]:
    ref, forbidden = _op(op_name)
    pred = call(make_predicate)
    rows, routes, why, answers = [], set(), [], []
    in_grader = remote.is_proxy(op)
    if in_grader:
        _launchers_ruled(op)
    launches_in_source = in_grader and kernel_source.launches_kernel(sources.learner_source(), remote.root(op))
    seed = random.SystemRandom().randrange(1 << 20)  # the values drawn at each check, as the kernel part's
    for label, spec in _dispatch_cases(pred, make_ctx, seed):
        x = spec.build(seed=seed, device=device()).x
        expected = ref(x.cpu())  # from what the grader drew, before the op sees it
        decision = pred.evaluate(make_ctx(x))
        exp_route = decision.route
        why.append((label, exp_route, "; ".join(map(str, decision.reasons))))
        launched: list = []
        # in the grader the source is read whole: the fallback's own torch op is allowed there
        watch = forbidden if exp_route == "triton" and not in_grader else _KIT
        try:
            out, problem = _dispatch_call(op, x, watch, launched, in_grader)
        except remote.RemoteError:
            if in_grader and exp_route == "triton":  # the grader's own run of the launchers says what it can
                _launcher_values(op, [x])  # (an operation Triton's interpreter cannot run, in the replay's words)
            raise
        if problem is None and not (isinstance(out, tuple) and len(out) == 2):
            raise Fail(f"op must return (y, route), got {type(out).__name__}")
        y, route = out if problem is None else (None, "?")
        routes.add(route)
        # in the grader the kernel reports nothing: the op's source must launch a kernel of yours
        ran = launches_in_source if in_grader else bool(_own_kernels(launched))
        if problem is None and route != exp_route:
            problem = f"route {route}, the predicate says {exp_route}"
        if problem is None and route == "triton" and not ran:
            problem = "says triton, but no Triton kernel of yours was launched"
        if problem is None and route != "triton" and launched:
            problem = f"says {route}, but a Triton kernel was launched"
        # the fallback's call of torch's operator, absent from the grader's kernel, answers the marker there
        fallback = route == exp_route != "triton" and borrowed.is_marker(y) and y.shape == x.shape
        problem = problem or (None if fallback else _borrowed(y, op_name) or compare(y, expected, x.dtype))
        if problem is None and not fallback and isinstance(y, torch.Tensor) and y.dtype != x.dtype:
            problem = f"output dtype {str(y.dtype).replace('torch.', '')}, expected the input's"
        rows.append([label, route, problem])
        answers.append((x, y))
    if in_grader:  # the Triton route's values are the ones the learner's launcher and kernel compute in the grader
        triton = [i for i, (_, route, problem) in enumerate(rows) if problem is None and route == "triton"]
        for i, ran in zip(triton, _launcher_values(op, [answers[i][0] for i in triton])):
            rows[i][2] = _route_problem(answers[i][1], answers[i][0], ran)
    bad = sum(problem is not None for *_, problem in rows)
    rows = [(label, route, "ok" if problem is None else problem) for label, route, problem in rows]
    if bad:
        wrong = [(route, problem) for _, route, problem in rows if problem != "ok"]
        kernel = (all(route == "triton" and not problem.startswith(("route ", "says ", "output dtype"))
                      for route, problem in wrong)
                  and any(route != "triton" and problem == "ok" for _, route, problem in rows))
        raise Fail(f"{bad} of {len(rows)} cases wrong\n" + table(rows, ("case", "route", "yours vs expected"))
                   + ("\nonly values your op computes on the Triton route are wrong, and the fallback's are right: "
                      "the kernel or its launcher computes them (the kernel part's feedback names the fault)"
                      if kernel else ""))
    if len(routes) < 2:
        raise Fail(f"every case took route {routes}: the check needs a case on the fast path and one on the fallback, "
                   f"and your predicate decided so on these inputs (under the interpreter a row threshold of at most "
                   f"16, such as the lessons' 8, leaves the 16x40 case on the fast path)\n"
                   + table(why, ("case", "predicate's route", "its reasons")))
    return [passed("ex08", "dispatch")]


def check_capstone_dispatch(op_name: str, op, make_predicate, make_ctx, *, show: bool = True):
    """``op(x) -> (y, route)`` takes the predicate's route, really launches your kernel on the Triton route, and
    matches the kit's reference for ``op_name`` on both routes, on fixed shapes and at the extremes of the region the
    predicate admits (:func:`~fastpath_lib.grading.rules.region.extremes`). In the grader the Triton route's ``y``
    must be what the launcher ``op`` calls (``launch(x)``) returns when the grader runs it and your kernel as data on
    the same ``x`` (:mod:`~fastpath_lib.grading.engine.kernel_run`)."""
    return graded("ex08", ("dispatch",), _grade_dispatch, op_name, op, make_predicate, make_ctx, show=show,
                  subject=_subject(op_name))
