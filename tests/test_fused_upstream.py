"""The vLLM provider module (``upstream/vllm_fused_add_rms_norm.py``) imported with a stub ``vllm``: its registration,
its signature, and ``supports_args`` against the kit's own dispatch on every boundary point of the fused predicate."""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import sys
import types
from pathlib import Path

import pytest
import torch

import fastpath_lib
from fastpath_lib import runtime
from fastpath_lib.fused import op, reference
from fastpath_lib.fused.cases import boundary_points

PATH = Path(__file__).resolve().parents[1] / "upstream" / "vllm_fused_add_rms_norm.py"


class _StubOp:
    """What the provider uses of ``vllm.ir.ops.fused_add_rms_norm``: ``register_impl`` as a decorator."""

    def __init__(self):
        self.impls = {}

    def register_impl(self, name, *, supports_args=None, supported=True, inplace=False):
        def decorate(fn):
            self.impls[name] = {"fn": fn, "supports_args": supports_args, "supported": supported, "inplace": inplace}
            return fn

        return decorate


@pytest.fixture(scope="module")
def provider():
    stub = _StubOp()
    vllm = types.ModuleType("vllm")
    vllm.ir = types.SimpleNamespace(ops=types.SimpleNamespace(fused_add_rms_norm=stub))
    saved = {k: sys.modules.get(k) for k in ("vllm", "vllm.ir")}
    sys.modules.update({"vllm": vllm, "vllm.ir": vllm.ir})
    try:
        spec = importlib.util.spec_from_file_location("vllm_fused_add_rms_norm_provider", PATH)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    return module, stub


def _native(x: torch.Tensor, x_residual: torch.Tensor, weight: torch.Tensor | None, epsilon: float,
            variance_size: int | None = None):
    """vLLM's native signature (``vllm/ir/ops/layernorm.py``)."""


def test_registers_one_inplace_provider_with_a_static_platform_check(provider):
    module, stub = provider
    (entry,) = stub.impls.values()
    assert entry["inplace"] is True and entry["fn"] is module.fused_add_rms_norm
    assert entry["supports_args"] is module.supports_args
    want = runtime.cuda_available() and torch.cuda.get_device_capability() >= (8, 0)
    assert entry["supported"] is want
    native = list(inspect.signature(_native).parameters.values())
    for fn in (module.supports_args, module.fused_add_rms_norm):
        params = list(inspect.signature(fn).parameters.values())
        assert [(p.name, p.default) for p in params] == [(p.name, p.default) for p in native], fn.__name__
    src = PATH.read_text()
    assert "os.environ" not in src and "getenv" not in src, "enablement must not read the environment"


POINTS = [p for p in boundary_points() if not (set(p.context) - {"inplace", "forced"})]


@pytest.mark.parametrize("point", POINTS, ids=[p.id for p in POINTS])
def test_supports_args_agrees_with_the_kit_on_boundary_points(point, provider, device):
    module, _ = provider
    x, r, w = dataclasses.replace(point.spec, device=device).build(seed=5).args()
    kit = op.explain(x, r, w, 1e-6, inplace=True)
    if point.context.get("forced"):  # vLLM's rule: enablement does not hang on the kit's global switch
        with fastpath_lib.force_fallback():
            assert module.supports_args(x, r, w, 1e-6) is True
            assert op.explain(x, r, w, 1e-6, inplace=True).route == "fallback"
        return
    assert module.supports_args(x, r, w, 1e-6) == kit.eligible, kit.reasons
    assert module.supports_args(x, r, w, 1e-6, variance_size=x.shape[-1] // 2 or 1) is False


def test_the_provider_computes_the_kits_in_place_result(provider, device):
    module, _ = provider
    x, r, w = (t.clone() for t in boundary_points()[0].spec.build(seed=6, device=device).args())
    x2, r2 = x.clone(), r.clone()
    want_out, want_res = reference.native(x, r, w, 1e-5)
    assert module.supports_args(x, r, w, 1e-5)
    got = module.fused_add_rms_norm(x, r, w, 1e-5)
    assert got[0] is x and got[1] is r and torch.equal(r, want_res)
    torch.testing.assert_close(x, want_out, atol=1e-5, rtol=2e-6)
    fastpath_lib.fused_add_rms_norm_(x2, r2, w, 1e-5)
    assert torch.equal(x, x2) and torch.equal(r, r2)
