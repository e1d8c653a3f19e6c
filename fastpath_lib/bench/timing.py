"""Timing: the timer settings, one timed callable, the copy bandwidth and launch counts (``bytes_moved`` is the default
op's bytes model, read from its spec, for the callers that import it from the bench).

On CUDA the timer is ``triton.testing.do_bench`` (L2 flushed before every repetition, one input set: the flush
already empties L2, so rotating several sets would only cost their build), and a call whose device time is a few
microseconds is timed again with ``triton.testing.do_bench_cudagraph`` (:data:`CUDAGRAPH_BELOW_US`): one event pair
per repetition adds a fixed offset a graph of many calls spreads out, so such rows carry both and say which their
median is. Off CUDA it is ``torch.utils.benchmark.Timer`` in adaptive blocks, and every such time is labelled "not a
GPU measurement". ``do_bench`` is never called without CUDA. Times are in microseconds
(:data:`~fastpath_lib.bench.schema.TIME_UNIT`).
"""

from __future__ import annotations

import math

import torch

from fastpath_lib import opspec, runtime

__all__ = ["HarnessSettings", "gpu_measurement", "settings_for", "time_callable", "timed_fields", "quantile",
           "copy_bandwidth", "bytes_moved", "count_launches", "count_launches_each", "split_by_window",
           "COMPILE_SKIPPED", "compile_skipped", "first_call_s", "CUDAGRAPH_BELOW_US", "CUDAGRAPH_TIMER"]

def bytes_moved(rows: int, cols: int, dtype, pass_: str = "forward", **options) -> int:
    """The default op's bytes model (``opspec.default().bytes_moved``, the op beside its spec): the minimum bytes a
    ``rows x cols`` call of ``dtype`` moves in ``pass_``; ``options`` go to the model.

    >>> bytes_moved(4, 8, torch.float16) == opspec.default().bytes_moved(4, 8, torch.float16, "forward")
    True
    """
    return opspec.default().bytes_moved(rows, cols, dtype, pass_, **options)


#: Why ``torch.compile`` is not timed in a quick run off CUDA (every runner's skipped row says this).
COMPILE_SKIPPED = "torch.compile skipped in --quick on CPU: inductor's C++ build outlasts the quick budget"
#: A CUDA row whose do_bench median is below this many microseconds is timed again under a CUDA graph.
CUDAGRAPH_BELOW_US = 20.0
#: The timer of a row timed under a CUDA graph.
CUDAGRAPH_TIMER = "triton.testing.do_bench_cudagraph"


class HarnessSettings(dict):
    """Timer settings, recorded in ``environment.json`` under ``harness``."""


def gpu_measurement() -> bool:
    """Whether timings taken in this process are GPU measurements: CUDA present and Triton not interpreted.

    Decided here once per run and carried in every result row (``gpu_measurement``) and ``environment.json``.
    """
    return runtime.kernel_device() == "cuda"


def settings_for(quick: bool, cuda: bool | None = None) -> HarnessSettings:
    """Harness settings for this machine.

    Args:
        quick: the ``--quick`` variant (small shapes, short budgets).
        cuda: override CUDA detection (tests).

    Returns:
        a dict: ``timer``, ``warmup_ms``/``rep_ms`` (do_bench's own arguments, in ms) or
        ``target_s``/``min_reps``/``max_reps`` (torch.utils.benchmark), ``input_sets``, ``quick``, ``backward_mode``.

    Note:
        Off CUDA the timer is ``torch.utils.benchmark.Timer``; do_bench needs a driver.
    """
    cuda = runtime.cuda_available() if cuda is None else cuda
    s = HarnessSettings(quick=bool(quick), backward_mode="forward+backward of each provider (autograd.grad or the "
                        "two launchers)", rotation="each repetition takes the next input set", time_unit="us")
    if cuda:
        # do_bench's own defaults (25 ms warm-up, 100 ms of repetitions): a 5 us kernel still gets ~20000 repetitions
        s.update(timer="triton.testing.do_bench", warmup_ms=25, rep_ms=50 if quick else 100,
                 l2_flush=True, input_sets=1, return_mode="all", cudagraph_below_us=CUDAGRAPH_BELOW_US,
                 cudagraph_rep_ms=20 if quick else 50)
    else:
        s.update(timer="torch.utils.benchmark.Timer (adaptive blocks)", target_s=0.25 if quick else 1.0,
                 min_reps=5 if quick else 9, max_reps=25 if quick else 100, block_s=0.02, warmup_calls=2,
                 l2_flush=False, input_sets=2 if quick else 3)
    return s


