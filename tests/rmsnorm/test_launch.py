"""The launch rule's alignment check (``VEC``) and the kernels on both sides of it, under the interpreter or on CUDA."""

from __future__ import annotations

import pytest
import torch

from fastpath_lib.rmsnorm import launch
from fastpath_lib.testing import compare, reference_grads, reference_rms_norm


def test_vector_elements_only_for_aligned_launches():
    """VEC > 1 exactly when the pointers, row strides and width are whole 16-byte vectors: the launcher checks it
    itself, since tests (and anyone) may call it on layouts the predicate would send to the fallback."""
    assert launch.vector_elements(4, 100, (100, 100), (0, 4096, 64)) == 4
    assert launch.vector_elements(2, 24, (24, 24), (0, 4096, 64)) == 8
    assert launch.vector_elements(2, 8, (8,), (0,)) == 8
    assert launch.vector_elements(2, 12, (12, 12), (0, 0)) == 1  # width 24 bytes
    assert launch.vector_elements(2, 62, (64, 62), (0, 0)) == 1  # width 124 bytes in an aligned stride
    assert launch.vector_elements(4, 64, (66, 64), (0, 0)) == 1  # stride 264 bytes
    assert launch.vector_elements(4, 64, (64, 64), (8, 0)) == 1  # input 8 bytes off
    assert launch.vector_elements(4, 64, (64, 64), (0, 0, 4)) == 1  # weight 4 bytes off


LAYOUTS = [  # (dtype, cols, pad, offset in elements): aligned ones first, then each way to miss 16 bytes
    (torch.float32, 100, 0, 0), (torch.float16, 24, 8, 0), (torch.bfloat16, 8, 0, 8), (torch.float32, 4, 4, 0),
    (torch.float32, 100, 2, 0), (torch.float16, 24, 0, 2), (torch.bfloat16, 12, 0, 0), (torch.float32, 7, 1, 0),
]


@pytest.mark.parametrize("dtype,cols,pad,offset", LAYOUTS)
def test_kernels_on_both_sides_of_the_alignment_check(dtype, cols, pad, offset, device):
    """Forward and backward agree with the reference whether the launcher passes VEC > 1 or 1."""
    from fastpath_lib.rmsnorm import kernels

    torch.manual_seed(3)
    rows = 9
    buf = torch.randn(offset + rows * (cols + pad), dtype=dtype, device=device)
    x = buf[offset:].view(rows, cols + pad)[:, :cols]
    w = torch.randn(cols, dtype=dtype, device=device)
    aligned = (cols + pad) * x.element_size() % 16 == 0 and cols * x.element_size() % 16 == 0 \
        and offset * x.element_size() % 16 == 0
    assert (launch.vector_elements(x.element_size(), cols, (x.stride(0), cols), (x.data_ptr(), w.data_ptr()))
            > 1) == aligned
    eps = 1e-6
    y = kernels.forward(x, w, eps)
    assert compare(y, reference_rms_norm(x, [cols], w, eps), dtype) is None
    dy = torch.randn(rows, cols, dtype=dtype, device=device)
    dx, dw = kernels.backward(dy, x, w, eps)
    dx64, dw64 = reference_grads(x, [cols], w, eps, dy)
    assert compare(dx, dx64, dtype, grad=True) is None
    assert compare(dw, dw64, dtype, grad=True) is None


@pytest.mark.parametrize("step", [2, 0])
def test_launchers_read_a_strided_weight_as_its_values(step, device):
    """The kernels read ``w[col]`` at ``W_ptr + col``: the launchers make a strided or expanded weight contiguous
    (the dispatch never sends one; direct launcher calls, as in the lessons and the benchmark, may)."""
    from fastpath_lib.rmsnorm import kernels

    x = torch.randn(16, 64, device=device)
    w = torch.randn(128, device=device)[::2] if step else torch.tensor(1.5, device=device).expand(64)
    assert w.stride(0) == step
    assert compare(kernels.forward(x, w, 1e-6), reference_rms_norm(x, [64], w, 1e-6), torch.float32) is None
    dy = torch.randn(16, 64, device=device)
    dx, dw = kernels.backward(dy, x, w, 1e-6)
    rdx, rdw = reference_grads(x, [64], w, 1e-6, dy)
    assert compare(dx, rdx, torch.float32, grad=True) is None
    assert compare(dw, rdw, torch.float32, grad=True) is None
