"""The timing harness: every case of the matrix, for every provider, with raw samples and mechanism columns.

Providers (:data:`PROVIDERS`):

* ``baseline`` — ``torch.nn.functional.rms_norm`` (the reference the PR must beat or match);
* ``triton`` — the kernel launchers of :mod:`fastpath_lib.rmsnorm.kernels` called directly, bypassing the predicate
  (skipped, with a note, where the kernel cannot handle the layout or width);
* ``dispatched`` — :func:`fastpath_lib.rms_norm`, predicate included: what users get;
* ``compiled`` — ``torch.compile`` of the reference (compile time recorded separately, excluded from the samples).

A ``backward`` case times forward+backward of each provider (``torch.autograd.grad`` of the output, or the two
launchers back to back), so the providers do the same work.

Timers: on CUDA ``triton.testing.do_bench`` (L2 flushed before every repetition; warm-up and repetition budgets
recorded). Off CUDA ``torch.utils.benchmark.Timer`` in blocks sized adaptively; these are CPU / Triton-interpreter
timings and are labelled "not a GPU measurement". ``do_bench`` is never called without CUDA.
Every repetition takes the next of several freshly drawn random input sets (never zeros), so a small case is not
flattered by finding its inputs in cache.
"""

from __future__ import annotations

import itertools
import json
import math
import sys
import time
import traceback
from pathlib import Path

import pandas as pd
import torch
import torch.nn.functional as F

import fastpath_lib
from fastpath_lib import runtime
from fastpath_lib.bench.matrix import BenchCase, load_cases
from fastpath_lib.rmsnorm.predicate import MAX_COLS, SUPPORTED_DTYPES, default_eps

__all__ = ["PROVIDERS", "CSV_COLUMNS", "HarnessSettings", "settings_for", "time_callable", "copy_bandwidth",
           "bytes_moved", "count_launches", "measure_case", "run_matrix"]

PROVIDERS = ("baseline", "triton", "dispatched", "compiled")

#: Columns of ``results.csv``, in order (one row per case and provider).
CSV_COLUMNS = [
    "case_id", "family", "provider", "pass", "rows", "cols", "dtype", "layout", "pad", "offset", "expected",
    "rationale", "route", "route_backward", "reasons", "status", "note", "timer", "warmup", "reps", "number",
    "input_sets", "median_ms", "q20_ms", "q80_ms", "mean_ms", "min_ms", "samples_ms", "bytes_moved", "gbps",
    "copy_gbps", "pct_copy_bw", "launches_per_call", "launches_note", "compile_s", "gpu_measurement", "quick",
]


class HarnessSettings(dict):
    """Timer settings, recorded in ``environment.json`` under ``harness``."""


def settings_for(quick: bool, cuda: bool | None = None) -> HarnessSettings:
    """Harness settings for this machine.

    Args:
        quick: the ``--quick`` variant (small shapes, short budgets).
        cuda: override CUDA detection (tests).

    Returns:
        a dict: ``timer``, ``warmup_ms``/``rep_ms`` (do_bench) or ``target_s``/``min_reps``/``max_reps``
        (torch.utils.benchmark), ``input_sets``, ``quick``, ``backward_mode``.

    Note:
        Off CUDA the timer is ``torch.utils.benchmark.Timer``; do_bench needs a driver.
    """
    cuda = runtime.cuda_available() if cuda is None else cuda
    s = HarnessSettings(quick=bool(quick), backward_mode="forward+backward of each provider (autograd.grad or the "
                        "two launchers)", rotation="each repetition takes the next input set")
    if cuda:
        s.update(timer="triton.testing.do_bench", warmup_ms=25 if quick else 50, rep_ms=50 if quick else 200,
                 l2_flush=True, input_sets=4, return_mode="all")
    else:
        s.update(timer="torch.utils.benchmark.Timer (adaptive blocks)", target_s=0.25 if quick else 1.0,
                 min_reps=5 if quick else 9, max_reps=25 if quick else 100, block_s=0.02, warmup_calls=2,
                 l2_flush=False, input_sets=2 if quick else 3)
    return s


