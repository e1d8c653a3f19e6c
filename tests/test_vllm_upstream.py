"""The kit's vLLM patch (``upstream/vllm_rms_norm_triton.patch``): generated from the kit's kernels and current, and
on a copy of the pinned vLLM wheel's tree: it applies, ruff and mypy pass at vLLM's settings, it names nothing of the
kit, and the patched vLLM imports and computes the reference's values under Triton's interpreter on this CPU.

The copy is the wheel's tree as symbolic links (``cp -rs``), with the files the patch changes copied for real;
it lives in the temporary folder under a fixed name, so mypy's cache (beside it) makes the second run cheap. The
patched ``layernorm.py`` is vLLM's file, imported with a stand-in ``vllm.config`` (vLLM's config needs pydantic,
absent from the kit's wheel install) and ``vllm.triton_utils`` handing out the real Triton (without a GPU driver it
hands out a placeholder): :mod:`tests.vllm_stand_ins`. The CPU stands in for the CUDA device
(``current_platform.device_type``), and ``layer.use_triton`` is set as ``RMSNorm.__init__`` sets it on CUDA.
vLLM's own tests in the patch (``tests/kernels/core/test_rms_norm_triton.py``) need a CUDA device; here they are
linted and type-checked only.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from vllm_stand_ins import CONFIG, ROOT, TRITON, run_child

from fastpath_lib.vllm_plugin import vllm_site

_spec = importlib.util.spec_from_file_location("make_upstream", ROOT / "tools" / "make_upstream.py")
make_upstream = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_upstream)

SITE = vllm_site()
PIN = next(ln for ln in (ROOT / "constraints.txt").read_text().splitlines() if ln.startswith("vllm=="))

pytestmark = pytest.mark.skipif(not (SITE / "vllm" / "ir").is_dir(),
                                reason=f"vLLM's wheel is not in {SITE} (./kit setup installs it)")

PY_FILES = [f for f in make_upstream.CHANGED if f.endswith(".py")]
NEW_FILES = (make_upstream.NEW_FILE, make_upstream.TEST_FILE)


@pytest.fixture(scope="module")
def patch_text() -> str:
    return make_upstream.TARGET.read_text()


@pytest.fixture(scope="module")
def tree(patch_text) -> Path:
    """The wheel's tree with the patch applied (``git apply --check`` first)."""
    root = Path(tempfile.gettempdir()) / f"fastpath-{PIN.replace('==', '-')}-patched"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    subprocess.run(["cp", "-rs", str(SITE.resolve() / "vllm"), str(root / "vllm")], check=True)
    for rel in make_upstream.CHANGED:
        if (root / rel).is_symlink():
            shutil.copyfile(SITE / rel, (root / rel).with_suffix(".tmp"))
            (root / rel).with_suffix(".tmp").replace(root / rel)
    for check in (["--check"], []):
        res = subprocess.run(["git", "apply", *check, "-"], input=patch_text, cwd=root, capture_output=True,
                             text=True)
        assert res.returncode == 0, f"the patch does not apply to {PIN}'s files: {res.stderr}"
    return root


def test_the_patch_is_what_the_generator_writes_from_the_kit(patch_text):
    assert patch_text == make_upstream.render(), "run: python tools/make_upstream.py"


def test_the_kernels_are_the_kits_own(tree):
    """Vendored by name: each kernel's statements are the kit's, renamed (compared as parsed code)."""
    import ast

    new = ast.parse((tree / make_upstream.NEW_FILE).read_text())
    ours = {n.name: n for n in new.body if isinstance(n, ast.FunctionDef)}
    for rel, names in make_upstream.VENDORED:
        kit = {n.name: n for n in ast.parse((ROOT / "fastpath_lib" / rel).read_text()).body
               if isinstance(n, ast.FunctionDef)}
        for name in names:
            if name in kit:
                body = [ast.unparse(s) for s in kit[name].body[1:]]  # after the docstring
                for old, renamed in make_upstream.RENAMES.items():
                    body = [re.sub(rf"\b{old}\b", renamed, s) for s in body]
                assert [ast.unparse(s) for s in ours[make_upstream.RENAMES.get(name, name)].body[1:]] == body, name


def test_the_patch_changes_the_files_a_maintainer_expects_and_names_nothing_of_the_kit(patch_text):
    files = re.findall(r"^diff --git a/(\S+) b/", patch_text, re.M)
    assert files == list(make_upstream.CHANGED)
    added = "\n".join(ln for ln in patch_text.splitlines() if ln.startswith("+"))
    assert not re.search(r"fastpath|kit\b|GENERATED|make_upstream", added, re.I)
    for rel in NEW_FILES:
        body = patch_text.split(f"+++ b/{rel}\n", 1)[1]
        assert body.split("\n", 2)[1:2] == ["+# SPDX-License-Identifier: Apache-2.0"], rel


