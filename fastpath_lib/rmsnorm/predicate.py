"""When the Triton RMSNorm fast path runs, and why it does not.

In words: the Triton kernels run when **all** of these hold, and ``torch.nn.functional.rms_norm`` runs otherwise.

* *mode*: the fallback is not forced (:func:`fastpath_lib.force_fallback`, ``FASTPATH_FORCE_FALLBACK=1``); no CUDA
  graph is being captured, unless the op's capture test passed here by this path (``capture.json``); in backward, no
  higher-order graph is requested (``create_graph=True`` takes the differentiable fallback); no forward-mode AD level
  is active (dual tensors) and no ``torch.func`` transform (vmap, grad, vjp, jvp, jacrev, jacfwd, hessian; and
  functional_call under one) runs: ``F.rms_norm`` has its own rules for them, so those calls behave as it does;
* *tensor kind*: input and weight are plain strided tensors (``torch.Tensor`` or ``nn.Parameter``; the fake and
  functional tensors that ``torch.compile`` and ``torch.export`` trace with count as plain): nested inputs and
  ``__torch_dispatch__`` subclasses take the fallback, which handles them, and a sparse input takes it too and raises
  ``F.rms_norm``'s own error; a DTensor is decided on the local shard that the op's sharding rule
  (:mod:`~fastpath_lib.rmsnorm.sharding`) hands each rank;
* *device*: CUDA with Triton's interpreter off, or CPU with it on (``use_interpreter()``; CUDA under it fails);
* *architecture*: on CUDA (interpreter off), compute capability 8.0 or newer; sm_75 fp16/fp32 in ``allow_sm75()``;
* *dtype*: input fp16, bf16 or fp32; weight absent or one of those three (the output is always the input's dtype);
* *shape*: valid arguments (invalid ones go to the fallback, which raises its own error), normalized over the last
  dimension only, at most ``MAX_COLS`` columns, not empty, and at least ``min_rows`` rows (8 under the interpreter,
  where there is no speed to protect; per architecture on CUDA, conservative until a GPU sweep sets it);
* *stride*: last dimension contiguous, not a channels-last memory format (``F.rms_norm`` keeps those strides; the
  kernel writes rows), the leading dimensions collapse to rows one stride apart, and the weight is contiguous;
* *alignment*: input and weight data pointers, and the row stride in bytes, multiples of ``ALIGN_BYTES`` (16).

Two ways to evaluate the same rules, side by side in this module:

* :func:`eligible` and :func:`runtime_eligible` are the dispatch's decision: booleans only, cheapest and most decisive
  first, short-circuiting, with no strings, environment reads or allocations. A call outside the region costs
  ``F.rms_norm`` plus these booleans. :func:`eligible` holds the conditions a tracer turns into guards, but leaves a
  size the tracer holds symbolically (``torch.export``'s dynamic dims, ``compile(dynamic=True)``) to the op's run time;
  :func:`runtime_eligible` the two only run time knows (data-pointer alignment, CUDA-graph capture).
* :data:`PREDICATE` (through :func:`fastpath_lib.explain`) runs every named condition and says why each one fails.
  A hypothesis test proves the two agree on every case it draws.

The modes that keep the fast path (autograd, ``torch.compile`` and ``torch.export``, deterministic algorithms,
autocast), each with why, are in ``docs/reference.md``.

This module imports torch only, never Triton: it is tested on any machine.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.autograd.forward_ad as _fwad
from torch._subclasses.fake_tensor import is_fake

from fastpath_lib import runtime
from fastpath_lib.eligibility import UNKNOWN, Boundary, Condition, Predicate, for_speed
from fastpath_lib.rmsnorm import capture
from fastpath_lib.rmsnorm.layout import (PLAIN_TYPES, decided, functorch_transform, row_stride, tensor_kind,
                                         traced_rows)
from fastpath_lib.rmsnorm.limits import (ALIGN_BYTES, CUDA_MIN_ROWS, DEFAULT_CUDA_MIN_ROWS, INTERPRETER_MIN_ROWS,
                                         LEAST_MIN_ROWS, MAX_COLS, MIN_CAPABILITY, SUPPORTED_DTYPES, Limits, check_arch,
                                         default_eps, device_capability, limits_for, overriding, sm75_rows)

__all__ = ["MAX_COLS", "ALIGN_BYTES", "MIN_CAPABILITY", "INTERPRETER_MIN_ROWS", "CUDA_MIN_ROWS",
           "DEFAULT_CUDA_MIN_ROWS", "SUPPORTED_DTYPES", "PLAIN_TYPES", "ALLOWED_MODES", "Limits", "RMSNormCall",
           "limits_for", "make_call", "eligible", "runtime_eligible", "tensor_kind", "functorch_transform", "PREDICATE",
           "BASE_CASE", "default_eps", "row_threshold"]

#: Execution modes that keep the fast path, with the reason it is safe there.
ALLOWED_MODES = {
    "autograd": "forward saves inputs; the Triton backward computes dx and a deterministic dw",
    "torch.compile": "static conditions become guards; the custom_op (register_fake) re-checks alignment at run time",
    "deterministic algorithms": "both kernels are bitwise deterministic (fixed-order dw reduction)",
    "autocast": "the op carries F.rms_norm's autocast policy, so kernels see already-cast inputs",
}

_DTYPE_SET = frozenset(SUPPORTED_DTYPES)
_INT_TYPES = frozenset({int, torch.SymInt})
_SHAPE_TYPES = frozenset({list, tuple, torch.Size})
_CHANNELS_LAST = {4: torch.channels_last, 5: torch.channels_last_3d}
_transforms_active = torch._C._are_functorch_transforms_active
_dynamo_compiling = torch.compiler.is_dynamo_compiling
_STRIDED = torch.strided


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
    forward_ad: bool = False  # a forward-mode AD level is active (dual tensors)
    transform: str = ""  # the running torch.func transform, "" for none
    kind: str = ""  # tensor_kind() of input or weight, "" for plain strided tensors

    def __post_init__(self):
        if not self.device_type:
            object.__setattr__(self, "device_type", self.input.device.type)


def make_call(input: torch.Tensor, normalized_shape, weight: torch.Tensor | None = None, eps: float | None = None, *,
              forced: bool = False, create_graph: bool = False) -> RMSNormCall:
    """Build the predicate's context from a call's arguments and the current execution state.

    ``forced`` is the routing state's force-fallback flag (the op passes it; see :mod:`fastpath_lib.routing`).
    """
    interpret = runtime.interpreter_enabled()
    cap = device_capability(input.device) if input.device.type == "cuda" else None
    capturing = capture.capturing(input.device)
    kind = tensor_kind(input) or tensor_kind(weight)
    return RMSNormCall(input, tuple(normalized_shape), weight, eps, limits_for(input.device, interpret=interpret,
                       capability=cap), interpret, cap, forced, capturing, create_graph,
                       forward_ad=_fwad._current_level >= 0, transform=functorch_transform(), kind=kind)


# --- the dispatch's decision: booleans, cheapest and most decisive first --------------------------------------------

_cuda_min_rows: dict[int, int] = {}  # device index -> row threshold, 0 when the architecture is too old


def _cuda_rows(index: int) -> int:
    rows = _cuda_min_rows.get(index)
    if rows is None:
        dev = torch.device("cuda", index)
        lim = limits_for(dev, interpret=False)
        rows = lim.min_rows if device_capability(dev) >= lim.min_capability else 0
        _cuda_min_rows[index] = rows
    return rows


def row_threshold(min_rows: int):
    """A block in which CUDA calls take the fast route from ``min_rows`` rows (:func:`.limits.overriding`)."""
    return overriding(_cuda_min_rows, min_rows)


def eligible(input, normalized_shape, weight, forced: bool) -> bool:
    """Whether every condition that does not need a data pointer holds: the dispatch's cheap decision.

    Never raises, whatever the arguments (bad ones return ``False``, and the fallback raises its own error). Under
    ``torch.compile`` each test becomes a guard, but a test of a symbolic size is made only where the size's range
    decides it (no guard), else left to the op. Agrees with :data:`PREDICATE` (a hypothesis test checks it).
    """
    if forced or type(input) not in PLAIN_TYPES or not (runtime.interpreter_enabled() or input.is_cuda):
        return False  # the cheapest first: a CPU call without the interpreter leaves here
    try:
        shape = input.shape
        if not shape:
            return False
        n, numel = shape[-1], input.numel()
        # a size a tracer holds symbolically (dynamo hands it over as an int) is decided by the op at run time; eager
        # calls test the usual fallbacks next (too few rows for any device, too wide, empty, a strided last dim)
        sized = type(numel) is int and type(n) is int and not _dynamo_compiling()
        if sized and (numel < LEAST_MIN_ROWS * n or not numel or n > MAX_COLS or (n > 1 and input.stride()[-1] != 1)):
            return False
    except RuntimeError:  # a strided nested tensor has no shape, a sparse one no strides: neither qualifies
        return False
    if _fwad._current_level >= 0 or _transforms_active():
        return False
    if input.is_cuda:
        if runtime.interpreter_enabled():
            return False
        min_rows = _cuda_rows(input.get_device()) or sm75_rows(input, weight)
        if not min_rows:
            return False
    elif input.is_cpu and runtime.interpreter_enabled():
        min_rows = INTERPRETER_MIN_ROWS
    else:
        return False
    if sized:
        if numel // n < min_rows:
            return False
    elif any(decided(t) is True for t in (numel == 0, n > MAX_COLS, numel < min_rows * n)):
        return False
    if input.layout is not _STRIDED or input.dtype not in _DTYPE_SET:
        return False
    if type(normalized_shape) not in _SHAPE_TYPES or len(normalized_shape) != 1 or normalized_shape[0] != n \
            or type(normalized_shape[0]) not in _INT_TYPES:
        return False
    if input.is_contiguous():
        stride = n
    else:
        if n > 1 and input.stride(-1) != 1:
            return False
        fmt = _CHANNELS_LAST.get(len(shape))
        if fmt is not None and input.is_contiguous(memory_format=fmt):
            return False
        stride = row_stride(input)
        if stride is None:
            return False
    size = input.element_size()
    if sized:
        if numel != n and (stride * size % ALIGN_BYTES or n * size % ALIGN_BYTES):
            return False
    elif min_rows > 1 and any(decided(m * size % ALIGN_BYTES != 0) is True for m in (stride, n)):
        return False  # misaligned rows: only a single row (which needs no row stride) would qualify
    return weight is None or (type(weight) in PLAIN_TYPES and weight.dtype in _DTYPE_SET and weight.dim() == 1
                              and weight.shape[0] == n and weight.layout is _STRIDED and not weight.is_nested
                              and (weight.stride(0) == 1 or n == 1) and weight.get_device() == input.get_device())


def runtime_eligible(input, weight, *, op: str = "rms_norm", path: str | None = "eager") -> bool:
    """What only run time knows, for a call :func:`eligible` accepted: pointer alignment, no capture unless ``op``'s
    capture test passed here by ``path`` (``eager``, ``custom_op``, or ``None``: either; :mod:`.capture`)."""
    if input.data_ptr() % ALIGN_BYTES or (weight is not None and weight.numel() and weight.data_ptr() % ALIGN_BYTES):
        return False
    return not (input.is_cuda and torch.cuda.is_current_stream_capturing()
                and not capture.verified(device_capability(input.device), op, path))


# --- the checks: each returns None when it holds, else "<actual>, <required>" ---------------------------------------

def _check_forced(c):
    return "fallback forced (force_fallback() or FASTPATH_FORCE_FALLBACK=1), need not forced" if c.forced else None


def _check_capture(c):
    if not c.capturing or capture.verified(c.capability):
        return None
    where = f"sm_{c.capability[0]}{c.capability[1]}" if c.capability else f"{c.device_type} (not CUDA)"
    return f"a CUDA graph is being captured on {where}, need no capture there (no passed capture test in capture.json)"


def _check_grad_order(c):
    return "create_graph=True (higher-order gradient), need first-order backward" if c.create_graph else None


def _check_forward_ad(c):
    return "a forward-mode AD level is active (dual tensors), need none" if c.forward_ad else None


def _check_transform(c):
    return f"torch.func transform {c.transform} is running, need none" if c.transform else None


def _check_kind(c):
    return f"{c.kind}, need a plain strided tensor" if c.kind else None


def _check_device(c):
    dev = c.device_type
    if (dev == "cuda" and not c.interpret) or (dev == "cpu" and c.interpret):
        return None
    if dev == "cpu":
        return "cpu tensor without the Triton interpreter, need cuda (or cpu after fastpath_lib.use_interpreter())"
    return f"{dev} tensor{' under the interpreter' if c.interpret else ''}, need cuda (or cpu under the interpreter)"


def _names(dtypes):
    return ", ".join(str(d).replace("torch.", "") for d in dtypes)


def _check_dtype(c):
    ok = c.input.dtype in SUPPORTED_DTYPES
    return None if ok else f"input {_names([c.input.dtype])}, need one of {_names(SUPPORTED_DTYPES)}"


def _check_weight_dtype(c):
    ok = c.weight is None or c.weight.dtype in SUPPORTED_DTYPES
    return None if ok else f"weight {_names([c.weight.dtype])}, need none or one of {_names(SUPPORTED_DTYPES)}"


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


def _sized(holds, reason: str) -> str | None:
    """A size test without a guard: ``reason`` when it fails, unknown when a tracer's symbolic range decides neither."""
    known = decided(holds)
    return UNKNOWN + f"{reason} (a size the tracer holds symbolically)" if known is None else None if known else reason


