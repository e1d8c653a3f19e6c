# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     notebook_metadata_filter: fastpath,-jupytext.text_representation.jupytext_version
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 09 · Upstream: sharded tensors, vLLM's layers, and the review
#
# Lessons 01-08 built two ops the kit serves itself. A maintainer upstream asks more of them: that they work on the
# sharded tensors tensor parallelism hands them, that they take the form the target project uses for kernels, and
# that the PR reads the way its reviewers read.
#
# **What you will do**: run RMSNorm and the fused op on DTensors (a one-rank group on this CPU) and read the
# placements of every result; then read where a kernel goes in vLLM and the patch the kit generates for it, the
# way a vLLM maintainer reads it; and where a kernel enters PyTorch's eager ops, and the patch the kit generates there.
#
# **What you need**: lessons 01-03 and 08; this CPU (`torch.distributed` with the `gloo` backend, no GPU).
#
# **Time**: about 45 minutes.
#
# **What you will learn**
# - what a contract for sharded inputs adds: the placements that run without communication, the placement of every
#   result (gradients included), and what happens to every other placement;
# - why the row threshold applies per rank;
# - where a kernel enters vLLM (a provider of an IR op, chosen by the platform's priority; an op registered with a
#   fake implementation; a plugin loaded in every process, acting only when asked), and why a compiler needs the
#   registered op rather than a raw launch;
# - where a kernel enters PyTorch's eager ops (`torch/_native`: an override with a `cond` and an `impl`, ATen the
#   fallthrough), read from the installed torch, and how to try the kit's kernels there before proposing them;
# - how a maintainer reads such a PR: the target's direction (its deprecations), its patterns, its linters at its
#   settings, the decode path under CUDA graphs, what a plugin may not do at start-up, and the tests that only the
#   reference's extremes would fail.

# %% tags=["nbval-ignore-output"]
import torch
import fastpath_lib
# no CUDA: run the kernels in Triton's CPU interpreter (a no-op on a GPU)
fastpath_lib.use_interpreter()
from fastpath_lib import runtime

DEVICE = runtime.lesson_device()  # "cuda" on a GPU, else "cpu"; prints the mode and versions
_ = torch.manual_seed(0)

import torch.nn.functional as F
from fastpath_lib.fused import reference
from fastpath_lib.rmsnorm.predicate import limits_for

ROWS = 2 * limits_for(DEVICE).min_rows  # past the row threshold on any device

# %% [markdown]
# ## A sharded contract: RMSNorm on DTensors
#
# Under tensor or sequence parallelism an activation reaching the norm is a DTensor: one global tensor, stored as a
# shard per rank, with a *placement* saying how (`Shard(0)`: each rank holds some rows; `Replicate()`: each holds all
# of it). A contract for sharded inputs adds three things to the plain one:
#
# - **which placements run without communication.** RMSNorm reduces each row over its last dim only, so a row shard
#   (`Shard` on a leading dim) with a replicated weight is a whole problem on every rank: the op runs on the local
#   rows and the output keeps the placement;
# - **the placement of every result, gradients included.** `dw` sums over rows, so each rank holds a partial sum
#   (`Partial("sum")`), all-reduced when it is read;
# - **what happens to every other placement.** A hidden-dim shard must be gathered (or all-to-all'ed) to rows first:
#   DTensor does that from the rule, at a communication cost the rule makes visible.
#
# The kit's rule is `fastpath_lib/rmsnorm/sharding.py` (`register_sharding` on both ops and their backwards).
# Registering it is process-wide, so importing the kit does not: the first DTensor call (or `explain`) does. A
# one-rank group here (`tests/rmsnorm/test_sharding.py` runs two ranks):

# %%
import tempfile

import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard, distribute_tensor
from fastpath_lib.rmsnorm import sharding

backend = "nccl" if DEVICE == "cuda" else "gloo"
dist.init_process_group(backend, init_method=f"file://{tempfile.mkdtemp()}/pg", rank=0, world_size=1)
mesh = init_device_mesh(DEVICE, (1,))
x, w = torch.randn(ROWS, 64, device=DEVICE), torch.rand(64, device=DEVICE) + 0.5
print("rule registered before the first DTensor call:", sharding.registered())

# %% [markdown]
# A row shard: the output and `dx` keep `Shard(0)`, `dw` is a partial sum, and the route is decided on the local
# shard, as `explain()` says for a DTensor:

# %%
dx = distribute_tensor(x, mesh, [Shard(0)]).requires_grad_()
dw = distribute_tensor(w, mesh, [Replicate()]).requires_grad_()
with fastpath_lib.record_routes() as fwd, fastpath_lib.record_routes("backward") as bwd:
    out = fastpath_lib.rms_norm(dx, [64], dw)
    out.sum().backward()
