"""Running the matrix: every case, for every provider, with raw samples and mechanism columns.

Providers (:data:`PROVIDERS`):

* ``baseline`` — ``torch.nn.functional.rms_norm`` (the reference the PR must beat or match);
* ``triton`` — the kernel launchers of :mod:`fastpath_lib.rmsnorm.kernels` called directly, bypassing the predicate
  (skipped, with the predicate's reason, where the kernel itself cannot take the input);
* ``dispatched`` — :func:`fastpath_lib.rms_norm`, predicate included: what users get;
* ``compiled`` — ``torch.compile`` of the reference (compile time recorded separately, excluded from the samples).

Off CUDA, each provider's call that launches Triton kernels runs once more, untimed, under the interpreter's traffic
checker (:mod:`fastpath_lib.bench.mechanism`): counted bytes, out-of-bounds lanes and launches per call.

A ``backward`` case times forward+backward of each provider (``torch.autograd.grad`` of the output, or the two
launchers back to back), so the providers do the same work. Every repetition takes the next of several freshly drawn
random input sets (never zeros), so a small case is not flattered by finding its inputs in cache. Timers:
:mod:`fastpath_lib.bench.timing`; times in microseconds.
"""

from __future__ import annotations

import itertools
import json
import math
import sys
import time
from pathlib import Path

import pandas as pd
import torch
import torch.nn.functional as F

import fastpath_lib
from fastpath_lib import opspec, runtime
import fastpath_lib.bench.results as results
from fastpath_lib.bench.report import pr_note
from fastpath_lib.bench.sweep import threshold_sweep
from fastpath_lib.bench.workload import compile_cost, compiled_facts, replay
from fastpath_lib.bench.analysis import classify
from fastpath_lib.bench.host import measure_host
from fastpath_lib.bench.matrix import BenchCase, load_cases
from fastpath_lib.bench.mechanism import count_call
from fastpath_lib.bench.metadata import environment, region
from fastpath_lib.bench.schema import CSV_COLUMNS, NOT_GPU, empty_row, measurement_label
from fastpath_lib.bench.timing import (COMPILE_SKIPPED, bytes_moved, compile_skipped, copy_bandwidth, count_launches,
                                       first_call_s, gpu_measurement, settings_for, timed_fields)
from fastpath_lib.rmsnorm.predicate import default_eps, limits_for

__all__ = ["PROVIDERS", "CSV_COLUMNS", "launcher_unsupported", "measure_case", "run_matrix", "matrix_environment"]

PROVIDERS = ("baseline", "triton", "dispatched", "compiled")

def launcher_unsupported(x: torch.Tensor, normalized_shape, w) -> str | None:
    """Why RMSNorm's kernel launchers cannot take this input (its spec's ``fast_unsupported``); ``None`` when they
    can."""
    return opspec.get("rms_norm").fast_unsupported(x, normalized_shape, w)


def _rows_view(t: torch.Tensor) -> torch.Tensor:
    return t if t.dim() == 2 else t.view(-1, t.shape[-1])


class _Inputs:
    """Several freshly built input sets for one case, handed out in rotation."""

    def __init__(self, case: BenchCase, quick: bool, n_sets: int, device: torch.device):
        spec = case.spec(quick)
        self.sets = []
        gen = torch.Generator(device="cpu").manual_seed(1234)
        for seed in range(n_sets):
            built = spec.build(seed=100 + seed, device=device)
            x, ns, w = built.args()
            if case.pass_ == "backward":
                x = x.detach().requires_grad_(True)
                w = w.detach().requires_grad_(True) if w is not None else None
                dy = torch.randn(tuple(x.shape), generator=gen, dtype=torch.float32).to(device=device, dtype=x.dtype)
            else:
                dy = None
            self.sets.append((x, ns, w, dy, built))
        self._cycle = itertools.cycle(range(n_sets))

    def next(self):
        return self.sets[next(self._cycle)]


