"""The interpreter self-test says which check failed and whether the kit's kernels or the toolchain is at fault."""

from __future__ import annotations

import pytest
import torch

from fastpath_lib import runtime, selftest

pytestmark = pytest.mark.skipif(not (runtime.interpreter_enabled() or runtime.cuda_available()),
                                reason="needs CUDA or the Triton interpreter")


def test_passes_here_and_the_probe_is_right():
    res = selftest.run()
    assert res.ok and res.culprit == "" and "FAILED" not in str(res), str(res)
    dev = runtime.kernel_device()
    assert selftest.toolchain_probe(dev) == []


@pytest.fixture
def kernels():
    from fastpath_lib.rmsnorm import kernels as k

    return k


def test_a_kernel_with_a_wrong_mean_is_blamed_on_the_kernel(monkeypatch, kernels):
    right = kernels.forward

    def wrong_mean(x2d, weight, eps, **kw):  # mean over n_cols + 1: every output about 1/(2n) too large
        n = x2d.shape[-1]
        return (right(x2d, weight, eps, **kw).float() * ((n + 1) / n) ** 0.5).to(x2d.dtype)

    monkeypatch.setattr(kernels, "forward", wrong_mean)
    res = selftest.run()
    text = str(res)
    assert not res.ok and res.culprit == "kernel", text
    assert "forward" in text and all(f"{dt} 5x37 forward" in text for dt in ("float32", "float16"))
    assert "kit's kernels are at fault" in text and "fastpath_lib/rmsnorm/kernels.py" in text
    assert runtime.versions()["triton"] in text and runtime.versions()["numpy"] in text
    assert "fix the Triton/numpy versions" not in text


def test_a_wrong_weight_gradient_reduction_is_blamed_on_the_kernel(monkeypatch, kernels):
    right = kernels.backward

    def half_the_rows(dy, x2d, weight, eps, **kw):  # dw reduced over the first half of the rows only
        dx, _ = right(dy, x2d, weight, eps, **kw)
        h = max(1, x2d.shape[0] // 2)
        _, dw = right(dy[:h], x2d[:h], weight, eps)
        return dx, dw

    monkeypatch.setattr(kernels, "backward", half_the_rows)
    res = selftest.run()
    assert res.culprit == "kernel" and " dw: " in str(res) and " dx: " not in str(res), str(res)


def test_a_broken_toolchain_is_blamed_on_the_toolchain(monkeypatch, kernels):
    import triton
    import triton.language as tl

    @triton.jit
    def unmasked_probe(X_ptr, MS_ptr, Y_ptr, COL_ptr, n_rows, n_cols, ROWS: tl.constexpr, BLOCK: tl.constexpr):
        pid = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        for i in range(ROWS):
            row = pid * ROWS + i
            x = tl.load(X_ptr + row * n_cols + cols, mask=row < n_rows, other=0.0).to(tl.float32)
            tl.store(MS_ptr + row, tl.sum(x * x, axis=0) / n_cols, mask=row < n_rows)

    right = kernels.forward
    monkeypatch.setattr(kernels, "forward", lambda x2d, w, eps, **kw: right(x2d, w, eps, **kw) * 2)
    monkeypatch.setattr(selftest, "_get_probe", lambda: unmasked_probe)  # stands in for a toolchain that miscomputes
    res = selftest.run()
    text = str(res)
    assert res.culprit == "toolchain" and res.probe_problems, text
    assert "toolchain is at fault" in text and "constraints.txt" in text and torch.__version__ in text


def test_check_raises_with_the_verdict(monkeypatch, kernels):
    right = kernels.forward
    monkeypatch.setattr(kernels, "forward", lambda x2d, w, eps, **kw: right(x2d, w, eps, **kw) * 2)
    with pytest.raises(RuntimeError, match="kit's kernels are at fault"):
        selftest.check()


def test_the_fused_ops_kernels_are_checked_too(monkeypatch):
    """docs/practitioners.md: ``selftest`` checks RMSNorm's kernels and the fused op's."""
    from fastpath_lib.fused import kernels as fused

    right = fused.forward

    def residual_off_by_one(x, r, w, eps, **kw):
        out, s = right(x, r, w, eps, **kw)
        return out, s + 1

    monkeypatch.setattr(fused, "forward", residual_off_by_one)
    res = selftest.run()
    assert not res.ok and res.culprit == "kernel" and "fused residual" in str(res), str(res)