print("output", out.placements, "| dx", dx.grad.placements, "| dw", dw.grad.placements)
print("routes on the local shard: forward", dict(fwd), "| backward", dict(bwd))
print(fastpath_lib.explain(dx, [64], dw))

# %% [markdown]
# A hidden-dim shard. In torch 2.13 `F.rms_norm` raises on it (its decomposition adds `eps` in place to a
# partial mean); through the rule DTensor gathers the rows first, and the result is the reference's. The route is
# decided on the gathered shard each rank's call receives, and `explain()` finds that shard with DTensor's own
# sharding propagation, without communication:

# %%
hidden, rw = distribute_tensor(x, mesh, [Shard(1)]), distribute_tensor(w, mesh, [Replicate()])
try:
    F.rms_norm(hidden, [64], rw)
    print("F.rms_norm on a hidden-dim shard: runs")
except RuntimeError as e:
    print("F.rms_norm on a hidden-dim shard raises:", str(e).splitlines()[0][:110])
with fastpath_lib.record_routes() as routes:
    got = fastpath_lib.rms_norm(hidden, [64], rw)
print("the kit's op:", got.placements, "| matches F.rms_norm on the full tensor:",
      torch.allclose(got.full_tensor(), F.rms_norm(x, [64], w), atol=1e-5), "| routes", dict(routes))
print(fastpath_lib.explain(hidden, [64], rw))

# %% [markdown]
# The fused op has the same rule, with `x` and `residual` placed alike. Its in-place form adds one clause: DTensor
# cannot write a redistributed copy back into the caller's tensors, so only placements the rule keeps take the
# sharded route; a hidden-dim shard takes the composite, which writes each shard where it is:

# %%
for placement in (Shard(0), Shard(1)):
    xd, rd = (distribute_tensor(t, mesh, [placement]) for t in (x, torch.randn_like(x)))
    want = reference.native(xd.full_tensor(), rd.full_tensor(), w, None)
    with fastpath_lib.record_routes() as routes:
        fastpath_lib.fused_add_rms_norm_(xd, rd, rw)
    print(f"{placement!r:14} in place: routes {dict(routes)}, x still {xd.placements},",
          "matches the composite:", torch.allclose(xd.full_tensor(), want[0], atol=1e-5))
dist.destroy_process_group()

# %% [markdown]
# One consequence to state in a PR: the row threshold applies per rank. A call of 2 x threshold rows takes the kernel
# whole, but sharded over 4 ranks each local shard has half the threshold and falls back, on every rank.

# %% [markdown]
# ## Where a kernel enters vLLM
#
# vLLM's norm is a layer, `RMSNorm` in `vllm/model_executor/layers/layernorm.py`, whose forward calls vLLM's IR ops
# `rms_norm` and `fused_add_rms_norm` (`vllm/ir/ops/layernorm.py`: the native function is the contract). Each op has
# providers, registered with `register_impl(name, supported=..., supports_args=...)` (`vllm_c`, vLLM's C kernel; `oink`;
# `aiter`; and in `vllm/kernels/triton/` Triton kernels such as `activation.py`'s), and a priority list chooses among
# them: the platform's default unless configured (section 4 of the maintainer's reading below prints vLLM's defaults
# from the wheel). Under Inductor the IR op stays in the traced graph, where vLLM's fusion
# passes (norm + quant, all-reduce + norm) match it, and a lowering pass then picks the provider. A project outside vLLM
# adds a provider from a plugin that vLLM loads through the `vllm.general_plugins` entry point, once in every process it
# starts (a flag makes a second call in the same process return at once; vLLM's docstring asks that plugins load many
# times without causing issues): a plugin's register function must be idempotent, must never raise, must not initialise
# CUDA, and must change nobody's vLLM unasked. (Read from the vLLM 0.33 wheel the kit pins. That release is removing the
# IR itself, providers included: section 1 reads its notice.)
#
# Whatever the layer, the kernel itself reaches a compiled graph only through a registered op: an opaque one with a
# fake implementation (`direct_register_custom_op(..., fake_impl=...)` in vLLM, `torch.library.custom_op` and
# `register_fake` in torch), or a `torch.library.triton_op` whose launch goes through `wrap_triton`, which lets the
# compiler see the kernel itself. A compiler traces a model on FakeTensors, which have shapes, dtypes and strides but
# no data pointer, so a launcher that reads its tensors' data cannot run on them. Traced with `make_fx` on
# FakeTensors (torch's tracer, which vLLM's compilation passes use on their own graphs; the model itself vLLM traces
# with Dynamo), the kit's raw forward launch fails where it reads a data pointer, and the kit's op, an opaque one,
# becomes one call in the graph:

