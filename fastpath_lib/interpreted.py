"""Two scoped changes to Triton's interpreter for running someone else's kernel as a GPU would run it: bf16
arithmetic on the values (:func:`as_on_gpu`, :func:`install`) and a launch's programs run as far rows
(:func:`far_programs`, for :mod:`fastpath_lib.grading.engine.far_rows`' int32 probe). The grader uses both while it
runs a learner's kernel; they live outside the grader so that a check watching the learner's calls for the grader's
code does not see them.

Triton 3.8's interpreter holds a bf16 value as its 16 bits in a ``numpy.uint16`` (``triton/runtime/interpreter.py``,
``_get_np_dtype``) and runs its arithmetic on those integers: ``a + b`` of two bf16 blocks adds bit patterns (1.5 +
2.0 comes out NaN), ``-a``, ``tl.maximum`` and comparisons order them as unsigned integers, and its casts between bf16
and fp32 truncate where a GPU rounds to nearest even. On a GPU each of these is the correctly rounded operation on
the values, as torch computes it. A kernel right on a GPU would then be graded wrong for the interpreter's own defect,
so while :func:`as_on_gpu` is active the interpreter's operations on bf16 compute on the values: each bf16 operand
widened to fp32 exactly (its bits are the top half of the fp32's), the operation done in fp32, a bf16 result rounded to
nearest even (NaN stays NaN). For ``+``, ``-``, ``*`` and ``/`` that is the correctly rounded bf16 answer (fp32 holds
more than twice bf16's precision), the one a GPU gives.

What it patches (private API of the pinned Triton, tested against it in
``tests/grading/test_grading_kernel_regions.py``): the interpreter's builder's ``binary_op``, ``unary_op``,
``ternary_op`` (all but ``tl.where``, which only selects bits), ``create_fma``, ``create_dot``, ``cast_impl`` and
``create_fp_to_fp``, as attributes of its one instance (``interpreter_builder``), restored on exit. Loads, stores,
bitcasts and selects move bits and are left alone, so ``fastpath_lib.triton_casts``' conversions on the bits compute
what they compute without it.
"""

from __future__ import annotations

import contextlib

import numpy as np

__all__ = ["as_on_gpu", "install", "widen", "narrow", "far_programs", "install_far", "select_far"]


def widen(bits: np.ndarray) -> np.ndarray:
    """bf16 bits (``uint16``) -> the same values in fp32, exactly."""
    return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32)


def narrow(values: np.ndarray, *, toward_zero: bool = False) -> np.ndarray:
    """fp32 values -> bf16 bits (``uint16``), rounded to nearest even (or toward zero); NaN becomes ``0x7FC0``."""
    v = np.asarray(values, dtype=np.float32)
    bits = v.view(np.uint32).astype(np.uint64)
    if not toward_zero:
        bits = bits + 0x7FFF + ((bits >> 16) & 1)
    out = (bits >> 16).astype(np.uint16)
    return np.where(np.isnan(v), np.uint16(0x7FC0), out)


def install() -> bool:
    """From now on in this process, Triton's interpreter computes on bf16 values as a GPU does (the grader's replay
    of a learner's kernel, a process of its own); ``False`` where the pinned Triton's interpreter is not there."""
    patches = _patches()
    if patches is not None:
        patches[0].__dict__.update(patches[1])
    return patches is not None


@contextlib.contextmanager
def as_on_gpu():
    """While active, Triton's interpreter computes on bf16 values as a GPU does (see the module's docstring)."""
    patches = _patches()
    if patches is None:  # another Triton: its interpreter is left as it is
        yield
        return
    b, new = patches
    before = {name: b.__dict__[name] for name in new if name in b.__dict__}
    b.__dict__.update(new)
    try:
        yield
    finally:
        for name in new:
            b.__dict__.pop(name, None)
        b.__dict__.update(before)


