"""Boundary points generated from a predicate's declarations, and the tests generated from them, for any op's spec.

:func:`boundary_points` walks every condition of an op's predicate and every
:class:`~fastpath_lib.eligibility.Boundary` it declares, applies the change to the eligible base case under the
limits in force, and returns a :class:`BoundaryPoint`: either a *tensor* change (a new case of the op's case class,
``OpSpec.case_spec``, run through both routes) or a *context* change (forced fallback, capture, ``create_graph``,
interpreter off, another architecture, forward-mode AD, a ``torch.func`` transform, a tensor subclass), checked on
the predicate's context.

:func:`check_point` checks one point, route and value; :func:`boundary_tests` turns every point of a spec into a
pytest test, so a practitioner's test file is one line::

    from fastpath_lib.boundary import boundary_tests
    from my_ops import SPEC

    test_my_op_boundaries = boundary_tests(SPEC)

>>> pts = boundary_points()
>>> any(p.condition == "min_rows" and p.label == "threshold-1" and not p.holds for p in pts)
True
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fastpath_lib import launches, opspec
from fastpath_lib.cases import CaseSpec
from fastpath_lib.eligibility import Predicate

__all__ = ["CONTEXT_KEYS", "VALUES", "BoundaryPoint", "boundary_points", "declared_points", "value_points",
           "value_regimes", "check_point", "boundary_tests", "unrunnable", "BoundaryCoverageWarning", "has_backward",
           "overrides"]

#: Overrides that change the execution context rather than the tensors.
CONTEXT_KEYS = frozenset({"forced", "capturing", "create_graph", "interpret", "capability", "device_type",
                          "forward_ad", "transform", "kind"})


@dataclasses.dataclass(frozen=True)
class BoundaryPoint:
    """One generated boundary point.

    Attributes:
        condition: the condition it probes.
        label: the declared label, e.g. ``"cols=17"``.
        holds: whether the condition should hold.
        spec: the tensor case (the base case with the tensor overrides applied).
        context: execution-context overrides (see :data:`CONTEXT_KEYS`); empty for pure tensor changes.
        values: the value regime written into the input's first row (a label of the spec's ``value_regimes``;
            :func:`value_points`), or ``None``: random values.
    """

    condition: str
    label: str
    holds: bool
    spec: CaseSpec
    context: dict[str, Any]
    values: str | None = None

    @property
    def id(self) -> str:
        return f"{self.condition}[{self.label}]"


#: The condition name of the value-regime points (:func:`value_points`).
VALUES = "values"


def overrides(boundary, limits: Any) -> dict[str, Any]:
    """The concrete overrides of one declared :class:`~fastpath_lib.eligibility.Boundary` under ``limits``: its
    ``change``, called with the limits where it is a callable. Here, beside the generator that reads it, and not a
    method of ``Boundary``: exercise 04 hands out the predicate, and must not hand out a reader of its declared
    boundaries (its check forbids this function).

    >>> from types import SimpleNamespace
    >>> from fastpath_lib.eligibility import Boundary
    >>> overrides(Boundary("rows", lambda lim: {"rows": lim.min_rows - 1}, False), SimpleNamespace(min_rows=100))
    {'rows': 99}
    """
    change = boundary.change
    return dict(change(limits) if callable(change) else change)


def value_regimes(spec: opspec.OpSpec) -> dict:
    """``spec``'s value regimes: its ``value_regimes``, else :data:`fastpath_lib.cases.VALUE_REGIMES`."""
    from fastpath_lib.cases import VALUE_REGIMES

    return dict(VALUE_REGIMES if spec.value_regimes is None else spec.value_regimes)


def value_points(spec: opspec.OpSpec | None = None, device: str | None = None) -> list[BoundaryPoint]:
    """One point per value regime of ``spec`` (:func:`value_regimes`): its eligible base case (``boundary_base``, the
    row count raised to the row threshold) with the regime written into the first row of its first floating-point
    tensor argument, checked as a boundary point that holds (route and value against the reference; id
    ``values[LABEL]``). Empty for a spec without a predicate's base case or limits (its boundary points say which)."""
    spec = spec or opspec.default()
    regimes = value_regimes(spec)
    if not regimes or spec.boundary_base is None or spec.limits is None:
        return []
    limits = spec.limits(device)
    base = dict(spec.boundary_base, rows=max(spec.boundary_base.get("rows", 1), getattr(limits, "min_rows", 1)))
    case = (spec.case_spec or CaseSpec)(**base, **({"device": device} if device else {}))
    return [BoundaryPoint(VALUES, label, True, case, {}, label) for label in regimes]


