"""Generate the kit's vLLM patch (``upstream/vllm_rms_norm_triton.patch``) from the kit's kernels.

    python tools/make_upstream.py           # (re)write the patch
    python tools/make_upstream.py --check   # exit 1 with a diff when the patch is out of date

The patch is a unified diff (``git apply`` / ``patch -p1``) against the files of the vLLM release the kit pins
(``constraints.txt``), read from its wheel in ``<venv>/vllm-site`` (``./kit setup`` installs it). It changes:

* ``vllm/kernels/triton/rms_norm.py`` (new): the kit's two forward kernels, vendored by name from
  ``fastpath_lib/rmsnorm/kernels.py`` and ``fastpath_lib/fused/kernels.py`` (code kept, identifiers renamed to
  vLLM's private style, comments re-wrapped to 88 columns, docstrings cut to their first sentence), and a launcher
  in the style of ``vllm/kernels/triton/activation.py``: ``torch.library.triton_op`` + ``wrap_triton``, metadata
  checks only (``supports_rms_norm_triton``), no fallback inside the op;
* ``vllm/kernels/triton/__init__.py``: imports it;
* ``vllm/config/kernel.py``: ``KernelConfig.rms_norm_backend`` (``"auto"``: vLLM's path, unchanged; ``"triton"``);
* ``vllm/model_executor/layers/layernorm.py``: ``RMSNorm`` decides once, at construction, whether the Triton path
  may run (the option, Triton, a CUDA platform), and ``forward_cuda`` takes it where ``supports_rms_norm_triton``
  accepts the call, vLLM's current path otherwise;
* ``tests/kernels/core/test_rms_norm_triton.py`` (new): vLLM-style tests (each path against native within vLLM's
  tolerance, token counts that reach the kernel, CUDA graphs), which need a CUDA device.

Nothing in the result names the kit. The generated files are formatted with ruff at vLLM's settings (88 columns), so
``ruff`` must be installed (the ``dev`` extra pins it). ``tests/test_vllm_upstream.py`` checks that the patch is
current, applies, passes ruff and mypy with vLLM's settings, and that the patched vLLM computes the reference's
values under Triton's interpreter.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "fastpath_lib"
TARGET = ROOT / "upstream" / "vllm_rms_norm_triton.patch"
WIDTH = 88
#: vLLM's ruff rules (its pyproject.toml, ``[tool.ruff.lint] select``), checked on every patched file.
RUFF_SELECT = "E,F,UP,B,ISC,SIM,I,G"

#: (kit source file, top-level names), in the new file's order.
VENDORED = (
    ("rmsnorm/kernels.py", ("INTERPRETED", "to_fp32", "round_to", "rms_norm_fwd_kernel")),
    ("fused/kernels.py", ("fused_add_rms_norm_fwd_kernel",)),
)
#: The kit's names and what vLLM's file calls them.
RENAMES = {
    "rms_norm_fwd_kernel": "_rms_norm_kernel",
    "fused_add_rms_norm_fwd_kernel": "_fused_add_rms_norm_kernel",
    "INTERPRETED": "_TRITON_INTERPRET",
    "to_fp32": "_to_fp32",
    "round_to": "_round_to",
}
#: Phrases of the kit's comments that point at the kit's own files.
PHRASES = {" (see launch.py)": "", " (checked by the launcher)": ""}

NEW_FILE = "vllm/kernels/triton/rms_norm.py"
TEST_FILE = "tests/kernels/core/test_rms_norm_triton.py"
#: The wheel's files the patch changes, and the new files, in the patch's order.
CHANGED = ("vllm/config/kernel.py", "vllm/kernels/triton/__init__.py", NEW_FILE,
           "vllm/model_executor/layers/layernorm.py", TEST_FILE)

HEADER = '''\
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""Triton RMSNorm and fused residual-add RMSNorm.

Selected by ``RMSNorm.forward_cuda`` when ``KernelConfig.rms_norm_backend`` is
"triton" and ``supports_rms_norm_triton`` accepts the call. Each program
normalizes a tile of rows in fp32; narrow rows share a program so that every
thread holds a whole 16-byte vector.
"""

