"""The predeclared matrix of any registered operator (:class:`~fastpath_lib.opspec.OpSpec`), timed and classified.

:func:`run_op` times, for each of a spec's cases, every baseline (the first as provider ``baseline``, the others under
their own names, e.g. ``compiled`` for ``torch.compile`` of the composite), its public function (``dispatched``, with
the route it took) and its fast route called directly (``triton``), with the harness's timer and settings, and
returns rows of the results schema (:data:`~fastpath_lib.bench.schema.CSV_COLUMNS`) carrying the run's
GPU-measurement flag; :func:`~fastpath_lib.bench.analysis.classify` reads every row against the first baseline, and
the summary table, the boundary plot and the results folders read them. RMSNorm's matrix is one spec among others
here: :func:`time_case` times one case (forward, or forward+backward for a ``backward`` case, on the case's layout),
and :func:`fastpath_lib.bench.harness.run_matrix` builds a results folder around it.

Before anything is timed, each case's public function is checked against the spec's reference with the spec's tolerance,
output by output for an op returning a tuple (a bitwise output has ``(0, 0)``), must take the route the predicate
decides (read from the Triton kernels the call launched, :mod:`fastpath_lib.launches`: the row's ``route`` is the route
taken), and must leave its inputs as they were (a call that mutates its inputs cannot be timed honestly on rotating
input sets); in a backward case its gradients, and the fast route's, must match the reference's
(:mod:`fastpath_lib.bench.opcheck`). Each baseline is checked the same way before it is timed (:func:`baseline_differs`:
its outputs and, in a backward case, its gradients, at the tolerances baselines are held to: the op's own, or the
spec's ``baseline_tolerances`` where it declares looser ones and why): one that disagrees with the reference computes
something else, so it is not timed and its row is an error naming the baseline and the case. Each row
carries the bytes of its own implementation (:meth:`~fastpath_lib.opspec.OpSpec.bytes_for`), so GB/s and the bytes a
fusion saves read off the table; off CUDA, a call that launches Triton kernels is run once more, untimed, under the
interpreter's traffic checker (:func:`~fastpath_lib.bench.mechanism.count_call`: counted bytes, out-of-bounds lanes,
launches per call).
"""

from __future__ import annotations

import math
import time

import torch

from fastpath_lib import launches, runtime
from fastpath_lib.bench.analysis import classify
from fastpath_lib.bench.hostmethod import silenced, warnings_of
from fastpath_lib.bench.mechanism import count_call, explain
from fastpath_lib.bench.metadata import environment, region
from fastpath_lib.bench.opcheck import (
    check_backward,
    check_call,
    compare_outputs,
    grad_inputs,
)
from fastpath_lib.bench.schema import NO_BANDWIDTH, OWN_ROUTES, empty_row, measurement_label
from fastpath_lib.bench.timing import (
    COMPILE_SKIPPED,
    compile_skipped,
    count_launches_each,
    first_call_s,
    gpu_measurement,
    settings_for,
    timed_fields,
)
from fastpath_lib.bench.ophost import case_input
from fastpath_lib.gradcheck import incoming_gradient, leaves
from fastpath_lib.opspec import COMPILED, BaselineUnavailable, OpCase, OpSpec
from fastpath_lib.routing import record_routes

__all__ = ["run_op", "time_case", "time_compiled", "pick_compiled_cases", "not_run", "op_environment", "providers_of",
           "compare_outputs", "COMPILED_STEP_NOTE", "device_name", "unexplained_traffic", "baseline_differs"]

#: The note of a compiled-baseline row the evidence run's matrix leaves to its own step.
COMPILED_STEP_NOTE = ("not run in the matrix step: torch.compile baselines are timed in the evidence run's "
                      "compiled_baselines step over a few shapes (a cold compile per case would eat the matrix's "
                      "budget)")


def device_name() -> str:
    """The name of the device a run measures on (``torch.cuda.get_device_name``: sm_90 is shared by the H100 and the
    H200, so every record names the device), or ``"cpu"``."""
    return torch.cuda.get_device_name() if runtime.cuda_available() else "cpu"


