"""The row-threshold sweep: an op's dispatched call against its baseline across row counts and dtypes, host time
included, and the proposal it makes.

The op is an :class:`~fastpath_lib.opspec.OpSpec` (default: the first registered op, RMSNorm's ``fastpath_lib.rms_norm``
against ``F.rms_norm``), swept along its own widths (``OpSpec.sweep_axes``). What a row threshold decides is whether an
eager call of the *dispatched* op is worth taking the fast route, and small eager calls are host-bound: the dispatch's
checks and the launch (10-25 us) are part of the cost. So each point is timed the way the host family is
(:func:`~fastpath_lib.bench.hostmethod.fastest_blocks`: blocks of back-to-back calls, each block ending in a device
synchronization, the providers interleaved), not as device time with an L2 flush between repetitions (which lets the
host run ahead and hides the dispatch). The dispatched call runs with the row threshold lowered where the spec says how
(``OpSpec.lower_threshold``), so it takes the fast route wherever every other condition holds; an op that declares no
way runs as it dispatches. Each row records the route it took. Every dtype the op's predeclared cases admit to the fast
route is swept.

The proposal is what the op's thresholds record (``OpSpec.thresholds``; RMSNorm's ``thresholds.json``) keeps for an
architecture (``python -m fastpath_lib threshold RESULTS_DIR`` writes it with the folder it came from); an op without
one says where its own crossover lies and records nothing.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from pathlib import Path

import pandas as pd
import torch

from fastpath_lib import opspec, runtime
from fastpath_lib.bench.analysis import classify
from fastpath_lib.bench.hostmethod import HOST_TIMER, fastest_blocks, silenced
from fastpath_lib.bench.schema import (
    AT_BASELINE,
    FALLBACK,
    INCOMPLETE_MARKER,
    NOT_GPU,
    TIMED_OUTCOMES,
    folder_state,
    is_gpu_measurement,
)
from fastpath_lib.bench.timing import gpu_measurement, quantile
from fastpath_lib.bench.trace import call_args

__all__ = ["threshold_sweep", "sweep_grid", "propose", "sweep_dtypes", "SWEEP_COLUMNS", "threshold_from_results",
           "record_threshold"]

#: Columns of ``threshold.csv``.
SWEEP_COLUMNS = ["cols", "rows", "dtype", "provider", "case_id", "status", "route", "expected", "q20_us", "median_us",
                 "q80_us", "min_us", "samples_us", "number", "timer", "gpu_measurement", "device_name"]


def parse_arch(name: str) -> tuple[int, int]:
    """``"sm_90"`` -> ``(9, 0)``; ``ValueError`` for anything else.

    >>> parse_arch("sm_90")
    (9, 0)
    """
    m = re.fullmatch(r"sm_(\d+)(\d)", str(name))
    if not m:
        raise ValueError(f"architecture {name!r} is not of the form sm_XY (e.g. sm_90)")
    return int(m.group(1)), int(m.group(2))


def sweep_dtypes(spec: opspec.OpSpec) -> list[torch.dtype]:
    """The dtypes an op's predeclared cases admit to the fast route (a case not expected to fall back), in the
    matrix's order: every one of them is swept."""
    names = [c.dtype for c in spec.matrix() if c.expected != FALLBACK]
    return [getattr(torch, n) for n in dict.fromkeys(names)]


def sweep_grid(spec: opspec.OpSpec, *, quick: bool, gpu: bool) -> tuple[list[int], tuple[int, ...], list]:
    """The row counts, widths and dtypes :func:`threshold_sweep` sweeps by default: powers of two, 1..16384 on a GPU
    (every other one with ``quick``), 8 and 16 off it; the op's ``sweep_axes()`` widths (``quick`` with ``quick``,
    ``off_gpu`` off a GPU); :func:`sweep_dtypes`."""
    rows = [2 ** k for k in range(0, 15, 2 if quick else 1)] if gpu else [8, 16]
    axes = spec.sweep_axes()
    return rows, (axes.quick if quick else axes.widths) if gpu else axes.off_gpu, sweep_dtypes(spec)


