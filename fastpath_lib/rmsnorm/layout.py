"""Row layouts: how a tensor normalized over its last dimension is seen as ``[rows, cols]``.

The kernels address row ``r`` at ``r * row_stride``, so an input qualifies when its last dimension is contiguous and
its leading dimensions collapse to one stride between rows, and only a plain strided tensor qualifies at all
(:func:`tensor_kind`). These helpers are shared by the predicate, the op, the benchmark and the exercise checks; they
import torch only.

>>> import torch
>>> t = torch.zeros(4, 20)[:, :16]
>>> rows_cols(t), row_stride(t), tuple(as_rows(t).stride())
((4, 16), 20, (20, 1))
"""

from __future__ import annotations

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch._subclasses.functional_tensor import FunctionalTensor

__all__ = ["PLAIN_TYPES", "rows_cols", "row_stride", "as_rows", "tensor_kind", "functorch_transform", "decided",
           "traced_rows"]

#: Tensor types the kernels accept: plain tensors, parameters, and the tensors compile/export trace with.
PLAIN_TYPES = frozenset({torch.Tensor, torch.nn.Parameter, FakeTensor, FunctionalTensor})


def rows_cols(t: torch.Tensor) -> tuple[int, int]:
    """``(rows, cols)`` of ``t`` seen as rows of its last dimension (a 0-d tensor is one row of one column)."""
    n = t.shape[-1] if t.dim() else 1
    return (t.numel() // n if n else 0), n


def row_stride(t: torch.Tensor) -> int | None:
    """The one stride between rows if the leading dims collapse (ignoring size-1 dims), else ``None``."""
    if t.dim() <= 1:
        return t.shape[-1] if t.dim() else 1
    lead = [(s, st) for s, st in zip(t.shape[:-1], t.stride()[:-1]) if s != 1]
    if not lead:
        return t.shape[-1]
    for (_, outer), (size, inner) in zip(lead, lead[1:]):
        if outer != inner * size:
            return None
    return lead[-1][1]


def as_rows(t: torch.Tensor) -> torch.Tensor:
    """A 2-D ``[rows, cols]`` view of ``t`` (its last dim contiguous and :func:`row_stride` not ``None``)."""
    if t.is_contiguous():
        return t.view(-1, t.shape[-1])
    rows, cols = rows_cols(t)
    return t.as_strided((rows, cols), (row_stride(t), 1))


def tensor_kind(t: torch.Tensor | None) -> str:
    """``""`` for a plain strided tensor (or ``None``), else what it is: a subclass, nested, or another layout."""
    if t is None:
        return ""
    if type(t) not in PLAIN_TYPES:
        return f"{type(t).__name__} (a tensor subclass)"
    if t.is_nested:
        return "a nested tensor"
    if t.layout is not torch.strided:
        return f"layout {str(t.layout).replace('torch.', '')}"
    return ""


def functorch_transform() -> str:
    """``""`` when no ``torch.func`` transform is running, else its name (``"Vmap"``, ``"Grad"``, ``"Jvp"``, ...):
    under one, every tensor is a functorch wrapper whose strides and data pointer are not the batch's."""
    if not torch._C._are_functorch_transforms_active():
        return ""
    top = torch._C._functorch.peek_interpreter_stack()
    return "" if top is None else getattr(top.key(), "name", str(top.key()))


def decided(holds) -> bool | None:
    """``holds`` as a bool, read without adding a guard: ``None`` when a tracer holds it symbolically (a
    ``torch.SymBool``) and the declared range of the sizes decides it neither way.

    >>> decided(3 > 2), decided(torch.zeros(2, 8).shape[0] == 3)
    (True, False)
    """
    if isinstance(holds, bool):
        return holds
    # symbolic only (a tracer is running, so this module is loaded already); importing it up front would cost every
    # process that imports the kit sympy's start-up (about 0.7 s) for plain-int calls that never need it
    from torch.fx.experimental.symbolic_shapes import statically_known_false, statically_known_true

    return True if statically_known_true(holds) else False if statically_known_false(holds) else None


def traced_rows(t: torch.Tensor):
    """The rows of :func:`rows_cols`, with no guard on a size a tracer holds symbolically (0 without columns)."""
    n = t.shape[-1] if t.dim() else 1
    return t.numel() // n if decided(n != 0) is not False else 0
