"""Fused residual-add + RMSNorm's :class:`~fastpath_lib.opspec.OpSpec`: the second registered operator
(``--op fused_add_rms_norm``).

The pieces are the op's own (:data:`fastpath_lib.fused.spec.FUSED_SPEC`): vLLM's native function as the contract,
the predicate, the Triton route called directly, the tolerances (the output within one ulp, the new residual
**bitwise**), the case class that builds ``x``, a residual from another seed and the weight
(:class:`~fastpath_lib.fused.cases.FusedCaseSpec`). What this module adds is the predeclared matrix
(:func:`matrix_cases`), the baselines a vLLM reviewer asks for, the bytes model of each implementation, the
kernel specializations compiled for GPU targets (:func:`specializations`), the forward binary a launch compiles
(:func:`forward_binary`, what the compile cost counts and launches) and the decoder step (the op itself: it is the
residual add and the norm of vLLM's pre-norm block).

Baselines, each checked against the contract before it is timed (one that differs computes another function and is
not timed: :func:`fastpath_lib.bench.opbench.baseline_differs`); outcomes are read against the first. They are held
to the tolerances of an implementation that normalizes the sum rounded to x's dtype
(:data:`fastpath_lib.fused.reference.ROUNDED_SUM_TOLERANCES`: the op's ``rtol`` plus that rounding carried through the
normalization, about two ulps of fp16 and bf16 where the op's own routes get one; the new residual bitwise), because
two of them round the sum there: ``add_then_kit_rms_norm`` and vLLM's own CUDA kernel.

* ``unfused_eager``: vLLM's native function run eagerly: the fp32 add, then the RMSNorm composite (what a model
  runs without the fused op);
* ``compiled``: ``torch.compile`` of that same function (inductor fuses the add, the reduction and the scaling: the
  question "does the kernel beat the compiler's own fusion?");
* ``add_then_kit_rms_norm``: an eager add in x's dtype, then the kit's own RMSNorm (the fusion's gain over the kit's
  unfused fast path; it normalizes the *rounded* sum);
* ``vllm_c``: vLLM's own CUDA kernel, its default for this op outside Inductor (the ``vllm_c`` provider of
  ``vllm.ir.ops.fused_add_rms_norm``), called as vLLM's functional overload calls an in-place provider: clones of
  ``x`` and the residual, then the kernel in place (8 passes: inside a compiled vLLM model the clones of donated
  inputs are removed, so compare kernels by the bytes column too); its kernel stores the sum in x's dtype and
  normalizes that rounded sum. Where vLLM or a GPU is missing its rows are
  skipped and say why. The report reads the dispatched op against every further baseline (``compiled``, ``vllm_c``).

Bytes (:func:`fastpath_lib.fused.reference.bytes_moved`): the fused kernel and ``compiled`` move 4 passes over
``rows x cols`` (read x and residual, write the sum and the output; for ``compiled`` this assumes inductor's one-kernel
fusion, check with ``TORCH_LOGS=output_code``); the unfused pairs and the dispatched call on the fallback move 5
(the sum is written, then read again). Eager's fp32 temporaries move more than that minimum.

The matrix times the functional form. The in-place form (``fused_add_rms_norm_``) is what vLLM calls; it is not
timed here, because an in-place call rewrites its inputs, so repeated calls on rotating input sets would time a
drifting input (the residual grows each call), and restoring the inputs before each call would time a copy too.
Its kernel is the same launch with ``Y = X`` and ``S = R`` (the same bytes).

>>> len(matrix_cases()) >= 12, SPEC.name
(True, 'fused_add_rms_norm')
"""

from __future__ import annotations

import torch

from fastpath_lib.fused import reference as ref
from fastpath_lib.fused.cases import FusedCaseSpec
from fastpath_lib.fused.op import explain, fused_add_rms_norm, fused_add_rms_norm_
from fastpath_lib.fused.predicate import BASE_CASE, PREDICATE, make_call
from fastpath_lib.fused.spec import FUSED_SPEC
from fastpath_lib.bench.schema import FALLBACK, NEUTRAL, WIN
from fastpath_lib.opspec import (COMPILED, BaselineTolerances, BaselineUnavailable, HostCase, KernelBuild, OpCase,
                                  OpSpec, compiled, lazy)
