"""The evidence run's CUDA-graph capture step: every op whose spec declares a capture test (``OpSpec.capture``).

Each op's own test captures its calls in a ``torch.cuda.CUDAGraph``, replays them on new data against its reference,
and returns its rows, what it declared and a verdict per path (RMSNorm's and the fused op's:
:mod:`fastpath_lib.rmsnorm.graph_capture`). This step runs each within its share of the step's time and writes one
``capture_test.json`` (:func:`capture_file`) with a verdict per op and path; an op whose spec declares no capture test
is named, not failed.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

__all__ = ["RESULTS_NAME", "capture_file", "step"]

#: The file the capture step writes into the results folder.
RESULTS_NAME = "capture_test.json"


def capture_file(parts: list[dict], out: str | Path | None = None) -> dict:
    """One capture result from every op's part (``{"cases", "declared", "verdicts"}``): the rows, the declared counts
    and the verdicts side by side, ``passed`` when every op passed by every path, and the device; written as
    :data:`RESULTS_NAME` into ``out`` when given.

    >>> capture_file([])["passed"]
    False
    """
    import torch

    from fastpath_lib.bench.metadata import environment

    rows, declared, per = [], {}, {}
    for part in parts:
        rows += part["cases"]
        declared.update(part["declared"])
        per.update(part["verdicts"])
    passed = bool(per) and all(v["passed"] for paths in per.values() for v in paths.values())
    why = "; ".join(f"{op} {path}: {v['why']}" for op, paths in per.items() for path, v in paths.items()) or \
        "no op declares a capture test"
    cuda = torch.cuda.is_available()
    cap = torch.cuda.get_device_capability() if cuda else None
    env = environment()
    res = {"compute_capability": f"sm_{cap[0]}{cap[1]}" if cap else None,
           "device_name": torch.cuda.get_device_name() if cuda else "cpu", "passed": passed, "why": why,
           "declared_cases": sum(n for paths in declared.values() for n in paths.values()), "declared": declared,
           "verdicts": per, "cases": rows,
           **{k: env.get(k) for k in ("gpu_measurement", "git_commit", "timestamp", "torch", "triton")}}
    if out is not None:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / RESULTS_NAME).write_text(json.dumps(res, indent=2, default=str) + "\n")
    return res


def step(ctx) -> dict:
    """The evidence run's ``capture`` step: each op's capture test (``ctx.ops``, each with an equal share of the time
    left) into :data:`RESULTS_NAME`; "partial" when the deadline left captures not run, "skipped" when no op
    declares one."""
    from fastpath_lib import opspec

    specs = [opspec.get(n) for n in ctx.ops or opspec.names()]
    missing = [s.name for s in specs if s.capture is None]
    declared = [s for s in specs if s.capture is not None]
    note = f"; {', '.join(missing)}: capture (OpSpec.capture) is {opspec.NOT_DECLARED}" if missing else ""
    if not declared:
        return {"status": "skipped", "why": note[2:]}
    parts = []
    for i, spec in enumerate(declared):
        share = (ctx.deadline - time.monotonic()) / (len(declared) - i)
        parts.append(spec.capture(deadline=time.monotonic() + share, log=ctx.log))
    res = capture_file(parts, ctx.out)
    details = {"compute_capability": res["compute_capability"], "device_name": res["device_name"],
               "collected": res["declared_cases"], "run": len(res["cases"]),
               "verdicts": {op: {p: v["passed"] for p, v in paths.items()} for op, paths in res["verdicts"].items()}}
    if len(res["cases"]) < res["declared_cases"] and all(r["ok"] for r in res["cases"]):
        return {"status": "partial", "why": res["why"] + note, "details": details}
    return {"status": "ran" if res["passed"] else "failed", "why": res["why"] + note, "details": details}
