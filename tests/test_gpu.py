"""GPU-only checks (skipped without CUDA): the real route, autocast on CUDA, capture, architecture.

On a T4 (sm_75) the route checks run inside ``selftest.allow_sm75()``, the learners' opt-in (fp16 and fp32 take the
kernels, bf16 the fallback); on an older GPU every call takes the fallback."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import fastpath_lib
from fastpath_lib.rmsnorm.graph_capture import capture_from_results, run_capture
from fastpath_lib.cases import CaseSpec
from fastpath_lib.rmsnorm import capture, limits
from fastpath_lib.rmsnorm import predicate as P
from fastpath_lib.selftest import allow_sm75
from fastpath_lib.testing import compare, reference_grads, reference_rms_norm

pytestmark = pytest.mark.gpu


def _rows():
    return P.limits_for("cuda").min_rows


def _route(dtype) -> str:
    """The route an eligible call of ``dtype`` takes here inside ``allow_sm75()``."""
    cap = tuple(torch.cuda.get_device_capability())
    admitted = cap >= P.MIN_CAPABILITY or (cap == limits.SM75 and dtype in limits.SM75_DTYPES)
    return "triton" if admitted else "fallback"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("cols", [16, 4096, P.MAX_COLS])
def test_cuda_triton_route_matches_reference(dtype, cols):
    x, ns, w = CaseSpec(rows=_rows(), cols=cols, dtype=dtype).build(seed=1, device="cuda").args()
    x = x.detach().clone().requires_grad_()
    w = w.detach().clone().requires_grad_()
    with allow_sm75(), fastpath_lib.record_routes() as fw, fastpath_lib.record_routes("backward") as bw:
        y = fastpath_lib.rms_norm(x, ns, w)
        dy = torch.randn_like(y)
        gx, gw = torch.autograd.grad(y, (x, w), dy)
    assert fw == {_route(dtype): 1} and bw == {_route(dtype): 1}
    assert compare(y, reference_rms_norm(x, ns, w), dtype) is None
    rdx, rdw = reference_grads(x, ns, w, None, dy)
    assert compare(gx, rdx, dtype, grad=True) is None and compare(gw, rdw, dtype, grad=True) is None


def test_cuda_below_threshold_falls_back():
    if _rows() <= 1:
        pytest.skip(f"this device's recorded threshold is {_rows()} row: no row count is below it")
    x = torch.randn(_rows() - 1, 1024, device="cuda")
    with allow_sm75():
        assert fastpath_lib.explain(x, [1024]).failed == (
            [] if _route(x.dtype) == "triton" else ["architecture"]) + ["min_rows"]


@pytest.mark.parametrize("xdtype", [torch.float32, torch.bfloat16])
def test_cuda_autocast_matches_reference(xdtype):
    x, ns, w = CaseSpec(rows=_rows(), cols=256, dtype=xdtype, weight=torch.float32).build(device="cuda").args()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        ours, ref = fastpath_lib.rms_norm(x, ns, w), F.rms_norm(x, ns, w)
    assert ours.dtype == ref.dtype
    assert compare(ours, reference_rms_norm(x, ns, w), ours.dtype) is None


def test_cuda_graph_capture_follows_the_record_and_replays():
    """A captured call takes the fallback unless capture.json records a passed capture test for this architecture."""
    x, ns, w = CaseSpec(rows=_rows(), cols=256).build(device="cuda").args()
    fastpath_lib.rms_norm(x, ns, w)  # warm up outside capture
    g = torch.cuda.CUDAGraph()
    with fastpath_lib.record_routes() as routes, torch.cuda.graph(g):
        y = fastpath_lib.rms_norm(x, ns, w)
    assert routes == {"triton" if capture.verified(torch.cuda.get_device_capability()) else "fallback": 1}
    g.replay()
    torch.cuda.synchronize()
    assert compare(y, reference_rms_norm(x, ns, w), x.dtype) is None


def test_cuda_graph_capture_test_passes(tmp_path):
    """The evidence run's capture step: both routes captured at the boundary shapes (forward, and backward), replayed
    on new data copied into the static inputs, equal to the reference; its file is what ``capture`` records."""
    res = run_capture(tmp_path)
    assert res["passed"], res["why"]
    assert capture_from_results(tmp_path)["passed"] is True


def test_architecture_reported():
    cap = torch.cuda.get_device_capability()
    d = fastpath_lib.explain(torch.randn(_rows(), 64, device="cuda"), [64])
    assert ("architecture" in d.failed) == (cap < P.MIN_CAPABILITY)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_cuda_tensor_on_another_device_than_the_current_one():
    """Triton launches on the current device; the launchers switch to the tensor's."""
    x, ns, w = CaseSpec(rows=_rows(), cols=256).build(seed=2, device="cuda:1").args()
    with allow_sm75(), torch.cuda.device(0), fastpath_lib.record_routes() as routes:
        y = fastpath_lib.rms_norm(x, ns, w)
    assert routes == {_route(x.dtype): 1} and y.device == x.device
    assert compare(y, reference_rms_norm(x, ns, w), x.dtype) is None
