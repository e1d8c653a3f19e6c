"""Memory traffic and bounds, counted by Triton's interpreter: what each launch loads and stores, tensor by tensor.

Under ``TRITON_INTERPRET=1`` Triton executes every ``tl.load`` and ``tl.store`` on the CPU, with the byte address of
every lane and its mask. :func:`watch` listens to them (opt-in: importing this module changes nothing)::

    with traffic.watch() as t:
        y = rms_norm(x, (n,), w)          # any code that launches Triton kernels
    t.counted_bytes                       # per launch distinct bytes loaded + distinct bytes stored, summed
    t.launches[0].tensors["X_ptr"]        # TensorTraffic: requested and distinct bytes of one argument
    t.oob                                 # every out-of-bounds access (OutOfBounds), empty when all were in bounds
    print(t.report())                     # one line per launch and tensor, then each out-of-bounds access

Public API (kept stable):

* ``watch(on_oob="mask", max_records=50, races=False) -> Traffic``, a context manager. ``on_oob``: ``"mask"`` records an
  out-of-bounds lane and drops it from the access (a load reads ``other`` there, a store writes nothing), so a wrong
  kernel cannot corrupt memory and every bad access of the run is reported; ``"raise"`` raises
  :class:`OutOfBoundsError` at the first one, before it happens. Nesting is refused (``RuntimeError``); every hook is
  restored on exit, also on error. Off the interpreter it raises ``RuntimeError`` (compiled kernels are not visible).
  ``races=True`` also finds each launch's data races (:class:`Race`).
* ``Traffic``: ``launches`` (list of :class:`Launch`, in order), ``counted_bytes``, ``requested_bytes``,
  ``oob`` (the kept :class:`OutOfBounds` records, at most ``max_records``), ``oob_accesses`` (every out-of-bounds
  lane, also those past ``max_records``), ``races`` (with ``races=True``), ``report()``.
* ``Launch``: ``kernel`` (name), ``grid`` (3-tuple), ``tensors`` (argument name -> :class:`TensorTraffic`, in the
  kernel's argument order; accesses that hit no argument at all are filed under ``"<no tensor>"``), ``oob``,
  ``oob_accesses``, ``races``, ``counted_bytes`` (distinct loaded + distinct stored over its tensors),
  ``requested_bytes``.
* ``TensorTraffic``: ``name``, ``dtype``, ``shape``, ``stride``, ``nbytes`` (numel x element size),
  ``loaded_requested`` / ``stored_requested`` (bytes asked for by masked-in lanes, repeats included),
  ``loaded_distinct`` / ``stored_distinct`` (distinct bytes), ``max_loads_per_byte`` / ``max_stores_per_byte``
  (how often the most-read / most-written byte was accessed; 1 means each at most once).
* ``OutOfBounds``: ``kernel``, ``launch`` (index), ``program`` (program id, 3-tuple), ``op`` (``"load"`` or
  ``"store"``), ``tensor`` (the argument the access belongs to, ``None`` when it hits none), ``where`` (what the bad
  lanes hit: ``"outside every tensor of the launch"``, ``"in X_ptr's storage outside its elements (a neighbour row or
  padding)"`` or ``"inside W_ptr"``), ``offsets`` (element offsets of the whole pointer block from the tensor's
  first element, or from the first masked-in lane's address when the access belongs to no tensor), ``mask`` (the
  block's mask), ``bad`` (the lanes out of bounds), ``count``; ``str()`` says it all
  in the manner of Triton-Puzzles-Lite.
* ``Race``: a byte of one launch that one program writes (a store or an atomic) and another program reads or writes,
  not both with atomics, where no atomic orders the two accesses (the first program releases a word after its access,
  the second acquires it before its own: a lock, a counter; Triton's atomics acquire and release by default):
  ``kernel``, ``launch``, ``tensor``, ``offset`` (element offset of the first such byte), ``writer`` / ``other``
  (program ids) and what each did, ``count`` (bytes that race); ``str()`` names both fixes. Triton's interpreter runs
  a launch's programs one after another, so a race gives the sequential answer there; on a GPU they run at once.

An access belongs to the tensor argument holding most of its masked-in lanes (an argument's elements are the bytes its
shape and strides address); its masked-in lanes outside that tensor's elements are out of bounds. So an off-by-one
mask shows at the last row, as a read past the tensor (into another allocation, a neighbour row of a larger storage,
or unmapped memory). Bytes are counted per launch: a weight re-read by every program is requested many times and
distinct once (on a GPU the re-reads come from cache, so distinct bytes approximate DRAM traffic).

Note:
    This reads private parts of the pinned Triton (3.8): ``triton.runtime.interpreter.interpreter_builder``'s
    ``create_masked_load`` / ``create_masked_store`` (``create_load``, ``create_store`` and the tensor-descriptor
    accesses go through them), ``create_atomic_rmw`` / ``create_atomic_cas``, and ``GridExecutor.__call__`` /
    ``_init_args_hst`` (one launch; its arguments as the interpreter sees them). :func:`hooks_missing` names any that
    changed; :func:`watch` refuses to start then.

>>> import torch
>>> from fastpath_lib import rms_norm, runtime, traffic
>>> x, w = torch.randn(8, 64), torch.ones(64)
>>> if runtime.interpreter_enabled():  # on a GPU without the interpreter there is nothing to watch
...     with traffic.watch() as t:
...         _ = rms_norm(x, (64,), w)
...     print(t.counted_bytes == 2 * x.nbytes + w.nbytes, t.requested_bytes > t.counted_bytes, t.oob_accesses)
... else:
...     print(True, True, 0)
True True 0
"""

