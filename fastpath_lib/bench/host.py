"""The host-overhead family: what the dispatch costs per call, measured side by side with ``F.rms_norm``.

Outside its region the public op must cost what ``F.rms_norm`` costs: on a GPU a decode step's norm runs in a few
microseconds, so tens of microseconds of Python dispatch per call would be the very regression the predicate exists
to prevent. This family times, in one process and interleaved round by round:

* fallback calls (:data:`FALLBACK_CASES`: M=1 decode in fp16, M=1 bf16 input with an fp32 weight, a 4x2048 fp32
  batch, a transposed input): ``fastpath_lib.rms_norm`` against ``F.rms_norm``; the ratio is held to
  :data:`TARGET_RATIO`;
* on CUDA, an eligible call (:data:`ELIGIBLE_CASE`): the dispatched op against the launcher called directly
  (:func:`fastpath_lib.rmsnorm.kernels.forward`), so the difference is the host time the route adds before its
  launch. Off CUDA the eligible route runs in Triton's interpreter, whose own cost hides the dispatch: those rows say
  "not measured" instead of a number.

Each provider's time is its fastest block of consecutive calls, the providers interleaved block by block
(:func:`fastest_blocks`). Host time is a real measurement on a CPU too, so these rows are classified on any machine.
Times in microseconds.

What a provider warns is part of its result, not noise on the console: each row's ``warnings`` column holds what one
call of it warned (torch's warn-once warnings included), and the timed calls run with warnings silenced. ``F.rms_norm``
on a bf16 input with an fp32 weight, for one, warns that it cannot use its fused implementation.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import re
import warnings

import pandas as pd
import torch
import torch.nn.functional as F

import fastpath_lib
from fastpath_lib import runtime
from fastpath_lib.bench.schema import HOST_FAMILY, empty_row, host_rows
from fastpath_lib.bench.timing import gpu_measurement, quantile
from fastpath_lib.rmsnorm.predicate import default_eps, limits_for

__all__ = ["HostCase", "FALLBACK_CASES", "ELIGIBLE_CASE", "TARGET_RATIO", "NOT_MEASURED", "HOST_TIMER",
           "fastest_blocks", "timing_fields", "host_blocks", "measure_host", "host_table", "host_plot", "warnings_of"]

#: The dispatched op may cost at most this multiple of ``F.rms_norm`` per call on the fallback route.
TARGET_RATIO = 1.15

#: What the eligible rows say off CUDA.
NOT_MEASURED = "not measured: the interpreter's cost hides it"


@dataclasses.dataclass(frozen=True)
class HostCase:
    """One host-overhead call: ``rows x cols`` of ``dtype`` (``transposed`` builds it as a transposed view)."""

    id: str
    rows: int
    cols: int
    dtype: torch.dtype
    weight_dtype: torch.dtype | None = None
    transposed: bool = False
    rationale: str = ""

    def build(self, device: str, seed: int = 0):
        """``(x, normalized_shape, weight)`` on ``device``."""
        g = torch.Generator(device="cpu").manual_seed(seed)
        if self.transposed:
            x = torch.randn(self.cols, self.rows, generator=g).to(device=device, dtype=self.dtype).t()
        else:
            x = torch.randn(self.rows, self.cols, generator=g).to(device=device, dtype=self.dtype)
        w = (1 + torch.randn(self.cols, generator=g) / 4).to(device=device, dtype=self.weight_dtype or self.dtype)
        return x, (self.cols,), w

    @property
    def layout(self) -> str:
        return "transposed" if self.transposed else "contiguous"


FALLBACK_CASES = (
    HostCase("host_decode_m1_fp16", 1, 4096, torch.float16, rationale="M=1 decode token, fp16"),
    HostCase("host_decode_m1_bf16_w32", 1, 4096, torch.bfloat16, torch.float32,
             rationale="M=1 decode token, bf16 input with an fp32 weight (mixed-precision checkpoints)"),
    HostCase("host_batch_4x2048_fp32", 4, 2048, torch.float32, rationale="small fp32 batch below the row threshold"),
    HostCase("host_transposed_64x64", 64, 64, torch.float32, transposed=True,
             rationale="a transposed input: last dimension not contiguous"),
)

#: The eligible call on CUDA: the smallest eligible batch of 256-wide fp16 rows (host-bound, not memory-bound).
ELIGIBLE_CASE = HostCase("host_eligible_fp16", 0, 256, torch.float16,
                         rationale="eligible route: host time of the dispatch before its launch vs the launcher")


#: How the family times (each row's ``timer``).
HOST_TIMER = ("time.perf_counter around blocks of consecutive calls (synchronized at the end of each block on CUDA), "
              "the providers interleaved block by block (order alternating), garbage collection off; the fastest "
              "block per provider (host time per call)")


def fastest_blocks(fns: dict, *, blocks: int = 40, number: int | None = 1000, warmup: int = 200, sync=None,
                   block_s: float = 0.01) -> dict:
    """Time several callables side by side: ``blocks`` rounds, in each of which every callable runs ``number`` times
    in a row (the order alternating between rounds); keep each one's fastest block.

    Host time per call swings from one moment to the next on a shared machine (other processes, caches, frequency),
    and a median over a few long runs swings with it (the best of a few ``blocked_autorange`` medians moved 1.18-1.30x
    between runs of the same code on a 2-core machine). The fastest of many short blocks, taken for both providers in
    the same minutes, is the time each one needs when nothing interferes; their ratio moved by about 0.05 there.

    Args:
        fns: name -> zero-argument callable.
        blocks: rounds (each callable's number of blocks).
        number: calls per block; ``None``: as many as fill about ``block_s`` seconds, per callable (at most 1000).
        warmup: calls of each callable before timing (first calls compile, cache and allocate); at most ``number``.
        sync: called at the end of each block, inside the timed part (``torch.cuda.synchronize``: a block's time
            then includes the device work it queued, as ``torch.utils.benchmark.Timer``'s does).
        block_s: the block length ``number=None`` aims at.

    Returns:
        name -> ``{"best_us", "samples_us", "number", "blocks", "warmup"}``: the fastest block's time per call, every
        block's (in the order run), and the calls per block and warm-up calls it ran.

    >>> res = fastest_blocks({"a": lambda: None}, blocks=3, number=10, warmup=1)
    >>> len(res["a"]["samples_us"]), res["a"]["best_us"] == min(res["a"]["samples_us"])
    (3, True)
    """
    import gc
    import time

    clock = time.perf_counter
    counts = {}
    for k, fn in fns.items():
        fn()
        start = clock()
        fn()
        if sync is not None:
            sync()
        one = clock() - start
        counts[k] = number or max(1, min(1000, int(block_s / max(one, 1e-7))))
        for _ in range(min(warmup, counts[k])):
            fn()
    samples: dict[str, list[float]] = {k: [] for k in fns}
    names = list(fns)
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for b in range(blocks):
            for k in names if b % 2 == 0 else names[::-1]:
                fn, n = fns[k], counts[k]
                start = clock()
                for _ in range(n):
                    fn()
                if sync is not None:
                    sync()
                samples[k].append((clock() - start) / n * 1e6)
    finally:
        if was_enabled:
            gc.enable()
    return {k: {"best_us": min(v), "samples_us": v, "number": counts[k], "blocks": blocks,
                "warmup": min(warmup, counts[k])} for k, v in samples.items()}


def timing_fields(res: dict) -> dict:
    """The results schema's timing columns for one provider's :func:`fastest_blocks` result: ``min_us`` is the
    fastest block (what :func:`host_table` compares), ``median_us``, ``q20_us``, ``q80_us`` and ``mean_us`` describe
    all blocks, ``samples_us`` lists them."""
    s = res["samples_us"]
    return dict(reps=res["blocks"], number=res["number"], warmup=f"{res['warmup']} calls", timer=HOST_TIMER,
                median_us=quantile(s, 0.5), q20_us=quantile(s, 0.2), q80_us=quantile(s, 0.8), mean_us=sum(s) / len(s),
                min_us=res["best_us"], samples_us=json.dumps([round(v, 4) for v in s]),
                note=f"fastest of {res['blocks']} blocks of {res['number']} calls")


def host_blocks(quick: bool, rounds: int | None) -> tuple[int, int]:
    """``(blocks, calls per block)`` for a run: ``rounds`` blocks when given, else 40 (12 with ``quick``)."""
    return (rounds or (12 if quick else 40)), (300 if quick else 1000)


_TRIGGERED = re.compile(r"\s*\(Triggered internally at [^)]*\)")  # the C++ location torch appends


def warnings_of(fn) -> str:
    """What one call of ``fn`` warns, torch's warn-once warnings included: distinct messages joined by ``" | "``,
    without the C++ source location torch appends (``(Triggered internally at ...)``).

    Torch raises a ``TORCH_WARN_ONCE`` warning once per process, so whether it shows would depend on what ran before;
    ``torch.set_warn_always`` makes it show on this call (and is put back as it was).

    >>> x, w = torch.ones(1, 8, dtype=torch.bfloat16), torch.ones(8)
    >>> warnings_of(lambda: F.rms_norm(x, [8], w))[:39]
    'Mismatch dtype between input and weight'
    >>> warnings_of(lambda: F.rms_norm(x, [8]))
    ''
    """
    always = torch.is_warn_always_enabled()
    torch.set_warn_always(True)
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            fn()
    finally:
        torch.set_warn_always(always)
    return " | ".join(dict.fromkeys(_TRIGGERED.sub("", " ".join(str(w.message).split())) for w in seen))


@contextlib.contextmanager
def _silenced():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _route(x, ns, w) -> tuple[str, str]:
    with fastpath_lib.record_routes() as routes:
        fastpath_lib.rms_norm(x, ns, w)
    return (routes.most_common(1)[0][0] if routes else "?"), "; ".join(fastpath_lib.explain(x, ns, w).reasons)


def _base_row(case: HostCase, provider: str, gpu: bool, rows: int, **kw) -> dict:
    wd = f" ({str(case.weight_dtype).replace('torch.', '')} weight)" if case.weight_dtype else ""
    return empty_row(case_id=case.id, family=HOST_FAMILY, provider=provider, rows=rows, cols=case.cols,
                     dtype=str(case.dtype).replace("torch.", ""), layout=case.layout + wd, pad=0, offset=0,
                     declared_shape=f"{rows}x{case.cols}", rationale=case.rationale, gpu_measurement=gpu,
                     **{"pass": "forward"}, **kw)


def _timed_row(case, provider, gpu, rows, res, **kw) -> dict:
    return _base_row(case, provider, gpu, rows, status="ok", **timing_fields(res), **kw)


def measure_host(*, quick: bool = False, log=None, rounds: int | None = None) -> list[dict]:
    """Measure the host-overhead family on this machine.

    Args:
        quick: fewer rounds.
        log: ``callable(str)`` for progress lines.
        rounds: override the number of blocks (:func:`fastest_blocks`).

    Returns:
        result rows (schema :data:`~fastpath_lib.bench.schema.CSV_COLUMNS`, ``family="host-overhead"``): per
        fallback case a ``baseline`` and a ``dispatched`` row; for the eligible case ``baseline``, ``triton`` (the
        launcher) and ``dispatched`` rows, measured on CUDA only (elsewhere ``status="not measured"``).
    """
    blocks, number = host_blocks(quick, rounds)
    gpu = gpu_measurement()
    dev = "cuda" if runtime.cuda_available() else "cpu"
    sync = torch.cuda.synchronize if dev == "cuda" else None
    out = []
    for case in FALLBACK_CASES:
        x, ns, w = case.build(dev)
        fns = {"baseline": lambda: F.rms_norm(x, ns, w), "dispatched": lambda: fastpath_lib.rms_norm(x, ns, w)}
        warned = {p: warnings_of(fn) for p, fn in fns.items()}
        with _silenced():
            route, reasons = _route(x, ns, w)
            res = fastest_blocks(fns, blocks=blocks, number=number, sync=sync)
        for p in ("baseline", "dispatched"):
            out.append(_timed_row(case, p, gpu, case.rows, res[p], expected="fallback", route=route,
                                  reasons=reasons, warnings=warned[p]))
        if log:
            ratio = res["dispatched"]["best_us"] / res["baseline"]["best_us"]
            log(f"  {case.id}: F.rms_norm {res['baseline']['best_us']:.2f} us, dispatched "
                f"{res['dispatched']['best_us']:.2f} us, ratio {ratio:.2f} (target <= {TARGET_RATIO})")
    case = ELIGIBLE_CASE
    rows = limits_for(dev).min_rows
    if not gpu:
        for p in ("baseline", "triton", "dispatched"):
            out.append(_base_row(case, p, gpu, rows, status="not measured", note=NOT_MEASURED, expected="n/a"))
        return out
    from fastpath_lib.rmsnorm import kernels  # imported on use, after the mode is settled

    x, ns, w = dataclasses.replace(case, rows=rows).build(dev)
    eps = default_eps(x.dtype)
    fns = {"baseline": lambda: F.rms_norm(x, ns, w), "triton": lambda: kernels.forward(x, w, eps),
           "dispatched": lambda: fastpath_lib.rms_norm(x, ns, w)}
    warned = {p: warnings_of(fn) for p, fn in fns.items()}
    with _silenced():
        route, reasons = _route(x, ns, w)
        res = fastest_blocks(fns, blocks=blocks, number=number, sync=sync)
    try:
        import triton.testing

        kernel_us = float(triton.testing.do_bench(lambda: kernels.forward(x, w, eps), warmup=10, rep=50)) * 1e3
        knote = f"; the kernel itself runs {kernel_us:.2f} us on the device (do_bench)"
    except Exception as exc:  # noqa: BLE001 - a note, not a result
        knote = f"; device time not measured ({type(exc).__name__})"
    for p in ("baseline", "triton", "dispatched"):
        out.append(_timed_row(case, p, gpu, rows, res[p], expected="n/a", route=route, reasons=reasons,
                              warnings=warned[p]))
        out[-1]["note"] += knote
    if log:
        log(f"  {case.id}: launcher {res['triton']['best_us']:.2f} us, "
            f"dispatched {res['dispatched']['best_us']:.2f} us")
    return out


_PROVIDER_NAMES = {"baseline": "F.rms_norm", "triton": "launcher", "dispatched": "dispatched"}


def host_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per host-overhead case: the times side by side and the ratio the target applies to.

    Returns:
        columns ``case, shape, dtype, layout, route, baseline_us, dispatched_us, launcher_us, ratio, ratio_to,
        target, verdict, warnings``; ``ratio`` is dispatched / ``F.rms_norm`` on fallback cases and dispatched /
        launcher on the eligible case, ``verdict`` is ``within``, ``OVER`` or the "not measured" line, ``warnings``
        what the providers warned, each message once with who raised it (``"F.rms_norm and dispatched: ..."``;
        empty when none did).
    """
    rows = []
    for cid, g in host_rows(df).groupby("case_id", sort=False):
        by = {r.provider: r for r in g.itertuples()}
        d = by.get("dispatched")
        if d is None:
            continue

        def t(p):
            r = by.get(p)
            return float(r.min_us) if r is not None and r.status == "ok" else math.nan

        eligible = "triton" in by
        ref = t("triton") if eligible else t("baseline")
        ratio = t("dispatched") / ref if ref and not math.isnan(ref) else math.nan
        if d.status != "ok":
            verdict = str(d.note)
        elif eligible:
            verdict = f"dispatch adds {t('dispatched') - ref:.2f} us before the launch"
        else:
            verdict = "within" if ratio <= TARGET_RATIO else "OVER"
        who: dict[str, list[str]] = {}  # each distinct message once, with the providers that raised it
        for p, name in _PROVIDER_NAMES.items():
            msg = getattr(by.get(p), "warnings", None)
            if isinstance(msg, str) and msg:
                who.setdefault(msg, []).append(name)
        warned = " | ".join(f"{' and '.join(names)}: {msg}" for msg, names in who.items())
        rows.append({"case": cid, "shape": f"{d.rows}x{d.cols}", "dtype": d.dtype, "layout": d.layout,
                     "route": d.route, "baseline_us": t("baseline"), "dispatched_us": t("dispatched"),
                     "launcher_us": t("triton"), "ratio": ratio,
                     "ratio_to": "launcher" if eligible else "F.rms_norm",
                     "target": math.nan if eligible else TARGET_RATIO, "verdict": verdict, "warnings": warned})
    cols = ["case", "shape", "dtype", "layout", "route", "baseline_us", "dispatched_us", "launcher_us", "ratio",
            "ratio_to", "target", "verdict", "warnings"]
    return pd.DataFrame(rows, columns=cols).set_index("case")


def host_plot(table: pd.DataFrame, *, machine: str = "", gpu: bool = False, fontsize: int = 11):
    """Per-call host time of ``F.rms_norm`` and of the dispatched op, side by side, one pair of bars per case.

    Args:
        table: :func:`~fastpath_lib.bench.host.host_table`'s table; its fallback cases are drawn (the eligible
            case compares with the launcher, not ``F.rms_norm``: read it in the table), unmeasured ones left out.
        machine: what it was measured on (goes in the title).
        gpu: whether the calls ran on a CUDA device (the title says which kind of time this is).

    Returns:
        a matplotlib ``Figure``; each pair is labelled with its ratio and the target.
    """
    from matplotlib.figure import Figure

    t = table[(table["ratio_to"] == "F.rms_norm") & table["baseline_us"].notna() & table["dispatched_us"].notna()]
    fig = Figure(figsize=(10, 1.8 + 0.9 * max(1, len(t))), layout="constrained")
    ax = fig.add_subplot(1, 1, 1)
    ys = list(range(len(t)))[::-1]
    h = 0.38
    ax.barh([y + h / 2 for y in ys], t["baseline_us"], height=h, color="tab:gray", label="F.rms_norm")
    ax.barh([y - h / 2 for y in ys], t["dispatched_us"], height=h, color="tab:blue",
            label="fastpath_lib.rms_norm (dispatch + fallback)")
    for y, r in zip(ys, t.itertuples()):
        if not math.isnan(float(r.ratio)):
            ax.text(r.dispatched_us, y - h / 2, f"  {float(r.ratio):.2f}x", va="center", fontsize=fontsize - 1)
    ax.set_yticks(ys, [f"{c}\n{r.shape} {r.dtype}, {r.layout}" for c, r in zip(t.index, t.itertuples())],
                  fontsize=fontsize - 2)
    ax.set_xlabel("host time per call (us; fastest of many interleaved blocks of calls)", fontsize=fontsize)
    ax.tick_params(axis="x", labelsize=fontsize - 1)
    ax.set_xlim(0, float(max(t["dispatched_us"].max(), t["baseline_us"].max())) * 1.25 if len(t) else 1)
    kind = "CUDA calls, host side" if gpu else "CPU host time"
    ax.set_title(f"Dispatch cost on the fallback route ({kind}{', ' + machine if machine else ''})\n"
                 f"labels: dispatched / F.rms_norm; target at most {TARGET_RATIO}x", fontsize=fontsize)
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncol=2, fontsize=fontsize - 1)
    ax.grid(True, axis="x", alpha=0.3)
    return fig