def time_callable(fn, settings: dict) -> dict:
    """Time ``fn()`` and return its per-call samples.

    Args:
        fn: a zero-argument callable (it rotates its own inputs).
        settings: from :func:`settings_for`.

    Returns:
        ``{"samples_ms": [...], "warmup": ..., "reps": ..., "number": ..., "timer": ...}``; each sample is the
        mean time of one call over a block of ``number`` calls (1 on CUDA).

    Note:
        On CUDA this is ``triton.testing.do_bench(fn, warmup, rep, return_mode="all")``, which flushes L2 before
        each repetition. Off CUDA it is ``torch.utils.benchmark.Timer.timeit`` in adaptive blocks.
    """
    if settings["timer"].startswith("triton"):
        import triton.testing

        samples = triton.testing.do_bench(fn, warmup=settings["warmup_ms"], rep=settings["rep_ms"],
                                          return_mode="all")
        samples = [float(v) for v in samples]
        return {"samples_ms": samples, "warmup": f"{settings['warmup_ms']} ms", "reps": len(samples), "number": 1,
                "timer": settings["timer"]}
    from torch.utils.benchmark import Timer

    timer = Timer(stmt="fn()", globals={"fn": fn})
    for _ in range(settings["warmup_calls"]):
        est = timer.timeit(1).median
    number = max(1, int(settings["block_s"] / max(est, 1e-9)))
    reps = int(settings["target_s"] / max(est * number, 1e-9))
    reps = max(settings["min_reps"], min(settings["max_reps"], reps))
    samples = [timer.timeit(number).median * 1e3 for _ in range(reps)]
    return {"samples_ms": samples, "warmup": f"{settings['warmup_calls']} calls", "reps": reps, "number": number,
            "timer": settings["timer"]}


