"""Generate the kit's PyTorch patch (``upstream/pytorch_native_rms_norm_triton.patch``) from the kit's kernels.

    python tools/make_pytorch_native.py           # (re)write the patch
    python tools/make_pytorch_native.py --check   # exit 1 with a diff when the patch is out of date

The patch is a unified diff (``git apply`` / ``patch -p1``) against the files of the torch release the kit pins
(``torch/_native/`` of the installed wheel, torch 2.13), in the form torch ships its own DSL overrides of eager ATen
ops (``torch/_native/registry.py``: ``register_op_override(..., cond=..., impl=...)``, ATen the fallthrough). It
changes:

* ``torch/_native/ops/norm/triton_kernels.py`` (new): the kit's forward and backward kernels and launch rule,
  vendored by name from ``fastpath_lib/rmsnorm/kernels.py`` and ``launch.py`` (code kept, names made private,
  docstrings cut to their first sentence), and launchers on ``[rows, cols]`` views. The kernels change in two ways:
  the forward also stores ``rstd`` (which ``aten::_fused_rms_norm`` returns) and the backward reads it (the backward
  op gets ``rstd``, not ``eps``); and the kit's bf16 conversions for Triton's CPU interpreter are Triton's own casts
  (the interpreter's bf16 rounding is within the tolerances the tests use);
* ``torch/_native/ops/norm/triton_impl.py`` (new): ``cond`` (the kit's predicate as it reads at a backend dispatch
  key, every refusal commented; the row-stride rule vendored from ``fastpath_lib/rmsnorm/layout.py``) and ``impl``
  for ``_fused_rms_norm`` and ``_fused_rms_norm_backward``;
* ``torch/_native/ops/norm/__init__.py``: registers them after quack's CuTeDSL overrides, so quack keeps the calls
  its ``cond`` accepts (sm_90/sm_100 with ``nvidia-cutlass-dsl``) and Triton takes the rest;
* ``test/python_native/test_rmsnorm_triton.py`` (new): tests in PyTorch's form (``TestCase``, ``run_tests``); on
  CUDA they run on the overrides registered at import (quack's switched off), without CUDA they register the
  override for the ``CPU`` key and run the kernels under Triton's interpreter (``TRITON_INTERPRET=1``).

Nothing in the result names the kit. The generated files are formatted with ``ruff format`` at 88 columns (black's
width, PyTorch's formatter). ``tests/rmsnorm/test_pytorch_native.py`` checks that the patch is current, applies to the
installed files, passes ruff at PyTorch's settings (:data:`RUFF_SELECT`, :data:`RUFF_IGNORE`), and that its tests pass
here.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import re
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "fastpath_lib"
TARGET = ROOT / "upstream" / "pytorch_native_rms_norm_triton.patch"
#: The PR description in PyTorch's template (``.github/PULL_REQUEST_TEMPLATE.md``), of the patch alone.
NOTE = ROOT / "upstream" / "pytorch_native_pr_note.md"
#: PyTorch's pull-request template: the issue line, then two boxes for the author to tick.
PR_TEMPLATE_HEAD = "Fixes #ISSUE_NUMBER"
PR_TEMPLATE_BOXES = ("[ ] I am familiar with [CONTRIBUTING.md](CONTRIBUTING.md).",
                     "[ ] I ran `lintrunner -a`, and fixed all errors relevant to this change.")
WIDTH = 88
KERNEL_FILE = "torch/_native/ops/norm/triton_kernels.py"
IMPL_FILE = "torch/_native/ops/norm/triton_impl.py"
INIT_FILE = "torch/_native/ops/norm/__init__.py"
TEST_FILE = "test/python_native/test_rmsnorm_triton.py"
#: The files the patch changes, in the patch's order; the new ones have no text in the wheel.
CHANGED = (INIT_FILE, KERNEL_FILE, IMPL_FILE, TEST_FILE)
NEW_FILES = (KERNEL_FILE, IMPL_FILE, TEST_FILE)

#: PyTorch's ruff rules (its ``pyproject.toml``, ``[tool.ruff.lint]``), those this ruff knows; E501 is ignored there
#: too (PyTorch's flake8 checks B950 at 120 columns instead).
RUFF_SELECT = ("B,B904,C4,G,E,EXE,F,SIM,W,FURB,LOG,NPY,PERF,PGH004,PIE,PLC0131,PLC0132,PLC1802,PLC0205,PLC3002,"
               "PLC0414,PLE,PLR0133,PLR0206,PLR1722,PLR1736,PLW0127,PLW0129,PLW0131,PLW0133,PLW0245,PLW0406,PLW0711,"
               "PLW1501,PLW1507,PLW1509,PLW2101,PLW3301,PT006,PT014,PT022,PT023,PT024,PT025,PT026,PYI,Q003,Q004,RSE,"
               "RUF007,RUF008,RUF013,RUF015,RUF016,RUF017,RUF018,RUF019,RUF020,RUF024,RUF026,RUF030,RUF033,RUF041,"
               "RUF048,RUF100,S324,SLOT,TC,TRY002,TRY203,TRY401,UP,YTT,S101")
RUFF_IGNORE = ("B007,B008,B017,B018,B023,B028,E402,C408,E501,E741,EXE001,F405,FURB122,NPY002,PERF203,PERF401,PYI024,"
               "PYI036,PYI041,PYI056,SIM102,SIM103,SIM112,SIM105,SIM108,SIM110,SIM114,SIM116,SIM117,SIM300,TC006,B905")

#: (kit source file, top-level names), in the new file's order.
VENDORED = (
    ("rmsnorm/launch.py", ("MIN_ELEMENTS_PER_THREAD", "KERNELS", "_next_power_of_2", "launch_settings",
                           "forward_rows_per_program", "backward_max_rows", "backward_grid", "vector_elements")),
    ("rmsnorm/kernels.py", ("rms_norm_fwd_kernel", "rms_norm_bwd_kernel", "max_backward_programs")),
)
#: The kit's names and what the new file calls them (private, as the files beside it do).
RENAMES = {
    "MIN_ELEMENTS_PER_THREAD": "_MIN_ELEMENTS_PER_THREAD",
    "KERNELS": "_KERNELS",
    "_next_power_of_2": "_next_power_of_2",
    "launch_settings": "_launch_settings",
    "forward_rows_per_program": "_forward_rows_per_program",
    "backward_max_rows": "_backward_max_rows",
    "backward_grid": "_backward_grid",
    "vector_elements": "_vector_elements",
    "rms_norm_fwd_kernel": "_rms_norm_fwd_kernel",
    "rms_norm_bwd_kernel": "_rms_norm_bwd_kernel",
    "max_backward_programs": "_max_backward_programs",
    "ALIGN_BYTES": "ALIGN_BYTES",
    "MAX_COLS": "MAX_COLS",
}
#: Phrases of the kit's text that point at the kit's own files or words (regular expressions).
PHRASES = {r" \(see launch\.py\)": "",
           r"the predicate should have sent this to the \"\s*f\"fallback": "cond declines it",
           r" \(the fused op's launcher uses it too\)": ""}

#: The kernels' changes, per kernel: (anchor that must occur once, replacement). The forward also stores rstd, the
#: second output of ``aten::_fused_rms_norm``; the backward reads it (``_fused_rms_norm_backward`` gets rstd, not eps).
KERNEL_EDITS = {
    "rms_norm_fwd_kernel": (
        ("    Y_ptr,  # output rows, [n_rows, n_cols], contiguous\n",
         "    Y_ptr,  # output rows, [n_rows, n_cols], contiguous\n    RSTD_ptr,  # fp32 rstd per row, [n_rows]\n"),
        ("    rstd = 1.0 / tl.sqrt(mean_sq + eps)\n",
         "    rstd = 1.0 / tl.sqrt(mean_sq + eps)\n    tl.store(RSTD_ptr + rows, rstd, mask=rows < n_rows)\n"),
    ),
    "rms_norm_bwd_kernel": (
        ("    DW_partial_ptr,  # fp32 [n_programs, n_cols]: this program's share of dw\n",
         "    DW_partial_ptr,  # fp32 [n_programs, n_cols]: this program's share of dw\n"
         "    RSTD_ptr,  # fp32 rstd per row, [n_rows], saved by the forward\n"),
        ("    eps,  # added to the mean square\n", ""),
        ("        rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)\n",
         "        rstd = tl.load(RSTD_ptr + row, mask=row < n_rows, other=0.0)\n"),
        ("        # first read: the two row sums; evict_last keeps the row in cache for the second read\n",
         "        # first read: the row sum; evict_last keeps the row in cache for the second read\n"),
    ),
}


def _kernel_header() -> str:
    from fastpath_lib.rmsnorm.limits import ALIGN_BYTES, MAX_COLS

    return f'''\
"""Triton RMSNorm kernels for aten::_fused_rms_norm and its backward.