from fastpath_lib.rmsnorm.limits import MAX_COLS, limits_for
from fastpath_lib.rmsnorm.op import rms_norm
from fastpath_lib.rmsnorm.predicate import row_threshold
from fastpath_lib.rmsnorm.spec import AXES

__all__ = ["SPEC", "EPS", "HOST_CASES", "BASELINE_TOLERANCES", "matrix_cases", "unfused_eager", "compiled_native",
           "add_then_kit_rms_norm", "vllm_c", "specializations", "forward_binary", "fused_bytes", "unfused_bytes",
           "vllm_c_bytes"]

#: The eps every matrix case passes (vLLM passes the model's ``variance_epsilon`` explicitly; 1e-6 is Llama's).
EPS = 1e-6

_THRESHOLD = ("below the row threshold the fused op inherits from RMSNorm (1024 rows on CUDA until a recorded sweep "
              "lowers it), so the composite runs")
_VS_COMPILE = "against torch.compile (recorded, not classified) expected near parity: inductor fuses the same 4 passes"

_CASES = (
    # id, rows, cols, dtype, expected, rationale, quick shape
    ("decode_m1_4096_bf16", 1, 4096, "bfloat16", FALLBACK,
     f"M=1 decode token (Llama-3-8B hidden size): {_THRESHOLD}; it must keep the unfused pair's speed, and under "
     "CUDA-graph capture the kit's op takes the fallback until its own capture test passed on the architecture (the "
     "vLLM patch's path refuses neither capture nor small batches)", (1, 256)),
    ("decode_b16_4096_bf16", 16, 4096, "bfloat16", FALLBACK,
     f"small decode batch: 128 KiB per pass, launch-bound; {_THRESHOLD}", (4, 256)),
    ("decode_b256_8192_fp16", 256, 8192, "float16", FALLBACK,
     f"large decode batch at a 70B width: {_THRESHOLD}; the fused op's own sweep decides whether to lower it",
     (4, 512)),
    ("batch_1024_4096_bf16", 1024, 4096, "bfloat16", NEUTRAL,
     "at the row threshold, RMSNorm's predicted break-even: 8 MiB per pass, where the eager pair's extra launches "
     "and the dispatch cost about what the saved pass gains",
     (8, 256)),
    ("prefill_2048x2048_fp16", 2048, 2048, "float16", WIN,
     "mid-size prefill: memory-bound, the fused pass reads x and r once instead of the eager chain's fp32 round "
     "trips", (8, 128)),
    ("prefill_4096x4096_bf16", 4096, 4096, "bfloat16", WIN,
     f"large prefill, memory-bound: 4 passes instead of the eager pair's 5 or more; {_VS_COMPILE}", (16, 512)),
    ("prefill_4096x5120_fp16", 4096, 5120, "float16", WIN,
     "a width that is not a power of two (13B): the block is 8192 and 3/8 of the lanes are masked, still "
     "memory-bound", (16, 320)),
    ("prefill_8192x8192_bf16", 8192, 8192, "bfloat16", WIN,
     f"far larger than L2: the bandwidth ceiling, where 4 passes against 5 is the whole saving; {_VS_COMPILE}",
     (16, 1024)),
    ("prefill_12288x4096_fp32", 12288, 4096, "float32", WIN,
     "fp32 activations: no rounding, but the eager pair still writes and re-reads the fp32 sum and its square",
     (16, 256)),
    ("narrow_65536x128_fp32", 65536, 128, "float32", WIN,
     "128-wide rows, many rows per program: the eager pair's launches dominate; the region's lower width edge",
     (32, 128)),
    (f"wide_2048x{MAX_COLS}_bf16", 2048, MAX_COLS, "bfloat16", NEUTRAL,
     "the widest eligible row (MAX_COLS): x, r and the fp32 sum held per program, register pressure that may spill "
     "and cancel the saved pass (the compiled facts show whether it spills)", (8, MAX_COLS)),
    ("odd_4096x4095_fp16", 4096, 4095, "float16", FALLBACK,
     "odd width: row stride 8190 bytes, not a multiple of 16, so no 16-byte vectors; the composite runs", (16, 255)),
    ("toowide_1024x32768_bf16", 1024, 32768, "bfloat16", FALLBACK,
     f"rows wider than MAX_COLS ({MAX_COLS} columns): one program cannot hold the row; the composite runs",
     (8, 32768)),
)


