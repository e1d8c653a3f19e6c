"""When the Triton RMSNorm fast path runs, and why it does not.

In words: the Triton kernels run when **all** of these hold, and ``torch.nn.functional.rms_norm`` runs otherwise.

* *mode*: the fallback is not forced (:func:`fastpath_lib.force_fallback`, ``FASTPATH_FORCE_FALLBACK=1``); no CUDA
  graph is being captured (not yet verified under capture); in backward, no higher-order graph is requested
  (``create_graph=True`` takes the differentiable fallback);
* *device*: the input is on CUDA, or on the CPU while Triton's interpreter is on (``TRITON_INTERPRET=1``);
* *architecture*: on CUDA, compute capability 8.0 (Ampere) or newer;
* *dtype*: input fp16, bf16 or fp32; weight absent or one of those three (the output is always the input's dtype);
* *shape*: valid arguments (invalid ones go to the fallback, which raises its own error), normalized over the last
  dimension only, at most ``MAX_COLS`` columns, not empty, and at least ``min_rows`` rows (8 under the interpreter,
  where there is no speed to protect; per architecture on CUDA, conservative until a GPU sweep sets it);
* *stride*: last dimension contiguous, and the leading dimensions collapse to rows one stride apart (transposed and
  non-viewable inputs fall back);
* *alignment*: input and weight data pointers, and the row stride in bytes, multiples of ``ALIGN_BYTES`` (16).

Modes that do *not* force the fallback, with why: autograd (there is a Triton backward), ``torch.compile`` (the op is
opaque and decides at run time; on fake tensors alignment is reported as unknown), deterministic-algorithms mode
(both kernels are bitwise deterministic), autocast (the op carries the same autocast policy as ``F.rms_norm``, so the
kernels see already-cast inputs).

This module imports torch only, never Triton: it is tested on any machine.
"""

from __future__ import annotations

import dataclasses
import os

import torch

from fastpath_lib import runtime
from fastpath_lib.eligibility import UNKNOWN, Boundary, Condition, Predicate

__all__ = ["MAX_COLS", "ALIGN_BYTES", "MIN_CAPABILITY", "INTERPRETER_MIN_ROWS", "CUDA_MIN_ROWS", "DEFAULT_CUDA_MIN_ROWS",
           "SUPPORTED_DTYPES", "ALLOWED_MODES", "Limits", "RMSNormCall", "limits_for", "make_call", "PREDICATE",
           "BASE_CASE", "default_eps"]

MAX_COLS = 16384
ALIGN_BYTES = 16
MIN_CAPABILITY = (8, 0)
INTERPRETER_MIN_ROWS = 8
#: Row threshold per CUDA architecture, set from a recorded GPU sweep (``results/``); none is recorded yet.
CUDA_MIN_ROWS: dict[tuple[int, int], int] = {}
#: Used for architectures without a recorded sweep: conservative, so small launch-bound calls keep the old path.
DEFAULT_CUDA_MIN_ROWS = 1024
SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
FORCE_ENV = "FASTPATH_FORCE_FALLBACK"

#: Execution modes that keep the fast path, with the reason it is safe there.
ALLOWED_MODES = {
    "autograd": "forward saves inputs; the Triton backward computes dx and a deterministic dw",
    "torch.compile": "custom_op with register_fake: opaque to the compiler, route decided at run time",
    "deterministic algorithms": "both kernels are bitwise deterministic (fixed-order dw reduction)",
    "autocast": "the op carries F.rms_norm's autocast policy, so kernels see already-cast inputs",
}

_forced = False  # set by fastpath_lib.force_fallback()


def set_forced(value: bool) -> bool:
    """Set the process-wide force-fallback flag; returns the previous value."""
    global _forced
    prev, _forced = _forced, bool(value)
    return prev


def forced() -> bool:
    """Whether the fallback is forced by the context manager or by ``FASTPATH_FORCE_FALLBACK``."""
    return _forced or os.environ.get(FORCE_ENV, "0").strip().lower() in ("1", "true", "yes", "on")