# %%
from torch.fx.experimental.proxy_tensor import make_fx

from fastpath_lib.rmsnorm import kernels

x, r = torch.randn(ROWS, 64, device=DEVICE), torch.randn(ROWS, 64, device=DEVICE)
try:
    make_fx(lambda x, w: kernels.forward(x, w, 1e-6), tracing_mode="fake")(x, w)
except RuntimeError as exc:
    why = "it reads a data pointer" if "data pointer" in str(exc) else str(exc).splitlines()[0][:80]
    print(f"the raw launch, traced on FakeTensors, raises {type(exc).__name__}: {why}")
graph = make_fx(lambda x, r, w: fastpath_lib.fused_add_rms_norm(x, r, w), tracing_mode="fake")(x, r, w)
print("traced on FakeTensors:", [str(n.target) for n in graph.graph.nodes if n.op == "call_function"])

# %% [markdown]
# What the trace cannot know (pointer alignment, overlap, and the row count when the compiler keeps it symbolic) is
# decided inside the op on every call, which takes the composite when a check fails. A check that runs at trace time
# reads only what a FakeTensor knows.
#
# The change a learner proposes to vLLM cannot import the kit. `tools/make_upstream.py` generates it in `upstream/`, a
# patch against the pinned vLLM release's files, from the files written as vLLM would ship them under `upstream/vllm/`:
# a new `vllm/kernels/triton/layernorm.py` with `"triton"` providers of both IR ops (one kernel, a `triton_op` launcher
# for each op, metadata checks only), imported beside `activation.py`, and its tests. No config field and no layer
# change: the priority chooses the provider. `tests/upstream/test_vllm_upstream.py` checks that it is current, applies, passes
# vLLM's ruff and mypy settings, and that its tests pass under the interpreter. The files it changes, and its lines
# added and removed:

# %%
patch = (runtime.ROOT / "upstream" / "vllm_rms_norm_triton.patch").read_text()
for chunk in patch.split("diff --git a/")[1:]:
    lines = chunk.splitlines()
    added = sum(line.startswith("+") and not line.startswith("+++") for line in lines)
    removed = sum(line.startswith("-") and not line.startswith("---") for line in lines)
    print(f"{chunk.split(' ', 1)[0]:48} +{added:<4} -{removed}")

# %% [markdown]
# ## Where a kernel enters PyTorch's eager ops
#
# torch 2.13 ships `torch/_native`, a registry that overrides eager ATen ops with kernels written in a DSL:
# `register_op_override(backend, "aten", op, dispatch_key, cond, impl)`. `cond` has the op's own signature and
# decides per call (an eligibility predicate), `impl` is the fast path, and when `cond` declines, the call goes to the
# next override of that op, in registration order, or to ATen's kernel. Overrides sit at a backend dispatch key, below
# autograd: ATen's derivative formula still runs, and it calls the backward op, which has its own override. What the
# installed torch declares (its sources' override calls; where a call passes a variable for the op or the key, the
# variable's name), what this process has registered, and the keys it refuses:

# %%
from torch._native import registry

from fastpath_lib.rmsnorm import native_override

for d in native_override.declared_overrides():
    print(f"declared    {d['dsl']:8s} {d['op']:26s} {d['dispatch_key']:13s} {d['file']}")
for (op, key), nodes in sorted(registry._graphs.items()):
    print(f"registered  aten::{op} at {key}: {[n.dsl_name for n in nodes if n.active]}")
print("refused keys:", sorted(registry._DISALLOWED_DISPATCH_KEYS))

# %% [markdown]
# `F.rms_norm` reaches `aten::_fused_rms_norm`, which quack's CuTeDSL RMSNorm overrides for the CUDA key. torch
# registers that override only where `nvidia-cutlass-dsl` and `apache-tvm-ffi` are installed and the DSL's version is
# one `cutedsl_utils` lists as known-good (`TORCH_NATIVE_SKIP_VERSION_CHECK=1` waives the version); its `cond` then
# takes calls on GPUs whose compute capability's major version is 9 or 10 (sm_90, sm_100, sm_103) in fp16, bf16 or
# fp32 with a weight of the input's dtype, among other shape conditions. There plain `F.rms_norm` may already run
# quack's kernel, and that is the baseline a Triton kernel meets. A wheel without CUDA or without those packages
# registers only what needs no DSL, as the list above shows for this machine.
#
# The kit's kernels enter the same way at run time, without patching torch: `native_override.register(key)` installs
# the kit's predicate as `cond` and its launchers as `impl` (after torch's own overrides, so quack keeps its calls),
# and removes them when the block ends. Plain `F.rms_norm` then takes the kit's kernel inside the predicate and ATen's
# outside it (4 rows: below the row threshold):

