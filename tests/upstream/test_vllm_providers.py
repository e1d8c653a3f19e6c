"""The kit's vLLM providers (:mod:`fastpath_lib.vllm_plugin`) against the real ``vllm.ir`` of vLLM's wheel.

``./kit test`` installs vLLM's wheel without its dependencies into ``<venv>/vllm-site`` (``FASTPATH_VLLM_SITE``
overrides); ``vllm.ir`` needs only torch and ``regex``. The tests follow vLLM's own (``tests/ir/ir_test_utils.py`` on
its main branch): inputs from ``op.generate_inputs``, vLLM's tolerances (``op.get_tolerance``), the priority set with
``op.set_priority``, ``supports_args`` a plain ``bool`` on an unbacked token count, and lowering agreeing with direct
dispatch: here an emulation of vLLM's lowering pass (``vllm/compilation/passes/ir/lowering_pass.py``, which needs
vLLM's dependencies): dispatch on the node's FakeTensors, trace ``func_impl_fn`` with ``make_fx``, run the graph;
plus ``torch.compile(fullgraph=True)`` with the IR op wrapped and unwrapped. Importing vLLM sets a few environment
variables and patches Inductor for vLLM's own ops (``vllm/env_override.py``), in this test process only.

The checks that need no ``vllm.ir`` (``supports_args`` against the kit's own verdict on every boundary point, on real
tensors, pointers included, and on FakeTensors, where pointers are unknown; ``register`` without vLLM) run
everywhere.
"""

from __future__ import annotations

import dataclasses
import sys
import warnings
from pathlib import Path

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.experimental.symbolic_shapes import ShapeEnv

import fastpath_lib
from fastpath_lib import vllm_plugin as vp
from fastpath_lib.boundary import boundary_points as rms_points
from fastpath_lib.eligibility import UNKNOWN
from fastpath_lib.fused import op as fused_op
from fastpath_lib.fused.cases import boundary_points as fused_points
from fastpath_lib.rmsnorm import op as rms_op

ROOT = Path(__file__).resolve().parents[2]
PIN = next(line for line in (ROOT / "constraints.txt").read_text().splitlines() if line.startswith("vllm=="))


@pytest.fixture(scope="module")
def ir():
    """vLLM's ``vllm.ir`` with the kit's providers registered; skipped, with why, where the wheel is not installed."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            ir = vp.load_vllm_ir()
    except ModuleNotFoundError as e:
        pytest.skip(f"vllm.ir cannot be imported ({e}): `./kit setup` installs {PIN}'s wheel without dependencies")
    assert vp.register_providers() is True
    return ir


def _ops(ir):
    return {"rms_norm": ir.ops.rms_norm, "fused_add_rms_norm": ir.ops.fused_add_rms_norm}


def _clone(args):
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


def _assert_close(op, got, want):
    """vLLM's tolerance for the output dtype (``ir_test_utils.assert_close``)."""
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        torch.testing.assert_close(g, w, **op.get_tolerance(g.dtype))


def _supports(name, args):
    return (vp.rms_norm_supports_args if name == "rms_norm" else vp.fused_add_rms_norm_supports_args)(*args)


def _fake(mode, args):
    return tuple(mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args)


# --- registration --------------------------------------------------------------------------------------------------

def test_register_providers_adds_one_provider_per_op_and_is_idempotent(ir):
    ops = _ops(ir)
    before = {n: op.impls[vp.PROVIDER] for n, op in ops.items()}
    assert vp.register_providers() is True  # again: nothing changes, nothing raises
    for name, op in ops.items():
        impl = op.impls[vp.PROVIDER]
        assert impl is before[name] and impl.supported is vp.supported() is True  # the interpreter is on
        assert impl.inplace is (name == "fused_add_rms_norm")
        assert impl.impl_fn is getattr(vp, name)
        assert not impl.supports_all_args