def _write_regime(spec: opspec.OpSpec, label: str, args: tuple) -> None:
    """Write the regime ``label`` into the first row of the first floating-point tensor of ``args``, in place."""
    import torch

    x = next((a for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()), None)
    if x is None or x.numel() == 0:
        return
    with torch.no_grad():
        value_regimes(spec)[label](x[(0,) * (x.dim() - 1)] if x.dim() > 1 else x)


def boundary_points(predicate: Predicate | opspec.OpSpec | None = None, base: dict[str, Any] | None = None,
                    limits: Any = None, device: str | None = None, *,
                    spec: opspec.OpSpec | None = None) -> list[BoundaryPoint]:
    """All declared boundary points of an op's predicate under the limits in force.

    Args:
        predicate, base, limits: override the spec's ``predicate``, ``boundary_base`` and ``limits(device)``
            (an :class:`~fastpath_lib.opspec.OpSpec` given first is taken as ``spec``).
        device: where the cases are built (``None``: the case class's default).
        spec: the operator (default: :func:`fastpath_lib.opspec.default`); its ``case_spec`` builds the points'
            cases (``None``: :class:`~fastpath_lib.cases.CaseSpec`).

    The base case's row count is raised to the row threshold when the threshold is above it, so that the base case
    is eligible on every device.

    Raises:
        ValueError: the spec leaves out what the points need (its predicate, base case or limits), naming the field;
            or a boundary (or the base case) names a field the case class lacks, naming the condition, the
            boundary, the field and the fix (``OpSpec.case_spec``).
    """
    if isinstance(predicate, opspec.OpSpec):  # boundary_points(SPEC): the spec given first
        spec, predicate = predicate, None
    spec = spec or opspec.default()
    predicate = predicate or spec.predicate
    base = base or spec.boundary_base
    if limits is None and spec.limits is not None:
        limits = spec.limits(device)
    missing = [name for name, v in (("predicate", predicate), ("boundary_base", base), ("limits", limits)) if v is None]
    if missing:
        raise ValueError(f"{spec.name}: boundary points need {', '.join(f'OpSpec.{m}' for m in missing)}, "
                         f"{opspec.NOT_DECLARED}")
    return declared_points(predicate, base, limits, device, spec_type=spec.case_spec or CaseSpec)


def declared_points(predicate: Predicate, base: dict[str, Any], limits: Any, device: str | None = None, *,
                    spec_type: type = CaseSpec, context_keys: frozenset = CONTEXT_KEYS,
                    point_type: type = BoundaryPoint) -> list:
    """The walk every operator's boundary generator shares: each declared boundary of each condition of ``predicate``,
    applied to ``base`` under ``limits``.

    Args:
        predicate: the operator's predicate.
        base: its eligible base case (the row count is raised to ``limits.min_rows`` when below it).
        limits: the limits in force (the boundaries' overrides read them).
        device: the device the cases are built on (``None``: the case type's default).
        spec_type: the operator's case type, built from the base case and the tensor overrides.
        context_keys: the overrides that change the call's context rather than the tensors.
        point_type: the point type, built as ``point_type(condition, label, holds, spec, context)``.
    """
    base = dict(base)
    base["rows"] = max(base.get("rows", 1), getattr(limits, "min_rows", 1))
    fix = "declare OpSpec.case_spec, a case class with that field"
    unknown = _not_fields(spec_type, base)
    if unknown:
        raise ValueError(f"OpSpec.boundary_base names {_fields_text(unknown)} of {spec_type.__name__}; {fix}")
    points = []
    for cond in predicate.conditions:
        for b in cond.boundaries:
            change = overrides(b, limits)
            ctx = {k: v for k, v in change.items() if k in context_keys}
            tensor = {k: v for k, v in change.items() if k not in context_keys}
            unknown = _not_fields(spec_type, tensor)
            if unknown:  # said before the case class's own TypeError, which names no condition
                raise ValueError(f"{cond.name}[{b.label}]: the boundary changes {_fields_text(unknown)} of "
                                 f"{spec_type.__name__}; {fix}")
            spec = spec_type(**{**base, **tensor, **({"device": device} if device else {})})
            points.append(point_type(cond.name, b.label, b.holds, spec, ctx))
    return points


def _not_fields(spec_type: type, keys) -> list[str]:
    """The ``keys`` ``spec_type(...)`` does not take (none where its signature takes ``**kwargs`` or cannot be
    read)."""
    import inspect

    try:
        params = inspect.signature(spec_type).parameters
    except (TypeError, ValueError):
        return []
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return []
    return [k for k in keys if k not in params]


def _fields_text(names: list[str]) -> str:
    return " and ".join(f"`{n}`" for n in names) + (" which are not fields" if len(names) > 1 else ", not a field")


