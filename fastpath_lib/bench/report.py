"""Draft the PR note from a results folder (or a DataFrame): concise Markdown a reviewer can check claim by claim.

One function per section (:data:`SECTIONS`), each taking the same :class:`Evidence` and returning its lines. The note
never states a speed-up from CPU or interpreter timings: such runs are labelled "not a GPU measurement", their
outcomes read *unmeasured* and the performance claim is marked *unmeasured*. Limits (widest row, oldest
architecture, dtypes) are read from the predicate module, never typed here. Times in microseconds.
"""

from __future__ import annotations

import dataclasses
import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd

from fastpath_lib.bench.analysis import classify, coverage_line, outcome_counts, summary_table
from fastpath_lib.bench.host import NOT_MEASURED, TARGET_RATIO, host_table
from fastpath_lib.bench.results import load_results
from fastpath_lib.bench.schema import (FALLBACK, NOT_GPU, OUTCOMES, UNMEASURED, WIN, is_gpu_measurement,
                                       matrix_rows, measurement_label)
from fastpath_lib.rmsnorm.predicate import (ALIGN_BYTES, ALLOWED_MODES, CUDA_MIN_ROWS, DEFAULT_CUDA_MIN_ROWS,
                                            MAX_COLS, MIN_CAPABILITY, PREDICATE, SUPPORTED_DTYPES)

__all__ = ["pr_note", "junit_counts", "Evidence", "SECTIONS", "fmt"]


def junit_counts(path: str | Path) -> dict:
    """``{"tests", "failures", "errors", "skipped"}`` summed over a JUnit XML file's test suites."""
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    keys = ("tests", "failures", "errors", "skipped")
    return {k: sum(int(s.get(k, 0)) for s in suites) for k in keys}


def fmt(v, spec=".4g") -> str:
    """A number for a table: ``—`` for missing values.

    >>> fmt(1.23456), fmt(None), fmt(float("nan"))
    ('1.235', '—', '—')
    """
    try:
        f = float(v)
    except (TypeError, ValueError):
        return "—" if v is None else str(v)
    return "—" if math.isnan(f) else format(f, spec)


def _json(folder: Path | None, name: str):
    if folder is None or not (folder / name).exists():
        return None
    return json.loads((folder / name).read_text())


def _arch(cap: tuple[int, int]) -> str:
    return f"sm_{cap[0]}{cap[1]}"


def _dtypes() -> str:
    names = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}
    return "/".join(names.get(str(d).replace("torch.", ""), str(d)) for d in SUPPORTED_DTYPES)


@dataclasses.dataclass
class Evidence:
    """Everything the note reads, gathered once."""

    df: pd.DataFrame
    env: dict
    gpu: bool
    synthetic: bool
    label: str
    tests: dict | None = None
    replay: dict | None = None
    compile_cost: dict | None = None
    threshold: dict | None = None
    compiled: list | None = None
    manifest: dict | None = None
    owner: str = "the PR author"

    @property
    def matrix(self) -> pd.DataFrame:
        return matrix_rows(self.df)

    @property
    def dispatched(self) -> pd.DataFrame:
        m = self.matrix
        return m[m.provider == "dispatched"]


def summary(ev: Evidence) -> list[str]:
    env = ev.env
    where = env.get("device_name") or f"CPU ({env.get('cpu_model', 'unknown')})"
    L = ["## Summary", "",
         "`fastpath_lib.rms_norm` keeps `torch.nn.functional.rms_norm`'s contract and runs Triton forward and backward "
         "kernels where an eligibility predicate holds; every other call takes `F.rms_norm` unchanged.", "",
         f"- Measured on: {where}, torch {env.get('torch')}, triton {env.get('triton')}, commit "
         f"`{str(env.get('git_commit'))[:12]}`{' (dirty)' if env.get('git_dirty') else ''}, {env.get('timestamp')} "
         f"-- **{ev.label}**."]
    counts = outcome_counts(ev.df)
    shown = OUTCOMES if ev.gpu else (UNMEASURED, FALLBACK)
    L.append(f"- {coverage_line(ev.df, env)}; dispatched outcomes: "
             + ", ".join(f"{k} {counts[k]}" for k in shown) + ".")
    if ev.gpu:
        wins = ev.dispatched[ev.dispatched.observed == WIN]
        if len(wins):
            L.append(f"- Speed-ups over F.rms_norm on wins range {fmt(wins.speedup.min(), '.2f')}x to "
                     f"{fmt(wins.speedup.max(), '.2f')}x (median time ratio; noise band per case below).")
    else:
        L.append(f"- **Performance claim: unmeasured.** These timings are {NOT_GPU} (CPU / Triton interpreter); "
                 "they show the harness and the routes, not GPU speed. Run `python -m fastpath_lib evidence` on a GPU.")
    return L