def copy_bandwidth(device: str | torch.device, quick: bool = False) -> tuple[float, str]:
    """Measured device-to-device copy bandwidth in GB/s (read + write), and a label saying what was copied.

    Args:
        device: ``"cuda"`` or ``"cpu"``.
        quick: a smaller buffer.

    Returns:
        ``(gb_per_s, label)``.

    Note:
        On the CPU this is a host-memory tensor copy (labelled as such), not a GPU ceiling.
    """
    dev = torch.device(device)
    nbytes = (64 if quick else 512) * 2**20 if dev.type == "cuda" else (16 if quick else 64) * 2**20
    src = torch.randn(nbytes // 4, device=dev)
    dst = torch.empty_like(src)
    settings = settings_for(quick, cuda=dev.type == "cuda")
    res = time_callable(lambda: dst.copy_(src), settings)
    med = _quantile(res["samples_ms"], 0.5)
    label = f"{'device-to-device' if dev.type == 'cuda' else 'CPU tensor'} copy of {nbytes >> 20} MiB"
    return 2 * nbytes / (med * 1e-3) / 1e9, label


def bytes_moved(rows: int, cols: int, dtype: torch.dtype, pass_: str, weight: bool = True) -> int:
    """Minimum bytes a call must move: each input read once, each output written once.

    Args:
        rows, cols, dtype: the case.
        pass_: ``"forward"`` (x, w in; y out) or ``"backward"`` (forward, then dy, x, w in; dx, dw out).
        weight: whether there is a weight.

    Returns:
        bytes (the fp32 partial-dw scratch of the Triton backward is not counted: it is the kernel's cost, not the
        problem's).
    """
    es = torch.empty((), dtype=dtype).element_size()
    act = rows * cols * es
    w = cols * es if weight else 0
    fwd = 2 * act + w
    return fwd if pass_ == "forward" else fwd + 3 * act + 2 * w


def count_launches(fn, calls: int = 3) -> tuple[float, str]:
    """Device kernel launches per call of ``fn`` seen by ``torch.profiler``.

    Returns:
        ``(launches_per_call, note)``.

    Note:
        Off CUDA there are no device kernels: returns ``(nan, note)`` without profiling (the interpreter runs each
        Triton program as Python, so the CPU profiler's op count says nothing about GPU launches).
    """
    if not runtime.cuda_available():
        return math.nan, "no CUDA: no device kernels to count"
    try:
        from torch.profiler import ProfilerActivity, profile

        fn()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                fn()
            torch.cuda.synchronize()
        n = sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
        return n / calls, "torch.profiler: CUDA device activities (kernels, memsets, copies)"
    except Exception as exc:  # profiler support differs across builds
        return math.nan, f"profiler failed: {type(exc).__name__}: {exc}"


def _quantile(samples, q: float) -> float:
    return float(torch.tensor(samples, dtype=torch.float64).quantile(q)) if samples else math.nan


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


def _triton_unsupported(x: torch.Tensor, w) -> str | None:
    if x.dim() != 2:
        return "kernel launchers take 2-D [rows, cols] views only"
    if x.shape[-1] > 1 and x.stride(-1) != 1:
        return f"last-dim stride {x.stride(-1)}: the kernel loads contiguous rows only"
    if x.shape[-1] > MAX_COLS:
        return f"{x.shape[-1]} columns > MAX_COLS={MAX_COLS}: one program holds a whole row"
    if x.dtype not in SUPPORTED_DTYPES:
        return f"dtype {x.dtype} not written in the kernel"
    if x.device.type == "cpu" and not runtime.interpreter_enabled():
        return "CPU without TRITON_INTERPRET=1: Triton cannot run here"
    return None


def _provider_fn(provider: str, inputs: _Inputs, case: BenchCase):
    """A zero-argument callable running ``provider`` on the next input set, or a string saying why it is skipped."""
    bwd = case.pass_ == "backward"
    eps = default_eps(case.torch_dtype)
    if provider == "baseline":
        op = F.rms_norm
    elif provider == "dispatched":
        op = fastpath_lib.rms_norm
    elif provider == "triton":
        x, _, w, _, _ = inputs.sets[0]
        why = _triton_unsupported(x, w)
        if why:
            return why
        from fastpath_lib.rmsnorm import kernels

        if bwd:
            def run():
                x, _, w, dy, _ = inputs.next()
                kernels.forward(x.detach(), w.detach(), eps)
                return kernels.backward(dy, x.detach(), w.detach(), eps)
        else:
            def run():
                x, _, w, _, _ = inputs.next()
                return kernels.forward(x, w, eps)
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
    base = {c: None for c in CSV_COLUMNS}
    base.update(case_id=case.id, family=case.family, provider=provider, **{"pass": case.pass_}, rows=rows, cols=cols,
                dtype=case.dtype, layout=case.layout, pad=pad, offset=case.offset, expected=case.expected,
                rationale=case.rationale, gpu_measurement=gpu, quick=quick, samples_ms="[]")
    base.update(kw)
    return base


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
                 providers=PROVIDERS, log=None) -> list[dict]:
    """Time one case for each provider; one result row per provider.

    Args:
        case: the case.
        quick: use its quick shape.
        settings: from :func:`settings_for` (default: this machine's).
        copy_gbps: the run's measured copy bandwidth, for ``pct_copy_bw``.
        providers: which providers to run.
        log: ``callable(str)`` for progress lines.

    Returns:
        rows with the :data:`CSV_COLUMNS` keys; skipped providers have ``status="skipped"`` and a ``note``.

    Note:
        Off CUDA, ``compiled`` is skipped in quick mode (inductor's C++ build takes longer than the whole quick run);
        in a full CPU run it is attempted and any failure recorded.
    """
    cuda = runtime.cuda_available()
    settings = settings or settings_for(quick)
    gpu = bool(cuda and not runtime.interpreter_enabled())
    device = torch.device("cuda" if cuda else "cpu")
    inputs = _Inputs(case, quick, settings["input_sets"], device)
    route, route_bwd, reasons = _routes(inputs, case)
    rows, cols, _ = case.dims(quick)
    nbytes = bytes_moved(rows, cols, case.torch_dtype, case.pass_)
    out = []
    for provider in providers:
        common = dict(route=route, route_backward=route_bwd, reasons=reasons, bytes_moved=nbytes,
                      copy_gbps=copy_gbps, input_sets=len(inputs.sets))
        if provider == "compiled" and quick and not cuda:
            out.append(_row(case, provider, quick, gpu, status="skipped", note="torch.compile skipped in --quick on "
                            "CPU: inductor's C++ build outlasts the quick budget", **common))
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
                t0 = time.perf_counter()
                fn()
                if cuda:
                    torch.cuda.synchronize()
                compile_s = time.perf_counter() - t0
            res = time_callable(fn, settings)
            launches, lnote = count_launches(fn)
        except Exception as exc:
            out.append(_row(case, provider, quick, gpu, status="error", note=f"{type(exc).__name__}: {exc}"[:500],
                            **common))
            if log:
                log(f"  {provider}: error {type(exc).__name__}: {exc}")
                log("".join(traceback.format_exception_only(type(exc), exc)).strip())
            continue
        s = res["samples_ms"]
        med = _quantile(s, 0.5)
        gbps = nbytes / (med * 1e-3) / 1e9 if med > 0 else math.nan
        out.append(_row(case, provider, quick, gpu, status="ok", note="", timer=res["timer"], warmup=res["warmup"],
                        reps=res["reps"], number=res["number"], median_ms=med, q20_ms=_quantile(s, 0.2),
                        q80_ms=_quantile(s, 0.8), mean_ms=sum(s) / len(s), min_ms=min(s),
                        samples_ms=json.dumps([round(v, 6) for v in s]), gbps=gbps,
                        pct_copy_bw=100 * gbps / copy_gbps if copy_gbps and not math.isnan(copy_gbps) else math.nan,
                        launches_per_call=launches, launches_note=lnote, compile_s=compile_s, **common))
        if log:
            log(f"  {provider:<10} median {med:.4g} ms  [{_quantile(s, 0.2):.4g}, {_quantile(s, 0.8):.4g}]  "
                f"route={route}")
    return out


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run_matrix(cases: list[BenchCase] | None = None, *, quick: bool = False, out_dir: str | Path | None = None,
               progress: bool = True, force: bool = False, providers=PROVIDERS, analyses: bool = True,
               extra_env: dict | None = None) -> pd.DataFrame:
    """Run the whole matrix; optionally write a complete results folder.

    Args:
        cases: the matrix (default :func:`~fastpath_lib.bench.load_cases`).
        quick: small shapes and short budgets (same case ids).
        out_dir: when given, write ``results.csv``, ``environment.json``, ``boundary.png``, ``boundary.csv``,
            ``pr_note.md`` (plus ``threshold.csv``, ``replay.json``, ``compile_cost.json`` when ``analyses``) there.
            The folder must not exist unless ``force``; files are written to a temporary sibling folder marked
            ``INCOMPLETE`` and renamed into place only when everything is written, so an interrupted run never
            leaves a folder that looks complete.
        progress: print progress lines on stderr.
        force: replace an existing ``out_dir``.
        providers: subset of :data:`PROVIDERS`.
        analyses: also run the row-threshold sweep, the workload replay and the compile-cost probe.
        extra_env: merged into ``environment.json``.

    Returns:
        the classified results (``DataFrame``, one row per case and provider); ``df.attrs["environment"]`` holds
        the metadata.

    Note:
        Off CUDA every timing is a CPU / Triton-interpreter timing, labelled "not a GPU measurement".
    """
    from fastpath_lib.bench import analysis, report, results, workload
    from fastpath_lib.bench.metadata import environment as _environment

    cases = load_cases() if cases is None else list(cases)
    staging = results.begin(out_dir, force=force) if out_dir is not None else None
    log = _stderr if progress else None
    settings = settings_for(quick)
    cuda = runtime.cuda_available()
    t_start = time.perf_counter()
    copy_gbps, copy_label = copy_bandwidth("cuda" if cuda else "cpu", quick)
    if log:
        log(f"bench: {len(cases)} cases x {len(providers)} providers, {settings['timer']}"
            f"{'' if cuda and not runtime.interpreter_enabled() else ' -- not a GPU measurement'}; "
            f"{copy_label}: {copy_gbps:.1f} GB/s")
    rows = []
    for i, case in enumerate(cases, 1):
        if log:
            r, c, _ = case.dims(quick)
            log(f"[{i}/{len(cases)}] {case.id} ({r}x{c} {case.dtype} {case.layout} {case.pass_}) "
                f"elapsed {time.perf_counter() - t_start:.0f}s")
        rows.extend(measure_case(case, quick=quick, settings=settings, copy_gbps=copy_gbps, providers=providers,
                                 log=log))
    df = analysis.classify(pd.DataFrame(rows, columns=CSV_COLUMNS))
    env = _environment(dict(settings, copy_bandwidth=copy_label, copy_gbps=copy_gbps,
                                       providers=list(providers), cases=len(cases)))
    env.update(extra_env or {})
    df.attrs["environment"] = env
    if staging is not None:
        extras = {}
        if analyses:
            if log:
                log(f"analyses: threshold sweep, replay, compile cost (elapsed {time.perf_counter() - t_start:.0f}s)")
            sweep = analysis.threshold_sweep(quick=quick, settings=settings)
            sweep.to_csv(staging / "threshold.csv", index=False)
            proposal = sweep.attrs.get("proposal")
            (staging / "threshold_proposal.json").write_text(json.dumps(proposal, indent=2, default=str))
            extras = {"threshold": {"table": sweep, "proposal": proposal},
                      "replay": workload.replay(quick=quick, settings=settings),
                      "compile_cost": workload.compile_cost(cases, quick=quick)}
            for name in ("replay", "compile_cost"):
                (staging / f"{name}.json").write_text(json.dumps(extras[name], indent=2, default=str))
        env["wall_s"] = round(time.perf_counter() - t_start, 1)
        results.write(staging, df, env)
        report_text = report.pr_note(df=df, env=env, **extras)
        (staging / "pr_note.md").write_text(report_text)
        results.finish(staging, out_dir, force=force)
        if log:
            log(f"wrote {out_dir} in {env['wall_s']}s")
    return df