def providers_of(spec: OpSpec) -> dict[str, str]:
    """provider name -> the implementation it times: ``baseline`` (the first baseline), the other baselines under
    their names, ``dispatched`` and, when the spec has one, ``triton`` (the fast route)."""
    names = list(spec.baselines)
    out = {"baseline": names[0], **{n: n for n in names[1:]}, "dispatched": "dispatched"}
    if spec.fast is not None:
        out["triton"] = "triton"
    return out


def _own_route_wrong(why: str) -> str:
    """The note of the op's own route (``dispatched``, ``triton``) that differs from the reference: ``why`` (with
    :func:`fastpath_lib.gradcheck.rounding_hint` where the interpreter's bf16 cast can be the cause)."""
    return f"differs from the reference: {why}"


def baseline_differs(spec: OpSpec, case: OpCase, name: str, fn, inputs: tuple, dtype: torch.dtype) -> str | None:
    """Why baseline ``name`` cannot be timed on ``case`` (``None``: it can): on the case's first input set
    ``(args, dy)``, its outputs must match the spec's reference and leave its inputs as they were, and in a backward
    case its gradients by autograd must match the reference's: the checks the op's own routes pass, at the tolerances
    a baseline is held to (the op's own, or the spec's ``baseline_tolerances``:
    :meth:`~fastpath_lib.opspec.OpSpec.output_tolerances` and :meth:`~fastpath_lib.opspec.OpSpec.grad_tolerance` with
    ``baseline=True``). A baseline that computes another function makes its time no comparison. A compiled baseline
    is called with autograd on in a backward case, as its timed call is (one compile per case).
    :class:`~fastpath_lib.opspec.BaselineUnavailable` passes through."""
    args, dy = inputs
    bwd = case.pass_ == "backward"
    why = check_call(spec, fn, args, dtype, grad=bwd and name == COMPILED, baseline=True)
    if why is None and bwd:
        why = check_backward(spec, fn, args, dy, dtype, baseline=True)
    if why is None:
        return None
    return (f"baseline {name} differs from the reference ({spec.name}'s contract) in case {case.id}: {why}; not timed: "
            "a baseline that computes something else is no comparison")


def unexplained_traffic(row: dict, *, bytes_model: bool = True) -> str | None:
    """Why a row's interpreter count is an error (out-of-bounds accesses; with ``bytes_model``, counted bytes the
    op's bytes model and :func:`~fastpath_lib.bench.mechanism.explain` cannot account for), or ``None`` (not
    counted, or explained)."""
    oob = row.get("oob_accesses")
    if oob is not None and oob == oob and oob > 0:
        return f"{oob:.0f} out-of-bounds accesses under the interpreter's traffic checker"
    model = row.get("bytes_moved")
    if not bytes_model or model is None or model != model or row.get("counted_bytes") is None:
        return None
    explained, why = explain(row)
    return None if explained else f"counted by the interpreter: {why}"


def _row(spec: OpSpec, case: OpCase, provider: str, quick: bool, gpu: bool, ran: torch.Tensor, **kw) -> dict:
    cols = ran.shape[-1]
    rows = ran.numel() // cols if cols else 0  # the shape the timed input had, not the one asked for
    kw.setdefault("device_name", device_name() if gpu else "cpu")
    return empty_row(case_id=case.id, family=case.family or spec.name, provider=provider, **{"pass": case.pass_},
                     rows=rows, cols=cols, dtype=case.dtype, layout=case.layout, pad=case.pad_for(quick),
                     offset=case.offset, declared_shape=f"{case.rows}x{case.cols}", expected=case.expected,
                     rationale=case.rationale, gpu_measurement=gpu, quick=quick, **kw)


def not_run(spec: OpSpec, case: OpCase, providers, *, quick: bool, gpu: bool,
            note: str = "the time budget ran out") -> list[dict]:
    """A case's rows for ``providers`` that were not run (``status="not run"``), saying why."""
    ran = torch.empty(case.dims(quick), device="meta")
    return [_row(spec, case, p, quick, gpu, ran, status="not run", note=note) for p in providers]


