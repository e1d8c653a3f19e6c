"""Bytes counted by Triton's interpreter beside the bytes model: the columns a CPU run fills, and their table.

Off a GPU the kit cannot time the mechanism, but it can count it: under ``TRITON_INTERPRET=1`` every load and store
of a Triton kernel runs in Python, and :func:`fastpath_lib.traffic.watch` sees each one. :func:`count_call` runs a
provider's call once more under the checker (never inside a timed loop) and returns the results columns it fills:

* ``counted_bytes``: per launch, distinct bytes loaded plus distinct bytes stored, summed over the call's launches;
* ``requested_bytes``: the bytes every masked-in lane asked for (a vector re-read by every program counts each time);
* ``scratch_bytes``: the part of ``counted_bytes`` that went to the kernels' own scratch (:data:`SCRATCH_ARGS`, the
  backward's fp32 partial-``dw`` rows, written by the kernel and reduced by ``torch.sum``);
* ``oob_accesses``: masked-in lanes outside the tensor their access belongs to (dropped, not executed);
* ``launches_per_call``: the Triton launches of one call (torch's own ops are not Triton launches and not counted).

The model (``bytes_moved``) is the problem's minimum: each input read once, each output written once. Logical traffic
(requested) exceeds DRAM traffic (distinct) where a program re-reads what another one or it itself read; on a GPU
those re-reads are served by cache, which is why the model and the distinct count are the ones to compare with
bandwidth. :func:`explain` says why a count differs from its model, :func:`unexplained` lists the counts it cannot
explain (a test holds that list empty), and :func:`traffic_section` renders the table for the PR note.

>>> explain({"pass": "backward", "rows": 16, "cols": 512, "dtype": "bfloat16", "bytes_moved": 84992,
...          "counted_bytes": 92160, "scratch_bytes": 8192})
(True, 'the fp32 partial-dw scratch (8,192 bytes, reduced by torch.sum) in place of the dw the model writes (1,024)')
"""

from __future__ import annotations

import math
from fractions import Fraction

import pandas as pd
import torch

from fastpath_lib import runtime
from fastpath_lib.bench.schema import shape_text

__all__ = ["COUNT_COLUMNS", "SCRATCH_ARGS", "COUNTED_LABEL", "count_call", "explain", "unexplained",
           "traffic_section", "vector_arguments"]

#: The results columns :func:`count_call` fills (``launches_per_call`` and ``launches_note`` are shared with CUDA's
#: profiler count).
COUNT_COLUMNS = ("counted_bytes", "requested_bytes", "scratch_bytes", "oob_accesses")
#: Kernel arguments that are the kernels' own scratch, not the problem's inputs or outputs.
SCRATCH_ARGS = ("DW_partial_ptr",)
#: What the counted columns are, in the note's words.
COUNTED_LABEL = "counted by the Triton interpreter"
_NOTE = f"Triton launches {COUNTED_LABEL} (torch's own ops are not Triton launches)"


def count_call(fn) -> dict:
    """Run ``fn()`` once under :func:`fastpath_lib.traffic.watch`; the :data:`COUNT_COLUMNS`, ``launches_per_call``
    and ``launches_note`` it fills. Empty off the interpreter and when the call launched no Triton kernel; a call
    that fails under the checker leaves the columns empty and says why in ``launches_note``."""
    if not runtime.interpreter_enabled():
        return {}
    from fastpath_lib import traffic

    try:
        with traffic.watch() as t:
            fn()
    except Exception as exc:  # noqa: BLE001 - the timed row stands; the count says it failed
        return {"launches_note": f"traffic count failed: {type(exc).__name__}: {exc}"[:300]}
    if not t.launches:
        return {}
    scratch = sum(tt.loaded_distinct + tt.stored_distinct for launch in t.launches
                  for name, tt in launch.tensors.items() if name in SCRATCH_ARGS)
    return {"counted_bytes": t.counted_bytes, "requested_bytes": t.requested_bytes, "scratch_bytes": scratch,
            "oob_accesses": t.oob_accesses, "launches_per_call": float(len(t.launches)), "launches_note": _NOTE}


def _num(v) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return math.nan
    return f


def _int(v) -> str:
    f = _num(v)
    return "—" if math.isnan(f) else f"{f:,.0f}"


