"""The predeclared matrix of any registered operator (:class:`~fastpath_lib.opspec.OpSpec`), timed and classified.

:func:`run_op` times, for each of a spec's cases, its first baseline (provider ``baseline``), its public function
(``dispatched``, with the route it took) and its fast route called directly (``triton``), with the harness's timer
and settings, and returns rows of the results schema (:data:`~fastpath_lib.bench.schema.CSV_COLUMNS`) carrying the
run's GPU-measurement flag; :func:`~fastpath_lib.bench.analysis.classify`, the summary table, the boundary plot and
the results folders read them as they read RMSNorm's. Each case's output is checked against the spec's reference
with the spec's tolerance before anything is timed.
"""

from __future__ import annotations

import json
import math

import torch

from fastpath_lib import runtime
from fastpath_lib.bench.analysis import classify
from fastpath_lib.bench.metadata import environment
from fastpath_lib.bench.schema import empty_row, measurement_label
from fastpath_lib.bench.timing import gpu_measurement, quantile, settings_for, time_callable
from fastpath_lib.cases import CaseSpec
from fastpath_lib.opspec import OpCase, OpSpec

__all__ = ["run_op", "op_environment"]


def _check(spec: OpSpec, args: tuple, dtype: torch.dtype) -> str | None:
    """``None`` when the public function matches the reference within the spec's tolerance, else why not."""
    with torch.no_grad():
        got, want = spec.function(*args), spec.reference(*args)
    atol, rtol = spec.tolerances.get(dtype, (0.0, 0.0))
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"output {tuple(got.shape)} {got.dtype}, reference {tuple(want.shape)} {want.dtype}"
    if not torch.allclose(got.float(), want.float(), atol=atol, rtol=rtol):
        err = (got.float() - want.float()).abs().max().item()
        return f"max error {err:.3g} over atol {atol}, rtol {rtol}"
    return None


def _row(spec: OpSpec, case: OpCase, provider: str, quick: bool, gpu: bool, ran: torch.Tensor, **kw) -> dict:
    cols = ran.shape[-1]
    rows = ran.numel() // cols if cols else 0  # the shape the timed input had, not the one asked for
    return empty_row(case_id=case.id, family=spec.name, provider=provider, **{"pass": "forward"}, rows=rows,
                     cols=cols, dtype=case.dtype, layout="contiguous", pad=0, offset=0,
                     declared_shape=f"{case.rows}x{case.cols}", expected=case.expected, rationale=case.rationale,
                     gpu_measurement=gpu, quick=quick, **kw)


def op_environment(spec: OpSpec, cases: list[OpCase], settings: dict, gpu: bool) -> dict:
    """``environment.json`` of an op's matrix run: the machine, the harness settings, the op and its cases."""
    env = environment(dict(settings, providers=["baseline", "dispatched", "triton"], cases=len(cases)))
    env["gpu_measurement"] = gpu
    env["measurement_label"] = measurement_label(env)
    env["op"] = spec.name
    env["baseline"] = spec.baseline[0]
    env["declared_cases"] = [c.id for c in cases]
    return env


def run_op(spec: OpSpec, *, quick: bool = True, only: list[str] | None = None, settings: dict | None = None,
           log=None):
    """Time and classify ``spec``'s predeclared matrix on this machine.

    Args:
        spec: the operator.
        quick: the cases' quick shapes and the harness's quick budgets.
        only: case ids to run (default: all).
        settings: harness settings (default :func:`~fastpath_lib.bench.timing.settings_for`).
        log: ``callable(str)`` for one line per timed provider.

    Returns:
        a classified DataFrame (``attrs["environment"]`` set); a case whose output disagrees with the reference
        gets ``status="error"`` rows and is not timed.
    """
    import pandas as pd

    declared = spec.matrix()
    cases = [c for c in declared if only is None or c.id in only]
    settings = settings or settings_for(quick)
    gpu = gpu_measurement()
    device = runtime.kernel_device()
    env = op_environment(spec, declared, settings, gpu)
    base_name, base = spec.baseline
    out = []
    for case in cases:
        rows, cols = case.dims(quick)
        dtype = getattr(torch, case.dtype)
        sets = [spec.args(CaseSpec(rows=rows, cols=cols, dtype=dtype, device=device).build(seed=100 + i))
                for i in range(max(1, settings["input_sets"]))]
        route = spec.route(*sets[0])
        nbytes = spec.bytes_moved(rows, cols, dtype, "forward") if spec.bytes_moved else math.nan
        common = dict(route=route, bytes_moved=nbytes, input_sets=len(sets))
        bad = _check(spec, sets[0], dtype)
        if bad:
            out += [_row(spec, case, p, quick, gpu, sets[0][0], status="error",
                         note=f"differs from the reference: {bad}", **common) for p in ("baseline", "dispatched")]
            continue
        providers = {"baseline": base, "dispatched": spec.function}
        if spec.fast is not None:
            providers["triton"] = spec.fast
        for provider, fn in providers.items():
            if provider == "triton" and route != "triton":
                out.append(_row(spec, case, provider, quick, gpu, sets[0][0], status="skipped",
                                note="outside the predicate: the fast route is timed where it is taken", **common))
                continue
            it = iter(range(1 << 62))

            def call(fn=fn):
                with torch.no_grad():
                    return fn(*sets[next(it) % len(sets)])

            res = time_callable(call, settings)
            s = res["samples_us"]
            med = quantile(s, 0.5)
            out.append(_row(spec, case, provider, quick, gpu, sets[0][0], status="ok", note=f"baseline: {base_name}"
                            if provider == "baseline" else "", timer=res["timer"], warmup=res["warmup"],
                            reps=res["reps"], number=res["number"], median_us=med, q20_us=quantile(s, 0.2),
                            q80_us=quantile(s, 0.8), mean_us=sum(s) / len(s), min_us=min(s),
                            samples_us=json.dumps([round(v, 4) for v in s]),
                            gbps=nbytes / (med * 1e-6) / 1e9 if med > 0 else math.nan, **common))
            if log:
                log(f"  {case.id} {provider:<10} median {med:.4g} us  route={route}")
    df = classify(pd.DataFrame(out))
    df.attrs["environment"] = env
    return df
