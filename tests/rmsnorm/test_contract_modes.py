"""Modes and tensor kinds the contract needs: each behaves exactly as ``F.rms_norm`` does.

Forward-mode AD, every ``torch.func`` transform, nested, sparse and DTensor inputs, channels-last memory, and
PyTorch's own test material for ``rms_norm`` (the OpInfo's samples, reference inputs and error inputs, and
``nn.RMSNorm``'s module inputs). Outside the region the fallback *is* ``F.rms_norm``, so values match bit for bit; a
DTensor runs the op on its local shards (``tests/rmsnorm/test_sharding.py``), so its values match within tolerance.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import fastpath_lib
from fastpath_lib.cases import CaseSpec
from fastpath_lib.rmsnorm.op import _rms_norm_op
from fastpath_lib.rmsnorm.predicate import PREDICATE
from fastpath_lib.testing import compare, reference_rms_norm

ours, ref = fastpath_lib.rms_norm, F.rms_norm


@pytest.fixture
def xw(device):
    """An input and weight inside the region (the Triton route outside any transform)."""
    x, ns, w = CaseSpec(rows=16, cols=32).build(seed=21, device=device).args()
    x, w = x.detach().clone(), w.detach().clone()
    assert fastpath_lib.explain(x, ns, w).route == "triton"
    return x, w


def f_ours(x, w):
    return ours(x, [x.shape[-1]], w)


def f_ref(x, w):
    return ref(x, [x.shape[-1]], w)


def assert_same(a, b):
    """Exactly the reference's result: values, dtype, shape and strides (tuples compared element by element)."""
    if isinstance(a, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b)
        for p, q in zip(a, b):
            assert_same(p, q)
        return
    assert (a.dtype, a.shape, a.stride()) == (b.dtype, b.shape, b.stride())
    assert torch.equal(a, b), (a - b).abs().max()


# --- forward-mode AD and torch.func -------------------------------------------------------------------------------

def test_forward_ad_dual_tensors(xw):
    import torch.autograd.forward_ad as fwad

    x, w = xw
    t = torch.randn_like(x)
    with fwad.dual_level():
        with fastpath_lib.record_routes(reasons=True) as routes:
            yo = fwad.unpack_dual(f_ours(fwad.make_dual(x, t), w))
        yr = fwad.unpack_dual(f_ref(fwad.make_dual(x, t), w))
        assert fastpath_lib.explain(x, [32], w).failed == ["forward_ad"]
    assert yo.tangent is not None and yo.tangent.abs().sum() > 0
    assert_same((yo.primal, yo.tangent), (yr.primal, yr.tangent))
    assert routes == {"fallback": 1} and routes.reasons == {"forward_ad": 1}


TRANSFORMS = {
    "jvp": lambda f, x, w: torch.func.jvp(lambda a: f(a, w), (x,), (torch.ones_like(x),)),
    "jacfwd": lambda f, x, w: torch.func.jacfwd(f, argnums=(0, 1))(x[:2], w),
    "grad": lambda f, x, w: torch.func.grad(lambda a, b: f(a, b).pow(2).sum(), argnums=(0, 1))(x, w),
    "vjp": lambda f, x, w: torch.func.vjp(f, x, w)[1](torch.ones_like(x)),
    "jacrev": lambda f, x, w: torch.func.jacrev(f, argnums=(0, 1))(x[:2], w),
    "hessian": lambda f, x, w: torch.func.hessian(lambda a: f(a, w[:4]).pow(2).sum())(x[:2, :4]),
    "vmap": lambda f, x, w: torch.func.vmap(f, in_dims=(0, None))(x.view(4, 4, 32), w),
    "vmap per-sample weight": lambda f, x, w: torch.func.vmap(f)(x.view(4, 4, 32), w.expand(4, 32)),
    "vmap of grad": lambda f, x, w: torch.func.vmap(torch.func.grad(lambda a: f(a, w).sum()))(x),
    "functional_call + grad": lambda f, x, w: torch.func.grad(
        lambda p, a: torch.func.functional_call(_Norm(f), p, (a,)).sum())({"weight": w}, x),
}