def _provider_fn(provider: str, inputs: _Inputs, case: BenchCase):
    """A zero-argument callable running ``provider`` on the next input set, or a string saying why it is skipped."""
    bwd = case.pass_ == "backward"
    eps = default_eps(case.torch_dtype)
    if provider == "baseline":
        op = F.rms_norm
    elif provider == "dispatched":
        op = fastpath_lib.rms_norm
    elif provider == "triton":
        x, ns, w, _, _ = inputs.sets[0]
        why = launcher_unsupported(x.detach(), ns, w)
        if why:
            return f"launcher not run: {why}"
        from fastpath_lib.rmsnorm import kernels  # imported on use: the interpreter opt-in comes first

        if bwd:
            def run():
                x, _, w, dy, _ = inputs.next()
                x2, w2 = _rows_view(x.detach()), w.detach() if w is not None else None
                kernels.forward(x2, w2, eps)
                return kernels.backward(_rows_view(dy), x2, w2, eps)
        else:
            def run():
                x, _, w, _, _ = inputs.next()
                return kernels.forward(_rows_view(x), w, eps)
        return run
    elif provider == "compiled":
        op = torch.compile(F.rms_norm, dynamic=False)
    else:
        raise ValueError(f"unknown provider {provider!r}; known: {PROVIDERS}")

    if bwd:
        def run():
            x, ns, w, dy, _ = inputs.next()
            y = op(x, ns, w)
            return torch.autograd.grad(y, (x, w), dy)
    else:
        def run():
            x, ns, w, _, _ = inputs.next()
            with torch.no_grad():
                return op(x, ns, w)
    return run


def _row(case: BenchCase, provider: str, quick: bool, gpu: bool, **kw) -> dict:
    rows, cols, pad = case.dims(quick)
    return empty_row(case_id=case.id, family=case.family, provider=provider, **{"pass": case.pass_}, rows=rows,
                     cols=cols, dtype=case.dtype, layout=case.layout, pad=pad, offset=case.offset,
                     declared_shape=f"{case.shape[0]}x{case.shape[1]}", expected=case.expected,
                     rationale=case.rationale, gpu_measurement=gpu, quick=quick, **kw)


def _routes(inputs: _Inputs, case: BenchCase) -> tuple[str, str | None, str]:
    x, ns, w, dy, _ = inputs.sets[0]
    with fastpath_lib.record_routes("forward") as fwd, fastpath_lib.record_routes("backward") as bwd:
        if case.pass_ == "backward":
            torch.autograd.grad(fastpath_lib.rms_norm(x, ns, w), (x, w), dy)
        else:
            with torch.no_grad():
                fastpath_lib.rms_norm(x, ns, w)
    reasons = "; ".join(fastpath_lib.explain(x.detach(), ns, w).reasons)
    fr = fwd.most_common(1)[0][0] if fwd else "?"
    br = (bwd.most_common(1)[0][0] if bwd else "?") if case.pass_ == "backward" else None
    return fr, br, reasons


