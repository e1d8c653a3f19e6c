"""Exercise 03: predicate conditions for a changed spec (v2: fp16/bf16 only, at most 8192 columns, 32-byte alignment).

Each condition is probed on cases on both sides of its rule and must decide as the spec says. When it fails, its reason
must name the actual value and the required one (``"input float32, need float16 or bfloat16"``), as every condition of
the kit's predicate does, and no number or dtype that is not the case's own (its sizes, strides, offsets, pointer,
element size) or the rule's: a reason such as ``"no"`` fails the part, and so does one that lists every number or every
dtype so as to name the actual one by chance. The assembled predicate must route mixed probes as the spec says, with
each rule in a condition of its own. The kit's v1 conditions decide differently on the probes, and calling the grader's
own rule from a condition fails the part.

The probes are drawn over the inputs the op takes, not over the few a test usually writes: 1-D, 2-D and 3-D inputs,
one row and many, rows sliced out of wider ones, and leading strides unlike the row stride (a batch dimension, a size-1
dimension). They come in pairs that differ in one quantity only (the same width with more rows or more dimensions, the
same shape with another row stride, the same rows with another stride on a size-1 dimension), so a condition that reads
its rule off another quantity (the element count, ``shape[0]`` or ``shape[1]``, ``stride(0)`` or ``stride(-2)``) decides
one of a pair as the spec does not.
"""

from __future__ import annotations

import dataclasses
import math
import re

import torch

from fastpath_lib.cases import CaseSpec
from fastpath_lib.grading.materials import V2_ALIGN_BYTES, V2_DTYPES, V2_MAX_COLS, device
from fastpath_lib.grading.registry import Result
from fastpath_lib.grading.report.feedback import Fail, call, case_label, graded, hold, passed, table
from fastpath_lib.grading.rules import borrowed
from fastpath_lib.rmsnorm import predicate as rms
from fastpath_lib.rmsnorm.layout import row_stride, rows_cols

__all__ = ["check_dtype_condition", "check_cols_condition", "check_alignment_condition", "check_v2_predicate"]

_GRADER = borrowed.kit("grading", why="that is the grader's own rule, check or answer key")


def _v2_expected(name: str, c) -> bool:
    x = c.input
    if name == "dtype":
        return x.dtype in V2_DTYPES
    if name == "cols":
        return (x.shape[-1] if x.dim() else 1) <= V2_MAX_COLS
    if name == "alignment":
        if x.data_ptr() % V2_ALIGN_BYTES:
            return False
        st = row_stride(x)
        return rows_cols(x)[0] <= 1 or st is None or (st * x.element_size()) % V2_ALIGN_BYTES == 0
    raise KeyError(name)


_DTYPE_WORDS = {torch.float32: r"float32|fp32|float\b", torch.float64: r"float64|fp64|double",
                torch.float16: r"float16|fp16|half", torch.bfloat16: r"bfloat16|bf16"}


def _names(pattern: str, text: str) -> bool:
    return re.search(rf"(?<![\w.])(?:torch\.)?(?:{pattern})(?!\w)", text, re.IGNORECASE) is not None


def _number(n: int, text: str) -> bool:
    """Whether ``text`` names ``n`` in any spelling Python reads (``8192``, ``8_192``, ``0x2000``, ``0o20000``,
    ``0b10``, ``8192.0``)."""
    return n in _values(text)


def _values(text: str) -> list[float]:
    """Each number ``text`` names, read as Python reads it (``int(tok, 0)`` for an integer literal with its base)."""
    out = []
    for tok in _NUMBER.findall(text):
        tok = tok.replace("_", "")
        out.append(float(int(tok, 0)) if tok[:2].lower() in ("0x", "0o", "0b") else float(tok))
    return out


#: dtype names a reason may be read for (``float`` and ``half`` alone are English words too, so they are not counted)
_ANY_DTYPE = re.compile(r"(?<![\w.])(?:torch\.)?(float(?:8\w*|16|32|64)|fp(?:8|16|32|64)|bfloat16|bf16|double"
                        r"|u?int(?:8|16|32|64)|complex\d*|bool)(?!\w)", re.IGNORECASE)
#: every run of digits counts (``a19999`` as much as ``19999``), a hexadecimal pointer as its value
_NUMBER = re.compile(r"0x[0-9a-f]+(?:_[0-9a-f]+)*|0o[0-7]+(?:_[0-7]+)*|0b[01]+(?:_[01]+)*|(?<![\d.])\d+(?:_\d+)*"
                     r"(?:\.\d+)?", re.IGNORECASE)


