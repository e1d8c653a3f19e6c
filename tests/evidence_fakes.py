"""Simulated evidence steps for tests/test_evidence.py (run in the evidence run's child processes).

Not a test module: pytest collects only ``test_*.py``.
"""

from __future__ import annotations

import json
import os
import sys
import time


def ok(ctx):
    (ctx.out / "a.txt").write_text("done\n")
    return {"status": "ran", "why": "wrote a.txt", "details": {"budget_s": ctx.budget_s}}


def ok_none(ctx):
    (ctx.out / "sub").mkdir(exist_ok=True)
    (ctx.out / "sub" / "b.txt").write_text("done\n")


def skip(ctx):
    return {"status": "skipped", "why": "simulated: tool absent"}


def boom(ctx):
    (ctx.out / "partial.txt").write_text("half of the work\n")
    raise RuntimeError("simulated GPU failure")


def modules(ctx):
    loaded = {m: m in sys.modules for m in ("torch", "fastpath_lib", "tests.evidence_fakes")}
    return {"status": "ran", "why": "", "details": {"loaded": loaded}}


def hang(ctx):
    (ctx.out / "before_hang.txt").write_text("started\n")
    print("hanging", flush=True)
    time.sleep(600)


def crash(ctx):
    print("about to die", flush=True)
    os._exit(3)


def progressive(ctx):
    """Writes a row per 'case' and never finishes: a cut keeps the rows written so far."""
    rows = []
    for i in range(10_000):
        rows.append({"case": i})
        (ctx.out / "rows.json").write_text(json.dumps(rows))
        time.sleep(0.2)
