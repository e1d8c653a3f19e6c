"""The interpreter's traffic and bounds checker (fastpath_lib.traffic): counts, out-of-bounds reports, hooks."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

from fastpath_lib import runtime, traffic

interpreter = pytest.mark.skipif(not runtime.interpreter_enabled(), reason="counts under Triton's interpreter only")


@triton.jit
def copy_rows(X_ptr, Y_ptr, X_row_stride, Y_row_stride, n_cols, EXTRA: tl.constexpr, SHIFT: tl.constexpr,
              BLOCK: tl.constexpr):
    """y[row] = x[row] with one program per row; EXTRA widens the mask (an off-by-one), SHIFT moves the reads."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols + EXTRA
    v = tl.load(X_ptr + SHIFT + row * X_row_stride + cols, mask=mask, other=0.0)
    tl.store(Y_ptr + row * Y_row_stride + cols, v, mask=cols < n_cols)


@triton.jit
def scale_rows(X_ptr, W_ptr, Y_ptr, n_cols, BLOCK: tl.constexpr):
    """y[row] = x[row] * w: every program reads the whole weight."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    w = tl.load(W_ptr + cols, mask=mask)
    tl.store(Y_ptr + row * n_cols + cols, tl.load(X_ptr + row * n_cols + cols, mask=mask) * w, mask=mask)


def _copy(x, y, *, extra=0, shift=0, x_stride=None, y_stride=None):
    n_rows, n_cols = y.shape
    copy_rows[(n_rows,)](x, y, x.stride(0) if x_stride is None else x_stride,
                         y.stride(0) if y_stride is None else y_stride, n_cols, EXTRA=extra, SHIFT=shift,
                         BLOCK=triton.next_power_of_2(n_cols + extra))


@interpreter
def test_a_correct_kernel_counts_each_byte_once():
    x, y = torch.randn(5, 12), torch.empty(5, 12)
    with traffic.watch() as t:
        _copy(x, y)
    assert torch.equal(x, y)
    (launch,) = t.launches
    assert (launch.kernel, launch.grid) == ("copy_rows", (5, 1, 1))
    xs, ys = launch.tensors["X_ptr"], launch.tensors["Y_ptr"]
    assert (xs.loaded_requested, xs.loaded_distinct, xs.stored_distinct, xs.max_loads_per_byte) == (240, 240, 0, 1)
    assert (ys.stored_requested, ys.stored_distinct, ys.loaded_distinct, ys.max_stores_per_byte) == (240, 240, 0, 1)
    assert (t.counted_bytes, t.requested_bytes, t.oob_accesses, t.oob) == (480, 480, 0, [])


@interpreter
def test_a_weight_read_by_every_program_is_requested_per_program_and_distinct_once():
    x, w, y = torch.randn(6, 16), torch.randn(16), torch.empty(6, 16)
    with traffic.watch() as t:
        scale_rows[(6,)](x, w, y, 16, BLOCK=16)
    ws = t.launches[0].tensors["W_ptr"]
    assert (ws.loaded_requested, ws.loaded_distinct, ws.max_loads_per_byte) == (6 * 64, 64, 6)
    assert t.counted_bytes == 2 * 6 * 64 + 64 and t.requested_bytes == 2 * 6 * 64 + 6 * 64


@interpreter
def test_an_off_by_one_mask_is_reported_at_the_row_past_the_tensor():
    """Rows 0-3 of a contiguous x read their neighbour's first element (inside x); row 4 reads past x's last row,
    into the next row of the storage x is a view of."""
    buf = torch.randn(6, 12)
    x, y = buf[:5], torch.empty(5, 12)
    with traffic.watch() as t:
        _copy(x, y, extra=1)
    (r,) = t.oob
    assert (r.kernel, r.launch, r.program, r.op, r.tensor) == ("copy_rows", 0, (4, 0, 0), "load", "X_ptr")
    assert "storage outside its elements" in r.where and r.offsets[r.bad].tolist() == [60] and r.count == 1
    assert r.mask.sum() == 13 and t.oob_accesses == 1
    assert "program id (4, 0, 0)" in str(r) and "[60]" in str(r) and "X_ptr" in str(r)


@interpreter
def test_an_off_by_one_mask_into_padded_rows_is_reported_in_every_program():
    x, y = torch.randn(4, 16)[:, :12], torch.empty(4, 12)
    with traffic.watch() as t:
        _copy(x, y, extra=1)
    assert [r.program[0] for r in t.oob] == [0, 1, 2, 3]
    assert [r.offsets[r.bad].tolist() for r in t.oob] == [[12], [28], [44], [60]]


@interpreter
def test_an_access_into_another_tensor_of_the_launch_names_it():
    buf = torch.randn(2 * 4 * 8)
    x, y = buf[:32].view(4, 8), buf[32:].view(4, 8)
    with traffic.watch() as t:
        _copy(x, y, extra=1)
    (r,) = t.oob
    assert (r.tensor, r.where, r.program) == ("X_ptr", "inside Y_ptr", (3, 0, 0))


@interpreter
def test_a_stride_mix_up_is_reported_and_its_stores_are_dropped():
    """y (4 x 12, contiguous) written with x's row stride (16): row 3 lands past y's last element (rows 1-2 inside)."""
    buf = torch.zeros(5, 12)
    x, y = torch.randn(4, 16)[:, :12], buf[:4]
    with traffic.watch() as t:
        _copy(x, y, y_stride=x.stride(0))
    (r,) = t.oob
    assert (r.program, r.op, r.tensor, r.offsets[r.bad].tolist()) == ((3, 0, 0), "store", "Y_ptr", list(range(48, 60)))
    assert t.oob_accesses == 12 and torch.all(buf[4] == 0)  # the out-of-bounds stores were dropped


@interpreter
def test_a_pointer_into_no_tensor_is_filed_under_no_tensor_and_raises_when_asked():
    x, y = torch.randn(2, 8), torch.empty(2, 8)
    with traffic.watch() as t:
        _copy(x, y, shift=1 << 24)
    assert t.oob_accesses == 16 and all(r.tensor is None for r in t.oob)
    assert t.oob[0].where == "outside every tensor of the launch"
    assert t.launches[0].tensors[traffic.NO_TENSOR].loaded_requested == 64
    with pytest.raises(traffic.OutOfBoundsError, match="program id \\(0, 0, 0\\)") as e:
        with traffic.watch(on_oob="raise"):
            _copy(x, y, shift=1 << 24)
    assert e.value.record.op == "load"
    _assert_unhooked()


@interpreter
def test_records_are_capped_and_every_lane_still_counted():
    x, y = torch.randn(8, 16)[:, :12], torch.empty(8, 12)
    with traffic.watch(max_records=3) as t:
        _copy(x, y, extra=2)
    assert len(t.oob) == 3 and t.oob_accesses == 16 and "16 out-of-bounds lanes in all" in t.report()


@interpreter
@pytest.mark.parametrize("weight", [True, False])
def test_the_kits_kernels_stay_in_bounds_and_count_the_model(weight):
    """RMSNorm and the fused op, forward and backward, on an odd shape (9 x 124): each tensor read or written once."""
    from fastpath_lib import fused_add_rms_norm, rms_norm

    x = torch.randn(9, 124, requires_grad=True)
    r = torch.randn(9, 124, requires_grad=True)
    w = torch.randn(124, requires_grad=True) if weight else None
    row, wb = 9 * 124 * 4, 124 * 4 if weight else 0
    with traffic.watch(races=True) as t:
        rms_norm(x, (124,), w).sum().backward()
        y, s = fused_add_rms_norm(x, r, w)
        (y.sum() + s.sum()).backward()
    assert [launch.kernel for launch in t.launches] == ["rms_norm_fwd_kernel", "rms_norm_bwd_kernel",
                                                         "fused_add_rms_norm_fwd_kernel",
                                                         "fused_add_rms_norm_bwd_kernel"]
    assert t.oob_accesses == 0 and t.races == [], t.report()  # the backward's dw: one partial row per program
    fwd, bwd, ffwd, fbwd = (launch.counted_bytes for launch in t.launches)
    assert fwd == 2 * row + wb and ffwd == 4 * row + wb
    partial = t.launches[1].tensors["DW_partial_ptr"].stored_distinct
    assert bwd == 3 * row + wb + partial and (partial > 0) == weight
    fpartial = t.launches[3].tensors["DW_partial_ptr"].stored_distinct  # reads dy, ds, x, r and w; writes dx
    assert fbwd == 5 * row + wb + fpartial and (fpartial > 0) == weight


def _assert_unhooked():
    from triton.runtime import interpreter

    builder = interpreter.interpreter_builder
    for name in ("create_masked_load", "create_masked_store", "create_atomic_rmw", "create_atomic_cas"):
        assert name not in vars(builder), name
    for name in ("__call__", "_init_args_hst"):
        assert vars(interpreter.GridExecutor)[name].__qualname__ == f"GridExecutor.{name}", name


@interpreter
def test_hooks_are_restored_on_exit_and_on_error_and_nesting_is_refused():
    _assert_unhooked()  # importing the module changed nothing
    x, y = torch.randn(2, 8), torch.empty(2, 8)
    with pytest.raises(ZeroDivisionError):
        with traffic.watch():
            _copy(x, y)
            1 / 0  # noqa: B018 (the error the block must survive)
    _assert_unhooked()
    with traffic.watch():
        with pytest.raises(RuntimeError, match="nesting is refused"):
            with traffic.watch():
                pass
    _assert_unhooked()
    with traffic.watch() as t:
        pass
    _copy(x, y)  # after the block nothing is counted
    assert t.launches == []


def test_the_hooked_interpreter_names_are_those_of_the_pinned_triton(monkeypatch):
    """Fails loudly when a Triton upgrade renames or re-signs what the checker hooks."""
    assert traffic.hooks_missing() == [], traffic.hooks_missing()
    from triton.runtime import interpreter

    monkeypatch.delattr(interpreter.InterpreterBuilder, "create_masked_store")
    assert traffic.hooks_missing() == ["builder.create_masked_store: missing"]
    with pytest.raises(RuntimeError, match="create_masked_store: missing"):
        with traffic.watch():
            pass
    _assert_unhooked()


def test_watch_refuses_compiled_kernels(monkeypatch):
    monkeypatch.setattr(runtime, "interpreter_enabled", lambda: False)
    with pytest.raises(RuntimeError, match="interpreter only"):
        with traffic.watch():
            pass
    with pytest.raises(ValueError, match="on_oob"):
        with traffic.watch(on_oob="ignore"):
            pass


@triton.jit
def histogram(X_ptr, H_ptr, n, N_BINS: tl.constexpr, BLOCK: tl.constexpr):
    """h[x % N_BINS] += 1 with an atomic per element (a read and a write of the bin)."""
    i = tl.arange(0, BLOCK)
    v = tl.load(X_ptr + i, mask=i < n, other=0)
    tl.atomic_add(H_ptr + v % N_BINS, 1, mask=i < n)


@interpreter
@pytest.mark.parametrize("bins, oob", [(4, 0), (5, 4)])
def test_atomics_count_as_a_read_and_a_write_and_are_bounds_checked(bins, oob):
    """Five bins asked of a four-bin histogram: the lanes of bin 4 land past it and are dropped."""
    x, h = torch.arange(20, dtype=torch.int32), torch.zeros(4, dtype=torch.int32)
    with traffic.watch() as t:
        histogram[(1,)](x, h, 20, N_BINS=bins, BLOCK=32)
    hs = t.launches[0].tensors["H_ptr"]
    distinct = 16 + (4 if oob else 0)  # the lanes past the histogram hit one 4-byte slot: counted, not executed
    assert (hs.loaded_requested, hs.stored_requested, hs.loaded_distinct, hs.stored_distinct) == (80, 80, distinct,
                                                                                                  distinct)
    assert t.oob_accesses == oob and all(r.op == "store" and r.tensor == "H_ptr" for r in t.oob)
    assert h.sum().item() == 20 - oob


@triton.jit
def sum_rows(X_ptr, S_ptr, n_cols, HOW: tl.constexpr, BLOCK: tl.constexpr):
    """s += x[row] over the rows, one program per row: a plain load and store of one row (HOW 0), an atomic add (1),
    an atomic add that program 1 reads back (2), or a partial row per program (3)."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(X_ptr + row * n_cols + cols, mask=mask)
    if HOW == 0:
        tl.store(S_ptr + cols, tl.load(S_ptr + cols, mask=mask) + x, mask=mask)
    elif HOW == 3:
        tl.store(S_ptr + row * n_cols + cols, x, mask=mask)
    else:
        tl.atomic_add(S_ptr + cols, x, mask=mask)
        if HOW == 2 and row == 1:
            tl.store(X_ptr + row * n_cols + cols, tl.load(S_ptr + cols, mask=mask), mask=mask)