def _own_values(name: str, c) -> set[int]:
    """The numbers a reason about ``c`` may name: the input's own sizes, strides (in elements and bytes), offsets,
    pointer and element size, the weight's, and the rule's required value (with what sets the two apart)."""
    x, w = c.input, c.weight
    out = {0, 1}
    for t in (x, w):
        if not isinstance(t, torch.Tensor):
            continue
        es = t.element_size()
        out |= {*t.shape, *t.stride(), *(st * es for st in t.stride()), t.numel(), t.numel() * es, t.dim(), es,
                es * 8, t.storage_offset(), t.storage_offset() * es, t.data_ptr()}
        out |= {t.data_ptr() % k for k in (2, 4, 8, 16, 32, 64)}
        rows, cols = rows_cols(t) if t.dim() else (1, 1)
        out |= {rows, cols, cols * es}
        if (st := row_stride(t)) is not None:
            out |= {st, st * es}
    if name == "dtype":
        out |= {d.itemsize * k for d in V2_DTYPES for k in (1, 8)}
    elif name == "cols":
        out |= {V2_MAX_COLS, x.shape[-1] - V2_MAX_COLS if x.dim() else 0}
    else:
        a = V2_ALIGN_BYTES
        off = x.data_ptr() % a
        out |= {a, a - off, a // x.element_size()}
        if (st := row_stride(x)) is not None:
            out |= {st * x.element_size() % a, a - st * x.element_size() % a}
    return out


def _pointer_of(x, v: int) -> bool:
    """Whether ``v`` is ``x``'s address as the learner's process sees it: its copy of the input lies elsewhere and
    keeps the alignment."""
    return v >= 1 << 16 and v % 64 == x.data_ptr() % 64


def _strays(name: str, c, why: str) -> list[str]:
    """What the reason names that is not this case's nor the rule's: other numbers, other dtypes. A reason that lists
    every number (or every dtype) names the actual one by chance, not because it read it."""
    own, stray = _own_values(name, c), {}  # a dict: ordered, and linear for 20k numbers
    for tok, v in zip(_NUMBER.findall(why), _values(why)):
        if not (v == int(v) and (int(v) in own or _pointer_of(c.input, int(v)))):
            stray.setdefault(tok)
    mine = {c.input.dtype, *V2_DTYPES} | ({c.weight.dtype} if isinstance(c.weight, torch.Tensor) else set())
    for word in _ANY_DTYPE.findall(why):
        d = getattr(torch, word.lower(), None)
        d = d if isinstance(d, torch.dtype) else next(
            (k for k, pat in _DTYPE_WORDS.items() if re.fullmatch(pat, word, re.IGNORECASE)), None)
        if d not in mine:
            stray.setdefault(word)
    return list(stray)


def _reason_problem(name: str, c, why: str) -> str | None:
    """What the reason for a failing probe leaves out (the actual value or the required one), or names besides them
    (values that are not this case's)."""
    x = c.input
    missing = []
    if name == "dtype":
        if not _names(_DTYPE_WORDS.get(x.dtype, re.escape(str(x.dtype))), why):
            missing.append(f"the actual dtype ({str(x.dtype).replace('torch.', '')})")
        if not (_names(_DTYPE_WORDS[torch.float16], why) and _names(_DTYPE_WORDS[torch.bfloat16], why)):
            missing.append("the required dtypes (float16, bfloat16)")
    elif name == "cols":
        if not _number(x.shape[-1], why):
            missing.append(f"the actual width ({x.shape[-1]})")
        if not _number(V2_MAX_COLS, why):
            missing.append(f"the limit ({V2_MAX_COLS})")
    else:
        off = x.data_ptr() % V2_ALIGN_BYTES
        st = row_stride(x)
        actual = [off] if off else [st * x.element_size(), st]
        if not (any(_number(v, why) for v in actual)
                or off and any(v == int(v) and _pointer_of(x, int(v)) for v in _values(why))):
            what = f"pointer offset {off} bytes" if off else f"row stride {st * x.element_size()} bytes"
            missing.append(f"the actual value ({what})")
        if not _number(V2_ALIGN_BYTES, why):
            missing.append(f"the required alignment ({V2_ALIGN_BYTES})")
    problem = None
    if missing:
        problem = ("reason names neither " + " nor ".join(missing) if len(missing) > 1
                   else f"reason does not name {missing[0]}")
    stray = _strays(name, c, why)
    if stray:
        shown = ", ".join(stray[:6]) + (f" and {len(stray) - 6} more" if len(stray) > 6 else "")
        problem = (problem + "; and it" if problem else "reason") + f" names values that are not this case's: {shown}"
    return problem


@dataclasses.dataclass(frozen=True)
class _View:
    """A probe input of any rank: ``shape`` with ``strides`` (in elements; ``None``: contiguous), ``offset`` elements
    into a buffer of its own, and a weight of the input's dtype (or ``weight``)."""

    shape: tuple[int, ...]
    dtype: torch.dtype = torch.float16
    strides: tuple[int, ...] | None = None
    offset: int = 0
    weight: torch.dtype | None = None

    def label(self) -> str:
        out = "x".join(map(str, self.shape)) + (" (1-d) " if len(self.shape) == 1 else " ")
        out += str(self.dtype).replace("torch.", "")
        out += f" strides {self.strides}" if self.strides else ""
        out += f" off{self.offset}" if self.offset else ""
        return out + (" w" + str(self.weight).replace("torch.", "") if self.weight else "")

    def build(self):
        st = self.strides or torch.empty(self.shape, device="meta").stride()
        n = self.offset + 1 + sum((k - 1) * s for k, s in zip(self.shape, st))
        buf = torch.randn(n, device=device()).to(self.dtype)
        w = torch.ones(self.shape[-1], dtype=self.weight or self.dtype, device=device())
        return rms.make_call(buf.as_strided(self.shape, st, self.offset), (self.shape[-1],), w)


def _sliced(shape: tuple[int, ...], row: int, dtype=torch.float16, **kw) -> _View:
    """``shape`` cut out of rows ``row`` elements apart (``x[..., :cols]`` of a wider input): its leading dims
    collapse to that row stride."""
    lead = [math.prod(shape[i + 1:-1]) * row for i in range(len(shape) - 1)]
    return _View(shape, dtype, (*lead, 1), **kw)


def _probe(spec, seed: int = 0):
    if isinstance(spec, _View):
        return spec.build()
    x, ns, w = spec.build(seed=seed, device=device()).args()
    return rms.make_call(x, ns, w)


def _label(spec) -> str:
    return spec.label() if isinstance(spec, _View) else case_label(spec)


_F16, _B16, _F32 = torch.float16, torch.bfloat16, torch.float32
_PROBES = {
    "dtype": (CaseSpec(8, 16, _F16), CaseSpec(8, 16, _B16), CaseSpec(8, 16, _F32), CaseSpec(8, 16, torch.float64),
              CaseSpec(8, 16, _F16, weight=_F32), CaseSpec(8, 16, _F32, weight=_F16), _View((16,), _B16),
              _View((16,), _F32), _View((2, 4, 16), _F16), _View((2, 4, 16), _F32)),
    # the same width with more rows or more dims, and the same rows wider, 1-D to 3-D
    "cols": (CaseSpec(1, 8192, _F16), CaseSpec(1, 8193, _F16), CaseSpec(1, 8208, _B16), CaseSpec(8, 16, _F16),
             CaseSpec(1, rms.MAX_COLS, _F16), _View((8192,)), _View((8193,)), _View((4, 8192)), _View((8200, 16)),
             _View((2, 4, 8192), _B16), _View((2, 4, 8193), _B16), _View((3, 1, 8208))),
    # the same shape with another row stride or pointer, one row and many, leading strides unlike the row stride
    "alignment": (CaseSpec(8, 16, _F16), CaseSpec(8, 8, _F16), CaseSpec(8, 24, _F16), CaseSpec(8, 32, _B16),
                  CaseSpec(8, 16, _F16, offset=8), CaseSpec(8, 16, _F16, offset=16), CaseSpec(8, 16, _B16, offset=2),
                  CaseSpec(8, 16, _F16, layout="row_slice", pad=8), CaseSpec(8, 20, _F16, layout="row_slice", pad=12),
                  CaseSpec(8, 16, _F16, layout="step"), CaseSpec(1, 24, _F16), CaseSpec(8, 8, _F32),
                  _View((24,)), _View((24,), offset=8), _sliced((1, 24), 40), _sliced((2, 24), 40),
                  _sliced((2, 4, 24), 40), _sliced((2, 4, 24), 48), _sliced((1, 4, 24), 40), _sliced((1, 4, 24), 48),
                  _View((1, 1, 24), strides=(40, 40, 1)), _View((4, 1, 16), strides=(160, 20, 1)),
                  _View((4, 1, 16), strides=(160, 16, 1)), _View((4, 1, 16), strides=(40, 40, 1))),
}


def _grade_condition(name: str, fn) -> list[Result]:
    """The part ``{name}_condition``: ``fn`` decides the probes of ``name`` as the changed spec does."""
    rows, bad, vague = [], 0, []
    for spec in _PROBES[name]:
        c = _probe(spec)
        why = borrowed.run(fn, (c,), _GRADER, allow_none=True)
        if why is not None and not isinstance(why, str):
            raise Fail(f"on {spec.label()} your check returned {why!r}; return None (holds) or a reason string")
        yours, exp = why is None, _v2_expected(name, c)
        bad += yours != exp
        if why is not None and not exp:
            gap = _reason_problem(name, c, why)
            if gap:
                got = why if len(why) <= 160 else why[:150] + f"... ({len(why)} characters)"
                vague.append(f"{_label(spec)}: {gap} (got {got!r})")
        rows.append((_label(spec), hold(yours), hold(exp), "" if yours == exp else "<-- differs", why or ""))
    if bad:
        raise Fail(f"{bad} of {len(rows)} probe cases decided differently\n"
                   + table(rows, ("case", "yours", "expected", "", "your reason")))
    if vague:
        raise Fail("every decision is right, but a reason must name the actual and the required value, and no value "
                   "that is not the case's:\n"
                   + "\n".join(vague[:5]) + (f"\n... and {len(vague) - 5} more cases" if len(vague) > 5 else ""))
    return [passed("ex03", f"{name}_condition")]


def check_dtype_condition(fn, *, show: bool = True):
    """``fn(call) -> None | str`` holds exactly for fp16 and bf16 inputs; a reason names both dtypes."""
    return graded("ex03", ("dtype_condition",), _grade_condition, "dtype", fn, show=show)


def check_cols_condition(fn, *, show: bool = True):
    """``fn(call) -> None | str`` holds exactly for rows of at most 8192 columns; a reason names both widths."""
    return graded("ex03", ("cols_condition",), _grade_condition, "cols", fn, show=show)


def check_alignment_condition(fn, *, show: bool = True):
    """``fn(call) -> None | str`` holds when the input pointer and (for >1 row) the row stride in bytes are
    multiples of 32; a reason names the offending value and 32."""
    return graded("ex03", ("alignment_condition",), _grade_condition, "alignment", fn, show=show)


_MIXED = (CaseSpec(16, 64, _F16), CaseSpec(16, 64, _F32), CaseSpec(16, 8200, _B16), CaseSpec(16, 64, _F16,
          layout="transposed"), CaseSpec(16, 8, _F16), CaseSpec(16, 64, _B16, offset=4),
          CaseSpec(16, 64, _B16, layout="row_slice", pad=16), CaseSpec(0, 64, _F16), CaseSpec(16, 64, _F16,
          layout="permuted"), _View((16, 1024)), _View((2, 4, 8208), _B16), _sliced((2, 4, 24), 40),
          _sliced((1, 4, 24), 40), _sliced((2, 4, 24), 48), _View((64,)), _View((4, 1, 16), strides=(160, 20, 1)))
#: probes that break exactly one v2 rule: each rule must be a condition of its own
_ONE_RULE = {"dtype": CaseSpec(16, 64, _F32), "cols": CaseSpec(16, 8208, _B16),
             "alignment": CaseSpec(16, 64, _B16, offset=4)}


def _grade_v2_predicate(make_predicate) -> list[Result]:
    pred = call(make_predicate) if callable(make_predicate) else make_predicate
    if pred is None or not hasattr(pred, "evaluate"):
        raise Fail(f"expected a Predicate, got {type(pred).__name__}")
    rows, bad = [], 0
    for spec in _MIXED:
        c = _probe(spec)
        d = borrowed.run(pred.evaluate, (c,), _GRADER)
        x = c.input
        exp_ok = (x.numel() > 0 and all(_v2_expected(n, c) for n in ("dtype", "cols", "alignment"))
                  and (x.shape[-1] <= 1 or x.stride(-1) == 1) and row_stride(x) is not None)
        exp = "triton" if exp_ok else "fallback"
        bad += d.route != exp
        rows.append((_label(spec), d.route, exp, "" if d.route == exp else "<-- differs"))
    if bad:
        raise Fail(f"{bad} of {len(rows)} routes differ\n" + table(rows, ("case", "yours", "expected", "")))
    failing = {rule: tuple(pred.evaluate(_probe(spec)).failed) for rule, spec in _ONE_RULE.items()}
    if len(set(failing.values())) < len(failing) or any(len(f) != 1 for f in failing.values()):
        raise Fail("each v2 rule must be a condition of its own; on probes breaking one rule the failing "
                   "conditions were " + ", ".join(f"{r}: {list(f)}" for r, f in failing.items()))
    return [passed("ex03", "predicate")]


def check_v2_predicate(make_predicate, *, show: bool = True):
    """``make_predicate() -> Predicate``: its routes on mixed probes vs the changed spec (plus contiguity, row stride
    and non-empty), each v2 rule in its own condition."""
    return graded("ex03", ("predicate",), _grade_v2_predicate, make_predicate, show=show)