# %%
with native_override.register(DEVICE.upper()), fastpath_lib.record_routes() as routes:
    inside, outside = F.rms_norm(x, [64], w), F.rms_norm(x[:4], [64], w)
    print("registered:", native_override.registered_overrides(), "| calls the kit's kernel took:", dict(routes))
print("ATen's values:", torch.allclose(inside, F.rms_norm(x, [64], w), atol=1e-6),
      torch.allclose(outside, F.rms_norm(x[:4], [64], w), atol=1e-6))
print("after the block:", native_override.registered_overrides())

# %% [markdown]
# The change a learner proposes upstream is that override, in torch's own tree. `tools/make_pytorch_native.py`
# writes it in `upstream/` from the kit's kernels: a patch against the installed `torch/_native/` that adds the kernels
# (the forward also stores the `rstd` that `_fused_rms_norm` returns), a `cond` whose every refusal says why, the
# registration after quack's, and tests in PyTorch's form that register the override for the CPU key and run under
# Triton's interpreter; with it, the PR note in PyTorch's template. `tests/rmsnorm/test_pytorch_native.py` checks that the
# patch is current, applies, passes ruff at PyTorch's settings and that its tests pass. The files it changes:

# %%
torch_patch = (runtime.ROOT / "upstream" / "pytorch_native_rms_norm_triton.patch").read_text()
for chunk in torch_patch.split("diff --git a/")[1:]:
    lines = chunk.splitlines()
    added = sum(line.startswith("+") and not line.startswith("+++") for line in lines)
    removed = sum(line.startswith("-") and not line.startswith("---") for line in lines)
    print(f"{chunk.split(' ', 1)[0]:48} +{added:<4} -{removed}")

# %% [markdown]
# ## How a maintainer reads the PR
#
# A maintainer reads a PR in the order it can fail: whether the target still wants the mechanism it uses, whether it
# reads like the target's own code and passes the target's linters, whether it is faster than what the target runs
# by default where users run it (decode, under CUDA graphs), whether it can hurt the host at start-up, and whether
# its tests would have caught a silent wrong result. Each reading below runs on this CPU, against the vLLM wheel the
# kit pins where `./kit setup` installed it.
#
# ### 1. The target's direction first
#
# Before writing for a mechanism, read whether the target keeps it: its deprecations say so. This cell finds the
# installed vLLM and reads the option that selects IR providers from its source (vLLM's config needs `pydantic`,
# which the kit's wheel install leaves out, so the file is parsed rather than imported):

# %%
import ast
import importlib.metadata
import importlib.util
import inspect
import sys
from pathlib import Path

from fastpath_lib import vllm_plugin

SITE = vllm_plugin.vllm_site()  # where ./kit setup installs vLLM's wheel
if SITE.is_dir() and str(SITE) not in sys.path:
    sys.path.append(str(SITE))
spec = importlib.util.find_spec("vllm")
VLLM = Path(spec.origin).parent if spec else None


def attribute_doc(rel, cls, attr):
    """The docstring under ``cls.attr`` in vLLM's file ``rel``, read from the installed source."""
    body = next(n for n in ast.parse((VLLM / rel).read_text()).body if getattr(n, "name", "") == cls).body
    i = next(i for i, n in enumerate(body) if getattr(getattr(n, "target", None), "id", "") == attr)
    return inspect.cleandoc(body[i + 1].value.value)

# %% [markdown]
# The option's own documentation, as the installed release states it:

# %%
if VLLM is None:
    print(f"vLLM is not installed (nor in {SITE}; ./kit setup puts it there): this reading is skipped")
else:
    print("vLLM", importlib.metadata.version("vllm"), "| KernelConfig.ir_op_priority says:\n")
    print(attribute_doc("config/kernel.py", "KernelConfig", "ir_op_priority"))

# %% [markdown]
# What goes is the IR itself, not only the option: "vLLM IR is being removed", and kernels will be selected "as for
# other custom ops". An IR provider therefore targets a subsystem on its way out. It serves the pinned release, and
# whether new IR providers land before the IR goes is for the IR's maintainers to decide; the PR note says so rather
# than leave a reviewer to find it. Within that window the patch adds a provider and no option of its own: a
# `KernelConfig` field for one op, or a short-circuit in `RMSNorm.forward_cuda`, would be one more selector beside the
# one being removed, and a path that puts its own op in the graph where the IR op was would silently turn vLLM's norm
# fusions off.
#
# ### 2. Its own patterns
#
# Next, the target's own code for the same kind of change. vLLM keeps Triton providers in `vllm/kernels/triton/`,
# and `activation.py` there is one kernel, its launcher and its `register_impl`. The patch's new file should read
# like it: the same header,
# the launcher a `torch.library.triton_op` that launches through `wrap_triton`, the platform asked through
# `current_platform`, never `torch.cuda`:

