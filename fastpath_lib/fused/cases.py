"""Inputs of the fused op built from a small spec, aliasing included, and its boundary points from its predicate.

A :class:`FusedCaseSpec` is RMSNorm's :class:`~fastpath_lib.cases.CaseSpec` for ``x`` and the weight (every field,
so RMSNorm's boundary declarations apply unchanged), plus the residual's own layout, offset and dtype, and how the
three share memory (``alias``):

* ``"none"``: separate buffers; ``"disjoint"``: ``x`` and ``residual`` are the two row halves of one buffer;
* ``"same"``: ``residual`` is ``x``; ``"overlap"``: ``residual`` is ``x`` shifted by one row in one buffer;
* ``"interleaved"``: the column halves of one ``[rows, 2 * cols]`` buffer (element-disjoint, byte ranges interleave);
* ``"weight_in_x"``: the weight is a slice of ``x``'s own elements.

Every view lives in a NaN-poisoned buffer (as in :mod:`fastpath_lib.cases`): :meth:`FusedCase.outside_untouched`
checks that no element outside the views changed.

>>> case = FusedCaseSpec(rows=4, cols=16, alias="overlap").build()
>>> case.x.data_ptr() + 16 * 4 == case.residual.data_ptr()
True
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from fastpath_lib.boundary import CONTEXT_KEYS, BoundaryPoint, declared_points
from fastpath_lib.cases import CaseSpec, guard_intact, poison
from fastpath_lib.eligibility import Predicate

__all__ = ["ALIASES", "FusedCaseSpec", "FusedCase", "FusedPoint", "boundary_points", "FUSED_CONTEXT_KEYS"]

ALIASES = ("none", "disjoint", "same", "overlap", "interleaved", "weight_in_x")
#: Overrides that change the call rather than the tensors: RMSNorm's, plus which form is called.
FUSED_CONTEXT_KEYS = CONTEXT_KEYS | {"inplace"}
_CASE_FIELDS = {f.name for f in dataclasses.fields(CaseSpec)}


@dataclasses.dataclass(frozen=True)
class FusedCaseSpec(CaseSpec):
    """A fused case: ``x`` and the weight as :class:`~fastpath_lib.cases.CaseSpec`, plus the residual and aliasing.

    Args:
        residual_dtype: ``None`` for x's dtype.
        residual_layout: ``"contiguous"``, ``"row_slice"``, ``"transposed"`` or ``"expanded"`` (one row, stride 0);
            separate buffer only.
        residual_pad, residual_offset: as ``pad`` and ``offset``, for the residual.
        residual_rows: rows of the residual when not ``None`` (a different shape makes a broadcasting call).
        alias: one of :data:`ALIASES`.
        requires_grad: ``x`` is a leaf that requires grad.
    """

    residual_dtype: Any = None
    residual_layout: str = "contiguous"
    residual_pad: int = 0
    residual_offset: int = 0
    residual_rows: int | None = None
    alias: str = "none"
    requires_grad: bool = False

    def __post_init__(self):
        super().__post_init__()
        if self.alias not in ALIASES:
            raise ValueError(f"alias must be one of {ALIASES}, got {self.alias!r}")

    def label(self) -> str:
        extra = [] if self.alias == "none" else [f"alias={self.alias}"]
        if self.residual_layout != "contiguous" or self.residual_offset or self.residual_dtype is not None:
            extra.append(f"r:{self.residual_layout}+{self.residual_pad} off{self.residual_offset}")
        return " ".join([super().label(), *extra])

    def build(self, seed: int = 0, device: str | torch.device | None = None) -> FusedCase:
        """Allocate poisoned buffers, fill the views with seeded random values, and alias them as asked."""
        base = CaseSpec(**{k: getattr(self, k) for k in _CASE_FIELDS}).build(seed, device)
        x, w, dev = base.x, base.weight, base.x.device
        buffers = [base.x_buffer] + ([base.w_buffer] if base.w_buffer is not None else [])
        if self.alias == "none":
            rdtype = self.residual_dtype or self.dtype
            rows = self.residual_rows if self.residual_rows is not None else self.rows
            expanded = self.residual_layout == "expanded"
            rspec = CaseSpec(rows=1 if expanded else rows, cols=self.cols, dtype=rdtype, weight=None,
                             layout="contiguous" if expanded else self.residual_layout, pad=self.residual_pad,
                             offset=self.residual_offset)
            rcase = rspec.build(seed + 1, dev)
            r = rcase.x.expand(rows, self.cols) if expanded else rcase.x
            r = r.view(*x.shape[:-1], self.cols) if rows == self.rows and x.dim() > 2 and not expanded else r
            buffers.append(rcase.x_buffer)
        else:
            x, r, w, buf = _aliased(self.alias, x, w, seed)
            buffers = [buf] + ([base.w_buffer] if self.alias != "weight_in_x" and base.w_buffer is not None else [])
        if self.requires_grad:
            x = x.detach().requires_grad_(True)
        return FusedCase(self, x, r, w, buffers, [b.clone() for b in buffers])


def _aliased(alias, x, w, seed):
    """``x``, ``residual`` and the weight sharing one NaN-poisoned buffer as ``alias`` says."""
    rows, cols = x.shape[0], x.shape[-1]
    gen = torch.Generator().manual_seed(seed + 1)
    if alias == "interleaved":
        buf = poison(rows * 2 * cols + 16, x.dtype, x.device)
        grid = buf[:rows * 2 * cols].view(rows, 2 * cols)
        nx, nr = grid[:, :cols], grid[:, cols:]
    else:
        shift = {"disjoint": rows, "same": 0, "overlap": 1, "weight_in_x": rows}[alias]
        buf = poison((rows + shift) * cols + 16, x.dtype, x.device)
        nx, nr = buf[:rows * cols].view(rows, cols), buf[shift * cols:(shift + rows) * cols].view(rows, cols)
    with torch.no_grad():
        nr.copy_(torch.randn(rows, cols, generator=gen).to(x.dtype))
        if alias not in ("same", "overlap"):
            nx.copy_(x)
        elif alias == "overlap":
            nx[:1].copy_(x[:1])
    if alias == "weight_in_x" and w is not None:
        w = buf[cols:2 * cols].view(cols) if w.dtype == x.dtype else w
    return nx, nr, w, buf


@dataclasses.dataclass
class FusedCase:
    """Tensors built from a :class:`FusedCaseSpec`, with their poisoned backing buffers and pristine copies."""

    spec: FusedCaseSpec
    x: torch.Tensor
    residual: torch.Tensor
    weight: torch.Tensor | None
    buffers: list[torch.Tensor]
    pristine: list[torch.Tensor]

    def args(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """``(x, residual, weight)`` for the op."""
        return self.x, self.residual, self.weight

    def fresh(self) -> FusedCase:
        """The same case on a copy of every buffer (aliasing and strides kept), for one more in-place call."""
        bufs = [b.clone() for b in self.pristine]

        def move(t):
            if t is None:
                return None
            for old, new in zip(self.buffers, bufs):
                if t.untyped_storage().data_ptr() == old.untyped_storage().data_ptr():
                    v = new.as_strided(t.shape, t.stride(), t.storage_offset())
                    return v.detach().requires_grad_(t.requires_grad) if t.is_leaf else v
            raise ValueError("tensor outside the case's buffers")

        return FusedCase(self.spec, move(self.x), move(self.residual), move(self.weight), bufs,
                         [b.clone() for b in bufs])

    def outside_untouched(self) -> bool:
        """No element of any buffer outside the views ``x``, ``residual`` and the weight changed."""
        for buf, pristine in zip(self.buffers, self.pristine):
            keep = torch.ones(buf.numel(), dtype=torch.bool, device=buf.device)
            for t in (self.x, self.residual, self.weight):
                if t is not None and t.untyped_storage().data_ptr() == buf.untyped_storage().data_ptr():
                    keep.as_strided(t.shape, t.stride(), t.storage_offset() - buf.storage_offset()).fill_(False)
            if not guard_intact(buf.detach()[keep], pristine[keep]):
                return False
        return True


@dataclasses.dataclass(frozen=True)
class FusedPoint(BoundaryPoint):
    """One generated boundary point of the fused op (a :class:`~fastpath_lib.boundary.BoundaryPoint` whose ``spec`` is
    a :class:`FusedCaseSpec`), and which form it calls."""

    @property
    def inplace(self) -> bool:
        return self.context.get("inplace", True)


def boundary_points(predicate: Predicate | None = None, base: dict[str, Any] | None = None,
                    limits: Any = None, device: str | None = None) -> list[FusedPoint]:
    """Every declared boundary point of the fused predicate (as :func:`fastpath_lib.boundary.boundary_points`)."""
    from fastpath_lib.fused import predicate as fp
    from fastpath_lib.rmsnorm.limits import limits_for

    return declared_points(predicate or fp.PREDICATE, base or fp.BASE_CASE, limits or limits_for(device), device,
                           spec_type=FusedCaseSpec, context_keys=FUSED_CONTEXT_KEYS, point_type=FusedPoint)
