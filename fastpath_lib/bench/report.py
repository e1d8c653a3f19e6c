"""Draft the PR note of any registered operator from a results folder (or a DataFrame): concise Markdown a reviewer
can check claim by claim, in the kit's own form or in the target project's template (:data:`TEMPLATES`).

One function per section (:data:`SECTIONS`), each taking the same :class:`Evidence` and returning its lines. Every
op-specific sentence comes from the operator's :class:`~fastpath_lib.opspec.OpSpec` (its title, baseline, predicate,
and the ``pr_text`` sentences keyed by :data:`PR_TEXT_KEYS`; a key the spec leaves out gets a sentence built from
its other fields), so the note of one op says nothing about another. The note never states a speed-up from CPU or
interpreter timings: such runs are labelled "not a GPU measurement", their outcomes read *unmeasured* and the
performance claim is marked *unmeasured*, in every template. Times in microseconds.
"""

from __future__ import annotations

import dataclasses
import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd

from fastpath_lib import opspec
from fastpath_lib.bench import templates
from fastpath_lib.bench.analysis import classify, coverage_line, outcome_counts, summary_table
from fastpath_lib.bench.host import NOT_MEASURED, TARGET_RATIO, host_table
from fastpath_lib.bench.results import load_results
from fastpath_lib.bench.schema import (FALLBACK, NOT_GPU, OUTCOMES, UNMEASURED, WIN, is_gpu_measurement,
                                       matrix_rows, measurement_label)
from fastpath_lib.opspec import OpSpec

__all__ = ["pr_note", "junit_counts", "Evidence", "SECTIONS", "PR_TEXT_KEYS", "TEMPLATES", "NOTE_FILES", "fmt"]

#: The note's forms: the kit's own sections, vLLM's PR template, PyTorch's.
TEMPLATES = ("kit", "vllm", "pytorch")
#: template -> the file ``bench --op`` writes its note to, beside the results.
NOTE_FILES = {"kit": "pr_note.md", "vllm": "pr_note_vllm.md", "pytorch": "pr_note_pytorch.md"}


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


def _default_eligibility(spec: OpSpec) -> list[str]:
    L = ["Fast path when every condition holds; otherwise the fallback runs, so a limit never becomes a new error.", ""]
    if spec.predicate is None:
        return L + ["(The op's spec declares no predicate: its conditions are not listed here.)"]
    return L + [spec.predicate.markdown_table(spec.limits(None) if spec.limits else None)]


