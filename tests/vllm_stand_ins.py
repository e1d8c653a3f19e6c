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
