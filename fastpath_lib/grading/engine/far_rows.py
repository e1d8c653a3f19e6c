"""The int32 row-offset probe of a launcher: its kernel run at a row past 2**31 elements, on tensors of three rows.

A kernel that computes a row offset in int32 (``tl.program_id(0) * row_stride``, ``row * n_cols``) is right on every
input the grader can allocate and wrong on a tensor past 2**31 elements (a large KV cache, a long prefill), where the
product wraps. A launcher allocates its outputs at the input's size, so the input cannot be made to look that large on
a small storage (exercise 02's forward probe passes its kernel a wrapping row stride itself). Instead the grader runs
the launcher on an input of :data:`ROWS` rows of :data:`COLS` columns and, in each launch of :data:`ROWS` programs (one
per row, the exercises' layout), runs program :data:`FAR` in place of program 2, with ``tl.num_programs(0)`` saying
``FAR + 1``: that program stands for row ``FAR`` of a ``FAR + 1``-row input. ``FAR * COLS`` is ``2**32 + 2 * COLS``
elements, so an offset computed in int32 wraps to row 2 of the probe's tensors, which no other program touches; in
int64 it lies far past them (an access the interpreter's checker drops). The launch runs twice (:data:`RUNS`), once with
program ``FAR + 1`` in that place (its int32 offset wraps to row 3, past the tensors: it touches nothing either way),
and :func:`problem` compares the bytes each run touched, tensor by tensor. The probe moves that one layout only; a
kernel given the row count (``row < n_rows`` is false at program ``FAR``), a 2-D grid or several rows per program
computes its row offsets where it does not reach, and the source rule
:mod:`~fastpath_lib.grading.rules.row_offsets` refuses an int32 product of a program id in any layout.

:func:`fastpath_lib.interpreted.far_programs` runs the programs (in the grader's replay process,
:func:`~fastpath_lib.interpreted.install_far` and :func:`~fastpath_lib.interpreted.select_far`, one call at a time).
"""

from __future__ import annotations

import torch

__all__ = ["ROWS", "COLS", "FAR", "RUNS", "problem", "inputs", "calls", "verdict", "in_process"]

ROWS, COLS = 3, 16
FAR = (2 ** 32 + 2 * COLS) // COLS
#: the programs a launch of :data:`ROWS` programs runs in each of the probe's two runs: rows 0 and 1 as they are, then
#: the far row whose int32 offset wraps past the tensors (``FAR + 1``), or to their row 2 (``FAR``)
RUNS = ((0, 1, FAR + 1), (0, 1, FAR))

def inputs(dtype=torch.float32, generator: torch.Generator | None = None) -> torch.Tensor:
    """A probe input: :data:`ROWS` x :data:`COLS`, contiguous, values drawn from ``generator``."""
    return torch.randn(ROWS, COLS, generator=generator, dtype=torch.float64).to(dtype)


def problem(near: list[dict], far: list[dict]) -> str | None:
    """Why the probe's two runs (per launch, argument name -> byte counts, as
    :attr:`~fastpath_lib.grading.engine.kernel_run.Call.traffic`) show a row offset computed in int32, or ``None``:
    the run with program :data:`FAR` touched bytes inside a tensor that the run with ``FAR + 1`` did not."""
    if len(near) != len(far):
        return None
    for a, b in zip(near, far):
        for name, t in b.items():
            if name.startswith("<") or name not in a:
                continue
            if t["loaded_distinct"] > a[name]["loaded_distinct"] or t["stored_distinct"] > a[name]["stored_distinct"]:
                return (f"row offsets wrap in int32: program {FAR} of a launch of one program per row (row {FAR} of "
                        f"a {FAR + 1} x {COLS} input, past 2**31 elements, as in a large KV cache or a long prefill) "
                        f"reached {name} inside the tensor, at row 2, instead of element {FAR * COLS}; compute the "
                        f"row offset in int64 (tl.program_id(0).to(tl.int64))")
    return None


def calls(args: list, first: int) -> tuple[list[tuple], dict[int, tuple[int, ...]]]:
    """The probe's two calls of a launcher on ``args`` (for :func:`~fastpath_lib.grading.engine.kernel_run.run`,
    appended at index ``first``) and the programs each runs (its ``programs``)."""
    return ([(None, [a.clone() if isinstance(a, torch.Tensor) else a for a in args], {}) for _ in RUNS],
            {first + i: ids for i, ids in enumerate(RUNS)})


def verdict(runs: list) -> str | None:
    """:func:`problem` of the probe's two calls as the grader ran them
    (:class:`~fastpath_lib.grading.engine.kernel_run.Call`); ``None`` when either raised (no verdict)."""
    if len(runs) != len(RUNS) or any(c.error for c in runs):
        return None
    return problem(runs[0].traffic, runs[1].traffic)


def in_process(fn, args: list) -> str | None:
    """:func:`problem` of the probe's two runs of ``fn(*args)`` here (a check in the learner's notebook), where
    Triton's interpreter runs it; ``None`` on a GPU (a compiled kernel would really reach the far rows) or when a
    run raises."""
    import numpy as np

    from fastpath_lib import interpreted, runtime, traffic

    if not runtime.interpreter_enabled():
        return None
    runs = []
    for ids in RUNS:
        try:
            with np.errstate(all="ignore"), traffic.watch() as t, interpreted.far_programs(ids):
                fn(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
        except Exception:  # noqa: BLE001 - no verdict: the cases judged the launcher
            return None
        runs.append([{name: {"loaded_distinct": x.loaded_distinct, "stored_distinct": x.stored_distinct}
                      for name, x in launch.tensors.items()} for launch in t.launches])
    return problem(*runs)