import os

import torch
from torch import Tensor
from torch.library import triton_op, wrap_triton

from vllm.platforms import current_platform
from vllm.triton_utils import tl, triton

_SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
_MAX_HIDDEN_SIZE = 16384
_MIN_ELEMENTS_PER_THREAD = 8
_VECTOR_BYTES = 16
# Under Triton's CPU interpreter (TRITON_INTERPRET=1) the bf16 conversions are
# done on the bits, as torch does them; on a GPU they are Triton's own.
'''

LAUNCHER = '''

def supports_rms_norm_triton(
    x: Tensor, residual: Tensor | None, weight: Tensor | None
) -> bool:
    """Metadata only: contiguous rows of a supported dtype on this platform's
    device, at most 16384 wide; the residual and the weight in x's dtype."""
    if (
        x.device.type != current_platform.device_type
        or x.dtype not in _SUPPORTED_DTYPES
        or x.ndim == 0
        or not x.is_contiguous()
    ):
        return False
    hidden_size = x.shape[-1]
    if not 0 < hidden_size <= _MAX_HIDDEN_SIZE:
        return False
    if weight is not None and (
        weight.dtype != x.dtype
        or weight.shape != (hidden_size,)
        or not weight.is_contiguous()
    ):
        return False
    return residual is None or (
        residual.shape == x.shape
        and residual.dtype == x.dtype
        and residual.is_contiguous()
    )


def _launch_config(x: Tensor) -> tuple[int, int, int, int]:
    """Block size, warps, rows per program and vector width for x's rows."""
    hidden_size = x.shape[-1]
    block_size = triton.next_power_of_2(hidden_size)
    num_warps = 16 if block_size >= 8192 else 8 if block_size >= 2048 else 4
    rows_per_program = max(
        1, _MIN_ELEMENTS_PER_THREAD * 32 * num_warps // block_size
    )
    vec = _VECTOR_BYTES // x.element_size()
    return block_size, num_warps, rows_per_program, vec if hidden_size % vec == 0 else 1


@triton_op("vllm::rms_norm_triton", mutates_args=())
def rms_norm_triton(x: Tensor, weight: Tensor | None, epsilon: float) -> Tensor:
    output = torch.empty_like(x)
    if x.numel() == 0:
        return output
    hidden_size = x.shape[-1]
    num_rows = x.numel() // hidden_size
    block_size, num_warps, rows_per_program, vec = _launch_config(x)

    def grid(meta):
        return (triton.cdiv(num_rows, rows_per_program),)

    wrap_triton(_rms_norm_kernel)[grid](
        x,
        x if weight is None else weight,
        output,
        hidden_size,
        hidden_size,
        num_rows,
        hidden_size,
        epsilon,
        HAS_WEIGHT=weight is not None,
        ROWS_PER_PROGRAM=rows_per_program,
        BLOCK_SIZE=block_size,
        VEC=vec,
        num_warps=num_warps,
    )
    return output


@triton_op("vllm::fused_add_rms_norm_triton", mutates_args=("x", "residual"))
def fused_add_rms_norm_triton(
    x: Tensor, residual: Tensor, weight: Tensor | None, epsilon: float
) -> None:
    """Writes the normalized sum into x and the sum into residual."""
    if x.numel() == 0:
        return
    hidden_size = x.shape[-1]
    num_rows = x.numel() // hidden_size
    block_size, num_warps, rows_per_program, vec = _launch_config(x)

    def grid(meta):
        return (triton.cdiv(num_rows, rows_per_program),)

    wrap_triton(_fused_add_rms_norm_kernel)[grid](
        x,
        residual,
        x if weight is None else weight,
        x,
        residual,
        hidden_size,
        hidden_size,
        hidden_size,
        hidden_size,
        num_rows,
        hidden_size,
        epsilon,
        HAS_WEIGHT=weight is not None,
        ROWS_PER_PROGRAM=rows_per_program,
        BLOCK_SIZE=block_size,
        VEC=vec,
        num_warps=num_warps,
    )