from __future__ import annotations

import contextlib
import inspect
from dataclasses import dataclass, field

import numpy as np

from fastpath_lib.traffic_records import (ATOMIC, LOAD, STORE, OutOfBounds, OutOfBoundsError, Race, RaceTally,
                                          atomic_orders)

__all__ = ["watch", "Traffic", "Launch", "TensorTraffic", "OutOfBounds", "OutOfBoundsError", "Race", "hooks_missing",
           "NO_TENSOR"]

#: the key under which a launch files accesses that hit none of its tensor arguments
NO_TENSOR = "<no tensor>"
#: (owner, attribute, parameter names) that the checker hooks; owner "builder" is the interpreter's builder instance
_HOOKS = (
    ("builder", "create_masked_load", ("self", "ptrs", "mask", "other", "cache_modifier", "eviction_policy",
                                       "is_volatile")),
    ("builder", "create_masked_store", ("self", "ptrs", "value", "mask", "cache_modifier", "eviction_policy")),
    ("builder", "create_atomic_rmw", ("self", "rmwOp", "ptr", "val", "mask", "sem", "scope")),
    ("builder", "create_atomic_cas", ("self", "ptr", "cmp", "val", "sem", "scope")),
    ("executor", "__call__", ("self", "args_dev", "kwargs")),
    ("executor", "_init_args_hst", ("self", "args_dev", "kwargs")),
)
_active: list[Traffic] = []


def watching() -> bool:
    """Whether a :func:`watch` block is open in this process (a second one would be refused)."""
    return bool(_active)


@dataclass
class TensorTraffic:
    """What one launch loaded from and stored to one tensor argument (bytes)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    nbytes: int
    loaded_requested: int = 0
    stored_requested: int = 0
    loaded_distinct: int = 0
    stored_distinct: int = 0
    max_loads_per_byte: int = 0
    max_stores_per_byte: int = 0
    _addrs: dict = field(default_factory=lambda: {"load": [], "store": []}, repr=False)
    _tally: dict = field(default_factory=dict, repr=False)

    def _close(self) -> None:
        """Distinct bytes and most repeats from the per-element tallies and the other accesses' addresses."""
        for op in ("load", "store"):
            tally, chunks = self._tally.get(op), self._addrs[op]  # chunks: (first-byte addresses, access bytes)
            distinct, most = 0, 0
            if tally is not None:
                counts, esize = tally
                distinct, most = int(np.count_nonzero(counts)) * esize, int(counts.max())
            if chunks:  # lanes outside the elements, or accesses of another width: counted byte by byte
                u, counts = np.unique(np.concatenate([(a[:, None] + np.arange(n, dtype=np.uint64)).ravel()
                                                      for a, n in chunks]), return_counts=True)
                distinct, most = distinct + int(u.size), max(most, int(counts.max()))
            setattr(self, "loaded_distinct" if op == "load" else "stored_distinct", distinct)
            setattr(self, f"max_{op}s_per_byte", most)
            chunks.clear()
        self._tally.clear()


