"""Seeded faulty variants of the RMSNorm fast path, used to grade boundary cases by mutation (exercise 04).

A set of boundary cases is good when it *catches* every mutant: some case gets a different route from a faulty
predicate than from the correct one, or a wrong result (or a write outside the output, or a changed input) from a
faulty kernel. Mutants are two-sided: a predicate mutant is *too loose* (it accepts a call the kit sends to the
fallback) or *too strict* (it rejects a call the kit accepts, so an in-region case never gets the fast path).
Kernel mutants cover the forward and the backward kernel and the numerics: the eps default and the precision the
mean square is accumulated in. They run only on cases the correct predicate sends to Triton
(:mod:`fastpath_lib.grading.rules.mutant_kernels`).

Every mutant belongs to one :data:`CATEGORIES` entry; feedback names the category of a surviving mutant (and, for a
predicate mutant, the side), never the case that would catch it.

:data:`ALL` is each mutant at its hardest to catch (one row past the threshold, 16 bytes past the column limit, ...).
The grader does not grade against these published ones: :func:`drawn` draws each mutant's parameters afresh at every
check (how far past a limit, which modulus, which dtype is refused, how many backward programs), from a family of
about 3 x 10^11 members, so cases found offline by searching against a fixed list carry no guarantee. Every member
is caught by a case at each limit and one step past it (the step that keeps every other condition met), and an
eligible case of each supported dtype and layout (row slice, every other row, a batch), as the exercise asks. In most
families the member in :data:`ALL` is the hardest to catch; the too-strict layout mutant's members are not
comparable (one refuses row slices, another every-other-row views, another batches), so cases fitted to the one in
:data:`ALL` miss most of its draws.

>>> len(MUTANTS) == len(set(MUTANTS)), set(CATEGORY_OF.values()) == set(CATEGORIES)
(True, True)
"""

from __future__ import annotations

import dataclasses

import torch

from fastpath_lib.eligibility import Predicate
from fastpath_lib.rmsnorm import predicate as rms
from fastpath_lib.rmsnorm.layout import row_stride, rows_cols

__all__ = ["Mutant", "ALL", "MUTANTS", "CATEGORIES", "CATEGORY_OF", "PREDICATE_MUTANTS", "KERNEL_MUTANTS",
           "mutant_predicate", "by_category", "drawn", "FAMILY_SIZE"]


@dataclasses.dataclass(frozen=True)
class Mutant:
    """One seeded fault.

    Args:
        name: identifier (never shown to a learner while it survives).
        category: one of :data:`CATEGORIES`.
        kind: ``"predicate"``, ``"forward"`` or ``"backward"``.
        side: for predicate mutants ``"too loose"`` or ``"too strict"``; ``"wrong result"`` for kernels.
        condition: the predicate condition a predicate mutant replaces.
        check: the faulty check of a predicate mutant.
        code: the ``MUTANT`` constexpr of a kernel mutant (see :mod:`fastpath_lib.grading.rules.mutant_kernels`).
        programs: for a backward kernel mutant, the number of programs its launcher starts (0: the default).
        regime: the inputs on which the mutant differs from the correct one, as feedback names them while it
            survives (a kind of input, never a case).
    """

    name: str
    category: str
    kind: str
    side: str = "wrong result"
    condition: str = ""
    check: object = None
    code: int = 0
    programs: int = 0  # backward kernel mutants: the number of programs (0: the launcher's default)
    regime: str = ""


def _cols(c) -> int:
    return c.input.shape[-1] if c.input.dim() else 1


def _min_rows_gt(c):  # '>' where '>=' is meant
    rows = rows_cols(c.input)[0]
    return None if rows > c.limits.min_rows else f"{rows} rows"


def _min_rows_minus_one(c):  # one row below the threshold still accepted
    rows = rows_cols(c.input)[0]
    return None if rows >= c.limits.min_rows - 1 else f"{rows} rows"


def _cols_lt(c):  # '<' where '<=' is meant
    return None if _cols(c) < c.limits.max_cols else f"{_cols(c)} columns"


def _cols_plus_16_bytes(c):  # the limit counted with a 16-byte slack
    slack = c.limits.align_bytes // c.input.element_size()
    return None if _cols(c) <= c.limits.max_cols + slack else f"{_cols(c)} columns"


def _holds(c):
    return None


def _dense_rows_only(c):  # a row stride must equal the width: rejects row slices and every-other-row views
    st = row_stride(c.input)
    if st is None:
        return "leading dims do not collapse"
    return None if rows_cols(c.input)[0] <= 1 or st == _cols(c) else f"row stride {st}"


def _align(c, modulus):
    if c.input.numel() == 0:
        return None
    return None if c.input.data_ptr() % modulus == 0 else "misaligned"


def _align8(c):
    return _align(c, 8)


def _align32(c):
    return _align(c, 32)


def _dtype_fp64(c):
    return None if c.input.dtype in rms.SUPPORTED_DTYPES + (torch.float64,) else "dtype"


