"""The PR note's sections, one function each (:data:`SECTIONS`, in order), each taking the same
:class:`~fastpath_lib.bench.note_evidence.Evidence` and returning its Markdown lines: a few visible lines, and the
full tables folded in ``<details>`` (:func:`~fastpath_lib.bench.note_brief.fold`). The tables are drawn in
:mod:`fastpath_lib.bench.note_tables`, the workload lines in :mod:`fastpath_lib.bench.note_workload`."""

from __future__ import annotations

import math
from pathlib import Path

from fastpath_lib.bench.analysis import coverage_line
from fastpath_lib.bench.host import TARGET_RATIO, host_table, over_and_unresolved, ratio_text
from fastpath_lib.bench.mechanism import traffic_section, vector_arguments
from fastpath_lib.bench.note_brief import (
    baseline_check,
    claim,
    counts_line,
    environment_table,
    first,
    fold,
    measured_on,
    region,
    rerun,
    scope,
    short_matrix,
    wrong,
)
from fastpath_lib.bench.note_evidence import Evidence, compiled_not_run, fmt, junit_counts, not_run
from fastpath_lib.bench.note_tables import (
    case_table,
    compiled_section,
    host_mechanism,
    host_unmeasured,
    mechanism_table,
)
from fastpath_lib.bench.note_workload import workload
from fastpath_lib.bench.schema import FALLBACK, NOT_GPU, OUTCOMES
from fastpath_lib.opspec import COMPILED

__all__ = ["SECTIONS", "summary", "eligibility", "semantic", "mechanism", "performance", "workload", "alternatives",
           "maintenance", "limitations", "run_limitations", "copy_ceiling", "host_performance", "host_verdict",
           "other_baselines", "refused_baselines"]


def summary(ev: Evidence) -> list[str]:
    return (["## Summary", ""] + wrong(ev) + ev.text("summary") + ["", measured_on(ev)]
            + fold("Environment (environment.json)", environment_table(ev))
            + [counts_line(ev)] + short_matrix(ev) + claim(ev) + scope(ev) + [rerun(ev)])


def eligibility(ev: Evidence) -> list[str]:
    n = len(ev.spec.predicate.conditions) if ev.spec.predicate is not None else 0
    unprobed = ev.spec.unprobed_conditions()
    gap = [f"- **Warning: conditions with no boundary point: {', '.join(unprobed)}**: no generated boundary test "
           "probes them.", ""] if unprobed else []
    return (["## Eligibility region and fallback", ""] + region(ev) + [""] + gap
            + fold(f"The {n} conditions: requirement, reason, boundary points", ev.text("eligibility")))


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
        steps = {s["name"]: s for s in (ev.manifest or {}).get("steps", [])}
        for suite, c in tests.items():
            line = f"- {suite}: " + ", ".join(f"{k} {v}" for k, v in c.items())
            step = steps.get(f"{suite}_tests") or {}
            if step.get("status") == "partial":  # stopped at its budget: not a clean run of the suite
                d = step.get("details") or {}
                line += (f" (PARTIAL: stopped at the time budget after {d.get('run', '?')} of {d.get('collected', '?')}"
                         " collected tests; the rest did not run)")
            elif step.get("status") == "failed":
                line += f" (FAILED: {step.get('why', '')})"
            L.append(line)
    steps = {s["name"]: s for s in (ev.manifest or {}).get("steps", [])}
    if "sanitizer" in steps:
        s = steps["sanitizer"]
        L.append(f"- compute-sanitizer memcheck over the boundary shapes: {s['status']} "
                 f"({s.get('why') or 'no errors'}).")
    return L


def copy_ceiling(ev: Evidence) -> str:
    h = ev.env.get("harness", {})
    gbps = h.get("copy_gbps")
    if not ev.gpu:
        return f"Copy ceiling: not measured ({ev.label})."
    if not isinstance(gbps, (int, float)) or not math.isfinite(gbps) or gbps <= 0:
        return "Copy ceiling: not measured in this run, so no percent of it is given."
    return (f"Copy ceiling measured in the same run: {h.get('copy_bandwidth') or 'device-to-device copy'} = "
            f"{fmt(gbps, '.1f')} GB/s ({ev.label}).")


def mechanism(ev: Evidence) -> list[str]:
    """Why resource use changes (the op's own sentences) and the tables that back it, folded."""
    counted = traffic_section(ev.df, baseline=ev.baseline, vectors=vector_arguments(ev.spec),
                              rereads=ev.text("traffic"), backward_rereads=ev.text("traffic_backward"))
    full = ([" ".join(ev.text("mechanism")), "", copy_ceiling(ev), ""] + mechanism_table(ev) + [""]
            + (counted + [""] if counted else []) + host_mechanism(ev) + [""] + compiled_section(ev))
    return ["## Mechanism", ""] + fold("Why resource use changes: bytes moved, copy ceiling, host cost, compiled code",
                                       full)