@dataclass
class Launch:
    """One kernel launch: its grid, per-argument traffic and out-of-bounds accesses."""

    kernel: str
    index: int
    grid: tuple[int, int, int] = (1, 1, 1)
    tensors: dict[str, TensorTraffic] = field(default_factory=dict)
    oob: list[OutOfBounds] = field(default_factory=list)
    oob_accesses: int = 0
    races: list[Race] = field(default_factory=list)
    _extents: list = field(default_factory=list, repr=False)
    _tally: RaceTally | None = field(default=None, repr=False)

    @property
    def counted_bytes(self) -> int:
        return sum(t.loaded_distinct + t.stored_distinct for t in self.tensors.values())

    @property
    def requested_bytes(self) -> int:
        return sum(t.loaded_requested + t.stored_requested for t in self.tensors.values())


@dataclass
class Traffic:
    """Everything one :func:`watch` block saw."""

    on_oob: str = "mask"
    max_records: int = 50
    launches: list[Launch] = field(default_factory=list)
    oob: list[OutOfBounds] = field(default_factory=list)
    oob_accesses: int = 0
    find_races: bool = False
    races: list[Race] = field(default_factory=list)

    @property
    def counted_bytes(self) -> int:
        """Per launch distinct bytes loaded plus distinct bytes stored, summed over the launches."""
        return sum(launch.counted_bytes for launch in self.launches)

    @property
    def requested_bytes(self) -> int:
        """Bytes every masked-in lane asked for, repeats included."""
        return sum(launch.requested_bytes for launch in self.launches)

    def report(self) -> str:
        """One line per launch and tensor (requested / distinct bytes), then each kept out-of-bounds access."""
        lines = []
        for launch in self.launches:
            lines.append(f"launch {launch.index}: {launch.kernel} grid {launch.grid}: {launch.counted_bytes:,} bytes "
                         f"distinct, {launch.requested_bytes:,} requested, {launch.oob_accesses} out of bounds")
            for t in launch.tensors.values():
                parts = [f"{verb} {distinct:,} of {requested:,} requested" for verb, distinct, requested in (
                    ("loaded", t.loaded_distinct, t.loaded_requested), ("stored", t.stored_distinct,
                                                                         t.stored_requested)) if requested]
                if parts:
                    lines.append(f"  {t.name:<16} {t.dtype:<9} {str(list(t.shape)):<12} " + ", ".join(parts))
        lines += [str(r) for r in self.oob + self.races]
        if self.oob_accesses > sum(r.count for r in self.oob):
            lines.append(f"... {self.oob_accesses} out-of-bounds lanes in all (records kept: {len(self.oob)})")
        return "\n".join(lines)


def _targets(classes: bool = False):
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder if classes else interpreter.interpreter_builder
    return {"builder": builder, "executor": interpreter.GridExecutor}


def hooks_missing() -> list[str]:
    """The interpreter names the checker needs that this Triton lacks or changed (empty when all are as expected;
    asked outside a :func:`watch` block, whose hooks stand in for them)."""
    try:
        targets = _targets(classes=True)
    except (ImportError, AttributeError) as e:
        return [f"triton.runtime.interpreter: {e}"]
    out = []
    for owner, name, params in _HOOKS:
        fn = getattr(targets[owner], name, None)
        if fn is None:
            out.append(f"{owner}.{name}: missing")
            continue
        fn = getattr(fn, "__func__", fn)
        got = tuple(p.name for p in inspect.signature(fn).parameters.values())
        if got != params:
            out.append(f"{owner}.{name}: parameters {got}, expected {params}")
    return out