def test_register_providers_does_nothing_without_vllm(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # "import of vllm halted": as if it were not installed
    assert vp.register_providers() is False


def test_the_plugin_is_declared_as_a_vllm_general_plugin():
    import tomllib

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    plugins = meta["project"]["entry-points"]["vllm.general_plugins"]
    assert plugins == {"fastpath_kit": "fastpath_vllm:register"}
    assert meta["tool"]["setuptools"]["py-modules"] == ["fastpath_vllm"]  # installed beside the package


def test_without_a_priority_vllm_never_calls_the_provider(ir):
    op = ir.ops.fused_add_rms_norm
    args = op.generate_inputs(num_tokens=17, hidden_size=64, dtype=torch.float32)
    assert op.get_priority() == [] and op.dispatch(*args).provider == "native"
    with op.set_priority([vp.PROVIDER, "native"]):
        assert op.dispatch(*args).provider == vp.PROVIDER


# --- supports_args: metadata only, the same verdict on FakeTensors, a bool on an unbacked token count -------------

def _knowable(decision) -> bool:
    """The kit's verdict on FakeTensors: every condition holds or is "unknown until run time" (the op decides it)."""
    return all(reason.split(": ", 1)[1].startswith(UNKNOWN) for reason in decision.reasons)


RMS_POINTS = [p for p in rms_points() if not p.context and p.spec.dtype == (p.spec.weight or p.spec.dtype)]
FUSED_POINTS = [p for p in fused_points() if not (set(p.context) - {"inplace"}) and p.context.get("inplace", True)]


@pytest.mark.parametrize("point", RMS_POINTS, ids=[p.id for p in RMS_POINTS])
def test_rms_norm_supports_args_is_the_kits_verdict_on_real_and_fake_tensors(point, device):
    x, ns, w = point.spec.build(seed=3, device=device).args()
    if tuple(ns) != tuple(x.shape[-1:]):
        pytest.skip("vLLM's rms_norm normalizes the last dim only: no such call")
    args = (x, w, 1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "Accessing the data pointer of FakeTensor is deprecated"
        with FakeTensorMode() as mode:
            fx, fw, _ = fake = _fake(mode, args)
            on_fakes = vp.rms_norm_supports_args(*fake)
            want = _knowable(rms_op.explain(fx, ns, fw, 1e-6))
    assert on_fakes is want  # pointers unknown: left to the op
    # real tensors: the kit's whole verdict, pointers included (a call it refuses goes to vLLM's next provider)
    assert vp.rms_norm_supports_args(*args) is rms_op.explain(x, ns, w, 1e-6).eligible
    assert vp.rms_norm_supports_args(x, w, 1e-6, x.shape[-1] // 2 or 1) is False


@pytest.mark.parametrize("point", FUSED_POINTS, ids=[p.id for p in FUSED_POINTS])
def test_fused_supports_args_is_the_kits_verdict_on_real_and_fake_tensors(point, device):
    args = (*dataclasses.replace(point.spec, device=device).build(seed=5).args(), 1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with FakeTensorMode() as mode:
            fake = _fake(mode, args)
            on_fakes = vp.fused_add_rms_norm_supports_args(*fake)
            want = _knowable(fused_op.explain(*fake, inplace=True))
    assert on_fakes is want
    assert vp.fused_add_rms_norm_supports_args(*args) is fused_op.explain(*args, inplace=True).eligible
    assert vp.fused_add_rms_norm_supports_args(*args, 3) is False


def test_the_forced_fallback_is_not_consulted():
    """vLLM's rule: enablement is the priority list, never global state."""
    x, r, w = torch.randn(16, 64), torch.randn(16, 64), torch.ones(64)
    with fastpath_lib.force_fallback():
        assert vp.fused_add_rms_norm_supports_args(x, r, w, 1e-6) and vp.rms_norm_supports_args(x, w, 1e-6)


@pytest.mark.parametrize("name", ["rms_norm", "fused_add_rms_norm"])
@pytest.mark.parametrize("hidden, dtype", [(64, torch.float32), (4096, torch.bfloat16), (12, torch.float16)])
def test_supports_args_declines_an_unbacked_token_count(name, hidden, dtype):
    """vLLM compiles with a symbolic token count (vllm-project/vllm#39358): the kit's row threshold cannot be decided
    from it, so a plain ``False`` (vLLM's next provider takes every size), no raise, no guard."""
    env = ShapeEnv()
    with FakeTensorMode(shape_env=env):
        tokens = env.create_unbacked_symint()
        x = torch.empty(tokens, hidden, dtype=dtype)
        args = (x, torch.empty(hidden, dtype=dtype), 1e-5)
        if name == "fused_add_rms_norm":
            args = (x, torch.empty(tokens, hidden, dtype=dtype), *args[1:])
        got = _supports(name, args)
        sized = _supports(name, tuple(torch.empty(8, *a.shape[1:], dtype=dtype) if isinstance(a, torch.Tensor)
                                      and a.dim() == 2 else a for a in args))
    assert type(got) is bool and got is False
    assert sized is (hidden != 12)  # the same call with a known count: the kit's verdict
    assert not env.guards


# --- numerics and lowering, the way vLLM tests a provider ----------------------------------------------------------

TOKENS = (1, 8, 17)
HIDDEN = (16, 1024)
DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("hidden", HIDDEN)
@pytest.mark.parametrize("tokens", TOKENS)
@pytest.mark.parametrize("name", ["rms_norm", "fused_add_rms_norm"])
def test_dispatch_matches_native_and_fake_dispatch_agrees(ir, name, tokens, hidden, dtype):
    op = _ops(ir)[name]
    args = op.generate_inputs(num_tokens=tokens, hidden_size=hidden, dtype=dtype)
    want = op.impls["native"].impl_fn(*_clone(args))
    with op.set_priority([vp.PROVIDER, "native"]):
        chosen = op.dispatch(*args).provider
        with FakeTensorMode() as mode:
            assert op.dispatch(*_fake(mode, args)).provider == chosen  # what the lowering pass sees
        with fastpath_lib.record_routes() as routes:
            got = op(*_clone(args))
    # the interpreter's row threshold is 8: one token is below it and goes native before the kit is asked
    assert chosen == (vp.PROVIDER if tokens >= 8 else "native")
    assert routes == ({"triton": 1} if chosen == vp.PROVIDER else {})
    _assert_close(op, got, want)


def _calls(gm) -> list[str]:
    return [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]


def _lower(op, args):
    """vLLM's lowering pass, emulated: dispatch on FakeTensors, trace ``func_impl_fn`` (the functional overload:
    clones the activations for an in-place provider), and return the provider and the traced graph."""
    bound = op.apply_arg_defaults(args)
    with FakeTensorMode(allow_non_fake_inputs=False) as mode:
        impl = op.dispatch(*_fake(mode, bound))
    return impl, make_fx(impl.func_impl_fn, tracing_mode="fake")(*bound)


@pytest.mark.parametrize("tokens, dtype", [(17, torch.bfloat16), (8, torch.float32), (1, torch.float16)])
@pytest.mark.parametrize("name", ["rms_norm", "fused_add_rms_norm"])
def test_lowering_wrapped_and_unwrapped_agrees_with_direct_dispatch(ir, name, tokens, dtype):
    op = _ops(ir)[name]
    args = op.generate_inputs(num_tokens=tokens, hidden_size=64, dtype=dtype)
    want = op.impls["native"].impl_fn(*_clone(args))
    with op.set_priority([vp.PROVIDER, "native"]):
        direct = op.dispatch(*args)
        impl, gm = _lower(op, args)
        assert impl is direct
        if impl.provider == vp.PROVIDER:  # one opaque op, no kernel launch, in the traced graph
            kit = [c for c in _calls(gm) if c.startswith(("fastpath.", "fastpath_vllm."))]
            want_op = ("fastpath_vllm.rms_norm.default" if name == "rms_norm"
                       else "fastpath_vllm.fused_add_rms_norm_.default")
            assert kit == [want_op]
            assert set(_calls(gm)) - set(kit) <= {"aten.clone.default"}, _calls(gm)
        _assert_close(op, gm(*_clone(op.apply_arg_defaults(args))), want)
        with ir.enable_torch_wrap(False):  # Dynamo traces dispatch, supports_args and the provider itself
            unwrapped = torch.compile(lambda *a: op(*a), fullgraph=True, dynamic=False)(*_clone(args))
        wrapped = torch.compile(lambda *a: op(*a), fullgraph=True)(*_clone(args))  # the IR op stays in the graph
    _assert_close(op, unwrapped, want)
    _assert_close(op, wrapped, want)


def test_the_traced_in_place_provider_is_one_opaque_op_and_compiles_to_the_eager_result_in_place(ir):
    op = ir.ops.fused_add_rms_norm
    x, r, w, eps = op.generate_inputs(num_tokens=17, hidden_size=64, dtype=torch.bfloat16)
    gm = make_fx(vp.fused_add_rms_norm, tracing_mode="fake")(x, r, w, eps, None)
    assert _calls(gm) == ["fastpath_vllm.fused_add_rms_norm_.default"]
    eager = _clone((x, r))
    vp.fused_add_rms_norm(*eager, w, eps)
    cx, cr = _clone((x, r))
    out = torch.compile(vp.fused_add_rms_norm, fullgraph=True)(cx, cr, w, eps)
    assert out[0] is cx and out[1] is cr
    assert torch.equal(cx, eager[0]) and torch.equal(cr, eager[1])


def test_the_functional_overload_clones_the_activations_of_an_in_place_provider(ir):
    """``op(...)`` keeps its inputs (``func_impl_fn`` clones x and x_residual); ``op.maybe_inplace`` writes them."""
    op = ir.ops.fused_add_rms_norm
    args = op.generate_inputs(num_tokens=8, hidden_size=64, dtype=torch.float32)
    x, r = _clone(args[:2])
    with op.set_priority([vp.PROVIDER, "native"]):
        out, res = op(*args)
        assert torch.equal(args[0], x) and torch.equal(args[1], r)
        out2, res2 = op.maybe_inplace(*args)
    assert out2.data_ptr() == args[0].data_ptr() and res2.data_ptr() == args[1].data_ptr()
    assert torch.equal(out2, out) and torch.equal(res2, res)


# --- a call the kit's kernel cannot take runs what vLLM would have run without the kit -------------------------------

NEXT = "kit_test_next"


@pytest.fixture
def recorder(ir):
    """A stand-in provider second in the priority, as ``vllm_c`` is without Inductor (in place for the fused op, as
    ``vllm_c``'s is): records each call, computes native's result. Removed from vLLM's registry afterwards."""
    calls = []

    def rms_norm(x: torch.Tensor, weight: torch.Tensor | None, epsilon: float,
                 variance_size: int | None = None) -> torch.Tensor:
        calls.append("rms_norm")
        return ir.ops.rms_norm.impls["native"].impl_fn(x, weight, epsilon, variance_size)

    def fused_add_rms_norm(x: torch.Tensor, x_residual: torch.Tensor, weight: torch.Tensor | None, epsilon: float,
                           variance_size: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        calls.append("fused_add_rms_norm")
        out, res = ir.ops.fused_add_rms_norm.impls["native"].impl_fn(x, x_residual, weight, epsilon, variance_size)
        x_residual.copy_(res)
        x.copy_(out)
        return x, x_residual

    ir.ops.rms_norm.register_impl(NEXT)(rms_norm)
    ir.ops.fused_add_rms_norm.register_impl(NEXT, inplace=True)(fused_add_rms_norm)
    yield calls
    for op in _ops(ir).values():
        del op.impls[NEXT]


def _args(op, name, what):
    """An eligible call (16 rows), or one only run time refuses: misaligned x, x_residual is x."""
    args = op.generate_inputs(num_tokens=16, hidden_size=64, dtype=torch.bfloat16)
    if what == "misaligned":  # 2 bytes past a 16-byte boundary
        args = (torch.cat([args[0].new_zeros(1), args[0].flatten()])[1:].view(16, 64), *args[1:])
    elif what == "x_residual is x":
        args = (args[0], args[0], *args[2:])
    return args


def _copy(args):
    """Copies that keep each tensor's offset from a 16-byte boundary (a clone is aligned) and which are the same."""
    done = {}
    for a in args:
        if isinstance(a, torch.Tensor) and id(a) not in done:
            off = a.data_ptr() % 16 // a.element_size()
            done[id(a)] = torch.empty(a.numel() + off, dtype=a.dtype)[off:].view(a.shape).copy_(a)
    return tuple(done.get(id(a), a) for a in args)


def _traced(op, args):
    """vLLM's lowering, emulated: dispatch on FakeTensors, and the chosen provider traced into a graph (the in-place
    one as is: ``func_impl_fn``'s clones would realign the pointers this graph is to meet)."""
    with FakeTensorMode() as mode:
        impl = op.dispatch(*_fake(mode, args))
    gm = make_fx(impl.impl_fn, tracing_mode="fake")(*op.apply_arg_defaults(args))
    return impl, lambda *a: gm(*op.apply_arg_defaults(a))


def _call(op, name, args):
    """vLLM's eager call: the in-place overload for the fused op (what vLLM's layer calls), the functional one else."""
    return op.maybe_inplace(*args) if name == "fused_add_rms_norm" else op(*args)


def _capturing(monkeypatch):
    """A CUDA graph capture on the current stream, simulated: a CUDA context, and the stream says it captures."""
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)


CASES = [("rms_norm", "misaligned"), ("rms_norm", "captured"), ("fused_add_rms_norm", "misaligned"),
         ("fused_add_rms_norm", "captured"), ("fused_add_rms_norm", "x_residual is x")]


@pytest.mark.parametrize("name, what", CASES)
def test_an_eager_call_the_kernel_cannot_take_goes_to_the_next_provider_by_vllms_dispatch(ir, recorder, monkeypatch,
                                                                                         name, what):
    """``supports_args`` sees the real pointers and the capture (simulated: ``torch.cuda.is_current_stream_capturing``
    says yes; under the interpreter the CPU stands in for the device), declines, and vLLM's own dispatch runs the
    priority's next provider: what vLLM would have run without the kit, not native inside the kit's op."""
    op = _ops(ir)[name]
    args = _args(op, name, what)
    want = op.impls["native"].impl_fn(*_copy(args))
    with op.set_priority([vp.PROVIDER, NEXT]):
        assert op.dispatch(*args).provider == vp.PROVIDER or what != "captured"  # not capturing yet
        if what == "captured":
            _capturing(monkeypatch)
        assert op.dispatch(*args).provider == NEXT
        with fastpath_lib.record_routes() as routes:
            got = _call(op, name, args)
    assert recorder == [name] and routes == {}
    _assert_close(op, got if what != "x_residual is x" else got[0], want if what != "x_residual is x" else want[0])


@pytest.mark.parametrize("name, what", CASES)
def test_in_a_traced_graph_the_kits_op_runs_the_next_provider_when_run_time_refuses(ir, recorder, monkeypatch, name,
                                                                                    what):
    """vLLM's lowering pass picks the kit's provider on FakeTensors, where pointers and capture are unknown; the graph
    then meets the call at run time, and the kit's op runs the priority's next provider inside."""
    op = _ops(ir)[name]
    args = _args(op, name, what)
    want = op.impls["native"].impl_fn(*_copy(args))
    with op.set_priority([vp.PROVIDER, NEXT]):
        if what == "captured":
            _capturing(monkeypatch)
        impl, gm = _traced(op, args)
        assert impl.provider == vp.PROVIDER
        with fastpath_lib.record_routes() as routes:
            got = gm(*_copy(args))
    assert recorder == [name] and routes == {}
    _assert_close(op, got if what != "x_residual is x" else got[0], want if what != "x_residual is x" else want[0])


@pytest.mark.parametrize("name", ["rms_norm", "fused_add_rms_norm"])
def test_an_eligible_call_still_runs_the_kits_kernel_eager_and_traced(ir, recorder, name):
    op = _ops(ir)[name]
    args = _args(op, name, "eligible")
    with op.set_priority([vp.PROVIDER, NEXT]):
        assert op.dispatch(*args).provider == vp.PROVIDER
        impl, gm = _traced(op, args)
        with fastpath_lib.record_routes() as routes:
            _call(op, name, _copy(args))
            gm(*_copy(args))
    assert impl.provider == vp.PROVIDER and routes == {"triton": 2} and recorder == []


@pytest.mark.parametrize("name", ["rms_norm", "fused_add_rms_norm"])
def test_with_only_native_behind_the_kit_native_runs_bit_for_bit(ir, name):
    """The priority ``[kit, native]`` (vLLM's under Inductor, with the kit first): a misaligned call runs vLLM's
    native, eager and in a traced graph, whose bits differ from ``F.rms_norm``'s (which rounds once) in bf16 with a
    weight; the fused op's in-place form gets native's functional results copied in."""
    op = _ops(ir)[name]
    args = _args(op, name, "misaligned")
    want = op.impls["native"].impl_fn(*_copy(args))
    if name == "rms_norm":
        assert not torch.equal(want, torch.nn.functional.rms_norm(args[0], (64,), args[1], args[2]))
    with op.set_priority([vp.PROVIDER, "native"]):
        assert op.dispatch(*args).provider == "native"
        impl, gm = _traced(op, args)
        with fastpath_lib.record_routes() as routes:
            eager = _call(op, name, _copy(args))
            traced = gm(*_copy(args))
    assert impl.provider == vp.PROVIDER and routes == {}
    for got in (eager, traced):
        for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            assert torch.equal(g, w)


def test_next_provider_is_native_where_the_priority_does_not_name_the_kit(ir):
    op = ir.ops.rms_norm
    args = op.generate_inputs(num_tokens=16, hidden_size=64, dtype=torch.float32)
    assert vp.next_provider("rms_norm", args) is op.impls["native"]  # no priority: a direct call
    with op.set_priority(["native"]):
        assert vp.next_provider("rms_norm", args) is op.impls["native"]


@pytest.mark.parametrize("name", ["rms_norm", "fused_add_rms_norm"])
def test_a_dynamic_token_count_compiles_once_and_keeps_native(ir, name):
    """vLLM compiles with a symbolic token count: Dynamo traces dispatch and ``supports_args`` (the IR op unwrapped)
    without guarding on the count, so 8, 17 and 40 tokens share one graph, and the provider, which cannot decide the
    row threshold there, leaves every size to native."""
    from torch._dynamo.testing import CompileCounter

    op, counter = _ops(ir)[name], CompileCounter()
    compiled = torch.compile(lambda *a: op(*a), backend=counter, fullgraph=True, dynamic=True)
    with op.set_priority([vp.PROVIDER, "native"]), ir.enable_torch_wrap(False):
        for tokens in (8, 17, 40):
            args = op.generate_inputs(num_tokens=tokens, hidden_size=64, dtype=torch.bfloat16)
            with fastpath_lib.record_routes() as routes:
                got = compiled(*_clone(args))
            assert routes == {}, tokens
            _assert_close(op, got, op.impls["native"].impl_fn(*_clone(args)))
    assert counter.frame_count == 1


@pytest.mark.parametrize("what", ["eligible", "misaligned"])
def test_the_plugins_ops_pass_opcheck_on_both_routes(ir, what):
    """Schema and fake implementation agree with what each op does, the kernel's route and the next provider's."""
    for name, op in (("rms_norm", torch.ops.fastpath_vllm.rms_norm), ("fused_add_rms_norm",
                                                                      torch.ops.fastpath_vllm.fused_add_rms_norm_)):
        args = _args(_ops(ir)[name], name, what)
        torch.library.opcheck(op.default, args, test_utils=("test_schema", "test_faketensor"))
