"""Stand-ins that let vLLM's own layer files import here, shared by the vLLM tests' child processes.

vLLM's wheel is installed without its dependencies (``./kit setup``). ``vllm/model_executor/custom_op.py`` (and so
``layers/layernorm.py``) imports one name from ``vllm.config``, ``get_cached_compilation_config``, and ``vllm.config``
needs pydantic. :data:`CONFIG` puts a ``vllm.config`` in ``sys.modules`` with that one function, returning vLLM's
eager defaults (``custom_ops == ["all"]``: the layer's ``forward_cuda`` is chosen); everything else is vLLM's file.
:data:`TRITON` makes ``vllm.triton_utils`` hand out the real Triton under the interpreter (without a GPU driver it
hands out a placeholder). :func:`run_child` runs a script with vLLM's wheel on the path and returns its last line as
JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CONFIG = r'''
import sys, types
_cfg = types.ModuleType("vllm.config")
class _CompilationConfig:  # what CustomOp reads of vllm.config.CompilationConfig, at its eager defaults
    custom_ops = ["all"]
    enabled_custom_ops = set()
    disabled_custom_ops = set()
    mode = 0
    backend = "eager"
_cfg.get_cached_compilation_config = lambda: _CompilationConfig
_cfg.get_current_vllm_config_or_none = lambda: None
sys.modules["vllm.config"] = _cfg
'''

TRITON = r'''
import triton as _triton, triton.language as _tl
import vllm.triton_utils as _tu
_tu.HAS_TRITON, _tu.triton, _tu.tl = True, _triton, _tl
'''


def run_child(script: str, *args: str, env: dict | None = None, timeout: float = 300) -> dict:
    """Run ``script`` in a fresh interpreter with the kit and vLLM's wheel importable; its last stdout line, as JSON
    (stderr is returned too, under ``"stderr"``)."""
    from fastpath_lib.vllm_plugin import vllm_site

    full = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(vllm_site())]))
    full.update(env or {})
    res = subprocess.run([sys.executable, "-c", script, *args], env=full, capture_output=True, text=True,
                         timeout=timeout, cwd=ROOT)
    assert res.returncode == 0, res.stderr[-4000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    out["stderr"] = res.stderr
    return out


BF16 = r'''
import numpy as _np
import torch as _torch
import triton.language as _tl
import triton.runtime.interpreter as _interp
_convert_float = _interp._convert_float
def _torch_convert_float(input, input_dtype, output_dtype, rounding_mode):
    if input_dtype == _tl.float32 and output_dtype == _tl.bfloat16:
        wide = _torch.from_numpy(_np.ascontiguousarray(input).view(_np.float32))
        return wide.to(_torch.bfloat16).view(_torch.int16).numpy().view(_np.uint16).reshape(input.shape)
    if input_dtype == _tl.bfloat16 and output_dtype == _tl.float32:
        return (_np.ascontiguousarray(input).view(_np.uint16).astype(_np.uint32) << 16).reshape(input.shape)
    return _convert_float(input, input_dtype, output_dtype, rounding_mode)
_interp._convert_float = _torch_convert_float
'''
"""Triton 3.8's interpreter converts fp32 to bf16 by truncation and widens bf16 subnormals wrongly; a GPU rounds to
nearest even (``cvt.rn``), as torch does. This puts torch's conversions in the interpreter (the test harness's
accommodation: the kernels under test stay as a GPU runs them)."""

PLATFORM = r'''
from vllm.platforms import current_platform as _platform
_platform.is_cuda = lambda: True  # the providers' static check
_platform.device_type = "cpu"  # the CPU stands in for the CUDA device
'''
"""The CPU stands in for the CUDA device: vLLM's platform object says CUDA, with the CPU's device type."""


def install() -> None:
    """Everything a vLLM test file needs to run its CUDA providers under the interpreter here, in this process."""
    for script in (CONFIG, TRITON, BF16, PLATFORM):
        exec(script, {"__name__": "vllm_stand_ins_script"})


def pytest_configure(config) -> None:
    """As a pytest plugin (``-p vllm_stand_ins``): :func:`install` before vLLM's test files are imported."""
    install()
