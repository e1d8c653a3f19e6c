"""Fused residual-add + RMSNorm under torch.library (opcheck, schema included), autograd, vmap and torch.compile, and a
tiny decoder layer using it against the unfused one; the predicate's booleans against its named conditions."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import fastpath_lib
from fastpath_lib.fused import predicate as P
from fastpath_lib.fused import reference
from fastpath_lib.fused.cases import ALIASES, FusedCaseSpec

ROUTES = ["triton", "fallback"]
OPS = torch.ops.fastpath


def _case(device, rows=16, cols=32, weight="same", seed=0):
    return FusedCaseSpec(rows=rows, cols=cols, weight=weight).build(seed=seed, device=device).args()


@pytest.mark.parametrize("route", ROUTES)
def test_opcheck_functional(route, device):
    x, r, w = _case(device)
    x, r, w = (t.clone().requires_grad_() for t in (x, r, w))
    with fastpath_lib.force_fallback(route == "fallback"), fastpath_lib.record_routes() as routes:
        torch.library.opcheck(OPS.fused_add_rms_norm.default, (x, r, w, None))
    assert routes[route] > 0 and set(routes) == {route}


@pytest.mark.parametrize("route", ROUTES)
def test_opcheck_in_place(route, device):
    """The schema test runs the op and checks that it writes exactly what ``mutates_args`` declares."""
    x, r, w = _case(device)
    with fastpath_lib.force_fallback(route == "fallback"), fastpath_lib.record_routes() as routes:
        torch.library.opcheck(OPS.fused_add_rms_norm_.default, (x, r, w, 1e-6))
    assert routes[route] > 0 and set(routes) == {route}
    assert OPS.fused_add_rms_norm_.default._schema.arguments[0].alias_info.is_write


def test_the_schema_test_catches_an_undeclared_write(device):
    """What the in-place op's declaration protects against: the same kernel behind ``mutates_args=()`` fails."""
    from fastpath_lib.fused import kernels

    @torch.library.custom_op("fastpath_test::undeclared_write", mutates_args=())
    def bad(x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        kernels.run_(x, residual)
        return x.clone()

    bad.register_fake(lambda x, residual: torch.empty_like(x))
    x, r, _ = _case(device)
    with pytest.raises(Exception, match="mutat"):
        torch.library.opcheck(bad, (x, r), test_utils=("test_schema",))


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("weight", ["same", None])
def test_backward_op_and_gradients(route, weight, device):
    x, r, w = _case(device, weight=weight, seed=2)
    dy, ds = torch.randn_like(x), torch.randn_like(x)
    with fastpath_lib.force_fallback(route == "fallback"), fastpath_lib.record_routes("backward") as routes:
        torch.library.opcheck(OPS.fused_add_rms_norm_backward.default, (dy, ds, x, r, w, None),
                              test_utils=("test_schema", "test_faketensor"))
        leaves = [t.clone().requires_grad_() for t in (x, r, w) if t is not None]
        out, s = fastpath_lib.fused_add_rms_norm(leaves[0], leaves[1], leaves[2] if w is not None else None)
        got = torch.autograd.grad([out, s], leaves, [dy, ds])
    assert routes[route] > 0 and set(routes) == {route}
    want = [g for g in reference.reference_grads(x, r, w, None, dy, ds) if g is not None]
    atol, rtol = reference.tolerance(x.dtype, grad=True)
    for g, e in zip(got, want):
        torch.testing.assert_close(g.double(), e, atol=atol * 4, rtol=rtol)


def test_create_graph_takes_the_composite(device):
    x, r, w = (t.clone().requires_grad_() for t in _case(device, seed=3))
    out, _ = fastpath_lib.fused_add_rms_norm(x, r, w)
    with fastpath_lib.record_routes("backward") as routes:
        (gx,) = torch.autograd.grad(out.pow(2).sum(), x, create_graph=True)
    (ggx,) = torch.autograd.grad(gx.sum(), x)
    assert routes == {"fallback": 1} and torch.isfinite(ggx).all()


def test_vmap_folds_the_batch_into_rows(device):
    xs = torch.randn(3, 16, 32, device=device)
    rs = torch.randn(3, 16, 32, device=device)
    w = torch.rand(32, device=device) + 0.5
    with fastpath_lib.record_routes() as routes:
        out, s = torch.vmap(lambda a, b: OPS.fused_add_rms_norm(a, b, w, None))(xs, rs)
    want_out, want_s = reference.native(xs, rs, w)
    assert routes == {"triton": 1}
    assert torch.equal(s, want_s)
    torch.testing.assert_close(out, want_out, atol=1e-5, rtol=2e-6)


def test_vmap_of_the_public_forms_takes_the_composite_and_writes_through(device):
    """Under a ``torch.func`` transform both public forms take the composite (its own batching rules); the in-place
    one writes into the batched tensors."""
    xs, rs = torch.randn(3, 16, 32, device=device), torch.randn(3, 16, 32, device=device)
    w = torch.rand(32, device=device) + 0.5
    x2, r2 = xs.clone(), rs.clone()
    with fastpath_lib.record_routes(reasons=True) as routes:
        torch.vmap(lambda a, b: fastpath_lib.fused_add_rms_norm_(a, b, w))(x2, r2)
        out, s = torch.vmap(lambda a, b: fastpath_lib.fused_add_rms_norm(a, b, w))(xs, rs)
    assert routes == {"fallback": 2} and routes.reasons["functorch_transform"] == 2
    assert torch.equal(r2, s) and torch.equal(x2, out) and not torch.equal(xs, x2)


class _Layer(torch.nn.Module):
    """A decoder layer's residual stream: two sub-layers, each ending in add + RMSNorm (fused or not)."""

    def __init__(self, cols, fused, inplace=False):
        super().__init__()
        torch.manual_seed(0)
        self.attn, self.mlp = torch.nn.Linear(cols, cols), torch.nn.Linear(cols, cols)
        self.norm1 = torch.nn.Parameter(1 + 0.1 * torch.randn(cols))
        self.norm2 = torch.nn.Parameter(1 + 0.1 * torch.randn(cols))
        self.fused, self.inplace = fused, inplace

    def _add_norm(self, x, residual, w):
        if not self.fused:
            residual = x + residual
            return F.rms_norm(residual, [x.shape[-1]], w, torch.finfo(torch.float32).eps), residual
        if self.inplace:
            return fastpath_lib.fused_add_rms_norm_(x, residual, w)
        return fastpath_lib.fused_add_rms_norm(x, residual, w)

    def forward(self, h):
        x, residual = self._add_norm(self.attn(h), h, self.norm1)
        x, residual = self._add_norm(self.mlp(x), residual, self.norm2)
        return x + residual


def test_decoder_layer_matches_the_unfused_one(device):
    """Outputs and every parameter's gradient, fp32 (where the vLLM rounding points coincide with add + rms_norm)."""
    h = torch.randn(16, 64, device=device)
    results = []
    for fused in (False, True):
        layer = _Layer(64, fused).to(device)
        with fastpath_lib.record_routes() as fw, fastpath_lib.record_routes("backward") as bw:
            y = layer(h)
            y.pow(2).sum().backward()
        results.append((y, [p.grad for p in layer.parameters()]))
        if fused:
            assert fw == {"triton": 2} and bw == {"triton": 2}
    (y0, g0), (y1, g1) = results
    torch.testing.assert_close(y1, y0, atol=1e-5, rtol=1e-5)
    for a, b in zip(g1, g0):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("inplace", [False, True])
def test_compile_fullgraph_matches_eager(inplace, device):
    """The decoder layer compiled with ``fullgraph=True`` (no graph break) gives eager's values; the in-place op is
    functionalized and still runs its Triton route."""
    torch._dynamo.reset()
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm.code)
        return torch._dynamo.backends.debugging.aot_eager(gm, example_inputs)

    layer = _Layer(64, True, inplace).to(device)
    h = torch.randn(16, 64, device=device)
    h_eager, h_compiled = h.clone(), h.clone()  # the in-place form writes the first sum into its input
    with torch.no_grad():
        eager = layer(h_eager)
        compiled = torch.compile(layer, fullgraph=True, backend=backend)
        with fastpath_lib.record_routes() as routes:
            got = compiled(h_compiled)
    assert len(graphs) == 1 and f"fused_add_rms_norm{'_' if inplace else ''}" in graphs[0]
    assert routes == {"triton": 2}
    torch.testing.assert_close(got, eager, atol=1e-6, rtol=1e-6)
    assert torch.equal(h_compiled, h_eager) and torch.equal(h, h_eager) != inplace


