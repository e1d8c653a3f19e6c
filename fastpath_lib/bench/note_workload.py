"""The PR note's workload lines: the decoder replay in ``replay.json`` and the serving trace it recorded. A total
is stated only from GPU measurements, and a trace total only where every row is one."""

from __future__ import annotations

from fastpath_lib.bench.note_brief import fold
from fastpath_lib.bench.note_evidence import Evidence, fmt, not_run
from fastpath_lib.bench.schema import NOT_GPU

__all__ = ["workload", "trace_lines"]


def workload(ev: Evidence) -> list[str]:
    L = ["## Workload replay", ""]
    replay = ev.replay
    if not replay:
        fits = "" if ev.spec.decoder_step is not None else (
            "; the replay runs a small decoder with the op as its every normalization step, so it fits "
            "normalization ops only")
        return L + [f"Not run: {not_run(ev.spec, 'replay.json')}{fits}."]
    label = f" ({replay.get('label', ev.label)})" if replay.get("gpu_measurement") else ""
    L.append(f"Tiny decoder, {replay['layers']} layers, dim {replay['dim']}, {replay['batch']}x{replay['seq']} tokens, "
             f"{replay['dtype']}{label}. Logits agree: {replay.get('logits_close')}.")
    if replay.get("gpu_measurement"):
        L.append(f"End-to-end {fmt(replay['e2e_baseline_us'])} us -> {fmt(replay['e2e_fastpath_us'])} us; {ev.noun} "
                 f"share of the baseline forward {fmt(100 * replay['norm_share_baseline'], '.1f')} %.")
    else:
        L.append("No end-to-end gain is claimed: the end-to-end and share timings in replay.json were not taken "
                 "on a GPU.")
    trace = trace_lines(replay.get("trace"), ev)
    return L + (fold(f"Serving trace ({trace[0]})", trace[1:]) if trace else [])


def trace_lines(trace: dict | None, ev: Evidence) -> list[str]:
    """The serving trace in ``replay.json`` (:func:`~fastpath_lib.bench.trace.replay_trace`'s rows and totals): how
    many calls (first line), its calls by phase, and the total only where every row is a GPU measurement (a partial
    total would understate the whole); ``[]`` without a trace."""
    if not trace or not trace.get("rows"):
        return []
    tot = trace.get("totals", {})
    calls = "; ".join(f"{r['phase']} {r['shape']} x {r['calls']:,} ({r['route']})" for r in trace["rows"])
    L = [f"{tot.get('calls', 0):,} calls", f"Serving trace ({tot.get('calls', 0):,} calls): {calls}."]
    if tot.get("gpu_measurement") and tot.get("complete"):
        L.append(f"Total over the trace: {fmt(tot['baseline_total_us'], ',.0f')} us with {ev.baseline} -> "
                 f"{fmt(tot['dispatched_total_us'], ',.0f')} us dispatched ({tot.get('label', '')}).")
    else:
        L.append(f"Trace totals: {tot.get('measured_calls', 0):,} of {tot.get('calls', 0):,} calls measured, "
                 f"{tot.get('label') or NOT_GPU}; no total is claimed.")
    return L
