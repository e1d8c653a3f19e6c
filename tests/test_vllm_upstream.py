"""The in-tree vLLM file (``upstream/vllm_triton_layernorm.py``): generated from the kit and current, within vLLM's
pre-commit rules that can run here, and registered by the real ``vllm.ir``.

On this CPU ``vllm.triton_utils`` hands out a placeholder Triton (no GPU driver), so the file's kernels cannot run
here: the rules are checked on its text, and a child process (a fresh ``vllm.ir`` registry, beside the plugin's)
imports it, checks what vLLM validates at registration (the providers' schemas and ``supports_args`` signatures), and
asks its ``supports_args`` about fake CUDA tensors: a plain ``bool`` on an unbacked token count, and never an
acceptance the kit's own predicate refuses.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fastpath_lib.vllm_plugin import vllm_site

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("make_upstream", ROOT / "tools" / "make_upstream.py")
make_upstream = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_upstream)

FILE = make_upstream.TARGET
SITE = vllm_site()


@pytest.fixture(scope="module")
def text() -> str:
    return FILE.read_text()


def test_the_file_is_what_the_generator_writes_from_the_kit(text):
    assert text == make_upstream.render(), "run: python tools/make_upstream.py"
    assert make_upstream.main(["--check"]) == 0


def test_the_kernels_are_the_kits_own(text):
    """Vendored by name from the kit's source: the kernel bodies are the kit's, line for line."""
    for rel, names in make_upstream.VENDORED:
        src = (ROOT / "fastpath_lib" / rel).read_text()
        for name in names:
            if name.endswith("_kernel"):
                tree = ast.parse(src)
                node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
                body = src.splitlines()[node.body[1].lineno - 1: node.end_lineno]  # after the docstring
                assert "\n".join(body) in text, name


def test_the_generator_refuses_a_vendored_function_that_needs_the_kit(monkeypatch):
    monkeypatch.setattr(make_upstream, "VENDORED", (("rmsnorm/kernels.py", ("forward",)),))
    with pytest.raises(SystemExit, match="needs the kit"):
        make_upstream.render()


# --- vLLM's pre-commit rules (tools/pre_commit/ in vLLM's repository, as of 0.33) -----------------------------------

def test_spdx_header(text):
    lines = text.splitlines()
    assert lines[0] == "# SPDX-License-Identifier: Apache-2.0"
    assert lines[1] == "# SPDX-FileCopyrightText: Copyright contributors to the vLLM project"


def test_triton_only_through_vllm_triton_utils(text):
    """check_forbidden_imports.py's "triton" rule: no ``import triton`` / ``from triton``; vllm.triton_utils."""
    assert not re.search(r"^(from|import)\s+triton(\s|\.|$)", text, re.M)
    assert re.search(r"^from vllm\.triton_utils import .*\btl, triton$", text, re.M)


def test_no_forbidden_imports_or_device_calls(text):
    """check_forbidden_imports.py (``re``, pickle) and check_torch_cuda.py (``torch.cuda`` device calls)."""
    assert not re.search(r"^\s*(?:import\s+re(?:$|\s|,)|from\s+re\s+import)", text, re.M)
    assert not re.search(r"^\s*(import\s+(pickle|cloudpickle)(\s|$|\sas)|from\s+(pickle|cloudpickle)\s+import\b)",
                         text, re.M)
    assert not re.search(r"\btorch\.cuda\.(empty_cache|synchronize|device_count|current_device|set_device|device\(|"
                         r"manual_seed)", text)
    assert "with torch.cuda.device" not in text and "fastpath_lib" not in [
        m for n in ast.walk(ast.parse(text)) if isinstance(n, ast.ImportFrom) for m in [n.module]]


def test_supported_comes_from_the_platform_without_touching_cuda_at_import(text):
    tree = ast.parse(text)
    (node,) = [n for n in tree.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "SUPPORTED"]
    calls = {ast.unparse(c.func) for c in ast.walk(node.value) if isinstance(c, ast.Call)}
    assert calls == {"current_platform.is_cuda", "current_platform.has_device_capability"}
    module_level = [n for n in tree.body if not isinstance(n, (ast.FunctionDef, ast.Import, ast.ImportFrom))]
    assert not any("torch.cuda" in ast.unparse(n) for n in module_level)