'''

#: Edits of the wheel's files: (file, anchor that must occur once, replacement).
EDITS = (
    ("vllm/config/kernel.py", '''    moe_backend: MoEBackend = "auto"
''', '''    rms_norm_backend: Literal["auto", "triton"] = "auto"
    """Kernel for RMSNorm (and its fused residual add) on CUDA:
    - "auto": the vLLM C kernel (the default).
    - "triton": vLLM's Triton kernel for contiguous fp16/bf16/fp32 rows of at
      most 16384 elements with the weight in the input dtype, the vLLM C kernel
      for other calls.
    Takes effect where the rms_norm custom op is enabled: with Inductor, custom
    ops are disabled by default (add "+rms_norm" to
    CompilationConfig.custom_ops)."""

    moe_backend: MoEBackend = "auto"
'''),
    ("vllm/kernels/triton/__init__.py", '''from . import activation

__all__ = ["activation"]
''', '''from . import activation, rms_norm

__all__ = ["activation", "rms_norm"]
'''),
    ("vllm/model_executor/layers/layernorm.py", '''from vllm import envs, ir
from vllm.logger import init_logger
from vllm.model_executor.custom_op import CustomOp
from vllm.model_executor.determinism.batch_invariant import rms_norm_batch_invariant
from vllm.model_executor.utils import set_weight_attrs
''', '''from vllm import envs, ir
from vllm.config import get_current_vllm_config_or_none
from vllm.kernels.triton.rms_norm import (
    fused_add_rms_norm_triton,
    rms_norm_triton,
    supports_rms_norm_triton,
)
from vllm.logger import init_logger
from vllm.model_executor.custom_op import CustomOp
from vllm.model_executor.determinism.batch_invariant import rms_norm_batch_invariant
from vllm.model_executor.utils import set_weight_attrs
from vllm.platforms import current_platform
from vllm.triton_utils import HAS_TRITON
'''),
    ("vllm/model_executor/layers/layernorm.py", '''        self.pass_weight = self.has_weight
        self.pass_weight_add = self.has_weight
''', '''        self.pass_weight = self.has_weight
        self.pass_weight_add = self.has_weight

        vllm_config = get_current_vllm_config_or_none()
        self.use_triton = (
            vllm_config is not None
            and vllm_config.kernel_config.rms_norm_backend == "triton"
            and HAS_TRITON
            and current_platform.is_cuda()
        )
'''),
    ("vllm/model_executor/layers/layernorm.py", '''                residual=residual,
            )

        return self.forward_native(x, residual)
''', '''                residual=residual,
            )

        if self.use_triton and self.variance_size_override is None:
            pass_weight = (
                self.pass_weight_add if residual is not None else self.pass_weight
            )
            weight = self.weight.data if pass_weight else None
            if supports_rms_norm_triton(x, residual, weight):
                if residual is None:
                    return rms_norm_triton(x, weight, self.variance_epsilon)
                fused_add_rms_norm_triton(x, residual, weight, self.variance_epsilon)
                return x, residual

        return self.forward_native(x, residual)
'''),
)

TESTS = '''\
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
import pytest
import torch

from tests.kernels.utils import opcheck
from vllm import ir
from vllm.config import KernelConfig, VllmConfig, set_current_vllm_config
from vllm.model_executor.layers.layernorm import RMSNorm
from vllm.platforms import current_platform
from vllm.utils.torch_utils import set_random_seed

DTYPES = [torch.half, torch.bfloat16, torch.float]
# Decode batches and prefill: every token count reaches the Triton kernel.
NUM_TOKENS = [1, 7, 83, 4096]
HIDDEN_SIZES = [8, 768, 769, 5120, 8192, 16384]
CUDA_GRAPH_BATCH_SIZES = [1, 2, 8, 32]
EPSILON = 1e-6