def _dtype_no_bf16(c):
    return None if c.input.dtype in (torch.float16, torch.float32) else "dtype"


#: predicate condition -> the inputs where a mutant of it shows (at a limit, one step past it, each kind)
_CONDITION_REGIMES = {
    "min_rows": "row counts at the row threshold and one below it",
    "cols": "widths at the column limit and one step past it",
    "row_stride": "eligible strided inputs (row slices, every other row, a batch) and ineligible ones",
    "last_dim_contiguous": "inputs whose last dim is not contiguous (a transposed view)",
    "input_alignment": "inputs whose pointer is aligned to 16 bytes and ones misaligned by a few bytes",
    "row_stride_alignment": "row strides that keep 16-byte alignment and ones that break it",
    "weight_alignment": "weights whose pointer is misaligned",
    "dtype": "every supported dtype (fp16, bf16, fp32) and an unsupported one (fp64)",
}


def _predicate(name, category, side, condition, check):
    return Mutant(name, category, "predicate", side, condition, check, regime=_CONDITION_REGIMES[condition])


_NOT_POW2 = "a width that is not a power of two"
_STRIDED = "eligible inputs whose row stride differs from the width (row slices, every other row)"

#: Every mutant, in the order feedback lists them.
ALL: tuple[Mutant, ...] = (
    _predicate("min_rows_off_by_one", "shape limits", "too strict", "min_rows", _min_rows_gt),
    _predicate("min_rows_one_below", "shape limits", "too loose", "min_rows", _min_rows_minus_one),
    _predicate("max_cols_off_by_one", "shape limits", "too strict", "cols", _cols_lt),
    _predicate("max_cols_16_bytes_over", "shape limits", "too loose", "cols", _cols_plus_16_bytes),
    _predicate("no_row_stride_check", "layout", "too loose", "row_stride", _holds),
    _predicate("no_last_dim_check", "layout", "too loose", "last_dim_contiguous", _holds),
    _predicate("dense_rows_only", "layout", "too strict", "row_stride", _dense_rows_only),
    _predicate("alignment_modulus_8", "alignment", "too loose", "input_alignment", _align8),
    _predicate("alignment_modulus_32", "alignment", "too strict", "input_alignment", _align32),
    _predicate("no_row_stride_alignment", "alignment", "too loose", "row_stride_alignment", _holds),
    _predicate("weight_alignment_ignored", "alignment", "too loose", "weight_alignment", _holds),
    _predicate("accepts_fp64", "dtype", "too loose", "dtype", _dtype_fp64),
    _predicate("rejects_bf16", "dtype", "too strict", "dtype", _dtype_no_bf16),
    Mutant("kernel_mean_over_block", "forward kernel", "forward", code=1, regime=_NOT_POW2),
    Mutant("kernel_ignores_row_stride", "forward kernel", "forward", code=2, regime=_STRIDED),
    Mutant("kernel_unmasked_tail", "forward kernel", "forward", code=3,
           regime="a width that is not a multiple of 16 elements (checked for writes past the output)"),
    Mutant("kernel_weight_always_applied", "forward kernel", "forward", code=5, regime="a call without a weight"),
    Mutant("kernel_eps_outside_sqrt", "numerics", "forward", code=4,
           regime="rows of tiny values, whose mean square is near eps or below it"),
    Mutant("kernel_half_precision_squares", "numerics", "forward", code=6,
           regime="fp16 or bf16 rows of large values or many columns, whose squares a half-precision sum rounds or "
                  "overflows"),
    Mutant("launcher_eps_default_of_input_dtype", "numerics", "forward", code=7,
           regime="fp16 or bf16 rows of tiny values, where the default eps decides the result"),
    Mutant("backward_mean_over_block", "backward kernel", "backward", code=1, regime=_NOT_POW2 + " (backward)"),
    Mutant("backward_ignores_row_stride", "backward kernel", "backward", code=2, regime=_STRIDED + " (backward)"),
    Mutant("backward_drops_partial_row_block", "backward kernel", "backward", code=3,
           regime="an odd row count above a few rows (the backward's row blocks do not divide it)"),
)

#: The names, each defined once (above).
MUTANTS: tuple[str, ...] = tuple(m.name for m in ALL)
#: Categories in the order feedback lists them.
CATEGORIES: tuple[str, ...] = tuple(dict.fromkeys(m.category for m in ALL))
CATEGORY_OF: dict[str, str] = {m.name: m.category for m in ALL}
PREDICATE_MUTANTS: dict[str, Mutant] = {m.name: m for m in ALL if m.kind == "predicate"}
KERNEL_MUTANTS: dict[str, Mutant] = {m.name: m for m in ALL if m.kind != "predicate"}


def by_category(category: str, mutants: tuple[Mutant, ...] = ALL) -> tuple[Mutant, ...]:
    """The mutants of one category (of :data:`ALL`, or of a draw)."""
    return tuple(m for m in mutants if m.category == category)


# --- the families the grader draws from ---------------------------------------------------------------------------