def _ruff(tree: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", *args, "--isolated", "--line-length", "88",
                           "--target-version", "py310", "--config",
                           "lint.isort.known-first-party = ['vllm', 'tests']", *PY_FILES],
                          cwd=tree, capture_output=True, text=True)


def test_ruff_passes_at_vllms_settings(tree):
    """vLLM's rules (E, F, UP, B, ISC, SIM, I, G at 88 columns) and its formatter, on every file the patch touches."""
    lint = _ruff(tree, "check", "--select", make_upstream.RUFF_SELECT, "--output-format", "concise")
    assert lint.returncode == 0, lint.stdout + lint.stderr
    fmt = _ruff(tree, "format", "--check")
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr


def _added_lines(patch_text: str) -> dict[str, set[int]]:
    """Line numbers (in the patched file) of every added line, per file."""
    added: dict[str, set[int]] = {}
    for chunk in re.split(r"^diff --git a/", patch_text, flags=re.M)[1:]:
        rel = chunk.split(" ", 1)[0]
        lines = added.setdefault(rel, set())
        for hunk in re.split(r"^@@ ", chunk, flags=re.M)[1:]:
            n = int(re.match(r"-\d+(?:,\d+)? \+(\d+)", hunk).group(1))
            for ln in hunk.splitlines()[1:]:
                if ln.startswith("+"):
                    lines.add(n)
                if not ln.startswith("-"):
                    n += 1
    return added


def test_mypy_finds_nothing_in_what_the_patch_adds(tree, patch_text):
    """vLLM's mypy settings (``ignore_missing_imports``, ``check_untyped_defs``, ``follow_imports = "silent"``), on the
    source files the patch touches (vLLM's mypy run leaves tests out). An error on a line the patch did not add is
    vLLM 0.33.0's own at this mypy version (its ``RMSNormGated`` builds a tensor from ``**factory_kwargs``)."""
    files = [f for f in PY_FILES if not f.startswith("tests/")]
    res = subprocess.run([sys.executable, "-m", "mypy", "--ignore-missing-imports", "--check-untyped-defs",
                          "--follow-imports", "silent", "--python-version", "3.10", "--no-error-summary",
                          "--cache-dir", str(tree.parent / f"{tree.name}-mypy-cache"), *files],
                         cwd=tree, capture_output=True, text=True, timeout=600)
    assert "error:" in res.stdout or res.returncode == 0, res.stdout + res.stderr
    added = _added_lines(patch_text)
    ours = [e for e in res.stdout.splitlines() if (m := re.match(r"(\S+?):(\d+): error", e))
            and int(m.group(2)) in added.get(m.group(1), set())]
    assert not ours, "\n".join(ours)


