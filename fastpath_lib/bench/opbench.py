"""The predeclared matrix of any registered operator (:class:`~fastpath_lib.opspec.OpSpec`), timed and classified.

:func:`run_op` times, for each of a spec's cases, every baseline (the first as provider ``baseline``, the others under
their own names, e.g. ``compiled`` for ``torch.compile`` of the composite), its public function (``dispatched``, with
the route it took) and its fast route called directly (``triton``), with the harness's timer and settings, and
returns rows of the results schema (:data:`~fastpath_lib.bench.schema.CSV_COLUMNS`) carrying the run's
GPU-measurement flag; :func:`~fastpath_lib.bench.analysis.classify` reads every row against the first baseline, and
the summary table, the boundary plot and the results folders read them as they read RMSNorm's.

Before anything is timed, each case's public function is checked against the spec's reference with the spec's
tolerance, output by output for an op returning a tuple (a bitwise output has ``(0, 0)``), and must leave its inputs
as they were (a call that mutates its inputs cannot be timed honestly on rotating input sets). Each baseline is
checked too; a baseline that departs from the contract is timed and says so in its note (it is a comparison point,
not the contract). Each row carries the bytes of its own implementation (:meth:`~fastpath_lib.opspec.OpSpec.
bytes_for`), so GB/s and the bytes a fusion saves read off the table; off CUDA, a call that launches Triton kernels
is run once more, untimed, under the interpreter's traffic checker (:func:`~fastpath_lib.bench.mechanism.count_call`:
counted bytes, out-of-bounds lanes, launches per call).
"""

from __future__ import annotations

import math
import time

import torch

from fastpath_lib import runtime
from fastpath_lib.bench.analysis import classify
from fastpath_lib.bench.mechanism import count_call
from fastpath_lib.bench.metadata import environment, region
from fastpath_lib.bench.schema import empty_row, measurement_label
from fastpath_lib.bench.timing import (COMPILE_SKIPPED, compile_skipped, first_call_s, gpu_measurement, settings_for,
                                       timed_fields)
from fastpath_lib.cases import CaseSpec
from fastpath_lib.opspec import COMPILED, BaselineUnavailable, OpCase, OpSpec

__all__ = ["run_op", "op_environment", "providers_of", "compare_outputs"]


def providers_of(spec: OpSpec) -> dict[str, str]:
    """provider name -> the implementation it times: ``baseline`` (the first baseline), the other baselines under
    their names, ``dispatched`` and, when the spec has one, ``triton`` (the fast route)."""
    names = list(spec.baselines)
    out = {"baseline": names[0], **{n: n for n in names[1:]}, "dispatched": "dispatched"}
    if spec.fast is not None:
        out["triton"] = "triton"
    return out


def _as_tuple(v) -> tuple:
    return tuple(v) if isinstance(v, (tuple, list)) else (v,)


def compare_outputs(spec: OpSpec, got, want, dtype: torch.dtype) -> str | None:
    """``None`` when every output of ``got`` matches ``want`` within the spec's tolerance for it, else why not."""
    got, want = _as_tuple(got), _as_tuple(want)
    if len(got) != len(want):
        return f"{len(got)} outputs, the reference returns {len(want)}"
    for i, (g, w, (atol, rtol)) in enumerate(zip(got, want, spec.output_tolerances(dtype, len(want)))):
        which = f"output {i}: " if len(want) > 1 else ""
        if g.shape != w.shape or g.dtype != w.dtype:
            return f"{which}{tuple(g.shape)} {g.dtype}, reference {tuple(w.shape)} {w.dtype}"
        if not torch.allclose(g.float(), w.float(), atol=atol, rtol=rtol, equal_nan=True):
            err = (g.float() - w.float()).abs().max().item()
            rule = "bitwise" if atol == rtol == 0 else f"atol {atol}, rtol {rtol}"
            return f"{which}max error {err:.3g} over {rule}"
    return None


