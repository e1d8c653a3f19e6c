"""RMSNorm's :class:`~fastpath_lib.opspec.OpSpec`: the first registered operator (``--op rms_norm``).

Every piece is the one the rest of the kit already uses (nothing is written again here): the public op and
``F.rms_norm`` as the contract, the predicate with its base case and limits, the Triton launcher as the fast route,
the tolerances of :mod:`fastpath_lib.testing`, the cost model beside this spec (:mod:`fastpath_lib.rmsnorm.cost`: the
bytes a call moves and the forward binary a launch compiles), every case of the predeclared matrix
(``bench/cases.json``: forward and backward, every layout; ``torch.compile`` of ``F.rms_norm`` the second baseline), the
specializations :mod:`fastpath_lib.rmsnorm.compiled` compiles for GPU targets, and the decoder step (the residual add,
then the norm). Nothing here imports the bench.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
import torch.nn.functional as F

from fastpath_lib.cases import CaseSpec
from fastpath_lib.opspec import COMPILED, Axes, HostCase, OpCase, OpSpec, compiled, lazy
from fastpath_lib.rmsnorm import cost
from fastpath_lib.rmsnorm import predicate as rms
from fastpath_lib.rmsnorm.op import explain, rms_norm
from fastpath_lib.testing import GRAD_TOLERANCES, TOLERANCES

__all__ = ["SPEC", "PR_TEXT", "MATRIX_GRAD_TOLERANCES", "HOST_CASES", "AXES", "matrix_cases", "compiled_rms_norm",
           "LAUNCHER_NEEDS", "launcher_unsupported"]

_CASES_FILE = Path(__file__).resolve().parents[1] / "bench" / "cases.json"


def matrix_cases() -> list[OpCase]:
    """Every case of the predeclared matrix (forward and backward, every layout), as :class:`OpCase` rows."""
    return [OpCase.from_entry(c) for c in json.loads(_CASES_FILE.read_text())["cases"]]


def _fast(x, normalized_shape, weight=None, eps=None):
    from fastpath_lib.rmsnorm import kernels  # on first use: the interpreter opt-in comes first

    eps = rms.default_eps(x.dtype) if eps is None else eps
    return kernels.forward(x.reshape(-1, x.shape[-1]), weight, eps).view(x.shape)


def _rows(t):
    return t if t.dim() == 2 else t.view(-1, t.shape[-1])


def _fast_backward(dy, x, normalized_shape, weight=None, eps=None):
    """The forward launcher, then the backward launcher, on the same rows: ``(dx, dw)``."""
    from fastpath_lib.rmsnorm import kernels

    eps = rms.default_eps(x.dtype) if eps is None else eps
    x2, w2 = _rows(x.detach()), weight.detach() if weight is not None else None
    kernels.forward(x2, w2, eps)
    return kernels.backward(_rows(dy), x2, w2, eps)


#: The gradients' tolerances against ``F.rms_norm``'s autograd in the matrix's backward cases: the contract tests'
#: (four times the output's), except fp32, whose ``dw`` sums up to 4096 rows in another order than the reference's
#: (the kernel's per-program partials, then a fixed-order reduction): about 1e-4 apart at 2048x2048 under the
#: interpreter, so ten times the table's atol and rtol.
MATRIX_GRAD_TOLERANCES = {**GRAD_TOLERANCES,
                          torch.float32: tuple(10 * t for t in GRAD_TOLERANCES[torch.float32])}

#: ``torch.compile`` of ``F.rms_norm`` (built on first use; the bench resets dynamo per case)
compiled_rms_norm = compiled(F.rms_norm)


#: Predicate categories whose conditions the kernel itself needs (the rest, and ``min_rows``, exist for speed or
#: policy: the launcher computes correctly without them).
LAUNCHER_NEEDS = ("tensor kind", "device", "dtype", "shape", "stride")


def launcher_unsupported(x, normalized_shape, weight=None, eps=None) -> str | None:
    """Why the kernel launchers cannot take this input, asked of the predicate; ``None`` when they can.

    The launchers need every condition of the :data:`LAUNCHER_NEEDS` categories except the row threshold; alignment,
    architecture and mode conditions decide speed or policy, not whether the kernel computes the right thing.
    """
    decision = explain(x.detach(), normalized_shape, weight, eps)
    needed = [r for r in decision.reasons
              if (name := r.split(":", 1)[0]) != "min_rows" and rms.PREDICATE[name].category in LAUNCHER_NEEDS]
    return "; ".join(needed) or None


def _kernels(widths=None, archs=(80, 90)) -> list:
    """The specializations compiled for GPU targets: at ``widths`` (default: the matrix's widths that fit a row),
    forward and backward, the three dtypes, a weight of the input's dtype, for ``archs``."""
    from fastpath_lib.rmsnorm import compiled

    if widths is None:
        widths = sorted({c.cols for c in matrix_cases() if c.cols <= rms.MAX_COLS})
    return compiled.specializations(widths, archs=tuple(archs), weights=("same",))


def _capture(**kwargs) -> dict:
    from fastpath_lib.rmsnorm import graph_capture

    return graph_capture.capture_op("rms_norm", **kwargs)


#: The widths RMSNorm's sweep times (Llama-family hidden sizes) and the serving trace's hidden size (Llama-2-7B).
AXES = Axes(widths=(2048, 4096, 8192), quick=(4096,), off_gpu=(256,), hidden=4096)


def _decoder_step(fn, delta, residual, weight, eps):
    """A pre-norm block's residual add, then ``fn`` (the op or ``F.rms_norm``) on the sum: ``(normed, sum)``."""
    s = residual + delta
    return fn(s, (s.shape[-1],), weight, eps), s


def _arch(cap: tuple[int, int]) -> str:
    return f"sm_{cap[0]}{cap[1]}"


def _eligibility() -> list[str]:
    """The PR note's eligibility section body: limits and row thresholds read when the note is drafted."""
    rows_rule = ", ".join(f"{_arch(k)}: {v}" for k, v in sorted(rms.CUDA_MIN_ROWS.items())) or \
        f"none recorded yet, conservative default {rms.DEFAULT_CUDA_MIN_ROWS}"
    return [f"Fast path when every condition holds (max cols {rms.MAX_COLS}; CUDA row threshold per arch: "
            f"{rows_rule}). Otherwise `F.rms_norm` runs, so a limit never becomes a new error.", "",
            rms.PREDICATE.markdown_table(), "",
            "Modes that keep the fast path: " + "; ".join(f"**{k}** ({v})" for k, v in rms.ALLOWED_MODES.items()) + "."]


def _dtypes() -> str:
    names = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}
    return "/".join(names.get(str(d).replace("torch.", ""), str(d)) for d in rms.SUPPORTED_DTYPES)