def threshold_sweep(rows=None, cols=None, dtype: torch.dtype | None = None, *, dtypes=None,
                    spec: opspec.OpSpec | None = None, quick: bool = False, deadline: float | None = None,
                    blocks: int | None = None, block_s: float | None = None) -> pd.DataFrame:
    """Time an op's dispatched call against its first baseline, host time included, across row counts and dtypes.

    Args:
        rows: row counts (default: powers of two, 1..16384 on a GPU, every other one with ``quick``; 8 and 16 off it).
        cols: row widths (default: the op's ``sweep_axes()``: ``widths`` on a GPU, ``quick`` with ``quick``,
            ``off_gpu`` off it).
        dtype: sweep this one dtype only.
        dtypes: input dtypes (default: :func:`sweep_dtypes`, every dtype the op admits).
        spec: the operator (default: :func:`fastpath_lib.opspec.default`); its arguments are
            :func:`~fastpath_lib.bench.trace.call_args`'s (built
            on the device), provider ``baseline`` for ``spec.baseline`` and ``dispatched`` for ``spec.function``
            (with the route it took).
        quick: fewer points.
        deadline: a ``time.monotonic()`` value; points not started by then are left out (and no threshold is
            proposed from an incomplete sweep).
        blocks, block_s: :func:`~fastpath_lib.bench.hostmethod.fastest_blocks`'s rounds and block length (default:
            16 blocks of about 4 ms on a GPU, 3 off it).

    Returns:
        one row per (cols, dtype, rows, provider) with the blocks' median and quantiles and the fastest block
        (microseconds per call) and ``vs_baseline``; ``attrs["proposal"]`` is :func:`propose`'s dict, with the ``op``,
        its ``baseline`` and ``points_run`` / ``points_planned``. A spec without a fast route gets no rows and a
        proposal whose reason says so.

    Note:
        Off a GPU the fast route runs in the interpreter: the sweep exercises the pipeline but proposes no threshold.
    """
    spec = spec or opspec.default()
    base_name, base_fn = spec.baseline
    gpu = gpu_measurement()
    cuda = runtime.cuda_available()
    grid = sweep_grid(spec, quick=quick, gpu=gpu)
    rows = grid[0] if rows is None else rows
    cols = grid[1] if cols is None else cols
    dtypes = [dtype] if dtype is not None else list(dtypes) if dtypes is not None else grid[2]
    blocks = blocks or (16 if gpu else 3)
    block_s = block_s or (0.004 if gpu else 0.001)
    dev = "cuda" if cuda else "cpu"
    name = torch.cuda.get_device_name() if cuda else "cpu"
    sync = torch.cuda.synchronize if cuda else None
    planned = len(cols) * len(dtypes) * len(rows) if spec.fast is not None else 0
    records, run = [], 0
    lowered = spec.lower_threshold(1) if spec.lower_threshold is not None else contextlib.nullcontext()
    with lowered, silenced(), torch.no_grad():
        for c in cols if spec.fast is not None else ():
            for dtype in dtypes:
                for r in rows:
                    if deadline is not None and time.monotonic() > deadline:
                        break
                    args = call_args(spec, r, c, dtype, dev)
                    route = spec.route(*args)
                    res = fastest_blocks({"baseline": lambda a=args: base_fn(*a),
                                          "dispatched": lambda a=args: spec.function(*a)},
                                         blocks=blocks, number=None, warmup=20, sync=sync, block_s=block_s)
                    for p, got in res.items():
                        smp = got["samples_us"]
                        records.append({"cols": c, "rows": r, "dtype": str(dtype).replace("torch.", ""),
                                        "provider": p, "case_id": f"sweep_{str(dtype)[6:]}_{r}x{c}", "status": "ok",
                                        "route": route if p == "dispatched" else "n/a", "expected": "n/a",
                                        "q20_us": quantile(smp, 0.2), "median_us": quantile(smp, 0.5),
                                        "q80_us": quantile(smp, 0.8), "min_us": got["best_us"],
                                        "samples_us": json.dumps([round(v, 4) for v in smp]),
                                        "number": got["number"], "timer": HOST_TIMER, "gpu_measurement": gpu,
                                        "device_name": name})
                    run += 1
                    del args
    df = classify(pd.DataFrame(records, columns=SWEEP_COLUMNS))
    cap = torch.cuda.get_device_capability() if gpu else None
    df.attrs["proposal"] = propose(df, capability=cap, complete=run == planned, widths=list(cols), baseline=base_name)
    df.attrs["proposal"].update(op=spec.name, baseline=base_name, points_run=run, points_planned=planned,
                                dtypes=[str(d).replace("torch.", "") for d in dtypes], device_name=name,
                                timer=HOST_TIMER)
    if spec.fast is None:
        df.attrs["proposal"]["reason"] = (f"{spec.name}: its fast route (OpSpec.fast) is {opspec.NOT_DECLARED}: "
                                          "nothing to sweep")
    return df


