"""The records :func:`fastpath_lib.traffic.watch` keeps of single accesses: :class:`OutOfBounds` (and the error
``watch(on_oob="raise")`` raises with one) and, with ``watch(races=True)``, :class:`Race` (found by a
:class:`RaceTally` of each launch). :mod:`fastpath_lib.traffic` publishes them; its docstring describes them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["OutOfBounds", "OutOfBoundsError", "Race", "RaceTally", "LOAD", "STORE", "ATOMIC"]


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


#: How an access touches memory, as :class:`RaceTally` records it.
LOAD, STORE, ATOMIC = 0, 1, 2
_VERB = {LOAD: "loads", STORE: "stores", ATOMIC: "updates atomically"}


@dataclass
class Race:
    """A byte of one launch that one program writes and another program reads or writes, not every one of those
    accesses an atomic: a data race on a GPU, where a launch's programs run at once (Triton's interpreter runs them one
    after another, so it shows no symptom). ``writer`` wrote it (``wrote``: its verb), ``other`` touched it
    (``did``); ``offset`` is the byte's element offset from ``tensor``'s first element (its address where it belongs
    to no tensor argument); ``count`` how many bytes of the launch race."""

    kernel: str
    launch: int
    tensor: str | None
    offset: int
    writer: tuple[int, int, int]
    wrote: str
    other: tuple[int, int, int]
    did: str
    count: int

    def __str__(self) -> str:
        where = f"element {self.offset} of {self.tensor}" if self.tensor else f"the byte at {self.offset:#x}"
        return (f"data race in {self.kernel} (launch {self.launch}): program id {self.writer} {self.wrote} {where} "
                f"and program id {self.other} {self.did} it in the same launch, not both with atomics ({self.count} "
                f"bytes race). On a GPU a launch's programs run at once, so the result depends on their timing and "
                f"updates are lost (Triton's interpreter runs them one after another and shows none of it): "
                f"accumulate with tl.atomic_add, or let each program write its own partial buffer (a row of its own) "
                f"and reduce the partials afterwards")


class RaceTally:
    """Every masked-in byte one launch accesses, with the program that accessed it and how (:data:`LOAD`,
    :data:`STORE`, :data:`ATOMIC`); :meth:`race` finds the bytes that race."""

    def __init__(self):
        self.chunks: list = []

    def add(self, addrs: np.ndarray, size: int, program: int, how: int) -> None:
        """One access: the first-byte addresses of its lanes (``size`` bytes each), by ``program`` (a linear id)."""
        if addrs.size:
            self.chunks.append((addrs.astype(np.uint64), size, program, how))

    def race(self, kernel: str, launch: int, grid: tuple[int, int, int], owner) -> Race | None:
        """The first racing byte of the launch as a :class:`Race`, else ``None``. ``owner(byte)`` -> ``(tensor name,
        element offset)`` or ``None``; ``grid`` turns a linear program id back into its three."""
        if len({p for _, _, p, _ in self.chunks}) < 2:
            return None
        byte = np.concatenate([(a[:, None] + np.arange(n, dtype=np.uint64)).ravel() for a, n, _, _ in self.chunks])
        prog = np.concatenate([np.full(a.size * n, p, dtype=np.int64) for a, n, p, _ in self.chunks])
        how = np.concatenate([np.full(a.size * n, h, dtype=np.int8) for a, n, _, h in self.chunks])
        self.chunks = []
        order = np.lexsort((prog, byte))
        byte, prog, how = byte[order], prog[order], how[order]
        starts = np.flatnonzero(np.r_[True, byte[1:] != byte[:-1]])
        ends = np.r_[starts[1:], byte.size]
        racing = (prog[starts] != prog[ends - 1]) & np.logical_or.reduceat(how != LOAD, starts) & \
            np.logical_or.reduceat(how != ATOMIC, starts)
        if not racing.any():
            return None
        g = int(np.flatnonzero(racing)[0])
        lo, hi = int(starts[g]), int(ends[g])
        events = list(zip(prog[lo:hi].tolist(), how[lo:hi].tolist()))
        writer, other = next((w, o) for w in sorted(events, key=lambda e: e[1] != STORE) if w[1] != LOAD
                             for o in events if o[0] != w[0] and (w[1], o[1]) != (ATOMIC, ATOMIC))
        gx, gy, _ = grid

        def three(p: int) -> tuple[int, int, int]:
            return p % gx, (p // gx) % gy, p // (gx * gy)
        tensor, offset = owner(int(byte[lo])) or (None, int(byte[lo]))
        return Race(kernel, launch, tensor, offset, three(writer[0]), _VERB[writer[1]], three(other[0]),
                    _VERB[other[1]], int(racing.sum()))
