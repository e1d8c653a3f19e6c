"""When the Triton route of fused residual-add + RMSNorm runs, and why it does not.

The conditions about ``x`` and the weight are RMSNorm's own (:data:`fastpath_lib.rmsnorm.predicate.PREDICATE`, the
same :class:`~fastpath_lib.eligibility.Condition` objects with their boundaries): mode, tensor kind, device,
architecture, dtype, width, rows, strides, alignment. What the fused op adds:

* *arguments*: ``x`` has at least one dimension; the weight is absent or one-dimensional of ``x``'s width, on its
  device (otherwise the fallback raises the composite's error);
* *residual_match*: ``residual`` has ``x``'s shape, dtype and device (the kernels write the sum in that dtype);
* *residual_layout* and *residual_alignment*: the residual is read and written as rows too, so it has the same layout
  and 16-byte alignment rules as ``x`` (its own row stride is allowed);
* *no_overlap* (in-place form): ``x``, ``residual`` and the weight share no memory. Rows are normalized in parallel, so
  a kernel writing ``x`` while another program reads an overlapping ``residual`` or weight would read values
  already overwritten. Overlapping calls take the composite (:func:`~fastpath_lib.fused.reference.native_`), whose
  outcome is defined: both results first, then the sum written into ``residual``, then the output into ``x``. The
  test is on byte ranges of one storage, so interleaved but element-disjoint views (column halves of one buffer)
  count as overlapping: conservative, and correct. Rows of ``x`` or ``residual`` that share memory with each other
  (a row expanded with stride 0) count too: ``copy_`` refuses to write them, and so does the in-place form;
* *backward_cols*: a call autograd records (grad mode on, an input requires grad) has at most :data:`BACKWARD_MAX_COLS`
  columns: the backward kernel holds the row sum, the gradients and its ``dw`` share per program, and at 16384 columns
  it spills registers on every target compiled for (sm_75, sm_80, sm_86, sm_89, sm_90, sm_120, at 16 warps and at 32,
  the most a program has); the forward does not, so calls without autograd keep the fast path to ``MAX_COLS``;
* *inplace_autograd*: the in-place form with an input that requires grad (grad mode on) takes the composite, which
  raises on a leaf that requires grad before it writes anything and records the in-place ops on views as PyTorch
  does; so does an in-place call on an inference tensor outside inference mode (the composite raises PyTorch's
  error, where a kernel would write it). The functional form keeps the fast path under autograd (a Triton backward
  for ``x``, ``residual`` and the weight).

:func:`eligible` and :func:`runtime_eligible` are the dispatch's booleans (RMSNorm's first, then the residual's);
:data:`PREDICATE` says why. Torch only, no Triton.
"""

from __future__ import annotations

import dataclasses

import torch
from torch._subclasses.fake_tensor import is_fake

from fastpath_lib.eligibility import UNKNOWN, Boundary, Condition, Predicate, for_speed
from fastpath_lib.rmsnorm import predicate as rms
from fastpath_lib.rmsnorm.layout import PLAIN_TYPES, decided, row_stride, rows_cols, tensor_kind
from fastpath_lib.rmsnorm.limits import ALIGN_BYTES

__all__ = ["FusedCall", "make_call", "eligible", "runtime_eligible", "overlaps", "overlaps_itself", "PREDICATE",
           "BASE_CASE", "RMSNORM_CONDITIONS", "PER_CALL", "STATIC", "BACKWARD_MAX_COLS"]

_CHANNELS_LAST = {4: torch.channels_last, 5: torch.channels_last_3d}
#: The widest row of a call autograd records: wider, the backward kernel spills registers
#: (``tests/rmsnorm/test_compiled.py``).
BACKWARD_MAX_COLS = 8192


@dataclasses.dataclass(frozen=True)
class FusedCall(rms.RMSNormCall):
    """RMSNorm's call context (``input`` is ``x``) plus the residual, the form, and whether autograd records."""

    residual: torch.Tensor | None = None
    inplace: bool = False
    grad: bool = False  # grad mode is on and an input requires grad


def _wants_grad(x, residual, weight) -> bool:
    return torch.is_grad_enabled() and (x.requires_grad or residual.requires_grad
                                        or (weight is not None and weight.requires_grad))