def _check(spec: OpSpec, fn, args: tuple, dtype: torch.dtype) -> str | None:
    """``None`` when ``fn(*args)`` matches the reference and leaves its inputs unchanged, else why not."""
    before = [a.detach().clone() if isinstance(a, torch.Tensor) else None for a in args]
    with torch.no_grad():
        got = fn(*args)
    changed = [i for i, (a, b) in enumerate(zip(args, before))
               if b is not None and not torch.allclose(a, b, rtol=0, atol=0, equal_nan=True)]
    if changed:
        return f"it wrote into its input(s) {changed}: an in-place call cannot be timed on rotating inputs"
    with torch.no_grad():
        want = spec.reference(*args)
    return compare_outputs(spec, got, want, dtype)


def _row(spec: OpSpec, case: OpCase, provider: str, quick: bool, gpu: bool, ran: torch.Tensor, **kw) -> dict:
    cols = ran.shape[-1]
    rows = ran.numel() // cols if cols else 0  # the shape the timed input had, not the one asked for
    return empty_row(case_id=case.id, family=spec.name, provider=provider, **{"pass": "forward"}, rows=rows,
                     cols=cols, dtype=case.dtype, layout="contiguous", pad=0, offset=0,
                     declared_shape=f"{case.rows}x{case.cols}", expected=case.expected, rationale=case.rationale,
                     gpu_measurement=gpu, quick=quick, **kw)


def op_environment(spec: OpSpec, cases: list[OpCase], settings: dict, gpu: bool) -> dict:
    """``environment.json`` of an op's matrix run: the machine, the harness settings, the op and its cases."""
    providers = providers_of(spec)
    env = environment(dict(settings, providers=list(providers), cases=len(cases)))
    env["gpu_measurement"] = gpu
    env["measurement_label"] = measurement_label(env)
    env["op"] = spec.name
    env["baseline"] = spec.baseline[0]
    env["baselines"] = list(spec.baselines)
    env["declared_cases"] = [c.id for c in cases]
    if spec.note:
        env["op_note"] = spec.note
    if spec.limits is not None:
        env["region"] = region(spec.limits(runtime.kernel_device()))
    return env


def _time_case(spec: OpSpec, case: OpCase, providers: dict[str, str], *, quick: bool, gpu: bool, settings: dict,
               device: str, check: bool, log) -> list[dict]:
    """The rows of one case for ``providers`` (name -> implementation), checked first when ``check``."""
    rows, cols = case.dims(quick)
    dtype = getattr(torch, case.dtype)
    make = spec.case_spec or CaseSpec
    sets = [spec.args(make(rows=rows, cols=cols, dtype=dtype, device=device).build(seed=100 + i))
            for i in range(max(1, settings["input_sets"]))]
    route = spec.route(*sets[0])
    base_name = spec.baseline[0]
    base_bytes = spec.bytes_for(base_name, rows, cols, dtype)
    impls = {**spec.baselines, "dispatched": spec.function, "triton": spec.fast}

    def common(impl):
        which = "fallback" if impl == "dispatched" and route == "fallback" else impl
        nbytes = spec.bytes_for(which, rows, cols, dtype)
        return dict(route=route, bytes_moved=nbytes, input_sets=len(sets)), nbytes

    bad = _check(spec, spec.function, sets[0], dtype) if check else None
    if bad:
        return [_row(spec, case, p, quick, gpu, sets[0][0], status="error", note=f"differs from the reference: {bad}",
                     **common(impl)[0]) for p, impl in providers.items() if p in ("baseline", "dispatched")]
    out = []
    for provider, impl in providers.items():
        kw, nbytes = common(impl)
        notes = [f"baseline: {base_name}"] if provider == "baseline" else []
        if nbytes < base_bytes:
            notes.append(f"saves {base_bytes - nbytes:.0f} bytes against {base_name}")
        elif nbytes > base_bytes:
            notes.append(f"moves {nbytes - base_bytes:.0f} bytes more than {base_name}")
        skip = None
        if provider == "triton" and spec.fast_unsupported is not None:
            why = spec.fast_unsupported(*sets[0])
            skip = f"launcher not run: {why}" if why else None
        elif provider == "triton" and route != "triton":
            skip = "outside the predicate: the fast route is timed where it is taken"
        elif impl == COMPILED and compile_skipped(quick):
            skip = COMPILE_SKIPPED
        if skip:
            out.append(_row(spec, case, provider, quick, gpu, sets[0][0], status="skipped", note=skip, **kw))
            continue
        fn, compile_s = impls[impl], None
        try:
            if impl == COMPILED:
                torch._dynamo.reset()  # one compile per case, never the recompile limit's eager fallback
                with torch.no_grad():
                    compile_s = first_call_s(lambda: fn(*sets[0]))
            if impl in spec.baselines:
                differs = _check(spec, fn, sets[0], dtype)
                if differs:
                    notes.append(f"departs from the contract ({differs}); timed as a comparison point")
            it = iter(range(1 << 62))

            def call(fn=fn):
                with torch.no_grad():
                    return fn(*sets[next(it) % len(sets)])

            timing = timed_fields(call, settings)
            if impl != COMPILED:  # once more, outside the timed loop: the interpreter's count (CPU only)
                timing.update(count_call(call))
        except BaselineUnavailable as exc:  # cannot run here (no vLLM, no GPU): the row says why
            out.append(_row(spec, case, provider, quick, gpu, sets[0][0], status="skipped", note=str(exc)[:500], **kw))
            continue
        except Exception as exc:  # noqa: BLE001 - a baseline that fails is recorded, the run goes on
            out.append(_row(spec, case, provider, quick, gpu, sets[0][0], status="error",
                            note=f"{type(exc).__name__}: {exc}"[:500], **kw))
            continue
        med = timing["median_us"]
        out.append(_row(spec, case, provider, quick, gpu, sets[0][0], status="ok", note="; ".join(notes),
                        compile_s=compile_s, gbps=nbytes / (med * 1e-6) / 1e9 if med > 0 else math.nan,
                        **timing, **kw))
        if log:
            log(f"  {case.id} {provider:<22} median {med:.4g} us  route={route}")
    return out