def eligibility(ev: Evidence) -> list[str]:
    rows_rule = ", ".join(f"{_arch(k)}: {v}" for k, v in sorted(CUDA_MIN_ROWS.items())) or \
        f"none recorded yet, conservative default {DEFAULT_CUDA_MIN_ROWS}"
    return ["## Eligibility region and fallback", "",
            f"Fast path when every condition holds (max cols {MAX_COLS}; CUDA row threshold per arch: {rows_rule}). "
            "Otherwise `F.rms_norm` runs, so a limit never becomes a new error.", "",
            PREDICATE.markdown_table(), "",
            "Modes that keep the fast path: " + "; ".join(f"**{k}** ({v})" for k, v in ALLOWED_MODES.items()) + "."]


def semantic(ev: Evidence) -> list[str]:
    L = ["## Semantic evidence", ""]
    tests = ev.tests
    if tests is None:
        L.append("Test results: not attached (pass `tests=` a JUnit XML or a counts dict).")
    else:
        if isinstance(tests, (str, Path)):
            tests = {"pytest (junit)": junit_counts(tests)}
        if tests and all(not isinstance(v, dict) for v in tests.values()):
            tests = {"tests": tests}
        for suite, c in tests.items():
            L.append(f"- {suite}: " + ", ".join(f"{k} {v}" for k, v in c.items()))
    steps = {s["name"]: s for s in (ev.manifest or {}).get("steps", [])}
    if "sanitizer" in steps:
        s = steps["sanitizer"]
        L.append(f"- compute-sanitizer memcheck over the boundary shapes: {s['status']} "
                 f"({s.get('why') or 'no errors'}).")
    return L


def _copy_ceiling(ev: Evidence) -> str:
    h = ev.env.get("harness", {})
    gbps = h.get("copy_gbps")
    if not ev.gpu:
        return f"Copy ceiling: not measured ({ev.label})."
    if not isinstance(gbps, (int, float)) or not math.isfinite(gbps) or gbps <= 0:
        return "Copy ceiling: not measured in this run, so no percent of it is given."
    return (f"Copy ceiling measured in the same run: {h.get('copy_bandwidth') or 'device-to-device copy'} = "
            f"{fmt(gbps, '.1f')} GB/s ({ev.label}).")


def mechanism(ev: Evidence) -> list[str]:
    L = ["## Mechanism", "",
         "The forward reads each row of x and the weight once and writes y once (narrow rows several to a program, "
         f"so every thread moves {ALIGN_BYTES}-byte vectors); the backward reads dy and x, writes dx and an fp32 "
         "partial dw reduced in a fixed order, and reads each row a second time (served from cache or not: "
         "unmeasured). Bytes moved are counted as each input read once and each output written once (the minimum any "
         "implementation must move). " + _copy_ceiling(ev), ""]
    mech = ev.dispatched[ev.dispatched.status == "ok"]
    if len(mech):
        L += ["| case | shape run | bytes moved | dispatched GB/s | % of copy | launches/call |",
              "|---|---|---|---|---|---|"]
        for r in mech.itertuples():
            gbps = fmt(r.gbps, ".1f") if ev.gpu else "not measured"
            pct = fmt(r.pct_copy_bw, ".1f") if ev.gpu else "not measured"
            launches = fmt(r.launches_per_call, ".1f") if ev.gpu else "not counted"
            L.append(f"| {r.case_id} | {r.rows}x{r.cols} | {int(r.bytes_moved):,} | {gbps} | {pct} | {launches} |")
        if not ev.gpu:
            L += ["", f"(No bandwidth or launch count is reported: these timings are {NOT_GPU}.)"]
    L += [""] + host_mechanism(ev) + [""] + compiled_section(ev)
    return L