pytestmark = pytest.mark.skipif(
    not current_platform.is_cuda(), reason="The Triton RMSNorm runs on CUDA only."
)


def _layer(hidden_size: int, dtype: torch.dtype, backend: str = "triton") -> RMSNorm:
    config = VllmConfig(kernel_config=KernelConfig(rms_norm_backend=backend))
    with set_current_vllm_config(config):
        layer = RMSNorm(hidden_size, eps=EPSILON).to(dtype=dtype, device="cuda")
    layer.weight.data.normal_(mean=1.0, std=0.1)
    return layer


def _native(layer: RMSNorm, x: torch.Tensor, residual: torch.Tensor | None):
    weight = layer.weight.data
    if residual is None:
        return ir.ops.rms_norm.impls["native"].impl_fn(x, weight, EPSILON)
    return ir.ops.fused_add_rms_norm.impls["native"].impl_fn(
        x, residual, weight, EPSILON
    )


def _assert_close(out, ref, residual: torch.Tensor | None) -> None:
    op = ir.ops.rms_norm if residual is None else ir.ops.fused_add_rms_norm
    outs = (out,) if residual is None else out
    refs = (ref,) if residual is None else ref
    for o, r in zip(outs, refs, strict=True):
        torch.testing.assert_close(o, r, **op.get_tolerance(o.dtype))