@interpreter
@pytest.mark.parametrize("how, race", [
    (0, "program id (0, 0, 0) stores element 0 of S_ptr and program id (1, 0, 0) loads it"),
    (1, None),
    (2, "updates atomically element 0 of S_ptr and program id (1, 0, 0) loads it"),
    (3, None),
])
def test_a_byte_one_program_writes_and_another_touches_is_a_race_unless_both_are_atomic(how, race):
    """Issue 41 (attack 9, C6): Triton's interpreter runs a launch's programs one after another, so a plain
    read-modify-write of one buffer by every program gives the exact sum there and loses updates on a GPU. With
    ``races=True`` each launch's first racing byte is named, with both fixes (an atomic, per-program partial rows);
    atomics alone, and rows of their own, do not race. Off by default."""
    x = torch.arange(12, dtype=torch.float32).reshape(4, 3)
    s = torch.zeros(4 * 3 if how == 3 else 3)
    with traffic.watch(races=True) as t:
        sum_rows[(4,)](x.clone(), s, 3, HOW=how, BLOCK=4)
    assert (s.reshape(-1, 3).sum(0) if how == 3 else s).tolist() == x.sum(0).tolist()  # right values, sequentially
    if race is None:
        assert t.races == [] and t.launches[0].races == [], t.report()
        return
    (found,) = t.races
    assert t.launches[0].races == [found] and found.count == 12 and found.tensor == "S_ptr", found
    assert race in str(found) and "tl.atomic_add" in str(found) and "partial" in str(found), str(found)
    assert str(found) in t.report()
    with traffic.watch() as t:
        sum_rows[(4,)](x.clone(), torch.zeros(3), 3, HOW=how, BLOCK=4)
    assert t.races == []


