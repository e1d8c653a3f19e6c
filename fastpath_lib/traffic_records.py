"""The records :func:`fastpath_lib.traffic.watch` keeps of single accesses: :class:`OutOfBounds` (and the error
``watch(on_oob="raise")`` raises with one). :mod:`fastpath_lib.traffic` publishes them; its docstring describes them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["OutOfBounds", "OutOfBoundsError"]


class OutOfBoundsError(RuntimeError):
    """A masked-in lane outside the tensor its access belongs to (``watch(on_oob="raise")``); ``.record`` holds it."""

    def __init__(self, record: OutOfBounds):
        super().__init__(str(record))
        self.record = record


@dataclass
class OutOfBounds:
    """One load or store of one program with masked-in lanes outside the tensor it belongs to."""

    kernel: str
    launch: int
    program: tuple[int, int, int]
    op: str
    tensor: str | None
    where: str
    offsets: np.ndarray
    mask: np.ndarray
    bad: np.ndarray

    @property
    def count(self) -> int:
        """Out-of-bounds lanes of this access."""
        return int(self.bad.sum())

    def __str__(self) -> str:
        what = f"{self.tensor}" if self.tensor else "a pointer into no tensor argument"
        fmt = dict(threshold=64, edgeitems=4, max_line_width=100)
        return (f"out-of-bounds {self.op} in {self.kernel} (launch {self.launch}), program id {self.program}: "
                f"{self.count} masked-in lane(s) of {what} {self.where}, at offsets "
                f"{np.array2string(self.offsets[self.bad], **fmt)}\n"
                f"  offsets: {np.array2string(self.offsets, **fmt)}\n"
                f"  mask:    {np.array2string(self.mask.astype(int), **fmt)}")