def time_callable(fn, settings: dict) -> dict:
    """Time ``fn()`` and return its per-call samples in microseconds.

    Args:
        fn: a zero-argument callable (it rotates its own inputs).
        settings: from :func:`settings_for`.

    Returns:
        ``{"samples_us": [...], "warmup": ..., "reps": ..., "number": ..., "timer": ...}``; each sample is the
        mean time of one call over a block of ``number`` calls (1 on CUDA).

    Note:
        On CUDA this is ``triton.testing.do_bench(fn, warmup, rep, return_mode="all")``, which flushes L2 before
        each repetition. Off CUDA it is ``torch.utils.benchmark.Timer.timeit`` in adaptive blocks.
    """
    if settings["timer"].startswith("triton"):
        import triton.testing

        samples = triton.testing.do_bench(fn, warmup=settings["warmup_ms"], rep=settings["rep_ms"],
                                          return_mode="all")
        samples = [float(v) * 1e3 for v in samples]  # do_bench reports milliseconds
        return {"samples_us": samples, "warmup": f"{settings['warmup_ms']} ms", "reps": len(samples), "number": 1,
                "timer": settings["timer"]}
    from torch.utils.benchmark import Timer

    timer = Timer(stmt="fn()", globals={"fn": fn})
    est = 0.0
    for _ in range(settings["warmup_calls"]):
        est = timer.timeit(1).median
    number = max(1, int(settings["block_s"] / max(est, 1e-9)))
    reps = int(settings["target_s"] / max(est * number, 1e-9))
    reps = max(settings["min_reps"], min(settings["max_reps"], reps))
    samples = [timer.timeit(number).median * 1e6 for _ in range(reps)]
    return {"samples_us": samples, "warmup": f"{settings['warmup_calls']} calls", "reps": reps, "number": number,
            "timer": settings["timer"]}


def graph_time(fn, settings: dict, do_bench_cudagraph=None) -> dict | None:
    """``fn()``'s device time under a CUDA graph (``triton.testing.do_bench_cudagraph``, its median, microseconds), or
    ``None`` when it cannot be captured (a call that synchronizes or allocates outside the graph's pool); the row
    then keeps its do_bench time and says why (``graph_note``)."""
    import triton.testing

    bench = do_bench_cudagraph or triton.testing.do_bench_cudagraph
    try:
        ms = bench(fn, rep=settings.get("cudagraph_rep_ms", 50), return_mode="median")
    except Exception as exc:  # noqa: BLE001 - a call that cannot be captured keeps its do_bench time
        return {"graph_note": f"not timed under a CUDA graph: {type(exc).__name__}: {exc}"[:300]}
    return {"graph_median_us": float(ms) * 1e3}


def timed_fields(call, settings: dict, *, graph=None) -> dict:
    """Time ``call()`` (:func:`time_callable`) and return a result row's timing columns: the timer and its settings,
    median, 20 % and 80 % quantiles, mean, minimum and the raw samples (JSON), in microseconds.

    On CUDA, a call whose median is below ``settings["cudagraph_below_us"]`` is timed again under a CUDA graph
    (:func:`graph_time`, or ``graph`` in tests): the row's ``median_us`` is then the graph's and its ``timer`` says
    so, while the quantiles, mean, minimum and samples stay do_bench's (``note`` names both)."""
    import json

    res = time_callable(call, settings)
    s = res["samples_us"]
    out = dict(timer=res["timer"], warmup=res["warmup"], reps=res["reps"], number=res["number"],
               median_us=quantile(s, 0.5), q20_us=quantile(s, 0.2), q80_us=quantile(s, 0.8), mean_us=sum(s) / len(s),
               min_us=min(s), samples_us=json.dumps([round(v, 4) for v in s]))
    below = settings.get("cudagraph_below_us")
    if below and out["median_us"] < below:
        g = (graph or graph_time)(call, settings)
        if g and "graph_median_us" in g:
            out.update(timer=f"{CUDAGRAPH_TIMER} (median); do_bench's samples kept",
                       graph_median_us=g["graph_median_us"], do_bench_median_us=out["median_us"],
                       median_us=g["graph_median_us"])
        elif g:
            out.update(g)
    return out


