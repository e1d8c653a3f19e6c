"""One object per operator that the evidence pipeline takes: :class:`OpSpec`, and the registry that names them.

A fast path is reviewed with the same evidence whatever the operator: its contract (the public function against a
reference), the predicate that decides the route, boundary points generated from the predicate's declarations, a
predeclared case matrix timed against baselines, the bytes a call must move, and the kernels compiled for GPU targets.
An :class:`OpSpec` names each of those pieces for one operator; the generic parts of the kit
(:func:`fastpath_lib.boundary.boundary_points`, :func:`fastpath_lib.bench.opbench.run_op`, ``python -m fastpath_lib
bench --op NAME``) take a spec instead of knowing an operator.

RMSNorm is registered first, by name (its spec is imported on first use: :mod:`fastpath_lib.rmsnorm.spec`), then fused
residual-add + RMSNorm (:mod:`fastpath_lib.fused.op_spec`). A practitioner's own op reaches every command and every
process a run starts in one of three ways: ``--op module:SPEC`` (:func:`load`; the command also puts the reference in
:data:`ENV_VAR`, which its child processes inherit, and ``load`` puts the module's folder on their ``PYTHONPATH``), the
environment variable itself (``FASTPATH_OPS=module:SPEC[,module:SPEC...]``), or an installed package's entry point in
the group :data:`ENTRY_POINTS` (``[project.entry-points."fastpath_lib.ops"] my_op = "my_pkg.my_op:SPEC"``). Each is read
the first time the registry is asked (:func:`get`, :func:`names`). :func:`register` registers in this process only.

Nothing here imports the rest of the kit: the spec holds the operator's own callables.

>>> "rms_norm" in names()
True
>>> get("rms_norm").name
'rms_norm'
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fastpath_lib.opparts import (MIN_CASES, Axes, BaselineTolerances, HostCase, KernelBuild, OpCase, lazy,
                                  per_output, tolerance_pairs)

__all__ = ["OpCase", "HostCase", "OpSpec", "Axes", "KernelBuild", "BaselineTolerances", "COMPILED", "compiled",
           "BaselineUnavailable", "register", "unregister", "get", "names", "built_in", "source", "default", "load",
           "reference_of", "lazy", "export", "ENV_VAR", "ENTRY_POINTS", "NOT_DECLARED", "MIN_CASES"]

#: The baseline name that means ``torch.compile`` of the composite: the bench resets dynamo before each case, times
#: its first call (the compile) apart from the samples, and skips it in ``--quick`` off CUDA (as the harness does).
COMPILED = "compiled"


def compiled(composite: Callable) -> Callable:
    """The :data:`COMPILED` baseline of ``composite``: ``torch.compile(composite, dynamic=False)``, built on the first
    call (importing a spec compiles nothing; the bench resets dynamo per case)."""
    built: list[Callable] = []

    def call(*args, **kwargs):
        if not built:
            import torch

            built.append(torch.compile(composite, dynamic=False))
        return built[0](*args, **kwargs)

    call.__name__ = call.__qualname__ = f"compiled_{getattr(composite, '__name__', 'composite')}"
    call.__doc__ = f"``torch.compile`` of ``{getattr(composite, '__qualname__', composite)}`` (built on first use)."
    return call


#: What a step of the pipeline says when the op's spec leaves out a field it needs (a result, never a crash).
NOT_DECLARED = "not declared by the op's spec"


class BaselineUnavailable(RuntimeError):
    """Raised by a baseline that cannot run on this machine (e.g. vLLM's CUDA kernel without vLLM or a GPU): the
    bench records its rows as skipped, with the message as the reason."""


@dataclasses.dataclass(frozen=True)
class OpSpec:
    """Everything the pipeline needs to know about one operator.

    Args:
        name: the registry name (``--op NAME``).
        function: the public, dispatched function (the fast path where the predicate holds, else the fallback).
        reference: the contract, in plain torch, with ``function``'s signature.
        args: ``args(built)`` -> the positional arguments of ``function`` for a
            :class:`~fastpath_lib.cases.BuiltCase` (a row-wise input built by the kit's case machinery).
        route: ``route(*args)`` -> the route (``"triton"``, ``"fallback"``) the predicate decides (``None``: derived
            from ``predicate`` and ``context``); the route taken is read from the call's launches (:mod:`.launches`).
        fast: the fast route called directly, with ``function``'s arguments (``None``: none to time on its own).
        predicate: the :class:`~fastpath_lib.eligibility.Predicate` deciding the route.
        boundary_base: the eligible base case (``CaseSpec`` fields) the predicate's boundary points change.
        limits: ``limits(device)`` -> the limits in force (what the predicate's boundaries read).
        context: ``context(*args)`` -> the predicate's context for a call (what ``predicate.evaluate`` takes).
        tolerances: dtype -> ``(atol, rtol)`` of ``function`` against ``reference``; for an op returning a tuple,
            either one pair for every output or a tuple of pairs, one per output (``(0.0, 0.0)``: bitwise).
        grad_tolerances: dtype -> ``(atol, rtol)`` of the gradients (of every floating-point tensor argument) that a
            backward case's routes give, against the reference's gradients by autograd; a dtype not here gets four
            times its loosest output tolerance (a gradient sums products over a row; :meth:`grad_tolerance`).
        cases: the predeclared matrix (a sequence of :class:`OpCase`, or a callable returning one).
        bytes_moved: ``bytes_moved(rows, cols, dtype, pass_)`` -> the bytes a call of the fast route must move at least.
        baselines: name -> callable with ``function``'s signature; the first is *the* baseline outcomes compare to,
            every one is timed (the others are recorded rows, provider = their name; :data:`COMPILED` is
            ``torch.compile`` of the composite) where it agrees with ``reference`` at the baseline tolerances.
        baseline_tolerances: the tolerances a baseline is checked at before it is timed, where they are looser than
            ``tolerances`` (a :class:`BaselineTolerances`: per dtype, with the reason, e.g. a mature implementation
            that rounds an intermediate the contract keeps in fp32); ``None``: the op's own ``tolerances``
            (:meth:`output_tolerances` with ``baseline=True``; gradients: :meth:`grad_tolerance`).
        kernels: ``kernels()`` -> the specializations to compile ahead of time for GPU targets (``None``: none).
        title: one line naming the fast path (the PR note's title).
        pr_text: the PR note's op-specific sentences, by key (``fastpath_lib.bench.report.PR_TEXT_KEYS``: ``noun``,
            ``summary``, ``eligibility``, ``mechanism``, ...): a string, a list of lines, or a callable returning one
            (called when the note is drafted); a key left out gets a sentence built from the other fields.
        case_spec: the case class whose ``build(seed)`` gives what ``args`` takes (``None``:
            :class:`~fastpath_lib.cases.CaseSpec`; an op with more inputs brings a subclass).
        bytes_models: implementation name -> its own bytes model (``bytes_moved``'s signature): a baseline's name, or
            ``"fallback"`` for the dispatched call that took the fallback; a name not here moves ``bytes_moved``.
        note: what the matrix times and what it leaves out (``environment.json`` carries it).
        host_cases: the host-overhead calls (:class:`HostCase`; empty: :func:`fastpath_lib.bench.ophost.host_cases`).
        host_forms: name -> ``(composite, public)``: further forms the host-overhead family times on the same
            fallback calls (e.g. an in-place form against the in-place composite; :mod:`fastpath_lib.bench.ophost`).
        specialization: ``specialization(rows, cols, dtype)`` -> the compiled binary (or binaries) a call of ``fast``
            on a contiguous, 16-byte-aligned ``rows x cols`` input of ``dtype`` (a torch dtype) launches, as a dict of
            what keys it (kernel, ``BLOCK_SIZE``, ``num_warps``, rows per program, ...), read from the launcher's own
            rule without a GPU; equal dicts are one binary, ``None``: the call compiles nothing. The compile cost
            (:func:`fastpath_lib.bench.workload.compile_cost`) counts the distinct dicts over the matrix's cases
            expected to take the fast route and, on CUDA, calls ``fast`` on the first case of each twice in a fresh
            process with an empty Triton cache (``None`` here: the compile cost says the spec does not declare it).
            A ``specialization`` that also takes ``kernel`` (and ``sms``, the GPU's multiprocessor count) gives the
            backward's binaries for ``kernel="bwd"``: with ``fast_backward`` declared, the compile cost counts those
            of the backward cases too and launches them through ``fast_backward``.
        decoder_step: ``decoder_step(fn, delta, residual, weight, eps)`` -> ``(normed, new_residual)``: how ``fn``
            (``function`` or a baseline: the same signature) does a pre-norm decoder block's residual add and norm
            (``residual + delta``, normalized with ``weight``: where vLLM calls ``fused_add_rms_norm``). The workload
            replay (:func:`fastpath_lib.bench.workload.replay`) runs a small decoder whose every norm is such a step,
            once with ``function`` and once with the first baseline (``None``: the replay says the spec does not
            declare it).
        calls_per_forward: ``calls_per_forward(layers)`` -> how many times one forward of a ``layers``-layer pre-norm
            decoder calls ``function`` (the serving trace's counts, :func:`fastpath_lib.bench.trace.serving_trace`);
            ``None``: ``2 * layers + 1``, a norm before attention and before the MLP in every layer and one before the
            LM head.
        fast_unsupported: ``fast_unsupported(*args)`` -> why ``fast`` called directly cannot take those arguments
            (``None``: it can). Given, the bench times the fast route wherever it can run, the predicate's speed and
            policy conditions (a row threshold, say) aside, so the table shows what the predicate turns down; ``None``:
            the fast route is timed only where the predicate takes it. Either way its value is checked against the
            reference before it is timed.
        fast_backward: ``fast_backward(dy, *args)`` -> the fast route's forward then backward launched directly (what
            the bench times as ``triton`` in a backward case; ``None``: the fast route is not timed there). ``dy`` is
            shaped like the op's output (a tuple, one per output, where the reference returns a tuple). It returns
            the gradients of the floating-point tensor arguments, in order (``None`` entries are dropped: a gradient
            the call does not give), which the bench checks against the reference's before timing it.
        axes: the widths the sweep and the serving trace use (:class:`Axes`; ``None``: read from the matrix,
            :meth:`sweep_axes`).
        lower_threshold: ``lower_threshold(rows)`` -> a context manager inside which the predicate's row threshold is
            ``rows`` (the sweep times the dispatched call with it lowered to 1, so the call takes the fast route
            wherever every other condition holds; ``None``: the sweep times the dispatched call as it dispatches).
        thresholds: where the op records the row threshold a GPU sweep supports per architecture: an object with
            ``THRESHOLDS_FILE`` and ``record(capability, min_rows, source, path=, **facts)`` (``None``: ``python -m
            fastpath_lib threshold`` records nothing for the op).
        capture: ``capture(deadline=, log=)`` -> the op's CUDA-graph capture test on this GPU: ``{"cases": rows,
            "declared": {op: {path: n}}}`` (``None``: the evidence run's capture step says the spec does not declare
            it).
        value_regimes: label -> ``fill(row)`` writing values the contract covers into the base case's first row, for
            the generated tests (:func:`fastpath_lib.boundary.value_points`; ``None``: ``cases.VALUE_REGIMES``).
        compiler: what compiles ``kernels()`` for GPU targets without a GPU: an object with ``missing_tools()`` (why
            it cannot run here, or ``None``), ``facts(builds, timeout=, workers=)`` (one dict per build: vector
            width read from the PTX, registers, spills) and ``specializations(archs=)`` (every binary of the
            eligible region); ``None``: no compiled facts.

    Fields by section: the core is ``name``, ``function``, ``reference``, ``args``, ``route`` and ``baselines``
    (with ``cases``, ``tolerances``, for backward cases ``grad_tolerances``, ``bench --op`` runs; baselines that round
    differently, ``baseline_tolerances``); the predicate section (``predicate``, ``boundary_base``, ``limits``,
    ``context``, ``case_spec``, ``value_regimes``) gives boundary points and tests; the cost section (``bytes_moved``,
    ``bytes_models``, ``fast``, ``fast_unsupported``, ``fast_backward``, ``specialization``, ``kernels``,
    ``compiler``) the bandwidth, compile cost and compiled facts; the workload section (``decoder_step``,
    ``calls_per_forward``, ``axes``, ``lower_threshold``, ``thresholds``, ``capture``, ``host_cases``, ``host_forms``)
    the replay, trace, sweep, capture and host cost; the note section (``title``, ``pr_text``, ``note``) the PR note's
    sentences. A step whose field is left out says which one (:data:`NOT_DECLARED`).
    """

    name: str
    function: Callable
    reference: Callable
    args: Callable[[Any], tuple]
    route: Callable[..., str] | None = None
    fast: Callable | None = None
    predicate: Any = None
    boundary_base: Mapping[str, Any] | None = None
    limits: Callable[[Any], Any] | None = None
    context: Callable[..., Any] | None = None
    tolerances: Mapping[Any, tuple[float, float]] = dataclasses.field(default_factory=dict)
    cases: Sequence[OpCase] | Callable[[], Sequence[OpCase]] = ()
    bytes_moved: Callable[[int, int, Any, str], int] | None = None
    baselines: Mapping[str, Callable] = dataclasses.field(default_factory=dict)
    kernels: Callable[[], list] | None = None
    title: str = ""
    case_spec: type | None = None
    bytes_models: Mapping[str, Callable[[int, int, Any, str], int]] = dataclasses.field(default_factory=dict)
    note: str = ""
    host_forms: Mapping[str, tuple[Callable, Callable]] = dataclasses.field(default_factory=dict)
    host_cases: Sequence[HostCase] = ()
    pr_text: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    specialization: Callable[[int, int, Any], Mapping[str, Any] | None] | None = None
    decoder_step: Callable[..., tuple] | None = None
    calls_per_forward: Callable[[int], int] | None = None
    fast_unsupported: Callable[..., str | None] | None = None
    fast_backward: Callable[..., Any] | None = None
    axes: Axes | None = None
    lower_threshold: Callable[[int], Any] | None = None
    thresholds: Any = None
    capture: Callable[..., dict] | None = None
    compiler: Any = None
    grad_tolerances: Mapping[Any, tuple[float, float]] = dataclasses.field(default_factory=dict)
    value_regimes: Mapping[str, Callable[[Any], None]] | None = None
    baseline_tolerances: BaselineTolerances | None = None

    def __post_init__(self):
        if not self.name or not self.name.replace("_", "").isalnum():
            raise ValueError(f"an op name is letters, digits and underscores: {self.name!r}")
        if not self.baselines:
            raise ValueError(f"{self.name}: at least one baseline is needed (outcomes are read against the first)")
        if self.route is None and (self.predicate is None or self.context is None):
            raise ValueError(f"{self.name}: OpSpec.route, or OpSpec.predicate and OpSpec.context to derive it from")
        for dtype, tol in (self.baseline_tolerances.tolerances.items() if self.baseline_tolerances else ()):
            n = max(len(tolerance_pairs(tol)), len(tolerance_pairs(self._declared(dtype, False))))
            if any(b[0] < o[0] or b[1] < o[1] for b, o in zip(self.output_tolerances(dtype, n, baseline=True),
                                                             self.output_tolerances(dtype, n))):
                raise ValueError(f"{self.name}: baseline_tolerances for {dtype} are tighter than the op's own "
                                 f"({tol} against {self._declared(dtype, False)}): never below the op's")
        if self.route is None:  # derived from the predicate: the route it decides
            object.__setattr__(self, "route", lambda *a, p=self.predicate, c=self.context: p.evaluate(c(*a)).route)

    def matrix(self) -> list[OpCase]:
        """The predeclared cases, checked: unique ids."""
        cases = list(self.cases() if callable(self.cases) else self.cases)
        ids = [c.id for c in cases]
        if len(set(ids)) != len(ids):
            raise ValueError(f"{self.name}: case ids repeat: {sorted({i for i in ids if ids.count(i) > 1})}")
        return cases

    def sweep_axes(self) -> Axes:
        """The sweep's and the trace's widths: ``axes`` where the spec declares them, else read from the matrix:
        the full widths of the cases expected to take the fast route (every case when none is), the ``--quick``
        widths of those cases (the middle one), the narrowest ``--quick`` width off a GPU, and the most common full
        width as the trace's hidden size.

        >>> spec = OpSpec("t", abs, abs, tuple, str, baselines={"b": abs}, cases=[
        ...     OpCase("a", 64, 1024, "float32", "win", "r", (4, 128)), OpCase("b", 8, 2048, "float32", "win", "r")])
        >>> spec.sweep_axes()
        Axes(widths=(1024, 2048), quick=(2048,), off_gpu=(128,), hidden=1024)
        """
        if self.axes is not None:
            return self.axes
        cases = self.matrix()
        fast = [c for c in cases if c.expected != "fallback"] or cases
        if not fast:
            return Axes((), (), (), 0)
        widths = tuple(sorted({c.cols for c in fast}))
        quick = tuple(sorted({c.dims(True)[1] for c in fast}))
        counts = [c.cols for c in fast]
        return Axes(widths, (quick[len(quick) // 2],), (quick[0],), max(widths, key=counts.count))

    def unprobed_conditions(self) -> list[str]:
        """The names of the predicate's conditions that declare no boundary point (no generated test probes them)."""
        return [c.name for c in self.predicate.conditions if not c.boundaries] if self.predicate is not None else []

    def coverage_gaps(self) -> list[str]:
        """Where the spec falls short of the evidence the kit asks for: a matrix of fewer than :data:`MIN_CASES`
        cases, and predicate conditions with no boundary point (empty: none).

        >>> OpSpec("t", abs, abs, tuple, str, baselines={"b": abs}).coverage_gaps()
        ['0 cases (the kit asks for at least 12)']
        """
        n, unprobed = len(self.matrix()), self.unprobed_conditions()
        return ([f"{n} cases (the kit asks for at least {MIN_CASES})"] if n < MIN_CASES else []) + (
            [f"conditions with no boundary point: {', '.join(unprobed)}"] if unprobed else [])

    @property
    def baseline(self) -> tuple[str, Callable]:
        """The first baseline, ``(name, callable)``."""
        return next(iter(self.baselines.items()))

    def _declared(self, dtype, baseline: bool):
        """``dtype``'s declared tolerance (``(0, 0)``: none); with ``baseline``, ``baseline_tolerances``' first."""
        looser = self.baseline_tolerances.tolerances if baseline and self.baseline_tolerances else {}
        return looser.get(dtype, self.tolerances.get(dtype, (0.0, 0.0)))

    def output_tolerances(self, dtype, outputs: int, *, baseline: bool = False) -> list[tuple[float, float]]:
        """``(atol, rtol)`` per output for ``dtype`` (``(0, 0)`` where the spec names none); with ``baseline``, those
        a baseline is checked at: ``baseline_tolerances``' where it names ``dtype``, else the op's own.

        >>> spec = OpSpec("t", abs, abs, tuple, str, baselines={"b": abs}, tolerances={"f": ((1, 2), (0, 0))},
        ...               baseline_tolerances=BaselineTolerances({"f": ((1, 4), (0, 0))}, "why"))
        >>> spec.output_tolerances("f", 2), spec.output_tolerances("g", 1)
        ([(1, 2), (0, 0)], [(0.0, 0.0)])
        >>> spec.output_tolerances("f", 2, baseline=True), spec.output_tolerances("g", 1, baseline=True)
        ([(1, 4), (0, 0)], [(0.0, 0.0)])
        """
        tol = self._declared(dtype, baseline)
        per = tolerance_pairs(tol) if per_output(tol) else [tuple(tol)] * outputs
        if len(per) != outputs:
            raise ValueError(f"{self.name}: {len(per)} tolerance pairs for {dtype}, but {outputs} outputs")
        return per

    def grad_tolerance(self, dtype, *, baseline: bool = False) -> tuple[float, float]:
        """``(atol, rtol)`` of every gradient for ``dtype``: ``grad_tolerances[dtype]`` where declared, else four times
        the loosest of the dtype's output tolerances (with ``baseline``, of those a baseline is held to).

        >>> spec = OpSpec("t", abs, abs, tuple, str, baselines={"b": abs}, tolerances={"f": ((1, 2), (3, 0))},
        ...               grad_tolerances={"g": (5, 6)})
        >>> spec.grad_tolerance("f"), spec.grad_tolerance("g"), spec.grad_tolerance("h")
        ((12, 8), (5, 6), (0.0, 0.0))
        """
        if dtype in self.grad_tolerances:
            return tuple(self.grad_tolerances[dtype])
        pairs = tolerance_pairs(self._declared(dtype, baseline))
        return 4 * max(a for a, _ in pairs), 4 * max(r for _, r in pairs)

    def bytes_for(self, implementation: str, rows: int, cols: int, dtype, pass_: str = "forward") -> float:
        """Bytes ``implementation`` (a baseline's name, ``"fallback"`` or the fast route's ``"triton"``) moves."""
        model = self.bytes_models.get(implementation, self.bytes_moved)
        return model(rows, cols, dtype, pass_) if model is not None else float("nan")


#: The environment variable naming further ops for every process that reads the registry: ``module:SPEC`` references,
#: comma-separated (``--op module:SPEC`` adds to it, so a command's child processes register the op too).
ENV_VAR = "FASTPATH_OPS"
#: The entry-point group an installed package registers its ops in (each entry point names an :class:`OpSpec`).
ENTRY_POINTS = "fastpath_lib.ops"
_declared_loaded: list[str] = []


def _load_declared() -> None:
    """Register the ops :data:`ENV_VAR` and the :data:`ENTRY_POINTS` group name (once per process per reference)."""
    import os

    refs = [r for r in os.environ.get(ENV_VAR, "").split(",") if r.strip()]
    if "entry_points" not in _declared_loaded:
        _declared_loaded.append("entry_points")
        from importlib.metadata import entry_points

        refs += [ep.value for ep in entry_points(group=ENTRY_POINTS)]
    for ref in refs:
        if ref.strip() not in _declared_loaded:
            _declared_loaded.append(ref.strip())
            load(ref.strip())


def export(ref: str) -> None:
    """Add ``module:SPEC`` to :data:`ENV_VAR` (once), so every child process this one starts registers the op."""
    import os

    refs = [r for r in os.environ.get(ENV_VAR, "").split(",") if r]
    if ref not in refs:
        os.environ[ENV_VAR] = ",".join([*refs, ref])


#: The ops registered by name: name -> ``"module:attribute"`` of the spec, imported on first use.
_BUILT_IN = {"rms_norm": "fastpath_lib.rmsnorm.spec:SPEC", "fused_add_rms_norm": "fastpath_lib.fused.op_spec:SPEC"}
#: name -> the spec, or ``"module:attribute"`` where it is imported on first use.
_REGISTRY: dict[str, OpSpec | str] = dict(_BUILT_IN)


def register(spec: OpSpec, *, replace: bool = False) -> OpSpec:
    """Register ``spec`` under its name (``replace=True`` to replace one already there).

    Raises:
        ValueError: the name is taken.
    """
    if spec.name in _REGISTRY and not replace:
        raise ValueError(f"an op named {spec.name!r} is already registered (pass replace=True)")
    _REGISTRY[spec.name] = spec
    return spec


def unregister(name: str) -> None:
    """Remove a registered op (tests register and remove their own)."""
    _REGISTRY.pop(name, None)


def get(name: str) -> OpSpec:
    """The registered spec named ``name``.

    Raises:
        KeyError: no such op (the message lists the registered ones).
    """
    entry = _REGISTRY.get(name)
    if entry is None:
        _load_declared()
        entry = _REGISTRY.get(name)
    if entry is None:
        raise KeyError(f"no op named {name!r}; registered: {', '.join(names())}")
    if isinstance(entry, str):
        module, attr = entry.split(":")
        entry = _REGISTRY[name] = getattr(importlib.import_module(module), attr)
    return entry


def built_in() -> tuple[str, ...]:
    """The ops the kit registers by name (its own; the evidence plan's fixed estimates are theirs)."""
    return tuple(_BUILT_IN)


def names() -> list[str]:
    """The registered op names, in registration order (the ops :data:`ENV_VAR` and :data:`ENTRY_POINTS` declare
    included)."""
    _load_declared()
    return list(_REGISTRY)


def default() -> OpSpec:
    """The first registered op: what the kit's commands run when no ``--op`` names another.

    >>> default().name == names()[0]
    True
    """
    return get(names()[0])


def load(ref: str) -> OpSpec:
    """The op ``ref`` names: a registered name, or ``"module:attribute"`` of a spec, imported (the module's folder
    on ``sys.path`` or the current directory) and registered under its name (again with the same spec is a no-op).
    The module's folder goes on ``PYTHONPATH``, so the processes this one starts import it from any working directory.
    This is how ``--op`` reads its value in every command and in every child process a run starts: a child given
    ``--op module:SPEC`` imports the module itself, so the op is registered there too.

    Raises:
        KeyError: no op of that name; ``ImportError`` / ``AttributeError``: the module or the attribute is missing;
        TypeError: the attribute is not an :class:`OpSpec`.

    >>> load("fastpath_lib.rmsnorm.spec:SPEC") is get("rms_norm")
    True
    """
    if ":" not in ref:
        return get(ref)
    import os
    import sys

    module, attr = ref.strip().split(":", 1)
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.append(os.getcwd())
    spec = getattr(importlib.import_module(module), attr)
    _carry_to_children(module)
    if not isinstance(spec, OpSpec):
        raise TypeError(f"{ref} is a {type(spec).__name__}, not an OpSpec")
    if _REGISTRY.get(spec.name) is not spec and not (spec.name in _REGISTRY and get(spec.name) is spec):
        register(spec, replace=spec.name in _REGISTRY and spec.name not in _BUILT_IN)
    return spec


def _carry_to_children(module: str) -> None:
    """Put the folder ``module`` was imported from on ``PYTHONPATH`` (once, last), so every process this one starts
    imports it too, whatever that process's working directory (the evidence run's steps start in the kit's folder,
    the op's module may lie in the practitioner's). The interpreter's own installation is left out: a child finds an
    installed package there itself."""
    import os
    import sys
    from pathlib import Path

    top = sys.modules[module.split(".")[0]]
    if getattr(top, "__path__", None):  # a package: the folder above it
        root = Path(next(iter(top.__path__))).resolve().parent
    elif getattr(top, "__file__", None):
        root = Path(top.__file__).resolve().parent
    else:
        return
    if any(root.is_relative_to(Path(p).resolve()) for p in {sys.prefix, sys.base_prefix, sys.exec_prefix}):
        return
    entries = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(root) not in entries:
        os.environ["PYTHONPATH"] = os.pathsep.join([*entries, str(root)])


def reference_of(spec: OpSpec) -> str:
    """What ``--op`` must say for a fresh process to find ``spec``: its registered name for a built-in op, else
    ``"module:attribute"`` (:func:`source`), else the name (the op is then known only where it was registered).

    >>> reference_of(get("rms_norm"))
    'rms_norm'
    """
    if spec.name in _BUILT_IN and _REGISTRY.get(spec.name) is spec:
        return spec.name
    return source(spec) or spec.name


def source(spec: OpSpec) -> str | None:
    """``"module:attribute"`` where a fresh process finds ``spec`` (a probe that must start cold imports it from
    there): a built-in op's entry, else a module-level name bound to this very spec (the module of its function first);
    ``None`` when no imported module holds it.

    >>> source(get("rms_norm"))
    'fastpath_lib.rmsnorm.spec:SPEC'
    """
    import sys

    if spec.name in _BUILT_IN:
        module, attr = _BUILT_IN[spec.name].split(":")
        if getattr(sys.modules.get(module), attr, None) is spec:
            return _BUILT_IN[spec.name]
    home = getattr(spec.function, "__module__", None)
    modules = [home] if home in sys.modules else []
    for name in modules + [m for m in list(sys.modules) if m != home]:
        found = [k for k, v in list(vars(sys.modules[name]).items()) if v is spec and not k.startswith("_")] \
            if sys.modules[name] is not None else []
        if found and name != "__main__":
            return f"{name}:{found[0]}"
    return None
