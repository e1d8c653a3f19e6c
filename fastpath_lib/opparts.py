"""The parts an :class:`~fastpath_lib.opspec.OpSpec` is made of: its matrix cases (:class:`OpCase`), its host-cost
calls (:class:`HostCase`), its kernel builds for GPU targets (:class:`KernelBuild`), its sweep and trace widths
(:class:`Axes`), the tolerances its baselines are checked at where they are looser than its own
(:class:`BaselineTolerances`), and :class:`lazy`, a module a spec names without importing it.
:mod:`fastpath_lib.opspec` re-exports each; nothing here imports the rest of the kit.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Mapping
from typing import Any

__all__ = ["OpCase", "HostCase", "KernelBuild", "Axes", "BaselineTolerances", "MIN_CASES", "lazy", "per_output",
           "tolerance_pairs"]


#: The fewest cases a predeclared matrix is to have (the kit's coverage rule: :func:`fastpath_lib.bench.matrix.
#: coverage_rules`); an op's shorter matrix runs, and ``bench``, its notes and ``OpSpec.coverage_gaps()`` say so.
MIN_CASES = 12


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
            of the output, or the spec's ``fast_backward``; the incoming gradient ``dy`` has the shape and dtype of
            each output of the reference, which may differ from the input's; before timing, the public function's
            and the fast route's gradients are checked against the reference's, ``OpSpec.grad_tolerances``).
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
class Axes:
    """The row widths the sweep and the serving trace use (an :class:`OpSpec`'s ``axes``).

    Args:
        widths: the widths the row-threshold sweep times on a GPU.
        quick: the widths it times on a GPU with ``--quick``.
        off_gpu: the widths it times off a GPU (the interpreter: small).
        hidden: the serving trace's row width (the model's hidden size).

    >>> Axes((2048, 4096), (4096,), (256,), 4096).quick
    (4096,)
    """

    widths: tuple[int, ...]
    quick: tuple[int, ...]
    off_gpu: tuple[int, ...]
    hidden: int


@dataclasses.dataclass(frozen=True)
class BaselineTolerances:
    """The tolerances an op's baselines are checked at before they are timed, where they are looser than the op's
    own, and why (an :class:`OpSpec`'s ``baseline_tolerances``).

    The check is there to refuse a baseline that computes another function: its time would be no comparison. A
    mature implementation of the same function may still round an intermediate where the contract does not (vLLM's
    CUDA kernel for fused residual-add + RMSNorm normalizes the sum rounded to the input dtype, the contract the fp32
    sum) and so differ from the reference by more than the op's own routes may. Its bound is derived from that
    rounding, not picked: the rounding's relative error (half the dtype's ``eps``), carried through what the op
    computes from the rounded value, added to the op's tolerance.

    Args:
        tolerances: dtype -> ``(atol, rtol)``, or one pair per output (as ``OpSpec.tolerances``); a dtype not here
            is held to the op's own tolerances. No pair may be tighter than the op's own for that output.
        reason: which intermediate is rounded where, and how the bound follows from it (the PR note prints it).

    >>> BaselineTolerances({"f": (1, 2)}, "").reason
    Traceback (most recent call last):
    ValueError: BaselineTolerances: say why the baselines are held to looser tolerances than the op (reason)
    """

    tolerances: Mapping[Any, Any]
    reason: str

    def __post_init__(self):
        if not self.reason.strip():
            raise ValueError("BaselineTolerances: say why the baselines are held to looser tolerances than the op "
                             "(reason)")


def per_output(tol) -> bool:
    """A dtype's tolerance given as one ``(atol, rtol)`` pair per output (``((1e-3, 0), (0, 0))``)."""
    return bool(tol) and isinstance(tol[0], (tuple, list))


def tolerance_pairs(tol) -> list[tuple[float, float]]:
    """A dtype's tolerance as a list of ``(atol, rtol)`` pairs: one per output, or the one pair."""
    return [tuple(p) for p in tol] if per_output(tol) else [tuple(tol)]


class lazy:  # noqa: N801 - used like a module
    """A module imported on the first attribute read (a spec names its compiler or record without importing it:
    importing a spec compiles nothing and imports no Triton).

    >>> lazy("json").dumps([1])
    '[1]'
    """

    def __init__(self, module: str):
        self._name = module

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return getattr(importlib.import_module(self._name), attr)

    def __repr__(self) -> str:
        return f"lazy({self._name!r})"