def matrix_cases() -> list[OpCase]:
    """The predeclared matrix: what each case is expected to do **on a CUDA GPU** against ``unfused_eager``
    (predictions, never a claim; off a GPU every outcome reads unmeasured)."""
    return [OpCase(i, r, c, d, e, why, q) for i, r, c, d, e, why, q in _CASES]


def unfused_eager(x, residual, weight=None, eps=None):
    """vLLM's native function, eager: the fp32 add, then the RMSNorm composite (the contract itself)."""
    return ref.native(x, residual, weight, eps)


#: ``torch.compile`` of :func:`unfused_eager`'s composite (built on first use; the bench resets dynamo per case)
compiled_native = compiled(ref.native)


def add_then_kit_rms_norm(x, residual, weight=None, eps=None):
    """An eager add in x's dtype, then the kit's RMSNorm: ``(rms_norm(x + residual), x + residual)``."""
    s = x + residual
    return rms_norm(s, (s.shape[-1],), weight, eps), s


#: What the baselines are checked at: the output as an implementation that normalizes the rounded sum may give it, the
#: new residual bitwise (fp32: the op's own tolerances).
BASELINE_TOLERANCES = BaselineTolerances(
    {d: (tol, (0.0, 0.0)) for d, tol in ref.ROUNDED_SUM_TOLERANCES.items()},
    "add_then_kit_rms_norm and vLLM's CUDA kernel normalize the sum rounded to x's dtype where the contract "
    "normalizes the fp32 sum; that rounding (relative error u = eps/2 per element), carried through the "
    "normalization, adds 2u/(1-u) to the output's rtol (about two ulps of fp16 and bf16 where the op's own routes "
    "get one), and the new residual, that same rounded sum, stays bitwise")


def _vllm_c_impl(x):
    """vLLM's ``vllm_c`` provider of ``fused_add_rms_norm``; :class:`BaselineUnavailable`, saying why, where it
    cannot run."""
    if not x.is_cuda:
        raise BaselineUnavailable(f"vllm_c not run: vLLM's CUDA kernel needs CUDA tensors (this run's are on "
                                  f"{x.device})")
    try:
        import vllm.kernels  # noqa: F401  (registers vllm_c and loads vLLM's compiled _C)
        from vllm import ir
    except Exception as exc:  # noqa: BLE001 - not installed, or its compiled extension does not load with this torch
        raise BaselineUnavailable(f"vllm_c not run: vLLM's kernels do not import here ({type(exc).__name__}: "
                                  f"{exc})"[:300]) from None
    impl = ir.ops.fused_add_rms_norm.impls.get("vllm_c")
    if impl is None or not impl.supported:
        raise BaselineUnavailable("vllm_c not run: vLLM reports its vllm_c provider unsupported on this platform")
    return impl


def vllm_c(x, residual, weight=None, eps=None):
    """vLLM's CUDA kernel through vLLM's functional overload (``func_impl_fn``: clones x and the residual, then the
    in-place kernel); the weight in x's dtype, as the kernel requires."""
    impl = _vllm_c_impl(x)
    eps = EPS if eps is None else float(eps)
    return impl.func_impl_fn(x, residual, weight, eps)


def _element_size(dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def fused_bytes(rows: int, cols: int, dtype, pass_: str = "forward") -> int:
    """The fused kernel's bytes: 4 passes over ``rows x cols`` and the weight once."""
    return ref.bytes_moved(rows, cols, _element_size(dtype), _element_size(dtype), fused=True)


def unfused_bytes(rows: int, cols: int, dtype, pass_: str = "forward") -> int:
    """An unfused pair's bytes: 5 passes (the sum written, then read again) and the weight once."""
    return ref.bytes_moved(rows, cols, _element_size(dtype), _element_size(dtype), fused=False)


def vllm_c_bytes(rows: int, cols: int, dtype, pass_: str = "forward") -> int:
    """``vllm_c`` through the functional overload: the clones of x and the residual (4 passes), then the kernel's 4."""
    return fused_bytes(rows, cols, dtype) + 4 * rows * cols * _element_size(dtype)


_T = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}
_KERNELS = "fastpath_lib.fused.kernels:fused_add_rms_norm_{}_kernel"