def run_op(spec: OpSpec, *, quick: bool = True, only: list[str] | None = None, settings: dict | None = None,
           log=None, deadline: float | None = None):
    """Time and classify ``spec``'s predeclared matrix on this machine.

    Every case runs its baselines, the dispatched call and the fast route first; the :data:`~fastpath_lib.opspec.
    COMPILED` baseline runs for every case afterwards (its compile per case is the slowest part, so a short budget
    loses it first).

    Args:
        spec: the operator.
        quick: the cases' quick shapes and the harness's quick budgets (off CUDA, the compiled baseline is skipped:
            inductor's C++ build outlasts the quick run).
        only: case ids to run (default: all).
        settings: harness settings (default :func:`~fastpath_lib.bench.timing.settings_for`).
        log: ``callable(str)`` for one line per timed provider.
        deadline: ``time.monotonic()`` after which no new case starts (its rows say ``not run``).

    Returns:
        a classified DataFrame (``attrs["environment"]`` set); a case whose public function disagrees with the
        reference (or writes into its inputs) gets ``status="error"`` rows and is not timed.
    """
    import pandas as pd

    declared = spec.matrix()
    cases = [c for c in declared if only is None or c.id in only]
    settings = settings or settings_for(quick)
    gpu = gpu_measurement()
    env = op_environment(spec, declared, settings, gpu)
    providers = providers_of(spec)
    passes = [{p: i for p, i in providers.items() if i != COMPILED},
              {p: i for p, i in providers.items() if i == COMPILED}]
    by_case: dict[str, list[dict]] = {c.id: [] for c in cases}
    for n, subset in enumerate(passes):
        for case in cases:
            if not subset or (n and any(r["status"] == "error" for r in by_case[case.id])):
                continue
            if deadline is not None and time.monotonic() > deadline:
                ran = torch.empty(case.dims(quick), device="meta")
                by_case[case.id] += [_row(spec, case, p, quick, gpu, ran, status="not run",
                                          note="the time budget ran out") for p in subset]
                continue
            by_case[case.id] += _time_case(spec, case, subset, quick=quick, gpu=gpu, settings=settings,
                                           device=runtime.kernel_device(), check=n == 0, log=log)
    order = list(providers)
    out = [r for c in cases for r in sorted(by_case[c.id], key=lambda r: order.index(r["provider"]))]
    df = classify(pd.DataFrame(out))
    df.attrs["environment"] = env
    return df