def propose(table: pd.DataFrame, *, capability: tuple[int, int] | None, complete: bool = True,
            widths: list[int] | None = None, baseline: str = "the baseline") -> dict:
    """The row threshold a classified sweep supports.

    Per width and dtype, the smallest swept row count from which the dispatched call, on the fast route, never loses
    to the baseline (row counts where it fell back are not evidence for the fast route and are passed over); the
    proposal is the largest of those over the widths and dtypes. Nothing is proposed from data that is not a GPU
    measurement, from an incomplete sweep, or when the fast route still loses at the largest row count of some width
    and dtype. A table of an older sweep (provider ``triton``, no dtype column) is read the same way.

    Args:
        table: classified sweep rows (:func:`threshold_sweep`'s table, or ``threshold.csv`` read back).
        capability: ``(major, minor)`` of the GPU, ``None`` off a GPU.
        complete: whether every planned point was swept.
        widths: the planned widths (default: those in the table).
        baseline: the baseline's name, for the reason's wording.

    Returns:
        ``{"capability", "per_width_crossover_rows", "per_dtype_width_crossover_rows", "proposed_min_rows", "line",
        "reason", "complete"}``.
    """
    if "vs_baseline" not in table.columns:
        table = classify(table)
    widths = [int(w) for w in (widths if widths is not None else sorted(set(table["cols"])))]
    fast = "dispatched" if (table["provider"] == "dispatched").any() else "triton"
    dtypes = sorted(set(table["dtype"].astype(str))) if "dtype" in table.columns and len(table) else ["?"]
    per: dict[str, int | None] = {}
    per_width: dict[int, int | None] = {}
    for c in widths:
        worst = []
        for d in dtypes:
            t = table[(table["cols"] == c) & (table["provider"] == fast)]
            if "dtype" in table.columns:
                t = t[t["dtype"].astype(str) == d]
            if fast == "dispatched" and "route" in t.columns:
                t = t[t["route"].astype(str) != FALLBACK]
            t = t.sort_values("rows")
            ok = t["vs_baseline"].isin(AT_BASELINE).tolist()
            rs = [int(v) for v in t["rows"]]
            per[f"{d}/{c}"] = found = next((rs[k] for k in range(len(rs)) if all(ok[k:])), None)
            worst.append(found)
        per_width[c] = None if None in worst else max(worst, default=None)
    measured = bool(len(table)) and bool(table["vs_baseline"].isin(TIMED_OUTCOMES).any())
    out = {"capability": f"sm_{capability[0]}{capability[1]}" if capability else None,
           "per_width_crossover_rows": per_width, "per_dtype_width_crossover_rows": per, "proposed_min_rows": None,
           "line": None, "complete": complete}
    vals = [v for v in per_width.values() if v is not None]
    if capability is None or not measured:
        out["reason"] = f"{NOT_GPU} (CPU / Triton interpreter): no threshold can be proposed"
    elif not complete:
        out["reason"] = "the sweep did not finish every point: no threshold proposed"
    elif len(vals) != len(per_width) or not vals:
        out["reason"] = ("the fast route still loses at the largest swept row count of some width and dtype: no "
                         "threshold proposed")
    else:
        out["proposed_min_rows"] = max(vals)
        out["line"] = f"CUDA_MIN_ROWS[({capability[0]}, {capability[1]})] = {max(vals)}"
        out["reason"] = (f"smallest swept row count from which the dispatched call on the fast route never loses to "
                         f"{baseline} (host time included), largest over the swept widths and dtypes")
    return out