def _rows_at_least(extra: int):
    def check(c):  # the threshold moved by ``extra`` rows (up: too strict, down: too loose)
        rows = rows_cols(c.input)[0]
        return None if rows >= c.limits.min_rows + extra else f"{rows} rows"
    return check


def _cols_at_most(extra_bytes: int):
    def check(c):  # the column limit moved by ``extra_bytes`` (counted in the input's elements)
        limit = c.limits.max_cols + extra_bytes // c.input.element_size()
        return None if _cols(c) <= limit else f"{_cols(c)} columns"
    return check


def _aligned_to(modulus: int):
    def check(c):  # the input pointer checked against another modulus
        return _align(c, modulus)
    return check


def _row_stride_aligned_to(modulus: int):
    def check(c):  # the row stride in bytes checked against a smaller modulus
        st = row_stride(c.input)
        ok = rows_cols(c.input)[0] <= 1 or st is None or st * c.input.element_size() % modulus == 0
        return None if ok else f"row stride {st}"
    return check


def _weight_aligned_to(modulus: int):
    def check(c):  # the weight pointer checked against a smaller modulus
        w = c.weight
        return None if w is None or w.numel() == 0 or w.data_ptr() % modulus == 0 else "weight misaligned"
    return check


def _refuses_every_other_row(c):  # a row stride that is a multiple of the width, wider than it (step views)
    st, cols = row_stride(c.input), _cols(c)
    if st is None:
        return "leading dims do not collapse"
    return "row stride a multiple of the width" if rows_cols(c.input)[0] > 1 and st != cols and cols and \
        st % cols == 0 else None


def _refuses_padded_rows(c):  # a row stride wider than the width and not a multiple of it (row slices)
    st, cols = row_stride(c.input), _cols(c)
    if st is None:
        return "leading dims do not collapse"
    return "padded rows" if rows_cols(c.input)[0] > 1 and st > cols and (not cols or st % cols) else None


def _refuses_batches(c):  # only 2-d inputs: a batch of sequences is sent to the fallback
    return None if c.input.dim() <= 2 else f"{c.input.dim()}-d input"


def _refuses(dtype: torch.dtype):
    def check(c):  # one supported dtype refused
        return None if c.input.dtype in rms.SUPPORTED_DTYPES and c.input.dtype != dtype else "dtype"
    return check


def _draws(rng) -> dict[str, dict]:
    """Each family's parameters for one draw: the fields of :class:`Mutant` that change."""
    align = rms.ALIGN_BYTES
    return {
        "min_rows_off_by_one": {"check": _rows_at_least(rng.randint(1, 64))},
        "min_rows_one_below": {"check": _rows_at_least(-rng.randint(1, 7))},
        "max_cols_off_by_one": {"check": _cols_at_most(-4 * rng.randint(1, 8192))},
        "max_cols_16_bytes_over": {"check": _cols_at_most(align * rng.randint(1, 64))},
        "alignment_modulus_8": {"check": _aligned_to(rng.choice((1, 2, 4, 8)))},
        "alignment_modulus_32": {"check": _aligned_to(rng.choice((32, 64, 128, 256, 512)))},
        "no_row_stride_alignment": {"check": _row_stride_aligned_to(rng.choice((1, 2, 4)))},
        "weight_alignment_ignored": {"check": _weight_aligned_to(rng.choice((1, 2, 4)))},
        "dense_rows_only": {"check": rng.choice((_dense_rows_only, _refuses_every_other_row, _refuses_padded_rows,
                                                 _refuses_batches))},
        "rejects_bf16": {"check": _refuses(rng.choice(rms.SUPPORTED_DTYPES))},
        "backward_drops_partial_row_block": {"programs": rng.choice((2, 3, 4))},
    }


#: How many members the families hold together (the product of each family's choices).
FAMILY_SIZE = 64 * 7 * 8192 * 64 * 4 * 5 * 3 * 3 * 4 * 3 * 3


def drawn(rng) -> tuple[Mutant, ...]:
    """Every mutant of :data:`ALL` (same names, categories and sides) with its parameters drawn from ``rng``
    (``random.Random(seed)`` or ``random.SystemRandom()``)."""
    params = _draws(rng)
    return tuple(dataclasses.replace(m, **params.get(m.name, {})) for m in ALL)


def mutant_predicate(name: str | Mutant) -> Predicate:
    """:data:`~fastpath_lib.rmsnorm.predicate.PREDICATE` with one condition replaced by the faulty check (of the
    mutant named, in :data:`ALL`, or of a drawn mutant)."""
    m = name if isinstance(name, Mutant) else PREDICATE_MUTANTS[name]
    name = m.name
    conds = [dataclasses.replace(c, check=m.check) if c.name == m.condition else c for c in rms.PREDICATE.conditions]
    if not any(c.name == m.condition for c in rms.PREDICATE.conditions):
        raise KeyError(f"mutant {name}: the predicate has no condition {m.condition!r}")
    return Predicate(f"mutant:{name}", conds)
