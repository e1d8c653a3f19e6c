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
# placements of every result; then read where a kernel goes in vLLM, and the file the kit generates for it.
#
# **What you need**: lessons 01-03 and 08; this CPU (`torch.distributed` with the `gloo` backend, no GPU).
#
# **Time**: about 15 minutes.
#
# **What you will learn**
# - what a contract for sharded inputs adds: the placements that run without communication, the placement of every
#   result (gradients included), and what happens to every other placement;
# - why the row threshold applies per rank;
# - where a kernel enters vLLM (a `CustomOp` layer's `forward_cuda`, an op registered with a fake implementation,
#   a plugin loaded in every process), and why a compiler needs the registered op rather than a raw launch.

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

ROWS = 2 * limits_for(DEVICE).min_rows  # eligible on every device

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
# Registering it is process-wide, so importing the kit does not: the first DTensor call does. A one-rank group here
# (`tests/test_sharding.py` runs two ranks):

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
# A hidden-dim shard. In torch 2.13 and 2.14 `F.rms_norm` raises on it (its decomposition adds `eps` in place to a
# partial mean); through the rule DTensor gathers the rows first, and the result is the reference's:

# %%
hidden, rw = distribute_tensor(x, mesh, [Shard(1)]), distribute_tensor(w, mesh, [Replicate()])
try:
    F.rms_norm(hidden, [64], rw)
    print("F.rms_norm on a hidden-dim shard: runs")
except RuntimeError as e:
    print("F.rms_norm on a hidden-dim shard raises:", str(e).splitlines()[0][:110])
got = fastpath_lib.rms_norm(hidden, [64], rw)
print("the kit's op:", got.placements, "| matches F.rms_norm on the full tensor:",
      torch.allclose(got.full_tensor(), F.rms_norm(x, [64], w), atol=1e-5))
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
# vLLM's norm is a layer, `RMSNorm` in `vllm/model_executor/layers/layernorm.py`, registered as a `CustomOp`
# (`@CustomOp.register("rms_norm")`). A `CustomOp` picks its forward once, when it is built
# (`CustomOp.dispatch_forward`): `forward_cuda` on an NVIDIA platform, or `forward_native` when the op is disabled.
# Custom ops are off by default when Inductor compiles the model (`custom_ops` defaults to `"none"`), so the baseline
# a vLLM reviewer compares with is Inductor's compiled native code, not an eager composite; `+rms_norm` in
# `custom_ops` turns the layer's own forward on. A project outside vLLM replaces a layer with
# `CustomOp.register_oot`, from a plugin that vLLM loads through the `vllm.general_plugins` entry point, in every
# process it starts, possibly more than once: a plugin's register function must be idempotent, must never raise
# and must not initialise CUDA. (These are read from the vLLM 0.33 wheel the kit pins. In that release the layer's
# forward still calls vLLM's IR ops, and its kernel configuration says "vLLM IR is being removed ... Kernels will be
# selected by the platform, as for other custom ops": the IR is not a target to write for.)
#
# Whatever the layer, the kernel itself reaches a compiled graph only through a registered op: an opaque one with a
# fake implementation (`direct_register_custom_op(..., fake_impl=...)` in vLLM, `torch.library.custom_op` and
# `register_fake` in torch), or a `torch.library.triton_op` whose launch goes through `wrap_triton`, which lets the
# compiler see the kernel itself. A compiler traces a model on FakeTensors, which have shapes, dtypes and strides but
# no data pointer, so a launcher that hands tensors to a kernel directly cannot run on them. Traced with `make_fx`
# (the tracer vLLM's compilation passes use), the kit's raw forward launch fails, and the kit's op, an opaque one,
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
# The change a learner proposes to vLLM cannot import the kit. `tools/make_upstream.py` generates it in `upstream/`,
# a patch against the pinned vLLM release's files, from the kit's one implementation: the kernels are copied by name
# into a new `vllm/kernels/triton/rms_norm.py` with a `triton_op` launcher (metadata checks only), and
# `RMSNorm.forward_cuda` takes them where the platform and the call's metadata allow, vLLM's current path otherwise.
# `tests/test_vllm_upstream.py` checks that it is current, applies, passes vLLM's ruff and mypy settings and computes
# the reference's values. The files it changes, and its lines added and removed:

# %% tags=["nbval-ignore-output"]
patch = (runtime.ROOT / "upstream" / "vllm_rms_norm_triton.patch").read_text()
for chunk in patch.split("diff --git a/")[1:]:
    lines = chunk.splitlines()
    added = sum(line.startswith("+") and not line.startswith("+++") for line in lines)
    removed = sum(line.startswith("-") and not line.startswith("---") for line in lines)
    print(f"{chunk.split(' ', 1)[0]:48} +{added:<4} -{removed}")

# %% [markdown]
# <!-- upstream-reading: the section on how a maintainer reads the PR goes here (a later revision writes it). -->
# ## How a maintainer reads the PR
#
# A maintainer reads the PR in the order it can fail them: does it match the target's contract (the native
# function's values, its rounding points), does it run where the target runs (the platform check, the sharded
# placements, compiled graphs), is it faster than what the target already does (Inductor's compiled native, under
# CUDA graphs, on the predeclared matrix with its neutral and losing cases), and who maintains it. Lesson 07's note
# and exercise 13's readiness check put the evidence for each in one place.
#
# ## Recap
#
# - A contract for sharded inputs names the placements that run without communication (a row shard with a
#   replicated weight), the placement of every result (`dw` is a partial sum), and what happens to every other
#   placement (a hidden-dim shard is gathered first; the in-place form takes the composite).
# - The row threshold applies to the local shard, on every rank.
# - In vLLM a kernel enters through a `CustomOp` layer's forward, chosen once when the layer is built; a plugin that
#   replaces a layer is loaded in every process and must never raise.
# - A compiler traces on FakeTensors: a kernel reaches a graph only through a registered op (with a fake
#   implementation, or a `triton_op`), and run-time facts are decided inside it.
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
# test it under `torch.compile(fullgraph=True)` as lesson 04 does.
# </details>

# %% [markdown]
# ## Read next
#
# - [Exercise 13](../exercises/ex13_review_readiness.ipynb): check a PR's evidence the way a reviewer will.
# - [Lesson 07](07_pr_note.ipynb), again: the note that carries the evidence to the maintainer.