# %% tags=["nbval-ignore-output"]
def new_file(rel):
    """The text of a file the patch adds (its lines after the hunk header, without the '+')."""
    chunk = patch.split(f"+++ b/{rel}\n", 1)[1].split("\ndiff --git ", 1)[0]
    return "".join(line[1:] + "\n" for line in chunk.splitlines()[1:])


FEATURES = {"SPDX header": lambda s: s.startswith("# SPDX-License-Identifier: Apache-2.0"),
            "@triton.jit kernels": lambda s: s.count("@triton.jit"),
            "@triton_op launchers": lambda s: s.count("@triton_op("),
            "launches via wrap_triton": lambda s: s.count("wrap_triton(_"),
            "asks current_platform": lambda s: "current_platform." in s,
            "touches torch.cuda": lambda s: "torch.cuda" in s,
            "registers an IR provider": lambda s: s.count('register_impl(\n    "triton"'),
            "lines / longest": lambda s: f"{len(s.splitlines())} / {max(map(len, s.splitlines()))}"}
files = {"the patch's layernorm.py": new_file("vllm/kernels/triton/layernorm.py")}
if VLLM is not None:
    files["vLLM's activation.py"] = (VLLM / "kernels" / "triton" / "activation.py").read_text()
print(f"{'':26}" + "".join(f"{name:>26}" for name in files))
for what, feature in FEATURES.items():
    print(f"{what:26}" + "".join(f"{feature(text)!s:>26}" for text in files.values()))

# %% [markdown]
# The new file is longer by its second op: one kernel serves the norm and the fused residual add (a constexpr), with
# a launcher and a provider each. Nothing in it is there for the interpreter: the CPU evidence runs the same source a
# GPU runs, and the harness that makes the CPU stand in for CUDA (`tests/vllm_stand_ins.py`) stays in the kit. That
# harness does change one thing the source executes: inside Triton's interpreter it converts fp32 to bf16 as torch
# does, where the interpreter truncates ([lesson 02](02_triton_kernel.ipynb) says why), so the bf16 stores checked on this CPU round
# as a GPU's do rather than as the interpreter's.
#
# ### 3. Its linters, with its settings
#
# vLLM checks its code with ruff, at its own rules and column limit, and with mypy, at its own options; code that
# passes the kit's settings can fail theirs. This cell places the new file in a copy of the wheel's tree (real
# folders on the new file's path, links to everything else), so that mypy sees the vLLM modules it imports. mypy
# analyses torch and those modules the first time, which takes a while; its cache stays in the temporary folder for
# the next run.

# %%
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time

TREE = Path(tempfile.gettempdir()) / "fastpath-vllm-lint"
SETTINGS = ["--isolated", "--line-length", "88", "--target-version", "py310"]
LINTERS = {"ruff check": ["ruff", "check", *SETTINGS, "--select", "E,F,UP,B,ISC,SIM,I,G",
                          "--config", 'lint.isort.known-first-party = ["vllm", "tests"]'],
           "ruff format": ["ruff", "format", "--check", *SETTINGS],
           "mypy": ["mypy", "--ignore-missing-imports", "--check-untyped-defs", "--follow-imports", "silent",
                    "--python-version", "3.10"]}
NEW = "vllm/kernels/triton/layernorm.py"
if VLLM is not None:  # the wheel's tree as links, with the new file added
    shutil.rmtree(TREE, ignore_errors=True)
    on_path = Path(NEW).parts[1:-1]  # kernels, triton: real folders, so the new file lands in the copy only
    for depth in range(len(on_path) + 1):
        rel = Path(*on_path[:depth])
        (TREE / "vllm" / rel).mkdir(parents=True)
        for entry in (VLLM / rel).iterdir():
            if entry.name != "__pycache__" and entry.name not in on_path[depth:depth + 1]:
                (TREE / "vllm" / rel / entry.name).symlink_to(entry)
    (TREE / NEW).write_text(new_file(NEW))

# %% [markdown]
# Each linter at vLLM's settings, run in that tree (the command is printed as you would type it there):

# %%
for name, cmd in LINTERS.items():
    if VLLM is None or importlib.util.find_spec(cmd[0]) is None:
        print(f"{name}: skipped ({'vLLM' if VLLM is None else cmd[0]} is not installed)")
        continue
    cache = ["--cache-dir", f"{TREE}-mypy-cache"] if cmd[0] == "mypy" else []
    start = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", *cmd, *cache, NEW], cwd=TREE, capture_output=True, text=True,
                         check=False)
    said = re.sub(r"\x1b\[[0-9;]*m", "", res.stdout + res.stderr).strip()  # without the terminal's colours
    print("$", shlex.join([*cmd, NEW]), f"\n  exit {res.returncode} after {time.perf_counter() - start:.1f} s:", said)