Forward, row by row in fp32: ``rstd = 1 / sqrt(mean(x ** 2) + eps)`` and
``y = x * rstd * w``, rounded once to the input dtype; ``rstd`` is stored too.
Backward, with ``n = x * rstd`` and ``g = dy * w``: ``dx = rstd * (g - n *
mean(g * n))`` and ``dw = sum over rows of dy * n``, reduced deterministically
(each program sums a fixed block of rows into its own fp32 row, then
``torch.sum`` adds those rows in a fixed order).

Narrow rows share a forward program so every thread holds a 16-byte vector;
``VEC`` tells the kernels a launch is 16-byte aligned (checked by the launcher).
"""

import triton
import triton.language as tl

import torch


MAX_COLS = {MAX_COLS}
ALIGN_BYTES = {ALIGN_BYTES}
'''


LAUNCHERS = '''

def rms_norm_fwd(
    x: torch.Tensor, weight: torch.Tensor | None, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Normalize the rows of x (``[rows, cols]``, last dim contiguous): ``(out, rstd)``."""
    n_rows, n_cols = x.shape
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    rstd = torch.empty(n_rows, dtype=torch.float32, device=x.device)
    block_size, num_warps = _launch_settings(n_cols, "forward")
    rows_per_program = _forward_rows_per_program(n_cols)
    w = x if weight is None else weight
    vec = _vector_elements(
        x.element_size(),
        n_cols,
        (x.stride(0), out.stride(0)),
        (x.data_ptr(), out.data_ptr(), w.data_ptr()),
    )
    _rms_norm_fwd_kernel[(triton.cdiv(n_rows, rows_per_program),)](
        x,
        w,
        out,
        rstd,
        x.stride(0),
        out.stride(0),
        n_rows,
        n_cols,
        eps,
        HAS_WEIGHT=weight is not None,
        ROWS_PER_PROGRAM=rows_per_program,
        BLOCK_SIZE=block_size,
        VEC=vec,
        num_warps=num_warps,
    )
    return out, rstd