def op_environment(spec: OpSpec, cases: list[OpCase], settings: dict, gpu: bool) -> dict:
    """``environment.json`` of an op's matrix run: the machine, the harness settings, the op and its cases."""
    providers = providers_of(spec)
    settings = dict(settings)
    if not any(c.pass_ == "backward" for c in cases):  # a forward-only matrix has no backward mode to record
        settings.pop("backward_mode", None)
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


def _input_sets(spec: OpSpec, case: OpCase, quick: bool, n: int, device: str) -> list[tuple[tuple, object]]:
    """``n`` freshly built ``(args, dy)`` of a case (``dy``: ``None`` forward; for a backward case, the incoming
    gradient, shaped like the op's output (:func:`fastpath_lib.gradcheck.incoming_gradient`), drawn from one generator
    seeded 1234, and every floating-point tensor argument a leaf that requires grad)."""
    built = case_input(spec, case, quick=quick, device=device)
    sets = [spec.args(built.build(seed=100 + i)) for i in range(max(1, n))]
    if case.pass_ != "backward":
        return [(args, None) for args in sets]
    gen, out = torch.Generator(device="cpu").manual_seed(1234), []
    for args in sets:
        args = leaves(args)
        out.append((args, incoming_gradient(spec, args, gen)))
    return out


def _reasons(spec: OpSpec, args: tuple) -> str:
    """The predicate's failed conditions for a call (empty where the spec has no predicate and context)."""
    if spec.predicate is None or spec.context is None:
        return ""
    plain = tuple(a.detach() if isinstance(a, torch.Tensor) else a for a in args)
    return "; ".join(spec.predicate.evaluate(spec.context(*plain)).reasons)


def _route_backward(spec: OpSpec, args: tuple, dy) -> str:
    """The route the public function's backward took for one call, as :func:`fastpath_lib.record_routes` saw it."""
    with record_routes("backward") as seen:
        try:
            torch.autograd.grad(spec.function(*args), grad_inputs(args), dy)
        except Exception:  # noqa: BLE001 - the gradient check records why (:func:`check_backward`)
            return "?"
    return seen.most_common(1)[0][0] if seen else "?"


