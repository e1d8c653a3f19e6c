"""One object per operator that the evidence pipeline takes: :class:`OpSpec`, and the registry that names them.

A fast path is reviewed with the same evidence whatever the operator: its contract (the public function against a
reference), the predicate that decides the route, boundary points generated from the predicate's declarations, a
predeclared case matrix timed against baselines, the bytes a call must move, and the kernels compiled for GPU
targets. An :class:`OpSpec` names each of those pieces for one operator; the generic parts of the kit
(:func:`fastpath_lib.boundary.boundary_points`, :func:`fastpath_lib.bench.opbench.run_op`, ``python -m fastpath_lib
bench --op NAME``) take a spec instead of knowing an operator.

RMSNorm is registered first, by name (its spec is imported on first use: :mod:`fastpath_lib.rmsnorm.spec`), then
fused residual-add + RMSNorm (:mod:`fastpath_lib.fused.op_spec`). A practitioner registers their own op with
:func:`register` and gets the same pipeline.

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

__all__ = ["OpCase", "HostCase", "OpSpec", "KernelBuild", "COMPILED", "compiled", "BaselineUnavailable", "register",
           "unregister", "get", "names", "source", "NOT_DECLARED"]

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
class OpCase:
    """One predeclared matrix case of a row-wise operator: a ``rows x cols`` input of ``dtype`` (contiguous unless
    ``layout`` says otherwise), timed forward or forward+backward.

    Args:
        id: unique case id.
        rows, cols: the declared shape (the full run's).
        dtype: ``"float16"``, ``"bfloat16"`` or ``"float32"``.
        expected: the predicted outcome on a CUDA GPU (``win``, ``neutral``, ``loss`` or ``fallback``).
        rationale: one line saying why.
        quick: the ``--quick`` shape (default: the declared one).
        pass_: ``"forward"``, or ``"backward"`` (every provider runs forward then backward: ``torch.autograd.grad``
            of the output, or the spec's ``fast_backward``).
        layout, pad, offset: how the input is laid out (:class:`~fastpath_lib.cases.CaseSpec`'s fields).
        family: the case's group in the results (default: the op's name).
        quick_pad: ``pad`` in ``--quick`` (default: ``pad``).
    """

    id: str
    rows: int
    cols: int
    dtype: str
    expected: str
    rationale: str
    quick: tuple[int, int] | None = None
    pass_: str = "forward"
    layout: str = "contiguous"
    pad: int = 0
    offset: int = 0
    family: str = ""
    quick_pad: int | None = None

    def dims(self, quick: bool = False) -> tuple[int, int]:
        """``(rows, cols)`` to run."""
        return tuple(self.quick) if quick and self.quick else (self.rows, self.cols)

    @classmethod
    def from_entry(cls, entry: Mapping[str, Any]) -> OpCase:
        """A case-file entry (the predeclared matrix's JSON format, ``fastpath_lib/bench/cases.json``: ``id``,
        ``shape``, ``dtype``, ``expected``, ``rationale``, optional ``family``, ``layout``, ``pad``, ``offset``,
        ``pass`` and ``quick`` with ``shape``/``pad``) as a case.

        >>> OpCase.from_entry({"id": "b", "shape": [8, 64], "dtype": "float32", "expected": "win", "rationale": "r",
        ...                    "pass": "backward", "quick": {"shape": [2, 64]}}).dims(True)
        (2, 64)
        """
        quick = entry.get("quick") or {}
        return cls(str(entry["id"]), *(int(v) for v in entry["shape"]), str(entry["dtype"]), str(entry["expected"]),
                   str(entry["rationale"]), tuple(int(v) for v in quick["shape"]) if "shape" in quick else None,
                   pass_=str(entry.get("pass", "forward")), layout=str(entry.get("layout", "contiguous")),
                   pad=int(entry.get("pad", 0)), offset=int(entry.get("offset", 0)),
                   family=str(entry.get("family", "")), quick_pad=int(quick["pad"]) if "pad" in quick else None)

    def pad_for(self, quick: bool = False) -> int:
        """``pad`` to run."""
        return self.quick_pad if quick and self.quick_pad is not None else self.pad

    @property
    def plain(self) -> bool:
        """A forward case of a contiguous, unpadded, aligned input (what a sweep, a trace or a compile reads)."""
        return self.pass_ == "forward" and self.layout == "contiguous" and not self.pad and not self.offset


@dataclasses.dataclass(frozen=True)
class HostCase:
    """One call the host-overhead family times (:mod:`fastpath_lib.bench.ophost`): what the dispatch costs per call.

    Args:
        id: the rows' case id (``host_...``).
        case: what builds the call: an object whose ``build(seed=, device=)`` gives what the spec's ``args`` takes
            (an instance of the spec's ``case_spec``, e.g. ``CaseSpec(rows=1, cols=4096, dtype=torch.float16)``).
        rationale: one line saying why.
        eligible: ``False``: a fallback call, the public function timed against the spec's first baseline (held to
            the family's target); ``True``: an eligible call, the public function against the fast route called
            directly, with as many rows as the smallest eligible batch on the device (``spec.limits(device)
            .min_rows``), measured on CUDA only (elsewhere the interpreter's own cost hides the dispatch).

    >>> class Built:
    ...     def build(self, seed=0, device=None): return (seed, device)
    >>> HostCase("host_x", Built()).build("cpu", seed=3)
    (3, 'cpu')
    """

    id: str
    case: Any
    rationale: str = ""
    eligible: bool = False

    def build(self, device=None, seed: int = 0):
        """The case built on ``device`` (what the spec's ``args`` takes)."""
        return self.case.build(seed=seed, device=device)


@dataclasses.dataclass(frozen=True)
class KernelBuild:
    """One binary of any op's kernel to compile for a GPU target (what an :class:`OpSpec`'s ``kernels`` may list):
    :func:`fastpath_lib.rmsnorm.compiled.facts` compiles it into the same row as RMSNorm's specializations (vector
    width, registers, spills).

    Args:
        kernel: a short name (``"fused_forward"``).
        source: ``"module:attribute"`` of the ``@triton.jit`` function.
        signature: ``((argument, type), ...)`` in the kernel's argument order (``"*fp16"``, ``"i32"``,
            ``"constexpr"``).
        constexprs: ``((name, value), ...)``.
        divisible: the arguments marked ``tt.divisibility = 16`` (the pointers of a 16-byte-aligned launch).
        dtype, weight_dtype: torch names (``"bfloat16"``; ``None`` for no weight).
        block, warps, rows_per_program: ``BLOCK_SIZE``, ``num_warps``, rows per program.
        aligned: a 16-byte-aligned launch.
        arch: compute capability as an integer (80, 90).
        label: a readable id (set from the others when empty).

    >>> KernelBuild("fwd", "m:k", (), (), (), "float16", "float16", 128, 4, 8, True, 90).label
    'fwd float16 w=float16 block=128 warps=4 rows=8 aligned sm_90'
    """

    kernel: str
    source: str
    signature: tuple
    constexprs: tuple
    divisible: tuple
    dtype: str
    weight_dtype: str | None
    block: int
    warps: int
    rows_per_program: int
    aligned: bool
    arch: int
    int_div16: bool = False
    label: str = ""

    def __post_init__(self):
        if not self.label:
            object.__setattr__(self, "label", f"{self.kernel} {self.dtype} w={self.weight_dtype or 'none'} block="
                               f"{self.block} warps={self.warps} rows={self.rows_per_program} "
                               f"{'aligned' if self.aligned else 'misaligned'} sm_{self.arch}")


@dataclasses.dataclass(frozen=True)
class OpSpec:
    """Everything the pipeline needs to know about one operator.

    Args:
        name: the registry name (``--op NAME``).
        function: the public, dispatched function (the fast path where the predicate holds, else the fallback).
        reference: the contract, in plain torch, with ``function``'s signature.
        args: ``args(built)`` -> the positional arguments of ``function`` for a
            :class:`~fastpath_lib.cases.BuiltCase` (a row-wise input built by the kit's case machinery).
        route: ``route(*args)`` -> ``"triton"`` or ``"fallback"``: the route ``function`` takes for those arguments.
        fast: the fast route called directly, with ``function``'s arguments (``None``: none to time on its own).
        predicate: the :class:`~fastpath_lib.eligibility.Predicate` deciding the route.
        boundary_base: the eligible base case (``CaseSpec`` fields) the predicate's boundary points change.
        limits: ``limits(device)`` -> the limits in force (what the predicate's boundaries read).
        context: ``context(*args)`` -> the predicate's context for a call (what ``predicate.evaluate`` takes).
        tolerances: dtype -> ``(atol, rtol)`` of ``function`` against ``reference``; for an op returning a tuple,
            either one pair for every output or a tuple of pairs, one per output (``(0.0, 0.0)``: bitwise).
        cases: the predeclared matrix (a sequence of :class:`OpCase`, or a callable returning one).
        bytes_moved: ``bytes_moved(rows, cols, dtype, pass_)`` -> the bytes a call of the fast route must move at least.
        baselines: name -> callable with ``function``'s signature; the first is *the* baseline outcomes compare to,
            every one is timed (the others are recorded rows, provider = their name; :data:`COMPILED` is
            ``torch.compile`` of the composite).
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
        host_cases: the calls the host-overhead family times (a sequence of :class:`HostCase`; empty: the matrix's
            cases expected to fall back at a decode size, :func:`fastpath_lib.bench.ophost.host_cases`).
        host_forms: name -> ``(composite, public)``: further forms the host-overhead family times on the same
            fallback calls (e.g. an in-place form against the in-place composite; :mod:`fastpath_lib.bench.ophost`).
        specialization: ``specialization(rows, cols, dtype)`` -> the compiled binary (or binaries) a call of ``fast``
            on a contiguous, 16-byte-aligned ``rows x cols`` input of ``dtype`` (a torch dtype) launches, as a dict of
            what keys it (kernel, ``BLOCK_SIZE``, ``num_warps``, rows per program, ...), read from the launcher's own
            rule without a GPU; equal dicts are one binary, ``None``: the call compiles nothing. The compile cost
            (:func:`fastpath_lib.bench.workload.compile_cost`) counts the distinct dicts over the matrix's cases
            expected to take the fast route and, on CUDA, calls ``fast`` on the first case of each twice in a fresh
            process with an empty Triton cache (``None`` here: the compile cost says the spec does not declare it).
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
            the fast route is timed only where the predicate takes it.
        fast_backward: ``fast_backward(dy, *args)`` -> the fast route's forward then backward launched directly (what
            the bench times as ``triton`` in a backward case; ``None``: the fast route is not timed there).
    """

    name: str
    function: Callable
    reference: Callable
    args: Callable[[Any], tuple]
    route: Callable[..., str]
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

    def __post_init__(self):
        if not self.name or not self.name.replace("_", "").isalnum():
            raise ValueError(f"an op name is letters, digits and underscores: {self.name!r}")
        if not self.baselines:
            raise ValueError(f"{self.name}: at least one baseline is needed (outcomes are read against the first)")

    def matrix(self) -> list[OpCase]:
        """The predeclared cases, checked: unique ids."""
        cases = list(self.cases() if callable(self.cases) else self.cases)
        ids = [c.id for c in cases]
        if len(set(ids)) != len(ids):
            raise ValueError(f"{self.name}: case ids repeat: {sorted({i for i in ids if ids.count(i) > 1})}")
        return cases

    @property
    def baseline(self) -> tuple[str, Callable]:
        """The first baseline, ``(name, callable)``."""
        return next(iter(self.baselines.items()))

    def output_tolerances(self, dtype, outputs: int) -> list[tuple[float, float]]:
        """``(atol, rtol)`` per output for ``dtype`` (``(0, 0)`` where the spec names none).

        >>> spec = OpSpec("t", abs, abs, tuple, str, baselines={"b": abs}, tolerances={"f": ((1, 2), (0, 0))})
        >>> spec.output_tolerances("f", 2), spec.output_tolerances("g", 1)
        ([(1, 2), (0, 0)], [(0.0, 0.0)])
        """
        tol = self.tolerances.get(dtype, (0.0, 0.0))
        per = list(tol) if tol and isinstance(tol[0], (tuple, list)) else [tuple(tol)] * outputs
        if len(per) != outputs:
            raise ValueError(f"{self.name}: {len(per)} tolerance pairs for {dtype}, but {outputs} outputs")
        return per

    def bytes_for(self, implementation: str, rows: int, cols: int, dtype, pass_: str = "forward") -> float:
        """Bytes ``implementation`` (a baseline's name, ``"fallback"`` or the fast route's ``"triton"``) moves."""
        model = self.bytes_models.get(implementation, self.bytes_moved)
        return model(rows, cols, dtype, pass_) if model is not None else float("nan")


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
        raise KeyError(f"no op named {name!r}; registered: {', '.join(names())}")
    if isinstance(entry, str):
        module, attr = entry.split(":")
        entry = _REGISTRY[name] = getattr(importlib.import_module(module), attr)
    return entry


def names() -> list[str]:
    """The registered op names, in registration order."""
    return list(_REGISTRY)


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
