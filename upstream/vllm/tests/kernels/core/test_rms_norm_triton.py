# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""The Triton providers of vllm.ir.ops.rms_norm and fused_add_rms_norm."""

import pytest
import torch
from torch.library import wrap_triton

import vllm.kernels  # noqa: F401 to register kernels
from vllm import ir
from vllm.kernels.triton import layernorm as triton_layernorm
from vllm.model_executor.layers.layernorm import RMSNorm
from vllm.platforms import current_platform

DEVICE = current_platform.device_type
DTYPES = [torch.float16, torch.bfloat16, torch.float32]
# Zero tokens, a decode batch, a prefill chunk, leading dims, a tiny odd width.
SHAPES = [(0, 4096), (7, 4096), (83, 769), (2, 3, 1024), (5, 8)]
EPSILON = 1e-6

pytestmark = pytest.mark.skipif(
    not ir.ops.rms_norm.impls["triton"].supported,
    reason="The Triton providers need Triton and CUDA.",
)


@pytest.fixture
def launches(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Records each Triton kernel the providers launch."""
    launched: list[object] = []

    def recording_wrap_triton(kernel):
        launched.append(kernel)
        return wrap_triton(kernel)

    monkeypatch.setattr(triton_layernorm, "wrap_triton", recording_wrap_triton)
    return launched


def _args(
    shape: tuple[int, ...], dtype: torch.dtype, has_weight: bool, add_residual: bool
) -> tuple:
    x = torch.randn(shape, dtype=dtype, device=DEVICE)
    weight = torch.randn(shape[-1], dtype=dtype, device=DEVICE) if has_weight else None
    if add_residual:
        return x, torch.randn_like(x), weight, EPSILON
    return x, weight, EPSILON


def _op(add_residual: bool) -> ir.op.IrOp:
    return ir.ops.fused_add_rms_norm if add_residual else ir.ops.rms_norm


def _assert_close(out, ref, op: ir.op.IrOp, dtype: torch.dtype) -> None:
    tolerance = op.get_tolerance(dtype)
    torch.testing.assert_close(out, ref, atol=tolerance["atol"], rtol=tolerance["rtol"])


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("has_weight", [True, False])
@pytest.mark.parametrize("add_residual", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
@torch.inference_mode()
def test_triton_provider(
    shape: tuple[int, ...],
    has_weight: bool,
    add_residual: bool,
    dtype: torch.dtype,
    launches: list[object],
) -> None:
    torch.manual_seed(0)
    op = _op(add_residual)
    args = _args(shape, dtype, has_weight, add_residual)
    with op.set_priority(["triton", "native"]):
        assert op.dispatch(*args).provider == "triton"
        out = op(*args)
    expected = [] if 0 in shape else [triton_layernorm._rms_norm_kernel]
    assert launches == expected
    ref = op.impls["native"].impl_fn(*args)
    _assert_close(out, ref, op, dtype)


@pytest.mark.parametrize("add_residual", [False, True])
@torch.inference_mode()
def test_triton_provider_with_a_float32_weight(
    add_residual: bool, launches: list[object]
) -> None:
    """Native rounds the normalized row to the weight's dtype, whatever it is."""
    torch.manual_seed(0)
    op = _op(add_residual)
    args = list(_args((7, 4096), torch.bfloat16, True, add_residual))
    args[-2] = args[-2].float()
    with op.set_priority(["triton", "native"]):
        out = op(*args)
    assert launches == [triton_layernorm._rms_norm_kernel]
    ref = op.impls["native"].impl_fn(*args)
    _assert_close(out, ref, op, torch.bfloat16)


def _rounded(
    normalized: torch.Tensor, weight: torch.Tensor | None, dtype: torch.dtype
) -> torch.Tensor:
    """Native's roundings of a normalized row: to the weight's dtype, the
    product in the weight's dtype, then to the output's dtype."""
    normalized = normalized.float()
    if weight is None:
        return normalized.to(dtype)
    return (normalized.to(weight.dtype) * weight).to(dtype)


# Native's rounding points, away from ties: x, weight dtypes whose results are
# rounded to 16 bits somewhere, so the last bits of rstd rarely decide them.
ROUNDED_DTYPES = [
    (torch.float16, torch.float16),
    (torch.bfloat16, torch.bfloat16),
    (torch.float16, None),
    (torch.bfloat16, None),
    (torch.float16, torch.bfloat16),
    (torch.bfloat16, torch.float32),
    (torch.float32, torch.bfloat16),
]


@pytest.mark.parametrize("dtype, weight_dtype", ROUNDED_DTYPES)
@pytest.mark.parametrize("add_residual", [False, True])
@torch.inference_mode()
def test_triton_provider_rounds_where_native_rounds(
    dtype: torch.dtype, weight_dtype: torch.dtype | None, add_residual: bool
) -> None:
    """Bit for bit native's values wherever the result does not depend on the
    last bits of rstd (sum order, sqrt and division differ between kernels):
    an element whose roundings give the same bits with rstd scaled by 1 -/+ 2**-16
    must equal native's. The residual output is exact everywhere."""
    torch.manual_seed(0)
    op = _op(add_residual)
    args = list(_args((16, 4096), dtype, weight_dtype is not None, add_residual))
    if weight_dtype is not None:
        args[-2] = args[-2].to(weight_dtype)
    with op.set_priority(["triton", "native"]):
        out = op(*args)
    ref = op.impls["native"].impl_fn(*args)
    if add_residual:
        assert torch.equal(out[1], ref[1])
        out, ref = out[0], ref[0]
    x = args[0].double()
    if add_residual:
        x = x + args[1].double()
    normalized = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPSILON)
    lower = _rounded(normalized * (1 - 2**-16), args[-2], dtype)
    upper = _rounded(normalized * (1 + 2**-16), args[-2], dtype)
    decided = lower == upper
    assert decided.float().mean() > 0.9
    assert torch.equal(out[decided], ref[decided])
    assert torch.equal(ref[decided], lower[decided])


