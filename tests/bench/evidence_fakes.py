"""Simulated evidence steps for tests/bench/test_evidence.py (run in the evidence run's child processes).

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
    loaded = {m: m in sys.modules for m in ("torch", "fastpath_lib", "tests.bench.evidence_fakes")}
    return {"status": "ran", "why": "", "details": {"loaded": loaded}}


def hang(ctx):
    (ctx.out / "before_hang.txt").write_text("started\n")
    print("hanging", flush=True)
    time.sleep(600)


def crash(ctx):
    print("about to die", flush=True)
    os._exit(3)


def progressive(ctx):
    """Writes a row per 'case' and never finishes: a cut keeps the rows written so far. Each write replaces the file
    whole, as the kit's own writers do (``bench/results.py``): a cut between a plain write's truncation and its
    text would leave an empty file (seen once under load)."""
    rows = []
    for i in range(10_000):
        rows.append({"case": i})
        (ctx.out / "rows.json.tmp").write_text(json.dumps(rows))
        os.replace(ctx.out / "rows.json.tmp", ctx.out / "rows.json")
        time.sleep(0.2)


# --- the rehearsal: the whole plan on a simulated clock ------------------------------------------------------------

class SimClock:
    """A clock the rehearsal advances by each simulated step's seconds (``time.monotonic``'s stand-in)."""

    def __init__(self, t: float = 1000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def promised_files(step) -> list[str]:
    """The files a step's ``writes`` promise, ``ops/NAME/`` expanded to each op it serves other than RMSNorm and the
    parenthesised remarks dropped (``results.csv (host-overhead rows)`` is ``results.csv``)."""
    out = []
    others = [o for o in step.ops if o != "rms_norm"] or ["fused_add_rms_norm"]
    for w in step.writes:
        w = w.split(" (")[0]
        out += [w.replace("NAME", o) for o in others] if "NAME" in w else [w]
    return out


def simulated_runner(clock: SimClock, cost, grace_s: float = 5.0):
    """A runner for :func:`fastpath_lib.bench.evidence.run_evidence`: each step takes ``cost(step)`` simulated seconds
    and writes the files it promises; a step whose cost exceeds its budget is cut at the budget (plus the grace the
    real run gives a cut step) and writes nothing."""

    def run(step, staging, budget):
        entry = {"name": step.name, "title": step.title, "budget_s": round(budget, 1), "min_s": step.min_s,
                 "cut": False, "started_at": clock.t}
        seconds = cost(step)
        if seconds > budget:
            clock.t += budget + grace_s
            return dict(entry, status="failed", cut=True, why=f"cut: overran its budget of {budget:.0f} s",
                        seconds=round(budget + grace_s, 1), outputs=[])
        clock.t += seconds
        files = promised_files(step)
        for f in files:
            path = staging / f
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.exists():
                path.write_text(f"simulated by {step.name}\n")
        return dict(entry, status="ran", why="simulated", seconds=round(seconds, 1), outputs=sorted(files))

    return run