def test_compiled_training_step_matches_eager(device):
    """Forward and backward of the compiled layer (functional form) run the Triton routes and give eager's values."""
    torch._dynamo.reset()
    h = torch.randn(16, 64, device=device)
    layer = _Layer(64, True).to(device)
    y = layer(h)
    y.pow(2).sum().backward()
    want = [p.grad.clone() for p in layer.parameters()]
    layer.zero_grad()
    compiled = torch.compile(layer, fullgraph=True, backend="aot_eager")
    with fastpath_lib.record_routes() as fw, fastpath_lib.record_routes("backward") as bw:
        got = compiled(h)
        got.pow(2).sum().backward()
    assert fw == {"triton": 2} and bw == {"triton": 2}
    torch.testing.assert_close(got, y, atol=1e-6, rtol=1e-6)
    for g, p in zip(want, layer.parameters()):
        torch.testing.assert_close(p.grad, g, atol=1e-6, rtol=1e-6)


@settings(max_examples=25, deadline=None, derandomize=True)
@given(rows=st.integers(1, 40), cols=st.integers(1, 300), dtype=st.sampled_from([torch.float32, torch.float16,
                                                                                 torch.bfloat16]),
       weight=st.sampled_from(["same", None, torch.float32]), scale=st.sampled_from([1e-3, 1.0, 300.0]))