def compile_skipped(quick: bool) -> bool:
    """Whether ``torch.compile`` is left out of this run (:data:`COMPILE_SKIPPED`): a quick run off CUDA."""
    return quick and not runtime.cuda_available()


def first_call_s(call) -> float:
    """Seconds of ``call()``'s first run (for ``torch.compile``: the compile), synchronized on CUDA."""
    import time

    t0 = time.perf_counter()
    call()
    if runtime.cuda_available():
        torch.cuda.synchronize()
    return time.perf_counter() - t0


def quantile(samples, q: float) -> float:
    """The ``q`` quantile of ``samples`` (NaN when empty).

    >>> quantile([1.0, 2.0, 3.0], 0.5)
    2.0
    """
    return float(torch.tensor(list(samples), dtype=torch.float64).quantile(q)) if len(samples) else math.nan


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
    med = quantile(res["samples_us"], 0.5)
    label = f"{'device-to-device' if dev.type == 'cuda' else 'CPU tensor'} copy of {nbytes >> 20} MiB"
    return 2 * nbytes / (med * 1e-6) / 1e9, label


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


def split_by_window(windows: dict, events) -> dict:
    """How many of ``events`` (``(start_us, ...)`` tuples, device activities) start inside each named window
    (``name -> (start_us, end_us)``, host ranges bracketed by device synchronizations, so a window's device work
    starts and ends inside it).

    >>> split_by_window({"a": (0, 10), "b": (10, 20)}, [(1,), (2,), (15,), (30,)])
    {'a': 2, 'b': 1}
    """
    return {name: sum(1 for e in events if lo <= e[0] < hi) for name, (lo, hi) in windows.items()}


def count_launches_each(fns: dict, calls: int = 3) -> dict:
    """Device kernel launches per call of each of ``fns`` (name -> callable), in one ``torch.profiler`` session: each
    callable runs ``calls`` times inside its own ``record_function`` window, bracketed by synchronizations, and the
    device activities starting in that window are its (:func:`split_by_window`). One session per case instead of one
    per provider: a profiler start costs more than the calls it counts.

    Returns:
        name -> ``(launches_per_call, note)``; off CUDA ``(nan, note)`` for each, without profiling.
    """
    if not fns:
        return {}
    if not runtime.cuda_available():
        return {n: (math.nan, "no CUDA: no device kernels to count") for n in fns}
    try:
        from torch.profiler import ProfilerActivity, profile, record_function

        for fn in fns.values():
            fn()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for name, fn in fns.items():
                with record_function(f"fastpath_count::{name}"):
                    for _ in range(calls):
                        fn()
                    torch.cuda.synchronize()
        events = prof.events()
        windows = {e.name.split("::", 1)[1]: (e.time_range.start, e.time_range.end) for e in events
                   if e.name.startswith("fastpath_count::")}
        device = [(e.time_range.start,) for e in events if e.device_type == torch.autograd.DeviceType.CUDA]
        found = split_by_window(windows, device)
        note = "torch.profiler: CUDA device activities (kernels, memsets, copies), one session per case"
        return {n: (found[n] / calls, note) if n in found else (math.nan, "profiler: no window recorded")
                for n in fns}
    except Exception as exc:  # profiler support differs across builds
        return {n: (math.nan, f"profiler failed: {type(exc).__name__}: {exc}") for n in fns}