def make_call(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None = None, eps: float | None = None,
              *, inplace: bool = False, forced: bool = False, create_graph: bool = False) -> FusedCall:
    """The predicate's context for one call of the functional (``inplace=False``) or the in-place form."""
    try:
        ns = (x.shape[-1],) if x.dim() else ()
    except RuntimeError:  # a strided nested tensor has no shape
        ns = ()
    base = rms.make_call(x, ns, weight, eps, forced=forced, create_graph=create_graph)
    fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(base)}
    fields["kind"] = base.kind or tensor_kind(residual)
    return FusedCall(**fields, residual=residual, inplace=inplace, grad=_wants_grad(x, residual, weight))


# --- the dispatch's decision ----------------------------------------------------------------------------------------

def eligible(x, residual, weight, forced: bool, inplace: bool) -> bool:
    """Every condition that needs no data pointer holds (never raises; a guard under ``torch.compile``)."""
    if type(x) not in PLAIN_TYPES or type(residual) not in PLAIN_TYPES:
        return False
    try:
        cols = x.shape[-1:]  # (n,); () for a 0-d x, which rms.eligible refuses
    except RuntimeError:  # a strided nested tensor has no shape
        return False
    if not rms.eligible(x, cols, weight, forced):  # the norm's conditions, the cheapest fallbacks first
        return False
    n = cols[0]
    if decided(n > BACKWARD_MAX_COLS) is True and _wants_grad(x, residual, weight):
        return False
    if (residual.layout is not torch.strided or residual.is_nested or residual.dtype != x.dtype
            or residual.device != x.device or residual.shape != x.shape):
        return False
    if not residual.is_contiguous():
        if n > 1 and residual.stride(-1) != 1:
            return False
        fmt = _CHANNELS_LAST.get(residual.dim())
        if fmt is not None and residual.is_contiguous(memory_format=fmt):
            return False
        stride = row_stride(residual)
        if stride is None or (residual.numel() != n and stride * residual.element_size() % ALIGN_BYTES):
            return False
    return not (inplace and (_wants_grad(x, residual, weight) or _writes_inference(x, residual)))


def _writes_inference(x, residual) -> bool:
    """An inference tensor written outside inference mode (eager only: Dynamo does not trace ``is_inference``)."""
    return not torch.compiler.is_compiling() and (x.is_inference() or residual.is_inference()) \
        and not torch.is_inference_mode_enabled()


def _span(t: torch.Tensor) -> tuple[int, int]:
    start = t.data_ptr()
    extent = 1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride()))
    return start, start + extent * t.element_size()