def test_both_forms_match_the_native_on_drawn_shapes(rows, cols, dtype, weight, scale):
    """Whatever route a drawn call takes, both forms give the native's results (residual bitwise)."""
    case = FusedCaseSpec(rows=rows, cols=cols, dtype=dtype, weight=weight, scale=scale).build(seed=rows * cols)
    x, r, w = case.args()
    want_out, want_s = reference.native(x, r, w)
    out, s = fastpath_lib.fused_add_rms_norm(x, r, w)
    fastpath_lib.fused_add_rms_norm_(x, r, w)
    atol, rtol = reference.tolerance(dtype)
    for got_out, got_s in ((out, s), (x, r)):
        assert torch.equal(got_s, want_s)
        torch.testing.assert_close(got_out, want_out, atol=atol, rtol=rtol)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(rows=st.sampled_from([0, 1, 7, 8, 9, 16]), cols=st.sampled_from([1, 8, 16, 17, 64]),
       dtype=st.sampled_from([torch.float32, torch.float16, torch.float64]),
       weight=st.sampled_from(["same", None, torch.float32]), layout=st.sampled_from(["contiguous", "row_slice",
                                                                                      "transposed", "step"]),
       pad=st.sampled_from([0, 2, 4]), offset=st.sampled_from([0, 1, 4]), roffset=st.sampled_from([0, 1, 4]),
       alias=st.sampled_from(ALIASES), inplace=st.booleans())
def test_booleans_agree_with_the_named_conditions(rows, cols, dtype, weight, layout, pad, offset, roffset, alias,
                                                  inplace):
    """The dispatch's two boolean checks say eligible exactly when every named condition holds."""
    alias = alias if rows >= 2 and layout == "contiguous" and not offset else "none"
    spec = FusedCaseSpec(rows=rows, cols=cols, dtype=dtype, weight=weight, layout=layout, pad=pad, offset=offset,
                         residual_offset=roffset, alias=alias)
    x, r, w = spec.build(seed=1).args()
    fast = P.eligible(x, r, w, False, inplace) and P.runtime_eligible(x, r, w, inplace)
    decision = P.PREDICATE.evaluate(P.make_call(x, r, w, inplace=inplace))
    assert fast == decision.eligible, decision.reasons


class _Subclass(torch.Tensor):
    """A ``__torch_function__`` subclass (as ``nn.Parameter`` is one): the op sees it as a tensor of its own type."""


def _two_tensor(t):
    from torch.testing._internal.two_tensor import TwoTensor  # a __torch_dispatch__ subclass, as torch tests use

    return TwoTensor(t.clone(), t.clone())


#: Every entry point that writes into its arguments (vLLM's deprecated IR provider calls the op).
WRITERS = {"public": lambda x, r, w: fastpath_lib.fused_add_rms_norm_(x, r, w),
           "op": lambda x, r, w: OPS.fused_add_rms_norm_(x, r, w, None)}
#: How each tensor kind is made and the entry called on it; ``parts`` reads back what the caller holds.
KINDS = {
    "plain": (lambda t: t, lambda f: f),
    "functionalized": (lambda t: t, torch.func.functionalize),
    "compiled (FakeTensor)": (lambda t: t, lambda f: torch.compile(f, fullgraph=True, backend="aot_eager")),
    "torch_function subclass": (lambda t: t.as_subclass(_Subclass), lambda f: f),
    "torch_dispatch subclass": (_two_tensor, lambda f: f),
}


def _parts(t):
    return [t.a, t.b] if hasattr(t, "a") and hasattr(t, "b") else [t.as_subclass(torch.Tensor)]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("entry", WRITERS)
def test_in_place_entry_points_write_the_callers_tensors_of_every_kind(entry, kind, device):
    """After the call the caller's ``x`` and ``residual`` hold the composite's results, for each tensor kind the
    entry accepts (DTensor on every placement pair: tests/rmsnorm/test_sharding.py). ``torch.func.functionalize`` of the
    op raised PyTorch's "custom operator whose output has alias annotations" before it had a Functionalize rule."""
    x, r, w = _case(device)
    want_out, want_res = reference.native(x, r, w)
    make, wrap = KINDS[kind]
    torch._dynamo.reset()
    xk, rk = make(x.clone()), make(r.clone())
    fn = WRITERS[entry]
    wrap(lambda a, b: fn(a, b, w))(xk, rk)
    for got in _parts(xk):
        torch.testing.assert_close(got, want_out, atol=1e-5, rtol=2e-6)
    for got in _parts(rk):
        assert torch.equal(got, want_res)
