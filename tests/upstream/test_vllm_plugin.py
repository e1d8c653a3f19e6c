"""The kit's vLLM plugin changes nobody's vLLM unasked (``fastpath_vllm.register``, vLLM's entry point, and
:func:`fastpath_lib.vllm_plugin.register`): without ``FASTPATH_VLLM=1`` it imports nothing of the kit and registers
nothing; with it, it registers its providers in every process (unsupported where the kit's kernels cannot run, so
a priority made in another process skips them there) and puts them first in the platform's priority only where the
kernels run, logging once either way; it never initialises CUDA and never takes vLLM's single out-of-tree
``RMSNorm`` slot, so another plugin's ``RMSNorm`` registers before or after it.

Each case runs in a fresh process, as vLLM runs plugins: vLLM's real ``ir``, ``custom_op.py`` and ``layernorm.py``
(with a stand-in ``vllm.config``, :mod:`tests.vllm_stand_ins`), and the plugin's log read from vLLM's logger.
"""

from __future__ import annotations

import pytest
from vllm_stand_ins import CONFIG, ROOT, run_child

from fastpath_lib.vllm_plugin import LOGGER_NAME, OPT_IN, PROVIDER, vllm_site

pytestmark = pytest.mark.skipif(not (vllm_site() / "vllm" / "ir").is_dir(),
                                reason=f"vLLM's wheel is not in {vllm_site()} (./kit setup installs it)")

LOG = f'''
import io, json, logging
_log = io.StringIO()
_h = logging.StreamHandler(_log)
_h.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
logging.getLogger("{LOGGER_NAME}").addHandler(_h)
logging.getLogger("{LOGGER_NAME}").setLevel(logging.DEBUG)
'''

NO_CUDA = r'''
import torch
def _boom(*a, **k):
    raise RuntimeError("the plugin initialised CUDA")
for _name in ("_lazy_init", "init", "get_device_capability", "get_device_properties", "current_device"):
    setattr(torch.cuda, _name, _boom)
'''

#: The platform's default priority as vLLM's CUDA platform writes it without Inductor (its config class needs
#: pydantic: a namespace with the same fields stands in).
PRIORITY = r'''
import types
from vllm.platforms import current_platform
current_platform.get_default_ir_op_priority = lambda cfg: types.SimpleNamespace(
    rms_norm=["vllm_c", "native"], fused_add_rms_norm=["vllm_c", "native"], gelu_and_mul_sparse=["triton", "native"])
'''

#: Another plugin's out-of-tree RMSNorm (a hardware plugin's, say).
OTHER = r'''
def other_plugin():
    from vllm.model_executor.custom_op import CustomOp
    from vllm.model_executor.layers.layernorm import RMSNorm
    class HardwareRMSNorm(RMSNorm):
        pass
    CustomOp.register_oot(HardwareRMSNorm, name="RMSNorm")
'''

REPORT = r'''
import sys
from vllm import ir
kit = sorted(m for m in sys.modules if m.startswith("fastpath_lib"))
print(json.dumps({"first": first, "second": second, "kit": kit, "log": _log.getvalue(),
                  "providers": [PROVIDER in getattr(ir.ops, n).impls for n in ("rms_norm", "fused_add_rms_norm")],
                  "cuda": torch.cuda.is_initialized(), **extra}))
'''.replace("PROVIDER", repr(PROVIDER))


def _run(body: str, opt_in: str | None, interpreter: str = "0") -> dict:
    env = {"TRITON_INTERPRET": interpreter, OPT_IN: opt_in or ""}
    return run_child(CONFIG + NO_CUDA + LOG + PRIORITY + OTHER + "extra = {}\n" + body + REPORT, env=env)