def _check_cols(c):
    n = c.input.shape[-1] if c.input.dim() else 1
    return _sized(n <= c.limits.max_cols, f"{n} columns, need <= {c.limits.max_cols}")


def _check_non_empty(c):
    return _sized(c.input.numel() > 0, f"input has {c.input.numel()} elements, need > 0")


def _check_min_rows(c):
    rows = traced_rows(c.input)
    return _sized(rows >= c.limits.min_rows, f"{rows} rows, need >= {c.limits.min_rows} ({c.limits.source})")


def _check_last_contig(c):
    if _opaque(c):
        return None
    x = c.input
    if x.dim() == 0 or x.shape[-1] <= 1 or x.stride(-1) == 1:
        return None
    return f"last-dim stride {x.stride(-1)}, need 1 (e.g. a transposed input)"


def _check_memory_format(c):
    if _opaque(c):
        return None
    x = c.input
    fmt = _CHANNELS_LAST.get(x.dim())
    if fmt is None or x.is_contiguous() or not x.is_contiguous(memory_format=fmt):
        return None
    return f"{str(fmt).replace('torch.', '')} input, need row-major (F.rms_norm keeps those strides; the kernel " \
           f"writes rows)"


def _check_row_stride(c):
    if _opaque(c):
        return None
    if row_stride(c.input) is not None:
        return None
    return f"leading strides {list(c.input.stride()[:-1])} for sizes {list(c.input.shape[:-1])} do not collapse " \
           f"to one row stride, need a view as [rows, cols]"


