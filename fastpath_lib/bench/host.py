"""RMSNorm's host-overhead family, and the host tables of every op: what the dispatch costs per call.

:func:`measure_host` is RMSNorm's family measured by the one generic runner,
:func:`fastpath_lib.bench.ophost.measure_host_op`, over RMSNorm's spec: its host cases
(:data:`fastpath_lib.rmsnorm.spec.HOST_CASES`: M=1 decode in fp16, M=1 bf16 input with an fp32 weight, a 4x2048 fp32
batch and a transposed input, each a fallback call timed against ``F.rms_norm`` and held to :data:`TARGET_RATIO`; on
CUDA an eligible call against the launcher), then vLLM's dispatch of ``vllm.ir.ops.rms_norm`` with the kit's provider
(:mod:`fastpath_lib.bench.vllmhost`, in a child process). Every side is timed by the kit's one method
(:mod:`fastpath_lib.bench.hostmethod`: interleaved fixed blocks, the fastest block of each side).

:func:`host_table` reads the host-overhead rows of any op (the baseline each row was timed against is named in its
``note``), :func:`host_plot` draws the fallback cases. Times in microseconds.
"""

from __future__ import annotations

import json
import math
import re

import pandas as pd

from fastpath_lib import opspec
from fastpath_lib.bench.hostmethod import halves_band, ratio_reading
from fastpath_lib.bench.ophost import NOT_MEASURED, TARGET_RATIO, host_cases, measure_host_op, ratio_text
from fastpath_lib.bench.schema import host_rows, shape_text

__all__ = ["TARGET_RATIO", "NOT_MEASURED", "ratio_text", "spec", "fallback_cases", "measure_host", "host_table",
           "over_and_unresolved", "host_plot"]


def spec() -> opspec.OpSpec:
    """The default op's registered spec (RMSNorm's; imported on first use)."""
    return opspec.default()


def fallback_cases() -> list[opspec.HostCase]:
    """RMSNorm's fallback host cases (``case.build(device).args()`` gives ``(x, normalized_shape, weight)``)."""
    return [c for c in host_cases(spec()) if not c.eligible]


def measure_host(*, quick: bool = False, log=None, rounds: int | None = None, vllm: bool = True) -> list[dict]:
    """Measure RMSNorm's host-overhead family on this machine (:func:`~fastpath_lib.bench.ophost.measure_host_op`).

    Args:
        quick: fewer calls per block.
        log: ``callable(str)`` for progress lines.
        rounds: override the number of blocks (:func:`~fastpath_lib.bench.hostmethod.fastest_blocks`).
        vllm: also time vLLM's dispatch of ``vllm.ir.ops.rms_norm`` (in a child process; skipped rows where vLLM
            cannot be imported).

    Returns:
        result rows (``family="host-overhead"``): per fallback case a ``baseline`` and a ``dispatched`` row; for the
        eligible case ``baseline``, ``triton`` (the launcher) and ``dispatched`` rows, measured on CUDA only
        (elsewhere ``status="not measured"``); then vLLM's rows (:func:`fastpath_lib.bench.vllmhost.vllm_table`).
    """
    return measure_host_op(spec(), quick=quick, rounds=rounds, log=log, vllm=vllm)


_BASELINE_NOTE = re.compile(r"baseline: ([^;]+)")


def _baseline_name(row, spec: opspec.OpSpec | None) -> str:
    """The baseline a fallback row was timed against: from its note (a timed row names it), else ``spec``'s first
    baseline (a row that was not timed), else the word ``baseline``."""
    m = _BASELINE_NOTE.search(str(getattr(row, "note", "") or ""))
    return m.group(1).strip() if m else spec.baseline[0] if spec is not None else "baseline"


