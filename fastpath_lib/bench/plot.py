"""The dispatch-boundary plot: speed-up over the baseline across row count and row width, region drawn."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from fastpath_lib.bench.analysis import boundary_table
from fastpath_lib.bench.schema import NOT_GPU, is_gpu_measurement, matrix_rows, measurement_label
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

    Each case is labelled with its id and, where the run used another shape than the declared one (``--quick``),
    the shape it ran; the row threshold that applied is drawn as a vertical line.

    Note:
        For CPU / interpreter data no ratio is drawn: the markers show the routes only and the title says "not a GPU
        measurement".
    """
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle
    from matplotlib.ticker import FuncFormatter

    env = env if env is not None else (df.attrs.get("environment") or {})
    table = boundary_table(df)
    gpu = is_gpu_measurement(df, env)
    if ax is None:
        fig = Figure(figsize=(10, 6.5))
        ax = fig.add_subplot(1, 1, 1)
    else:
        fig = ax.figure
    min_rows = min_rows_for(env, gpu)
    rows_max = max([*table["rows"].tolist(), min_rows * 4]) * 2 if len(table) else 1 << 16
    cols_max = max([*table["cols"].tolist(), MAX_COLS]) * 2 if len(table) else 1 << 16
    op, baseline = env.get("op", "rms_norm"), env.get("baseline", "F.rms_norm")
    region = op == "rms_norm"  # the region and threshold drawn are RMSNorm's; another op's plot shows its routes
    if region:
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
    if region:
        ax.axvline(min_rows, color="tab:green", linewidth=2, label=f"row threshold: {min_rows} rows")
    declared = _declared_shapes(df)
    spots: dict[tuple, list] = {}  # cases in the same quarter-octave share one label
    for r in table.itertuples():
        run = f"{r.rows}x{r.cols}"
        text = r.case_id if declared.get(r.case_id, run) == run else f"{r.case_id} (ran {run})"
        spot = (round(4 * np.log2(max(r.rows, 1))), round(4 * np.log2(max(r.cols, 1))))
        spots.setdefault(spot, [r.rows, r.cols, []])[2].append(text)
    for rows, cols, texts in spots.values():
        top = cols * 4 >= cols_max  # near the top: a level label to the left, clear of the title
        right = top or rows * 4 > rows_max  # near the right edge: label to the left of the point
        level = right or len(texts) > 1
        ax.annotate("\n".join(texts), (rows, cols), fontsize=8, rotation=0 if level else 25,
                    rotation_mode="anchor", ha="right" if right else "left",
                    va="center" if top else "top" if level else "baseline",
                    xytext=(-8 if right else 6, 0 if top else -6 if level else 5), textcoords="offset points")
    if sc is not None and gpu:
        cb = fig.colorbar(sc, ax=ax)
        cb.set_label("log2(baseline time / dispatched time)", fontsize=10)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlim(0.5, rows_max)
    ax.set_ylim(16, cols_max)
    ax.set_xlabel("rows M (log scale)", fontsize=11)
    ax.set_ylabel("row width N, columns (log scale)", fontsize=11)
    ax.tick_params(labelsize=10)
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    label = measurement_label(env, df)
    if label == NOT_GPU:
        label = f"CPU / Triton interpreter -- {NOT_GPU}: routes only"
    ax.set_title(f"Dispatch boundary: speed-up of {op} over {baseline}\n({label})", fontsize=11)
    ax.legend(loc="lower left", fontsize=9)
    return fig


def _declared_shapes(df: pd.DataFrame) -> dict[str, str]:
    """case id -> the declared shape, from the results' ``declared_shape`` column (empty when absent)."""
    m = matrix_rows(df)
    if "declared_shape" not in m.columns:
        return {}
    return {str(c): str(d) for c, d in zip(m["case_id"], m["declared_shape"]) if isinstance(d, str) and d}
