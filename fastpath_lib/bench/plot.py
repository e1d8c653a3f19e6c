"""The dispatch-boundary plot: speed-up over the baseline across row count and row width, region drawn."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from fastpath_lib.bench.analysis import boundary_table
from fastpath_lib.bench.schema import NOT_GPU, is_gpu_measurement
from fastpath_lib.rmsnorm.predicate import CUDA_MIN_ROWS, DEFAULT_CUDA_MIN_ROWS, INTERPRETER_MIN_ROWS, MAX_COLS

__all__ = ["boundary_plot", "min_rows_for"]


def min_rows_for(env: dict | None, gpu: bool) -> int:
    """The row threshold that applied to a run: the recorded one for its architecture, else the default.

    >>> min_rows_for({"compute_capability": "sm_99"}, gpu=True) == DEFAULT_CUDA_MIN_ROWS
    True
    >>> min_rows_for(None, gpu=False) == INTERPRETER_MIN_ROWS
    True
    """
    env = env or {}
    if not gpu or env.get("interpreter"):
        return INTERPRETER_MIN_ROWS
    m = re.fullmatch(r"sm_(\d+)(\d)", str(env.get("compute_capability") or ""))
    cap = (int(m.group(1)), int(m.group(2))) if m else None
    return CUDA_MIN_ROWS.get(cap, DEFAULT_CUDA_MIN_ROWS)


def boundary_plot(df: pd.DataFrame, ax=None, *, env: dict | None = None):
    """Speed-up over the baseline across row count and row width, with the eligibility region drawn.

    Args:
        df: results (classified or not).
        ax: a matplotlib Axes to draw into (default: a new Figure, no pyplot state, so it works headless).
        env: the environment dict (decides the title label and which row threshold to draw).

    Returns:
        the matplotlib ``Figure``.

    Note:
        For CPU / interpreter data no ratio is drawn: the markers show the routes only and the title says "not a GPU
        measurement".
    """
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    env = env if env is not None else (df.attrs.get("environment") or {})
    table = boundary_table(df)
    gpu = is_gpu_measurement(df, env)
    if ax is None:
        fig = Figure(figsize=(8, 5.5))
        ax = fig.add_subplot(1, 1, 1)
    else:
        fig = ax.figure
    min_rows = min_rows_for(env, gpu)
    rows_max = max([*table["rows"].tolist(), min_rows * 4]) * 2 if len(table) else 1 << 16
    cols_max = max([*table["cols"].tolist(), MAX_COLS]) * 2 if len(table) else 1 << 16
    ax.add_patch(Rectangle((min_rows, 1), rows_max - min_rows, MAX_COLS - 1, facecolor="tab:green", alpha=0.08,
                           edgecolor="tab:green", linestyle="--",
                           label=f"eligible: rows >= {min_rows}, cols <= {MAX_COLS} (+ dtype/stride/alignment)"))
    sp = table["speedup_dispatched"].astype(float).to_numpy()
    logs = np.log2(np.where(np.isfinite(sp) & (sp > 0), sp, 1.0))
    lim = max(1.0, float(np.nanmax(np.abs(logs))) if len(logs) else 1.0)
    sc = None
    for route, marker in (("triton", "o"), ("fallback", "X")):
        m = (table["route"] == route).to_numpy()
        if m.any():
            sc = ax.scatter(table["rows"][m], table["cols"][m], c=logs[m], cmap="coolwarm_r", vmin=-lim, vmax=lim,
                            marker=marker, s=90, edgecolors="black", label=f"route: {route}")
    for r in table.itertuples():
        ax.annotate(r.case_id, (r.rows, r.cols), fontsize=6, xytext=(4, 4), textcoords="offset points")
    if sc is not None:
        cb = fig.colorbar(sc, ax=ax)
        cb.set_label("log2(baseline time / dispatched time)" if gpu else f"no ratio drawn: {NOT_GPU}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlim(0.5, rows_max)
    ax.set_ylim(16, cols_max)
    ax.set_xlabel("rows")
    ax.set_ylabel("row width (cols)")
    label = "GPU measurement" if gpu else f"CPU / Triton interpreter -- {NOT_GPU}: routes only"
    if env.get("synthetic"):
        label = "SYNTHETIC data -- not a measurement"
    ax.set_title(f"Dispatch boundary: speed-up of rms_norm over F.rms_norm\n({label})", fontsize=10)
    ax.legend(loc="lower left", fontsize=7)
    return fig