def _opaque(c) -> bool:
    """No strides or data pointer to look at (a subclass, nested, sparse, or a torch.func wrapper): their own
    conditions (tensor_kind, functorch_transform) report the call."""
    return bool(c.kind) or bool(c.transform and torch._C._functorch.is_functorch_wrapped_tensor(c.input))


def _ptr_misalignment(t: torch.Tensor, align: int) -> int | None:
    return None if t.device.type == "meta" or is_fake(t) else t.data_ptr() % align


def _check_input_align(c):
    if _opaque(c):
        return None
    if c.input.numel() == 0:
        return None
    m = _ptr_misalignment(c.input, c.limits.align_bytes)
    if m is None:
        return UNKNOWN + "input data pointer of a fake tensor"
    return None if m == 0 else f"input data pointer {m} bytes past a {c.limits.align_bytes}-byte boundary, need 0"


def _check_stride_align(c):
    if _opaque(c):
        return None
    x = c.input
    stride = row_stride(x)
    if stride is None or (x.shape[-1] > 1 and x.stride(-1) != 1) or decided(traced_rows(x) <= 1):
        return None  # one row, or not a row layout at all: row_stride / last_dim_contiguous report it
    size, a = x.element_size(), c.limits.align_bytes
    for what, m in (("stride", stride), ("width", x.shape[-1])):
        why = _sized(m * size % a == 0, f"row {what} {m} elements = {m * size} bytes, need a multiple of {a} bytes")
        if why and not why.startswith(UNKNOWN) and decided(traced_rows(x) > 1) is None:
            return f"{UNKNOWN}{why} (one row, which a symbolic size allows, needs none)"
        if why:
            return why
    return None