def threshold_from_results(results_dir: str | Path) -> dict:
    """The row threshold a recorded GPU sweep supports, recomputed from its raw ``threshold.csv``.

    Args:
        results_dir: a finished results folder of a GPU run (``bench`` or ``evidence``).

    Returns:
        :func:`propose`'s dict plus ``source`` (the folder), ``device_name``, ``git_commit``, ``timestamp`` and
        ``swept_widths``.

    Raises:
        FileNotFoundError, ValueError: the folder is missing, unfinished, not a GPU measurement, synthetic, or has
            no sweep (one line each); a stored proposal that disagrees with the raw data.
    """
    d = Path(results_dir)
    if not d.is_dir():
        raise FileNotFoundError(f"{d}: no such results folder")
    state, missing = folder_state(d)
    if state == "unfinished":
        raise ValueError(f"{d} is marked {INCOMPLETE_MARKER}: the run did not finish")
    sweep_gap = [m for m in missing if m.split(":", 1)[0] == "sweep"]
    if sweep_gap:  # a partial evidence run whose sweep itself did not run to the end
        raise ValueError(f"{d} is a partial run and its sweep did not finish ({sweep_gap[0]}): no threshold is "
                         "recorded from it")
    for name in ("environment.json", "threshold.csv"):
        if not (d / name).is_file():
            raise ValueError(f"{d} has no {name}: not a results folder with a threshold sweep")
    env = json.loads((d / "environment.json").read_text())
    op = env.get("op") or opspec.names()[0]  # a folder without an op is the default op's
    if op not in opspec.names() or opspec.get(op).thresholds is None:
        raise ValueError(f"{d} holds a sweep of {op}: its spec declares no thresholds record (OpSpec.thresholds), "
                         "so no row threshold is recorded for it")
    if env.get("synthetic"):
        raise ValueError(f"{d} holds synthetic data: no threshold is recorded from it")
    table = pd.read_csv(d / "threshold.csv")
    if "gpu_measurement" not in table.columns or not is_gpu_measurement(table, env):
        raise ValueError(f"{d} is {NOT_GPU}: no threshold can be recorded from it")
    cap = parse_arch(str(env.get("compute_capability")))
    stored = json.loads((d / "threshold_proposal.json").read_text()) if (d / "threshold_proposal.json").exists() else {}
    out = propose(table, capability=cap, complete=bool(stored.get("complete", True)))
    if stored and stored.get("proposed_min_rows") != out["proposed_min_rows"]:
        raise ValueError(f"{d}/threshold_proposal.json says {stored.get('proposed_min_rows')} but threshold.csv "
                         f"supports {out['proposed_min_rows']}")
    out.update(op=op, source=str(d), device_name=env.get("device_name"), git_commit=env.get("git_commit"),
               timestamp=env.get("timestamp"), swept_widths=sorted(int(c) for c in set(table["cols"])),
               missing=missing)
    return out


def record_threshold(results_dir: str | Path, *, path: str | Path | None = None, root: str | Path | None = None,
                     write: bool = True) -> dict:
    """Record the threshold a GPU sweep supports in ``thresholds.json``, with the folder it came from.

    Args:
        results_dir: the results folder.
        path: the thresholds file (default: the op's ``OpSpec.thresholds.THRESHOLDS_FILE``).
        root: the checkout the ``source`` is written relative to (default: the kit's root, when the folder is
            inside it).
        write: ``False`` only computes it.

    Returns:
        :func:`threshold_from_results`'s dict, with ``written`` (the file, or ``None``).

    Raises:
        ValueError: as :func:`threshold_from_results`, or when the sweep supports no threshold (the reason says why).
    """
    info = threshold_from_results(results_dir)
    if info["proposed_min_rows"] is None:
        raise ValueError(f"{results_dir}: no threshold supported: {info['reason']}")
    src = Path(results_dir).resolve()
    base = Path(root).resolve() if root is not None else Path(__file__).resolve().parents[2]
    source = str(src.relative_to(base)) if src.is_relative_to(base) else str(src)
    info["source"] = source
    info["written"] = None
    if write:
        thresholds = opspec.get(info["op"]).thresholds
        target = Path(path) if path is not None else thresholds.THRESHOLDS_FILE
        thresholds.record(info["capability"], info["proposed_min_rows"], source, path=target,
                          device_name=info["device_name"], git_commit=info["git_commit"],
                          measured=info["timestamp"], swept_widths=info["swept_widths"],
                          per_width_crossover_rows={str(k): v for k, v in info["per_width_crossover_rows"].items()},
                          rule=info["reason"])
        info["written"] = str(target)
    return info