# %% [markdown]
# ### 4. The decode path, under CUDA graphs
#
# A fast path is measured against what the target runs by default, where its users run it. vLLM captures decode
# batches in CUDA graphs by default. It compiles with Inductor by default, and then custom ops are off and its RMSNorm
# runs Inductor's code for the native function; without Inductor it runs vLLM's C kernel, `vllm_c`. From the wheel:

# %%
if VLLM is None:
    print("vLLM is not installed: this reading is skipped")
else:
    for attr, start, end in (("cudagraph_mode", "FULL_AND_PIECEWISE mode", "the default."),
                             ("backend", '- "" (empty string)', "platforms)."),
                             ("custom_ops", "By default", "disabled custom ops.")):
        doc = attribute_doc("config/compilation.py", "CompilationConfig", attr)
        said = doc[doc.index(start):doc.index(end, doc.index(start)) + len(end)]
        print(f"CompilationConfig.{attr}:", " ".join(said.split()), "\n")
    cuda = (VLLM / "platforms" / "cuda.py").read_text().splitlines()
    print("CudaPlatform.get_default_ir_op_priority:", next(ln.strip() for ln in cuda if 'default = ["native"]' in ln))

# %% [markdown]
# Decode steps are small batches, captured. A fast path that refuses small batches or capture, and runs an eager
# multi-kernel composite there instead, makes every decode step slower than vLLM without it. The patch's
# `supports_args` decides on the call's metadata alone, as vLLM's own Triton providers do; a call it refuses goes to
# the next provider in the priority, unchanged:

# %%
source = new_file(NEW)
fn = next(n for n in ast.parse(source).body if getattr(n, "name", "") == "_supports_rms_norm")
print(ast.get_source_segment(source, fn))
reads = {ast.unparse(n) for n in ast.walk(fn) if isinstance(n, ast.Attribute) and ast.unparse(n.value) == "x"}
print("\nwhat _supports_rms_norm reads of x:", sorted(reads))
print("the new file mentions capture:", "captur" in source.lower())

# %% [markdown]
# No token count and no capture check: every decode batch the kernel can take, it takes. It runs only where a
# priority names `"triton"` (the patch names it in no default); its baselines are then what the platform runs by
# default: Inductor's compiled native under Inductor, `vllm_c` without it.
#
# ### 5. What a plugin may not do at start-up
#
# Out of tree, the kit adds its providers from a `vllm.general_plugins` entry point. vLLM loads those in every
# process it starts (the API server, the engine, each worker) and calls each one without a `try`; from the wheel:

# %%
if VLLM is None:
    print("vLLM is not installed: this reading is skipped")
else:
    source = (VLLM / "plugins" / "__init__.py").read_text()
    fn = next(n for n in ast.parse(source).body if getattr(n, "name", "") == "load_general_plugins")
    print("\n".join(ast.get_source_segment(source, fn).splitlines()[-4:]))

# %% [markdown]
# So a plugin that raises stops vLLM from starting, and one that initialises CUDA makes vLLM spawn its workers
# instead of forking them (`vllm/utils/system_utils.py` logs why when it switches). And a plugin that acts on being
# installed changes the numerics of every vLLM run on that machine, unasked. The kit's entry point,
# `fastpath_vllm.register`, does nothing unless `FASTPATH_VLLM=1`, and then acts only where the kit's kernels can
# run. The cell below defines a child that calls it twice in a fresh process where initialising CUDA raises, with the
# variable unset or set. The child gives the plugin's logger a handler (in vLLM, vLLM's logging configuration does),
# so what the plugin logs is printed above each result:

# %%
CHILD = """
import logging, os, sys, torch
def refuse(*args, **kwargs):
    raise RuntimeError("the plugin initialised CUDA")
for name in ("_lazy_init", "init", "get_device_capability", "get_device_properties", "current_device"):
    setattr(torch.cuda, name, refuse)
os.environ["FASTPATH_VLLM"] = "1" if sys.argv[1] == "asked" else ""
import fastpath_vllm
log = logging.getLogger("vllm.plugins.fastpath_kit")
log.setLevel(logging.INFO)
log.addHandler(logging.StreamHandler(sys.stdout))
print(f"{sys.argv[1]}: register() -> {fastpath_vllm.register()}, again -> {fastpath_vllm.register()},",
      "kit modules imported:", sum(m.startswith("fastpath_lib") for m in sys.modules),
      "| CUDA initialised:", torch.cuda.is_initialized())
"""