def _get(row, key):
    return row.get(key) if isinstance(row, dict) else getattr(row, key, None)


def explain(row) -> tuple[bool, str]:
    """Why a row's ``counted_bytes`` differs from its ``bytes_moved``: ``(explained, text)``.

    Explained: equal counts, and a backward whose difference is exactly its scratch less the ``dw`` the model counts
    (``cols`` elements of the row's dtype, written by torch from the reduced scratch, not by a Triton launch).
    """
    model, counted = _num(_get(row, "bytes_moved")), _num(_get(row, "counted_bytes"))
    if math.isnan(counted):
        return True, "not counted"
    if math.isnan(model):
        return False, "no bytes model to compare with"
    if counted == model:
        return True, "= model"
    scratch = _num(_get(row, "scratch_bytes"))
    if _get(row, "pass") == "backward" and scratch > 0:
        dw = int(_get(row, "cols")) * torch.empty((), dtype=getattr(torch, str(_get(row, "dtype")))).element_size()
        if counted - model == scratch - dw:
            return True, (f"the fp32 partial-dw scratch ({scratch:,.0f} bytes, reduced by torch.sum) in place of the "
                          f"dw the model writes ({dw:,})")
    return False, (f"the bytes model says {model:,.0f}, the interpreter counted {counted:,.0f} "
                   f"({counted - model:+,.0f} bytes the kit cannot explain)")


def _counted(df: pd.DataFrame) -> pd.DataFrame:
    if "counted_bytes" not in df.columns:
        return df.iloc[0:0]
    return df[pd.to_numeric(df["counted_bytes"], errors="coerce").notna()]


def unexplained(df: pd.DataFrame) -> pd.DataFrame:
    """The counted rows whose count :func:`explain` cannot explain, or that accessed memory out of bounds."""
    rows = _counted(df)
    bad = [i for i, r in rows.iterrows() if not explain(r.to_dict())[0] or _num(r.get("oob_accesses")) > 0]
    return rows.loc[bad]


def _passes(r: dict, total: float, vectors: list[str] | None = None) -> str:
    """``total`` in passes over ``rows x cols``. An op with arguments one row wide (``vectors``, or ``None`` where the
    op is not known) reads as whole passes plus ``m`` such vectors (``5 + 2 w``), when exact (``m`` below the row
    count, so the split is unique); an op with none (``vectors == []``) as passes alone, in halves or quarters where
    its bytes model is (an output narrower than its input: ``2.5``), never with a ``w`` the op does not have."""
    es = torch.empty((), dtype=getattr(torch, str(r["dtype"]))).element_size()
    act, w = int(r["rows"]) * int(r["cols"]) * es, int(r["cols"]) * es
    if not (act and total == total and total > 0 and total == round(total)):
        return "—"
    if vectors is not None and not vectors:
        q = Fraction(int(total), act)
        return f"{float(q):g}" if q.denominator in (1, 2, 4) else "—"
    k, rest = divmod(int(total), act)
    m, left = divmod(rest, w)
    if left or k <= 0 or m >= int(r["rows"]):
        return "—"
    return f"{k}" if not m else f"{k} + w" if m == 1 else f"{k} + {m} w"