def performance(ev: Evidence) -> list[str]:
    h = ev.env.get("harness", {})
    rows, table = case_table(ev)
    full = [f"Timer: {h.get('timer')}; median of per-repetition samples (raw samples in results.csv), noise band = "
            "larger 20-80 % spread of provider and baseline. Times in microseconds. "
            + ("" if ev.gpu else f"**{NOT_GPU}**: observed outcomes read unmeasured; no speed-up is claimed."),
            "", coverage_line(ev.df, ev.env) + ".", ""] + rows + [""]
    L = ["## Performance: every predeclared case", ""]
    if ev.gpu:
        full += [f"- **{kind}** ({len(ids)}): {', '.join(ids) if ids else 'none'}"
                 for kind in OUTCOMES for ids in [table.index[table.observed == kind].tolist()]] + [""]
        fb = ev.dispatched[ev.dispatched.observed == FALLBACK]
        slow = fb[fb.fallback_at_baseline == False]  # noqa: E712
        miss = table.index[table.matches == False].tolist()  # noqa: E712
        m = ev.matrix
        broken = (sorted(set(m.case_id[m["broken_measurement"].fillna(False).astype(bool)]))
                  if "broken_measurement" in m.columns else [])
        if broken:
            L.append(f"- **Broken measurements** (a time implying more than the measured copy bandwidth; read "
                     f"unmeasured, never a win): {first(broken)}.")
        L += [f"- Expected vs observed differ for: {first(miss)}.",
              f"- Fallback cases at baseline speed: {len(fb) - len(slow)} of {len(fb)}"
              + (f" (slower: {', '.join(slow.case_id)})" if len(slow) else "") + "."]
    L += host_verdict(ev)
    full += host_performance(ev)
    if ev.threshold is not None and "table" in ev.threshold:
        t = ev.threshold["table"]
        prop = ev.threshold.get("proposal") or {}
        full += ["", f"Row-threshold sweep: {t.case_id.nunique()} shapes in threshold.csv"
                 + (f"; proposal: {prop.get('line') or prop.get('reason')}" if prop else "")
                 + ("" if ev.gpu else f" ({NOT_GPU}; no threshold proposed)") + "."]
    return L + fold(f"Every case ({len(table)}) by class, the method, host cost per case", full)


def _host_fallback(ev: Evidence):
    t = host_table(ev.df, ev.spec)
    return t[(t["ratio_to"] == ev.baseline) & t["ratio"].notna()] if len(t) else t


def host_verdict(ev: Evidence) -> list[str]:
    """The fallback's host cost in one line, by what the run resolved (:func:`~fastpath_lib.bench.host.
    over_and_unresolved`): within its target, the cases over it, and those the run could not tell."""
    fb = _host_fallback(ev)
    if not len(fb):
        return [host_unmeasured(ev)]
    over, unresolved = over_and_unresolved(fb)
    target = f"dispatched <= {TARGET_RATIO}x {ev.baseline} per call"
    if over:
        head = (f"- Host cost on the fallback route: **over the target ({target})** on "
                + ", ".join(f"{cid} ({ratio_text(fb.loc[cid, 'ratio'])}x)" for cid in over))
    elif len(unresolved) < len(fb):
        head = f"- Host cost on the fallback route: within the target ({target}) on {len(fb) - len(unresolved)} of " \
               f"{len(fb)} cases"
    else:
        head = f"- Host cost on the fallback route ({target}): not resolved by this run on any case"
    return [head + (f"; not resolved by this run: {', '.join(unresolved)}" if unresolved else "") + "."]


def host_performance(ev: Evidence) -> list[str]:
    """The fallback's host cost against its target, per case, with what the run resolved."""
    fb = _host_fallback(ev)
    if not len(fb):
        return [host_unmeasured(ev)]
    over, unresolved = over_and_unresolved(fb)
    said = ([f"**over the target: {', '.join(over)}**"] if over else []) + \
        ([f"not resolved by this run: {', '.join(unresolved)}"] if unresolved else [])
    return [f"- Host cost on the fallback route (dispatched / {ev.baseline} per call, target <= {TARGET_RATIO}x): "
            + ", ".join(f"{cid} {ratio_text(r['ratio'])}x" for cid, r in fb.iterrows()) + "; "
            + ("; ".join(said) if said else "all within the target") + "."]