@pytest.mark.parametrize("add_residual", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
@torch.inference_mode()
def test_triton_provider_where_epsilon_dominates(
    add_residual: bool, dtype: torch.dtype
) -> None:
    """A row of zeros normalizes to zeros, tiny rows to about x / sqrt(epsilon)."""
    torch.manual_seed(0)
    op = _op(add_residual)
    x = torch.randn(4, 1024, dtype=dtype, device=DEVICE) * 1e-3
    x[0] = 0
    weight = torch.randn(1024, dtype=dtype, device=DEVICE)
    args: tuple = (x, weight, 0.1)
    if add_residual:
        args = (x, torch.zeros_like(x), weight, 0.1)
    with op.set_priority(["triton", "native"]):
        out = op(*args)
    ref = op.impls["native"].impl_fn(*args)
    if add_residual:
        assert torch.equal(out[1], ref[1])
        out, ref = out[0], ref[0]
    assert torch.equal(out[0], torch.zeros_like(out[0]))
    _assert_close(out, ref, op, dtype)


@torch.inference_mode()
def test_fused_provider_is_in_place(launches: list[object]) -> None:
    """maybe_inplace writes the output into x and the sum into x_residual; the
    functional overload leaves its inputs as they were."""
    torch.manual_seed(0)
    op = ir.ops.fused_add_rms_norm
    args = _args((7, 4096), torch.bfloat16, True, True)
    x, residual = args[0].clone(), args[1].clone()
    ref = op.impls["native"].impl_fn(*args)
    with op.set_priority(["triton", "native"]):
        out = op(*args)
        assert torch.equal(args[0], x) and torch.equal(args[1], residual)
        inplace = op.maybe_inplace(*args)
    assert launches == [triton_layernorm._rms_norm_kernel] * 2
    assert inplace[0].data_ptr() == args[0].data_ptr()
    assert inplace[1].data_ptr() == args[1].data_ptr()
    for got in (out, inplace):
        assert torch.equal(got[1], ref[1])
        _assert_close(got[0], ref[0], op, torch.bfloat16)


def _deferred_args(case: str, add_residual: bool) -> tuple:
    hidden_size = 16385 if case == "too_wide" else 4096
    args = list(_args((7, hidden_size), torch.bfloat16, True, add_residual))
    if case == "strided":
        args[0] = torch.randn(7, 2 * hidden_size, dtype=torch.bfloat16, device=DEVICE)
        args[0] = args[0][:, ::2]
    if case == "variance_size":
        args.append(hidden_size // 2)
    return tuple(args)


@pytest.mark.parametrize("case", ["strided", "variance_size", "too_wide"])
@pytest.mark.parametrize("add_residual", [False, True])
@torch.inference_mode()
def test_triton_provider_defers_to_native(
    case: str, add_residual: bool, launches: list[object]
) -> None:
    torch.manual_seed(0)
    op = _op(add_residual)
    args = _deferred_args(case, add_residual)
    with op.set_priority(["triton", "native"]):
        assert op.dispatch(*args).provider == "native"
        out = op(*args)
    assert launches == []
    ref = op.impls["native"].impl_fn(*args)
    _assert_close(out, ref, op, torch.bfloat16)


@pytest.mark.parametrize("add_residual", [False, True])
@torch.inference_mode()
def test_rms_norm_layer_takes_the_priority(
    add_residual: bool, launches: list[object]
) -> None:
    torch.manual_seed(0)
    layer = RMSNorm(4096, dtype=torch.bfloat16).to(DEVICE)
    layer.weight.data.normal_(mean=1.0, std=0.1)
    x = torch.randn(7, 4096, dtype=torch.bfloat16, device=DEVICE)
    residual = torch.randn_like(x) if add_residual else None
    ref = layer.forward_native(
        x.clone(), None if residual is None else residual.clone()
    )
    assert launches == []
    op = _op(add_residual)
    with op.set_priority(["triton", "native"]):
        out = layer(x.clone(), None if residual is None else residual.clone())
    assert launches == [triton_layernorm._rms_norm_kernel]
    _assert_close(out, ref, op, torch.bfloat16)


@pytest.mark.parametrize("add_residual", [False, True])
def test_compiled_layer_keeps_the_ir_op(add_residual: bool) -> None:
    """Dynamo puts the IR op in the graph (so vLLM's fusion passes match it);
    lowering picks the provider from the node's fake tensors."""
    layer = RMSNorm(4096, dtype=torch.bfloat16).to(DEVICE)
    x = torch.randn(7, 4096, dtype=torch.bfloat16, device=DEVICE)
    residual = torch.randn_like(x) if add_residual else None
    graphs: list[torch.fx.GraphModule] = []

    def capture(gm: torch.fx.GraphModule, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    with ir.enable_torch_wrap(True):
        torch.compile(layer.forward_native, backend=capture, fullgraph=True)(
            x, residual
        )
    op = _op(add_residual)
    targets = {op.torch_op}
    if isinstance(op, ir.op.IrOpInplace):
        targets.add(op.maybe_inplace.torch_op)
    (node,) = [n for g in graphs for n in g.graph.nodes if n.target in targets]
    fake_args = torch.fx.map_arg(node.args, lambda a: a.meta["example_value"])
    with op.set_priority(["triton", "native"]):
        assert op.dispatch(*fake_args).provider == "triton"
    with op.set_priority(["native"]):
        assert op.dispatch(*fake_args).provider == "native"
