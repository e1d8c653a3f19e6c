"""The dispatch-boundary plot: speed-up over the baseline across row count and row width, region drawn."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from fastpath_lib import opspec
from fastpath_lib.bench.analysis import boundary_table
from fastpath_lib.bench.schema import NOT_GPU, is_gpu_measurement, matrix_rows, measurement_label, shape_text

__all__ = ["boundary_plot", "min_rows_for", "region_of"]


def _limits(env: dict, gpu: bool):
    """The limits the run's op (``env["op"]``, a folder without one: the default op) gives for its device and
    architecture, asked of its spec; ``None`` when its spec declares none."""
    spec = opspec.get(env.get("op") or opspec.names()[0])
    if spec.limits is None:
        return None
    if not gpu or env.get("interpreter"):
        return spec.limits("cpu")
    m = re.fullmatch(r"sm_(\d+)(\d)", str(env.get("compute_capability") or ""))
    return spec.limits("cuda", interpret=False, capability=(int(m.group(1)), int(m.group(2))) if m else (0, 0))


def min_rows_for(env: dict | None, gpu: bool) -> int:
    """The row threshold that applied to a run: the one its op's spec gives for its architecture (the recorded one,
    else the op's default).

    >>> spec = opspec.default()
    >>> min_rows_for({"compute_capability": "sm_99"}, gpu=True) == spec.limits("cuda", interpret=False,
    ...                                                                          capability=(9, 9)).min_rows
    True
    >>> min_rows_for(None, gpu=False) == spec.limits("cpu").min_rows
    True
    """
    return _limits(env or {}, gpu).min_rows


def region_of(env: dict | None, gpu: bool) -> tuple[int, int] | None:
    """``(min_rows, max_cols)`` of the region a run dispatched on: what its ``environment.json`` recorded as ``region``
    (any op whose spec gives limits); for a folder written before the record, the limits the spec of its op (a
    registered one; the default op where the folder names none) gives for the run's architecture
    (:func:`min_rows_for`), where they have both; else ``None`` (no region drawn).

    >>> region_of({"op": "x", "region": {"min_rows": 8, "max_cols": 4096}}, gpu=False)
    (8, 4096)
    >>> region_of({"op": "another_op"}, gpu=False) is None
    True
    >>> lim = opspec.get("fused_add_rms_norm").limits("cpu")  # a registered op, not the default: its spec's limits
    >>> region_of({"op": "fused_add_rms_norm"}, gpu=False) == (lim.min_rows, lim.max_cols)
    True
    """
    env = env or {}
    recorded = env.get("region")
    if isinstance(recorded, dict) and recorded.get("min_rows") and recorded.get("max_cols"):
        return int(recorded["min_rows"]), int(recorded["max_cols"])
    if (env.get("op") or opspec.names()[0]) not in opspec.names():
        return None
    limits = _limits(env, gpu)
    lo, hi = getattr(limits, "min_rows", None), getattr(limits, "max_cols", None)
    return (int(lo), int(hi)) if lo and hi else None


def boundary_plot(df: pd.DataFrame, ax=None, *, env: dict | None = None):
    """Speed-up over the baseline across row count and row width, with the eligibility region drawn.

    Args:
        df: results (classified or not).
        ax: a matplotlib Axes to draw into (default: a new Figure, no pyplot state, so it works headless; the key and
            the legend are drawn to the right of the axes, so leave room there).
        env: the environment dict (decides the title label and the region drawn, :func:`region_of`).

    Returns:
        the matplotlib ``Figure``.

    Each case's marker is numbered; the key beside the plot names its case and, where the run used another shape
    than the declared one (``--quick``), the shape it ran. Cases at one point (within a quarter octave of each other
    in rows and in columns) are drawn side by side in a row centred on it, a fixed number of points apart, each with
    its own number and route marker (:func:`_spread`). The row threshold that applied is drawn as a vertical line.
    A case beyond a limit of the region never sits on its edge: one within half a marker of it is drawn just beyond
    it, and the key says so with the limit it lies beyond (:func:`_off_the_edges`).
    The axes span the cases plotted (and the region's edges), an octave beyond each extreme, so every case the
    matrix ran is on the plot; the legend stands outside the axes, below the key, so it covers no marker.

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
        fig = Figure(figsize=(11.5, 6.5))
        fig.subplots_adjust(left=0.08, right=0.66, top=0.9, bottom=0.1)
        ax = fig.add_subplot(1, 1, 1)
    else:
        fig = ax.figure
    region = region_of(env, gpu)
    min_rows, max_cols = region or (1, 1)  # no region: no edge to show
    rows, cols = [max(int(v), 1) for v in table["rows"]], [max(int(v), 1) for v in table["cols"]]
    rows_lim = (min([*rows, min_rows]) / 2, max([*rows, min_rows * 4]) * 2)  # an octave beyond the cases and edges
    cols_lim = (min(cols or [max_cols]) / 2, max([*cols, max_cols]) * 2)
    op = env.get("op") or opspec.names()[0]
    baseline = env.get("baseline") or (opspec.get(op).baseline[0] if op in opspec.names() else "the baseline")
    if region:
        ax.add_patch(Rectangle((min_rows, 1), rows_lim[1] - min_rows, max_cols - 1, facecolor="tab:green", alpha=0.08,
                               edgecolor="tab:green", linestyle="--",
                               label=f"eligible: rows >= {min_rows}, cols <= {max_cols}\n(+ the predicate's other "
                                     "conditions)"))
    if region and min_rows > 1:
        ax.axvline(min_rows, color="tab:green", linewidth=2, label=f"row threshold: {min_rows} rows")
    ax.set_xscale("log", base=2)  # the scales and limits first: the markers at one point are spread in points
    ax.set_yscale("log", base=2)
    ax.set_xlim(*rows_lim)
    ax.set_ylim(*cols_lim)
    declared = _declared_shapes(df)
    spots: dict[tuple, list] = {}  # the cases at one point of the plot (the same quarter octave in rows and cols)
    key = []
    order = {c: i for i, c in enumerate(env.get("declared_cases") or [])}  # numbered as the matrix declares them
    ranked = sorted(table.itertuples(), key=lambda r: order.get(r.case_id, len(order)))
    for n, r in enumerate(ranked, start=1):
        run = shape_text(r.rows, r.cols)
        key.append(f"{n:>2}  " + (r.case_id if declared.get(r.case_id, run) == run else f"{r.case_id} (ran {run})"))
        # cases on two sides of a region edge never share a point (16400 columns beside 16384's edge)
        spot = (round(4 * np.log2(max(r.rows, 1))), round(4 * np.log2(max(r.cols, 1))), _beyond(r, region))
        spots.setdefault(spot, []).append((n, r))
    placed, moved = _off_the_edges(ax, _spread(ax, list(spots.values())), region)
    for n, what in moved.items():
        key[n - 1] += f"\n    beyond the edge: {what}"  # a line of its own: the key is narrow
    sp = np.array([float(r.speedup_dispatched) for _, r, _ in placed])
    logs = np.log2(np.where(np.isfinite(sp) & (sp > 0), sp, 1.0))
    lim = max(1.0, float(np.nanmax(np.abs(logs))) if len(logs) else 1.0)
    sc = None
    for route, marker in (("triton", "o"), ("fallback", "X")):
        m = np.array([r.route == route for _, r, _ in placed], dtype=bool)
        if m.any():
            xy = np.array([at for _, _, at in placed])[m]
            sc = ax.scatter(xy[:, 0], xy[:, 1], c=logs[m], cmap="coolwarm_r", vmin=-lim, vmax=lim, marker=marker,
                            s=MARKER_SIZE, edgecolors="black", label=f"route: {route}")
    for n, _, at in placed:  # each marker's number just above-right of it
        ax.annotate(str(n), at, fontsize=9, fontweight="bold", ha="left", va="bottom", xytext=(4, 4),
                    textcoords="offset points")
    if key:
        ax.text(1.02, 1.0, "\n".join(key), transform=ax.transAxes, fontsize=8, family="monospace", va="top",
                ha="left")
    if sc is not None and gpu:
        cb = fig.colorbar(sc, ax=ax, orientation="horizontal", fraction=0.05, pad=0.12)
        cb.set_label("log2(baseline time / dispatched time)", fontsize=10)
    ax.set_xlabel("rows M (log scale)", fontsize=11)
    ax.set_ylabel("row width N, columns (log scale)", fontsize=11)
    ax.tick_params(labelsize=10)
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    label = measurement_label(env, df)
    if label == NOT_GPU:
        label = f"CPU / Triton interpreter -- {NOT_GPU}: routes only"
    ax.set_title(f"Dispatch boundary: speed-up of {op} over {baseline}\n({label})", fontsize=11)
    ax.legend(loc="lower left", bbox_to_anchor=(1.02, 0.0), borderaxespad=0, fontsize=9)  # outside: covers no marker
    return fig


#: The markers' area (points squared, matplotlib's ``s``); markers at one point sit :data:`MARKER_GAP` points apart
#: beyond their width.
MARKER_SIZE = 90
MARKER_GAP = 6


def _beyond(r, region: tuple[int, int] | None) -> str:
    """The region limits case ``r`` lies beyond, in words (``""``: none, or no region drawn)."""
    if region is None:
        return ""
    min_rows, max_cols = region
    return "; ".join(([f"cols {int(r.cols)} > {max_cols}"] if r.cols > max_cols else [])
                     + ([f"rows {int(r.rows)} < {min_rows}"] if r.rows < min_rows else []))


def _off_the_edges(ax, placed: list[tuple], region) -> tuple[list[tuple], dict[int, str]]:
    """``placed`` with each case that lies beyond a limit of the region (wider than ``max_cols``, fewer rows than
    ``min_rows``) but would be drawn on or within half a marker of that edge moved out, to half a marker width and
    :data:`MARKER_GAP` points beyond it, so no case beyond a limit sits on the region's edge (a 2x16400 case beside a
    16384 edge is 0.1 % away, the same pixel); and ``{number: the limits it lies beyond}`` for the cases moved, which
    the key then names."""
    if region is None:
        return placed, {}
    min_rows, max_cols = region
    clear = (MARKER_SIZE ** 0.5 / 2 + MARKER_GAP) * ax.figure.dpi / 72
    edge_x, edge_y = ax.transData.transform((min_rows, max_cols))
    out, moved = [], {}
    for n, r, at in placed:
        x, y = ax.transData.transform(at)
        nx = min(x, edge_x - clear) if r.rows < min_rows else x
        ny = max(y, edge_y + clear) if r.cols > max_cols else y
        if (nx, ny) != (x, y):
            at = tuple(float(v) for v in ax.transData.inverted().transform((nx, ny)))
            moved[n] = _beyond(r, region)
        out.append((n, r, at))
    return out, moved


def _spread(ax, groups: list[list[tuple]]) -> list[tuple]:
    """``(number, case, (rows, cols))`` for every case of ``groups`` (the cases at one point of the plot, each a
    list of ``(number, case)``): a lone case at its own shape; the cases sharing a point side by side in a row
    centred on the point (the geometric mean of their shapes), one marker width and :data:`MARKER_GAP` points apart,
    in number order, so a fallback marker never hides an in-region one. The spacing is fixed in points on the axes'
    final scales and limits (set before this), so it reads the same at any size."""
    step_px = (MARKER_SIZE ** 0.5 + MARKER_GAP) * ax.figure.dpi / 72
    out = []
    for group in groups:
        if len(group) == 1:
            n, r = group[0]
            out.append((n, r, (r.rows, r.cols)))
            continue
        centre = (float(np.exp2(np.mean([np.log2(max(r.rows, 1)) for _, r in group]))),
                  float(np.exp2(np.mean([np.log2(max(r.cols, 1)) for _, r in group]))))
        cx, cy = ax.transData.transform(centre)
        for i, (n, r) in enumerate(group):
            x, y = ax.transData.inverted().transform((cx + (i - (len(group) - 1) / 2) * step_px, cy))
            out.append((n, r, (float(x), float(y))))
    return out


def _declared_shapes(df: pd.DataFrame) -> dict[str, str]:
    """case id -> the declared shape, from the results' ``declared_shape`` column (empty when absent)."""
    m = matrix_rows(df)
    if "declared_shape" not in m.columns:
        return {}
    return {str(c): str(d) for c, d in zip(m["case_id"], m["declared_shape"]) if isinstance(d, str) and d}
