"""The records :func:`fastpath_lib.traffic.watch` keeps of single accesses: :class:`OutOfBounds` (and the error
``watch(on_oob="raise")`` raises with one) and, with ``watch(races=True)``, :class:`Race` (found by a
:class:`RaceTally` of each launch). :mod:`fastpath_lib.traffic` publishes them; its docstring describes them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["OutOfBounds", "OutOfBoundsError", "Race", "RaceTally", "LOAD", "STORE", "ATOMIC", "atomic_orders"]


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
    """A byte of one launch that one program writes and another program reads or writes, not both with atomics, where
    no atomic orders the two accesses: a data race on a GPU, where a launch's programs run at once (Triton's
    interpreter runs them one after another, so it shows no symptom). Two accesses are ordered when the first
    program, after its access, releases a word (an atomic with release semantics: ``sem="release"`` or the default
    ``"acq_rel"``) that the second program, before its access, acquires (an atomic with acquire semantics reading that
    release or an atomic update after it), directly or through other programs: a lock taken with ``tl.atomic_cas``
    and released with ``tl.atomic_xchg``, or a counter every program updates with ``tl.atomic_add`` before the last
    one reads the others' results. ``writer`` wrote the byte (``wrote``: its verb), ``other`` touched it (``did``);
    ``offset`` is the byte's element offset from ``tensor``'s first element (its address where it belongs to no
    tensor argument); ``count`` how many bytes of the launch race."""

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
                f"and program id {self.other} {self.did} it in the same launch, not both with atomics and with no "
                f"atomic acquire and release ordering the two ({self.count} bytes race). On a GPU a launch's programs "
                f"run at once, so the result depends on their timing and updates are lost (Triton's interpreter runs "
                f"them one after another and shows none of it): accumulate with tl.atomic_add, or let each program "
                f"write its own partial buffer (a row of its own) and reduce the partials afterwards")


def atomic_orders(sem, scope) -> tuple[bool, bool]:
    """Whether an atomic of Triton's IR memory semantics ``sem`` and scope ``scope`` acquires and releases for the
    other programs of its launch (an atomic of ``scope="cta"`` orders nothing across programs)."""
    if getattr(scope, "name", str(scope)).upper().endswith("CTA"):
        return False, False
    name = getattr(sem, "name", str(sem)).upper()
    return name.startswith("ACQUIRE"), name.endswith("RELEASE")


def _join(views: list[np.ndarray]) -> np.ndarray:
    """The elementwise latest of vector clocks of different lengths (a missing program: -1, nothing of it known)."""
    out = np.full(max(v.size for v in views), -1, dtype=np.int64)
    for v in views:
        np.maximum(out[:v.size], v, out=out[:v.size])
    return out


class RaceTally:
    """Every masked-in byte one launch accesses, with the program that accessed it and how (:data:`LOAD`,
    :data:`STORE`, :data:`ATOMIC`), and what its atomics synchronize; :meth:`race` finds the bytes that race.

    Synchronization is tracked as happens-before with vector clocks (the C++/CUDA memory model's, as Triton's atomics
    follow it): each program's accesses carry its epoch (one more after each release it makes) and what it has
    acquired (per program, the latest epoch ordered before it). A release publishes, on each word it writes, what the
    program knows and its own epoch; an acquire of a word learns what was published there; an atomic update without
    release keeps what the word publishes (a release sequence), a plain store of the word ends it. Triton's
    interpreter runs the programs one after another, so each atomic reads the last write of its word: the accesses are
    judged in that order (as a race detector judges one run), and two conflicting accesses of different programs race
    unless the first is ordered before the second."""

    def __init__(self):
        self.chunks: list = []
        self._linear: list[int] = []  # dense program index -> the program's linear id
        self._dense: dict[int, int] = {}
        self._epoch: list[int] = []  # per dense program: the epoch its next access carries
        self._view: list[int] = []  # per dense program: index into _views of what it has acquired
        self._views: list[np.ndarray] = [np.zeros(0, dtype=np.int64)]  # view 0: nothing
        self._words = np.zeros(0, dtype=np.uint64)  # sorted addresses of the words atomics released
        self._published = np.zeros(0, dtype=np.int64)  # per word: index into _views of what an acquire of it learns

    def _program(self, program: int) -> int:
        p = self._dense.get(program)
        if p is None:
            p = self._dense[program] = len(self._linear)
            self._linear.append(program)
            self._epoch.append(0)
            self._view.append(0)
        return p

    def _find(self, addrs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each address's position among the released words, and whether it is one."""
        pos = np.searchsorted(self._words, addrs)
        if not self._words.size:
            return pos, np.zeros(addrs.shape, dtype=bool)
        return pos, self._words[np.minimum(pos, self._words.size - 1)] == addrs

    def add(self, addrs: np.ndarray, size: int, program: int, how: int, acquire: bool = False,
            release: bool = False) -> None:
        """One access: the first-byte addresses of its lanes (``size`` bytes each), by ``program`` (a linear id); an
        atomic's (:data:`ATOMIC`) may ``acquire`` its words first (:meth:`acquire`) and ``release`` them after
        (:meth:`release`)."""
        if not addrs.size:
            return
        addrs = addrs.astype(np.uint64)
        p = self._program(program)
        if how == STORE and self._words.size:  # a plain store of a word ends its release sequence
            pos, known = self._find(addrs)
            self._published[pos[known]] = 0
        if acquire:
            self.acquire(addrs, program)
        self.chunks.append((addrs, size, p, how, self._epoch[p], self._view[p]))
        if release:
            self.release(addrs, program)

    def release_last(self, wrote: np.ndarray) -> None:
        """The last access added, an atomic every lane of which ran (a ``tl.atomic_cas``: it has no mask), releases
        the words of its lanes where ``wrote`` (a compare-and-swap writes only where it found ``cmp``)."""
        addrs, _, p, *_ = self.chunks[-1]
        self.release(addrs[np.asarray(wrote, dtype=bool).ravel()], self._linear[p])

    def acquire(self, addrs: np.ndarray, program: int) -> None:
        """An atomic with acquire semantics by ``program`` reads the words at ``addrs``: it learns what they
        publish."""
        p = self._program(program)
        pos, known = self._find(np.unique(addrs.astype(np.uint64)))
        got = [self._views[int(s)] for s in np.unique(self._published[pos[known]]) if s]
        if got:
            mine = self._views[self._view[p]]
            joined = _join([mine, *got])
            if joined.size != mine.size or (joined != mine).any():
                self._views.append(joined)
                self._view[p] = len(self._views) - 1

    def release(self, addrs: np.ndarray, program: int) -> None:
        """An atomic with release semantics by ``program`` writes the words at ``addrs``: each publishes, besides what
        it did, what the program knows and its accesses so far."""
        p = self._program(program)
        addrs = np.unique(addrs.astype(np.uint64))
        if not addrs.size:
            return
        mine = _join([self._views[self._view[p]], np.zeros(p + 1, dtype=np.int64) - 1])
        mine[p] = self._epoch[p]
        self._epoch[p] += 1
        pos, known = self._find(addrs)
        published = self._published.copy()
        for old in np.unique(published[pos[known]]):
            self._views.append(_join([self._views[int(old)], mine]))
            published[pos[known][published[pos[known]] == old]] = len(self._views) - 1
        self._views.append(mine)
        words = np.concatenate([self._words, addrs[~known]])
        published = np.concatenate([published, np.full(int((~known).sum()), len(self._views) - 1)])
        order = np.argsort(words, kind="stable")
        self._words, self._published = words[order], published[order]

    def race(self, kernel: str, launch: int, grid: tuple[int, int, int], owner) -> Race | None:
        """The first racing byte of the launch as a :class:`Race`, else ``None``. ``owner(byte)`` -> ``(tensor name,
        element offset)`` or ``None``; ``grid`` turns a linear program id back into its three."""
        chunks, self.chunks = self.chunks, []
        if len({c[2] for c in chunks}) < 2:
            return None
        byte = np.concatenate([(a[:, None] + np.arange(n, dtype=np.uint64)).ravel() for a, n, *_ in chunks])
        which = np.concatenate([np.full(c[0].size * c[1], i, dtype=np.int64) for i, c in enumerate(chunks)])
        order = np.lexsort((which, byte))  # per byte, its accesses in the order they ran
        byte, which = byte[order], which[order]
        prog, how, epoch, view = (np.array([c[k] for c in chunks], dtype=np.int64) for k in (2, 3, 4, 5))
        starts = np.flatnonzero(np.r_[True, byte[1:] != byte[:-1]])
        p, h = prog[which], how[which]
        racing = (np.minimum.reduceat(p, starts) != np.maximum.reduceat(p, starts)) & \
            np.logical_or.reduceat(h != LOAD, starts) & np.logical_or.reduceat(h != ATOMIC, starts)
        if (view != 0).any() and racing.any():  # atomics ordered some accesses: judge each kind of byte once
            ends = np.r_[starts[1:], byte.size]
            tag = np.random.default_rng(0).integers(1, 2 ** 63, size=len(chunks), dtype=np.uint64)[which]
            key = list(zip(np.add.reduceat(tag, starts)[racing].tolist(), (ends - starts)[racing].tolist()))
            verdict: dict = {}
            for k, g in zip(key, np.flatnonzero(racing).tolist()):
                if k not in verdict:
                    verdict[k] = self._first(which[starts[g]:ends[g]].tolist(), prog, how, epoch, view) is not None
            racing[np.flatnonzero(racing)] = [verdict[k] for k in key]
        if not racing.any():
            return None
        g = int(np.flatnonzero(racing)[0])
        lo = int(starts[g])
        hi = int(starts[g + 1]) if g + 1 < starts.size else byte.size
        first, then = self._first(which[lo:hi].tolist(), prog, how, epoch, view)
        writer, other = (then, first) if how[then] == STORE or how[first] == LOAD else (first, then)
        gx, gy, _ = grid

        def three(c: int) -> tuple[int, int, int]:
            q = self._linear[int(prog[c])]
            return q % gx, (q // gx) % gy, q // (gx * gy)
        tensor, offset = owner(int(byte[lo])) or (None, int(byte[lo]))
        return Race(kernel, launch, tensor, offset, three(writer), _VERB[int(how[writer])], three(other),
                    _VERB[int(how[other])], int(racing.sum()))

    def _first(self, events: list[int], prog, how, epoch, view) -> tuple[int, int] | None:
        """The first pair of one byte's accesses (``events``: indices into the chunks, in the order they ran) that
        conflict (different programs, one writes, not both atomics) with the first not ordered before the second.
        Checked against the last plain store and what followed it (one access per program and kind: an earlier one
        of the same program is ordered before it), which is enough: a plain store is checked against everything
        before it, so what is ordered before it is ordered before everything after it that it is ordered before."""
        head, reads, atomics = None, {}, {}
        for x in events:
            px, hx = int(prog[x]), int(how[x])
            known = self._views[int(view[x])]
            against = ([head] if head is not None else []) + (list(reads.values()) if hx != LOAD else []) + \
                (list(atomics.values()) if hx != ATOMIC else [])
            for y in against:
                py = int(prog[y])
                if py != px and not (py < known.size and known[py] >= epoch[y]):
                    return y, x
            if hx == STORE:
                head, reads, atomics = x, {}, {}
            else:
                (reads if hx == LOAD else atomics)[px] = x
        return None