def measure_case(case: BenchCase, *, quick: bool = False, settings: dict | None = None, copy_gbps: float = math.nan,
                 providers=PROVIDERS, log=None, gpu: bool | None = None) -> list[dict]:
    """Time one case for each provider; one result row per provider.

    Args:
        case: the case.
        quick: use its quick shape.
        settings: from :func:`~fastpath_lib.bench.timing.settings_for` (default: this machine's).
        copy_gbps: the run's measured copy bandwidth, for ``pct_copy_bw``.
        providers: which providers to run.
        log: ``callable(str)`` for progress lines.
        gpu: the run's GPU-measurement flag (default: decided here), carried into every row.

    Returns:
        rows with the :data:`CSV_COLUMNS` keys (times in microseconds); skipped providers have
        ``status="skipped"`` and a ``note``.

    Note:
        Off CUDA, ``compiled`` is skipped in quick mode (inductor's C++ build takes longer than the whole quick run);
        in a full CPU run it is attempted and any failure recorded.
    """
    cuda = runtime.cuda_available()
    settings = settings or settings_for(quick)
    gpu = gpu_measurement() if gpu is None else gpu
    device = torch.device("cuda" if cuda else "cpu")
    inputs = _Inputs(case, quick, settings["input_sets"], device)
    route, route_bwd, reasons = _routes(inputs, case)
    rows, cols, _ = case.dims(quick)
    nbytes = bytes_moved(rows, cols, case.torch_dtype, case.pass_)
    out = []
    for provider in providers:
        common = dict(route=route, route_backward=route_bwd, reasons=reasons, bytes_moved=nbytes,
                      copy_gbps=copy_gbps, input_sets=len(inputs.sets))
        if provider == "compiled" and compile_skipped(quick):
            out.append(_row(case, provider, quick, gpu, status="skipped", note=COMPILE_SKIPPED, **common))
            continue
        try:
            compile_s = None
            if provider == "compiled":
                torch._dynamo.reset()
            fn = _provider_fn(provider, inputs, case)
            if isinstance(fn, str):
                out.append(_row(case, provider, quick, gpu, status="skipped", note=fn, **common))
                continue
            if provider == "compiled":
                compile_s = first_call_s(fn)
            timing = timed_fields(fn, settings)
            launches, lnote = count_launches(fn)
            counted = dict(launches_per_call=launches, launches_note=lnote)
            if provider != "compiled":  # once more, outside the timed loop: the interpreter's count (CPU only)
                counted.update(count_call(fn))
        except Exception as exc:
            out.append(_row(case, provider, quick, gpu, status="error", note=f"{type(exc).__name__}: {exc}"[:500],
                            **common))
            if log:
                log(f"  {provider}: error {type(exc).__name__}: {exc}")
            continue
        med = timing["median_us"]
        gbps = nbytes / (med * 1e-6) / 1e9 if med > 0 else math.nan
        out.append(_row(case, provider, quick, gpu, status="ok", note="", gbps=gbps,
                        pct_copy_bw=100 * gbps / copy_gbps if copy_gbps and not math.isnan(copy_gbps) else math.nan,
                        compile_s=compile_s, **timing, **counted, **common))
        if log:
            log(f"  {provider:<10} median {med:.4g} us  [{timing['q20_us']:.4g}, {timing['q80_us']:.4g}]  "
                f"route={route}")
    return out


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def matrix_environment(settings: dict, *, copy_gbps: float, copy_label: str, providers, cases, declared,
                       gpu: bool) -> dict:
    """``environment.json`` for a matrix run: the machine, the harness settings, and which cases were declared."""
    env = environment(dict(settings, copy_bandwidth=copy_label, copy_gbps=copy_gbps, providers=list(providers),
                           cases=len(cases)))
    env["gpu_measurement"] = gpu
    env["measurement_label"] = measurement_label(env)
    env["declared_cases"] = list(declared)
    env["region"] = region(limits_for(runtime.kernel_device()))
    return env


def _ordered(rows: list[dict], order: list[str]) -> pd.DataFrame:
    pos = {cid: i for i, cid in enumerate(order)}
    prov = {p: i for i, p in enumerate(PROVIDERS)}
    rows = sorted(rows, key=lambda r: (pos.get(r["case_id"], len(pos)), prov.get(r["provider"], len(prov))))
    return pd.DataFrame(rows, columns=CSV_COLUMNS)