# %% [markdown]
# Each case in its own fresh process, as vLLM starts its processes:

# %% tags=["nbval-ignore-output"]
for host in ("not asked", "asked"):
    env = runtime.child_env(TRITON_INTERPRET="0", PYTHONPATH=os.pathsep.join([str(runtime.ROOT), str(SITE)]))
    res = subprocess.run([sys.executable, "-c", CHILD, host], env=env, capture_output=True, text=True, check=False)
    print(res.stdout.strip() if res.returncode == 0 else res.stderr[-800:], end="\n\n")

# %% [markdown]
# Not asked, it returns `False` having imported nothing of the kit: the entry point lives outside the `fastpath_lib`
# package, whose import a vLLM that did not ask should not pay. Asked, on this GPU-less host it declines and says once
# why; it still registers its providers, as unsupported and in no priority, because vLLM asserts that every provider
# a priority names is registered, and the priority may come from a process where the kernels run. Neither case saw
# an exception or a CUDA initialisation: the plugin asks vLLM's platform object, which reads NVML, never
# `torch.cuda`. Where it can run it puts its providers first in the platform's default priority, with one log line;
# it never takes vLLM's single out-of-tree `RMSNorm` slot, which a hardware plugin may need
# (`tests/upstream/test_vllm_plugin.py` runs these cases and both plugin orders).
#
# ### 6. Tests that only the reference's extremes reveal
#
# Two kinds of silent wrong result pass every test written with ordinary values. The first is in rounding. Under the
# interpreter the kit's kernels round fp32 to bf16 on the bits: add `0x7FFF` plus the lowest kept bit, keep the top
# half. That bare rounding, done on the positive NaN whose mantissa is all ones (`0x7FFFFFFF`),
# carries into the sign bit, and the NaN becomes a zero:

# %%
bits = 0x7FFFFFFF  # an fp32 NaN with an all-ones mantissa
lowest_kept = (bits >> 16) & 1
top = ((bits + 0x7FFF + lowest_kept) & 0xFFFFFFFF) >> 16  # the carry reaches bit 31, the sign
as_bf16 = torch.tensor(top, dtype=torch.int32).to(torch.int16).view(torch.bfloat16).item()
print(f"fp32 {bits:#010x} (NaN) + 0x7fff + {lowest_kept} -> top half {top:#06x} = bf16 {as_bf16}")

# %% [markdown]
# In a normalization one NaN makes the whole row NaN before the store, so that rounding of such a NaN would turn a
# whole row of the output into zeros where the reference gives NaNs: a diverging model that looks fine. So under the
# interpreter the kit's `round_to` (`fastpath_lib/triton_casts.py`) takes a NaN out of the bit rounding (on a GPU it is
# Triton's own conversion). The same row through the fused op, compared with the reference as the kit's tests compare
# extremes (NaN-ness and sign exactly):

# %%
from fastpath_lib import testing

xs, rs = torch.randn(ROWS, 64, device=DEVICE), torch.randn(ROWS, 64, device=DEVICE)
wb = (torch.rand(64) + 0.5).to(DEVICE, torch.bfloat16)  # a bf16 weight: the row is rounded to bf16
xs[3, 5] = testing.extreme_values(torch.float32, ("nan_all_ones",))[0]
with fastpath_lib.record_routes() as routes:
    out, _ = fastpath_lib.fused_add_rms_norm(xs, rs, wb)
want, _ = reference.native(xs, rs, wb)
print("routes", dict(routes), "| NaNs in row 3: kernel", int(out[3].isnan().sum()), "reference",
      int(want[3].isnan().sum()), "of", out.shape[1])
print("compare_extremes:", testing.compare_extremes(out, want, *reference.tolerance(xs.dtype)) or "they match")

# %% [markdown]
# Tests built on `torch.nan` alone cannot see it: that NaN is the canonical one. `fastpath_lib.testing.EXTREMES`
# names the values at a dtype's edges (NaNs with payloads, all-ones and signalling mantissas, negative NaNs, `-0.0`,
# subnormals, infinities, the largest finite values), and `tests/rmsnorm/test_extremes.py` runs both ops on them, every
# dtype pair and route; `tests/fused/test_fused_contract.py::test_a_nan_of_any_bits_stays_nan` keeps this case.
#
# The second is in placement. When a sharding rule asks an in-place op for placements other than the caller's,
# DTensor redistributes a copy of each argument but the first, and the op writes the copy and returns without error,
# the caller's tensor unchanged (DTensor protects only the first argument of an in-place op from that): on two ranks,
# `x` a `Shard(0)` DTensor and `residual` a `Replicate()` one is such a pair for the fused op. The extreme here is a
# placement pair no ordinary test uses. The kit's rule refuses such a pair, naming both placements, and
# `fastpath_lib.fused_add_rms_norm_` writes back into any placements. On two gloo ranks,
# `tests/rmsnorm/test_sharding.py::test_in_place_on_every_placement_pair_writes_the_callers_tensors_or_raises` runs every
# pair through both entry points and checks the caller's tensors after each call.