def host_mechanism(ev: Evidence) -> list[str]:
    """The host cost of the dispatch: per-call host time beside ``F.rms_norm`` and beside the launcher."""
    t = host_table(ev.df)
    if not len(t):
        return ["Host cost of the dispatch: not measured in this run (`python -m fastpath_lib bench --family host`)."]
    L = ["Host cost of the dispatch (host time per call, best of several medians, side by side in one process):", "",
         "| case | shape | dtype | route | F.rms_norm us | dispatched us | launcher us | ratio | to |",
         "|---|---|---|---|---|---|---|---|---|"]
    for cid, r in t.iterrows():
        measured = r["verdict"] != NOT_MEASURED
        L.append(f"| {cid} | {r['shape']} | {r['dtype']} | {r['route'] if measured else '—'} | "
                 f"{fmt(r['baseline_us'], '.2f')} | {fmt(r['dispatched_us'], '.2f')} | "
                 f"{fmt(r['launcher_us'], '.2f')} | "
                 f"{fmt(r['ratio'], '.2f') if measured else NOT_MEASURED} | {r['ratio_to']} |")
    warned = [(cid, w) for cid, w in t["warnings"].items() if isinstance(w, str) and w]
    if warned:
        L += ["", "Warnings the providers raised (one call each; the timed calls ran with warnings silenced):"]
        L += [f"- {cid}: {w}" for cid, w in warned]
    return L