def test_not_asked_it_imports_nothing_and_asked_where_it_cannot_run_it_declines_once():
    """What every vLLM process pays with the kit installed and not asked for: no kit module, no provider, no log line,
    the platform's priority untouched. Then asked (``FASTPATH_VLLM=1``) on this host, where no CUDA platform and no
    interpreter let the kernels run: the providers registered as unsupported and not in the priority, one log line
    saying why, CUDA untouched (vLLM's platform object answers, from NVML). A priority that names the provider (the
    engine's, where the kernels run) dispatches to native here instead of failing vLLM's registration check."""
    out = _run(r'''
import os
import fastpath_vllm
extra["not_asked"] = [fastpath_vllm.register(), fastpath_vllm.register(),
                      sorted(m for m in sys.modules if m.startswith("fastpath_lib")), _log.getvalue()]
os.environ["FASTPATH_VLLM"] = "1"
first, second = fastpath_vllm.register(), fastpath_vllm.register()
extra["priority"] = current_platform.get_default_ir_op_priority(None).rms_norm
# the engine's priority, made where the kernels run, reaches this process (a worker that declined)
from vllm import ir
extra["worker"] = []
for name in ("rms_norm", "fused_add_rms_norm"):
    op = getattr(ir.ops, name)
    op.set_default([PROVIDER, "native"])
    impl = op.dispatch(*op.generate_inputs(num_tokens=8, hidden_size=64, dtype=torch.float32))
    extra["worker"].append([op.impls[PROVIDER].supported, impl.provider])
'''.replace("PROVIDER", repr(PROVIDER)), opt_in="0")
    assert out["not_asked"] == [False, False, [], ""]
    assert out["first"] is out["second"] is False
    assert out["providers"] == [True, True] and out["worker"] == [[False, "native"]] * 2
    lines = out["log"].splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"INFO fastpath_kit: {OPT_IN}=1, but the kit's kernels cannot run "
                                                   "here (vLLM's platform is "), lines
    assert lines[0].endswith("providers registered as unsupported, not in the priority"), lines
    assert out["cuda"] is False and "initialised CUDA" not in out["stderr"]
    assert out["priority"] == ["vllm_c", "native"]


def test_asked_it_is_first_in_the_platforms_priority_says_so_once_and_leaves_the_rmsnorm_slot():
    """Under the interpreter (the kernels can run): both providers registered once, first in the platform's default
    for the two norm ops only, one log line; vLLM then dispatches a call the kit accepts to the provider. Another
    plugin's ``RMSNorm`` registers after it, and vLLM's layer is that plugin's."""
    out = _run(r'''
import fastpath_vllm, torch
from vllm import ir
first, second = fastpath_vllm.register(), fastpath_vllm.register()
priority = current_platform.get_default_ir_op_priority(None)
extra["priority"] = [priority.rms_norm, priority.fused_add_rms_norm, priority.gelu_and_mul_sparse]
op = ir.ops.rms_norm
op.set_default([p for p in priority.rms_norm if p != "vllm_c"])  # vllm_c needs vLLM's C library
extra["picked"] = op.dispatch(torch.randn(8, 64), torch.ones(64), 1e-6).provider
other_plugin()
from vllm.model_executor.layers.layernorm import RMSNorm
extra["layer"] = type(RMSNorm(64)).__name__
''', opt_in="1", interpreter="1")
    assert out["first"] is out["second"] is True and out["providers"] == [True, True]
    assert out["priority"] == [[PROVIDER, "vllm_c", "native"]] * 2 + [["triton", "native"]]
    assert out["picked"] == PROVIDER and out["layer"] == "HardwareRMSNorm"
    assert out["log"].splitlines() == [f"INFO fastpath_kit: {OPT_IN}=1: provider {PROVIDER} first in the platform's "
                                       "default priority for vllm.ir rms_norm, fused_add_rms_norm"]


def test_another_plugins_rmsnorm_registered_first_stays_and_the_kit_still_registers():
    """The other order: a hardware plugin's ``RMSNorm`` first, then the kit, which takes no out-of-tree slot."""
    out = _run(r'''
import fastpath_vllm
other_plugin()
first, second = fastpath_vllm.register(), fastpath_vllm.register()
from vllm.model_executor.layers.layernorm import RMSNorm
extra["layer"] = type(RMSNorm(64)).__name__
''', opt_in="1", interpreter="1")
    assert out["first"] is out["second"] is True and out["providers"] == [True, True]
    assert out["layer"] == "HardwareRMSNorm" and "Duplicate" not in out["stderr"]


def test_register_returns_false_without_vllm(monkeypatch):
    import sys

    import fastpath_vllm
    from fastpath_lib import vllm_plugin as vp

    monkeypatch.setenv(OPT_IN, "1")
    monkeypatch.setitem(sys.modules, "vllm", None)
    assert vp.register() is False and vp.register_providers() is False and fastpath_vllm.register() is False
    monkeypatch.setenv(OPT_IN, "0")
    assert vp.register() is False
    assert str(ROOT)  # the helper module's root: the children run from the checkout
