"""Conversions for a Triton kernel that computes the same bits under Triton's interpreter as on a GPU, for any op.

A kernel that loads fp16/bf16, computes in fp32 and stores its input's dtype converts twice: up on each load, down on
each store. On a GPU, Triton's own ``v.to(tl.float32)`` and ``v.to(tl.bfloat16)`` are exact and round to nearest even,
as torch does. Triton 3.8's interpreter (``TRITON_INTERPRET=1``, how every kernel runs off a GPU) does neither for
bf16: its fp32-to-bf16 cast drops the low mantissa bits (it truncates: about half of the outputs of a plain
``x.to(bfloat16)`` come out one unit in the last place toward zero), and it widens a bf16 subnormal to a wrong value.
A kernel written as for a GPU then differs from its torch reference in bf16 under the interpreter, by more than the
kit's one-ulp bf16 tolerance, although it is right on a GPU. Use these two in the kernel instead of the casts::

    from fastpath_lib.triton_casts import round_to, to_fp32

    x = to_fp32(tl.load(X_ptr + offs, mask=mask, other=0.0))
    tl.store(Y_ptr + offs, round_to(y, Y_ptr.dtype.element_ty), mask=mask)

On a GPU each compiles to Triton's own conversion (:data:`INTERPRETED` is a constexpr, so the compiled kernel keeps
one branch); under the interpreter a bf16 value is converted on its bits, as torch converts it. Import this module
after ``TRITON_INTERPRET`` is set (``fastpath_lib.use_interpreter()``), as for any module that decorates kernels.
"""

from __future__ import annotations

import os

import triton
import triton.language as tl

__all__ = ["INTERPRETED", "to_fp32", "round_to"]

#: Whether kernels run in Triton's CPU interpreter: ``TRITON_INTERPRET`` as Triton reads it when it decorates
#: them (read at this module's import). A constexpr, so a compiled kernel keeps one branch of :func:`to_fp32` and
#: :func:`round_to`.
INTERPRETED = tl.constexpr(os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on"))


@triton.jit
def to_fp32(v):
    """``v`` (fp16, bf16 or fp32) widened to fp32, exactly.

    On a GPU this is Triton's own conversion. Triton 3.8's interpreter widens a bf16 subnormal to a wrong value (to
    zero, or to another subnormal), so there a bf16 value is widened on its bits: they are the top half of the fp32
    of the same value.
    """
    if v.dtype == tl.bfloat16 and INTERPRETED:
        return (v.to(tl.uint16, bitcast=True).to(tl.uint32) << 16).to(tl.float32, bitcast=True)
    else:
        return v.to(tl.float32)


@triton.jit
def round_to(v, ty: tl.constexpr):
    """fp32 ``v`` rounded to ``ty`` to nearest even, as torch rounds; NaN stays NaN and inf stays inf.

    On a GPU this is Triton's own conversion (``cvt.rn``: round to nearest even, any NaN to a NaN). Triton 3.8's
    interpreter is not faithful to it for bf16: its default cast truncates, its ``"rtne"`` one rounds ties up and
    carries no overflow of the mantissa into the exponent, and both flush or mangle subnormals. So under the
    interpreter the rounding is done on the bits, as torch's ``round_to_nearest_even`` does: a NaN becomes the
    canonical ``0x7FC0`` first (adding ``0x7FFF`` to a NaN whose mantissa is all ones carries into the sign bit and
    leaves ``-0.0``: a whole row normalized to zeros), then ``0x7FFF`` plus the lowest kept bit is added and the top
    16 bits are reinterpreted as bf16, with no float conversion at all.
    """
    if ty == tl.bfloat16 and INTERPRETED:
        bits = v.to(tl.uint32, bitcast=True)
        bits = tl.where(v != v, 0x7FC00000, bits + 0x7FFF + ((bits >> 16) & 1))
        return (bits >> 16).to(tl.uint16).to(tl.bfloat16, bitcast=True)
    else:
        return v.to(ty)
