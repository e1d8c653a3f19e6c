"""The kit's vLLM patch (``upstream/vllm_rms_norm_triton.patch``): current, and on a copy of the pinned vLLM wheel's
tree it applies, ruff and mypy pass at vLLM's settings, it names nothing of the kit, ships no interpreter
accommodation, and vLLM's tests in the patch pass under Triton's interpreter on this CPU.

The copy is the wheel's tree as symbolic links (``cp -rs``), with the files the patch changes copied for real;
it lives in the temporary folder under a fixed name, so mypy's cache (beside it) makes the second run cheap. The
patch's tests run in one child process with :mod:`tests.vllm_stand_ins` as a pytest plugin: a stand-in
``vllm.config`` (vLLM's config needs pydantic, absent from the kit's wheel install), the real Triton from
``vllm.triton_utils``, the CPU standing in for the CUDA device, and torch's bf16 conversions in the interpreter
(Triton 3.8's interpreter truncates fp32 to bf16; a GPU rounds to nearest even). The same child compares the
providers with vLLM's native bit for bit.
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
from vllm_stand_ins import ROOT, run_child

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


def test_the_shipped_file_has_no_interpreter_accommodation(tree):
    """What vLLM would ship runs on a GPU as written: no ``TRITON_INTERPRET`` read, no bit-level conversion (the
    interpreter's accommodations live in the kit's harness, :data:`vllm_stand_ins.BF16`)."""
    text = (tree / make_upstream.NEW_FILE).read_text()
    assert not re.search(r"INTERPRET|bitcast|\bos\b", text), make_upstream.NEW_FILE
    assert "register_impl(\n    \"triton\"" in text and "config" not in text


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
    """vLLM's mypy settings (``ignore_missing_imports``, ``check_untyped_defs``, ``follow_imports = "silent"``), on
    every file the patch touches, its test in ``tests/kernels/core/`` included (vLLM's pre-commit checks that folder).
    An error on a line the patch did not add is vLLM 0.33.0's own at this mypy version."""
    files = PY_FILES
    res = subprocess.run([sys.executable, "-m", "mypy", "--ignore-missing-imports", "--check-untyped-defs",
                          "--follow-imports", "silent", "--python-version", "3.10", "--no-error-summary",
                          "--cache-dir", str(tree.parent / f"{tree.name}-mypy-cache"), *files],
                         cwd=tree, capture_output=True, text=True, timeout=600)
    assert "error:" in res.stdout or res.returncode == 0, res.stdout + res.stderr
    added = _added_lines(patch_text)
    ours = [e for e in res.stdout.splitlines() if (m := re.match(r"(\S+?):(\d+): error", e))
            and int(m.group(2)) in added.get(m.group(1), set())]
    assert not ours, "\n".join(ours)


CHILD = r'''
import json, os, sys
import pytest
import vllm_stand_ins
vllm_stand_ins.install()
tree = sys.argv[1]


class Outcomes:
    def __init__(self):
        self.seen = {}

    def pytest_runtest_logreport(self, report):
        if report.when == "call" or report.outcome != "passed":
            self.seen[report.nodeid.split("::", 1)[1]] = report.outcome


outcomes = Outcomes()
rc = pytest.main(["-q", "-p", "no:cacheprovider", "-c", os.devnull, "--rootdir", tree,
                  os.path.join(tree, sys.argv[2])], plugins=[outcomes])

import torch
from vllm import ir
g = torch.Generator().manual_seed(0)
bits = {}
for dtype in (torch.float16, torch.bfloat16, torch.float32):
    x, r, w = (torch.randn(*s, generator=g).to(dtype) for s in ((4, 4096), (4, 4096), (4096,)))
    for name, args in (("rms_norm", (x, w, 1e-6)), ("rms_norm-no-weight", (x, None, 1e-6)),
                       ("fused_add_rms_norm", (x, r, w, 1e-6))):
        op = getattr(ir.ops, name.split("-")[0])
        got, want = op.impls["triton"].func_impl_fn(*args), op.impls["native"].impl_fn(*args)
        got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
        bits[f"{name}-{dtype}"] = [int((a != b).sum()) for a, b in zip(got, want)]
print(json.dumps({"rc": int(rc), "outcomes": outcomes.seen, "bits": bits}))
'''


@pytest.fixture(scope="module")
def patched(tree):
    import os

    return run_child(CHILD, str(tree), make_upstream.TEST_FILE,
                     env={"TRITON_INTERPRET": "1", "FASTPATH_VLLM_SITE": str(tree),
                          "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(tree), str(SITE)])})


def test_vllms_tests_in_the_patch_pass_here_and_none_is_skipped(patched):
    """Every test of the patch's file runs under the interpreter (a skip would mean the provider is unsupported
    here, and nothing was tested) and passes: the providers launch the kernel where ``supports_args`` accepts,
    never where it defers, the layer follows the priority, and Dynamo keeps the IR op in the graph."""
    outcomes = patched["outcomes"]
    assert patched["rc"] == 0 and set(outcomes.values()) == {"passed"}, outcomes
    names = {n.split("[", 1)[0] for n in outcomes}
    assert {"test_triton_provider", "test_triton_provider_defers_to_native", "test_rms_norm_layer_takes_the_priority",
            "test_compiled_layer_keeps_the_ir_op"} <= names, names


def test_the_providers_round_where_native_rounds(patched):
    """fp16 and bf16 at 4x4096: bit for bit native's values (the normalized row rounded to the weight's dtype before
    the product, as native rounds), with and without weight and residual. fp32 has no such rounding point: its last
    bit follows the order of the sum and the square root, within vLLM's tolerance (the patch's tests)."""
    bits = patched["bits"]
    assert all(sum(v) == 0 for k, v in bits.items() if "float32" not in k), bits
    assert len(bits) == 9
