"""The kit's vLLM plugin cannot hurt its host (:func:`fastpath_lib.vllm_plugin.register`), and its out-of-tree
``RMSNorm`` runs the kit's kernel where the call's metadata allow and vLLM's own ``forward_cuda`` otherwise.

Each case runs in a fresh process, as vLLM runs plugins: vLLM's real ``custom_op.py`` and ``layernorm.py`` (with a
stand-in ``vllm.config``, :mod:`tests.vllm_stand_ins`), and the plugin's log read from vLLM's logger.
"""

from __future__ import annotations

import pytest
from vllm_stand_ins import CONFIG, ROOT, run_child

from fastpath_lib.vllm_plugin import LOGGER_NAME, TESTED_VLLM_VERSIONS, vllm_site

pytestmark = pytest.mark.skipif(not (vllm_site() / "vllm" / "ir").is_dir(),
                                reason=f"vLLM's wheel is not in {vllm_site()} (./kit setup installs it)")

LOG = f'''
import io, json, logging
_log = io.StringIO()
_h = logging.StreamHandler(_log)
_h.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
logging.getLogger("{LOGGER_NAME}").addHandler(_h)
logging.getLogger("{LOGGER_NAME}").setLevel(logging.INFO)
'''

NO_CUDA = r'''
import torch
def _boom(*a, **k):
    raise RuntimeError("the plugin initialised CUDA")
for _name in ("_lazy_init", "init", "get_device_capability", "get_device_properties", "current_device"):
    setattr(torch.cuda, _name, _boom)
'''

REGISTER_TWICE = r'''
from fastpath_lib import vllm_plugin as vp
first, second = vp.register(), vp.register()
'''


def test_register_never_initialises_cuda_and_registers_the_layer_once():
    """CUDA's initialisation raises in this process: register() still registers both parts, decides ``supported``
    through vLLM's platform object, and a second call changes nothing."""
    out = run_child(CONFIG + NO_CUDA + LOG + REGISTER_TWICE + r'''
import torch
from vllm.model_executor.custom_op import op_registry_oot
from vllm.model_executor.layers.layernorm import RMSNorm
from vllm import ir
cls = op_registry_oot["RMSNorm"]
layer = RMSNorm(64)
x = torch.randn(5, 64)
same = torch.equal(layer(x), ir.ops.rms_norm.impls["native"].impl_fn(x, layer.weight.data, 1e-6))
print(json.dumps({"first": first, "second": second, "cls": cls.__name__, "name": cls.name, "kind": type(layer).__name__,
                  "fastpath": layer._fastpath, "same": same, "cuda": torch.cuda.is_initialized(),
                  "ir": vp.PROVIDER in ir.ops.rms_norm.impls, "log": _log.getvalue()}))
''', env={"TRITON_INTERPRET": "0"})
    assert out["first"] is out["second"] is True
    assert (out["cls"], out["name"], out["kind"]) == ("FastpathRMSNorm", "rms_norm", "FastpathRMSNorm")
    assert out["fastpath"] is False and out["same"] is True  # no CUDA platform here: vLLM's own path, unchanged
    assert out["cuda"] is False and out["ir"] is True and "initialised CUDA" not in out["stderr"]
    assert out["log"] == ""  # a tested vLLM, every part registered: nothing to say


def test_a_vllm_without_ir_gets_nothing_registered_and_one_line_each_why():
    """``vllm.ir`` raises ImportError (a vLLM after 0.34, or a broken one): register() returns ``False`` twice,
    raises nothing, and logs each skipped part once."""
    out = run_child(CONFIG + r'''
import sys
class _NoIR:
    def find_spec(self, name, path=None, target=None):
        if name == "vllm.ir" or name.startswith("vllm.ir."):
            raise ImportError("cannot import name 'ir' from 'vllm' (simulated)")
sys.meta_path.insert(0, _NoIR())
''' + LOG + REGISTER_TWICE + r'''
print(json.dumps({"first": first, "second": second, "log": _log.getvalue()}))
''')
    assert out["first"] is out["second"] is False
    lines = out["log"].splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith("WARNING fastpath_kit: out-of-tree RMSNorm (CustomOp.register_oot) not registered: "
                               "ImportError: cannot import name 'ir'")
    assert lines[1].startswith("INFO fastpath_kit: vllm.ir providers (deprecated) not registered: this vLLM has no IR")
    assert "Traceback" not in out["stderr"]