def rms_norm_bwd(
    dy: torch.Tensor,
    x: torch.Tensor,
    rstd: torch.Tensor,
    weight: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(dx, dw)`` of the rows of x from the forward's ``rstd`` (one per row)."""
    n_rows, n_cols = x.shape
    dx = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    rows_per_program, programs = _backward_grid(
        n_rows,
        _max_backward_programs(x),
        _backward_max_rows(n_cols, x.element_size()),
    )
    has_weight = weight is not None
    partial = torch.empty(
        (programs if has_weight else 1, n_cols), dtype=torch.float32, device=x.device
    )
    block_size, num_warps = _launch_settings(n_cols, "backward")
    w = x if weight is None else weight
    vec = _vector_elements(
        x.element_size(),
        n_cols,
        (dy.stride(0), x.stride(0), dx.stride(0)),
        (dy.data_ptr(), x.data_ptr(), dx.data_ptr(), w.data_ptr(), partial.data_ptr()),
    )
    _rms_norm_bwd_kernel[(programs,)](
        dy,
        x,
        w,
        dx,
        partial,
        rstd,
        dy.stride(0),
        x.stride(0),
        dx.stride(0),
        n_rows,
        n_cols,
        ROWS_PER_PROGRAM=rows_per_program,
        HAS_WEIGHT=has_weight,
        BLOCK_SIZE=block_size,
        VEC=vec,
        num_warps=num_warps,
    )
    dw = partial.sum(0).to(weight.dtype) if weight is not None else None
    return dx, dw
'''


def _impl_file() -> str:
    from fastpath_lib.rmsnorm.limits import DEFAULT_CUDA_MIN_ROWS, MIN_CAPABILITY

    return f'''\
"""Triton RMSNorm overrides for aten fused RMSNorm operators.

Registered after the quack (CuTeDSL) overrides (see ``__init__.py``): the
registry tries the overrides of one op in registration order, so quack keeps
every call its cond accepts (sm_90/sm_100 with nvidia-cutlass-dsl) and this
override takes the rest of its region: other NVIDIA GPUs from sm_80, and the
calls quack declines (for example a weight in another dtype).
"""

from __future__ import annotations

import contextlib
import functools

import torch

from ... import triton_utils as tu


_SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
_MAX_COLS = 16384
# Triton specializes pointers and sizes on 16-byte alignment for vector loads.
_ALIGN_BYTES = 16
_MIN_CAPABILITY = {MIN_CAPABILITY!r}
# Calls with fewer rows stay with aten: they move few bytes, so the kernel has
# little traffic to save. No GPU sweep has measured where the kernel starts to
# beat aten, so the value is a conservative prediction.
_MIN_ROWS = {DEFAULT_CUDA_MIN_ROWS}


@functools.cache
def _capability_ok(device_index: int) -> bool:
    return torch.cuda.get_device_capability(device_index) >= _MIN_CAPABILITY


ROW_STRIDE


def _as_rows(t: torch.Tensor) -> torch.Tensor:
    # cond checked that the leading dimensions collapse to one row stride
    n = t.shape[-1]
    if t.is_contiguous():
        return t.view(-1, n)
    return t.as_strided((t.numel() // n, n), (_row_stride(t), 1))


def _on_device(t: torch.Tensor) -> contextlib.AbstractContextManager:
    # Triton launches on the current CUDA device
    if t.is_cuda and t.get_device() != torch.cuda.current_device():
        return torch.cuda.device(t.device)
    return contextlib.nullcontext()


def _is_supported(
    input: torch.Tensor,
    normalized_shape: list[int],
    weight: torch.Tensor | None,
) -> bool:
    if input.is_cuda:
        # The kernels are compiled and checked for NVIDIA targets only.
        if torch.version.hip is not None:
            return False
        # Triton's supported NVIDIA GPUs start at compute capability 8.0.
        if not _capability_ok(input.get_device()):
            return False
    # The kernels accumulate in fp32: fp64 would lose precision.
    if input.dtype not in _SUPPORTED_DTYPES:
        return False
    # The kernel reduces one row over the last dimension; multi-dim
    # normalization stays with aten.
    if len(normalized_shape) != 1 or input.ndim < 1:
        return False
    n = normalized_shape[0]
    # Mirror aten's shape checks: on a mismatch aten raises its own error.
    if input.shape[-1] != n:
        return False
    # The same for the weight; a weight in another float dtype is read as fp32.
    if weight is not None and (
        weight.ndim != 1
        or weight.shape[0] != n
        or weight.device != input.device
        or weight.dtype not in _SUPPORTED_DTYPES
    ):
        return False
    # Empty inputs have nothing to launch.
    if input.numel() == 0:
        return False
    # One program holds a whole row in registers, and the launch rule takes
    # widths up to _MAX_COLS (a wider row raises): wider rows stay with aten.
    if n > _MAX_COLS:
        return False
    # Small calls stay with aten, a speed prediction (see _MIN_ROWS).
    if input.numel() // n < _MIN_ROWS:
        return False
    # The kernel loads each row as one contiguous block.
    if n > 1 and input.stride(-1) != 1:
        return False
    # The kernels load the weight as one contiguous block too.
    if weight is not None and n > 1 and weight.stride(0) != 1:
        return False
    # aten keeps a channels-last input's strides in its output; the kernel
    # writes row-major rows.
    if input.ndim in (4, 5) and not input.is_contiguous():
        memory_format = (
            torch.channels_last if input.ndim == 4 else torch.channels_last_3d
        )
        if input.is_contiguous(memory_format=memory_format):
            return False
    # The kernel addresses row r at r * row_stride: the leading dimensions must
    # collapse to one stride.
    stride = _row_stride(input)
    if stride is None:
        return False
    # Rows start and end on whole 16-byte vectors (a single row needs no stride).
    size = input.element_size()
    if input.numel() != n and (stride * size % _ALIGN_BYTES or n * size % _ALIGN_BYTES):
        return False
    # Reading data_ptr below (and launching) would materialize a copy-on-write
    # tensor; fall through to aten, as the bmm_outer_product and quack conds do.
    is_cow = torch._C._is_cow_tensor  # pyrefly: ignore[missing-attribute]
    if is_cow(input) or (weight is not None and is_cow(weight)):
        return False
    # Vector loads need 16-byte aligned data pointers.
    if input.data_ptr() % _ALIGN_BYTES:
        return False
    # The same for the weight.
    if weight is not None and weight.numel() and weight.data_ptr() % _ALIGN_BYTES:
        return False
    return True


def _fused_rms_norm_cond(
    input: torch.Tensor,
    normalized_shape: list[int],
    weight: torch.Tensor | None,
    eps: float | None,
) -> bool:
    return _is_supported(input, normalized_shape, weight)


def _eps(eps: float | None) -> float:
    # aten picks the default eps from the accumulator dtype, float32 for the
    # dtypes cond accepts.
    return torch.finfo(torch.float32).eps if eps is None else eps


def _fused_rms_norm_impl(
    input: torch.Tensor,
    normalized_shape: list[int],
    weight: torch.Tensor | None,
    eps: float | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    from .triton_kernels import rms_norm_fwd

    with _on_device(input):
        out, rstd = rms_norm_fwd(_as_rows(input), weight, _eps(eps))
    return out.view(input.shape), rstd.view(*input.shape[:-1], 1)


def _fused_rms_norm_backward_cond(
    grad_out: torch.Tensor,
    input: torch.Tensor,
    normalized_shape: list[int],
    rstd: torch.Tensor,
    weight: torch.Tensor | None,
    output_mask: list[bool],
) -> bool:
    # The forward's conditions, on the forward's input and weight.
    if not _is_supported(input, normalized_shape, weight):
        return False
    # The kernel reads dy with x's vector width: same shape, dtype and device.
    if (
        grad_out.shape != input.shape
        or grad_out.dtype != input.dtype
        or grad_out.device != input.device
    ):
        return False
    # The kernel reads one fp32 rstd per row, as the forward saved it.
    if rstd.dtype != torch.float32 or rstd.numel() != input.numel() // input.shape[-1]:
        return False
    # The launcher reads their data_ptr, which would materialize them.
    is_cow = torch._C._is_cow_tensor  # pyrefly: ignore[missing-attribute]
    if is_cow(grad_out) or is_cow(rstd):
        return False
    return True


def _fused_rms_norm_backward_impl(
    grad_out: torch.Tensor,
    input: torch.Tensor,
    normalized_shape: list[int],
    rstd: torch.Tensor,
    weight: torch.Tensor | None,
    output_mask: list[bool],
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    from .triton_kernels import rms_norm_bwd

    # upstream gradients are often expanded (stride 0): read them as rows
    dy = grad_out.contiguous().view(-1, input.shape[-1])
    with _on_device(input):
        grad_input, grad_weight = rms_norm_bwd(
            dy, _as_rows(input), rstd.reshape(-1), weight
        )
    return (
        grad_input.view(input.shape) if output_mask[0] else None,
        grad_weight if output_mask[1] else None,
    )


def register_to_dispatch() -> None:
    tu.register_op_override(
        "aten",
        "_fused_rms_norm",
        "CUDA",
        cond=_fused_rms_norm_cond,
        impl=_fused_rms_norm_impl,
    )
    tu.register_op_override(
        "aten",
        "_fused_rms_norm_backward",
        "CUDA",
        cond=_fused_rms_norm_backward_cond,
        impl=_fused_rms_norm_backward_impl,
    )
'''

#: Edits of the wheel's files: (file, anchor that must occur once, replacement).
EDITS = (
    (INIT_FILE, '''from .rmsnorm_impl import register_rmsnorm_overrides


register_rmsnorm_overrides()
''', '''from .rmsnorm_impl import register_rmsnorm_overrides
from .triton_impl import register_to_dispatch as _register_triton


# The registry tries the overrides of one op in registration order and runs the
# first whose cond accepts the call: quack's CuTeDSL kernel (sm_90/sm_100) goes
# first, and the Triton kernel takes the calls quack declines. No measurement
# compares the two where both apply.
register_rmsnorm_overrides()
_register_triton()
'''),
)

TESTS = '''\
# Owner(s): ["module: dsl-native-ops"]
#
# The Triton overrides of aten::_fused_rms_norm and its backward, with the row
# threshold lowered so small shapes qualify. On CUDA: the overrides registered at
# import, quack's switched off. Without CUDA: registered here for the CPU key, the
# kernels run by Triton's interpreter (TRITON_INTERPRET=1).

import importlib
import os
import unittest
import warnings
from unittest import mock

import torch
import torch._native.registry as registry_module
import torch.nn.functional as F
from torch._native.ops.norm import triton_impl, triton_kernels
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
    skipIfTorchDynamo,
    TestCase,
)


_INTERPRET = os.getenv("TRITON_INTERPRET", "0") == "1"
_DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
# the tolerances of the quack override's tests
_TOLERANCES = {torch.float32: 2e-4, torch.float16: 3e-3, torch.bfloat16: 3e-2}
_OPS = (
    ("_fused_rms_norm", triton_impl._fused_rms_norm_cond, triton_impl._fused_rms_norm_impl),
    (
        "_fused_rms_norm_backward",
        triton_impl._fused_rms_norm_backward_cond,
        triton_impl._fused_rms_norm_backward_impl,
    ),
)


def _reference_backward(grad_out, input, normalized_shape, rstd, weight, output_mask):
    # aten has no CPU kernel for _fused_rms_norm_backward (its CPU forward is
    # composite); this is its formula, so the router has a fallthrough.
    dims = tuple(range(-len(normalized_shape), 0))
    x_hat = input.float() * rstd
    g = grad_out.float()
    gw = g * weight.float() if weight is not None else g
    grad_input = rstd * (gw - x_hat * (gw * x_hat).mean(dims, keepdim=True))
    grad_weight = None
    if weight is not None and output_mask[1]:
        lead = tuple(range(input.ndim - len(normalized_shape)))
        grad_weight = (g * x_hat).sum(lead).to(weight.dtype)
    return grad_input.to(input.dtype) if output_mask[0] else None, grad_weight


@skipIfTorchDynamo("exercises the dispatcher directly")
@unittest.skipIf(
    _DEVICE == "cpu" and not _INTERPRET,
    "without CUDA the kernels run under Triton's interpreter (TRITON_INTERPRET=1)",
)
@instantiate_parametrized_tests
class TestRmsNormTritonOverride(TestCase):
    def setUp(self):
        super().setUp()
        self.registry = registry_module
        self._enter(torch.device(_DEVICE))
        # The CUDA threshold protects aten on small launch-bound calls; the
        # tests check the kernels, not the threshold.
        self._enter(mock.patch.object(triton_impl, "_MIN_ROWS", 8))
        if _DEVICE == "cuda":
            nodes = self.registry._graphs.get(("_fused_rms_norm", "CUDA"), [])
            if not any(node.dsl_name == "triton" for node in nodes):
                self.skipTest("no Triton override registered (triton_utils' gates)")
            # quack's override comes first where it applies
            self._enter(torch.backends.python_native.cutedsl.disabled())
            return
        saved_graphs = {k: list(v) for k, v in self.registry._graphs.items()}
        fallback_lib = torch.library.Library("aten", "IMPL", "CPU")
        fallback_lib.impl("_fused_rms_norm_backward", _reference_backward)
        self.addCleanup(fallback_lib._destroy)
        self.addCleanup(self.registry._graphs.update, saved_graphs)
        with warnings.catch_warnings():
            # the router replaces the reference at CPU, as torch/_native does
            warnings.filterwarnings(
                "ignore",
                message="Warning only once for all operators",
                category=UserWarning,
            )
            for op, cond, impl in _OPS:
                self.registry.register_op_override(
                    "triton", "aten", op, "CPU", cond, impl
                )
                self.registry._register_overrides_from_graph(
                    op, "CPU", self.registry._graphs[(op, "CPU")]
                )
                self.addCleanup(self.registry._graphs.pop, (op, "CPU"), None)
                self.addCleanup(self.registry._destroy_aten_override, op, "CPU")

    def tearDown(self):
        # before TestCase's own checks (the default-device mode is one of them)
        self.doCleanups()
        super().tearDown()

    def _enter(self, context):
        context.__enter__()
        self.addCleanup(context.__exit__, None, None, None)

    def _spy(self, name):
        spy = mock.patch.object(
            triton_kernels, name, wraps=getattr(triton_kernels, name)
        )
        self.addCleanup(spy.stop)
        return spy.start()

    def _aten(self, fn):
        with torch.backends.python_native.triton.disabled():
            return fn()

    @parametrize("dtype", list(_TOLERANCES))
    @parametrize("has_weight", [False, True])
    def test_forward_and_backward_take_the_kernels(self, dtype, has_weight):
        fwd, bwd = self._spy("rms_norm_fwd"), self._spy("rms_norm_bwd")
        x = torch.randn(3, 5, 64, dtype=dtype, requires_grad=True)
        w = torch.randn(64, dtype=dtype, requires_grad=True) if has_weight else None
        dy = torch.randn(3, 5, 64, dtype=dtype)

        def run():
            y, rstd = torch.ops.aten._fused_rms_norm(x, [64], w, None)
            inputs = (x, w) if has_weight else (x,)
            return (y, rstd, *torch.autograd.grad(y, inputs, dy))

        actual = run()
        self.assertEqual((fwd.call_count, bwd.call_count), (1, 1))
        expected = self._aten(run)
        self.assertEqual((fwd.call_count, bwd.call_count), (1, 1))
        tol = _TOLERANCES[dtype]
        self.assertEqual(actual, expected, atol=tol, rtol=tol)
        self.assertEqual(actual[1].shape, (3, 5, 1))

    def test_strided_rows(self):
        fwd, bwd = self._spy("rms_norm_fwd"), self._spy("rms_norm_bwd")
        x = torch.randn(16, 96)[:, :64].requires_grad_()
        w = torch.randn(64)

        def run():
            y = F.rms_norm(x, [64], w, 1e-6)
            return y, *torch.autograd.grad(y, x, torch.ones_like(y))

        actual = run()
        self.assertEqual((fwd.call_count, bwd.call_count), (1, 1))
        tol = _TOLERANCES[torch.float32]
        self.assertEqual(actual, self._aten(run), atol=tol, rtol=tol)

    @parametrize(
        "case",
        [
            "too_few_rows",
            "misaligned_width",
            "transposed",
            "float64",
            "two_normalized_dims",
            "strided_weight",
            "too_wide",
            "empty",
            "copy_on_write",
        ],
    )
    def test_declined_calls_run_aten(self, case):
        fwd = self._spy("rms_norm_fwd")
        x, w, shape = torch.randn(16, 64), torch.randn(64), [64]
        if case == "too_few_rows":
            x = torch.randn(7, 64)
        elif case == "misaligned_width":
            x, w, shape = torch.randn(16, 30), torch.randn(30), [30]
        elif case == "transposed":
            x = torch.randn(64, 16).t()
        elif case == "float64":
            x, w = x.double(), w.double()
        elif case == "two_normalized_dims":
            x, w, shape = torch.randn(16, 4, 16), torch.randn(4, 16), [4, 16]
        elif case == "strided_weight":
            w = torch.randn(128)[::2]
        elif case == "too_wide":
            x, w, shape = torch.randn(8, 16388), None, [16388]
        elif case == "empty":
            x = torch.randn(0, 64)
        else:
            x = torch.randn(16, 64)._lazy_clone()
        actual = F.rms_norm(x, shape, w)
        self.assertEqual(fwd.call_count, 0)
        self.assertEqual(actual, self._aten(lambda: F.rms_norm(x, shape, w)))
        if case == "copy_on_write":
            self.assertTrue(torch._C._is_cow_tensor(x))

    def test_invalid_arguments_raise_aten_errors(self):
        x = torch.randn(16, 64)
        with self.assertRaisesRegex(RuntimeError, "normalized_shape"):
            F.rms_norm(x, [32])
        self.assertFalse(triton_impl._fused_rms_norm_cond(x, [32], None, None))

    def test_quack_is_registered_first(self):
        calls = []
        with (
            mock.patch.object(
                triton_impl.tu,
                "register_op_override",
                side_effect=lambda *a, **k: calls.append(("triton", a[1])),
            ),
            mock.patch(
                "torch._native.cutedsl_utils.register_op_override",
                side_effect=lambda *a, **k: calls.append(("cutedsl", a[1])),
            ),
        ):
            importlib.reload(importlib.import_module("torch._native.ops.norm"))
        for op, _, _ in _OPS:
            self.assertEqual(
                [dsl for dsl, name in calls if name == op], ["cutedsl", "triton"]
            )


if __name__ == "__main__":
    run_tests()
'''


def _first_sentence_docstring(node: ast.FunctionDef, lines: list[str], start: int) -> list[str]:
    """The function's lines with its docstring cut to its first sentence, wrapped to :data:`WIDTH`."""
    body = lines[start:node.end_lineno]
    doc = ast.get_docstring(node)
    if doc is None:
        return body
    d = node.body[0]
    indent = " " * d.col_offset
    first = re.split(r"(?<=\.)\s", " ".join(doc.split("\n\n")[0].split()), maxsplit=1)[0]
    wrapped = textwrap.wrap(first, WIDTH - len(indent) - 6)
    new = [f'{indent}"""{wrapped[0]}' + ('"""\n' if len(wrapped) == 1 else "\n")]
    new += [f"{indent}{w}\n" for w in wrapped[1:-1]]
    new += [f'{indent}{wrapped[-1]}"""\n'] if len(wrapped) > 1 else []
    return body[:d.lineno - 1 - start] + new + body[d.end_lineno - start:]


def _segments(rel: str, names: tuple[str, ...]) -> dict[str, str]:
    """The source of each named top-level function or assignment of ``fastpath_lib/<rel>`` (decorators and comments
    included; a docstring cut to its first sentence)."""
    text = (PKG / rel).read_text()
    lines = text.splitlines(keepends=True)
    found = {}
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef):
            name = node.name
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            name = getattr(target, "id", "")
        else:
            continue
        if name not in names:
            continue
        start = (node.decorator_list[0].lineno if getattr(node, "decorator_list", None) else node.lineno) - 1
        body = _first_sentence_docstring(node, lines, start) if isinstance(node, ast.FunctionDef) else \
            lines[start:node.end_lineno]
        found[name] = "".join(body).rstrip() + "\n"
    missing = [n for n in names if n not in found]
    if missing:
        raise SystemExit(f"fastpath_lib/{rel} has no top-level {', '.join(missing)}: update {Path(__file__).name}")
    return found


def _call_end(text: str, open_paren: int) -> int:
    """The index of the parenthesis closing the one at ``open_paren``."""
    depth = 0
    for i in range(open_paren, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return i
    raise SystemExit("unbalanced parentheses in a vendored kernel")


def _top_level_args(inner: str) -> list[str]:
    args, depth, cur = [], 0, ""
    for ch in inner:
        depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            args.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return [*args, cur.strip()] if cur.strip() else args


def _primary(expr: str) -> bool:
    """Whether ``expr`` is a name, an attribute or a call of one (no parentheses needed before ``.to``)."""
    m = re.match(r"[\w.]+", expr)
    if m is None:
        return False
    return m.end() == len(expr) or (expr[m.end()] == "(" and _call_end(expr, m.end()) == len(expr) - 1)


def plain_casts(src: str) -> str:
    """The kit's interpreter-faithful conversions as Triton's own casts: ``to_fp32(v)`` -> ``v.to(tl.float32)`` and
    ``round_to(v, ty)`` -> ``v.to(ty)`` (what they compile to on a GPU)."""
    for name in ("to_fp32", "round_to"):
        while (m := re.search(rf"\b{name}\(", src)) is not None:
            end = _call_end(src, m.end() - 1)
            args = _top_level_args(src[m.end():end])
            value = args[0] if _primary(args[0]) else f"({args[0]})"
            src = src[:m.start()] + f"{value}.to({'tl.float32' if name == 'to_fp32' else args[1]})" + src[end + 1:]
    return src


def _fit_comments(src: str) -> str:
    """Comments re-wrapped to :data:`WIDTH`: a trailing comment that makes its line too long moves above the line,
    and a block of comment lines with one too long is re-wrapped as one paragraph."""
    out: list[str] = []
    block: list[str] = []

    def flush() -> None:
        if block and max(map(len, block)) > WIDTH:
            indent = block[0][: len(block[0]) - len(block[0].lstrip())]
            words = " ".join(b.strip()[2:] for b in block)
            out.extend(textwrap.wrap(words, WIDTH - len(indent) - 2, initial_indent=f"{indent}# ",
                                     subsequent_indent=f"{indent}# "))
        else:
            out.extend(block)
        block.clear()

    for line in src.splitlines():
        code, sep, comment = line.partition("  # ")
        stripped = line.lstrip()
        indent = line[: len(line) - len(stripped)]
        if stripped.startswith("# ") and (not block or block[0].startswith(indent + "#")):
            block.append(line)
            continue
        flush()
        if stripped.startswith("# "):
            block.append(line)
        elif sep and len(line) > WIDTH and '"' not in code:
            out.extend(textwrap.wrap(comment, WIDTH - len(indent) - 2, initial_indent=f"{indent}# ",
                                     subsequent_indent=f"{indent}# "))
            out.append(code.rstrip())
        else:
            out.append(line)
    flush()
    return "\n".join(out) + "\n"


def ruff(args: list[str], text: str, filename: str) -> subprocess.CompletedProcess:
    """``ruff`` at PyTorch's settings (88 columns, its rule selection; the kit's pyproject not read) on ``text``."""
    cmd = [sys.executable, "-m", "ruff", *args, "--isolated", "--line-length", str(WIDTH), "--target-version", "py310",
           "--stdin-filename", filename, "-"]
    if args[0] == "check" and "--select" not in args:
        cmd[4:4] = ["--select", RUFF_SELECT, "--ignore", RUFF_IGNORE]
    return subprocess.run(cmd, input=text, capture_output=True, text=True, check=False)


def _format(text: str, filename: str) -> str:
    """isort-sorted (PyTorch's isort: torch first-party, two lines after imports) and formatted at 88 columns."""
    # and what PyTorch's linters find in the vendored code fixed the way ruff fixes it: itertools.pairwise for
    # zip(lead, lead[1:]) (ruff's RUF007), range(n) for range(0, n) (PIE808), zip(..., strict=False) (flake8-bugbear's
    # B905, which PyTorch's .flake8 does not ignore)
    res = ruff(["check", "--select", "I,RUF007,PIE808,B905", "--fix", "--unsafe-fixes", "--exit-zero", "--quiet",
                "--config",
                "lint.isort.known-first-party = ['torch']", "--config", "lint.isort.lines-after-imports = 2",
                "--config", "lint.isort.order-by-type = false"], text, filename)
    if res.returncode != 0 or not res.stdout:
        raise SystemExit(f"ruff failed on {filename} (pip install -e '.[dev]'):\n{res.stderr}")
    res = ruff(["format"], res.stdout, filename)
    if res.returncode != 0:
        raise SystemExit(f"ruff format failed on {filename}:\n{res.stderr}")
    return res.stdout


def new_kernel_file() -> str:
    """``torch/_native/ops/norm/triton_kernels.py``: the kit's kernels and launch rule renamed, with the launchers."""
    parts = [_kernel_header()]
    for rel, names in VENDORED:
        segments = _segments(rel, names)
        for name in names:
            seg = segments[name]
            for anchor, replacement in KERNEL_EDITS.get(name, ()):
                if seg.count(anchor) != 1:
                    raise SystemExit(f"{name} has the anchor {seg.count(anchor)} times, not once: update "
                                     f"{Path(__file__).name}\n{anchor}")
                seg = seg.replace(anchor, replacement)
            parts += ["\n\n" if seg.startswith(("def", "@")) else "\n", seg]
    text = plain_casts("".join(parts) + LAUNCHERS)
    for old, new in RENAMES.items():
        text = re.sub(rf"(?<![\w.]){old}\b", new, text)
    for old, new in PHRASES.items():
        text = re.sub(old, new, text)
    return _format(_fit_comments(text), KERNEL_FILE)


def new_impl_file() -> str:
    """``torch/_native/ops/norm/triton_impl.py``: cond and impl, with the kit's row-stride rule vendored."""
    segment = _segments("rmsnorm/layout.py", ("row_stride",))["row_stride"]
    row_stride = re.sub(r"\brow_stride\b", "_row_stride", segment)
    return _format(_impl_file().replace("ROW_STRIDE\n", row_stride), IMPL_FILE)


def torch_site() -> Path:
    """The installed torch package's folder (its parent holds ``torch/_native``)."""
    import torch

    return Path(torch.__file__).resolve().parents[1]


def patched_files(site: Path | None = None) -> dict[str, tuple[str, str]]:
    """Each file of :data:`CHANGED`: ``(text in the wheel or "" for a new file, text after the patch)``."""
    site = site or torch_site()
    files = {rel: ["", ""] if rel in NEW_FILES else [(site / rel).read_text()] * 2 for rel in CHANGED}
    for rel, anchor, replacement in EDITS:
        count = files[rel][1].count(anchor)
        if count != 1:
            raise SystemExit(f"{rel} of the installed torch has the anchor {count} times, not once: update "
                             f"{Path(__file__).name}\n{anchor}")
        files[rel][1] = files[rel][1].replace(anchor, replacement)
    files[KERNEL_FILE][1] = new_kernel_file()
    files[IMPL_FILE][1] = new_impl_file()
    files[TEST_FILE][1] = _format(TESTS, TEST_FILE)
    return {rel: (old, new) for rel, (old, new) in files.items()}


def render(site: Path | None = None) -> str:
    """The whole patch, in git's format (``git apply`` and ``patch -p1`` take it), written as the vLLM patch's
    generator writes its own (``make_upstream.git_diff``)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_upstream", Path(__file__).with_name("make_upstream.py"))
    make_upstream = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_upstream)
    return make_upstream.git_diff(patched_files(site))


def refusals(impl_source: str) -> list[str]:
    """What ``cond`` declines, and why: the comment above each ``return False`` of the impl file (the last comment
    since the previous ``return``), one line each, in order. Raises when a refusal has no comment."""
    out: list[str] = []
    comment: list[str] = []
    fresh = False  # the current comment block is still being read
    for number, line in enumerate(impl_source.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("# "):
            comment = (comment if fresh else []) + [stripped[2:]]
            fresh = True
            continue
        fresh = False
        if stripped == "return False":
            if not comment:
                raise SystemExit(f"{IMPL_FILE}:{number}: a refusal without a comment saying why")
            out.append(" ".join(comment))
            comment = []
        elif stripped.startswith(("return ", "def ")):
            comment = []
    return out


def _counts(patch: str) -> list[tuple[str, int, int]]:
    out = []
    for chunk in patch.split("diff --git a/")[1:]:
        lines = chunk.splitlines()
        out.append((chunk.split(" ", 1)[0], sum(ln.startswith("+") and not ln.startswith("+++") for ln in lines),
                    sum(ln.startswith("-") and not ln.startswith("---") for ln in lines)))
    return out


def render_note(patch: str | None = None) -> str:
    """The PR description of the patch alone, in PyTorch's template, from the patch's own text."""
    import torch
    import triton

    patch = render() if patch is None else patch
    impl = "".join(ln[1:] + "\n" for ln in patch.split(f"diff --git a/{IMPL_FILE}", 1)[1].split("diff --git", 1)[0]
                   .splitlines() if ln.startswith("+") and not ln.startswith("+++"))
    min_rows = re.search(r"^_MIN_ROWS = (\d+)", impl, re.M).group(1)
    files = [f"| `{f}` | +{a} -{r} |" for f, a, r in _counts(patch)]
    why = [f"- {r}" for r in refusals(impl)]
    return "\n".join([
        "# [native] Triton overrides of aten::_fused_rms_norm and its backward", "",
        PR_TEMPLATE_HEAD, "",
        "Adds Triton kernels for `aten::_fused_rms_norm` and `aten::_fused_rms_norm_backward` to `torch/_native`, "
        "registered through `triton_utils.register_op_override` for the CUDA key, as `ops/bmm_outer_product` "
        "does. `cond` decides per call; where it declines, the call falls through to the next override or to "
        "aten, so `F.rms_norm`'s results and errors outside the override's region are aten's.", "",
        "## Summary", "",
        "| file | lines |", "|---|---|", *files, "",
        "- Forward: one program normalizes a tile of rows in fp32 and rounds once to the input dtype; it also "
        "stores the fp32 `rstd` that `_fused_rms_norm` returns. Backward: reads that `rstd`, computes `dx` per row "
        "and reduces `dw` deterministically (fixed row blocks into fp32 partial rows, summed in a fixed order).",
        "- Order against quack: `ops/norm/__init__.py` registers quack's CuTeDSL overrides first, and the registry "
        "runs the first override whose `cond` accepts a call. quack's is registered where `nvidia-cutlass-dsl` and "
        "`apache-tvm-ffi` are installed and the DSL's version is one `cutedsl_utils` lists as known-good; there "
        "quack keeps every call its `cond` accepts (compute capability 9.x or 10.x, a weight of the input's dtype, "
        "among others), and this override takes the calls quack declines, and all eligible calls on other NVIDIA "
        "GPUs from sm_80. No measurement "
        "compares the two where both apply, so the patch defers to quack; `TORCH_PYTHON_NATIVE_USER_GRAPH_ORDER_FN` "
        "reorders them for anyone who measures otherwise.",
        f"- The row threshold: calls with fewer than {min_rows} rows go to aten. No GPU sweep has measured where the "
        "kernel starts to beat aten; the bound is conservative until one does.",
        "- Compile and export see the override only through `native_decomp_table()`, as every `torch/_native` "
        "override; not tested by this patch (on a FakeTensor `cond` reads a data pointer of 0, so the alignment "
        "is decided again by the launcher at run time).",
        *fold_note("What cond declines, and why (each refusal carries this comment in the code)", why), "",
        "## Test Plan", "",
        "```bash",
        f"python {TEST_FILE}                      # CUDA: the overrides registered at import",
        f"TRITON_INTERPRET=1 python {TEST_FILE}   # no CUDA: registered for the CPU key here",
        "lintrunner -a",
        "```", "",
        "Without CUDA the tests register both overrides for the CPU key (the registry accepts it) and run the"
        " kernels under Triton's interpreter: forward and backward through `F.rms_norm` and autograd, three "
        "dtypes, with and without weight, strided rows, each counted as one launch of each kernel and "
        "compared with aten; nine kinds of declined call (too few rows, unaligned width, transposed, fp64, "
        "two normalized dims, strided weight, too wide, empty, copy-on-write) launch nothing and return "
        "aten's values; the registration order against quack. aten has no CPU kernel for "
        "`_fused_rms_norm_backward` (its CPU forward is composite), so the test supplies the backward formula"
        " there as the fallthrough. On a CUDA machine the same tests run at the CUDA key, on the overrides "
        "registered at import, with quack's switched off.", "",
        "## Test Result", "",
        f"- CPU (torch {torch.__version__}, Triton {triton.__version__}, `TRITON_INTERPRET=1`): the tests above "
        "pass; the patch applies to the 2.13 wheel's `torch/_native` (`git apply --check`, `patch -p1`); ruff at "
        "`pyproject.toml`'s settings and `ruff format` at 88 columns report nothing. flake8 at `.flake8`'s settings "
        "(not among the kit's packages), mypy and pyrefly are not run on it.",
        "- **GPU: unmeasured.** No GPU run of this patch exists yet: no speed-up is claimed, and neither the "
        "tests at the CUDA key nor its registration (the `triton_utils` version and availability gates) have run. "
        "Wanted before review: `F.rms_norm` forward and backward against aten on sm_80/sm_89 (bf16/fp16, hidden "
        "2048-8192, 1-16384 rows) for the row threshold; on sm_90 with and without quack's override, to confirm "
        "the order.", "",
        *PR_TEMPLATE_BOXES, ""])


def fold_note(summary: str, lines: list[str]) -> list[str]:
    """``lines`` folded in a ``<details>`` block, as the kit's notes fold long lists."""
    return ["", "<details>", f"<summary>{summary}</summary>", "", *lines, "", "</details>"] if lines else []


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 with a diff when the patch is out of date")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    patch = render()
    outputs = {TARGET: patch, NOTE: render_note(patch)}
    if args.check:
        stale = 0
        for path, new in outputs.items():
            old = path.read_text() if path.exists() else ""
            if old != new:
                sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True), str(path),
                                                           "generated"))
                stale = 1
        return stale
    for path, new in outputs.items():
        path.parent.mkdir(exist_ok=True)
        path.write_text(new)
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