def _signature(kernel: str, dtype: str) -> tuple[tuple[str, str], ...]:
    """The fused kernel's arguments and types (the weight of x's dtype), in its own order."""
    t = "*" + _T[dtype]
    if kernel == "forward":
        pointers = [("X_ptr", t), ("R_ptr", t), ("W_ptr", t), ("Y_ptr", t), ("S_ptr", t)]
        ints = ["X_row_stride", "R_row_stride", "Y_row_stride", "S_row_stride", "n_rows", "n_cols"]
        consts = ["HAS_WEIGHT", "ROWS_PER_PROGRAM", "BLOCK_SIZE", "VEC"]
    else:
        pointers = [("DY_ptr", t), ("DS_ptr", t), ("X_ptr", t), ("R_ptr", t), ("W_ptr", t), ("DX_ptr", t),
                    ("DW_partial_ptr", "*fp32")]
        ints = ["X_row_stride", "R_row_stride", "n_rows", "n_cols"]
        consts = ["ROWS_PER_PROGRAM", "HAS_WEIGHT", "HAS_DS", "BLOCK_SIZE"]
    return (*pointers, *((n, "i32") for n in ints), ("eps", "fp32"), *((n, "constexpr") for n in consts))


def specializations(widths=None, *, archs=(80, 90), dtypes=("float16", "bfloat16", "float32"),
                    kernels=("forward", "backward")) -> list:
    """The fused kernels' binaries for GPU targets, as :class:`~fastpath_lib.opspec.KernelBuild`: at the
    matrix's eligible widths (default), 16-byte aligned, a weight of x's dtype; the forward with the launcher's
    block, warps, rows per program and ``VEC``, the backward with a gradient into the residual and 4 rows per
    program (a loop). :func:`fastpath_lib.rmsnorm.compiled.facts` compiles them (vector width, registers, spills).

    >>> [b.label for b in specializations([4096], archs=(90,), dtypes=("bfloat16",), kernels=("forward",))]
    ['fused_forward bfloat16 w=bfloat16 block=4096 warps=8 rows=1 aligned sm_90']
    """
    from fastpath_lib.fused import launch as fused_launch
    from fastpath_lib.rmsnorm import launch

    if widths is None:
        widths = sorted({c.cols for c in matrix_cases() if c.expected != FALLBACK})
    out = []
    for arch in archs:
        for kernel in kernels:
            for n in widths:
                block, warps = fused_launch.launch_settings(n, kernel)
                rows = launch.forward_rows_per_program(n) if kernel == "forward" else 4
                for dtype in dtypes:
                    size = _element_size(getattr(torch, dtype))
                    if launch.vector_elements(size, n, (n,), (0,)) <= 1:
                        continue  # no aligned launch at this width
                    sig = _signature(kernel, dtype)
                    const = (("HAS_WEIGHT", True), ("ROWS_PER_PROGRAM", rows), ("BLOCK_SIZE", block)) + (
                        (("VEC", 16 // size),) if kernel == "forward" else (("HAS_DS", True),))
                    div = tuple(name for name, ty in sig if ty.startswith("*"))
                    out.append(KernelBuild(f"fused_{kernel}", _KERNELS.format("fwd" if kernel == "forward" else "bwd"),
                                           sig, const, div, dtype, dtype, block, warps, rows, True, arch))
    return out


def forward_binary(rows: int, cols: int, dtype) -> dict | None:
    """The fused forward binary a launch on a contiguous, 16-byte-aligned ``rows x cols`` input of ``dtype`` compiles
    (the launcher's block, warps, rows per program and ``VEC``, a weight); ``None`` above ``MAX_COLS``.

    >>> b = forward_binary(16, 4096, torch.bfloat16)
    >>> b["kernel"], b["BLOCK_SIZE"], b["num_warps"], b["ROWS_PER_PROGRAM"], b["VEC"]
    ('fused_forward', 4096, 8, 1, 8)
    """
    from fastpath_lib.rmsnorm import launch

    if cols > MAX_COLS:
        return None
    block, warps = launch.launch_settings(cols, "forward")
    size = _element_size(dtype)
    return {"kernel": "fused_forward", "dtype": str(dtype).replace("torch.", ""), "BLOCK_SIZE": block,
            "num_warps": warps, "ROWS_PER_PROGRAM": launch.forward_rows_per_program(cols),
            "VEC": launch.vector_elements(size, cols, (cols,), (0,))}


def _capture(**kwargs) -> dict:
    from fastpath_lib.rmsnorm import graph_capture

    return graph_capture.capture_op("fused_add_rms_norm", **kwargs)


#: The calls the host-overhead family times (:mod:`fastpath_lib.bench.ophost`), each in the functional and the in-place
#: form: vLLM's decode calls, below the row threshold, against the unfused pair (and the in-place composite).
HOST_CASES = (
    HostCase("host_decode_m1_4096_bf16", FusedCaseSpec(rows=1, cols=4096, dtype=torch.bfloat16),
             f"M=1 decode token (Llama-3-8B hidden size): {_THRESHOLD}"),
    HostCase("host_decode_b16_4096_bf16", FusedCaseSpec(rows=16, cols=4096, dtype=torch.bfloat16),
             f"small decode batch: {_THRESHOLD}"),
)


SPEC = OpSpec(
    name=FUSED_SPEC.name,
    function=fused_add_rms_norm,
    reference=FUSED_SPEC.reference,
    args=lambda case: (*case.args(), EPS),
    route=lambda x, residual, weight=None, eps=None: explain(x, residual, weight, eps).route,
    fast=FUSED_SPEC.fast_route,
    predicate=PREDICATE,
    boundary_base=BASE_CASE,
    limits=limits_for,
    context=make_call,
    tolerances={d: (tol, (0.0, 0.0)) for d, tol in FUSED_SPEC.tolerances.items()},
    cases=matrix_cases,
    bytes_moved=fused_bytes,
    baselines={"unfused_eager": unfused_eager, COMPILED: compiled_native,
               "add_then_kit_rms_norm": add_then_kit_rms_norm, "vllm_c": vllm_c},
    baseline_tolerances=BASELINE_TOLERANCES,
    kernels=specializations,
    compiler=lazy("fastpath_lib.rmsnorm.compiled"),
    specialization=forward_binary,
    # where vLLM's fused op sits: RMSNorm's widths; its row threshold is RMSNorm's (the sweep lowers that one), and
    # its sweep proposes nothing to record (thresholds.json holds RMSNorm's)
    axes=AXES,
    lower_threshold=row_threshold,
    capture=_capture,
    decoder_step=lambda fn, delta, residual, weight, eps: fn(delta, residual, weight, eps),
    # vLLM's Llama: every norm but layer 0's input norm (no residual yet: the plain norm) adds the residual, the LM
    # head's norm included
    calls_per_forward=lambda layers: 2 * layers,
    title="Fused residual-add + RMSNorm: one Triton pass behind an eligibility predicate (vLLM's contract)",
    pr_text={"vllm_op": "fused_add_rms_norm",  # the vLLM IR op it provides (fastpath_lib.vllm_plugin)
             "traffic": "the weight is re-read by every program"},
    case_spec=FusedCaseSpec,
    bytes_models={"unfused_eager": unfused_bytes, COMPILED: fused_bytes, "add_then_kit_rms_norm": unfused_bytes,
                  "vllm_c": vllm_c_bytes, "fallback": unfused_bytes},
    host_forms={"inplace": (FUSED_SPEC.reference_inplace, fused_add_rms_norm_)},
    host_cases=HOST_CASES,
    note="times the functional form fused_add_rms_norm; the in-place form vLLM calls (fused_add_rms_norm_) is not "
         "timed: it rewrites its inputs, so repeated calls would time drifting inputs (same kernel, same bytes)",
)