def _outputs(value) -> list:
    return list(value) if isinstance(value, (tuple, list)) else [value]


def _close(spec: opspec.OpSpec, got, want, dtype, launched=None) -> str | None:
    """Why ``got`` is not ``want`` within the spec's tolerances for ``dtype`` (``None``: it is), output by output, in
    the words of bench's check (:func:`fastpath_lib.gradcheck.tensor_mismatch`: the max error and the tolerance, and
    :func:`~fastpath_lib.gradcheck.rounding_hint` for the ``launched`` kernels where the compared value is bf16)."""
    import torch

    from fastpath_lib.gradcheck import tensor_mismatch

    got, want = _outputs(got), _outputs(want)
    if len(got) != len(want):
        return f"{len(got)} outputs, the reference gives {len(want)}"
    for i, ((atol, rtol), g, w) in enumerate(zip(spec.output_tolerances(dtype, len(want)), got, want)):
        if not isinstance(w, torch.Tensor):
            continue
        if g.shape != w.shape or g.dtype != w.dtype:
            return f"output {i}: {tuple(g.shape)} {g.dtype}, the reference gives {tuple(w.shape)} {w.dtype}"
        problem = tensor_mismatch(g, w, atol, rtol, f"atol {atol}, rtol {rtol}", launched)
        if problem:
            return f"output {i}: {problem}"
    return None


def check_point(spec: opspec.OpSpec, point: BoundaryPoint, *, device: str | None = None, seed: int = 7) -> str | None:
    """Check one boundary point of ``spec``: why it fails, or ``None``.

    The predicate is asked on the point's call (its context overrides applied to the spec's ``context``): the
    point's condition must hold exactly when the point says so. A point that changes only the tensors is also run:
    the spec's ``route`` must report the route the predicate decides (the fallback wherever the condition fails);
    the dispatched ``function`` must take that route, read from what the call launched (:func:`fastpath_lib.launches.
    observe`: a Triton route launches a Triton kernel, the fallback launches none; wherever a Triton kernel can run)
    and give the ``reference``'s value within the spec's tolerances, or, where the reference refuses the call, raise
    the same exception type; where the fast route can take the inputs (``fast_unsupported`` says so, or the
    predicate holds), ``fast`` must give that value too. For a spec that declares a backward (:func:`has_backward`),
    each point the predicate takes also compares gradients with the reference's within ``OpSpec.grad_tolerance``, as
    the bench's backward cases do: the public function's by autograd and, where the fast route can take the inputs,
    ``fast_backward``'s.
    """
    case = point.spec if device is None else dataclasses.replace(point.spec, device=device)
    args = spec.args(case.build(seed=seed))
    if point.values is not None:
        _write_regime(spec, point.values, args)
    if spec.context is not None:
        call = spec.context(*args)
        if point.context:
            try:
                call = dataclasses.replace(call, **point.context)
            except TypeError as exc:
                return f"{point.id}: the context {type(call).__name__} cannot take {sorted(point.context)}: {exc}"
        holds = point.condition not in spec.predicate.evaluate(call).failed
        if holds != point.holds:
            return f"{point.id}: the condition {'holds' if holds else 'fails'}, the point says it " \
                   f"{'holds' if point.holds else 'fails'}"
        decision = spec.predicate.evaluate(call)
    else:
        decision = None
    if point.context:
        return None  # a context change is checked on the predicate's context
    route = spec.route(*args)
    drift = (launches.declared_mismatch("triton" if decision.eligible else "fallback", route, decision.reasons)
             if decision is not None else None)
    if drift:
        return f"{point.id}: {drift}"
    if not point.holds and route != "fallback":  # no context to ask the predicate: the point's condition fails
        return f"{point.id}: {launches.declared_mismatch('fallback', route, [f'{point.condition}: fails here'])}"
    try:
        want = spec.reference(*args)
    except Exception as exc:  # noqa: BLE001 - an invalid call: the dispatched one must refuse it the same way
        try:
            spec.function(*args)
        except type(exc):
            return None
        except Exception as other:  # noqa: BLE001
            return f"{point.id}: the reference raises {type(exc).__name__}, the op {type(other).__name__}"
        return f"{point.id}: the reference raises {type(exc).__name__}, the op returns"
    dtype = args[0].dtype
    with launches.watch() as seen:
        got = spec.function(*args)
    if seen is not None:  # the route the call took, from what it launched, against the predicate's
        drift = launches.mismatch(decision.route if decision is not None else route, seen)
        if drift:
            return f"{point.id}: {drift}"
    problem = _close(spec, got, want, dtype, seen)
    runs = spec.fast_unsupported(*args) is None if spec.fast_unsupported is not None else route == "triton"
    if problem is None and spec.fast is not None and runs:
        with launches.watch() as seen:
            fast = spec.fast(*args)
        problem = _close(spec, fast, want, dtype, seen)
        problem = f"fast route: {problem}" if problem else None
    if problem is None and route == "triton" and has_backward(spec):
        problem = _gradients(spec, args, dtype, seed, launcher=runs)
    return f"{point.id}: {problem}" if problem else None