def _maintenance() -> list[str]:
    dtypes = _dtypes()
    return [f"- Surface: {dtypes}, {_arch(rms.MIN_CAPABILITY)} and newer, rows <= {rms.MAX_COLS} columns wide; "
            "everything else falls back.",
            "- Fallback: `force_fallback()` inside a block; `FASTPATH_FORCE_FALLBACK=1` for a process started with "
            "it (read when the kit is imported; no code change).",
            "- New architectures: {owner} re-runs the GPU sweep and records the arch's row threshold "
            "(`python -m fastpath_lib threshold RESULTS_DIR`); until then the default applies."]


def _limitations() -> list[str]:
    """The PR note's limitations: the capture record (``capture.json``, what the ``cuda_graph_capture`` condition
    reads) and the surface's edges, read when the note is drafted."""
    from fastpath_lib.rmsnorm import capture

    passed = sorted((_arch(cap), path) for cap, op, path in capture.VERIFIED if op == "rms_norm")
    if passed:
        where = ", ".join(f"{arch} ({path})" for arch, path in passed)
        graphs = (f"- CUDA-graph capture takes the fast path only where its recorded capture test passed "
                  f"(`capture.json`: {where}); elsewhere a captured call takes `F.rms_norm`.")
    else:
        graphs = ("- CUDA-graph capture takes `F.rms_norm` on every architecture: `capture.json` records no passed "
                  "capture test.")
    return [graphs, f"- Normalization over more than the last dimension, dtypes other than {_dtypes()} and rows wider "
                    f"than {rms.MAX_COLS} columns take `F.rms_norm`."]


