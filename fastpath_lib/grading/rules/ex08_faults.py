"""Exercise 08's kernel part: the inputs where each operator's known mistakes show, and the fix a wrong run names.

The fix a row of feedback names comes from what the run shows, not from which input it was:

* a softmax (or log-softmax) that is right where a row's max is positive (one logit of 100, rows around +1000: only a
  kernel that subtracts a max survives those) and wrong on rows that are all negative (around -1000) subtracts a max,
  but not the row's own: a masked lane (past ``n_cols``, where ``BLOCK_SIZE`` is the next power of 2) loaded as
  ``0.0`` wins the max of an all-negative row, so ``exp`` of every element underflows to 0. The fix is the masked
  lanes' fill value, ``other=-float('inf')`` (:func:`named_fixes`). The all-negative rows come at two widths that
  are not a power of 2 and one that is, so this does not rest on one case;
* a data race between two programs of a one-program-per-row launch on an element of one row, where one of the two is
  the row's own program and the other the previous (or another) row's, or an out-of-bounds access at a column outside
  ``[0, n_cols)`` of the program's row: the mask lets a program past its row (``cols <= n_cols``): the fix is the mask
  (``cols < n_cols``), not atomics (:func:`out_of_row`). This reads the race and out-of-bounds records as
  :mod:`fastpath_lib.traffic_records` words them (their ``str``, which is what the grader's replay hands back).
"""

from __future__ import annotations

import re

import torch

from fastpath_lib.cases import CaseSpec
from fastpath_lib.grading.report.feedback import case_label

__all__ = ["REGIMES", "SHIFT", "FILL", "regime_cases", "named_fixes", "out_of_row"]


def _one_large(v: float):
    def fill(x):
        x[..., 3] = v  # one logit per row far above the rest
    return fill


def _offset(v: float):
    def fill(x):
        x.add_(v)  # every element of the row shifted by v
    return fill


def _zero_row(x):
    x[0] = 0


def _scaled(v: float):
    def fill(x):
        x.mul_(v)
    return fill


#: op name -> the inputs where that operator's known mistakes show: ``(what, spec, fill, the fix it names)``, the input
#: ``spec`` builds changed in place by ``fill``. Each is in the exercise's text. Softmax and log-softmax: logits whose
#: ``exp`` leaves its range (one of 100 per row: ``exp(100)`` overflows fp32; rows around +-1000: ``exp(1000)``
#: overflows fp32 and fp64, ``exp(-1000)`` underflows to 0 in both), which only a row max subtracted first
#: survives; the rows around -1000 at widths 50, 40 (fp16) and 64, where a masked lane's fill value shows
#: (:func:`named_fixes`). l2_normalize: a zero row (the norm clamped below by eps) and fp16 values whose squares
#: overflow fp16 (squares summed in fp32). layer_norm: fp16 rows with a mean of 1000, where ``E[x^2] - E[x]^2``
#: cancels in fp32 (the mean subtracted before squaring).
SHIFT = "subtract each row's max before exp"
#: The fix :func:`named_fixes` names where the max is subtracted but a masked lane wins it.
FILL = ("load the masked lanes with other=-float('inf'): a lane past n_cols loaded as 0.0 is the max of an "
        "all-negative row")
REGIMES = {
    "softmax": (("one logit of 100 per row", CaseSpec(4, 64, weight=None), _one_large(100.0), SHIFT),
                ("one logit of 100 per row", CaseSpec(4, 40, torch.float16, weight=None), _one_large(100.0), SHIFT),
                ("logits around 1000", CaseSpec(3, 50, weight=None), _offset(1000.0), SHIFT),
                ("logits around -1000", CaseSpec(3, 50, weight=None), _offset(-1000.0), SHIFT),
                ("logits around -1000", CaseSpec(4, 40, torch.float16, weight=None), _offset(-1000.0), SHIFT),
                ("logits around -1000", CaseSpec(3, 64, weight=None), _offset(-1000.0), SHIFT)),
    "l2_normalize": (("a zero row", CaseSpec(3, 64, weight=None), _zero_row,
                      "clamp the norm below by eps (1e-12), as F.normalize does"),
                     ("fp16 values near 300", CaseSpec(3, 64, torch.float16, weight=None), _scaled(300.0),
                      "accumulate the squares in fp32")),
    "layer_norm": (("rows with a mean of 1000", CaseSpec(3, 64, torch.float16, weight=None), _offset(1000.0),
                    "subtract the mean before squaring (not E[x^2] - E[x]^2)"),),
}
REGIMES["log_softmax"] = REGIMES["softmax"]