def default_eps(dtype: torch.dtype) -> float:
    """``F.rms_norm``'s default eps: the machine epsilon of the dtype it computes in (fp32 for fp16/bf16/fp32)."""
    opmath = torch.float64 if dtype == torch.float64 else torch.float32
    return torch.finfo(opmath).eps


@dataclasses.dataclass(frozen=True)
class Limits:
    """The numeric limits in force for one device and mode."""

    max_cols: int = MAX_COLS
    min_rows: int = INTERPRETER_MIN_ROWS
    align_bytes: int = ALIGN_BYTES
    min_capability: tuple[int, int] = MIN_CAPABILITY
    source: str = "interpreter"


def limits_for(device: torch.device | str | None = None, *, interpret: bool | None = None,
               capability: tuple[int, int] | None = None) -> Limits:
    """Limits for ``device`` (default: CUDA if present): the row threshold depends on the architecture."""
    interpret = runtime.interpreter_enabled() if interpret is None else interpret
    dev = torch.device(device) if device is not None else torch.device("cuda" if runtime.cuda_available() else "cpu")
    if dev.type == "cuda" and not interpret:
        cap = capability or _capability(dev)
        if cap in CUDA_MIN_ROWS:
            return Limits(min_rows=CUDA_MIN_ROWS[cap], source=f"sweep for sm_{cap[0]}{cap[1]}")
        return Limits(min_rows=DEFAULT_CUDA_MIN_ROWS, source=f"conservative default (no sweep for sm_{cap[0]}{cap[1]})")
    return Limits()


def _capability(dev: torch.device) -> tuple[int, int]:
    try:
        return tuple(torch.cuda.get_device_capability(dev))
    except Exception:
        return (0, 0)


@dataclasses.dataclass(frozen=True)
class RMSNormCall:
    """Everything the predicate looks at for one call (tensors plus the execution context)."""

    input: torch.Tensor
    normalized_shape: tuple[int, ...]
    weight: torch.Tensor | None
    eps: float | None
    limits: Limits
    interpret: bool
    capability: tuple[int, int] | None
    forced: bool = False
    capturing: bool = False
    create_graph: bool = False
    device_type: str = ""  # the input's device type; a separate field so tests can probe other devices

    def __post_init__(self):
        if not self.device_type:
            object.__setattr__(self, "device_type", self.input.device.type)


def make_call(input: torch.Tensor, normalized_shape, weight: torch.Tensor | None = None, eps: float | None = None, *,
              create_graph: bool = False) -> RMSNormCall:
    """Build the predicate's context from a call's arguments and the current execution state."""
    interpret = runtime.interpreter_enabled()
    cap = _capability(input.device) if input.device.type == "cuda" else None
    capturing = False
    if input.device.type == "cuda":
        try:
            capturing = bool(torch.cuda.is_current_stream_capturing())
        except Exception:
            capturing = False
    return RMSNormCall(input, tuple(normalized_shape), weight, eps, limits_for(input.device, interpret=interpret,
                       capability=cap), interpret, cap, forced(), capturing, create_graph)


def _is_fake(t: torch.Tensor) -> bool:
    from torch._subclasses.fake_tensor import is_fake

    return t.device.type == "meta" or is_fake(t)