def _check_weight_stride(c):
    w = c.weight
    if w is None or _opaque(c) or w.dim() != 1 or w.numel() <= 1 or w.stride(0) == 1:
        return None
    return f"weight stride {w.stride(0)} elements" + (" (expanded)" if w.stride(0) == 0 else "") + ", need 1"


def _check_weight_align(c):
    if _opaque(c):
        return None
    if c.weight is None or c.weight.numel() == 0:
        return None
    m = _ptr_misalignment(c.weight, c.limits.align_bytes)
    if m is None:
        return UNKNOWN + "weight data pointer of a fake tensor"
    return None if m == 0 else f"weight data pointer {m} bytes past a {c.limits.align_bytes}-byte boundary, need 0"


#: The eligible base case every boundary changes one thing of (see :mod:`fastpath_lib.boundary`).
BASE_CASE = {"rows": 16, "cols": 64, "dtype": torch.float32, "weight": "same", "layout": "contiguous"}

PREDICATE = Predicate("rmsnorm", [
    Condition("forced", "the fallback is not forced", _check_forced, "mode",
              "lets users and reviewers compare routes, and switch the fast path off in production",
              (Boundary("not forced", {}, True), Boundary("forced", {"forced": True}, False))),
    Condition("cuda_graph_capture", "no CUDA graph capture, unless the architecture's capture test passed",
              _check_capture, "mode", "a graph replays the route taken at capture without asking again: only an "
              "architecture whose recorded capture test passed (capture.json) takes the fast path under capture",
              (Boundary("not capturing", {}, True), Boundary("capturing", {"capturing": True, "capability": None},
                                                                          False))),
    Condition("grad_order", "first-order backward only", _check_grad_order, "mode",
              "the Triton backward is not itself differentiable; create_graph needs the composite fallback",
              (Boundary("first order", {}, True), Boundary("create_graph", {"create_graph": True}, False))),
    Condition("forward_ad", "no forward-mode AD level active", _check_forward_ad, "mode",
              "the op has no forward-mode formula; F.rms_norm's gives the exact tangents",
              (Boundary("no dual level", {}, True), Boundary("inside forward_ad.dual_level()", {"forward_ad": True},
                                                                False))),
    Condition("functorch_transform", "no torch.func transform running", _check_transform, "mode",
              "vmap, grad, vjp, jvp, jacrev, jacfwd and hessian (and functional_call under one of them; alone it is "
              "no transform) use F.rms_norm's own batching and derivative rules (under vmap, one batched call)",
              (Boundary("no transform", {}, True), Boundary("under vmap", {"transform": "Vmap"}, False),
               Boundary("under grad", {"transform": "Grad"}, False),
               Boundary("under jvp", {"transform": "Jvp"}, False))),
    Condition("tensor_kind", "input and weight are plain strided tensors (of a DTensor: its local shards)",
              _check_kind, "tensor kind", "the kernels read plain strided memory: nested tensors and "
              "__torch_dispatch__ subclasses get F.rms_norm's own handling, a sparse layout F.rms_norm's own "
              "error; the op's sharding rule runs a DTensor's local shard on each rank",
              (Boundary("plain tensor", {}, True),
               Boundary("jagged nested", {"kind": "NestedTensor (a tensor subclass)"}, False),
               Boundary("DTensor", {"kind": "DTensor (a tensor subclass)"}, False),
               Boundary("sparse", {"kind": "layout sparse_coo"}, False))),
    Condition("device", "CUDA tensor, or CPU tensor under the Triton interpreter", _check_device, "device",
              "the kernels are Triton; on a CPU only the interpreter runs them, and a CUDA tensor fails while it is on",
              (Boundary("current device", {}, True),
               Boundary("cpu, interpreter off", {"device": "cpu", "interpret": False}, False))),
    Condition("architecture", "compute capability >= 8.0 on CUDA (sm_75 fp16/fp32 only in allow_sm75())", check_arch,
              "architecture", "Triton's supported hardware starts at 8.0; a T4 learner's opt-in is unmeasured; "
              "judged only on CUDA with the interpreter off",
              tuple(Boundary(f"sm_{a}{b}", {"device_type": "cuda", "interpret": False, "capability": (a, b)},
                             (a, b) >= MIN_CAPABILITY) for a, b in ((7, 5), (8, 0), (8, 6), (9, 0)))),
    Condition("dtype", "input dtype fp16, bf16 or fp32", _check_dtype, "dtype",
              "the kernel accumulates in fp32; fp64 would lose precision and complex is not written",
              (Boundary("fp32", {"dtype": torch.float32}, True), Boundary("fp16", {"dtype": torch.float16}, True),
               Boundary("bf16", {"dtype": torch.bfloat16}, True),
               Boundary("fp64", {"dtype": torch.float64, "weight": None}, False))),  # no weight: fails dtype alone
    Condition("weight_dtype", "weight absent, or fp16, bf16 or fp32", _check_weight_dtype, "dtype",
              "the kernel reads the weight as fp32; fp64 weights keep `F.rms_norm`'s fp64 precision in the fallback",
              (Boundary("no weight", {"weight": None}, True), Boundary("fp32 weight", {"weight": torch.float32}, True),
               Boundary("fp16 weight", {"weight": torch.float16}, True),
               Boundary("fp64 weight", {"weight": torch.float64}, False))),
    Condition("arguments", "normalized_shape matches the input's last dims and the weight", _check_arguments,
              "shape", "invalid calls must raise F.rms_norm's own exception, so they go to the fallback",
              (Boundary("valid", {}, True), Boundary("weight shape mismatch", {"weight_cols": -1}, False),
               Boundary("normalized_shape mismatch", {"normalized_shape": "wrong"}, False))),
    Condition("normalized_dims", "normalized over the last dimension only", _check_norm_dims, "shape",
              "the kernel reduces one row; multi-dim normalization is left to `F.rms_norm`",
              (Boundary("1 dim", {}, True), Boundary("2 dims", {"norm_dims": 2}, False))),
    Condition("cols", f"row width <= {MAX_COLS} columns", _check_cols, "shape",
              "the kernels' design limit: one program holds a whole row in registers, and the launch rule takes "
              "widths up to this one (a wider row raises); compiled by the pinned Triton 3.8, no width inside it "
              "spills (Triton 3.6 spills a few bytes in a few wide specializations: tests/rmsnorm/test_compiled.py)",
              (Boundary("cols=max", lambda lim: {"cols": lim.max_cols, "rows": lim.min_rows}, True),
               Boundary("cols=max+16B", lambda lim: {"cols": lim.max_cols + 4, "rows": lim.min_rows}, False),
               Boundary("cols=max+1", lambda lim: {"cols": lim.max_cols + 1, "rows": lim.min_rows}, False))),
    Condition("non_empty", "at least one element", _check_non_empty, "shape",
              "nothing to launch; `F.rms_norm` handles empty tensors",
              (Boundary("rows=0", {"rows": 0}, False), Boundary("cols=0", {"cols": 0}, False))),
    for_speed(Condition("min_rows", "rows >= the row threshold for the architecture", _check_min_rows, "shape",
              "protects small calls, which move few bytes; on CUDA the threshold is per architecture, "
              f"{DEFAULT_CUDA_MIN_ROWS} rows until a GPU sweep records one for it",
              (Boundary("threshold-1", lambda lim: {"rows": lim.min_rows - 1}, False),
               Boundary("threshold", lambda lim: {"rows": lim.min_rows}, True),
               Boundary("threshold+1", lambda lim: {"rows": lim.min_rows + 1}, True)))),
    Condition("last_dim_contiguous", "last dimension has stride 1", _check_last_contig, "stride",
              "the kernel loads each row as one contiguous block",
              (Boundary("contiguous", {}, True), Boundary("transposed", {"layout": "transposed"}, False))),
    Condition("memory_format", "not a channels-last memory format", _check_memory_format, "stride",
              "F.rms_norm returns channels-last strides for channels-last input; the kernel writes row-major rows",
              (Boundary("contiguous 4-d", {"layout": "batched"}, True),
               Boundary("channels_last 4-d", {"layout": "channels_last"}, False))),
    Condition("row_stride", "leading dims collapse to one row stride", _check_row_stride, "stride",
              "the kernel addresses row r at r * row_stride",
              (Boundary("3-d contiguous", {"layout": "batched"}, True),
               Boundary("row slice of a wider buffer", {"layout": "row_slice", "pad": 4}, True),
               Boundary("every other row", {"layout": "step"}, True),
               Boundary("3-d permuted", {"layout": "permuted"}, False))),
    Condition("weight_contiguous", "weight absent or contiguous (stride 1)", _check_weight_stride, "stride",
              "the kernels load the weight as one contiguous block, like a row",
              (Boundary("contiguous weight", {}, True), Boundary("every other element", {"weight_step": 2}, False),
               Boundary("expanded from one value (stride 0)", {"weight_step": 0}, False))),
    for_speed(Condition("input_alignment", f"input data pointer a multiple of {ALIGN_BYTES} bytes", _check_input_align,
              "alignment", "Triton specializes a pointer that is a multiple of 16 bytes, and the kernel then loads and "
              "stores 16-byte vectors; a misaligned launch compiles to scalar accesses",
              (Boundary("offset 0", {"offset": 0}, True), Boundary("offset 16 bytes", {"offset": 4}, True),
               Boundary("offset 8 bytes", {"offset": 2}, False), Boundary("offset 4 bytes", {"offset": 1}, False)))),
    for_speed(Condition("row_stride_alignment", f"row stride and row width multiples of {ALIGN_BYTES} bytes",
              _check_stride_align, "alignment",
              "when every row starts aligned and ends on a whole vector, the launcher tells Triton the stride and "
              "width are multiples of a 16-byte vector, and the kernel loads and stores 16 bytes at a time",
              (Boundary("cols=15", {"cols": 15}, False), Boundary("cols=16", {"cols": 16}, True),
               Boundary("cols=24 (not a power of two)", {"cols": 24}, True), Boundary("cols=17", {"cols": 17}, False),
               Boundary("fp16 cols=8", {"cols": 8, "dtype": torch.float16}, True),
               Boundary("fp16 cols=12", {"cols": 12, "dtype": torch.float16}, False),
               Boundary("slice, stride 66", {"layout": "row_slice", "pad": 2}, False),
               Boundary("slice, stride 68", {"layout": "row_slice", "pad": 4}, True),
               Boundary("slice of width 62, stride 64", {"layout": "row_slice", "cols": 62, "pad": 2}, False)))),
    for_speed(Condition("weight_alignment", f"weight data pointer a multiple of {ALIGN_BYTES} bytes",
              _check_weight_align, "alignment", "the weight is loaded with vector loads too",
              (Boundary("weight offset 0", {"weight_offset": 0}, True),
               Boundary("weight offset 4 bytes", {"weight_offset": 1}, False)))),
])