class _Norm(torch.nn.Module):
    def __init__(self, f):
        super().__init__()
        self.f, self.weight = f, torch.nn.Parameter(torch.ones(32))

    def forward(self, x):
        return self.f(x, self.weight)


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_torch_func_transform_matches_reference(name, xw):
    """Each transform gives exactly F.rms_norm's results (no zero tangents, no setup_context errors)."""
    x, w = xw
    with fastpath_lib.record_routes() as routes:
        got = TRANSFORMS[name](f_ours, x, w)
    want = TRANSFORMS[name](f_ref, x, w)
    if isinstance(got, dict):
        got, want = tuple(got.values()), tuple(want.values())
    assert_same(got, want)
    assert set(routes) <= {"fallback"}, routes  # the transforms take F.rms_norm's own rules
    assert any(t.abs().sum() > 0 for t in (got if isinstance(got, tuple) else (got,)))


def test_functional_call_alone_is_no_transform_and_takes_the_triton_route(xw):
    """The predicate's text: functional_call falls back only under a transform (the table's
    ``"functional_call + grad"`` above); alone it sets no functorch level."""
    x, w = xw
    why = next(c.why for c in PREDICATE.conditions if c.name == "functorch_transform")
    assert "functional_call under one of them; alone it is no transform" in why
    with fastpath_lib.record_routes() as routes:
        got = torch.func.functional_call(_Norm(f_ours), {"weight": w}, (x,))
    assert compare(got, reference_rms_norm(x, [32], w), x.dtype) is None
    assert routes == {"triton": 1}, routes


def test_explain_names_the_running_transform(xw):
    x, w = xw
    seen = []
    torch.func.vmap(lambda a: seen.append(fastpath_lib.explain(a, [32], w).failed) or a)(x)
    assert seen and "functorch_transform" in seen[0]


def test_op_vmap_rule_folds_batch_into_rows(xw):
    """``fastpath::rms_norm`` itself under vmap: one call over the folded rows, not one per sample."""
    x, w = xw
    xb = x.view(2, 8, 32)
    with fastpath_lib.record_routes() as routes:
        got = torch.func.vmap(lambda a: _rms_norm_op(a, [32], w, None))(xb)
    assert routes == {"triton": 1}, routes
    assert compare(got, reference_rms_norm(xb, [32], w), x.dtype) is None
    wb = torch.stack([w, 2 * w])
    got_w = torch.func.vmap(lambda a, b: _rms_norm_op(a, [32], b, None))(xb, wb)
    assert compare(got_w, torch.stack([reference_rms_norm(xb[i], [32], wb[i]) for i in range(2)]), x.dtype) is None


# --- tensor kinds and memory formats ------------------------------------------------------------------------------

def test_jagged_nested_tensor(device):
    parts = [torch.randn(n, 32, device=device) for n in (3, 9, 5)]
    nt = torch.nested.nested_tensor(parts, layout=torch.jagged)
    w = torch.randn(32, device=device)
    with fastpath_lib.record_routes() as routes:
        got = ours(nt, [32], w)
    want = ref(nt, [32], w)
    assert type(got) is type(want) and got.is_nested and routes == {"fallback": 1}
    for a, b in zip(got.unbind(), want.unbind()):
        assert torch.equal(a, b)
    assert "tensor_kind" in fastpath_lib.explain(nt, [32], w).failed


def test_sparse_input_raises_like_reference(device):
    x = torch.randn(16, 32, device=device).to_sparse()
    with pytest.raises(Exception) as want:
        ref(x, [32])
    with pytest.raises(type(want.value)):
        ours(x, [32])
    assert "tensor_kind" in fastpath_lib.explain(x, [32]).failed
    why = next(c.why for c in PREDICATE.conditions if c.name == "tensor_kind")
    assert "a sparse layout F.rms_norm's own error" in why, why  # the declared reason says what this test shows


def test_dtensor_on_one_rank_gloo_group(tmp_path):
    dist = pytest.importorskip("torch.distributed")
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    try:
        mesh = init_device_mesh("cpu", (1,))
        x, w = torch.randn(16, 32), torch.randn(32)
        for placement in (Shard(0), Replicate()):
            dx, dw = distribute_tensor(x, mesh, [placement]), distribute_tensor(w, mesh, [Replicate()])
            got, want = ours(dx, [32], dw), ref(dx, [32], dw)
            assert isinstance(got, DTensor) and got.placements == want.placements
            torch.testing.assert_close(got.full_tensor(), want.full_tensor())
            # the sharding rule runs the op on the local shard (tests/rmsnorm/test_sharding.py: two ranks)
            assert fastpath_lib.explain(dx, [32], dw) == fastpath_lib.explain(dx.to_local(), [32], dw.to_local())
    finally:
        dist.destroy_process_group()


def test_channels_last_keeps_reference_strides(device):
    x = torch.randn(2, 8, 4, 16, device=device).to(memory_format=torch.channels_last)
    got, want = ours(x, [16]), ref(x, [16])
    assert_same(got, want)
    assert got.is_contiguous(memory_format=torch.channels_last)
    assert "memory_format" in fastpath_lib.explain(x, [16]).failed


