"""The public operator keeps the whole contract of torch.nn.functional.rms_norm, on both routes."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import fastpath_lib
from fastpath_lib.cases import CaseSpec
from fastpath_lib.rmsnorm import predicate as P
from fastpath_lib.testing import compare, reference_grads, reference_rms_norm, tolerance

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
ROUTES = ["triton", "fallback"]


def run(route, *args, **kw):
    """Call the public op on the requested route and assert it took that route."""
    with fastpath_lib.record_routes() as routes, fastpath_lib.force_fallback(route == "fallback"):
        out = fastpath_lib.rms_norm(*args, **kw)
    assert routes == {route: 1}, routes
    return out


@pytest.fixture
def eligible(device):
    return CaseSpec(rows=16, cols=96).build(seed=1, device=device).args()


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("wdtype", ["same", None, torch.float32])
def test_values_dtype_layout_no_alias(route, dtype, wdtype, device):
    x, ns, w = CaseSpec(rows=24, cols=48, dtype=dtype, weight=wdtype, scale=3).build(seed=2, device=device).args()
    y = run(route, x, ns, w)
    expected = F.rms_norm(x, ns, w)
    assert (y.dtype, y.shape, y.stride()) == (expected.dtype, expected.shape, expected.stride())
    assert y.dtype == dtype and y.is_contiguous()
    assert y.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
    assert compare(y, reference_rms_norm(x, ns, w), dtype) is None


@pytest.mark.parametrize("dtype", DTYPES)
def test_eps_default_matches_f_rms_norm(dtype, device):
    x = torch.full((8, 16), 1e-4, device=device).to(dtype)  # tiny values: eps dominates the mean square
    got = run("triton", x, [16])
    atol, rtol = tolerance(dtype)
    assert torch.allclose(got.float(), F.rms_norm(x, [16]).float(), atol=atol, rtol=rtol), "eps=None: F.rms_norm's"
    assert compare(got, reference_rms_norm(x, [16], None, P.default_eps(dtype)), dtype) is None
    assert not torch.allclose(got.float(), F.rms_norm(x, [16], eps=1e-2).float())


@pytest.mark.parametrize("eps", [0.0, 1e-6, 1e-2, 10.0])
def test_explicit_eps(eps, eligible):
    x, ns, w = eligible
    assert compare(run("triton", x, ns, w, eps), reference_rms_norm(x, ns, w, eps), x.dtype) is None


@pytest.mark.parametrize("route", ROUTES)
def test_non_finite_propagate(route, device):
    x, ns, w = CaseSpec(rows=8, cols=32).build(seed=3, device=device).args()
    x = x.clone()
    x[0, 3], x[1, 5], x[2, 7] = float("nan"), float("inf"), float("-inf")
    y, ref = run(route, x, ns, w), F.rms_norm(x, ns, w)
    assert torch.equal(torch.isnan(y), torch.isnan(ref))
    assert torch.isnan(y[0]).all() and torch.isfinite(y[3:]).all()


@pytest.mark.parametrize("dtype,scale", [(torch.float32, 1e30), (torch.float32, 1e-30), (torch.float16, 6e4),
                                         (torch.float16, 1e-4), (torch.bfloat16, 1e30)])
def test_extreme_magnitudes(dtype, scale, device):
    x, ns, w = CaseSpec(rows=8, cols=64, dtype=dtype).build(seed=4, device=device).args()
    x = (x.float() * 0 + torch.sign(x.float()) * scale).to(dtype)  # |x| = scale everywhere: rms is known
    y_t, y_f = run("triton", x, ns, w), run("fallback", x, ns, w)
    assert torch.equal(torch.isfinite(y_t), torch.isfinite(y_f))
    finite = torch.isfinite(y_f)
    atol, rtol = tolerance(dtype)
    assert torch.allclose(y_t[finite].float(), y_f[finite].float(), atol=atol, rtol=rtol)


@pytest.mark.parametrize("shape", [(0, 64), (8, 0), (0,), (2, 0, 16)])
def test_empty_inputs(shape, device):
    x = torch.randn(shape, device=device)
    ns = [shape[-1]]
    assert fastpath_lib.explain(x, ns).route == "fallback"
    y = fastpath_lib.rms_norm(x, ns)
    assert y.shape == F.rms_norm(x, ns).shape and y.dtype == x.dtype


BAD_CALLS = {
    "shape mismatch": lambda d: (torch.randn(16, 64, device=d), [65]),
    "weight shape": lambda d: (torch.randn(16, 64, device=d), [64], torch.randn(63, device=d)),
    "empty normalized_shape": lambda d: (torch.randn(16, 64, device=d), []),
    "int normalized_shape": lambda d: (torch.randn(16, 64, device=d), 64),
    "integer dtype": lambda d: (torch.randint(0, 5, (16, 64), device=d), [64]),
    "not a tensor": lambda d: ([[1.0] * 64] * 16, [64]),
    "weight not a tensor": lambda d: (torch.randn(16, 64, device=d), [64], [1.0] * 64),
    "string eps": lambda d: (torch.randn(16, 64, device=d), [64], None, "1e-6"),
    "too many dims": lambda d: (torch.randn(64, device=d), [2, 64]),
}


@pytest.mark.parametrize("name", sorted(BAD_CALLS))
def test_exception_parity(name, device):
    args = BAD_CALLS[name](device)
    with pytest.raises(Exception) as ref:
        F.rms_norm(*args)
    with pytest.raises(type(ref.value)) as ours:
        fastpath_lib.rms_norm(*args)
    assert type(ours.value) is type(ref.value), (ours.value, ref.value)


def test_weight_on_other_device_raises_like_reference():
    if not torch.cuda.is_available():
        pytest.skip("needs a second device type")
    x, w = torch.randn(16, 64, device="cuda"), torch.randn(64)
    with pytest.raises(Exception) as ref:
        F.rms_norm(x, [64], w)
    with pytest.raises(type(ref.value)):
        fastpath_lib.rms_norm(x, [64], w)


def test_deterministic_bitwise(device):
    x, ns, w = CaseSpec(rows=40, cols=80).build(seed=5, device=device).args()
    x, w = x.clone().requires_grad_(), w.clone().requires_grad_()
    dy = torch.randn(40, 80, device=device)
    outs = []
    for _ in range(3):
        y = run("triton", x, ns, w)
        gx, gw = torch.autograd.grad(y, (x, w), dy)
        outs.append((y, gx, gw))
    for y, gx, gw in outs[1:]:
        assert torch.equal(y, outs[0][0]) and torch.equal(gx, outs[0][1]) and torch.equal(gw, outs[0][2])


def test_deterministic_algorithms_mode_keeps_fast_path(eligible):
    x, ns, w = eligible
    prev = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        assert torch.equal(run("triton", x, ns, w), run("triton", x, ns, w))
    finally:
        torch.use_deterministic_algorithms(prev)


# --- gradients --------------------------------------------------------------------------------------------------

def test_gradcheck_float64_through_fallback(device):
    x = torch.randn(8, 12, dtype=torch.float64, device=device, requires_grad=True)
    w = torch.randn(12, dtype=torch.float64, device=device, requires_grad=True)
    assert fastpath_lib.explain(x, [12], w).route == "fallback"
    assert torch.autograd.gradcheck(lambda a, b: fastpath_lib.rms_norm(a, [12], b), (x, w))
    assert torch.autograd.gradgradcheck(lambda a, b: fastpath_lib.rms_norm(a, [12], b), (x, w))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("with_weight", [True, False])
@pytest.mark.parametrize("layout", ["contiguous", "row_slice"])
def test_triton_gradients_against_reference(dtype, with_weight, layout, device):
    spec = CaseSpec(rows=20, cols=48, dtype=dtype, weight="same" if with_weight else None, layout=layout, pad=8)
    x0, ns, w0 = spec.build(seed=6, device=device).args()
    x = x0.detach().clone().requires_grad_()
    w = w0.detach().clone().requires_grad_() if w0 is not None else None
    dy = torch.randn(x.shape, device=device).to(dtype)
    with fastpath_lib.record_routes("backward") as bw:
        y = run("triton", x, ns, w)
        grads = torch.autograd.grad(y, [t for t in (x, w) if t is not None], dy)
    assert bw == {"triton": 1}
    rdx, rdw = reference_grads(x0, ns, w0, None, dy)
    assert compare(grads[0], rdx, dtype, grad=True) is None
    assert grads[0].dtype == dtype
    if with_weight:
        assert grads[1].dtype == dtype and compare(grads[1], rdw, dtype, grad=True) is None


def test_backward_route_follows_forward(device):
    x = torch.randn(16, 17, device=device, requires_grad=True)  # 68-byte rows: falls back
    with fastpath_lib.record_routes("backward") as bw:
        fastpath_lib.rms_norm(x, [17]).sum().backward()
    assert bw == {"fallback": 1}
    ref = x.detach().clone().requires_grad_()
    F.rms_norm(ref, [17]).sum().backward()
    assert torch.allclose(x.grad, ref.grad, atol=1e-6)


def test_double_backward_takes_differentiable_fallback(eligible):
    x0, ns, w0 = eligible
    x, w = x0.clone().requires_grad_(), w0.clone().requires_grad_()
    with fastpath_lib.record_routes("backward") as bw:
        y = fastpath_lib.rms_norm(x, ns, w)
        (gx,) = torch.autograd.grad(y.pow(2).sum(), x, create_graph=True)
        (ggw,) = torch.autograd.grad(gx.sum(), w)
    # create_graph pass -> differentiable fallback; the second pass reaches y (d y^2 = 2y dy) at first order -> triton
    assert bw == {"fallback": 1, "triton": 1}
    xr, wr = x0.clone().requires_grad_(), w0.clone().requires_grad_()
    (gxr,) = torch.autograd.grad(F.rms_norm(xr, ns, wr).pow(2).sum(), xr, create_graph=True)
    (ggwr,) = torch.autograd.grad(gxr.sum(), wr)
    assert torch.allclose(ggw, ggwr, atol=1e-4, rtol=1e-4)


def test_only_weight_requires_grad(eligible):
    x, ns, w0 = eligible
    w = w0.clone().requires_grad_()
    (gw,) = torch.autograd.grad(run("triton", x, ns, w).sum(), w)
    wr = w0.clone().requires_grad_()
    (gwr,) = torch.autograd.grad(F.rms_norm(x, ns, wr).sum(), wr)
    assert torch.allclose(gw, gwr, atol=1e-4, rtol=1e-4)


# --- torch.library, compile, autocast -----------------------------------------------------------------------------

@pytest.mark.parametrize("route", ROUTES)
def test_opcheck(route, device):
    x, ns, w = CaseSpec(rows=16, cols=32).build(seed=8, device=device).args()
    x = x.clone().requires_grad_()
    with fastpath_lib.force_fallback(route == "fallback"), fastpath_lib.record_routes() as routes:
        torch.library.opcheck(torch.ops.fastpath.rms_norm.default, (x, list(ns), w, None))
    assert routes[route] > 0 and set(routes) == {route}


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("weight", ["same", None])
def test_opcheck_backward_op(route, weight, device):
    """Both branches of the backward op pass opcheck (the fallback branch computes the reference's formula: autograd
    is below an op's implementation) and give the reference's gradients."""
    x, ns, w = CaseSpec(rows=16, cols=32, weight=weight).build(seed=9, device=device).args()
    dy = torch.randn(16, 32, device=device)
    with fastpath_lib.force_fallback(route == "fallback"), fastpath_lib.record_routes("backward") as routes:
        torch.library.opcheck(torch.ops.fastpath.rms_norm_backward.default, (dy, x, list(ns), w, None),
                              test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_dynamic"))
        dx, dw = torch.ops.fastpath.rms_norm_backward(dy, x, list(ns), w, None)
    assert routes[route] > 0 and set(routes) == {route}
    xr = x.detach().double().requires_grad_()
    wr = w.detach().double().requires_grad_() if w is not None else None
    want = torch.autograd.grad(torch.nn.functional.rms_norm(xr, ns, wr, torch.finfo(torch.float32).eps),
                               [t for t in (xr, wr) if t is not None], dy.double())
    torch.testing.assert_close(dx.double(), want[0], atol=1e-5, rtol=1e-5)
    if w is not None:
        torch.testing.assert_close(dw.double(), want[1], atol=1e-4, rtol=1e-5)
    else:
        assert dw.numel() == 0


@pytest.mark.parametrize("shape, ns, wdtype", [((2, 3, 8), (3, 8), torch.float32), ((5, 8), (8,), torch.float64),
                                               ((8,), (8,), torch.float16)])
def test_backward_op_fallback_formula_matches_the_reference(shape, ns, wdtype):
    """The formula branch on shapes the kernel never takes: several normalized dims, fp64 weight, no leading dims."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(shape, generator=g)
    w = (1 + torch.randn(ns, generator=g) / 2).to(wdtype)
    dy = torch.randn(shape, generator=g)
    dx, dw = torch.ops.fastpath.rms_norm_backward(dy, x, list(ns), w, 1e-5)
    xr, wr = x.double().requires_grad_(), w.double().requires_grad_()
    want = torch.autograd.grad(torch.nn.functional.rms_norm(xr, ns, wr, 1e-5), [xr, wr], dy.double())
    assert dx.dtype == x.dtype and dw.dtype == w.dtype
    torch.testing.assert_close(dx.double(), want[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(dw.double(), want[1], atol=2e-3 if wdtype == torch.float16 else 1e-5, rtol=1e-3)


@pytest.mark.parametrize("route", ROUTES)
def test_compile_fullgraph(route, device):
    """Compiled, the Triton route is the opaque op (it records its run-time route); the fallback is plain
    ``F.rms_norm`` in the graph, which the compiler can fuse (so no route is recorded for it)."""
    torch._dynamo.reset()
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm.code)
        return torch._dynamo.backends.debugging.aot_eager(gm, example_inputs)

    x, ns, w = CaseSpec(rows=16, cols=64).build(seed=10, device=device).args()
    fn = torch.compile(lambda a, b: fastpath_lib.rms_norm(a, [64], b) * 2, fullgraph=True, backend=backend)
    with fastpath_lib.force_fallback(route == "fallback"), fastpath_lib.record_routes() as routes:
        y = fn(x, w)
        y2 = fn(x, w)
    (code,) = graphs
    if route == "triton":
        assert routes == {"triton": 2} and "fastpath.rms_norm" in code
    else:
        assert routes == {} and "fastpath" not in code and "rms_norm" in code
    assert compare(y / 2, reference_rms_norm(x, ns, w), x.dtype) is None and torch.equal(y, y2)


def test_compile_no_graph_break_with_module(device):
    torch._dynamo.reset()
    m = fastpath_lib.RMSNorm(64, device=device)
    x = torch.randn(16, 64, device=device)
    explanation = torch._dynamo.explain(m)(x)
    assert explanation.graph_break_count == 0 and explanation.graph_count == 1


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_autocast_matches_reference(route, dtype, device):
    x, ns, w = CaseSpec(rows=16, cols=64, dtype=dtype, weight=torch.float32).build(seed=11, device=device).args()
    with torch.autocast(device, dtype=torch.bfloat16):
        ours = run(route, x, ns, w)
        ref = F.rms_norm(x, ns, w)
    assert ours.dtype == ref.dtype
    assert compare(ours, reference_rms_norm(x, ns, w), ours.dtype) is None


# --- the module and the switches -----------------------------------------------------------------------------------

def test_module_is_a_drop_in(device):
    torch.manual_seed(0)
    ref = torch.nn.RMSNorm([64], eps=1e-5, elementwise_affine=True, device=device)
    with torch.no_grad():
        ref.weight.uniform_(0.5, 1.5)
    ours = fastpath_lib.RMSNorm([64], eps=1e-5, elementwise_affine=True, device=device)
    ours.load_state_dict(ref.state_dict())
    assert list(ours.state_dict()) == list(ref.state_dict())
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in ref.named_parameters()]
    x = torch.randn(16, 64, device=device)
    assert isinstance(ours, torch.nn.RMSNorm)
    assert compare(ours(x), reference_rms_norm(x, [64], ref.weight, 1e-5), x.dtype) is None
    assert fastpath_lib.RMSNorm(8, elementwise_affine=False).weight is None


def test_force_fallback_restores_on_error(eligible):
    x, ns, w = eligible
    with pytest.raises(KeyError), fastpath_lib.force_fallback():
        raise KeyError("boom")
    assert fastpath_lib.explain(x, ns, w).route == "triton"
    with fastpath_lib.force_fallback():
        with fastpath_lib.force_fallback(False):
            assert fastpath_lib.explain(x, ns, w).route == "triton"
        assert fastpath_lib.explain(x, ns, w).route == "fallback"


def test_record_routes_nests_and_counts(eligible, device):
    x, ns, w = eligible
    with fastpath_lib.record_routes() as outer:
        fastpath_lib.rms_norm(x, ns, w)
        with fastpath_lib.record_routes() as inner:
            fastpath_lib.rms_norm(x.t(), [x.shape[0]])
        assert inner == {"fallback": 1}
    assert outer == {"triton": 1, "fallback": 1}
    with pytest.raises(ValueError):
        with fastpath_lib.record_routes("sideways"):
            pass


@pytest.mark.slow
def test_compile_default_backend_forward_and_backward(device):
    """Inductor (the default backend) around the op, forward and training step, on the Triton route."""
    torch._dynamo.reset()
    x0, ns, w = CaseSpec(rows=16, cols=64).build(seed=12, device=device).args()
    fn = torch.compile(lambda a, b: fastpath_lib.rms_norm(a, [64], b) * 2, fullgraph=True)
    x = x0.detach().clone().requires_grad_()
    with fastpath_lib.record_routes() as fw, fastpath_lib.record_routes("backward") as bw:
        y = fn(x, w)
        y.sum().backward()
    assert fw == {"triton": 1} and bw == {"triton": 1}
    assert compare(y / 2, reference_rms_norm(x0, ns, w), x0.dtype) is None
    rdx, _ = reference_grads(x0, ns, w, None, torch.full_like(x0, 2.0))
    assert compare(x.grad, rdx, x0.dtype, grad=True) is None