def compiled_section(ev: Evidence) -> list[str]:
    """Facts read from the compiled kernels (vector width, registers, spills) when the run recorded them.

    The facts are a list of dicts (one per specialization, any of the keys ``kernel, arch, dtype, BLOCK_SIZE,
    num_warps, load_width, store_width, registers, spills``) from ``compiled.json`` in the results folder or the
    ``compiled=`` argument of :func:`pr_note`.
    """
    if not ev.compiled:
        return ["Compiled code (vector width, registers, spills): not recorded in this run (`bench` records it "
                "unless `--quick`; `evidence` always)."]
    keys = list(dict.fromkeys(k for f in ev.compiled for k in f if not isinstance(f[k], (list, dict))))
    L = ["Compiled code, per specialization (read from the PTX / `ptxas -v`; compile-time facts for the target, not "
         "GPU measurements; bytes: load/store = narrowest global access, spills = spill stores + loads):", "",
         "| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    for f in ev.compiled:
        L.append("| " + " | ".join(str(f.get(k, "—")) for k in keys) + " |")
    return L


def _shape_cell(r) -> str:
    return r["shape"] if r["shape"] == r["declared"] else f"{r['shape']} (declared {r['declared']})"


def performance(ev: Evidence) -> list[str]:
    h = ev.env.get("harness", {})
    table = summary_table(ev.df, gpu=ev.gpu)
    L = ["## Performance: every predeclared case", "",
         f"Timer: {h.get('timer')}; median of per-repetition samples (raw samples in results.csv), noise band = "
         "larger 20-80 % spread of provider and baseline. Times in microseconds. "
         + ("" if ev.gpu else f"**{NOT_GPU}**: observed outcomes read unmeasured; no speed-up is claimed."),
         "", coverage_line(ev.df, ev.env) + ".", ""]
    if ev.gpu:
        head = ["case", "pass", "shape", "dtype", "layout", "expected", "observed", "route", "baseline us",
                "dispatched us", "speed-up", "band", "compiled us", "as expected"]
    else:
        head = ["case", "pass", "shape", "dtype", "layout", "expected (GPU)", "route", "observed", "route as expected"]
    L += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for cid, r in table.iterrows():
        if ev.gpu:
            cells = [cid, r["pass"], _shape_cell(r), r["dtype"], r["layout"], r["expected"], r["observed"], r["route"],
                     fmt(r["baseline_us"]), fmt(r["dispatched_us"]), fmt(r.get("speedup"), ".2f"),
                     fmt(r.get("noise_band"), ".1%"), fmt(r["compiled_us"]), "yes" if r["matches"] else "**no**"]
        else:
            route_ok = (r["expected"] == FALLBACK) == (r["route"] == "fallback")
            cells = [cid, r["pass"], _shape_cell(r), r["dtype"], r["layout"], r["expected"], r["route"], r["observed"],
                     "yes" if route_ok else "differs (the interpreter's row threshold)"]
        L.append("| " + " | ".join(str(c) for c in cells) + " |")
    L.append("")
    if ev.gpu:
        for kind in OUTCOMES:
            ids = table.index[table.observed == kind].tolist()
            L.append(f"- **{kind}** ({len(ids)}): {', '.join(ids) if ids else 'none'}")
        fb = ev.dispatched[ev.dispatched.observed == FALLBACK]
        slow = fb[fb.fallback_at_baseline == False]  # noqa: E712
        L.append(f"- Fallback cases at baseline speed: {len(fb) - len(slow)} of {len(fb)}"
                 + (f" (slower: {', '.join(slow.case_id)})" if len(slow) else "") + ".")
        miss = table.index[table.matches == False].tolist()  # noqa: E712
        L.append(f"- Expected vs observed differ for: {', '.join(miss) if miss else 'none'}.")
        L.append("")
    L += host_performance(ev)
    if ev.threshold is not None and "table" in ev.threshold:
        t = ev.threshold["table"]
        prop = ev.threshold.get("proposal") or {}
        L += ["", f"Row-threshold sweep: {t.case_id.nunique()} shapes in threshold.csv"
              + (f"; proposal: {prop.get('line') or prop.get('reason')}" if prop else "")
              + ("" if ev.gpu else f" ({NOT_GPU}; no threshold proposed)") + "."]
    return L


def host_performance(ev: Evidence) -> list[str]:
    """The fallback's host cost against its target."""
    t = host_table(ev.df)
    fb = t[t["ratio_to"] == "F.rms_norm"] if len(t) else t
    if not len(fb):
        return ["- Host cost on the fallback route: not measured in this run."]
    over = fb[fb["verdict"] == "OVER"]
    return [f"- Host cost on the fallback route (dispatched / F.rms_norm per call, target <= {TARGET_RATIO}x): "
            + ", ".join(f"{cid} {fmt(r['ratio'], '.2f')}x" for cid, r in fb.iterrows()) + "; "
            + (f"**over the target: {', '.join(over.index)}**" if len(over) else "all within the target") + "."]


def workload(ev: Evidence) -> list[str]:
    L = ["## Workload replay", ""]
    replay = ev.replay
    if not replay:
        return L + ["Not run."]
    L.append(f"Tiny decoder, {replay['layers']} layers, dim {replay['dim']}, {replay['batch']}x{replay['seq']} tokens, "
             f"{replay['dtype']} ({replay.get('label', ev.label)}). Logits agree: {replay.get('logits_close')}.")
    if replay.get("gpu_measurement"):
        L.append(f"End-to-end {fmt(replay['e2e_baseline_us'])} us -> {fmt(replay['e2e_fastpath_us'])} us; RMSNorm "
                 f"share of the baseline forward {fmt(100 * replay['norm_share_baseline'], '.1f')} %.")
    else:
        L.append(f"End-to-end and norm-share timings recorded in replay.json are {NOT_GPU}; no end-to-end gain is "
                 "claimed.")
    return L


def alternatives(ev: Evidence) -> list[str]:
    L = ["## Why not an existing primitive or torch.compile", ""]
    comp = ev.matrix[ev.matrix.provider == "compiled"]
    ok = comp[comp.status == "ok"]
    if len(ok) and ev.gpu:
        L.append(f"torch.compile of F.rms_norm was measured on {len(ok)} cases: observed "
                 + ", ".join(f"{k} {v}" for k, v in ok.vs_baseline.value_counts().items())
                 + f" against F.rms_norm; compile time {fmt(ok.compile_s.min(), '.2f')}-"
                 f"{fmt(ok.compile_s.max(), '.2f')} s per shape. Eager callers (and code that cannot be compiled) get "
                 "nothing from it; compare the compiled column with the dispatched one above.")
    elif len(ok):
        L.append(f"torch.compile ran on {len(ok)} cases here, but the timings are {NOT_GPU}.")
    else:
        reasons = sorted(set(comp.note.dropna().astype(str))) if len(comp) else ["not run"]
        L.append("The torch.compile baseline was not measured: " + "; ".join(reasons) + ".")
    return L


def maintenance(ev: Evidence) -> list[str]:
    L = ["## Maintenance", ""]
    cc = ev.compile_cost
    if cc:
        L.append(f"- Specializations the matrix triggers: {cc.get('specializations')}.")
        if cc.get("compiles") and "per_specialization" in cc:
            L.append(f"- JIT compile: {fmt(cc.get('total_compile_s'), '.2f')} s in total, at most "
                     f"{fmt(cc.get('max_compile_s'), '.2f')} s per specialization; kernel cache "
                     f"{cc.get('cache_bytes', 0) / 2**20:.1f} MiB on disk.")
        else:
            L.append(f"- {cc.get('note') or cc.get('error', 'compile cost not measured')}.")
    L += [f"- Surface: {_dtypes()}, {_arch(MIN_CAPABILITY)} and newer, rows <= {MAX_COLS} columns wide; everything "
          "else falls back.",
          "- Fallback: `force_fallback()` / `FASTPATH_FORCE_FALLBACK=1` switch the fast path off at run time.",
          f"- New architectures: {ev.owner} re-runs the GPU sweep and records the row threshold for the arch "
          "(`python -m fastpath_lib threshold RESULTS_DIR`); until then the conservative default applies."]
    return L


def limitations(ev: Evidence) -> list[str]:
    L = ["## Limitations", ""]
    if not ev.gpu:
        L.append(f"- No GPU measurement is attached: every timing here is {NOT_GPU}; the performance claim is "
                 "unmeasured.")
    failed = [s for s in (ev.manifest or {}).get("steps", []) if s.get("status") in ("failed", "skipped")]
    for s in failed:
        L.append(f"- Evidence step `{s['name']}` {s['status']}: {s.get('why', '')}.")
    L += ["- CUDA-graph capture takes the fallback (not yet verified under capture).",
          "- Multi-dim normalization, fp64 and rows wider than the maximum use the reference."]
    return L


#: The note's sections, in order.
SECTIONS = (summary, eligibility, semantic, mechanism, performance, workload, alternatives, maintenance, limitations)


def pr_note(results_dir: str | Path | None = None, *, df: pd.DataFrame | None = None, env: dict | None = None,
            tests: dict | str | Path | None = None, replay: dict | None = None, compile_cost: dict | None = None,
            threshold: dict | None = None, compiled: list | None = None, manifest: dict | None = None,
            owner: str = "the PR author", allow_incomplete: bool = False) -> str:
    """Draft the PR note.

    Args:
        results_dir: a results folder (reads ``results.csv``, ``environment.json``, and ``replay.json``,
            ``compile_cost.json``, ``threshold.csv``, ``threshold_proposal.json``, ``compiled.json``,
            ``manifest.json`` and ``tests/*.xml`` when present).
        df, env: results and environment instead of a folder (e.g. synthetic data in a test or a lesson; set
            ``env["synthetic"] = True`` and the note says so).
        tests: semantic evidence: a JUnit XML path or a counts dict (``{"suite": {"tests": n, "failures": 0}}`` or
            a flat counts dict); ``None`` reads the folder's ``tests/*.xml`` or says "not attached".
        replay, compile_cost, threshold, compiled, manifest: analyses (default: read from the folder).
        owner: who maintains the kernel when new architectures arrive.
        allow_incomplete: read a folder still being written (the evidence command's last step).

    Returns:
        Markdown text.

    Note:
        When ``gpu_measurement`` is false the note carries no speed-up: it says "not a GPU measurement" and marks the
        performance claim unmeasured, listing routes and expectations only.
    """
    folder = Path(results_dir) if results_dir is not None else None
    if df is None:
        df, env = load_results(folder, allow_incomplete=allow_incomplete)
    elif "observed" not in df.columns:
        df = classify(df)
    env = dict(env or df.attrs.get("environment") or {})
    gpu = is_gpu_measurement(df, env)
    synthetic = bool(env.get("synthetic"))
    if threshold is None and folder is not None and (folder / "threshold.csv").exists():
        threshold = {"table": pd.read_csv(folder / "threshold.csv"),
                     "proposal": _json(folder, "threshold_proposal.json")}
    if tests is None and folder is not None and (folder / "tests").is_dir():
        tests = {p.stem: junit_counts(p) for p in sorted((folder / "tests").glob("*.xml"))} or None
    ev = Evidence(df=df, env=env, gpu=gpu, synthetic=synthetic,
                  label=measurement_label(env, df),
                  tests=tests, replay=replay if replay is not None else _json(folder, "replay.json"),
                  compile_cost=compile_cost if compile_cost is not None else _json(folder, "compile_cost.json"),
                  threshold=threshold, compiled=compiled if compiled is not None else _json(folder, "compiled.json"),
                  manifest=manifest if manifest is not None else _json(folder, "manifest.json"), owner=owner)
    L = ["# RMSNorm: Triton fast path behind an eligibility predicate", ""]
    if synthetic:
        L += ["> **SYNTHETIC DATA** -- this note was drafted from a constructed table to show the format; no number in "
              "it was measured.", ""]
    for section in SECTIONS:
        L += section(ev) + [""]
    return "\n".join(L)