def _label(spec, what: str, fix: str) -> str:
    return f"{case_label(spec)}, {what} (if wrong: {fix})"


def regime_cases(op_name: str, seed: int, device_=None) -> list[tuple[str, object]]:
    """``(label, built case)`` for each of ``op_name``'s :data:`REGIMES` (its pristine copies taken after the fill)."""
    out = []
    for what, spec, fill, fix in REGIMES.get(op_name, ()):
        built = spec.build(seed=seed, device=device_ or "cpu")
        with torch.no_grad():
            fill(built.x)
        built.x_pristine = built.x_buffer.clone()
        out.append((_label(spec, what, fix), built))
    return out


def named_fixes(rows: list[tuple[str, str | None]], xs: list) -> list[tuple[str, str | None]]:
    """``rows`` (label, problem or ``None``) of the kernel part, with the fix of the rows around -1000 named from
    what the run shows (module docstring): :data:`FILL` where every row of a positive max that needs the shift is
    right and an all-negative one is wrong; ``xs``: each row's input."""
    shifted = [(i, bool((x.detach().float().amax(-1) < 0).all())) for i, ((label, _), x) in enumerate(zip(rows, xs))
               if f"(if wrong: {SHIFT})" in label and x.dim() == 2 and x.numel()]
    positive = [rows[i][1] is None for i, negative in shifted if not negative]
    negative = [i for i, neg in shifted if neg and rows[i][1] is not None]
    if not (positive and all(positive) and negative):
        return rows
    out = list(rows)
    for i in negative:
        out[i] = (rows[i][0].replace(f"(if wrong: {SHIFT})", f"(if wrong: {FILL})"), rows[i][1])
    return out


_RACE = re.compile(r"program id \((\d+), \d+, \d+\) (\w+(?: \w+)?) element (\d+) of (\S+) and program id "
                   r"\((\d+), \d+, \d+\) (\w+(?: \w+)?) it")
_OOB = re.compile(r"out-of-bounds (load|store) in \S+ \(launch \d+\), program id \((\d+), \d+, \d+\): .*? of (\S+) "
                  r".*?at offsets \[([^\]]*)\]")
_MASK = ("the mask lets a program past its row: mask the row's lanes with `cols < n_cols` (not `<=`) on the load and "
         "the store")


def out_of_row(message: str, strides: dict[str, int], n_cols: int) -> str | None:
    """For a race or out-of-bounds record (``message``) of a one-program-per-row launch: the access past the end of its
    program's row it shows (a column at or beyond ``n_cols``), with the mask as its fix, or ``None`` (an access
    before the row's start is no mask's off-by-one: the race or out-of-bounds advice stands). ``strides``:
    ``"load"`` and ``"store"`` -> the row stride of the tensor a load reads (the input) and a store writes (the
    output)."""
    race = _RACE.search(message)
    if race:
        p1, did1, k, tensor, p2, did2 = race.groups()
        k, stride = int(k), strides["store"]
        row, col = divmod(k, stride)
        own = [p for p in (int(p1), int(p2)) if p == row]
        past = [(int(p), did) for p, did in ((p1, did1), (p2, did2)) if int(p) != row]
        if len(own) != 1 or len(past) != 1:
            return None
        p, did = past[0]
        if k - p * stride < n_cols:  # inside its row, or before it (another bug than a mask's off-by-one)
            return None
        return (f"program {p} (row {p}) {did} column {k - p * stride} of its row, outside [0, {n_cols}): element {k} "
                f"of {tensor}, which is column {col} of row {row}, whose own program {row} writes it too. This is not "
                f"a race to fix with atomics: {_MASK}")
    oob = _OOB.search(message)
    if not oob:
        return None
    op, p, tensor, offsets = oob.groups()
    p, stride = int(p), strides[op]
    try:
        cols = sorted({int(o) - p * stride for o in offsets.replace(",", " ").split() if o.lstrip("-").isdigit()})
    except ValueError:
        return None
    outside = [c for c in cols if c >= n_cols]  # past its row's end: what a mask's off-by-one reaches
    if not outside:
        return None
    return (f"program {p} (row {p}) {op}s {tensor} at column(s) {', '.join(map(str, outside[:4]))} of its row, "
            f"outside [0, {n_cols}): {_MASK}")
