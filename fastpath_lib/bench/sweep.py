"""The row-threshold sweep: an op's fast route against its baseline across row counts, and the proposal it makes.

The op is an :class:`~fastpath_lib.opspec.OpSpec` (default RMSNorm: its Triton forward against ``F.rms_norm``); the
sweep times ``spec.fast`` against ``spec.baseline``. The proposal is what :mod:`fastpath_lib.rmsnorm.thresholds`
records for an architecture (``python -m fastpath_lib threshold RESULTS_DIR`` writes it with the folder it came from):
RMSNorm's row threshold, so only a sweep of RMSNorm is recorded there (another op's sweep says where its own
crossover lies).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pandas as pd
import torch

from fastpath_lib import opspec, runtime
from fastpath_lib.bench.analysis import classify
from fastpath_lib.bench.schema import (
    AT_BASELINE,
    INCOMPLETE_MARKER,
    NOT_GPU,
    TIMED_OUTCOMES,
    folder_state,
    is_gpu_measurement,
)
from fastpath_lib.bench.timing import gpu_measurement, quantile, settings_for, time_callable
from fastpath_lib.bench.trace import call_args
from fastpath_lib.rmsnorm import thresholds
from fastpath_lib.rmsnorm.thresholds import parse_arch

__all__ = ["threshold_sweep", "propose", "SWEEP_COLUMNS", "threshold_from_results", "record_threshold"]

#: Columns of ``threshold.csv``.
SWEEP_COLUMNS = ["cols", "rows", "dtype", "provider", "case_id", "status", "route", "expected", "q20_us", "median_us",
                 "q80_us", "samples_us", "timer", "gpu_measurement"]


def threshold_sweep(rows=None, cols=None, dtype: torch.dtype = torch.float16, *, spec: opspec.OpSpec | None = None,
                    quick: bool = False, settings: dict | None = None, deadline: float | None = None) -> pd.DataFrame:
    """Time an op's fast route against its first baseline across row counts to find the crossover.

    Args:
        rows: row counts (default: powers of two, 1..16384 on a GPU; 8..64 off it).
        cols: row widths (default: 2048, 4096, 8192 on a GPU; 256 off it).
        dtype: input dtype.
        spec: the operator (default: RMSNorm, its Triton forward against ``F.rms_norm``); the rows are timed with
            :func:`~fastpath_lib.bench.trace.call_args`'s arguments, provider ``baseline`` for ``spec.baseline``
            and ``triton`` for ``spec.fast``.
        quick: fewer points and shorter budgets.
        settings: harness settings (default: this machine's).
        deadline: a ``time.monotonic()`` value; points not started by then are left out (and no threshold is
            proposed from an incomplete sweep).

    Returns:
        one row per (cols, rows, provider) with median/quantiles (microseconds) and ``vs_baseline``;
        ``attrs["proposal"]`` is :func:`propose`'s dict, with the ``op`` and its ``baseline``. A spec without a fast
        route gets no rows and a proposal whose reason says so.

    Note:
        Off a GPU the kernel runs in the interpreter: the sweep exercises the pipeline but proposes no threshold.
    """
    spec = spec or opspec.get("rms_norm")
    base_name, base_fn = spec.baseline
    gpu = gpu_measurement()
    if rows is None:
        rows = [2 ** k for k in range(0, 15, 2 if quick else 1)] if gpu else ([8, 16, 32] if quick else [8, 16, 32, 64])
    if cols is None:
        cols = ((4096,) if quick else (2048, 4096, 8192)) if gpu else (256,)
    settings = settings or settings_for(quick)
    dev = "cuda" if runtime.cuda_available() else "cpu"
    records, complete = [], True
    for c in cols if spec.fast is not None else ():
        for r in rows:
            if deadline is not None and time.monotonic() > deadline:
                complete = False
                break
            sets = [call_args(spec, r, c, dtype, dev, seed=s) for s in range(settings["input_sets"])]
            state = {"i": 0}

            def call(fn):
                def timed():
                    state["i"] += 1
                    return fn(*sets[state["i"] % len(sets)])
                return timed

            for p, fn in (("baseline", call(base_fn)), ("triton", call(spec.fast))):
                with torch.no_grad():
                    res = time_callable(fn, settings)
                s = res["samples_us"]
                records.append({"cols": c, "rows": r, "dtype": str(dtype).replace("torch.", ""), "provider": p,
                                "case_id": f"sweep_{r}x{c}", "status": "ok", "route": "n/a", "expected": "n/a",
                                "q20_us": quantile(s, 0.2), "median_us": quantile(s, 0.5), "q80_us": quantile(s, 0.8),
                                "samples_us": json.dumps([round(v, 4) for v in s]), "timer": res["timer"],
                                "gpu_measurement": gpu})
            sets.clear()  # frees the device memory before the next size
        if not complete:
            break
    df = classify(pd.DataFrame(records, columns=SWEEP_COLUMNS))
    cap = torch.cuda.get_device_capability() if gpu else None
    df.attrs["proposal"] = propose(df, capability=cap, complete=complete, widths=list(cols), baseline=base_name)
    df.attrs["proposal"].update(op=spec.name, baseline=base_name)
    if spec.fast is None:
        df.attrs["proposal"]["reason"] = f"{spec.name}: its fast route is {opspec.NOT_DECLARED}: nothing to sweep"
    return df


def propose(table: pd.DataFrame, *, capability: tuple[int, int] | None, complete: bool = True,
            widths: list[int] | None = None, baseline: str = "F.rms_norm") -> dict:
    """The row threshold a classified sweep supports.

    Per width, the smallest swept row count from which the kernel never loses to the baseline; the proposal is the
    largest of those over the widths. Nothing is proposed from data that is not a GPU measurement, from an
    incomplete sweep, or when the kernel still loses at the largest row count of some width.

    Args:
        table: classified sweep rows (:func:`threshold_sweep`'s table, or ``threshold.csv`` read back).
        capability: ``(major, minor)`` of the GPU, ``None`` off a GPU.
        complete: whether every planned width was swept.
        widths: the planned widths (default: those in the table).
        baseline: the baseline's name, for the reason's wording.

    Returns:
        ``{"capability", "per_width_crossover_rows", "proposed_min_rows", "line", "reason", "complete"}``.
    """
    if "vs_baseline" not in table.columns:
        table = classify(table)
    widths = [int(w) for w in (widths if widths is not None else sorted(set(table["cols"])))]
    per_width: dict[int, int | None] = {}
    for c in widths:
        t = table[(table["cols"] == c) & (table["provider"] == "triton")].sort_values("rows")
        ok = t["vs_baseline"].isin(AT_BASELINE).tolist()
        rs = [int(v) for v in t["rows"]]
        per_width[c] = next((rs[k] for k in range(len(rs)) if all(ok[k:])), None)
    measured = bool(len(table)) and bool(table["vs_baseline"].isin(TIMED_OUTCOMES).any())
    out = {"capability": f"sm_{capability[0]}{capability[1]}" if capability else None,
           "per_width_crossover_rows": per_width, "proposed_min_rows": None, "line": None, "complete": complete}
    vals = [v for v in per_width.values() if v is not None]
    if capability is None or not measured:
        out["reason"] = f"{NOT_GPU} (CPU / Triton interpreter): no threshold can be proposed"
    elif not complete:
        out["reason"] = "the sweep did not finish every width: no threshold proposed"
    elif len(vals) != len(per_width) or not vals:
        out["reason"] = "the kernel still loses at the largest swept row count of some width: no threshold proposed"
    else:
        out["proposed_min_rows"] = max(vals)
        out["line"] = f"CUDA_MIN_ROWS[({capability[0]}, {capability[1]})] = {max(vals)}"
        out["reason"] = (f"smallest swept row count from which the kernel never loses to {baseline}, largest over the "
                         "swept widths")
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
    if env.get("op", "rms_norm") != "rms_norm":
        raise ValueError(f"{d} holds a sweep of {env['op']}: thresholds.json records RMSNorm's row threshold")
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
    out.update(source=str(d), device_name=env.get("device_name"), git_commit=env.get("git_commit"),
               timestamp=env.get("timestamp"), swept_widths=sorted(int(c) for c in set(table["cols"])),
               missing=missing)
    return out


def record_threshold(results_dir: str | Path, *, path: str | Path | None = None, root: str | Path | None = None,
                     write: bool = True) -> dict:
    """Record the threshold a GPU sweep supports in ``thresholds.json``, with the folder it came from.

    Args:
        results_dir: the results folder.
        path: the thresholds file (default :data:`fastpath_lib.rmsnorm.thresholds.THRESHOLDS_FILE`).
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
        target = Path(path) if path is not None else thresholds.THRESHOLDS_FILE
        thresholds.record(info["capability"], info["proposed_min_rows"], source, path=target,
                          device_name=info["device_name"], git_commit=info["git_commit"],
                          measured=info["timestamp"], swept_widths=info["swept_widths"],
                          per_width_crossover_rows={str(k): v for k, v in info["per_width_crossover_rows"].items()},
                          rule=info["reason"])
        info["written"] = str(target)
    return info
