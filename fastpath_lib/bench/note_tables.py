"""The PR note's tables, one function each: the mechanism table (bytes moved, bandwidth, launches per case), the host
cost of the dispatch, the compiled facts, and every predeclared case. Each takes the note's
:class:`~fastpath_lib.bench.note_evidence.Evidence` and returns Markdown lines; off a GPU a cell that needs a GPU
says so instead of a number (a 0.0 GB/s cell would read as a terrible kernel, not as a missing measurement)."""

from __future__ import annotations

import math

from fastpath_lib.bench.analysis import summary_table
from fastpath_lib.bench.host import NOT_MEASURED, host_table
from fastpath_lib.bench.note_evidence import Evidence, fmt
from fastpath_lib.bench.schema import FALLBACK, NOT_GPU, shape_text
from fastpath_lib.bench.vllmhost import LABEL, vllm_table
from fastpath_lib.vllm_plugin import PROVIDER

__all__ = ["mechanism_table", "host_mechanism", "vllm_dispatch_table", "compiled_section", "case_table", "shape_cell"]


def mechanism_table(ev: Evidence) -> list[str]:
    """Per dispatched case that ran: the shape run, the bytes the op's model says a call moves, and on a GPU the
    bandwidth, its percent of the copy ceiling and the launches per call (``[]`` when no case ran)."""
    mech = ev.dispatched[ev.dispatched.status == "ok"]
    if not len(mech):
        return []
    L = ["| case | shape run | bytes moved | dispatched GB/s | % of copy | launches/call |",
         "|---|---|---|---|---|---|"]
    for r in mech.itertuples():
        gbps = fmt(r.gbps, ".1f") if ev.gpu else "not measured"
        pct = fmt(r.pct_copy_bw, ".1f") if ev.gpu else "not measured"
        n = getattr(r, "counted_bytes", None)  # off a GPU, launches are known only where the interpreter counted them
        counted = isinstance(n, (int, float)) and math.isfinite(n)
        launches = fmt(r.launches_per_call, ".1f") if ev.gpu or counted else "not counted"
        nbytes = fmt(r.bytes_moved, ",.0f")
        L.append(f"| {r.case_id} | {shape_text(r.rows, r.cols)} | {nbytes} | {gbps} | {pct} | {launches} |")
    if not ev.gpu:
        L += ["", f"(No bandwidth is reported: these timings are {NOT_GPU}. Launches off a GPU are the Triton launches "
              "the interpreter ran in one call.)"]
    return L


def host_unmeasured(ev: Evidence) -> str:
    """Why the run has no fallback host cost: its host rows' own notes (a call that took the fast route here), or no
    host case falls back on the run's device (:func:`~fastpath_lib.bench.ophost.no_host_case_reason`), or the run
    left the host family out."""
    from fastpath_lib.bench.ophost import no_host_case_reason
    from fastpath_lib.bench.schema import host_rows
    from fastpath_lib.bench.vllmhost import PROVIDERS

    h = host_rows(ev.df)
    h = h[~h["provider"].isin(PROVIDERS)] if len(h) else h
    skipped = h.loc[h["status"].astype(str) != "ok", "note"].dropna() if len(h) else []
    notes = sorted({str(n).removeprefix("not measured: ") for n in skipped})
    if notes:
        why = "; ".join(notes)
    elif ev.spec is not None and (none := no_host_case_reason(ev.spec, str(ev.env.get("device") or "cpu"))):
        why = none
    else:
        why = "the run timed no host case (`--family matrix`)"
    return f"- Host cost on the fallback route: not measured in this run ({why})."


def host_mechanism(ev: Evidence) -> list[str]:
    """The host cost of the dispatch: per-call host time beside the baseline and beside the launcher, then vLLM's
    dispatch with the kit's provider against vLLM's native path (:func:`vllm_dispatch_table`)."""
    t = host_table(ev.df, ev.spec)
    vllm = vllm_dispatch_table(ev)
    if not len(t):
        own = ev.spec.pr_text.get("host") if ev.spec is not None else None
        return vllm or (ev.text("host") if own else [host_unmeasured(ev).removeprefix("- ")])
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
    return L + ([""] + vllm if vllm else [])