class _Extent:
    """Which byte addresses a tensor argument's elements occupy (its shape and strides), and its storage's span."""

    def __init__(self, name: str, tensor):
        import torch

        t = tensor.base if not isinstance(tensor, torch.Tensor) and hasattr(tensor, "base") else tensor
        self.name, self.ptr, self.esize = name, int(t.data_ptr()), int(t.element_size())
        storage = t.untyped_storage()
        self.storage = (int(storage.data_ptr()), int(storage.data_ptr()) + int(storage.nbytes()))
        dims = sorted(((int(n), int(s)) for n, s in zip(t.shape, t.stride()) if n > 1 and s != 0),
                      key=lambda d: -d[1])
        self.dims, self.dense = dims, True
        for i, (_, s) in enumerate(dims):
            inner = sum((n - 1) * st for n, st in dims[i + 1:]) + 1
            self.dense &= s >= inner and s > 0
        self.span = sum((n - 1) * s for n, s in dims) + 1 if t.numel() else 0
        self.gapless = self.dense and self.span == t.numel()  # every slot of the span is an element
        self.traffic = TensorTraffic(name, str(t.dtype).replace("torch.", ""), tuple(t.shape), tuple(t.stride()),
                                     t.numel() * self.esize)

    def contains(self, addrs: np.ndarray, size: int) -> np.ndarray:
        """Whether each access of ``size`` bytes at ``addrs`` lies inside one of the tensor's elements."""
        off = addrs.astype(np.int64) - self.ptr
        ok = (off >= 0) & (off + size <= self.span * self.esize) & (off // self.esize == (off + size - 1) // self.esize)
        if self.gapless or not self.dense:
            return ok
        rem = np.where(ok, off // self.esize, 0)
        for n, s in self.dims:
            q = rem // s
            ok &= q < n
            rem = rem - q * s
        return ok & (rem == 0)

    def in_storage(self, addrs: np.ndarray) -> np.ndarray:
        return (addrs >= self.storage[0]) & (addrs < self.storage[1])


def _flat_tensors(names, values):
    import torch

    for name, value in zip(names, values):
        if isinstance(value, tuple):
            yield from _flat_tensors([f"{name}[{i}]" for i in range(len(value))], value)
        elif isinstance(value, torch.Tensor) or isinstance(getattr(value, "base", None), torch.Tensor):
            yield name, value


class _Recorder:
    def __init__(self, traffic: Traffic, builder):
        self.traffic, self.builder, self.launch = traffic, builder, None

    def begin(self, executor) -> None:
        fn = getattr(executor, "fn", None)
        self.launch = Launch(getattr(fn, "__name__", "kernel"), len(self.traffic.launches))
        self.launch._tally = RaceTally() if self.traffic.find_races else None
        self.traffic.launches.append(self.launch)

    def args(self, executor, args_hst, kwargs_hst) -> None:
        names = list(executor.arg_names[:len(args_hst)]) + list(kwargs_hst)
        values = list(args_hst) + list(kwargs_hst.values())
        launch = self.launch
        launch._extents = [_Extent(n, v) for n, v in _flat_tensors(names, values)]
        launch.tensors = {e.name: e.traffic for e in launch._extents}

    def end(self) -> None:
        launch = self.launch
        launch.grid = tuple(int(g) for g in getattr(self.builder, "grid_dim", (1, 1, 1)))
        for t in launch.tensors.values():
            t._close()
        race = launch._tally.race(launch.kernel, launch.index, launch.grid, self._element) if launch._tally else None
        launch.races += [race] if race else []
        self.traffic.races += launch.races
        launch._extents, launch._tally = [], None
        self.launch = None

    def _element(self, byte: int) -> tuple[str, int] | None:
        """The launch's tensor argument whose elements' span holds ``byte``, and the byte's element offset in it."""
        return next(((e.name, (byte - e.ptr) // e.esize) for e in self.launch._extents
                     if e.ptr <= byte < e.ptr + e.span * e.esize), None)

    def access(self, op: str, ptrs, mask, check: bool = True, atomic: bool = False,
               orders: tuple[bool, bool] = (False, False)) -> np.ndarray | None:
        """Count one load or store (of an atomic: its store carries ``atomic`` and whether it acquires and releases,
        ``orders``; its load is not tallied for races); returns the mask to execute with (``None``: unchanged)."""
        launch = self.launch
        if launch is None:
            return None
        addrs = np.asarray(ptrs.data).astype(np.uint64)
        m = np.broadcast_to(np.asarray(mask.data if mask is not None else True, dtype=bool), addrs.shape)
        elt = ptrs.get_element_ty()
        size = max(1, int(getattr(elt, "primitive_bitwidth", 8)) // 8)
        sel = addrs[m]
        if sel.size == 0:
            return None
        first = int(sel[0])  # the common case, cheaply: every lane inside the first tensor holding the first lane
        owner = next((i for i, e in enumerate(launch._extents) if e.ptr <= first < e.ptr + e.span * e.esize), None)
        inside = launch._extents[owner].contains(sel, size) if owner is not None else None
        if inside is None or not inside.all():
            owner, inside = self._owner(sel, size)
        target = launch._extents[owner].traffic if owner is not None else launch.tensors.setdefault(
            NO_TENSOR, TensorTraffic(NO_TENSOR, "?", (), (), 0))
        if launch._tally is not None and not (atomic and op == "load"):  # the lanes that run: in bounds
            gx, gy, _ = (int(g) for g in self.builder.grid_dim)
            x, y, z = (int(i) for i in self.builder.grid_idx)
            launch._tally.add(sel[inside], size, x + gx * (y + gy * z),
                              ATOMIC if atomic else STORE if op == "store" else LOAD, *orders)
        key = "loaded_requested" if op == "load" else "stored_requested"
        setattr(target, key, getattr(target, key) + sel.size * size)
        ext = launch._extents[owner] if owner is not None else None
        if ext is not None and size == ext.esize and ext.span <= 1 << 26:  # a per-element tally: cheaper than sorting
            idx = ((sel[inside] - np.uint64(ext.ptr)) // np.uint64(size)).astype(np.int64)
            if op not in target._tally:
                target._tally[op] = (np.zeros(ext.span, dtype=np.int64), size)
            if idx.size:
                lo, hi = int(idx.min()), int(idx.max()) + 1
                target._tally[op][0][lo:hi] += np.bincount(idx - lo, minlength=hi - lo)
            if not inside.all():
                target._addrs[op].append((sel[~inside], size))
        else:
            target._addrs[op].append((sel, size))
        if inside.all() or not check:
            return None
        return self._out_of_bounds(op, addrs, m, sel, inside, owner, size)

    def _owner(self, sel: np.ndarray, size: int) -> tuple[int | None, np.ndarray]:
        """The tensor holding most lanes (the first on a tie), else the storage holding most, else none."""
        extents = self.launch._extents
        hits = [e.contains(sel, size) for e in extents]
        counts = [int(h.sum()) for h in hits]
        if counts and max(counts):
            owner = max(range(len(counts)), key=lambda i: (counts[i], -i))
            return owner, hits[owner]
        stor = [int(e.in_storage(sel).sum()) for e in extents]
        owner = max(range(len(stor)), key=lambda i: (stor[i], -i)) if stor and max(stor) else None
        return owner, np.zeros(sel.shape, dtype=bool)

    def _out_of_bounds(self, op, addrs, m, sel, inside, owner, size) -> np.ndarray:
        launch, traffic = self.launch, self.traffic
        bad = np.zeros(addrs.shape, dtype=bool)
        bad[m] = ~inside
        outside = sel[~inside]
        ext = launch._extents[owner] if owner is not None else None
        others = [e.name for i, e in enumerate(launch._extents) if i != owner and e.contains(outside, size).any()]
        if others:
            where = f"inside {', '.join(others)}"
        elif ext is not None and ext.in_storage(outside).all():
            where = f"in {ext.name}'s storage outside its elements (a neighbour row or padding)"
        else:
            where = "outside every tensor of the launch"
        base = ext.ptr if ext is not None else int(sel[0])
        esize = ext.esize if ext is not None else size
        offsets = (addrs.astype(np.int64) - base) // esize
        record = OutOfBounds(launch.kernel, launch.index, tuple(int(i) for i in self.builder.grid_idx), op,
                             ext.name if ext is not None else None, where, offsets, m.copy(), bad)
        launch.oob_accesses += record.count
        traffic.oob_accesses += record.count
        if traffic.on_oob == "raise":
            raise OutOfBoundsError(record)
        if len(traffic.oob) < traffic.max_records:
            traffic.oob.append(record)
            launch.oob.append(record)
        return m & ~bad


@contextlib.contextmanager
def watch(on_oob: str = "mask", max_records: int = 50, races: bool = False):
    """Count every Triton load and store in the block, per launch and tensor argument; yields a :class:`Traffic`.

    Args:
        on_oob: ``"mask"`` (record an out-of-bounds lane and skip it) or ``"raise"`` (:class:`OutOfBoundsError`
            before the access).
        max_records: out-of-bounds records kept in full (all are counted in ``oob_accesses``).
        races: find each launch's data races (:class:`Race`: a byte one program writes and another reads or writes,
            not both with atomics, unordered by any atomic release and acquire), kept in ``races``; off by default,
            as it keeps every accessed byte of a launch.

    Raises:
        RuntimeError: off Triton's interpreter, inside another ``watch`` block, or when this Triton's interpreter
            lacks the names the checker hooks (:func:`hooks_missing`).
    """
    from fastpath_lib import runtime

    if on_oob not in ("mask", "raise"):
        raise ValueError(f"on_oob must be 'mask' or 'raise', not {on_oob!r}")
    if _active:
        raise RuntimeError("traffic.watch() is already active: nesting is refused (use the outer block's record)")
    missing = hooks_missing()
    if missing:
        import triton

        raise RuntimeError(f"traffic.watch() needs interpreter names this Triton ({triton.__version__}) changed: "
                           + "; ".join(missing))
    if not runtime.interpreter_enabled():
        raise RuntimeError("traffic.watch() counts under Triton's interpreter only (TRITON_INTERPRET=1 before the "
                           "kernels are imported); compiled kernels run on the GPU where it cannot see them")
    from triton.runtime.errors import InterpreterError

    targets = _targets()
    builder, executor = targets["builder"], targets["executor"]
    traffic = Traffic(on_oob=on_oob, max_records=max_records, find_races=races)
    rec = _Recorder(traffic, builder)
    orig = {name: getattr(executor, name) for name in ("__call__", "_init_args_hst")}
    load, store = builder.create_masked_load, builder.create_masked_store
    rmw, cas = builder.create_atomic_rmw, builder.create_atomic_cas

    def masked(handle, keep):
        return handle if keep is None else type(handle)(keep, handle.dtype)

    def hooked_load(ptrs, mask, other, *args, **kwargs):
        return load(ptrs, masked(mask, rec.access("load", ptrs, mask)), other, *args, **kwargs)

    def hooked_store(ptrs, value, mask, *args, **kwargs):
        return store(ptrs, value, masked(mask, rec.access("store", ptrs, mask)), *args, **kwargs)

    def hooked_rmw(op, ptr, val, mask, sem, scope):  # an atomic reads and writes: counted as both
        rec.access("load", ptr, mask, check=False, atomic=True)
        keep = rec.access("store", ptr, mask, atomic=True, orders=atomic_orders(sem, scope))
        return rmw(op, ptr, val, masked(mask, keep), sem, scope)

    def hooked_cas(ptr, cmp, val, sem, scope):  # no mask to drop a lane from: an out-of-bounds lane raises
        acquire, release = atomic_orders(sem, scope)
        rec.access("load", ptr, None, check=False, atomic=True)
        n = traffic.oob_accesses
        rec.access("store", ptr, None, atomic=True, orders=(acquire, False))
        if traffic.oob_accesses > n:
            raise OutOfBoundsError(traffic.oob[-1]) if traffic.oob else RuntimeError("out-of-bounds atomic_cas")
        out = cas(ptr, cmp, val, sem, scope)
        if release and rec.launch is not None and rec.launch._tally is not None:  # it wrote where it found cmp
            rec.launch._tally.release_last(np.broadcast_to(np.asarray(out.data) == np.asarray(cmp.data),
                                                           np.shape(ptr.data)))
        return out

    def hooked_call(self, *args, **kwargs):
        rec.begin(self)
        try:
            return orig["__call__"](self, *args, **kwargs)
        except InterpreterError as e:  # the interpreter wraps what a kernel raises: unwrap the checker's own error
            if isinstance(e.__cause__, OutOfBoundsError):
                raise e.__cause__ from None
            raise
        finally:
            rec.end()

    def hooked_init(self, args_dev, kwargs):
        args_hst, kwargs_hst = orig["_init_args_hst"](self, args_dev, kwargs)
        rec.args(self, args_hst, kwargs_hst)
        return args_hst, kwargs_hst

    had = {name: name in vars(builder) for name in ("create_masked_load", "create_masked_store", "create_atomic_rmw",
                                                       "create_atomic_cas")}
    _active.append(traffic)
    try:
        builder.create_masked_load, builder.create_masked_store = hooked_load, hooked_store
        builder.create_atomic_rmw, builder.create_atomic_cas = hooked_rmw, hooked_cas
        executor.__call__, executor._init_args_hst = hooked_call, hooked_init
        yield traffic
    finally:
        for name, value in orig.items():
            setattr(executor, name, value)
        for name, fn in (("create_masked_load", load), ("create_masked_store", store), ("create_atomic_rmw", rmw),
                         ("create_atomic_cas", cas)):
            if had[name]:
                setattr(builder, name, fn)
            else:
                vars(builder).pop(name, None)
        _active.remove(traffic)