#: The calls the host-overhead family times (:mod:`fastpath_lib.bench.ophost`): four fallback calls against
#: ``F.rms_norm``, and on CUDA the smallest eligible batch of 256-wide fp16 rows (host-bound, not memory-bound)
#: against the launcher.
HOST_CASES = (
    HostCase("host_decode_m1_fp16", CaseSpec(rows=1, cols=4096, dtype=torch.float16), "M=1 decode token, fp16"),
    HostCase("host_decode_m1_bf16_w32", CaseSpec(rows=1, cols=4096, dtype=torch.bfloat16, weight=torch.float32),
             "M=1 decode token, bf16 input with an fp32 weight (mixed-precision checkpoints)"),
    HostCase("host_batch_4x2048_fp32", CaseSpec(rows=4, cols=2048, dtype=torch.float32),
             "small fp32 batch below the row threshold"),
    HostCase("host_transposed_64x64", CaseSpec(rows=64, cols=64, dtype=torch.float32, layout="transposed"),
             "a transposed input: last dimension not contiguous"),
    HostCase("host_eligible_fp16", CaseSpec(rows=1, cols=256, dtype=torch.float16),
             "eligible route: host time of the dispatch before its launch vs the launcher", eligible=True),
)


#: The PR note's RMSNorm sentences (keys: ``fastpath_lib.bench.report.PR_TEXT_KEYS``).
PR_TEXT = {
    "noun": "RMSNorm",
    "summary": "`fastpath_lib.rms_norm` keeps `torch.nn.functional.rms_norm`'s contract and runs Triton forward and "
               "backward kernels where an eligibility predicate holds; every other call takes `F.rms_norm` unchanged.",
    "eligibility": _eligibility,
    "mechanism": "The forward reads each row of x and the weight once and writes y once (narrow rows several to a "
                 f"program, so every thread moves {rms.ALIGN_BYTES}-byte vectors); the backward reads dy and x, writes "
                 "dx and an fp32 partial dw reduced in a fixed order, and reads each row a second time (served from "
                 "cache or not: unmeasured). Bytes moved are counted as each input read once and each output written "
                 "once (the minimum any implementation must move).",
    "traffic": "the weight is re-read by every program",
    "traffic_backward": "the backward reads each row twice",
    "host": "Host cost of the dispatch: not measured in this run (`python -m fastpath_lib bench --family host`).",
    "compiled": "Compiled code (vector width, registers, spills): not recorded in this run (`bench` records it unless "
                "`--quick`; `evidence` always).",
    "route_differs": "differs (the interpreter's row threshold)",
    "maintenance": _maintenance,
    "limitations": _limitations,
    "vllm_op": "rms_norm",  # the vLLM IR op it provides (fastpath_lib.vllm_plugin)
}


SPEC = OpSpec(
    name="rms_norm",
    function=rms_norm,
    reference=F.rms_norm,
    args=lambda built: built.args(),
    route=lambda x, normalized_shape, weight=None, eps=None: explain(x, normalized_shape, weight, eps).route,
    fast=_fast,
    predicate=rms.PREDICATE,
    boundary_base=rms.BASE_CASE,
    limits=rms.limits_for,
    context=rms.make_call,
    tolerances=TOLERANCES,
    grad_tolerances=MATRIX_GRAD_TOLERANCES,
    cases=matrix_cases,
    bytes_moved=cost.bytes_moved,
    baselines={"F.rms_norm": F.rms_norm, COMPILED: compiled_rms_norm},
    kernels=_kernels,
    compiler=lazy("fastpath_lib.rmsnorm.compiled"),
    # the forward binary (what the compile cost of any op counts); RMSNorm's own compile cost also asks for the
    # backward's (``kernel="bwd"``, with the GPU's multiprocessor count)
    specialization=lambda rows, cols, dtype, kernel="fwd", sms=None: cost.binary(kernel, rows, cols, dtype, sms),
    decoder_step=_decoder_step,
    fast_unsupported=launcher_unsupported,
    fast_backward=_fast_backward,
    host_cases=HOST_CASES,
    axes=AXES,
    lower_threshold=rms.row_threshold,
    thresholds=lazy("fastpath_lib.rmsnorm.thresholds"),
    capture=_capture,
    title="RMSNorm: Triton fast path behind an eligibility predicate",
    pr_text=PR_TEXT,
)