CHILD = CONFIG + TRITON + r'''
import json, sys, types
import torch
_cfg = sys.modules["vllm.config"]
_cfg.get_current_vllm_config_or_none = lambda: types.SimpleNamespace(
    kernel_config=types.SimpleNamespace(rms_norm_backend="triton"))
from vllm.platforms import current_platform
current_platform.device_type = "cpu"  # the CPU stands in for the CUDA device
from vllm import ir
import vllm.model_executor.layers.layernorm as ln
import vllm.kernels.triton.rms_norm as tr
assert tr.__file__.startswith(sys.argv[1]), tr.__file__

calls = []
for name in ("rms_norm_triton", "fused_add_rms_norm_triton"):
    def counted(*a, _f=getattr(ln, name), _n=name):
        calls.append(_n)
        return _f(*a)
    setattr(ln, name, counted)

out = {"use_triton_off_cuda": ln.RMSNorm(64).use_triton, "cases": {}}
g = torch.Generator().manual_seed(0)
def r(*shape, dtype=torch.float32):
    return torch.randn(*shape, generator=g).to(dtype)

def case(name, layer, x, residual=None):
    layer.use_triton = True  # what RMSNorm.__init__ decides on CUDA with rms_norm_backend="triton"
    before = len(calls)
    w = layer.weight.data
    if residual is None:
        want = (ir.ops.rms_norm.impls["native"].impl_fn(x, w, layer.variance_epsilon,
                                                         layer.variance_size_override),)
        tol = ir.ops.rms_norm.get_tolerance(x.dtype)
        got = (layer.forward_cuda(x),)
    else:
        want = ir.ops.fused_add_rms_norm.impls["native"].impl_fn(x, residual, w, layer.variance_epsilon)
        tol = ir.ops.fused_add_rms_norm.get_tolerance(x.dtype)
        got = layer.forward_cuda(x, residual)  # in place: x and residual hold the results
    close = all(g_.shape == w_.shape and torch.allclose(g_, w_, **tol) for g_, w_ in zip(got, want))
    out["cases"][name] = [calls[before:], close]

for dtype in (torch.float32, torch.bfloat16, torch.float16):
    layer = ln.RMSNorm(96, dtype=dtype)
    layer.weight.data = r(96, dtype=dtype)
    for tokens in (0, 1, 7, 83):
        case(f"{tokens}-{dtype}", layer, r(tokens, 96, dtype=dtype))
        case(f"{tokens}-{dtype}-residual", layer, r(tokens, 96, dtype=dtype), r(tokens, 96, dtype=dtype))
    case(f"3d-{dtype}-residual", layer, r(2, 3, 96, dtype=dtype), r(2, 3, 96, dtype=dtype))
odd = ln.RMSNorm(13)  # no whole 16-byte vectors: VEC 1
case("odd-width", odd, r(5, 13))
case("no-weight", ln.RMSNorm(64, has_weight=False), r(5, 64))
case("weight-dtype-differs", ln.RMSNorm(64, dtype=torch.float32), r(5, 64, dtype=torch.bfloat16))
case("strided", ln.RMSNorm(64), r(5, 128)[:, ::2])
case("variance-override", ln.RMSNorm(64, var_hidden_size=32), r(5, 64))
case("too-wide", ln.RMSNorm(16385), r(1, 16385))

from fastpath_lib.rmsnorm.launch import forward_rows_per_program, launch_settings
rule = []
for n in (1, 13, 64, 96, 100, 128, 1000, 2048, 4096, 8192, 16384):
    for dtype in (torch.float32, torch.bfloat16):
        block, warps = launch_settings(n, "forward")
        vec = 16 // torch.empty(0, dtype=dtype).element_size()
        kit = [block, warps, forward_rows_per_program(n), vec if n % vec == 0 else 1]
        rule.append([n, str(dtype), list(tr._launch_config(torch.empty(1, n, dtype=dtype))), kit])
out["rule"] = rule
try:  # what the note says of triton_op under the interpreter (templates.TRITON_OP_UNDER_THE_INTERPRETER)
    torch.compile(lambda x, w: tr.rms_norm_triton(x, w, 1e-6), fullgraph=True)(r(4, 64), r(64))
    out["compile"] = "ran"
except Exception as e:
    out["compile"] = f"{type(e).__name__}: {e}"[:600]
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def patched(tree):
    import os

    return run_child(CHILD, str(tree), env={"TRITON_INTERPRET": "1", "FASTPATH_VLLM_SITE": str(tree),
                                            "PYTHONPATH": os.pathsep.join([str(ROOT), str(tree), str(SITE)])})


def test_the_patched_layer_computes_the_references_values_on_the_new_path(patched):
    """Interpreter, CPU: every call agrees with vLLM's native within vLLM's tolerance; the calls the kernel takes
    (any token count, residual or not) run the new ops, the others vLLM's current path."""
    cases = patched["cases"]
    assert all(ok for _, ok in cases.values()), {k: v for k, v in cases.items() if not v[1]}
    kernel = {k for k, (c, _) in cases.items() if c}
    assert {k for k in kernel if "residual" in k} == {k for k in cases if "residual" in k}
    assert all(cases[k][0] == (["fused_add_rms_norm_triton"] if "residual" in k else ["rms_norm_triton"])
               for k in kernel)
    assert kernel == {k for k in cases if k[0].isdigit()} | {"odd-width", "no-weight"}
    assert patched["use_triton_off_cuda"] is False  # the platform gate: CUDA only


def test_the_launch_rule_is_the_kits(patched):
    assert all(ours == kit for _, _, ours, kit in patched["rule"]), patched["rule"]


def test_what_the_note_says_of_triton_op_under_the_interpreter_holds(patched):
    """Eager calls of the patch's ``triton_op`` ran above; ``torch.compile`` over it fails on the CPU, as the vLLM
    note says (when a torch or Triton update changes that, the note's sentence must change with it)."""
    from fastpath_lib.bench.templates import TRITON_OP_UNDER_THE_INTERPRETER

    assert "Cannot access data pointer of Tensor" in patched["compile"], patched["compile"]
    assert "Cannot access data pointer of Tensor" in TRITON_OP_UNDER_THE_INTERPRETER