def test_tensor_subclass_with_torch_function(device):
    class Tagged(torch.Tensor):
        pass

    x = torch.randn(16, 32, device=device).as_subclass(Tagged)
    got, want = ours(x, [32]), ref(x, [32])
    assert type(got) is type(want) is Tagged and torch.equal(got, want)


# --- PyTorch's own test material ------------------------------------------------------------------------------------

def _opinfo():
    pytest.importorskip("expecttest")  # torch.testing._internal needs it
    from torch.testing._internal.common_methods_invocations import op_db

    (op,) = [o for o in op_db if o.name == "nn.functional.rms_norm"]
    return op


def _grads(out, inputs):
    need = [t for t in inputs if isinstance(t, torch.Tensor) and t.requires_grad]
    if not need or not out.requires_grad:
        return ()
    return torch.autograd.grad(out, need, torch.ones_like(out))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_opinfo_samples_and_reference_inputs(dtype, device):
    op = _opinfo()
    samples = [*op.sample_inputs(device, dtype, requires_grad=dtype != torch.bfloat16),
               *op.reference_inputs(device, dtype)]
    assert samples
    for s in samples:
        args = (s.input, *s.args)
        want = ref(*args, **s.kwargs)
        route = fastpath_lib.explain(*args, **s.kwargs).route
        got = ours(*args, **s.kwargs)
        assert (got.dtype, got.shape, got.stride()) == (want.dtype, want.shape, want.stride()), s
        if route == "fallback":
            assert torch.equal(got, want) or torch.equal(torch.isnan(got), torch.isnan(want)), s
        else:
            assert compare(got, reference_rms_norm(*args, **s.kwargs), dtype) is None, s
        g_got, g_want = _grads(got, (s.input, *s.args)), _grads(want, (s.input, *s.args))
        for a, b in zip(g_got, g_want):
            assert a.dtype == b.dtype and a.shape == b.shape
            assert torch.allclose(a.double(), b.double(), atol=1e-2, rtol=1e-2, equal_nan=True), s


def test_opinfo_error_inputs(device):
    op = _opinfo()
    errors = list(op.error_inputs(device))
    assert errors
    for e in errors:
        s = e.sample_input
        with pytest.raises(e.error_type, match=e.error_regex):
            ours(s.input, *s.args, **s.kwargs)


def test_rmsnorm_module_inputs(device):
    pytest.importorskip("expecttest")
    from torch.testing._internal.common_modules import module_db

    (info,) = [m for m in module_db if m.module_cls is torch.nn.RMSNorm]
    inputs = info.module_inputs_func(info, device=device, dtype=torch.float32, requires_grad=True, training=True)
    assert inputs
    for mi in inputs:
        c = mi.constructor_input
        theirs = torch.nn.RMSNorm(*c.args, **c.kwargs, device=device)
        mine = fastpath_lib.RMSNorm(*c.args, **c.kwargs, device=device)
        mine.load_state_dict(theirs.state_dict())
        (x,) = mi.forward_input.args
        want, got = theirs(x), mine(x)
        assert (got.dtype, got.shape, got.stride()) == (want.dtype, want.shape, want.stride())
        assert compare(got, want, x.dtype) is None
        assert [g.shape for g in _grads(got, (x, *mine.parameters()))] == \
               [g.shape for g in _grads(want, (x, *theirs.parameters()))]


# --- export ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("strict", [True, False])
def test_export_keeps_the_op_and_its_run_time_decision(strict, xw):
    """``torch.export`` records ``fastpath::rms_norm`` for an eligible call; the exported program still decides at
    run time (a forced fallback inside it gives the reference's values)."""
    x, w = xw
    m = fastpath_lib.RMSNorm(32, device=x.device)
    with torch.no_grad():
        m.weight.copy_(w)
    ep = torch.export.export(m, (x,), strict=strict)
    assert "fastpath.rms_norm" in str(ep.graph)
    with fastpath_lib.record_routes() as routes:
        y = ep.module()(x)
    assert routes == {"triton": 1} and compare(y, reference_rms_norm(x, [32], w), x.dtype) is None
    with fastpath_lib.force_fallback(), fastpath_lib.record_routes() as forced:
        y_fallback = ep.module()(x)
    assert forced == {"fallback": 1} and torch.allclose(y_fallback, ref(x, [32], m.weight.detach()), atol=1e-6)