def alternatives(ev: Evidence) -> list[str]:
    L = ["## Why not an existing primitive or torch.compile", ""]
    comp = ev.matrix[ev.matrix.provider == "compiled"]
    ok = comp[comp.status == "ok"]
    if len(ok) and ev.gpu:
        L.append(f"torch.compile of {ev.baseline} was measured on {len(ok)} cases: observed "
                 + ", ".join(f"{k} {v}" for k, v in ok.vs_baseline.value_counts().items())
                 + f" against {ev.baseline}; compile time {fmt(ok.compile_s.min(), '.2f')}-"
                 f"{fmt(ok.compile_s.max(), '.2f')} s per shape. Eager callers (and code that cannot be compiled) get "
                 "nothing from it.")
    elif len(ok):
        L.append(f"torch.compile ran on {len(ok)} cases here; off a GPU no comparison is drawn.")
    else:
        L.append(f"The torch.compile baseline was not measured ({compiled_not_run(ev.spec, ev.matrix)}).")
    others = other_baselines(ev) + refused_baselines(ev)
    return L + ([""] + others if others else []) + [""] + baseline_check(ev.spec)


def refused_baselines(ev: Evidence) -> list[str]:
    """One line per baseline (but ``torch.compile``'s, whose line above gives its rows' notes) with an error row: the
    cases where it was not timed because it differs from the reference or raised
    (:func:`fastpath_lib.bench.opbench.baseline_differs`)."""
    m = ev.matrix
    names = {("baseline" if i == 0 else n): n for i, n in enumerate(ev.spec.baselines) if n != COMPILED}
    L = []
    for provider, name in names.items():
        bad = m[(m.provider == provider) & (m.status == "error")]
        if len(bad):
            L.append(f"- `{name}` was not timed on {', '.join(map(str, bad.case_id))}: it differs from the reference "
                     "there, or raised (results.csv's notes say how); those cases have no comparison with it.")
    return L


def other_baselines(ev: Evidence) -> list[str]:
    """The op's further baselines (its spec's after the first) that the run timed: on a GPU, the dispatched op's
    speed-up over each (its median time over the dispatched one, per case); otherwise only that it ran."""
    m = ev.matrix
    disp = m[(m.provider == "dispatched") & (m.status == "ok")].set_index("case_id").median_us
    ranges, L = [], []
    for name in list(ev.spec.baselines)[1:]:
        rows = m[(m.provider == name) & (m.status == "ok")]
        if not len(rows):
            continue
        ratio = (rows.set_index("case_id").median_us / disp).dropna()
        if ev.gpu and len(ratio):
            ranges.append(f"`{name}` {fmt(ratio.min(), '.2f')}x-{fmt(ratio.max(), '.2f')}x ({len(ratio)} cases)")
        else:
            L.append(f"- `{name}` was timed on {len(rows)} cases; off a GPU no comparison is drawn.")
    if ranges:  # one line for every further baseline: the note stays concise as baselines are added
        L.insert(0, "- Dispatched speed-up against " + "; ".join(ranges) + " (the baseline's median over the "
                 "dispatched one; per case in results.csv).")
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
    else:
        L.append(f"- Compile cost per kernel specialization: not run: {not_run(ev.spec, 'compile_cost.json')}.")
    return L + ev.text("maintenance")


def run_limitations(ev: Evidence) -> list[str]:
    """The Limitations heading and what this run left out (no GPU, failed or skipped steps), without the op's own
    lines."""
    L = ["## Limitations", ""]
    if not ev.gpu:
        L.append("- No GPU measurement is attached: the performance claim is unmeasured.")
    steps = (ev.manifest or {}).get("steps", [])
    L += [f"- Evidence step `{s['name']}` failed: {s.get('why', '')}." for s in steps if s.get("status") == "failed"]
    skipped = [f"- Evidence step `{s['name']}` {'stopped early (partial)' if s['status'] == 'partial' else 'skipped'}: "
               f"{s.get('why', '')}." for s in steps if s.get("status") in ("skipped", "partial")]
    if skipped:  # the fold's title says the run is partial; manifest.json has each step's why
        L += fold(f"PARTIAL: {len(skipped)} step{'s' if len(skipped) != 1 else ''} incomplete, and why", skipped)
    return L


def limitations(ev: Evidence) -> list[str]:
    """What this run left out, then the kit op's own limitations (the spec's ``pr_text["limitations"]``)."""
    return run_limitations(ev) + ev.text("limitations")


#: The note's sections, in order.
SECTIONS = (summary, eligibility, semantic, mechanism, performance, workload, alternatives, maintenance, limitations)
