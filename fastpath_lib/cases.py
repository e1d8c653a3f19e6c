"""Build row-wise test and benchmark inputs from a small declarative spec.

A :class:`CaseSpec` names a case the way a reviewer talks about it: ``rows x cols``, dtype, weight, and a layout
(contiguous, a row slice of a wider buffer, every other row, transposed, permuted, channels-last, misaligned by an
offset). The same spec builds boundary tests, hypothesis cases and benchmark inputs, for RMSNorm and for any other op
of the form ``op(x[rows, cols], weight[cols])``.

Every input lives inside a larger buffer whose unused elements are *poison* (:func:`poison`: every byte ``0xFF``, a NaN
that is not the canonical one): a kernel that reads outside its view produces NaN where the reference does not, and
:func:`guard_intact` checks that nothing wrote to the buffer. This stands in for compute-sanitizer on CPU, where
Triton's interpreter does not catch out-of-bounds access.

>>> x, ns, w = CaseSpec(rows=4, cols=16, layout="row_slice", pad=4).build(seed=0).args()
>>> tuple(x.shape), x.stride(), ns
((4, 16), (20, 1), (16,))
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch

__all__ = ["LAYOUTS", "VALUE_REGIMES", "CaseSpec", "BuiltCase", "poison", "poisoned_like", "guard_intact",
           "output_guard_intact"]

LAYOUTS = ("contiguous", "batched", "row_slice", "step", "transposed", "permuted", "channels_last")
_SAME_SIZE_INT = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def poison(n: int, dtype: torch.dtype, device) -> torch.Tensor:
    """A 1-d buffer of ``n`` elements of ``dtype`` whose every byte is ``0xFF``, what memory never written often holds.

    In a floating dtype that is a NaN with the sign bit and every mantissa bit set, not the canonical NaN: a read
    outside a view shows as NaN only where the kernel keeps every NaN a NaN (a rounding to bf16 on the bits that
    forgets NaN turns this one into ``-0.0``, and the out-of-bounds read would go unseen).

    >>> poison(2, torch.bfloat16, "cpu").isnan().all().item(), poison(1, torch.float32, "cpu").view(torch.int32).item()
    (True, -1)
    """
    return torch.full((n,), -1, dtype=_SAME_SIZE_INT[torch.empty(0, dtype=dtype).element_size()],
                      device=device).view(dtype)


def _extremes(row: torch.Tensor) -> None:
    """Alternating ``+m, -m`` with ``m`` half the dtype's largest finite value (a sum of two stays finite)."""
    m = torch.finfo(row.dtype).max / 2
    row.copy_(torch.tensor([m, -m], dtype=row.dtype, device=row.device).repeat((row.numel() + 1) // 2)[:row.numel()])


#: The value regimes a floating-point row-wise op's contract covers besides random values, by label: each fills one
#: row in place (what ``OpSpec.value_regimes`` defaults to; :func:`fastpath_lib.boundary.value_points`). A zero row
#: (a scale, a norm or a maximum of zero), a row of equal values (no spread, a tie in every maximum) and a row at half
#: the dtype's largest finite value, alternating in sign (overflow in an unscaled intermediate).
VALUE_REGIMES = {
    "zero row": lambda row: row.zero_(),
    "equal values": lambda row: row.fill_(0.75),
    "extreme values": _extremes,
}


@dataclasses.dataclass(frozen=True)
class CaseSpec:
    """A row-wise case.

    Args:
        rows: number of rows (for ``batched`` and ``permuted``, split as ``2 x rows/2``; rows must be even there;
            ``channels_last`` builds ``[1, 2, rows/2, cols]`` in channels-last memory order).
        cols: row width.
        dtype: input dtype.
        weight: ``"same"`` (weight of the input's dtype), ``None`` (no weight) or a dtype.
        layout: one of :data:`LAYOUTS`.
        pad: extra elements per row of the backing buffer for ``row_slice`` (the row stride is ``cols + pad``).
        offset: elements between the buffer's start and the input's first element (misaligns it when not a
            multiple of 16 bytes).
        weight_offset: the same for the weight.
        weight_cols: added to the weight's length (non-zero makes an invalid call).
        weight_step: the weight's stride: every ``weight_step``-th element of its buffer; ``0`` expands one value.
        norm_dims: how many trailing dims are normalized (1 or 2).
        normalized_shape: ``"wrong"`` to pass a shape that does not match the input.
        scale: magnitude of the random values.
        device: where to build (``None``: CUDA if available, else CPU).
    """

    rows: int = 16
    cols: int = 64
    dtype: torch.dtype = torch.float32
    weight: Any = "same"
    layout: str = "contiguous"
    pad: int = 0
    offset: int = 0
    weight_offset: int = 0
    weight_cols: int = 0
    weight_step: int = 1
    norm_dims: int = 1
    normalized_shape: str | None = None
    scale: float = 1.0
    device: str | None = None

    def __post_init__(self):
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {self.layout!r}")

    @property
    def shape(self) -> tuple[int, ...]:
        """The logical input shape."""
        if self.layout == "channels_last":  # [1, 2 channels, rows/2, cols] stored channels-last
            return (1, 2, max(self.rows // 2, 1), self.cols)
        if self.layout in ("batched", "permuted") or self.norm_dims == 2:
            return (2, self.rows // 2, self.cols) if self.rows % 2 == 0 else (1, self.rows, self.cols)
        return (self.rows, self.cols)

    def label(self) -> str:
        """A short readable id, e.g. ``16x64 float32 row_slice+4``."""
        d = str(self.dtype).replace("torch.", "")
        parts = [f"{self.rows}x{self.cols}", d, self.layout + (f"+{self.pad}" if self.pad else "")]
        if self.offset:
            parts.append(f"off{self.offset}")
        w = self.weight
        if w is None:
            parts.append("noweight")
        elif w != "same":
            parts.append("w" + str(w).replace("torch.", ""))
        return " ".join(parts)

    def build(self, seed: int = 0, device: str | torch.device | None = None) -> BuiltCase:
        """Allocate poisoned buffers and fill the views with seeded random values."""
        dev = torch.device(device or self.device or ("cuda" if torch.cuda.is_available() else "cpu"))
        # drawn where they are used: on CUDA a device generator in float32 (drawing a 16384 x 4096 input in float64
        # on the host and copying it over takes seconds); on the CPU a float64 CPU generator, as always
        draw = (dev, torch.float32) if dev.type == "cuda" else (torch.device("cpu"), torch.float64)
        gen = torch.Generator(device=draw[0]).manual_seed(seed)
        shape = self.shape
        x, xbuf = _strided_view(shape, self.dtype, self.layout, self.pad, self.offset, dev)
        vals = (torch.randn(shape, generator=gen, dtype=draw[1], device=draw[0]) * self.scale)
        with torch.no_grad():
            x.copy_(vals.to(self.dtype))
        w = wbuf = None
        if self.weight is not None:
            wdtype = self.dtype if self.weight == "same" else self.weight
            wshape = (shape[-2], shape[-1]) if self.norm_dims == 2 else (shape[-1] + self.weight_cols,)
            n, step, off = math.prod(wshape), self.weight_step, self.weight_offset
            vals = (1.0 + 0.5 * torch.randn(wshape, generator=gen, dtype=draw[1], device=draw[0])).to(wdtype)
            wbuf = poison(n * max(step, 1) + off + 16, wdtype, dev)
            if step == 0:  # one value, expanded
                w = wbuf[off:off + 1].expand(wshape)
                with torch.no_grad():
                    wbuf[off:off + 1].copy_(vals.reshape(-1)[:1] if n else torch.ones(1, dtype=wdtype))
            else:
                w = wbuf[off:off + n * step:step].view(wshape)
                with torch.no_grad():
                    w.copy_(vals)
        if self.normalized_shape == "wrong":
            ns = (shape[-1] + 1,)
        else:
            ns = tuple(shape[-self.norm_dims:])
        return BuiltCase(self, x, ns, w, xbuf, wbuf, xbuf.clone(), None if wbuf is None else wbuf.clone())


def _strided_view(shape, dtype, layout, pad, offset, dev):
    """A view of ``shape`` with the requested layout inside a NaN-filled buffer (returns ``(view, buffer)``)."""
    cols = shape[-1]
    lead = math.prod(shape[:-1])
    if layout in ("contiguous", "batched"):
        n = math.prod(shape)
        buf = poison(n + offset + 16, dtype, dev)
        return buf[offset:offset + n].view(shape), buf
    if layout == "row_slice":
        stride = cols + pad
        buf = poison(lead * stride + offset + 16, dtype, dev)
        return buf[offset:offset + lead * stride].view(*shape[:-1], stride)[..., :cols], buf
    if layout in ("step", "transposed") and len(shape) != 2:
        raise ValueError(f"layout {layout!r} builds 2-d inputs only, got shape {shape}")
    if layout == "step":  # every other row of a [2*rows, cols] buffer
        buf = poison(2 * lead * cols + offset + 16, dtype, dev)
        return buf[offset:offset + 2 * lead * cols].view(2 * lead, cols)[::2], buf
    if layout == "transposed":  # a [cols, rows] buffer seen as [rows, cols]
        buf = poison(lead * cols + offset + 16, dtype, dev)
        return buf[offset:offset + lead * cols].view(cols, lead).t(), buf
    if layout == "channels_last":  # [n, c, h, w] stored as [n, h, w, c]
        n_, c_, h_, w_ = shape
        n = n_ * c_ * h_ * w_
        buf = poison(n + offset + 16, dtype, dev)
        return buf[offset:offset + n].view(n_, h_, w_, c_).permute(0, 3, 1, 2), buf
    if layout == "permuted":
        a, b, c = shape
        n = a * b * c
        buf = poison(n + offset + 16, dtype, dev)
        return buf[offset:offset + n].view(b, a, c).permute(1, 0, 2), buf
    raise ValueError(layout)


@dataclasses.dataclass
class BuiltCase:
    """Tensors built from a :class:`CaseSpec`, with their poisoned backing buffers and pristine copies."""

    spec: CaseSpec
    x: torch.Tensor
    normalized_shape: tuple[int, ...]
    weight: torch.Tensor | None
    x_buffer: torch.Tensor
    w_buffer: torch.Tensor | None
    x_pristine: torch.Tensor
    w_pristine: torch.Tensor | None

    def args(self) -> tuple[torch.Tensor, tuple[int, ...], torch.Tensor | None]:
        """``(input, normalized_shape, weight)`` for the op."""
        return self.x, self.normalized_shape, self.weight

    def inputs_untouched(self) -> bool:
        """No byte of the input and weight buffers (views and poison) changed."""
        ok = guard_intact(self.x_buffer, self.x_pristine)
        if self.w_buffer is not None:
            ok = ok and guard_intact(self.w_buffer, self.w_pristine)
        return ok


def poisoned_like(shape, dtype, device, *, pad: int = 16, poison: float = -12345.0):
    """A contiguous output view of ``shape`` inside a buffer with ``pad`` poison elements on each side.

    Returns ``(view, buffer, pristine_copy)``; after the call, check the poison with :func:`guard_intact` on the
    buffer with the view's region masked out, see :func:`output_guard_intact`.
    """
    n = math.prod(shape)
    buf = torch.full((n + 2 * pad,), poison, dtype=dtype, device=device)
    return buf[pad:pad + n].view(shape), buf, buf.clone()


def guard_intact(buf: torch.Tensor, pristine: torch.Tensor) -> bool:
    """Bitwise equality of a buffer with its copy (NaN poison compares equal to itself here)."""
    return bool(torch.equal(_bits(buf.detach().cpu()), _bits(pristine.detach().cpu())))


def output_guard_intact(buf: torch.Tensor, pristine: torch.Tensor, pad: int) -> bool:
    """The ``pad`` poison elements on each side of an output made by :func:`poisoned_like` are unchanged."""
    return guard_intact(buf[:pad], pristine[:pad]) and guard_intact(buf[-pad:], pristine[-pad:])


def _bits(t: torch.Tensor) -> torch.Tensor:
    itype = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return t.contiguous().view(itype)
