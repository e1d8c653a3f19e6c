"""Draft the PR note from a results folder (or a DataFrame): concise Markdown a reviewer can check claim by claim.

The note never states a speed-up from CPU or interpreter timings: such runs are labelled "not a GPU measurement" and
the performance claim is marked *unmeasured*.
"""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd

__all__ = ["pr_note", "junit_counts"]

NOT_GPU = "not a GPU measurement"


def junit_counts(path: str | Path) -> dict:
    """``{"tests", "failures", "errors", "skipped"}`` summed over a JUnit XML file's test suites."""
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    keys = ("tests", "failures", "errors", "skipped")
    return {k: sum(int(s.get(k, 0)) for s in suites) for k in keys}


def _fmt(v, spec=".4g") -> str:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return "—" if v is None else str(v)
    return "—" if math.isnan(f) else format(f, spec)


def _json(folder: Path | None, name: str):
    if folder is None or not (folder / name).exists():
        return None
    return json.loads((folder / name).read_text())


def pr_note(results_dir: str | Path | None = None, *, df: pd.DataFrame | None = None, env: dict | None = None,
            tests: dict | str | Path | None = None, replay: dict | None = None,
            compile_cost: dict | None = None, threshold: dict | None = None, owner: str = "the PR author") -> str:
    """Draft the PR note.

    Args:
        results_dir: a results folder (reads ``results.csv``, ``environment.json``, and ``replay.json``,
            ``compile_cost.json``, ``threshold.csv`` when present).
        df, env: results and environment instead of a folder (e.g. synthetic data in a test or a lesson; set
            ``env["synthetic"] = True`` and the note says so).
        tests: semantic evidence: a JUnit XML path or a counts dict (``{"suite": {"tests": n, "failures": 0}}`` or
            a flat counts dict); ``None`` says "not attached".
        replay, compile_cost, threshold: analyses (default: read from the folder).
        owner: who maintains the kernel when new architectures arrive.

    Returns:
        Markdown text.

    Note:
        When ``gpu_measurement`` is false the note carries no speed-up: it says "not a GPU measurement" and marks the
        performance claim unmeasured, listing routes and expectations only.
    """
    from fastpath_lib.bench.analysis import classify, summary_table
    from fastpath_lib.bench.results import load_results
    from fastpath_lib.rmsnorm.predicate import ALLOWED_MODES, CUDA_MIN_ROWS, DEFAULT_CUDA_MIN_ROWS, MAX_COLS, PREDICATE

    folder = Path(results_dir) if results_dir is not None else None
    if df is None:
        df, env = load_results(folder)
    elif "observed" not in df.columns:
        df = classify(df)
    env = dict(env or df.attrs.get("environment") or {})
    gpu = bool(env.get("gpu_measurement"))
    synthetic = bool(env.get("synthetic"))
    replay = replay if replay is not None else _json(folder, "replay.json")
    compile_cost = compile_cost if compile_cost is not None else _json(folder, "compile_cost.json")
    if threshold is None and folder is not None and (folder / "threshold.csv").exists():
        threshold = {"table": pd.read_csv(folder / "threshold.csv")}
    table = summary_table(df, gpu=gpu)
    disp = df[df.provider == "dispatched"]
    counts = disp["observed"].value_counts().to_dict()
    where = env.get("device_name") or f"CPU ({env.get('cpu_model', 'unknown')})"
    label = "GPU measurement" if gpu else NOT_GPU
    if synthetic:
        label = "SYNTHETIC data, not a measurement"
    L = []
    L.append("# RMSNorm: Triton fast path behind an eligibility predicate")
    L.append("")
    if synthetic:
        L.append("> **SYNTHETIC DATA** -- this note was drafted from a constructed table to show the format; no number "
                 "in it was measured.")
        L.append("")
    L.append("## Summary")
    L.append("")
    L.append("`fastpath_lib.rms_norm` keeps `torch.nn.functional.rms_norm`'s contract and runs Triton forward and "
             "backward kernels where an eligibility predicate holds; every other call takes `F.rms_norm` unchanged.")
    L.append("")
    L.append(f"- Measured on: {where}, torch {env.get('torch')}, triton {env.get('triton')}, commit "
             f"`{str(env.get('git_commit'))[:12]}`{' (dirty)' if env.get('git_dirty') else ''}, "
             f"{env.get('timestamp')} -- **{label}**.")
    L.append(f"- {len(table)} predeclared cases; dispatched outcomes: "
             + ", ".join(f"{k} {counts.get(k, 0)}" for k in ("win", "neutral", "loss", "fallback")) + ".")
    if gpu:
        wins = disp[disp.observed == "win"]
        if len(wins):
            L.append(f"- Speed-ups over F.rms_norm on wins range {_fmt(wins.speedup.min(), '.2f')}x to "
                     f"{_fmt(wins.speedup.max(), '.2f')}x (median time ratio; noise band per case below).")
    else:
        L.append(f"- **Performance claim: unmeasured.** These timings are {NOT_GPU} (CPU / Triton interpreter); "
                 "they show the harness and the routes, not GPU speed. Run `python -m fastpath_lib bench` on a GPU.")
    L.append("")
    L.append("## Eligibility region and fallback")
    L.append("")
    rows_rule = ", ".join(f"sm_{a}{b}: {v}" for (a, b), v in sorted(CUDA_MIN_ROWS.items())) or \
        f"none recorded yet, conservative default {DEFAULT_CUDA_MIN_ROWS}"
    L.append(f"Fast path when every condition holds (max cols {MAX_COLS}; CUDA row threshold per arch: {rows_rule}). "
             "Otherwise `F.rms_norm` runs, so a limit never becomes a new error.")
    L.append("")
    L.append(PREDICATE.markdown_table())
    L.append("")
    L.append("Modes that keep the fast path: " + "; ".join(f"**{k}** ({v})" for k, v in ALLOWED_MODES.items()) + ".")
    L.append("")
    L.append("## Semantic evidence")
    L.append("")
    if tests is None:
        L.append("Test results: not attached (pass `tests=` a JUnit XML or a counts dict).")
    else:
        if isinstance(tests, (str, Path)):
            tests = {"pytest (junit)": junit_counts(tests)}
        if tests and all(not isinstance(v, dict) for v in tests.values()):
            tests = {"tests": tests}
        for suite, c in tests.items():
            L.append(f"- {suite}: " + ", ".join(f"{k} {v}" for k, v in c.items()))
    L.append("")
    L.append("## Mechanism")
    L.append("")
    L.append("One program per row reads x and w once and writes y once (backward: dy, x, w in; dx and an fp32 "
             "partial dw out, reduced in a fixed order). Bytes moved are counted as each input read once and each "
             f"output written once. Copy ceiling measured in the same run: {env.get('harness', {}).get('copy_bandwidth')}"
             f" = {_fmt(env.get('harness', {}).get('copy_gbps'), '.1f')} GB/s ({label}).")
    L.append("")
    mech = disp[disp.status == "ok"]
    if len(mech):
        L.append("| case | bytes moved | dispatched GB/s | % of copy | launches/call |")
        L.append("|---|---|---|---|---|")
        for r in mech.itertuples():
            L.append(f"| {r.case_id} | {int(r.bytes_moved):,} | {_fmt(r.gbps, '.1f')} | {_fmt(r.pct_copy_bw, '.1f')} | "
                     f"{_fmt(r.launches_per_call, '.1f')} |")
        if not gpu:
            L.append("")
            L.append(f"(GB/s above are {NOT_GPU}; launches are not counted without CUDA.)")
    L.append("")
    L.append("## Performance: every predeclared case")
    L.append("")
    L.append(f"Timer: {env.get('harness', {}).get('timer')}; median of per-repetition samples (raw samples in "
             "results.csv), noise band = larger 20-80 % spread of provider and baseline. "
             + ("" if gpu else f"**{NOT_GPU}**: times are CPU / interpreter milliseconds; no speed-up is claimed."))
    L.append("")
    if gpu:
        head = ["case", "pass", "shape", "dtype", "layout", "expected", "observed", "route", "baseline ms",
                "dispatched ms", "speed-up", "band", "compiled ms", "as expected"]
    else:
        head = ["case", "pass", "shape", "dtype", "layout", "expected (GPU)", "route", "timing class (not GPU)",
                "as expected"]
    L.append("| " + " | ".join(head) + " |")
    L.append("|" + "---|" * len(head))
    for cid, r in table.iterrows():
        if gpu:
            cells = [cid, r["pass"], r["shape"], r["dtype"], r["layout"], r["expected"], r["observed"], r["route"],
                     _fmt(r["baseline_ms"]), _fmt(r["dispatched_ms"]), _fmt(r.get("speedup"), ".2f"),
                     _fmt(r.get("noise_band"), ".1%"), _fmt(r["compiled_ms"]), "yes" if r["matches"] else "**no**"]
        else:
            route_ok = (r["expected"] == "fallback") == (r["route"] == "fallback")
            cells = [cid, r["pass"], r["shape"], r["dtype"], r["layout"], r["expected"], r["route"], r["observed"],
                     "route " + ("as expected" if route_ok else "differs (interpreter threshold is 8 rows)")]
        L.append("| " + " | ".join(str(c) for c in cells) + " |")
    L.append("")
    if gpu:
        for kind in ("win", "neutral", "loss", "fallback"):
            ids = table.index[table.observed == kind].tolist()
            L.append(f"- **{kind}** ({len(ids)}): {', '.join(ids) if ids else 'none'}")
        fb = disp[disp.observed == "fallback"]
        slow = fb[fb.fallback_at_baseline == False]  # noqa: E712
        L.append(f"- Fallback cases at baseline speed: {len(fb) - len(slow)} of {len(fb)}"
                 + (f" (slower: {', '.join(slow.case_id)})" if len(slow) else "") + ".")
        miss = table.index[table.matches == False].tolist()  # noqa: E712
        L.append(f"- Expected vs observed differ for: {', '.join(miss) if miss else 'none'}.")
        L.append("")
    if threshold is not None and "table" in threshold:
        t = threshold["table"]
        L.append(f"Row-threshold sweep: {t.case_id.nunique()} shapes in threshold.csv"
                 + ("" if gpu else f" ({NOT_GPU}; no threshold proposed)") + ".")
        L.append("")
    L.append("## Workload replay")
    L.append("")
    if replay:
        rl = replay.get("label", label)
        L.append(f"Tiny decoder, {replay['layers']} layers, dim {replay['dim']}, {replay['batch']}x{replay['seq']} "
                 f"tokens, {replay['dtype']} ({rl}). Logits agree: {replay.get('logits_close')}.")
        if replay.get("gpu_measurement"):
            L.append(f"End-to-end {_fmt(replay['e2e_baseline_ms'])} ms -> {_fmt(replay['e2e_fastpath_ms'])} ms; "
                     f"RMSNorm share of the baseline forward {_fmt(100 * replay['norm_share_baseline'], '.1f')} %.")
        else:
            L.append(f"End-to-end and norm-share timings recorded in replay.json are {NOT_GPU}; no end-to-end gain is "
                     "claimed.")
    else:
        L.append("Not run.")
    L.append("")
    L.append("## Why not an existing primitive or torch.compile")
    L.append("")
    comp = df[(df.provider == "compiled")]
    ok = comp[comp.status == "ok"]
    if len(ok) and gpu:
        L.append(f"torch.compile of F.rms_norm was measured on {len(ok)} cases: observed "
                 + ", ".join(f"{k} {v}" for k, v in ok.vs_baseline.value_counts().items())
                 + f" against F.rms_norm; compile time {_fmt(ok.compile_s.min(), '.2f')}-"
                 f"{_fmt(ok.compile_s.max(), '.2f')} s per shape. Eager callers (and code that cannot be compiled) "
                 "get nothing from it; compare the compiled column with the dispatched one above.")
    elif len(ok):
        L.append(f"torch.compile ran on {len(ok)} cases here, but the timings are {NOT_GPU}.")
    else:
        reasons = sorted(set(comp.note.dropna().astype(str))) if len(comp) else ["not run"]
        L.append("The torch.compile baseline was not measured: " + "; ".join(reasons) + ".")
    L.append("")
    L.append("## Maintenance")
    L.append("")
    if compile_cost:
        L.append(f"- Specializations the matrix triggers: {compile_cost.get('specializations')}.")
        if compile_cost.get("compiles"):
            L.append(f"- JIT compile: {_fmt(compile_cost.get('total_compile_s'), '.2f')} s in total, at most "
                     f"{_fmt(compile_cost.get('max_compile_s'), '.2f')} s per specialization; kernel cache "
                     f"{compile_cost.get('cache_bytes', 0) / 2**20:.1f} MiB on disk.")
        else:
            L.append(f"- {compile_cost.get('note')}.")
    L.append("- Surface: fp16/bf16/fp32, sm_80 and newer, rows <= 16384 columns wide; everything else falls back.")
    L.append("- Fallback: `force_fallback()` / `FASTPATH_FORCE_FALLBACK=1` switch the fast path off at run time.")
    L.append(f"- New architectures: {owner} re-runs the GPU sweep and records `CUDA_MIN_ROWS` for the arch; until then "
             "the conservative default applies.")
    L.append("")
    L.append("## Limitations")
    L.append("")
    if not gpu:
        L.append(f"- No GPU measurement is attached: every timing here is {NOT_GPU}; the performance claim is "
                 "unmeasured.")
    L.append("- CUDA-graph capture takes the fallback (not yet verified under capture).")
    L.append("- Multi-dim normalization, fp64 and rows wider than the maximum use the reference.")
    L.append("")
    return "\n".join(L)