@pytest.mark.parametrize("num_tokens", NUM_TOKENS)
@pytest.mark.parametrize("hidden_size", HIDDEN_SIZES)
@pytest.mark.parametrize("add_residual", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
@torch.inference_mode()
def test_rms_norm_triton(
    num_tokens: int, hidden_size: int, add_residual: bool, dtype: torch.dtype
) -> None:
    set_random_seed(0)
    layer = _layer(hidden_size, dtype)
    assert layer.use_triton
    x = torch.randn(num_tokens, hidden_size, dtype=dtype, device="cuda")
    residual = torch.randn_like(x) if add_residual else None
    ref = _native(layer, x, residual)
    res = None if residual is None else residual.clone()
    out = layer.forward_cuda(x.clone(), res)
    _assert_close(out, ref, residual)


@pytest.mark.parametrize("add_residual", [False, True])
@torch.inference_mode()
def test_rms_norm_triton_defers_to_vllm(add_residual: bool) -> None:
    """A weight in another dtype is not the Triton kernel's: vLLM's path."""
    set_random_seed(0)
    layer = _layer(4096, torch.float)
    x = torch.randn(7, 4096, dtype=torch.bfloat16, device="cuda")
    residual = torch.randn_like(x) if add_residual else None
    ref = _native(layer, x, residual)
    res = None if residual is None else residual.clone()
    _assert_close(layer.forward_cuda(x.clone(), res), ref, residual)


@pytest.mark.parametrize("batch_size", CUDA_GRAPH_BATCH_SIZES)
@pytest.mark.parametrize("add_residual", [False, True])
@torch.inference_mode()
def test_rms_norm_triton_cuda_graph(batch_size: int, add_residual: bool) -> None:
    """Decode under CUDA graphs: captured once, replayed on new inputs."""
    set_random_seed(0)
    layer = _layer(4096, torch.bfloat16)
    x = torch.randn(batch_size, 4096, dtype=torch.bfloat16, device="cuda")
    residual = torch.randn_like(x) if add_residual else None
    static_x, static_res = x.clone(), None if residual is None else residual.clone()
    layer.forward_cuda(static_x.clone(), None if residual is None else residual.clone())
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = layer.forward_cuda(static_x, static_res)
    new_x = torch.randn_like(x)
    new_res = None if residual is None else torch.randn_like(x)
    static_x.copy_(new_x)
    if static_res is not None and new_res is not None:
        static_res.copy_(new_res)
    graph.replay()
    _assert_close(out, _native(layer, new_x, new_res), new_res)


@pytest.mark.parametrize("dtype", DTYPES)
def test_rms_norm_triton_opcheck(dtype: torch.dtype) -> None:
    x = torch.randn(83, 768, dtype=dtype, device="cuda")
    weight = torch.randn(768, dtype=dtype, device="cuda")
    opcheck(torch.ops.vllm.rms_norm_triton, (x, weight, EPSILON))
    opcheck(
        torch.ops.vllm.fused_add_rms_norm_triton,
        (x.clone(), torch.randn_like(x), weight, EPSILON),
    )
'''


def _segments(rel: str, names: tuple[str, ...]) -> list[str]:
    """The source of each named top-level function or assignment of ``fastpath_lib/<rel>`` (decorators and comments
    included; a docstring cut to its first sentence)."""
    text = (PKG / rel).read_text()
    lines = text.splitlines(keepends=True)
    found = {}
    for node in ast.parse(text).body:
        if not isinstance(node, (ast.FunctionDef, ast.Assign, ast.AnnAssign)):
            continue
        name = node.name if isinstance(node, ast.FunctionDef) else \
            (node.targets[0] if isinstance(node, ast.Assign) else node.target).id
        if name not in names:
            continue
        start = (node.decorator_list[0].lineno if getattr(node, "decorator_list", None) else node.lineno) - 1
        body = lines[start:node.end_lineno]
        doc = ast.get_docstring(node) if isinstance(node, ast.FunctionDef) else None
        if doc is not None:
            d = node.body[0]
            indent = " " * d.col_offset
            first = re.split(r"(?<=\.)\s", " ".join(doc.split("\n\n")[0].split()), maxsplit=1)[0]
            wrapped = textwrap.wrap(first, WIDTH - len(indent) - 6)
            new = [f'{indent}"""{wrapped[0]}' + ('"""\n' if len(wrapped) == 1 else "\n")]
            new += [f"{indent}{w}\n" for w in wrapped[1:-1]]
            new += [f'{indent}{wrapped[-1]}"""\n'] if len(wrapped) > 1 else []
            body = body[:d.lineno - 1 - start] + new + body[d.end_lineno - start:]
        found[name] = "".join(body).rstrip() + "\n"
    missing = [n for n in names if n not in found]
    if missing:
        raise SystemExit(f"fastpath_lib/{rel} has no top-level {', '.join(missing)}: update tools/make_upstream.py")
    return [found[n] for n in names]


def _fit_comments(src: str) -> str:
    """Comments re-wrapped to :data:`WIDTH`: a trailing comment that makes its line too long moves above the line,
    and a block of comment lines with one too long is re-wrapped as one paragraph."""
    out: list[str] = []
    block: list[str] = []  # consecutive comment lines of one indent

    def flush() -> None:
        if block and max(map(len, block)) > WIDTH:
            indent = block[0][: len(block[0]) - len(block[0].lstrip())]
            words = " ".join(b.strip()[2:] for b in block)
            out.extend(textwrap.wrap(words, WIDTH - len(indent) - 2, initial_indent=f"{indent}# ",
                                     subsequent_indent=f"{indent}# "))
        else:
            out.extend(block)
        block.clear()

    for line in src.splitlines():
        code, sep, comment = line.partition("  # ")
        stripped = line.lstrip()
        indent = line[: len(line) - len(stripped)]
        if stripped.startswith("# ") and (not block or block[0].startswith(indent + "#")):
            block.append(line)
            continue
        flush()
        if stripped.startswith("# "):
            block.append(line)
        elif sep and len(line) > WIDTH and '"' not in code:
            out.extend(textwrap.wrap(comment, WIDTH - len(indent) - 2, initial_indent=f"{indent}# ",
                                     subsequent_indent=f"{indent}# "))
            out.append(code.rstrip())
        else:
            out.append(line)
    flush()
    return "\n".join(out) + "\n"


def _ruff(args: list[str], text: str, filename: str) -> str:
    """``ruff`` at vLLM's settings (isolated from the kit's pyproject) on ``text``; its stdout."""
    cmd = [sys.executable, "-m", "ruff", *args, "--isolated", "--line-length", str(WIDTH), "--target-version",
           "py310", "--config", "lint.isort.known-first-party = ['vllm', 'tests']", "--stdin-filename", filename, "-"]
    try:
        res = subprocess.run(cmd, input=text, capture_output=True, text=True, check=False)
    except FileNotFoundError as e:  # pragma: no cover
        raise SystemExit(f"ruff is needed to generate the patch ({e}): pip install -e '.[dev]'") from None
    if res.returncode != 0 and "No module named ruff" in res.stderr:
        raise SystemExit("ruff is needed to generate the patch: pip install -e '.[dev]' (constraints.txt pins it)")
    if res.returncode != 0:
        raise SystemExit(f"ruff {' '.join(args)} failed on {filename}:\n{res.stdout}{res.stderr}")
    return res.stdout


def new_kernel_file() -> str:
    """``vllm/kernels/triton/rms_norm.py``: the kit's kernels renamed and re-wrapped, with the launcher."""
    parts = [HEADER]
    for rel, names in VENDORED:
        for seg in _segments(rel, names):
            parts += ["\n\n" if seg.startswith(("def", "@")) else "\n", seg]
    text = "".join(parts) + LAUNCHER
    for old, new in {**RENAMES}.items():
        text = re.sub(rf"\b{old}\b", new, text)
    for old, new in PHRASES.items():
        text = text.replace(old, new)
    text = _fit_comments(text)
    text = _ruff(["check", "--select", "I", "--fix", "--exit-zero", "--quiet"], text, NEW_FILE) or text
    return _ruff(["format"], text, NEW_FILE)


def vllm_site() -> Path:
    """The pinned vLLM wheel's files (as :func:`fastpath_lib.vllm_plugin.vllm_site`, without importing the kit)."""
    return Path(os.environ.get("FASTPATH_VLLM_SITE") or Path(sys.prefix) / "vllm-site")


def patched_files(site: Path | None = None) -> dict[str, tuple[str, str]]:
    """Each file of :data:`CHANGED`: ``(text in the wheel or "" for a new file, text after the patch)``."""
    site = site or vllm_site()
    if not (site / "vllm").is_dir():
        raise SystemExit(f"vLLM's wheel is not in {site}: ./kit setup installs it (the patch is made against it)")
    files = {}
    for rel in CHANGED:
        old = "" if rel in (NEW_FILE, TEST_FILE) else (site / rel).read_text()
        files[rel] = [old, old]
    for rel, anchor, replacement in EDITS:
        count = files[rel][1].count(anchor)
        if count != 1:
            raise SystemExit(f"{rel} of the pinned vLLM has the anchor {count} times, not once: update "
                             f"tools/make_upstream.py\n{anchor}")
        files[rel][1] = files[rel][1].replace(anchor, replacement)
    files[NEW_FILE][1] = new_kernel_file()
    files[TEST_FILE][1] = _ruff(["format"], _ruff(["check", "--select", "I", "--fix", "--exit-zero", "--quiet"],
                                                  TESTS, TEST_FILE) or TESTS, TEST_FILE)
    return {rel: (old, new) for rel, (old, new) in files.items()}


def render(site: Path | None = None) -> str:
    """The whole patch, in git's format (``git apply`` and ``patch -p1`` take it)."""
    out = []
    for rel, (old, new) in patched_files(site).items():
        out.append(f"diff --git a/{rel} b/{rel}\n")
        if not old:
            out.append("new file mode 100644\n")
        body = list(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                         "/dev/null" if not old else f"a/{rel}", f"b/{rel}", n=3))
        out += [line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in body]
    return "".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 with a diff when the patch is out of date")
    args = ap.parse_args(argv)
    new = render()
    if args.check:
        old = TARGET.read_text() if TARGET.exists() else ""
        if old != new:
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True), str(TARGET),
                                                       "generated"))
            return 1
        return 0
    TARGET.parent.mkdir(exist_ok=True)
    TARGET.write_text(new)
    print(f"wrote {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