def _rows_cols(c: RMSNormCall) -> tuple[int, int]:
    n = c.input.shape[-1] if c.input.dim() else 1
    return (c.input.numel() // n if n else 0), n


def _row_stride(t: torch.Tensor) -> int | None:
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


# --- the checks: each returns None when it holds, else "<actual>, <required>" ---------------------------------------

def _check_forced(c):
    return "fallback forced (force_fallback() or FASTPATH_FORCE_FALLBACK=1), need not forced" if c.forced else None


def _check_capture(c):
    return "a CUDA graph is being captured, need no capture (fast path not verified there)" if c.capturing else None


def _check_grad_order(c):
    return "create_graph=True (higher-order gradient), need first-order backward" if c.create_graph else None


def _check_device(c):
    dev = c.device_type
    if dev == "cuda" and not c.interpret:
        return None
    if dev == "cpu" and c.interpret:
        return None
    if dev == "cpu":
        return "cpu tensor without TRITON_INTERPRET=1, need cuda (or cpu under the Triton interpreter)"
    return f"{dev} tensor{' under the interpreter' if c.interpret else ''}, need cuda (or cpu under the interpreter)"


def _check_arch(c):
    if c.device_type != "cuda" or c.interpret:
        return None
    cap = c.capability or (0, 0)
    if tuple(cap) >= c.limits.min_capability:
        return None
    need = c.limits.min_capability
    return f"sm_{cap[0]}{cap[1]}, need sm_{need[0]}{need[1]} or newer"


def _names(dtypes):
    return ", ".join(str(d).replace("torch.", "") for d in dtypes)


def _check_dtype(c):
    if c.input.dtype in SUPPORTED_DTYPES:
        return None
    return f"input {str(c.input.dtype).replace('torch.', '')}, need one of {_names(SUPPORTED_DTYPES)}"


def _check_weight_dtype(c):
    if c.weight is None or c.weight.dtype in SUPPORTED_DTYPES:
        return None
    return f"weight {str(c.weight.dtype).replace('torch.', '')}, need none or one of {_names(SUPPORTED_DTYPES)}"


def _check_arguments(c):
    ns, x, w = c.normalized_shape, c.input, c.weight
    if not ns:
        return "normalized_shape is empty, need at least one dim (the fallback raises)"
    if tuple(x.shape[-len(ns):]) != ns or x.dim() < len(ns):
        return f"input shape {list(x.shape)}, need it to end in {list(ns)} (the fallback raises)"
    if w is not None and tuple(w.shape) != ns:
        return f"weight shape {list(w.shape)}, need {list(ns)} (the fallback raises)"
    if w is not None and w.device != x.device:
        return f"weight on {w.device}, need the input's device {x.device} (the fallback raises)"
    return None


def _check_norm_dims(c):
    k = len(c.normalized_shape)
    return None if k == 1 else f"normalizes over {k} dims, need the last dim only"


def _check_cols(c):
    n = c.input.shape[-1] if c.input.dim() else 1
    return None if n <= c.limits.max_cols else f"{n} columns, need <= {c.limits.max_cols}"


def _check_non_empty(c):
    return None if c.input.numel() > 0 else f"input has {c.input.numel()} elements, need > 0"


def _check_min_rows(c):
    rows, _ = _rows_cols(c)
    if rows >= c.limits.min_rows:
        return None
    return f"{rows} rows, need >= {c.limits.min_rows} ({c.limits.source})"


def _check_last_contig(c):
    x = c.input
    if x.dim() == 0 or x.shape[-1] <= 1 or x.stride(-1) == 1:
        return None
    return f"last-dim stride {x.stride(-1)}, need 1 (e.g. a transposed input)"


def _check_row_stride(c):
    if _row_stride(c.input) is not None:
        return None
    return f"leading strides {list(c.input.stride()[:-1])} for sizes {list(c.input.shape[:-1])} do not collapse " \
           f"to one row stride, need a view as [rows, cols]"


def _ptr_misalignment(t: torch.Tensor, align: int) -> int | None:
    return None if _is_fake(t) else t.data_ptr() % align


def _check_input_align(c):
    if c.input.numel() == 0:
        return None
    m = _ptr_misalignment(c.input, c.limits.align_bytes)
    if m is None:
        return UNKNOWN + "input data pointer of a fake tensor"
    return None if m == 0 else f"input data pointer {m} bytes past a {c.limits.align_bytes}-byte boundary, need 0"


def _check_stride_align(c):
    rows, _ = _rows_cols(c)
    stride = _row_stride(c.input)
    if rows <= 1 or stride is None or (c.input.shape[-1] > 1 and c.input.stride(-1) != 1):
        return None  # not a row layout at all: row_stride / last_dim_contiguous report it
    nbytes = stride * c.input.element_size()
    a = c.limits.align_bytes
    return None if nbytes % a == 0 else f"row stride {stride} elements = {nbytes} bytes, need a multiple of {a} bytes"


def _check_weight_align(c):
    if c.weight is None or c.weight.numel() == 0:
        return None
    m = _ptr_misalignment(c.weight, c.limits.align_bytes)
    if m is None:
        return UNKNOWN + "weight data pointer of a fake tensor"
    return None if m == 0 else f"weight data pointer {m} bytes past a {c.limits.align_bytes}-byte boundary, need 0"


def _align_elems(dtype: torch.dtype) -> int:
    return ALIGN_BYTES // torch.empty((), dtype=dtype).element_size()


def _rows(limits: Limits, delta: int) -> dict:
    return {"rows": limits.min_rows + delta}


#: The eligible base case every boundary changes one thing of (see :mod:`fastpath_lib.boundary`).
BASE_CASE = {"rows": 16, "cols": 64, "dtype": torch.float32, "weight": "same", "layout": "contiguous"}

PREDICATE = Predicate("rmsnorm", [
    Condition("forced", "the fallback is not forced", _check_forced, "mode",
              "lets users and reviewers compare routes, and switch the fast path off in production",
              (Boundary("not forced", {}, True), Boundary("forced", {"forced": True}, False))),
    Condition("cuda_graph_capture", "no CUDA graph capture in progress", _check_capture, "mode",
              "the launcher has not been verified under stream capture on a GPU",
              (Boundary("not capturing", {}, True), Boundary("capturing", {"capturing": True}, False))),
    Condition("grad_order", "first-order backward only", _check_grad_order, "mode",
              "the Triton backward is not itself differentiable; create_graph needs the composite fallback",
              (Boundary("first order", {}, True), Boundary("create_graph", {"create_graph": True}, False))),
    Condition("device", "CUDA tensor, or CPU tensor under TRITON_INTERPRET=1", _check_device, "device",
              "the kernels are Triton; on a CPU only the interpreter can run them",
              (Boundary("current device", {}, True),
               Boundary("cpu, interpreter off", {"device": "cpu", "interpret": False}, False))),
    Condition("architecture", "compute capability >= 8.0 on CUDA", _check_arch, "architecture",
              "bf16 and the launch settings were chosen for Ampere and newer",
              tuple(Boundary(f"sm_{a}{b}", {"device_type": "cuda", "interpret": False, "capability": (a, b)},
                             (a, b) >= MIN_CAPABILITY) for a, b in ((7, 5), (8, 0), (8, 6), (9, 0)))),
    Condition("dtype", "input dtype fp16, bf16 or fp32", _check_dtype, "dtype",
              "the kernel accumulates in fp32; fp64 would lose precision and complex is not written",
              (Boundary("fp32", {"dtype": torch.float32}, True), Boundary("fp16", {"dtype": torch.float16}, True),
               Boundary("bf16", {"dtype": torch.bfloat16}, True), Boundary("fp64", {"dtype": torch.float64}, False))),
    Condition("weight_dtype", "weight absent, or fp16, bf16 or fp32", _check_weight_dtype, "dtype",
              "the kernel reads the weight as fp32; fp64 weights keep the reference's precision in the fallback",
              (Boundary("no weight", {"weight": None}, True), Boundary("fp32 weight", {"weight": torch.float32}, True),
               Boundary("fp16 weight", {"weight": torch.float16}, True),
               Boundary("fp64 weight", {"weight": torch.float64}, False))),
    Condition("arguments", "normalized_shape matches the input's last dims and the weight", _check_arguments,
              "shape", "invalid calls must raise F.rms_norm's own exception, so they go to the fallback",
              (Boundary("valid", {}, True), Boundary("weight shape mismatch", {"weight_cols": -1}, False),
               Boundary("normalized_shape mismatch", {"normalized_shape": "wrong"}, False))),
    Condition("normalized_dims", "normalized over the last dimension only", _check_norm_dims, "shape",
              "the kernel reduces one row; multi-dim normalization is left to the reference",
              (Boundary("1 dim", {}, True), Boundary("2 dims", {"norm_dims": 2}, False))),
    Condition("cols", f"row width <= {MAX_COLS} columns", _check_cols, "shape",
              "one program holds a whole row in registers; wider rows would spill",
              (Boundary("cols=max", lambda lim: {"cols": lim.max_cols, "rows": lim.min_rows}, True),
               Boundary("cols=max+16B", lambda lim: {"cols": lim.max_cols + 4, "rows": lim.min_rows}, False),
               Boundary("cols=max+1", lambda lim: {"cols": lim.max_cols + 1, "rows": lim.min_rows}, False))),
    Condition("non_empty", "at least one element", _check_non_empty, "shape",
              "nothing to launch; the reference handles empty tensors",
              (Boundary("rows=0", {"rows": 0}, False), Boundary("cols=0", {"cols": 0}, False))),
    Condition("min_rows", "rows >= the row threshold for the architecture", _check_min_rows, "shape",
              "below it the launch overhead outweighs the saving (protects the baseline on small calls)",
              (Boundary("threshold-1", lambda lim: _rows(lim, -1), False),
               Boundary("threshold", lambda lim: _rows(lim, 0), True),
               Boundary("threshold+1", lambda lim: _rows(lim, 1), True))),
    Condition("last_dim_contiguous", "last dimension has stride 1", _check_last_contig, "stride",
              "the kernel loads each row as one contiguous block",
              (Boundary("contiguous", {}, True), Boundary("transposed", {"layout": "transposed"}, False))),
    Condition("row_stride", "leading dims collapse to one row stride", _check_row_stride, "stride",
              "the kernel addresses row r at r * row_stride",
              (Boundary("3-d contiguous", {"layout": "batched"}, True),
               Boundary("row slice of a wider buffer", {"layout": "row_slice", "pad": 4}, True),
               Boundary("every other row", {"layout": "step"}, True),
               Boundary("3-d permuted", {"layout": "permuted"}, False))),
    Condition("input_alignment", f"input data pointer a multiple of {ALIGN_BYTES} bytes", _check_input_align,
              "alignment", "Triton specialises on 16-byte alignment for vector loads; misaligned inputs are slower",
              (Boundary("offset 0", {"offset": 0}, True), Boundary("offset 16 bytes", {"offset": 4}, True),
               Boundary("offset 4 bytes", {"offset": 1}, False))),
    Condition("row_stride_alignment", f"row stride a multiple of {ALIGN_BYTES} bytes", _check_stride_align,
              "alignment", "every row must start aligned for vector loads",
              (Boundary("cols=15", {"cols": 15}, False), Boundary("cols=16", {"cols": 16}, True),
               Boundary("cols=17", {"cols": 17}, False), Boundary("fp16 cols=8", {"cols": 8, "dtype": torch.float16},
                                                                  True),
               Boundary("fp16 cols=12", {"cols": 12, "dtype": torch.float16}, False),
               Boundary("slice, stride 66", {"layout": "row_slice", "pad": 2}, False),
               Boundary("slice, stride 68", {"layout": "row_slice", "pad": 4}, True))),
    Condition("weight_alignment", f"weight data pointer a multiple of {ALIGN_BYTES} bytes", _check_weight_align,
              "alignment", "the weight is loaded with vector loads too",
              (Boundary("weight offset 0", {"weight_offset": 0}, True),
               Boundary("weight offset 4 bytes", {"weight_offset": 1}, False))),
])