def run_matrix(cases: list[BenchCase] | None = None, *, quick: bool = False, out_dir: str | Path | None = None,
               progress: bool = True, force: bool = False, providers=PROVIDERS, analyses: bool = True,
               extra_env: dict | None = None, declared: list[str] | None = None, host: bool = False,
               deadline: float | None = None, folder: Path | None = None,
               copy: tuple[float, str] | None = None) -> pd.DataFrame:
    """Run the matrix; optionally write a complete results folder.

    Args:
        cases: the cases to run (default :func:`~fastpath_lib.bench.load_cases`).
        quick: small shapes and short budgets (same case ids).
        out_dir: when given, write ``results.csv``, ``environment.json``, ``boundary.png``, ``boundary.csv``,
            ``pr_note.md`` (plus ``threshold.csv``, ``replay.json``, ``compile_cost.json`` and, unless ``quick``, the
            compiled kernels' facts ``compiled.json``, when ``analyses``) there,
            through a staging folder renamed into place only when everything is written. It must not exist unless
            ``force``.
        progress: print progress lines on stderr.
        force: replace an existing ``out_dir``.
        providers: subset of :data:`PROVIDERS`.
        analyses: also run the row-threshold sweep, the workload replay and the compile-cost probe.
        extra_env: merged into ``environment.json``.
        declared: the ids of the predeclared matrix this run is part of (default: ``cases``); the note says how many
            of them ran and names the rest.
        host: also measure the host-overhead family (:mod:`fastpath_lib.bench.host`).
        deadline: a ``time.monotonic()`` value; cases not started by then are not run (``torch.compile`` runs after
            the other providers of every case, so a short budget loses it first).
        folder: write ``results.csv`` here after every case (the evidence command's staging folder); no note, no
            rename.
        copy: ``(GB/s, label)`` of a copy bandwidth measured earlier in the same run (default: measured here).

    Returns:
        the classified results (one row per case and provider; times in microseconds);
        ``df.attrs["environment"]`` holds the metadata.

    Note:
        Off CUDA every timing is a CPU / Triton-interpreter timing, labelled "not a GPU measurement".
    """
    cases = load_cases() if cases is None else list(cases)
    declared = [c.id for c in cases] if declared is None else list(declared)
    staging = results.begin(out_dir, force=force) if out_dir is not None else None
    log = _stderr if progress else None
    settings = settings_for(quick)
    gpu = gpu_measurement()
    t_start = time.perf_counter()
    copy_gbps, copy_label = copy or copy_bandwidth("cuda" if runtime.cuda_available() else "cpu", quick)
    env = matrix_environment(settings, copy_gbps=copy_gbps, copy_label=copy_label, providers=providers, cases=cases,
                             declared=declared, gpu=gpu)
    env.update(extra_env or {})
    if log:
        log(f"bench: {len(cases)} cases x {len(providers)} providers, {settings['timer']}"
            f"{'' if gpu else ' -- ' + NOT_GPU}; {copy_label}: {copy_gbps:.1f} GB/s")
    write_to = staging if staging is not None else folder
    if write_to is not None:  # first, so a run cut in the middle still says what was declared and where it ran
        (Path(write_to) / "environment.json").write_text(json.dumps(env, indent=2, default=str) + "\n")
    rows: list[dict] = []
    first = [p for p in providers if p != "compiled"]
    passes = [first] + ([["compiled"]] if "compiled" in providers else [])
    for k, provs in enumerate(passes):
        for i, case in enumerate(cases, 1):
            if deadline is not None and time.monotonic() > deadline:
                rows.extend(_row(case, p, quick, gpu, status="not run", note="the run's time budget ran out")
                            for p in provs)
                continue
            if log:
                r, c, _ = case.dims(quick)
                log(f"[{i}/{len(cases)}] {case.id} ({r}x{c} {case.dtype} {case.layout} {case.pass_})"
                    f"{' torch.compile' if k else ''} elapsed {time.perf_counter() - t_start:.0f}s")
            rows.extend(measure_case(case, quick=quick, settings=settings, copy_gbps=copy_gbps, providers=provs,
                                     log=log, gpu=gpu))
            if write_to is not None:
                results.write_table(write_to, _ordered(rows, [c.id for c in cases]))
    if host:
        rows.extend(measure_host(quick=quick, log=log))
    df = classify(_ordered(rows, [c.id for c in cases]))
    df.attrs["environment"] = env
    if staging is not None:
        extras = {}
        if analyses:
            if log:
                log(f"analyses: threshold sweep, replay, compile cost (elapsed {time.perf_counter() - t_start:.0f}s)")
            table = threshold_sweep(quick=quick, settings=settings)
            table.to_csv(staging / "threshold.csv", index=False)
            proposal = table.attrs.get("proposal")
            (staging / "threshold_proposal.json").write_text(json.dumps(proposal, indent=2, default=str))
            extras = {"threshold": {"table": table, "proposal": proposal},
                      "replay": replay(quick=quick, settings=settings),
                      "compile_cost": compile_cost(cases, quick=quick)}
            for name in ("replay", "compile_cost"):
                (staging / f"{name}.json").write_text(json.dumps(extras[name], indent=2, default=str))
            if not quick:  # compiling for sm_80 and sm_90 needs no GPU, but outlasts a quick run
                facts = compiled_facts(cases)
                if facts["rows"]:
                    extras["compiled"] = facts["rows"]
                    (staging / "compiled.json").write_text(json.dumps(facts["rows"], indent=2, default=str))
        env["wall_s"] = round(time.perf_counter() - t_start, 1)
        results.write(staging, df, env)
        (staging / "pr_note.md").write_text(pr_note(df=df, env=env, **extras))
        results.finish(staging, out_dir, force=force)
        if log:
            log(f"wrote {out_dir} in {env['wall_s']}s")
    elif folder is not None:
        results.write(folder, df, env)
    return df
