"""Workload trace replay: the norm calls a model makes, each shape timed once, weighted by how often it occurs.

A shape sweep says how fast each shape is; a workload asks how often each shape is called. Serving a decoder model
makes two kinds of norm calls: a *prefill* forward normalizes every prompt token at once (``batch * prompt`` rows,
a few calls per request), and every *decode* step normalizes one new token per sequence (``batch`` rows, once per
generated token). :func:`serving_trace` writes such a trace down from the model's shape (two norms per layer and a
final one per forward); :func:`replay_trace` times each distinct call once, for an operator's first baseline and its
dispatched function side by side (:class:`~fastpath_lib.opspec.OpSpec`; default: the first registered op), and
weights by the count. An op that adds the residual before the norm (fused residual-add
+ RMSNorm) sits at the same places of the model, less one: vLLM's first norm of the first layer has no residual yet,
so that call is the plain norm. Its spec says so (``OpSpec.calls_per_forward``), and the trace counts its calls.

The totals are sums of the rows they summarize (``calls x time per call``), so the shares add up to 100 % and no
part can exceed the whole. On a CPU, rows whose route is the Triton kernel run in the interpreter and are *not
measured* (their times would say nothing about a GPU); rows on the fallback route are timed for real: that time is
the baseline on the CPU plus the dispatch's host cost, and the dispatch's extra is what the same Python costs on a
GPU host. Each row is timed by the kit's host method (:mod:`fastpath_lib.bench.hostmethod`): as many interleaved
blocks as the host table's, each about as long as the host table's block of decode calls (:data:`HOST_CALL_S` per
call), so a larger call gets fewer calls per block and no block outlasts a preemption-free slice. Times in
microseconds.

>>> [(c.phase, c.rows, c.count) for c in serving_trace(layers=2, prompt_tokens=16, decode_steps=4)]
[('prefill', 16, 5), ('decode', 1, 20)]
>>> [c.count for c in serving_trace(layers=2, prompt_tokens=16, decode_steps=4, spec=opspec.get("fused_add_rms_norm"))]
[4, 16]
"""

from __future__ import annotations

import dataclasses

import pandas as pd
import torch

from fastpath_lib import opspec, runtime
from fastpath_lib.bench.hostmethod import fastest_blocks, host_blocks
from fastpath_lib.bench.schema import GPU_LABEL, NOT_GPU
from fastpath_lib.bench.timing import gpu_measurement
from fastpath_lib.cases import BuiltCase, CaseSpec

__all__ = ["TraceCall", "serving_trace", "replay_trace", "call_args", "TRACE_COLUMNS"]

#: Columns of :func:`replay_trace`'s table.
TRACE_COLUMNS = ["phase", "shape", "dtype", "calls", "call_share", "route", "status", "baseline_us", "dispatched_us",
                 "baseline_total_us", "dispatched_total_us", "dispatch_extra_total_us", "baseline_time_share"]


@dataclasses.dataclass(frozen=True)
class TraceCall:
    """``count`` calls of ``rows x cols`` in ``dtype`` during ``phase``."""

    phase: str
    rows: int
    cols: int
    dtype: torch.dtype
    count: int

    @property
    def shape(self) -> str:
        return f"{self.rows}x{self.cols}"


def serving_trace(*, hidden: int | None = None, layers: int = 32, batch: int = 1, prompt_tokens: int = 512,
                  decode_steps: int = 128, dtype: torch.dtype = torch.bfloat16,
                  spec: opspec.OpSpec | None = None) -> list[TraceCall]:
    """The calls of ``spec``'s op (default: :func:`fastpath_lib.opspec.default`) in serving ``batch`` requests: one
    prefill forward, then ``decode_steps`` decode forwards.

    Each forward calls the op ``OpSpec.calls_per_forward(layers)`` times (when the spec leaves it out: ``2 * layers +
    1``, a norm before attention and before the MLP in every layer and once before the LM head). Each call's row is
    ``hidden`` wide (default: the spec's ``sweep_axes().hidden``). Defaults: 32 layers (Llama-2-7B-like), one request
    of 512 prompt tokens and 128 generated tokens, bf16.

    Returns:
        one :class:`TraceCall` per distinct call (prefill: ``batch * prompt_tokens`` rows; decode: ``batch`` rows).
    """
    spec = spec or opspec.default()
    hidden = hidden or spec.sweep_axes().hidden
    count = spec.calls_per_forward
    per_forward = count(layers) if count else 2 * layers + 1
    return [TraceCall("prefill", batch * prompt_tokens, hidden, dtype, per_forward),
            TraceCall("decode", batch, hidden, dtype, per_forward * decode_steps)]


