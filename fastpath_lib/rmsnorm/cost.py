"""RMSNorm's cost model, beside its spec: the bytes a call must move and the launcher's choice of binary.

Both are read off the problem and the launchers' own rule (:mod:`fastpath_lib.rmsnorm.launch`), without a GPU and
without timing anything: :mod:`fastpath_lib.rmsnorm.spec` hands them to the pipeline (``bytes_moved``,
``specialization``), and the bench reads them from here (:mod:`fastpath_lib.bench.timing` re-exports
:func:`bytes_moved` for the lessons and the callers that import it from there).
"""

from __future__ import annotations

import torch

__all__ = ["bytes_moved", "binary"]


def bytes_moved(rows: int, cols: int, dtype: torch.dtype, pass_: str, weight: bool = True) -> int:
    """Minimum bytes a call must move: each input read once, each output written once.

    Args:
        rows, cols, dtype: the case.
        pass_: ``"forward"`` (x, w in; y out) or ``"backward"`` (forward, then dy, x, w in; dx, dw out).
        weight: whether there is a weight.

    Returns:
        bytes (the fp32 partial-dw scratch of the Triton backward is not counted: it is the kernel's cost, not the
        problem's).

    >>> bytes_moved(4, 8, torch.float16, "forward")
    144
    """
    es = torch.empty((), dtype=dtype).element_size()
    act = rows * cols * es
    w = cols * es if weight else 0
    fwd = 2 * act + w
    return fwd if pass_ == "forward" else fwd + 3 * act + 2 * w


def binary(kernel: str, rows: int, cols: int, dtype, sms: int | None = None) -> dict | None:
    """The RMSNorm binary a 16-byte-aligned launch on ``rows x cols`` of ``dtype`` compiles, from the launchers' own
    rules (:mod:`fastpath_lib.rmsnorm.launch`): kernel (``"fwd"`` or ``"bwd"``) x dtype x ``BLOCK_SIZE`` x
    ``num_warps`` x ``HAS_WEIGHT`` x ``ROWS_PER_PROGRAM`` x ``VEC``; ``None`` for rows wider than the kernels take.
    The launchers' choice only: Triton's JIT splits it further by its marks on the integer arguments (``n_rows``,
    the strides, ``n_cols``: a multiple of 16, the value 1, or neither), which this dict leaves out.
    The backward's rows per program depend on the GPU's multiprocessor count ``sms``: ``None`` (unknown) without it.

    >>> binary("fwd", 8, 4096, "float16")["BLOCK_SIZE"], binary("fwd", 8, 10 ** 6, "float16")
    (4096, None)
    """
    from fastpath_lib.rmsnorm import launch  # imported on use: the interpreter opt-in comes first
    from fastpath_lib.rmsnorm.predicate import ALIGN_BYTES, MAX_COLS

    if cols > MAX_COLS:
        return None
    dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    block, warps = launch.launch_settings(cols, "forward" if kernel == "fwd" else "backward")
    if kernel == "fwd":
        rpp = launch.forward_rows_per_program(cols)
    else:
        rpp = launch.backward_grid(rows, 4 * sms, launch.backward_max_rows(cols, dtype.itemsize))[0] if sms else None
    return {"kernel": kernel, "dtype": str(dtype).replace("torch.", ""), "BLOCK_SIZE": block, "num_warps": warps,
            "HAS_WEIGHT": True, "ROWS_PER_PROGRAM": rpp, "VEC": ALIGN_BYTES // dtype.itemsize}