def traffic_section(df: pd.DataFrame, *, baseline: str | None = None, vectors: list[str] | None = None,
                    rereads: list[str] | None = None, backward_rereads: list[str] | None = None) -> list[str]:
    """The PR note's counted-traffic table (markdown lines): for every dispatched row that ran a Triton kernel, the
    model beside the count, the requested-to-distinct ratio, the launches, the out-of-bounds lanes and why a count
    differs from its model; ``[]`` when no row was counted (a GPU run). The baseline's own model sits beside it
    where it differs (an unfused pair against a fusion).

    ``vectors``: the names of the op's arguments one row wide (:func:`vector_arguments`), which the table's ``w``
    stands for (``[]``: the op has none, so its bytes read as passes alone, ``1.5`` where the model says so; ``None``:
    not known); ``rereads``: the op's own sentences on why it requests more than it reads (``OpSpec.pr_text
    ["traffic"]``), and ``backward_rereads`` those of its backward (``pr_text["traffic_backward"]``, said where a
    backward row was counted); none is said where the op declares none.
    """
    disp = _counted(df[df["provider"] == "dispatched"]) if "provider" in df.columns else df.iloc[0:0]
    if not len(disp):
        return []
    base = df[df["provider"] == "baseline"].set_index("case_id")["bytes_moved"] if "provider" in df.columns else {}
    show_base = any(not math.isnan(b := _num(base.get(r.case_id))) and b != _num(r.bytes_moved)
                    for r in disp.itertuples())
    name = baseline or "baseline"
    head = ["case", "pass", "shape run", "launches", "bytes model", f"{COUNTED_LABEL} (distinct)", "passes",
            "requested", "requested / distinct", "out of bounds", "count against model"]
    if show_base:
        head[5:5] = [f"{name} model", "passes"]
    notes, vector, table = [], False, []
    for _, row in disp.iterrows():
        r = row.to_dict()
        counted, requested, launches = _num(r["counted_bytes"]), _num(r.get("requested_bytes")), _num(
            r.get("launches_per_call"))
        ok, why = explain(r)
        cells = [r["case_id"], r["pass"], shape_text(r["rows"], r["cols"]), _int(launches), _int(r["bytes_moved"]),
                 _int(counted), _passes(r, counted - _num(r.get("scratch_bytes") or 0), vectors),
                 _int(requested), f"{requested / counted:.2f}" if counted else "—", _int(r.get("oob_accesses")),
                 why if ok else f"**{why}**"]
        if show_base:
            b = _num(base.get(r["case_id"]))
            cells[5:5] = [_int(b), _passes(r, b, vectors)]
        vector = vector or any(str(c).endswith(" w") for c in cells)
        table.append(cells)
        if "scratch" in why:
            notes.append(r["case_id"])
    named = " or ".join(f"`{v}`" for v in vectors or [])
    counts = [i for i, h in enumerate(head) if h == "passes"]
    readable = any(cells[i] != "—" for cells in table for i in counts)  # no pass count reads off any row: no column
    keep = [i for i in range(len(head)) if readable or i not in counts]
    passes = ("; passes over rows x cols" + (
        f", plus w, a vector one row wide{f' ({named})' if named else ''}, counted once per launch that reads it"
        if vector else ", the case's input" if vectors == [] else "")) if readable else ""
    L = [f"Traffic {COUNTED_LABEL} (one call per case, every masked-in load and store; distinct bytes per launch, "
         f"summed over the call's launches{passes}):", "", "| " + " | ".join(head[i] for i in keep) + " |",
         "|" + "---|" * len(keep)]
    L += ["| " + " | ".join(str(cells[i]) for i in keep) + " |" for cells in table]
    backward = bool((disp["pass"] == "backward").any())
    reread = list(rereads or []) + list(backward_rereads or [] if backward else [])
    L += ["", "Requested counts every lane each time a program asks for it; distinct counts each byte once per "
          "launch" + (f"; {' and '.join(reread)}: logical traffic, served by cache on a GPU" if reread else "")
          + ". The distinct count is the one to set against the model and the bandwidth."]
    if notes:
        L.append(f"The backward's count ({', '.join(notes)}) includes the kernel's fp32 partial-dw scratch in "
                 "place of the dw the model writes: each program writes its share of dw to its own fp32 row, which "
                 "torch.sum reduces after the launch (dw itself is written by torch, not by a Triton launch); the "
                 "model leaves that scratch out by design (it is the kernel's cost, not the problem's).")
    return L


def vector_arguments(spec) -> list[str]:
    """The names of ``spec``'s arguments that are one row wide (a 1-d tensor of ``cols`` elements: a weight, a bias),
    read from a small case its case class builds on the CPU (the reference's parameter names); ``[]`` where the case
    cannot be built there."""
    from fastpath_lib.cases import CaseSpec
    from fastpath_lib.gradcheck import arg_names

    cols = 8
    try:
        args = spec.args((spec.case_spec or CaseSpec)(rows=2, cols=cols, device="cpu").build(seed=0))
    except Exception:  # noqa: BLE001 - a case class that cannot build on the CPU: the note names no vector
        return []
    return [n for n, a in zip(arg_names(spec, len(args)), args)
            if isinstance(a, torch.Tensor) and a.dim() == 1 and a.shape[0] == cols]
