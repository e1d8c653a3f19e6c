"""A step's process in the evidence run (:mod:`fastpath_lib.bench.evidence`): what it gets and how it starts.

The evidence run starts each step as ``python -c BOOT .../step_process.py TARGET STAGING BUDGET_S RESULT_JSON [OP]``
(:func:`command`): this file is run *by path* (``runpy``), not imported through the package, and imports only the
standard library, so a step's process costs a Python start-up and then imports what its own module needs: torch and
the kit for the real steps (:mod:`~fastpath_lib.bench.evidence_steps`), nothing more for a simulated one. Importing
``fastpath_lib`` first would cost every step a torch import (seconds on a busy machine) out of its budget.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import subprocess
import sys
import time
import traceback
from pathlib import Path

__all__ = ["StepContext", "child_main", "command", "ROOT"]

#: The checkout's root (a step's commands run there), found from this file like :data:`fastpath_lib.runtime.ROOT`.
ROOT = Path(__file__).resolve().parents[2]
#: What ``python -c`` runs in a step's process: this file, by path, as ``__main__``, with the step's arguments.
BOOT = "import runpy, sys; runpy.run_path(sys.argv.pop(1), run_name='__main__')"


def command(target: str, staging: Path, budget_s: float, result: Path, op: str | None = None) -> list[str]:
    """The command line of one step's process."""
    return [sys.executable, "-c", BOOT, str(Path(__file__).resolve()), target, str(staging), f"{budget_s:.3f}",
            str(result), *([op] if op else [])]


@dataclasses.dataclass
class StepContext:
    """What a step gets: the staging folder, its budget, its deadline (``time.monotonic()``) and, for a step that
    serves one registered operator, its name (``op``)."""

    out: Path
    budget_s: float
    started: float
    root: Path = ROOT
    op: str | None = None

    @property
    def deadline(self) -> float:
        """When the step should stop starting new work (a margin before it would be cut)."""
        return self.started + self.budget_s - max(3.0, 0.1 * self.budget_s)

    def left(self) -> float:
        """Seconds until :attr:`deadline`."""
        return self.deadline - time.monotonic()

    @property
    def ops(self) -> tuple[str, ...]:
        """The operators the step serves (``op`` may name several, comma-separated); empty for a shared step."""
        return tuple(self.op.split(",")) if self.op else ()

    def log(self, msg: str) -> None:
        print(msg, flush=True)

    def write_json(self, name: str, data) -> Path:
        path = self.out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=2, default=str) + "\n")
        return path

    def run(self, cmd: list[str], log_name: str, *, timeout: float, env: dict | None = None) -> tuple[int | None, str]:
        """Run a command with its own time limit, its output teed to ``log_name`` and this step's log.

        Returns:
            ``(exit_code or None when it had to be stopped, output)``.
        """
        path = self.out / log_name
        path.parent.mkdir(parents=True, exist_ok=True)
        self.log(f"$ {' '.join(cmd)}  (limit {timeout:.0f} s)")
        with open(path, "w") as f:
            proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.root,
                                    env=env, start_new_session=True)
            try:
                rc = proc.wait(timeout=max(1.0, timeout))
            except subprocess.TimeoutExpired:
                from fastpath_lib.runtime import stop_process_group  # a real step's process has the package already

                stop_process_group(proc)
                rc = None
        text = path.read_text(errors="replace")
        print(text[-4000:], flush=True)
        return rc, text


def child_main(argv: list[str] | None = None) -> None:
    """Entry point of a step's process: ``TARGET STAGING BUDGET_S RESULT_JSON [OP]``; exits 0 when a result was
    written."""
    args = (argv or sys.argv[1:])
    target, staging, budget, result = args[:4]
    ctx = StepContext(out=Path(staging), budget_s=float(budget), started=time.monotonic(),
                      op=args[4] if len(args) > 4 else None)
    module, func = target.split(":")
    try:
        res = getattr(importlib.import_module(module), func)(ctx) or {}
        res = {"status": res.get("status", "ran"), "why": res.get("why", ""), "details": res.get("details")}
    except Exception as exc:  # noqa: BLE001 - a failed step is recorded, not raised
        traceback.print_exc()
        res = {"status": "failed", "why": f"{type(exc).__name__}: {exc}"[:500]}
    Path(result).write_text(json.dumps(res, default=str))
    sys.stdout.flush()
    sys.exit(0)


if __name__ == "__main__":
    child_main()