def call_args(spec: opspec.OpSpec, rows: int, cols: int, dtype: torch.dtype, device: str, seed: int = 0) -> tuple:
    """``spec``'s arguments for a contiguous ``rows x cols`` call in ``dtype`` on ``device``.

    An op built from the plain :class:`~fastpath_lib.cases.CaseSpec` (``case_spec=None``: an input and a weight) gets
    values drawn on the device itself, without the case builder's poisoned guard buffers (nothing here checks them,
    and large sweeps build fast); an op with its own case class gets its builder's case.
    """
    if spec.case_spec is not None:
        return spec.args(spec.case_spec(rows=rows, cols=cols, dtype=dtype, device=device).build(seed=seed))
    g = torch.Generator(device=device).manual_seed(1000 + seed)
    x = torch.randn(rows, cols, generator=g, device=device, dtype=torch.float32).to(dtype)
    w = (1 + 0.5 * torch.randn(cols, generator=g, device=device, dtype=torch.float32)).to(dtype)
    case = CaseSpec(rows=rows, cols=cols, dtype=dtype, device=device)
    return spec.args(BuiltCase(case, x, (cols,), w, x, w, x, w))


#: About a decode fallback call's host time on a CPU: a row's blocks aim at the host table's calls per block times this.
HOST_CALL_S = 15e-6


def replay_trace(trace: list[TraceCall], *, spec: opspec.OpSpec | None = None, quick: bool = False,
                 rounds: int | None = None) -> pd.DataFrame:
    """Time each call of ``trace`` for ``spec``'s first baseline and its function and weight it by its count.

    Args:
        trace: the calls (:func:`serving_trace`).
        spec: the operator (default: :func:`fastpath_lib.opspec.default`).
        quick: fewer timing rounds (the host method's quick blocks).
        rounds: override the blocks of :func:`~fastpath_lib.bench.hostmethod.fastest_blocks`.

    Returns:
        :data:`TRACE_COLUMNS`, one row per call: the route this machine takes (asked of the predicate), the time
        per call of each provider (the fastest of interleaved blocks of calls, side by side) and the totals
        ``calls x time``;
        ``baseline_time_share`` is the row's share of the measured baseline total. ``attrs["totals"]`` holds the
        sums over the measured rows, how many calls were measured, ``complete`` (every row measured),
        ``gpu_measurement``, a ``label``, the ``op`` and its ``baseline``.

    Note:
        Without a GPU measurement (no CUDA, or the interpreter), Triton-route rows are ``not measured`` and the
        label says what the measured times are: CPU time, not a GPU measurement.
    """
    spec = spec or opspec.default()
    base_name, base = spec.baseline
    gpu = gpu_measurement()
    dev = "cuda" if runtime.cuda_available() else "cpu"
    blocks, calls_per_block = host_blocks(quick, rounds)
    sync = torch.cuda.synchronize if dev == "cuda" else None
    rows = []
    for call in trace:
        args = call_args(spec, call.rows, call.cols, call.dtype, dev, seed=call.rows * 7 + call.cols)
        route = spec.route(*args)
        row = {"phase": call.phase, "shape": call.shape, "dtype": str(call.dtype).replace("torch.", ""),
               "calls": call.count, "route": route}
        if route == "triton" and not gpu:
            row.update(status="not measured: the Triton route runs in the interpreter here")
        else:
            with torch.no_grad():
                res = fastest_blocks({"baseline": lambda a=args: base(*a),
                                      "dispatched": lambda a=args: spec.function(*a)}, blocks=blocks, number=None,
                                     warmup=20, sync=sync, block_s=calls_per_block * HOST_CALL_S)
            b, d = res["baseline"]["best_us"], res["dispatched"]["best_us"]
            row.update(status="ok", baseline_us=b, dispatched_us=d, baseline_total_us=b * call.count,
                       dispatched_total_us=d * call.count, dispatch_extra_total_us=(d - b) * call.count)
        rows.append(row)
    df = pd.DataFrame(rows).reindex(columns=TRACE_COLUMNS)
    df["call_share"] = df["calls"] / df["calls"].sum()
    ok = df["status"] == "ok"
    base_total = float(df.loc[ok, "baseline_total_us"].sum())
    df["baseline_time_share"] = df["baseline_total_us"] / base_total if base_total else float("nan")
    df.attrs["totals"] = {
        "calls": int(df["calls"].sum()), "measured_calls": int(df.loc[ok, "calls"].sum()),
        "baseline_total_us": base_total, "dispatched_total_us": float(df.loc[ok, "dispatched_total_us"].sum()),
        "dispatch_extra_total_us": float(df.loc[ok, "dispatch_extra_total_us"].sum()),
        "complete": bool(ok.all()), "gpu_measurement": gpu, "op": spec.name, "baseline": base_name,
        "label": (f"{GPU_LABEL} (time per call in a stream of calls, synchronized per block)" if gpu else
                  f"CPU time per call on this machine, {NOT_GPU}"),
    }
    return df
