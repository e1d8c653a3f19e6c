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