# --- registered by the real vllm.ir, in a child process -------------------------------------------------------------

CHILD = r"""
import dataclasses, importlib.util, json, sys, warnings
warnings.simplefilter("ignore", DeprecationWarning)
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv
spec = importlib.util.spec_from_file_location("vllm_triton_layernorm", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
from vllm import ir
from fastpath_lib.fused.cases import boundary_points
from fastpath_lib.fused import op as kit
out = {"cuda_initialized": torch.cuda.is_initialized(), "impls": {}, "unbacked": {}, "points": []}
for op in (ir.ops.rms_norm, ir.ops.fused_add_rms_norm):
    i = op.impls[m.PROVIDER]
    out["impls"][op.name] = [i.supported, i.inplace, str(op.torch_op._schema) != ""]
out["schema"] = str(torch.ops.vllm.fastpath_fused_add_rms_norm_.default._schema)
env = ShapeEnv()
with FakeTensorMode(shape_env=env):
    u = env.create_unbacked_symint()
    for hidden, dtype in ((64, torch.float32), (4096, torch.bfloat16), (12, torch.float16)):
        x, r = (torch.empty(u, hidden, dtype=dtype, device="cuda") for _ in range(2))
        w = torch.empty(hidden, dtype=dtype, device="cuda")
        got = (m.rms_norm_supports_args(x, w, 1e-5), m.fused_add_rms_norm_supports_args(x, r, w, 1e-5))
        out["unbacked"][f"{hidden}-{dtype}"] = [type(g).__name__ + ":" + str(g) for g in got]
out["guards"] = len(env.guards)
for p in boundary_points():
    if set(p.context) - {"inplace"} or not p.context.get("inplace", True):
        continue
    x, r, w = p.spec.build(seed=1, device="cpu").args()
    kit_ok = kit.explain(x, r, w, 1e-6, inplace=True).eligible
    with FakeTensorMode(allow_non_fake_inputs=True):
        cuda = [None if t is None else torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="cuda")
                for t in (x, r, w)]
        with torch.enable_grad():
            if x.requires_grad:
                cuda[0].requires_grad_(True)
            ours = m.fused_add_rms_norm_supports_args(*cuda, 1e-6)
    out["points"].append([p.id, ours, kit_ok])
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def child():
    if not (SITE / "vllm" / "ir").is_dir():
        pytest.skip(f"vLLM's wheel is not installed in {SITE} (`./kit setup` installs it)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(SITE)]))
    res = subprocess.run([sys.executable, "-c", CHILD, str(FILE)], env=env, capture_output=True, text=True,
                         timeout=300, cwd=ROOT)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_vllm_registers_both_providers_with_their_schemas_and_without_touching_cuda(child):
    assert child["impls"] == {"rms_norm": [False, False, True], "fused_add_rms_norm": [False, True, True]}
    assert "Tensor(a0!) x, Tensor(a1!) x_residual" in child["schema"]
    assert child["cuda_initialized"] is False


def test_supports_args_is_a_plain_bool_on_an_unbacked_token_count(child):
    assert child["unbacked"] == {"64-torch.float32": ["bool:True"] * 2, "4096-torch.bfloat16": ["bool:True"] * 2,
                                 "12-torch.float16": ["bool:False"] * 2}
    assert child["guards"] == 0


def test_supports_args_accepts_nothing_the_kit_refuses(child):
    """On every boundary point (as fake CUDA tensors): the in-tree region is the kit's, restricted to contiguous
    rows with the weight in x's dtype; what only run time knows (pointers, overlap, the rows) is left to the op."""
    runtime_only = ("input_alignment[", "weight_alignment[", "residual_alignment[", "no_overlap[", "min_rows[",
                    "non_empty[")  # the row count, like the threshold, is the op's to decide
    wrong = [pid for pid, ours, kit in child["points"] if ours and not kit and not pid.startswith(runtime_only)]
    assert not wrong
    assert any(ours for _, ours, _ in child["points"]) and any(not ours for _, ours, _ in child["points"])