def vllm_dispatch_table(ev: Evidence) -> list[str]:
    """vLLM's ``dispatch`` per call with the kit's provider first against vLLM's native path, and the provider's
    ``supports_args`` alone, on a call it rejects and one it accepts (``[]`` when the run has no such rows; skipped
    rows say why)."""
    v = vllm_table(ev.df)
    if not len(v):
        return []
    if (v["status"] != "ok").all():  # nothing timed: no caption of how, no shapes of inputs never built
        why = sorted({str(w).removeprefix("skipped: ") for w in v["status"]})
        return [f"vLLM's dispatch per call: not timed ({'; '.join(why)})."]
    L = [f"vLLM's dispatch per call ({LABEL}): the provider's `supports_args` alone, `dispatch` with the priority "
         f"`[\"{PROVIDER}\", \"native\"]` and with `[\"native\"]`:", "",
         "| case | shape | dtype | supports_args | picked | supports_args us | dispatch us | native dispatch us | "
         "added us |", "|---|---|---|---|---|---|---|---|---|"]
    for cid, r in v.iterrows():
        if r["status"] != "ok":
            L.append(f"| {cid} | {r['shape']} | {r['dtype']} | {r['status']} | — | — | — | — | — |")
            continue
        L.append(f"| {cid} | {r['shape']} | {r['dtype']} | {r['verdict']} | {r['picked']} | "
                 f"{fmt(r['supports_args_us'], '.2f')} | {fmt(r['dispatch_us'], '.2f')} | "
                 f"{fmt(r['native_us'], '.2f')} | {fmt(r['added_us'], '+.2f')} |")
    return L


def compiled_section(ev: Evidence) -> list[str]:
    """Facts read from the compiled kernels (vector width, registers, spills) when the run recorded them.

    The facts are a list of dicts (one per specialization, any of the keys ``kernel, arch, dtype, BLOCK_SIZE,
    num_warps, load_width, store_width, registers, spills``) from ``compiled.json`` in the results folder or the
    ``compiled=`` argument of :func:`~fastpath_lib.bench.report.pr_note`.
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


def shape_cell(r) -> str:
    """The shape run, and the declared one beside it where a quick run changed it."""
    return r["shape"] if r["shape"] == r["declared"] else f"{r['shape']} (declared {r['declared']})"


def case_table(ev: Evidence):
    """Every predeclared case that ran, one row each: ``(lines, table)``, the table being
    :func:`~fastpath_lib.bench.analysis.summary_table`'s (case id -> class, route, times)."""
    table = summary_table(ev.df, gpu=ev.gpu)
    if ev.gpu:
        head = ["case", "pass", "shape", "dtype", "layout", "expected", "observed", "route", "baseline us",
                "dispatched us", "speed-up", "band", "compiled us", "as expected"]
    else:
        head = ["case", "pass", "shape", "dtype", "layout", "expected (GPU)", "route", "observed", "route as expected"]
    L = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for cid, r in table.iterrows():
        if ev.gpu:
            cells = [cid, r["pass"], shape_cell(r), r["dtype"], r["layout"], r["expected"], r["observed"], r["route"],
                     fmt(r["baseline_us"]), fmt(r["dispatched_us"]), fmt(r.get("speedup"), ".2f"),
                     fmt(r.get("noise_band"), ".1%"), fmt(r["compiled_us"]), "yes" if r["matches"] else "**no**"]
        else:
            route_ok = (r["expected"] == FALLBACK) == (r["route"] == "fallback")
            cells = [cid, r["pass"], shape_cell(r), r["dtype"], r["layout"], r["expected"], r["route"], r["observed"],
                     "yes" if route_ok else ev.text("route_differs")[0]]
        L.append("| " + " | ".join(str(c) for c in cells) + " |")
    return L, table