#: ``OpSpec.pr_text`` keys -> the sentence used when a spec leaves the key out (built from its other fields).
_DEFAULT_TEXT = {
    "noun": lambda spec: spec.name,
    "summary": lambda spec: (f"`{templates.qualified(spec.function)}` keeps the contract of its reference "
                             f"`{templates.qualified(spec.reference)}` and takes its fast route where an eligibility "
                             "predicate holds; every other call takes the fallback."),
    "eligibility": _default_eligibility,
    "mechanism": lambda spec: ("Bytes moved per call come from the op's bytes model (`OpSpec.bytes_moved`)."
                               if spec.bytes_moved else "The op declares no bytes model: no bandwidth is derived."),
    "host": lambda spec: "Host cost of the dispatch: not measured in this run.",
    "compiled": lambda spec: "Compiled code (vector width, registers, spills): not recorded in this run.",
    "route_differs": lambda spec: "differs",
    "maintenance": lambda spec: [
        "- Surface: the predicate's conditions above; everything else falls back.",
        f"- New architectures: {{owner}} re-runs `python -m fastpath_lib bench --op {spec.name}` on the new GPU; "
        "until then the predeclared expectations are unverified there."],
    "limitations": lambda spec: ["- The matrix times the forward pass on contiguous inputs (what `bench --op` runs)."],
}
#: The keys an :class:`~fastpath_lib.opspec.OpSpec`'s ``pr_text`` may set.
PR_TEXT_KEYS = tuple(_DEFAULT_TEXT)


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
    spec: OpSpec | None = None

    def __post_init__(self):
        self.spec = self.spec or opspec.get("rms_norm")
        unknown = sorted(set(self.spec.pr_text) - set(PR_TEXT_KEYS))
        if unknown:
            raise ValueError(f"{self.spec.name}: unknown pr_text keys {unknown}; known: {', '.join(PR_TEXT_KEYS)}")

    def text(self, key: str) -> list[str]:
        """The spec's lines for ``key`` (its ``pr_text``, else the default), ``{owner}`` filled in."""
        v = self.spec.pr_text.get(key)
        v = _DEFAULT_TEXT[key](self.spec) if v is None else v() if callable(v) else v
        return [line.replace("{owner}", self.owner) for line in ([v] if isinstance(v, str) else v)]

    @property
    def baseline(self) -> str:
        """The name of the first baseline (outcomes are read against it)."""
        return self.spec.baseline[0]

    @property
    def noun(self) -> str:
        """What the op is called in prose (``pr_text["noun"]``, default its registry name)."""
        return self.text("noun")[0]

    @property
    def title(self) -> str:
        """The note's title: the spec's, else one built from its name."""
        return self.spec.title or f"{self.spec.name}: a fast path behind an eligibility predicate"

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
    L = ["## Summary", ""] + ev.text("summary") + ["",
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
            L.append(f"- Speed-ups over {ev.baseline} on wins range {fmt(wins.speedup.min(), '.2f')}x to "
                     f"{fmt(wins.speedup.max(), '.2f')}x (median time ratio; noise band per case below).")
    else:
        L.append(f"- **Performance claim: unmeasured.** These timings are {NOT_GPU} (CPU / Triton interpreter); "
                 "they show the harness and the routes, not GPU speed. Run `python -m fastpath_lib evidence` on a GPU.")
    return L


def eligibility(ev: Evidence) -> list[str]:
    return ["## Eligibility region and fallback", ""] + ev.text("eligibility")


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
    L = ["## Mechanism", "", " ".join(ev.text("mechanism") + [_copy_ceiling(ev)]), ""]
    mech = ev.dispatched[ev.dispatched.status == "ok"]
    if len(mech):
        L += ["| case | shape run | bytes moved | dispatched GB/s | % of copy | launches/call |",
              "|---|---|---|---|---|---|"]
        for r in mech.itertuples():
            gbps = fmt(r.gbps, ".1f") if ev.gpu else "not measured"
            pct = fmt(r.pct_copy_bw, ".1f") if ev.gpu else "not measured"
            launches = fmt(r.launches_per_call, ".1f") if ev.gpu else "not counted"
            nbytes = fmt(r.bytes_moved, ",.0f")
            L.append(f"| {r.case_id} | {r.rows}x{r.cols} | {nbytes} | {gbps} | {pct} | {launches} |")
        if not ev.gpu:
            L += ["", f"(No bandwidth or launch count is reported: these timings are {NOT_GPU}.)"]
    L += [""] + host_mechanism(ev) + [""] + compiled_section(ev)
    return L


def host_mechanism(ev: Evidence) -> list[str]:
    """The host cost of the dispatch: per-call host time beside the baseline and beside the launcher."""
    t = host_table(ev.df)
    if not len(t):
        return ev.text("host")
    L = ["Host cost of the dispatch (host time per call, fastest of many interleaved blocks of calls, in one "
         "process):", "",
         f"| case | shape | dtype | route | {ev.baseline} us | dispatched us | launcher us | ratio | to |",
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
        return ev.text("compiled")
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
                     "yes" if route_ok else ev.text("route_differs")[0]]
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
    fb = t[t["ratio_to"] == ev.baseline] if len(t) else t
    if not len(fb):
        return ["- Host cost on the fallback route: not measured in this run."]
    over = fb[fb["verdict"] == "OVER"]
    return [f"- Host cost on the fallback route (dispatched / {ev.baseline} per call, target <= {TARGET_RATIO}x): "
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
        L.append(f"End-to-end {fmt(replay['e2e_baseline_us'])} us -> {fmt(replay['e2e_fastpath_us'])} us; {ev.noun} "
                 f"share of the baseline forward {fmt(100 * replay['norm_share_baseline'], '.1f')} %.")
    else:
        L.append(f"End-to-end and norm-share timings recorded in replay.json are {NOT_GPU}; no end-to-end gain is "
                 "claimed.")
    return L + _trace_lines(replay.get("trace"), ev)


def _trace_lines(trace: dict | None, ev: Evidence) -> list[str]:
    """The serving trace in ``replay.json`` (:func:`~fastpath_lib.bench.trace.replay_trace`'s rows and totals): its
    calls, and the total only where every row is a GPU measurement (a partial total would understate the whole)."""
    if not trace or not trace.get("rows"):
        return []
    tot = trace.get("totals", {})
    calls = "; ".join(f"{r['phase']} {r['shape']} x {r['calls']:,} ({r['route']})" for r in trace["rows"])
    L = ["", f"Serving trace ({tot.get('calls', 0):,} calls): {calls}."]
    if tot.get("gpu_measurement") and tot.get("complete"):
        L.append(f"Total over the trace: {fmt(tot['baseline_total_us'], ',.0f')} us with {ev.baseline} -> "
                 f"{fmt(tot['dispatched_total_us'], ',.0f')} us dispatched ({tot.get('label', '')}).")
    else:
        L.append(f"Trace totals: {tot.get('measured_calls', 0):,} of {tot.get('calls', 0):,} calls measured, "
                 f"{tot.get('label') or NOT_GPU}; no total is claimed.")
    return L


def alternatives(ev: Evidence) -> list[str]:
    L = ["## Why not an existing primitive or torch.compile", ""]
    comp = ev.matrix[ev.matrix.provider == "compiled"]
    ok = comp[comp.status == "ok"]
    if len(ok) and ev.gpu:
        L.append(f"torch.compile of {ev.baseline} was measured on {len(ok)} cases: observed "
                 + ", ".join(f"{k} {v}" for k, v in ok.vs_baseline.value_counts().items())
                 + f" against {ev.baseline}; compile time {fmt(ok.compile_s.min(), '.2f')}-"
                 f"{fmt(ok.compile_s.max(), '.2f')} s per shape. Eager callers (and code that cannot be compiled) get "
                 "nothing from it; compare the compiled column with the dispatched one above.")
    elif len(ok):
        L.append(f"torch.compile ran on {len(ok)} cases here, but the timings are {NOT_GPU}.")
    else:
        reasons = sorted(set(comp.note.dropna().astype(str))) if len(comp) else ["not run"]
        L.append("The torch.compile baseline was not measured: " + "; ".join(reasons) + ".")
    others = other_baselines(ev)
    return L + ([""] + others if others else [])


def other_baselines(ev: Evidence) -> list[str]:
    """The op's further baselines (its spec's after the first) that the run timed: on a GPU, the dispatched op's
    speed-up over each (its median time over the dispatched one, per case); otherwise only that it ran."""
    m = ev.matrix
    disp = m[(m.provider == "dispatched") & (m.status == "ok")].set_index("case_id").median_us
    L = []
    for name in list(ev.spec.baselines)[1:]:
        rows = m[(m.provider == name) & (m.status == "ok")]
        if not len(rows):
            continue
        ratio = (rows.set_index("case_id").median_us / disp).dropna()
        if ev.gpu and len(ratio):
            L.append(f"- Against `{name}` ({len(ratio)} cases): dispatched speed-up {fmt(ratio.min(), '.2f')}x to "
                     f"{fmt(ratio.max(), '.2f')}x (its median time over the dispatched one; per case in results.csv).")
        else:
            L.append(f"- `{name}` was timed on {len(rows)} cases; the timings are {NOT_GPU}: no comparison is drawn.")
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
    return L + ev.text("maintenance")


def limitations(ev: Evidence) -> list[str]:
    L = ["## Limitations", ""]
    if not ev.gpu:
        L.append(f"- No GPU measurement is attached: every timing here is {NOT_GPU}; the performance claim is "
                 "unmeasured.")
    failed = [s for s in (ev.manifest or {}).get("steps", []) if s.get("status") in ("failed", "skipped")]
    for s in failed:
        L.append(f"- Evidence step `{s['name']}` {s['status']}: {s.get('why', '')}.")
    return L + ev.text("limitations")


#: The note's sections, in order.
SECTIONS = (summary, eligibility, semantic, mechanism, performance, workload, alternatives, maintenance, limitations)


def _spec(spec: OpSpec | str | None, env: dict) -> OpSpec:
    """The op the note is about: ``spec`` (a spec or a registered name), else the op the results name, else RMSNorm."""
    if isinstance(spec, OpSpec):
        return spec
    name = spec or env.get("op") or "rms_norm"
    try:
        return opspec.get(name)
    except KeyError as exc:
        raise ValueError(f"the note's op: {exc.args[0]} (pass spec= an OpSpec)") from None


def pr_note(results_dir: str | Path | None = None, *, df: pd.DataFrame | None = None, env: dict | None = None,
            tests: dict | str | Path | None = None, replay: dict | None = None, compile_cost: dict | None = None,
            threshold: dict | None = None, compiled: list | None = None, manifest: dict | None = None,
            owner: str = "the PR author", allow_incomplete: bool = False, spec: OpSpec | str | None = None,
            template: str = "kit") -> str:
    """Draft the PR note of one operator, in the kit's form or in the target project's template.

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
        spec: the operator (an :class:`~fastpath_lib.opspec.OpSpec` or a registered name; default: the op the
            results name in ``environment.json``'s ``op``, else ``rms_norm``): the title, the baseline and every
            op-specific sentence come from it.
        template: ``"kit"`` (the kit's sections, :data:`SECTIONS`), ``"vllm"`` (vLLM's PR template: Purpose, Test
            Plan, Test Result, (Optional) Documentation Update, its checklist) or ``"pytorch"`` (PyTorch's: the issue
            line, Summary, Test Plan, its checklist); see :data:`TEMPLATES`.

    Returns:
        Markdown text.

    Raises:
        ValueError: an unknown template (the message lists the choices), an unregistered op name, or a spec whose
            ``pr_text`` has unknown keys.

    Note:
        When ``gpu_measurement`` is false the note carries no speed-up, in every template: it says "not a GPU
        measurement" and marks the performance claim unmeasured, listing routes and expectations only.
    """
    if template not in TEMPLATES:
        raise ValueError(f"unknown PR note template {template!r}; choose one of: {', '.join(TEMPLATES)}")
    folder = Path(results_dir) if results_dir is not None else None
    if df is None:
        df, env = load_results(folder, allow_incomplete=allow_incomplete)
    elif "observed" not in df.columns:
        df = classify(df)
    env = dict(env or df.attrs.get("environment") or {})
    gpu = is_gpu_measurement(df, env)
    if threshold is None and folder is not None and (folder / "threshold.csv").exists():
        threshold = {"table": pd.read_csv(folder / "threshold.csv"),
                     "proposal": _json(folder, "threshold_proposal.json")}
    if tests is None and folder is not None and (folder / "tests").is_dir():
        tests = {p.stem: junit_counts(p) for p in sorted((folder / "tests").glob("*.xml"))} or None
    ev = Evidence(df=df, env=env, gpu=gpu, synthetic=bool(env.get("synthetic")),
                  label=measurement_label(env, df),
                  tests=tests, replay=replay if replay is not None else _json(folder, "replay.json"),
                  compile_cost=compile_cost if compile_cost is not None else _json(folder, "compile_cost.json"),
                  threshold=threshold, compiled=compiled if compiled is not None else _json(folder, "compiled.json"),
                  manifest=manifest if manifest is not None else _json(folder, "manifest.json"), owner=owner,
                  spec=_spec(spec, env))
    if template != "kit":
        return templates.render(template, ev, {f.__name__: f(ev) for f in SECTIONS})
    L = [f"# {ev.title}", ""] + templates.synthetic_banner(ev)
    for section in SECTIONS:
        L += section(ev) + [""]
    return "\n".join(L)