def time_case(spec: OpSpec, case: OpCase, providers: dict[str, str], *, quick: bool, gpu: bool, settings: dict,
              device: str, check: bool = True, log=None, copy_gbps: float = math.nan) -> list[dict]:
    """The rows of one case for ``providers`` (name -> implementation), checked first when ``check``.

    A forward case times each implementation on its arguments; a backward case times forward then backward
    (``torch.autograd.grad`` of the output with respect to the floating-point tensor arguments, or the spec's
    ``fast_backward`` for ``triton``), so every provider does the same work. Each repetition takes the next of the
    settings' ``input_sets`` freshly built argument sets.

    Args:
        spec, case: the operator and one of its cases.
        providers: from :func:`providers_of`, or a subset.
        quick: the case's quick shape and pad.
        gpu: the run's GPU-measurement flag, carried into every row.
        settings: harness settings (:func:`~fastpath_lib.bench.timing.settings_for`).
        device: where the inputs are built.
        check: check the public function, and the fast route wherever its row is to be timed (inside the predicate
            or, through ``fast_unsupported``, outside it; in a backward case its forward), against the reference
            first (a row that fails is not timed).
        log: ``callable(str)`` for one line per timed provider.
        copy_gbps: the run's copy bandwidth, for ``pct_copy_bw`` (NaN: none measured).
    """
    rows, cols = case.dims(quick)
    dtype = getattr(torch, case.dtype)
    bwd = case.pass_ == "backward"
    sets = _input_sets(spec, case, quick, settings["input_sets"], device)
    first = sets[0][0]
    route = spec.route(*first)
    base_name = spec.baseline[0]
    base_bytes = spec.bytes_for(base_name, rows, cols, dtype, case.pass_)
    impls = {**spec.baselines, "dispatched": spec.function, "triton": spec.fast}
    seen = [] if check and launches.observable() else None  # the route the call took, from what it launched
    with silenced():  # what a provider warns is recorded in its row (warnings_of), never printed
        bad = check_call(spec, spec.function, first, dtype, launched=seen) if check else None
        drift = launches.mismatch(route, seen) if seen is not None else None
        if check and bwd and not bad:  # a backward case checks the gradients too, before anything is timed
            bad = check_backward(spec, spec.function, first, sets[0][1], dtype)
    taken = launches.taken(seen) if seen is not None else route
    shared = dict(route=taken, route_backward=_route_backward(spec, first, sets[0][1]) if bwd else None,
                  reasons=_reasons(spec, first), copy_gbps=copy_gbps, input_sets=len(sets))

    def common(impl):
        which = "fallback" if impl == "dispatched" and taken == "fallback" else impl
        nbytes = spec.bytes_for(which, rows, cols, dtype, case.pass_)
        return dict(shared, bytes_moved=nbytes), nbytes

    out, timed = [], {}
    for provider, impl in providers.items():
        kw, nbytes = common(impl)
        if provider == "dispatched" and (drift or bad):  # the op's own routes are checked; a wrong one is not timed
            note = "; ".join(([f"route: {drift}"] if drift else []) + ([_own_route_wrong(bad)] if bad else []))
            out.append(_row(spec, case, provider, quick, gpu, first[0], status="error", note=note, **kw))
            continue
        notes = [f"baseline: {base_name}"] if provider == "baseline" else []
        if nbytes < base_bytes:
            notes.append(f"saves {base_bytes - nbytes:.0f} bytes against {base_name}")
        elif nbytes > base_bytes:
            notes.append(f"moves {nbytes - base_bytes:.0f} bytes more than {base_name}")
        skip = None
        if provider == "triton" and bwd and spec.fast_backward is None:
            skip = "launcher not run: the spec declares no fast_backward"
        elif provider == "triton" and spec.fast_unsupported is not None:
            why = spec.fast_unsupported(*first)
            skip = f"launcher not run: {why}" if why else None
        elif provider == "triton" and route != "triton":
            skip = "outside the predicate: the fast route is timed where it is taken"
        elif impl == COMPILED and compile_skipped(quick):
            skip = COMPILE_SKIPPED
        if skip:
            out.append(_row(spec, case, provider, quick, gpu, first[0], status="skipped", note=skip, **kw))
            continue
        # the fast route is checked wherever it is about to be timed, inside the predicate or outside it (a spec
        # declaring ``fast_unsupported`` times it outside): every timed row of the op's own routes was checked first
        wrong = check_call(spec, spec.fast, first, dtype) if provider == "triton" and check else None
        if provider == "triton" and check and bwd and not wrong:
            wrong = check_backward(spec, spec.fast, first, sets[0][1], dtype, launcher=True)
        if wrong:
            out.append(_row(spec, case, provider, quick, gpu, first[0], status="error",
                            note=_own_route_wrong(wrong), **kw))
            continue
        fn, compile_s = impls[impl], None
        it = iter(range(1 << 62))

        def call(fn=fn, provider=provider, it=it):
            args, dy = sets[next(it) % len(sets)]
            if not bwd:
                with torch.no_grad():
                    return fn(*args)
            if provider == "triton":
                return spec.fast_backward(dy, *args)
            return torch.autograd.grad(fn(*args), grad_inputs(args), dy)

        try:
            if impl == COMPILED:
                torch._dynamo.reset()  # one compile per case, never the recompile limit's eager fallback
                compile_s = first_call_s(call)
            warned = warnings_of(call)  # one call's warnings, recorded in the row; every later call is silenced
            with silenced():
                if impl in spec.baselines:  # checked like the op's own routes: a baseline computing another
                    differs = baseline_differs(spec, case, impl, fn, sets[0], dtype)  # function is no comparison
                    if differs:
                        out.append(_row(spec, case, provider, quick, gpu, first[0], status="error", note=differs,
                                        warnings=warned, **kw))
                        continue
                timing = timed_fields(call, settings)
                if impl != COMPILED:  # once more, outside the timed loop: the interpreter's count (CPU only)
                    timing.update(count_call(call))
        except BaselineUnavailable as exc:  # cannot run here (no vLLM, no GPU): the row says why
            out.append(_row(spec, case, provider, quick, gpu, first[0], status="skipped", note=str(exc)[:500], **kw))
            continue
        except Exception as exc:  # noqa: BLE001 - a baseline that fails is recorded, the run goes on
            out.append(_row(spec, case, provider, quick, gpu, first[0], status="error",
                            note=f"{type(exc).__name__}: {exc}"[:500], **kw))
            continue
        med = timing["median_us"]
        gbps = nbytes / (med * 1e-6) / 1e9 if med > 0 and gpu else math.nan  # a CPU timing gives no GPU's GB/s
        row = _row(spec, case, provider, quick, gpu, first[0], status="ok",
                   note="; ".join([*notes, *([] if gpu else [NO_BANDWIDTH])]), warnings=warned, compile_s=compile_s,
                   gbps=gbps, pct_copy_bw=100 * gbps / copy_gbps if copy_gbps > 0 else math.nan, **timing, **kw)
        traffic = unexplained_traffic(row, bytes_model=provider in OWN_ROUTES)
        if traffic:  # timed, but not ok: the kernel touched memory the op's bytes model cannot account for
            row.update(status="error", note="; ".join([traffic, *notes]))
        out.append(row)
        timed[provider] = (call, out[-1])
        if log:
            log(f"  {case.id} {provider:<22} median {med:.4g} us  route={route}")
    # one profiler session for the case: every timed provider's launches counted in its own window
    counted = count_launches_each({p: c for p, (c, _) in timed.items()})
    for p, (_, row) in timed.items():
        n, note = counted[p]
        if not (row.get("launches_per_call") is not None and math.isnan(n)):  # keep the interpreter's count
            row.update(launches_per_call=n, launches_note=note)
    return out