@triton.jit
def synced_sum(X_ptr, S_ptr, P_ptr, LOCK_ptr, n_cols, HOW: tl.constexpr, SEM: tl.constexpr, SCOPE: tl.constexpr,
               BLOCK: tl.constexpr):
    """s += x[row] over the rows, one program per row, with plain loads and stores of s and of the partial rows P:
    under a lock taken with tl.atomic_cas and released with tl.atomic_xchg (HOW 0, Triton's layer-norm tutorial's
    dw), or each program stores its row into P and bumps a counter with tl.atomic_add, and the last to bump it sums P
    into s (HOW 1; HOW 2 stores the row after bumping). SEM and SCOPE are the atomics' memory semantics and scope."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(X_ptr + row * n_cols + cols, mask=mask)
    if HOW == 0:
        while tl.atomic_cas(LOCK_ptr, 0, 1, sem=SEM, scope=SCOPE) == 1:
            pass
        tl.store(S_ptr + cols, tl.load(S_ptr + cols, mask=mask) + x, mask=mask)
        tl.atomic_xchg(LOCK_ptr, 0, sem=SEM, scope=SCOPE)
    else:
        if HOW == 1:
            tl.store(P_ptr + row * n_cols + cols, x, mask=mask)
        done = tl.atomic_add(LOCK_ptr, 1, sem=SEM, scope=SCOPE)
        if HOW == 2:
            tl.store(P_ptr + row * n_cols + cols, x, mask=mask)
        if done == tl.num_programs(0) - 1:
            acc = tl.zeros([BLOCK], dtype=tl.float32)
            for r in range(tl.num_programs(0)):
                acc += tl.load(P_ptr + r * n_cols + cols, mask=mask)
            tl.store(S_ptr + cols, acc, mask=mask)


@interpreter
@pytest.mark.parametrize("how, sem, scope, race", [
    (0, "acq_rel", "gpu", None),
    (0, "relaxed", "gpu", ("program id (0, 0, 0) stores element 0 of S_ptr and program id (1, 0, 0) loads it", 12)),
    (0, "acq_rel", "cta", ("program id (0, 0, 0) stores element 0 of S_ptr and program id (1, 0, 0) loads it", 12)),
    (1, "acq_rel", "gpu", None),
    (1, "relaxed", "gpu", ("program id (0, 0, 0) stores element 0 of P_ptr and program id (3, 0, 0) loads it", 36)),
    (2, "acq_rel", "gpu", ("program id (0, 0, 0) stores element 0 of P_ptr and program id (3, 0, 0) loads it", 36)),
])
def test_accesses_an_atomic_acquire_and_release_order_do_not_race(how, sem, scope, race):
    """Attack 10 (D2): the race rule is one of synchronization, not of access kinds. Plain loads and stores of one
    buffer by every program are ordered, so no race, where a program releases a word (``tl.atomic_xchg``,
    ``tl.atomic_add`` of the default ``sem="acq_rel"``) after them and the next acquires it before its own: a lock
    (Triton's tutorial) or a last-program counter. The same kernels with relaxed atomics, atomics of one program's
    scope (``"cta"``), or a partial row stored after the counter's release, race (the unsynchronized read-modify-write
    of the test above stays a race too). Each byte racing counts (HOW 1 and 2: the rows of P but the last program's)."""
    x = torch.arange(12, dtype=torch.float32).reshape(4, 3)
    s, partial, lock = torch.zeros(3), torch.zeros(4, 3), torch.zeros(1, dtype=torch.int32)
    with traffic.watch(races=True) as t:
        synced_sum[(4,)](x, s, partial, lock, 3, HOW=how, SEM=sem, SCOPE=scope, BLOCK=4)
    assert s.tolist() == x.sum(0).tolist()  # right values, sequentially
    if race is None:
        assert t.races == [], t.report()
        return
    (found,) = t.races  # rows 0-2 of P race with the last program's reads; its own row is program order
    assert race[0] in str(found) and found.count == race[1], str(found)