def _patches():
    """``(the interpreter's builder, name -> its bf16-correct method)``, or ``None`` when a method is missing."""
    import triton.language as tl
    from triton.runtime import interpreter as it

    b = it.interpreter_builder
    cls = type(b)
    bf16 = tl.bfloat16

    def is_bf16(h) -> bool:
        return getattr(h.dtype, "scalar", None) == bf16 and h.data.dtype == np.uint16

    def value(h):
        return widen(h.data) if is_bf16(h) else h.data

    def result(compute, dtype):
        with np.errstate(all="ignore"):  # a GPU overflows to inf silently
            out = compute()
        if dtype.scalar == bf16 and np.asarray(out).dtype.kind == "f":
            return it.TensorHandle(narrow(out), bf16)
        return it.TensorHandle(out, dtype.scalar)

    def binary_op(lhs, rhs, op):
        if not (is_bf16(lhs) or is_bf16(rhs)):
            return cls.binary_op(b, lhs, rhs, op)
        return result(lambda: op(value(lhs), value(rhs)), lhs.dtype)

    def unary_op(arg, op):
        if not is_bf16(arg):
            return cls.unary_op(b, arg, op)
        return result(lambda: op(value(arg)), arg.dtype)

    def ternary_op(lhs, rhs, other, op):
        if op is np.where or not any(map(is_bf16, (lhs, rhs, other))):
            return cls.ternary_op(b, lhs, rhs, other, op)
        return result(lambda: op(value(lhs), value(rhs), value(other)), other.dtype)

    def create_fma(x, y, z):
        if not any(map(is_bf16, (x, y, z))):
            return cls.create_fma(b, x, y, z)
        return result(lambda: value(x) * value(y) + value(z), z.dtype)

    def create_dot(a, x, d, input_precision, max_num_imprecise_acc):
        if not (is_bf16(a) or is_bf16(x)):
            return cls.create_dot(b, a, x, d, input_precision, max_num_imprecise_acc)
        return result(lambda: np.matmul(value(a), value(x)).astype(np.float32) + value(d), d.dtype)

    def convert(src, dst_type, toward_zero: bool):
        dst = dst_type.scalar
        with np.errstate(all="ignore"):
            if dst == bf16:
                return it.TensorHandle(narrow(value(src).astype(np.float32), toward_zero=toward_zero), bf16)
            return it.TensorHandle(value(src).astype(it._get_np_dtype(dst_type)), dst)

    def cast_impl(src, dst_type):
        if not (is_bf16(src) or dst_type.scalar == bf16):
            return cls.cast_impl(b, src, dst_type)
        return convert(src, dst_type, False)

    def create_fp_to_fp(src, dst_type, rounding_mode):
        if not (is_bf16(src) or dst_type.scalar == bf16):
            return cls.create_fp_to_fp(b, src, dst_type, rounding_mode)
        return convert(src, dst_type, rounding_mode == it._ir.ROUNDING_MODE.RTZ)

    patches = {"binary_op": binary_op, "unary_op": unary_op, "ternary_op": ternary_op, "create_fma": create_fma,
               "create_dot": create_dot, "cast_impl": cast_impl, "create_fp_to_fp": create_fp_to_fp}
    if not all(callable(getattr(cls, name, None)) for name in patches):
        return None
    return b, patches


_SELECTED: list = [None]  # the program ids of the current call (:func:`select`), or None: every launch as it is


def install_far() -> None:
    """Hook the interpreter's builder once (the grader's replay process): each launch of ``len(ids)`` programs runs
    the programs :func:`select_far` chose, every other launch as it is."""
    from triton.runtime import interpreter as it

    b = it.interpreter_builder
    cls = type(b)
    state = {"ids": None}

    def set_grid_dim(x, y, z):
        ids = _SELECTED[0]
        state["ids"] = ids if ids is not None and x == len(ids) else None
        return cls.set_grid_dim(b, max(ids) + 1 if state["ids"] else x, y, z)

    def set_grid_idx(x, y, z):
        ids = state["ids"]
        return cls.set_grid_idx(b, ids[x] if ids else x, y, z)
    b.__dict__.update(set_grid_dim=set_grid_dim, set_grid_idx=set_grid_idx)


def select_far(ids: tuple[int, ...] | None) -> None:
    """The programs each launch of ``len(ids)`` programs runs from now on (``None``: every launch as it is)."""
    _SELECTED[0] = tuple(ids) if ids is not None else None


@contextlib.contextmanager
def far_programs(ids: tuple[int, ...] | None):
    """While active, each launch of ``len(ids)`` programs runs programs ``ids`` in its place, with
    ``tl.num_programs(0)`` ``max(ids) + 1`` (``None``: as it is); the hooked builder is restored on exit."""
    from triton.runtime import interpreter as it

    b = it.interpreter_builder
    before = {k: b.__dict__[k] for k in ("set_grid_dim", "set_grid_idx") if k in b.__dict__}
    install_far()
    select_far(ids)
    try:
        yield
    finally:
        select_far(None)
        for k in ("set_grid_dim", "set_grid_idx"):
            b.__dict__.pop(k, None)
        b.__dict__.update(before)