def run_op(spec: OpSpec, *, quick: bool = True, only: list[str] | None = None, settings: dict | None = None,
           log=None, deadline: float | None = None, copy: tuple[float, str] | None = None, folder=None,
           compiled: bool = True):
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
        copy: ``(GB/s, label)`` of a copy bandwidth measured in the same run: each row's ``pct_copy_bw`` reads
            against it, and ``environment.json`` records it (default: none, ``pct_copy_bw`` left empty).
        folder: write ``environment.json`` there first and ``results.csv`` after every case (unclassified), so a run
            cut in the middle keeps what it measured (the evidence command's matrix step).
        compiled: time the :data:`~fastpath_lib.opspec.COMPILED` baseline (``False``: its rows are skipped with
            :data:`COMPILED_STEP_NOTE`; the evidence run times it in its own step, :func:`time_compiled`).

    Returns:
        a classified DataFrame (``attrs["environment"]`` set). A public function (``dispatched``) or fast route
        (``triton``) that disagrees with the reference (or writes into its inputs), or a public function that takes
        another route than the predicate's, gets a ``status="error"`` row and is not timed; the baselines are timed all
        the same, each one that agrees with the reference (:func:`baseline_differs`; one that does not gets a
        ``status="error"`` row, untimed). A row whose interpreter count shows out-of-bounds accesses or bytes the
        bytes model cannot explain is timed and marked ``status="error"``.
    """
    import pandas as pd

    declared = spec.matrix()
    cases = [c for c in declared if only is None or c.id in only]
    settings = settings or settings_for(quick)
    gpu = gpu_measurement()
    env = op_environment(spec, declared, settings, gpu)
    copy_gbps = copy[0] if copy else math.nan
    if copy:
        env["harness"].update(copy_bandwidth=copy[1], copy_gbps=copy[0])
    providers = providers_of(spec)
    passes = [{p: i for p, i in providers.items() if i != COMPILED},
              {p: i for p, i in providers.items() if i == COMPILED and compiled}]
    left_out = [p for p, i in providers.items() if i == COMPILED and not compiled]
    by_case: dict[str, list[dict]] = {c.id: [] for c in cases}
    order = list(providers)

    def own_wrong(cid: str) -> bool:  # the op's own route gave an error: the case gets no compiled row
        return any(r["status"] == "error" and r["provider"] in OWN_ROUTES for r in by_case[cid])

    def table():
        return [r for c in cases for r in sorted(by_case[c.id], key=lambda r: order.index(r["provider"]))]

    if folder is not None:
        import json
        from pathlib import Path

        from fastpath_lib.bench import results
        from fastpath_lib.bench.schema import CSV_COLUMNS

        (Path(folder) / "environment.json").write_text(json.dumps(env, indent=2, default=str) + "\n")
    for n, subset in enumerate(passes):
        for case in cases:
            if not subset or (n and own_wrong(case.id)):
                continue
            if deadline is not None and time.monotonic() > deadline:
                by_case[case.id] += not_run(spec, case, subset, quick=quick, gpu=gpu)
                continue
            by_case[case.id] += time_case(spec, case, subset, quick=quick, gpu=gpu, settings=settings,
                                          device=runtime.kernel_device(), check=n == 0, log=log, copy_gbps=copy_gbps)
            if n == 0 and left_out and not own_wrong(case.id):
                by_case[case.id] += [dict(r, status="skipped") for r in
                                     not_run(spec, case, left_out, quick=quick, gpu=gpu, note=COMPILED_STEP_NOTE)]
            if folder is not None:
                results.write_table(folder, pd.DataFrame(table(), columns=CSV_COLUMNS))
    df = classify(pd.DataFrame(table()))
    df.attrs["environment"] = env
    return df


def pick_compiled_cases(spec: OpSpec, n: int = 2) -> list[OpCase]:
    """The few cases the evidence run's compiled-baselines step compiles: the smallest forward case (host- and
    launch-bound), the largest forward case (memory-bound) and the smallest backward case (a backward case compiles
    forward and backward graphs), each eligible for the fast route (a fallback case compares two composites), in that
    order; at most ``n``."""
    cases = [c for c in spec.matrix() if c.expected != "fallback"]
    size = lambda c: c.dims(False)[0] * c.dims(False)[1]  # noqa: E731
    fwd = sorted((c for c in cases if c.pass_ == "forward"), key=size)
    bwd = sorted((c for c in cases if c.pass_ == "backward"), key=size)
    picked = [*fwd[:1], *fwd[-1:], *bwd[:1]]
    return list(dict.fromkeys(picked))[:n]


def time_compiled(spec: OpSpec, folder, *, deadline: float | None = None, log=None, settings: dict | None = None,
                  cases: list[OpCase] | None = None, compile_s_estimate: float = 40.0) -> dict:
    """The evidence run's compiled-baselines step for one op: ``torch.compile`` of the composite timed on
    :func:`pick_compiled_cases`, each case's skipped ``compiled`` row of ``folder/results.csv`` replaced by the timed
    one. The deadline is checked before each compile, with room for one cold compile (``compile_s_estimate``): a case
    that would start too late is left skipped and counted.

    Returns:
        ``{"planned", "timed", "not_started", "errors"}`` (case ids).
    """
    from pathlib import Path

    import pandas as pd

    from fastpath_lib.bench import results

    providers = {p: i for p, i in providers_of(spec).items() if i == COMPILED}
    out = {"planned": [], "timed": [], "not_started": [], "errors": []}
    if not providers:
        return out
    settings = settings or settings_for(False)
    gpu = gpu_measurement()
    csv = Path(folder) / "results.csv"
    for case in cases if cases is not None else pick_compiled_cases(spec):
        out["planned"].append(case.id)
        if deadline is not None and time.monotonic() + compile_s_estimate > deadline:
            out["not_started"].append(case.id)
            continue
        rows = time_case(spec, case, providers, quick=False, gpu=gpu, settings=settings,
                         device=runtime.kernel_device(), check=False, log=log)
        out["timed" if all(r["status"] == "ok" for r in rows) else "errors"].append(case.id)
        if csv.exists():
            df = pd.read_csv(csv)
            order = {cid: i for i, cid in enumerate(dict.fromkeys(df.case_id))}
            keep = ~((df.case_id == case.id) & df.provider.isin(list(providers)))
            new = pd.concat([df[keep], pd.DataFrame(rows)], ignore_index=True)
            new = new.iloc[new.case_id.map(order).fillna(len(order)).argsort(kind="stable")]
            results.write_table(Path(folder), new)
    return out
