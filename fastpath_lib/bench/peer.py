"""A peer's published GPU benchmark data, read as a reviewer reads it: Liger-Kernel's RMSNorm rows on an A100.

``data/liger_rms_norm_a100.csv`` (beside its licence notice, ``data/NOTICE.md``: BSD 2-Clause, LinkedIn Corporation)
holds the ``rms_norm`` rows of Liger-Kernel's ``benchmark/data/all_benchmark_data.csv``: an A100-SXM4-80GB, bf16,
M=2048 rows, hidden size swept 1024-32768, providers ``liger`` (its Triton kernel) and ``huggingface`` (the eager
``LlamaRMSNorm``), modes ``forward``, ``backward`` and ``full``, speed in **ms** and memory in **MB**.

This module turns the file into the kit's units (times in microseconds, :data:`~fastpath_lib.bench.schema.TIME_UNIT`),
computes what a reviewer computes from it (speed-up over its baseline, bytes moved and GB/s with the kit's own
formula), lists what the file covers and what it lacks, and draws it. It is a third party's real GPU data; it is
never mixed with this kit's results and says nothing about this kit's kernels.

>>> df = load_peer()
>>> sorted(df["provider"].unique().tolist()), sorted(df["rows"].unique().tolist())
(['huggingface', 'liger'], [2048])
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import torch

from fastpath_lib.bench.metadata import REQUIRED_KEYS
from fastpath_lib.bench.timing import bytes_moved

__all__ = ["PEER_FILE", "PEER_NOTICE", "PEER_SOURCE", "MODES", "load_peer", "peer_speedups", "peer_bandwidth",
           "peer_coverage", "peer_plot"]

_DATA = Path(__file__).resolve().parents[2] / "data"
#: The peer's CSV in the kit's ``data/`` folder.
PEER_FILE = _DATA / "liger_rms_norm_a100.csv"
#: Its licence notice (travels with the file).
PEER_NOTICE = _DATA / "NOTICE.md"
#: Where it came from.
PEER_SOURCE = ("linkedin/Liger-Kernel, benchmark/data/all_benchmark_data.csv at commit "
               "2120862ba532c9449e72d603ba6324310ae756e7 (rms_norm rows only); BSD 2-Clause, LinkedIn Corporation")
#: What each ``kernel_operation_mode`` times, in the kit's words (and which ``bytes_moved`` pass it moves).
MODES = {"forward": "forward only", "backward": "backward only (given a forward)", "full": "forward + backward"}

_COLUMNS = ("kernel_name", "kernel_provider", "kernel_operation_mode", "metric_name", "metric_unit", "x_name",
            "x_value", "y_value_50", "y_value_20", "y_value_80", "extra_benchmark_config_str", "gpu_name",
            "timestamp")
#: environment.json keys that are the kit's own flags, with no counterpart to ask of a third party's file.
_KIT_FLAGS = ("gpu_measurement", "interpreter")
_UNITS = {("speed", "ms"): ("us", 1e3), ("memory", "MB"): ("MB", 1.0)}


def load_peer(path: str | Path = PEER_FILE) -> pd.DataFrame:
    """Read the peer's CSV into one tidy row per (provider, mode, metric, hidden size), in the kit's units.

    Args:
        path: the CSV (default: :data:`PEER_FILE`).

    Returns:
        columns ``provider, mode, metric, unit, rows, cols, dtype, eps, median, q20, q80, gpu, timestamp, version``;
        speed rows in microseconds (the file's ms times 1000), memory rows in MB (as published). ``rows`` is the
        M of the benchmark's config, ``cols`` the swept hidden size.

    Raises:
        FileNotFoundError: no such file.
        ValueError: not this kind of file (missing columns, another kernel, an unknown metric or unit), in one line.
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{p}: no such file")
    raw = pd.read_csv(p)
    missing = [c for c in _COLUMNS if c not in raw.columns]
    if missing:
        raise ValueError(f"{p}: not a Liger-Kernel benchmark CSV (no columns {missing})")
    kernels = set(raw["kernel_name"])
    if kernels != {"rms_norm"}:
        raise ValueError(f"{p}: expected only rms_norm rows, found {sorted(kernels)}")
    rows = []
    for r in raw.itertuples(index=False):
        key = (r.metric_name, r.metric_unit)
        if key not in _UNITS:
            raise ValueError(f"{p}: unknown metric/unit {key}")
        unit, scale = _UNITS[key]
        cfg = json.loads(r.extra_benchmark_config_str)
        rows.append({"provider": r.kernel_provider, "mode": r.kernel_operation_mode, "metric": r.metric_name,
                     "unit": unit, "rows": int(cfg["M"]), "cols": int(r.x_value),
                     "dtype": str(cfg.get("dtype", "")).replace("torch.", ""), "eps": cfg.get("eps"),
                     "median": r.y_value_50 * scale, "q20": r.y_value_20 * scale, "q80": r.y_value_80 * scale,
                     "gpu": r.gpu_name, "timestamp": r.timestamp,
                     "version": getattr(r, "liger_version", None)})
    return pd.DataFrame(rows)


def _speed(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["metric"] == "speed"]


def peer_speedups(df: pd.DataFrame, baseline: str = "huggingface", candidate: str = "liger") -> pd.DataFrame:
    """Per mode and hidden size: both medians (us) and the speed-up ``baseline / candidate``.

    Also the noise check a reviewer makes: whether the two 20-80 % ranges overlap (``ranges_overlap``).
    """
    s = _speed(df).set_index(["mode", "cols", "provider"])
    out = []
    for (mode, cols), _ in s.groupby(level=["mode", "cols"], sort=False):
        b, c = s.loc[(mode, cols, baseline)], s.loc[(mode, cols, candidate)]
        out.append({"mode": mode, "cols": cols, f"{baseline}_us": b["median"], f"{candidate}_us": c["median"],
                    "speedup": b["median"] / c["median"],
                    "ranges_overlap": not (c["q80"] < b["q20"] or b["q80"] < c["q20"])})
    return pd.DataFrame(out)


def _bytes(rows: int, cols: int, dtype: str, mode: str) -> int:
    dt = getattr(torch, dtype)
    fwd = bytes_moved(rows, cols, dt, "forward")
    both = bytes_moved(rows, cols, dt, "backward")  # the kit's "backward" pass is forward + backward
    return {"forward": fwd, "full": both, "backward": both - fwd}[mode]


def peer_bandwidth(df: pd.DataFrame) -> pd.DataFrame:
    """GB/s each provider achieves, from the kit's bytes-moved formula (each tensor read or written once).

    Returns:
        per provider, mode and hidden size: ``bytes_moved``, ``median_us`` and ``gbps``. The file holds no copy
        bandwidth measured in the same run, so there is no "% of copy" column: only a datasheet figure could be put
        beside these, and a reviewer should ask for the measured one.
    """
    s = _speed(df)
    out = s[["provider", "mode", "rows", "cols", "dtype", "median"]].rename(columns={"median": "median_us"}).copy()
    out["bytes_moved"] = [_bytes(r.rows, r.cols, r.dtype, r.mode) for r in out.itertuples()]
    out["gbps"] = out["bytes_moved"] / (out["median_us"] * 1e-6) / 1e9
    return out.reset_index(drop=True)


def peer_coverage(df: pd.DataFrame) -> dict:
    """What the file covers, and the environment facts the kit records that it lacks.

    Returns:
        ``row_counts``, ``hidden_sizes``, ``dtypes``, ``gpus``, ``providers``, ``modes``, ``metrics``, ``versions``
        (the lists found) and ``missing_metadata``: the keys of the kit's ``environment.json``
        (:data:`~fastpath_lib.bench.metadata.REQUIRED_KEYS`, less the kit's own flags) the file has no counterpart
        for.
    """
    have = {"device_name": df["gpu"].notna().any(), "timestamp": df["timestamp"].notna().any()}
    missing = [k for k in REQUIRED_KEYS if k not in _KIT_FLAGS and not have.get(k, False)]
    return {"row_counts": sorted(int(v) for v in df["rows"].unique()),
            "hidden_sizes": sorted(int(v) for v in df["cols"].unique()),
            "dtypes": sorted(df["dtype"].unique()), "gpus": sorted(df["gpu"].unique()),
            "providers": sorted(df["provider"].unique()), "modes": sorted(df["mode"].unique()),
            "metrics": sorted(df["metric"].unique()), "versions": sorted(str(v) for v in df["version"].unique()),
            "samples": "median, 20th and 80th percentile only (no raw samples)",
            "missing_metadata": missing}


def peer_plot(df: pd.DataFrame, *, fontsize: int = 11):
    """Four panels: time per call (20-80 % bars), speed-up over the baseline, achieved GB/s and peak memory, each
    against the hidden size.

    Returns:
        a matplotlib ``Figure`` (no pyplot state).
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12.5, 11), layout="constrained")
    (ax_t, ax_s), (ax_b, ax_m) = fig.subplots(2, 2)
    s = _speed(df)
    colors = {"forward": "tab:blue", "backward": "tab:orange", "full": "tab:green"}
    styles = {"liger": ("o", "-"), "huggingface": ("s", "--")}
    bw = peer_bandwidth(df)
    for (prov, mode), g in s.groupby(["provider", "mode"], sort=False):
        g = g.sort_values("cols")
        marker, line = styles.get(prov, ("^", ":"))
        kw = {"marker": marker, "linestyle": line, "color": colors.get(mode),
              "label": f"{prov}, {MODES.get(mode, mode)}"}
        ax_t.errorbar(g["cols"], g["median"], yerr=[g["median"] - g["q20"], g["q80"] - g["median"]], capsize=3, **kw)
        b = bw[(bw["provider"] == prov) & (bw["mode"] == mode)].sort_values("cols")
        ax_b.plot(b["cols"], b["gbps"], **kw)
    for prov, g in df[df["metric"] == "memory"].groupby("provider", sort=False):
        g = g.sort_values("cols")
        marker, line = styles.get(prov, ("^", ":"))
        ax_m.plot(g["cols"], g["median"], marker=marker, linestyle=line, color="tab:purple",
                  label=f"{prov}, {MODES.get(g['mode'].iloc[0], '')}")
    sp = peer_speedups(df)
    for mode, g in sp.groupby("mode", sort=False):
        ax_s.plot(g["cols"], g["speedup"], marker="o", color=colors.get(mode), label=MODES.get(mode, mode))
    ax_s.axhline(1.0, color="gray", linewidth=1)
    rows = ", ".join(str(v) for v in sorted(s["rows"].unique()))
    dtypes = ", ".join(sorted(s["dtype"].unique()))
    gpu = ", ".join(sorted(s["gpu"].unique()))
    widths = sorted(int(v) for v in s["cols"].unique())
    for ax in (ax_t, ax_s, ax_b, ax_m):
        ax.set_xscale("log", base=2)
        ax.set_xticks(widths, [str(w) for w in widths])
        ax.minorticks_off()
        ax.set_xlabel("hidden size N (columns per row)", fontsize=fontsize)
        ax.tick_params(labelsize=fontsize - 1)
        ax.grid(True, alpha=0.3)
    ax_t.set_yscale("log")
    ax_t.set_ylabel("time per call (us; median, bars 20-80 %)", fontsize=fontsize)
    ax_t.set_title("Time per call", fontsize=fontsize)
    handles, labels = ax_t.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=3, fontsize=fontsize - 1,
               title="time and bandwidth panels: provider, what is timed", title_fontsize=fontsize - 1)
    ax_s.set_ylabel("speed-up (huggingface time / liger time)", fontsize=fontsize)
    ax_s.set_title("Speed-up over the eager LlamaRMSNorm baseline", fontsize=fontsize)
    ax_s.set_ylim(0, math.ceil(float(sp["speedup"].max())) + 1)
    ax_s.legend(fontsize=fontsize - 1)
    ax_b.set_yscale("log")
    ax_b.set_ylabel("GB/s (kit's bytes moved / median time)", fontsize=fontsize)
    ax_b.set_title("Achieved bandwidth (no copy bandwidth in the file)", fontsize=fontsize)
    ax_m.set_ylabel("peak memory (MB, as published)", fontsize=fontsize)
    ax_m.set_title("Memory", fontsize=fontsize)
    ax_m.legend(fontsize=fontsize - 1)
    fig.suptitle(f"A peer's published GPU data: Liger-Kernel on {gpu}, M={rows} rows, {dtypes}\n"
                 "(third party, BSD 2-Clause, data/NOTICE.md; not a measurement of this kit)", fontsize=fontsize + 1)
    return fig