def test_an_untested_version_or_a_renamed_layer_is_said_once_and_skipped():
    out = run_child(CONFIG + LOG + r'''
import vllm
vllm.__version__ = "0.99.0"
import vllm.model_executor.layers.layernorm as ln
def forward_cuda(self, hidden, residual=None):
    return hidden
ln.RMSNorm.forward_cuda = forward_cuda  # a renamed argument
''' + REGISTER_TWICE + r'''
from vllm.model_executor.custom_op import op_registry_oot
print(json.dumps({"first": first, "oot": "RMSNorm" in op_registry_oot, "log": _log.getvalue()}))
''')
    lines = out["log"].splitlines()
    assert out["first"] is True and out["oot"] is False  # the IR providers registered, the layer not
    assert lines[0] == (f"WARNING fastpath_kit: tested with vLLM {', '.join(TESTED_VLLM_VERSIONS)}, this is 0.99.0; "
                        "each part that does not fit is skipped")
    assert lines[1] == ("INFO fastpath_kit: out-of-tree RMSNorm (CustomOp.register_oot) not registered: vLLM's "
                        "RMSNorm.forward_cuda takes ['self', 'hidden', 'residual'], not (self, x, residual)")
    assert len(lines) == 2


ROUTES = r'''
import os
import torch
from vllm import ir
import vllm.model_executor.layers.layernorm as ln
calls = []
_vllm_forward_cuda = ln.RMSNorm.forward_cuda
def counted(self, x, residual=None):
    calls.append(1)
    if os.environ.get("VLLM_BATCH_INVARIANT") == "1":  # vLLM's kernel for it is Triton: a placeholder here
        return self.forward_native(x, residual)
    return _vllm_forward_cuda(self, x, residual)
ln.RMSNorm.forward_cuda = counted  # what the plugin's layer defers to: vLLM's own
''' + REGISTER_TWICE + r'''
native = ir.ops.rms_norm.impls["native"].impl_fn
fused_native = ir.ops.fused_add_rms_norm.impls["native"].impl_fn

def route(name, layer, x, residual=None):
    before = len(calls)
    got = layer(x) if residual is None else layer(x.clone(), residual.clone())
    w = layer.weight.data
    if residual is None:
        want = native(x, w, layer.variance_epsilon, layer.variance_size_override)
        tol = ir.ops.rms_norm.get_tolerance(x.dtype)
        close = torch.allclose(got, want, **tol) if got.numel() else got.shape == want.shape
    else:
        want = fused_native(x, residual, w, layer.variance_epsilon)
        tol = ir.ops.fused_add_rms_norm.get_tolerance(x.dtype)
        close = all(torch.allclose(g, v, **tol) for g, v in zip(got, want))
    out[name] = ["vllm" if len(calls) > before else "kit", bool(close)]

out = {}
g = torch.Generator().manual_seed(0)
def r(*shape, dtype=torch.float32):
    return torch.randn(*shape, generator=g).to(dtype)
for dtype in (torch.float32, torch.bfloat16, torch.float16):
    layer = ln.RMSNorm(64, eps=1e-5, dtype=dtype)
    layer.weight.data = r(64, dtype=dtype)
    route(f"rows-{dtype}", layer, r(17, 64, dtype=dtype))
    route(f"residual-{dtype}", layer, r(3, 5, 64, dtype=dtype), r(3, 5, 64, dtype=dtype))
    route(f"one-token-{dtype}", layer, r(1, 64, dtype=dtype))
f32 = ln.RMSNorm(64, dtype=torch.float32)
route("empty", f32, r(0, 64))
route("weight-dtype-differs", f32, r(4, 64, dtype=torch.bfloat16))
route("strided", f32, r(4, 128)[:, ::2])
route("residual-strided", f32, r(4, 64), r(64, 4).t())
route("variance-override", ln.RMSNorm(64, var_hidden_size=32), r(4, 64))
route("too-wide", ln.RMSNorm(16385), r(1, 16385))
os.environ["VLLM_BATCH_INVARIANT"] = "1"  # read by the layer at construction, as vLLM reads it per process
route("batch-invariant", ln.RMSNorm(64), r(4, 64))
print(json.dumps({"routes": out, "first": first}))
'''


def test_the_layer_takes_the_kits_kernel_where_the_metadata_allow_and_vllms_path_otherwise():
    """Under the interpreter (the CPU stands in for CUDA): every call agrees with vLLM's native within vLLM's
    tolerance, and a call the kernel cannot take runs vLLM's own ``forward_cuda``, never a composite of the kit's."""
    routes = run_child(CONFIG + LOG + ROUTES, env={"TRITON_INTERPRET": "1"})["routes"]
    assert all(ok for _, ok in routes.values()), routes
    kit = {n for n, (path, _) in routes.items() if path == "kit"}
    assert kit == {f"{k}-torch.{d}" for k in ("rows", "residual", "one-token") for d in ("float32", "bfloat16",
                                                                                         "float16")} | {"empty"}
    assert {n for n, (path, _) in routes.items() if path == "vllm"} == {
        "weight-dtype-differs", "strided", "residual-strided", "variance-override", "too-wide", "batch-invariant"}


def test_register_returns_false_without_vllm(monkeypatch):
    import sys

    from fastpath_lib import vllm_plugin as vp

    monkeypatch.setitem(sys.modules, "vllm", None)
    assert vp.register() is False
    assert str(ROOT)  # the helper module's root: the children run from the checkout