def overlaps(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    """Whether two real tensors may share memory: one storage and intersecting byte ranges (conservative)."""
    if a is None or b is None or a.numel() == 0 or b.numel() == 0:
        return False
    if a.untyped_storage().data_ptr() != b.untyped_storage().data_ptr():
        return False
    (a0, a1), (b0, b1) = _span(a), _span(b)
    return a0 < b1 and b0 < a1


def overlaps_itself(t: torch.Tensor) -> bool:
    """Whether rows of a row layout share memory (a row stride below the width, e.g. 0 for a row expanded)."""
    return not t.is_contiguous() and t.numel() > t.shape[-1] and (row_stride(t) or 0) < t.shape[-1]


def runtime_eligible(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None, inplace: bool,
                     path: str | None = "eager") -> bool:
    """What only run time knows, for a call :func:`eligible` accepted: alignment, no capture (unless this op's own
    capture test passed for this ``path``: :func:`fastpath_lib.rmsnorm.capture.verified`), no overlap."""
    if not rms.runtime_eligible(x, weight, op="fused_add_rms_norm", path=path) or residual.data_ptr() % ALIGN_BYTES:
        return False
    return not inplace or not (overlaps(x, residual) or overlaps(x, weight) or overlaps(residual, weight)
                               or overlaps_itself(x) or overlaps_itself(residual))


# --- the checks the fused op adds -----------------------------------------------------------------------------------

def _opaque(c) -> bool:
    return bool(c.kind) or bool(c.transform and (torch._C._functorch.is_functorch_wrapped_tensor(c.input)
                                                  or torch._C._functorch.is_functorch_wrapped_tensor(c.residual)))


def _check_inplace_autograd(c):
    if c.inplace and c.grad:
        return "in-place form while an input requires grad, need no grad (the composite raises on a leaf " \
               "and records in-place ops on views)"
    if c.inplace and not c.kind and c.residual is not None and _writes_inference(c.input, c.residual):
        return "in-place form on an inference tensor outside inference mode (the composite raises, as torch does)"
    return None


def _check_backward_cols(c):
    n = c.input.shape[-1] if not c.input.is_nested and c.input.dim() else 0
    if c.grad and decided(n > BACKWARD_MAX_COLS) is True:
        return (f"{n} columns while autograd records, need at most {BACKWARD_MAX_COLS} (wider, the backward kernel "
                f"spills registers)")
    return None


def _check_arguments(c):
    x, w = c.input, c.weight
    if x.is_nested or x.dim() == 0:
        return "x is 0-d or nested, need at least one dim (the fallback raises)"
    if w is not None and (w.dim() != 1 or w.shape[0] != x.shape[-1]):
        return f"weight shape {list(w.shape)}, need [{x.shape[-1]}] (the fallback raises)"
    if w is not None and w.device != x.device:
        return f"weight on {w.device}, need x's device {x.device} (the fallback raises)"
    return None


def _check_residual_match(c):
    x, r = c.input, c.residual
    if r.device != x.device:
        return f"residual on {r.device}, need x's device {x.device}"
    if r.dtype != x.dtype:
        return f"residual {str(r.dtype).replace('torch.', '')}, need x's dtype {str(x.dtype).replace('torch.', '')}"
    if r.shape != x.shape:
        return f"residual shape {list(r.shape)}, need x's shape {list(x.shape)}"
    return None


def _check_residual_layout(c):
    r = c.residual
    if _opaque(c) or r.dim() == 0 or r.is_contiguous():
        return None
    if r.shape[-1] > 1 and r.stride(-1) != 1:
        return f"residual last-dim stride {r.stride(-1)}, need 1"
    fmt = _CHANNELS_LAST.get(r.dim())
    if fmt is not None and r.is_contiguous(memory_format=fmt):
        return "channels-last residual, need row-major"
    if row_stride(r) is None:
        return f"residual strides {list(r.stride())} do not collapse to rows, need a view as [rows, cols]"
    return None


def _check_residual_alignment(c):
    r, a = c.residual, c.limits.align_bytes
    if _opaque(c) or r.numel() == 0:
        return None
    rows, _ = rows_cols(r)
    stride = row_stride(r)
    if rows > 1 and stride is not None and stride * r.element_size() % a:  # the layout first: a fake tensor has one
        return f"residual row stride {stride * r.element_size()} bytes, need a multiple of {a}"
    if r.device.type == "meta" or is_fake(r):
        return UNKNOWN + "residual data pointer of a fake tensor"
    if r.data_ptr() % a:
        return f"residual data pointer {r.data_ptr() % a} bytes past a {a}-byte boundary, need 0"
    return None


def _check_overlap(c):
    if not c.inplace or _opaque(c):
        return None
    x, r, w = c.input, c.residual, c.weight
    if any(t is not None and (t.device.type == "meta" or is_fake(t)) for t in (x, r, w)):
        return UNKNOWN + "memory overlap of fake tensors"
    pairs = (("x", x, "residual", r), ("x", x, "weight", w), ("residual", r, "weight", w))
    hit = [f"{a} and {b}" for a, ta, b, tb in pairs if overlaps(ta, tb)]
    hit += [f"rows of {a}" for a, t in (("x", x), ("residual", r)) if t.dim() and overlaps_itself(t)]
    return f"{', '.join(hit)} share memory, need none in the in-place form" if hit else None


#: RMSNorm's conditions the fused op keeps as they are (about x, the weight and the mode).
RMSNORM_CONDITIONS = ("forced", "cuda_graph_capture", "grad_order", "forward_ad", "functorch_transform",
                      "tensor_kind", "device", "architecture", "dtype", "weight_dtype", "cols", "non_empty",
                      "min_rows", "last_dim_contiguous", "memory_format", "row_stride", "weight_contiguous",
                      "input_alignment", "row_stride_alignment", "weight_alignment")
_R = {name: rms.PREDICATE[name] for name in RMSNORM_CONDITIONS}

#: The eligible base case every boundary changes one thing of; the in-place form, so overlap matters.
BASE_CASE = {**rms.BASE_CASE}

PREDICATE = Predicate("fused_add_rms_norm", [
    *(_R[n] for n in ("forced", "cuda_graph_capture", "grad_order", "forward_ad", "functorch_transform")),
    Condition("inplace_autograd", "in-place form only without autograd recording", _check_inplace_autograd, "mode",
              "an in-place op on a leaf that requires grad must raise, and on a view must be recorded, as PyTorch's "
              "own in-place ops are; the composite's copy_ does both",
              (Boundary("in-place, no grad", {}, True),
               Boundary("in-place, x requires grad", {"requires_grad": True}, False),
               Boundary("functional, x requires grad", {"requires_grad": True, "inplace": False}, True))),
    *(_R[n] for n in ("tensor_kind", "device", "architecture", "dtype", "weight_dtype")),
    Condition("arguments", "x has a dim; weight absent or [cols] on x's device", _check_arguments, "shape",
              "invalid calls must raise the composite's own exception, so they go to the fallback",
              (Boundary("valid", {}, True), Boundary("weight shape mismatch", {"weight_cols": -1}, False))),
    Condition("residual_match", "residual has x's shape, dtype and device", _check_residual_match, "shape",
              "the kernels read both as rows of one width and write the sum in x's dtype",
              (Boundary("same shape and dtype", {}, True),
               Boundary("residual fp16, x fp32", {"residual_dtype": torch.float16}, False),
               Boundary("residual one row short (broadcasts)", {"residual_rows": 1}, False))),
    _R["cols"],
    for_speed(Condition("backward_cols", f"row width <= {BACKWARD_MAX_COLS} columns while autograd records",
              _check_backward_cols, "shape", "the backward holds a row, its gradient and a dw share per program: "
              "wider rows spill registers on every GPU target compiled for (the forward does not)",
              (Boundary("cols=max, no grad", lambda lim: {"cols": lim.max_cols, "rows": lim.min_rows}, True),
               Boundary(f"cols={BACKWARD_MAX_COLS}, x requires grad", lambda lim: {
                   "cols": BACKWARD_MAX_COLS, "rows": lim.min_rows, "requires_grad": True, "inplace": False}, True),
               Boundary(f"cols={BACKWARD_MAX_COLS}+16B, x requires grad", lambda lim: {
                   "cols": BACKWARD_MAX_COLS + 4, "rows": lim.min_rows, "requires_grad": True, "inplace": False},
                        False)))),
    *(_R[n] for n in ("non_empty", "min_rows", "last_dim_contiguous", "memory_format", "row_stride",
                      "weight_contiguous")),
    Condition("residual_layout", "residual last dim contiguous, rows one stride apart", _check_residual_layout,
              "stride", "the kernels address residual row r at r * its own row stride",
              (Boundary("residual contiguous", {}, True),
               Boundary("residual row slice", {"residual_layout": "row_slice", "residual_pad": 4}, True),
               Boundary("residual transposed", {"residual_layout": "transposed"}, False))),
    *(_R[n] for n in ("input_alignment", "row_stride_alignment", "weight_alignment")),
    for_speed(Condition("residual_alignment", f"residual pointer and row stride multiples of {ALIGN_BYTES} bytes",
              _check_residual_alignment, "alignment", "the residual is loaded and stored with 16-byte vectors",
              (Boundary("residual offset 16 bytes", {"residual_offset": 4}, True),
               Boundary("residual offset 4 bytes", {"residual_offset": 1}, False),
               Boundary("residual slice, stride 66", {"residual_layout": "row_slice", "residual_pad": 2}, False)))),
    Condition("no_overlap", "in-place form: x, residual and weight share no memory", _check_overlap, "aliasing",
              "programs run rows in parallel: a write to x or residual must not land where another program reads",
              (Boundary("separate buffers", {}, True),
               Boundary("disjoint row slices of one buffer", {"alias": "disjoint"}, True),
               Boundary("residual is x", {"alias": "same"}, False),
               Boundary("residual is x shifted one row", {"alias": "overlap"}, False),
               Boundary("column halves of one buffer (conservative)", {"alias": "interleaved"}, False),
               Boundary("weight inside x", {"alias": "weight_in_x"}, False),
               Boundary("residual expanded from one row", {"residual_layout": "expanded"}, False),
               Boundary("residual expanded, functional form", {"residual_layout": "expanded", "inplace": False},
                        True),
               Boundary("residual is x, functional form", {"alias": "same", "inplace": False}, True))),
])

#: Conditions vLLM's ``supported=`` takes (static: the platform); the others are per call (``supports_args``).
STATIC = ("device", "architecture")
PER_CALL = tuple(c.name for c in PREDICATE.conditions if c.name not in STATIC)