def host_table(df: pd.DataFrame, spec: opspec.OpSpec | None = None) -> pd.DataFrame:
    """One row per host-overhead case of any op: the times side by side and the ratio the target applies to.

    Args:
        df: result rows; the host-overhead ones are read.
        spec: the op the rows are of; a row that was not timed (its call takes the fast route here) names its
            first baseline in ``ratio_to`` (a timed row names the baseline it was timed against in its note).

    Returns:
        columns ``case, shape, dtype, layout, route, baseline_us, dispatched_us, launcher_us, ratio, ratio_to,
        target, verdict, band, reading, warnings``; ``ratio`` is dispatched / the baseline on fallback cases
        (``ratio_to`` names it: the op's first baseline, ``F.rms_norm`` for RMSNorm, or a form's composite) and
        dispatched / launcher on the eligible case, ``verdict`` is this run's ratio against the target (``within``,
        ``OVER``) or the "not measured" line, ``band`` how finely the run resolves the ratio
        (:func:`~fastpath_lib.bench.hostmethod.halves_band`; NaN without block times), ``reading`` what the ratio and
        its band say about the target (:func:`~fastpath_lib.bench.hostmethod.ratio_reading`: ``within``, ``OVER``,
        ``cannot tell``, ``noise``; empty on the eligible case and unmeasured ones), ``warnings`` what the providers
        warned, each message once with who raised it (``"F.rms_norm and dispatched: ..."``; empty when none did).
        vLLM's dispatch rows are not here (:func:`fastpath_lib.bench.vllmhost.vllm_table` reads them).
    """
    rows = []
    for cid, g in host_rows(df).groupby("case_id", sort=False):
        by = {r.provider: r for r in g.itertuples()}
        d = by.get("dispatched")
        if d is None:
            continue

        def t(p, by=by):  # by: this case's rows
            r = by.get(p)
            return float(r.min_us) if r is not None and r.status == "ok" else math.nan

        eligible = "triton" in by
        base = _baseline_name(by.get("baseline", d), spec)
        ref = t("triton") if eligible else t("baseline")
        ratio = t("dispatched") / ref if ref and not math.isnan(ref) else math.nan
        band = halves_band(_samples(d), _samples(by.get("triton" if eligible else "baseline")))
        if d.status != "ok":
            verdict = str(d.note)
        elif eligible:
            verdict = f"dispatch adds {t('dispatched') - ref:.2f} us before the launch"
        else:
            verdict = "within" if ratio <= TARGET_RATIO else "OVER"
        who: dict[str, list[str]] = {}  # each distinct message once, with the providers that raised it
        for p, name in (("baseline", base), ("triton", "launcher"), ("dispatched", "dispatched")):
            msg = getattr(by.get(p), "warnings", None)
            if isinstance(msg, str) and msg:
                who.setdefault(msg, []).append(name)
        warned = " | ".join(f"{' and '.join(names)}: {msg}" for msg, names in who.items())
        shape = shape_text(d.rows, d.cols, getattr(d, "declared_shape", None))
        rows.append({"case": cid, "shape": shape, "dtype": d.dtype, "layout": d.layout,
                     "route": d.route, "baseline_us": t("baseline"), "dispatched_us": t("dispatched"),
                     "launcher_us": t("triton"), "ratio": ratio,
                     "ratio_to": "launcher" if eligible else base,
                     "target": math.nan if eligible else TARGET_RATIO, "verdict": verdict, "band": band,
                     "reading": "" if eligible else ratio_reading(ratio, band, TARGET_RATIO), "warnings": warned})
    cols = ["case", "shape", "dtype", "layout", "route", "baseline_us", "dispatched_us", "launcher_us", "ratio",
            "ratio_to", "target", "verdict", "band", "reading", "warnings"]
    return pd.DataFrame(rows, columns=cols).set_index("case")


def over_and_unresolved(table: pd.DataFrame) -> tuple[list[str], list[str]]:
    """The cases of a :func:`host_table` over the target, and those this run did not resolve (``"CASE (reading)"``):
    by each case's ``reading``, or its bare ``verdict`` where it has no band (no block times).

    >>> t = pd.DataFrame({"verdict": ["OVER", "within", "OVER", "within"],
    ...                   "reading": ["OVER", "noise", "", "cannot tell"]}, index=["a", "b", "c", "d"])
    >>> over_and_unresolved(t)
    (['a', 'c'], ['b (noise)', 'd (cannot tell)'])
    """
    said = {c: (r["reading"] or r["verdict"]) for c, r in table.iterrows()}
    return ([c for c, v in said.items() if v == "OVER"],
            [f"{c} ({v})" for c, v in said.items() if v in ("cannot tell", "noise")])


def _samples(row) -> list[float]:
    """A measured row's block times (``samples_us``, a JSON list), or none."""
    if row is None or row.status != "ok" or not isinstance(getattr(row, "samples_us", None), str):
        return []
    try:
        return [float(v) for v in json.loads(row.samples_us)]
    except ValueError:
        return []


def host_plot(table: pd.DataFrame, *, machine: str = "", gpu: bool = False, fontsize: int = 11,
              op: opspec.OpSpec | None = None):
    """Per-call host time of an op's first baseline and of the dispatched op, side by side, one pair of bars per case
    (``op``: default :func:`fastpath_lib.opspec.default`, ``F.rms_norm`` against ``fastpath_lib.rms_norm``).

    Args:
        table: :func:`~fastpath_lib.bench.host.host_table`'s table; its fallback cases are drawn (the eligible
            case compares with the launcher, not the baseline: read it in the table), unmeasured ones left out.
        machine: what it was measured on (goes in the title).
        gpu: whether the calls ran on a CUDA device (the title says which kind of time this is).
        op: whose baseline and public function the bars name.

    Returns:
        a matplotlib ``Figure``; each pair is labelled with its ratio and the target.
    """
    from matplotlib.figure import Figure

    op = op or spec()
    base, fn = op.baseline[0], op.function
    public = f"{fn.__module__.split('.')[0]}.{fn.__name__}"
    t = table[(table["ratio_to"] == base) & table["baseline_us"].notna() & table["dispatched_us"].notna()]
    fig = Figure(figsize=(10, 1.8 + 0.9 * max(1, len(t))), layout="constrained")
    ax = fig.add_subplot(1, 1, 1)
    ys = list(range(len(t)))[::-1]
    h = 0.38
    ax.barh([y + h / 2 for y in ys], t["baseline_us"], height=h, color="tab:gray", label=base)
    ax.barh([y - h / 2 for y in ys], t["dispatched_us"], height=h, color="tab:blue",
            label=f"{public} (dispatch + fallback)")
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
                 f"labels: dispatched / {base}; target at most {TARGET_RATIO}x", fontsize=fontsize)
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncol=2, fontsize=fontsize - 1)
    ax.grid(True, axis="x", alpha=0.3)
    return fig