def has_backward(spec: opspec.OpSpec) -> bool:
    """Whether ``spec`` declares a backward: a ``fast_backward``, or a backward case in its matrix."""
    return spec.fast_backward is not None or any(c.pass_ == "backward" for c in spec.matrix())


def _gradients(spec: opspec.OpSpec, args: tuple, dtype, seed: int, *, launcher: bool) -> str | None:
    """Why the gradients of a call differ from the reference's (:func:`fastpath_lib.gradcheck.check_backward`, the
    bench's check): the public function's by autograd, and with ``launcher`` the spec's ``fast_backward``."""
    import torch

    from fastpath_lib import gradcheck

    if not gradcheck.grad_inputs(args):
        return None
    args = gradcheck.leaves(args)
    dy = gradcheck.incoming_gradient(spec, args, torch.Generator(device="cpu").manual_seed(seed))
    problem = gradcheck.check_backward(spec, spec.function, args, dy, dtype)
    if problem:
        return f"gradients: {problem}"
    if launcher and spec.fast_backward is not None:
        problem = gradcheck.check_backward(spec, spec.function, args, dy, dtype, launcher=True)
        return f"fast route's gradients (fast_backward): {problem}" if problem else None
    return None


def boundary_tests(spec: opspec.OpSpec, *, device: str | None = None):
    """A pytest test over every boundary point of ``spec`` (:func:`boundary_points`) and every value regime
    (:func:`value_points`: by default a zero row, a row of equal values, a row of extreme values), one parametrized
    case per point (its id: ``condition[label]``, ``values[label]``), each :func:`check_point`: route, value and, for
    an op with a backward, gradients, and, under Triton's interpreter, every kernel the point runs watched by the
    interpreter's traffic checker (:func:`fastpath_lib.traffic.watch`): a point fails on any out-of-bounds access.

    Bind it to a name starting with ``test`` in a test module: ``test_my_op_boundaries = boundary_tests(SPEC)``. On a
    machine without CUDA the kernels must run in Triton's interpreter, which Triton decides when a kernel is
    decorated: call :func:`fastpath_lib.use_interpreter` before the op's module is imported (or set
    ``TRITON_INTERPRET=1``). Without CUDA or the interpreter every point fails and says so: no kernel would run, and
    the points would only compare the fallback with the reference.

    A predicate condition that declares no boundary point is probed by no test: generating the tests then warns
    (:class:`BoundaryCoverageWarning`, naming those conditions), in the module that calls this, and fails nothing.
    """
    import warnings

    import pytest

    from fastpath_lib import runtime

    points = boundary_points(spec=spec, device=device) + value_points(spec, device)
    if spec.unprobed_conditions():  # said where the tests are generated: the module collecting them warns
        warnings.warn(f"{spec.name}: conditions with no boundary point: {', '.join(spec.unprobed_conditions())} "
                      "(no generated test probes them; declare a Boundary for each)", BoundaryCoverageWarning,
                      stacklevel=2)

    @pytest.mark.parametrize("point", points, ids=[p.id for p in points])
    def test_boundary_point(point):
        from fastpath_lib import traffic

        problem = unrunnable()
        if problem is None and runtime.interpreter_enabled() and not traffic.watching():  # an outer watch checks it
            with traffic.watch() as seen:
                problem = check_point(spec, point, device=device)
            if problem is None and seen.oob_accesses:
                problem = f"{point.id}: out-of-bounds access under the interpreter's traffic checker\n{seen.report()}"
        elif problem is None:
            problem = check_point(spec, point, device=device)
        assert problem is None, problem

    test_boundary_point.__name__ = f"test_{spec.name}_boundaries"
    return test_boundary_point


class BoundaryCoverageWarning(UserWarning):
    """Warned by :func:`boundary_tests` for a predicate whose conditions declare no boundary point (the tests are
    generated all the same)."""


def unrunnable() -> str | None:
    """Why no Triton kernel can run in this process (no CUDA device and Triton's interpreter off), or ``None``."""
    from fastpath_lib import runtime

    if runtime.cuda_available() or runtime.interpreter_enabled():
        return None
    return ("no CUDA device and Triton's interpreter is off: no Triton kernel would run, every call would take the "
            "fallback; call fastpath_lib.use_interpreter() before importing the op's module (or set "
            f"{runtime.ENV}=1), or run on a GPU")