# %% [markdown]
# ## Recap
#
# - A contract for sharded inputs names the placements that run without communication (a row shard with a
#   replicated weight), the placement of every result (`dw` is a partial sum), and what happens to every other
#   placement (a hidden-dim shard is gathered first; the in-place form takes the composite).
# - The row threshold applies to the local shard, on every rank.
# - In vLLM a kernel enters as a provider of an IR op that the layer's forward calls, chosen by the platform's
#   priority; a plugin that adds one is loaded in every process and must never raise.
# - A compiler traces on FakeTensors: a kernel reaches a graph only through a registered op (with a fake
#   implementation, or a `triton_op`), and run-time facts are decided inside it.
# - In PyTorch 2.13 a kernel enters an eager ATen op through `torch/_native`: an override at a backend key with a
#   `cond` and an `impl`, tried in registration order (quack's RMSNorm first for `_fused_rms_norm` on CUDA), ATen when
#   every `cond` declines. `native_override.register` tries the kit's kernels there before a patch proposes them.
# - A maintainer reads the target's direction first (vLLM 0.33 is removing the IR the patch's providers join), then its
#   own patterns and linters at its settings, then the path its users run by default: decode batches under CUDA
#   graphs, where a fast path takes every call it can and otherwise runs what the target ran before.
# - A plugin runs in every process of its host, without a `try`: it never raises and never initialises CUDA.
# - Silent wrong results hide at the extremes: a NaN with an all-ones mantissa, an in-place call on a placement pair
#   no ordinary test used. Tests compare against the reference on those values and pairs.
#
# ## Knowledge check
#
# Answer each question in your own words first, then open the guide.
#
# **1. A call of 2 x threshold rows takes the kernel. Under tensor parallelism over 4 ranks, which route does each
# rank take, and what does the PR say about it?**

# %% [markdown]
# <details><summary>Answer guide</summary>
#
# The predicate decides on the local shard. A row shard over 4 ranks gives each rank half the threshold, so every
# rank falls back. The PR states the threshold per rank, and the matrix includes the shapes a sharded deployment
# hands the op (the local shapes), not only the global ones.
# </details>

# %% [markdown]
# **2. Your vLLM integration launches the Triton kernel directly inside the layer's `forward_cuda`. It works in eager
# mode. What breaks when vLLM compiles the model, and what is the fix?**

# %% [markdown]
# <details><summary>Answer guide</summary>
#
# The compiler traces the forward on FakeTensors, which have no data. A launcher that reads its tensors' data (a
# pointer's alignment, an overlap check) fails while tracing, as the kit's did above; `torch.compile` can capture a
# bare `kernel[grid](...)` launch of a user-defined Triton kernel, but nothing a launcher decides from run-time
# data. Register the kernel as an op: an opaque one with a fake
# implementation (`direct_register_custom_op(..., fake_impl=...)` in vLLM, or `torch.library.custom_op` with
# `register_fake`), or a `torch.library.triton_op` launching through `wrap_triton`; call the op from the forward, and
# test it under `torch.compile(fullgraph=True)` as lesson 04 does. In vLLM the forward calls the IR op, and the
# kernel's op is a provider of it: the IR op stays in the graph for vLLM's fusion passes and lowering picks the
# provider.
# </details>

# %% [markdown]
# **3. Your kernel's tests feed it `float("nan")` and pass. A user reports rows of zeros where the model diverged.
# How can both be true, and what test would have found it?**

# %% [markdown]
# <details><summary>Answer guide</summary>
#
# `float("nan")` is the canonical NaN. A rounding done on the bits (add `0x7FFF` plus the lowest kept bit) carries the
# positive NaN whose mantissa is all ones (`0x7FFFFFFF`) into the sign bit and produces `-0.0` (a negative one,
# `0xFFFFFFFF`, carries past bit 31 and gives `+0.0`): a zero either way; one NaN makes a whole row's `rstd` that NaN,
# so the row comes out as zeros. Test against the reference on the dtype's extremes, NaNs of every bit pattern
# included (`fastpath_lib.testing.EXTREMES`), and compare NaN-ness and sign exactly, not only values within a
# tolerance.
# </details>

# %% [markdown]
# ## Read next
#
# - [Exercise 13](../exercises/ex13_review_readiness.ipynb): check a PR's evidence the way a reviewer will.
# - [Lesson 07](07_pr_note.ipynb), again: the note that carries the evidence to the maintainer.
