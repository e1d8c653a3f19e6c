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
# # 08 · A second operator: mutation, aliasing and fusion
#
# Every transformer block ends a sub-layer with `residual = x + residual; x = rms_norm(residual) * weight`. Serving
# stacks fuse the two, and vLLM's IR declares the fused op as `fused_add_rms_norm(x, x_residual, weight, epsilon)
# -> (out, residual)`, whose providers may write both results *into their inputs*. The kit builds it as its second
# operator (`fastpath_lib/fused/`), with the same pipeline as RMSNorm: a written reference, a predicate, Triton
# kernels, custom ops, boundary points, a matrix and an upstream form.
#
# **What you will learn**
# - that the contract of an in-place op includes what it writes, what may alias, and what a caller observes after an
#   exception;
# - how `torch.library.custom_op(mutates_args=...)` declares the writes, what functionalization makes of them under
#   `torch.compile`, and how `opcheck`'s schema test catches a write nobody declared;
# - that an intermediate's precision is part of the contract (the variance of the unrounded fp32 sum);
# - why overlapping memory goes to the fallback, and what a kernel does to aliased inputs when it does not;
# - the mechanism of the fusion (the bytes it saves), and the question a vLLM reviewer asks first;
# - how the in-place form maps onto vLLM's provider registration (`supports_args`, `supported`, `inplace=True`), and
#   what vLLM's compiler needs of a provider: a registered op, a check FakeTensors can answer, a priority.

# %% tags=["nbval-ignore-output"]
import torch
import fastpath_lib
# no CUDA: run the kernels in Triton's CPU interpreter (a no-op on a GPU)
fastpath_lib.use_interpreter()
from fastpath_lib import runtime

DEVICE = runtime.lesson_device()  # "cuda" on a GPU, else "cpu"; prints the mode and versions
_ = torch.manual_seed(0)

import inspect
import textwrap

import pandas as pd
import torch.nn.functional as F
from fastpath_lib.fused import op as fused_op, reference
from fastpath_lib.fused.cases import FusedCaseSpec
from fastpath_lib.rmsnorm.limits import default_eps
from fastpath_lib.rmsnorm.predicate import limits_for

ROWS = 2 * limits_for(DEVICE).min_rows  # eligible on every device

# %% [markdown]
# ## The contract, written down
#
# The reference is vLLM's native function, in plain torch (`fastpath_lib.fused.reference.native`). It fixes *where*
# each intermediate is rounded, and that is part of what every route must match:

# %%
print(inspect.getsource(reference.native).split('"""', 2)[2])

# %% [markdown]
# Two public forms call it. `fused_add_rms_norm` returns new tensors and leaves its inputs alone;
# `fused_add_rms_norm_` (PyTorch's trailing underscore) writes the output into `x` and the sum into `residual`, and
# returns the caller's own two tensors. Both take the Triton route here, and both give the same values:

# %%
x, r, w = FusedCaseSpec(rows=ROWS, cols=64, dtype=torch.bfloat16).build(seed=1, device=DEVICE).args()
x0, r0 = x.clone(), r.clone()
versions = (x._version, r._version)
with fastpath_lib.record_routes() as routes:
    out, new_residual = fastpath_lib.fused_add_rms_norm(x, r, w)
    print("functional form left its inputs alone:", torch.equal(x, x0) and torch.equal(r, r0))
    got = fastpath_lib.fused_add_rms_norm_(x, r, w)
print("routes:", dict(routes))
print("in-place form returned the caller's tensors:", got[0] is x and got[1] is r)
print("same values as the functional form:", torch.equal(x, out) and torch.equal(r, new_residual))
print("version counters bumped (autograd sees the writes):", (x._version, r._version) != versions)

# %% [markdown]
# ## What a caller observes after an exception
#
# An in-place op that fails halfway leaves its caller with half-written state: the residual stream of a model updated,
# its output not. PyTorch's own in-place ops check before they write, and so must this one. Computing both results
# before the first write is not enough, because the writes can fail too: `x.copy_(out)` refuses a leaf that requires
# grad, or an `x` of one row that only broadcasts against `residual`. The naive composite below writes `residual`
# first, so when the write into `x` fails the residual has already changed:

# %%
def naive_(x, residual, weight=None, eps=None):  # both results first, then the two writes, nothing checked
    out, s = reference.native(x, residual, weight, eps)
    residual.copy_(s)
    x.copy_(out)

x, r, _ = FusedCaseSpec(rows=ROWS, cols=64).build(seed=2, device=DEVICE).args()
x = x.detach().clone().requires_grad_()  # a leaf that requires grad
r0 = r.clone()
try:
    naive_(x, r)
except RuntimeError as exc:
    print("raised:", exc)
print("residual untouched:", torch.equal(r, r0))

# %% [markdown]
# The kit's composite (`reference.native_`) runs every check either write can fail before the first one
# (`reference.check_inplace`: autograd's rules for both tensors, then the shape and dtype each result is written
# into), in PyTorch's order and with PyTorch's messages. Each row below is one invalid call; the last two columns
# check the inputs after the exception. A test of the in-place contract asks this of every way a call can fail, not
# only of the first one that comes to mind: here the leaf and the broadcasting `x` are the calls the naive composite
# gets wrong.

# %%
def after_exception(name, make):
    x, r, w = FusedCaseSpec(rows=ROWS, cols=64).build(seed=2, device=DEVICE).args()
    x, r, w = make(x, r, w)
    x0, r0 = x.detach().clone(), r.detach().clone()
    try:
        fastpath_lib.fused_add_rms_norm_(x, r, w)
        raised = "nothing raised!"
    except RuntimeError as exc:
        raised = str(exc).splitlines()[0][:70]
    return {"call": name, "raised": raised, "x untouched": torch.equal(x.detach(), x0),
            "residual untouched": torch.equal(r.detach(), r0)}

calls = {"weight of the wrong width": lambda x, r, w: (x, r, w[:32]),
         "residual with twice the rows": lambda x, r, w: (x, torch.cat([r, r]), w),
         "residual of another width": lambda x, r, w: (x, r[:, :32], w),
         "x a leaf that requires grad": lambda x, r, w: (x.detach().clone().requires_grad_(), r, w),
         "residual a leaf that requires grad": lambda x, r, w: (x, r.detach().clone().requires_grad_(), w),
         "x one row (broadcasts)": lambda x, r, w: (x[:1], r, w)}
exc_df = pd.DataFrame([after_exception(k, f) for k, f in calls.items()])
assert exc_df[["x untouched", "residual untouched"]].all().all()
exc_df

# %% [markdown]
# ## Declaring the writes: `mutates_args`
#
# Under `torch.compile` the in-place form is a `torch.library.custom_op`. Its schema says which arguments it writes:
# `Tensor(a0!) x` means "x is written" (the `!`), and the functional op's schema has no `!` at all.

# %%
print(torch.ops.fastpath.fused_add_rms_norm_.default._schema)
print(torch.ops.fastpath.fused_add_rms_norm.default._schema)

# %% [markdown]
# The declaration is a promise the compiler relies on: it reorders, reuses and deduplicates anything it believes is
# not written. `torch.library.opcheck`'s *schema test* runs the op and compares every argument before and after the
# call. A toy op that doubles its input in place shows the test at work (only the schema test runs here): declared
# with `mutates_args=()` it fails, declared with `mutates_args=("x",)` it passes.

# %%
def toy(declared):
    @torch.library.custom_op(f"lesson08::double_{'declared' if declared else 'undeclared'}",
                             mutates_args=("x",) if declared else ())
    def double_(x: torch.Tensor) -> None:
        x.mul_(2)

    double_.register_fake(lambda x: None)
    return double_

for declared in (False, True):
    try:
        result = torch.library.opcheck(toy(declared), (torch.randn(4, device=DEVICE),), test_utils="test_schema")
    except Exception as exc:  # noqa: BLE001  opcheck raises OpCheckError
        result = str(exc).split(" (scroll up")[0]
    print(f"mutates_args={('x',) if declared else ()}: {result}")

# %% [markdown]
# The kit's in-place op passes the same checks, on the Triton route, with its writes declared:

# %%
x, r, w = FusedCaseSpec(rows=ROWS, cols=64).build(seed=3, device=DEVICE).args()
with fastpath_lib.record_routes() as routes:
    print(torch.library.opcheck(torch.ops.fastpath.fused_add_rms_norm_.default, (x, r, w, 1e-6)))
print("routes during opcheck:", sorted(routes))  # how often opcheck calls the op depends on the torch release

# %% [markdown]
# ## Functionalization under `torch.compile`
#
# The compiler's graphs are functional: no op in them writes its inputs. So `torch.compile` *functionalizes* the
# in-place op: it calls it on copies (`auto_functionalized_v2`), takes the written values as outputs, and copies them
# back into the caller's tensors after the graph. Here is a decoder-layer-shaped function (two sub-layers, each
# ending in the in-place add + RMSNorm), compiled with `fullgraph=True` (no graph break), with a backend that prints
# the graph after functionalization:

# %%
from torch._dynamo.backends.common import aot_autograd

graphs = []
def keep_graph(gm, example_inputs):
    graphs.append(gm.code)
    return gm

def layer(h, W, w1, w2):
    x, residual = fastpath_lib.fused_add_rms_norm_(h @ W, h, w1)   # writes h: the new residual
    x, residual = fastpath_lib.fused_add_rms_norm_(x @ W, residual, w2)
    return x + residual

W = torch.randn(64, 64, device=DEVICE) / 8
w1, w2 = (torch.rand(64, device=DEVICE) + 0.5 for _ in range(2))
h = torch.randn(ROWS, 64, device=DEVICE)
h_eager, h_compiled = h.clone(), h.clone()
with torch.no_grad():
    eager = layer(h_eager, W, w1, w2)
    compiled = torch.compile(layer, fullgraph=True, backend=aot_autograd(fw_compiler=keep_graph))
    with fastpath_lib.record_routes() as routes:
        got = compiled(h_compiled, W, w1, w2)

# %%
print("\n".join(line.strip()[:110] for line in graphs[0].splitlines() if "fused_add_rms_norm" in line))
print("graphs:", len(graphs), "| routes when the graph ran:", dict(routes))
print("output equals eager:", torch.equal(got, eager),
      "| the caller's h written as in eager:", torch.equal(h_compiled, h_eager) and not torch.equal(h, h_eager))

# %% [markdown]
# Each call became `auto_functionalized_v2(fused_add_rms_norm_, ...)`, and the kernel still ran (the routes). The
# write into the caller's `h` is no longer inside the graph: the compiled function returns the new value and
# AOTAutograd copies it into `h` afterwards, so the caller sees what eager mode shows. None of this works unless the
# schema is honest: an undeclared write would be invisible to functionalization, and the compiled graph could read a
# stale copy. (`tests/test_fused_ops.py` also compiles the functional form, with its Triton backward.)
#
# ## An intermediate's precision is part of the contract
#
# vLLM's native function takes the variance of the *unrounded* fp32 sum, not of the new residual after it was
# rounded to bf16 or fp16. An unfused pair (`x + residual`, then a norm) can only see the rounded one. Is that a
# difference anyone could observe? Below: the native function, a variant that takes the variance from the rounded
# residual, and the eager pair with `F.rms_norm`, on random bf16 and fp16 rows and on a row built so that every
# element's sum rounds the same way (`1 + 0.005` rounds up to the next bf16 value).

# %%
def variance_of_rounded(x, residual, weight, eps=None):
    """The plausible mistake: the variance of the new residual *after* rounding to x's dtype."""
    s = x.float() + residual.float()
    new_residual = s.to(x.dtype)
    var = new_residual.float().pow(2).mean(-1, keepdim=True)
    n = s * torch.rsqrt(var + default_eps(x.dtype))
    return (n.to(weight.dtype) * weight).to(x.dtype), new_residual

def unfused_pair(x, residual, weight, eps=None):
    s = x + residual
    return F.rms_norm(s, [x.shape[-1]], weight, default_eps(x.dtype)), s


# %%
def inputs(kind, dtype):
    g = torch.Generator().manual_seed(4)
    if kind == "random":
        x, r = (torch.randn(ROWS, 256, generator=g) for _ in range(2))
    else:  # every sum 1.005: rounded up in bf16, so the rounded variance is larger
        x, r = torch.ones(ROWS, 256), torch.full((ROWS, 256), 0.005)
    return x.to(DEVICE, dtype), r.to(DEVICE, dtype), torch.ones(256, device=DEVICE, dtype=dtype)

prec = []
for kind, dtype in (("random", torch.bfloat16), ("random", torch.float16), ("sums round up", torch.bfloat16)):
    x, r, w = inputs(kind, dtype)
    want, want_res = reference.native(x, r, w)
    atol, rtol = reference.tolerance(dtype)
    row = {"inputs": kind, "dtype": str(dtype)[6:]}
    for name, fn in (("rounded variance", variance_of_rounded), ("add, F.rms_norm", unfused_pair),
                     ("kit", fastpath_lib.fused_add_rms_norm)):
        out, res = fn(x, r, w)
        row[f"{name}: differ"] = f"{(out != want).float().mean().item():.1%}"
        row[f"{name}: in tol"] = torch.allclose(out.float(), want.float(), atol=atol, rtol=rtol)
        assert torch.equal(res, want_res)  # the new residual is the same everywhere
    prec.append(row)
pd.DataFrame(prec)

# %% [markdown]
# Read the table column by column. The new residual is bitwise the same in every implementation (the assert): the sum
# is rounded once. The *output* is not. Taking the variance from the rounded residual moves a few percent of the
# random outputs, and on the rows built to round one way it moves every output, yet each one stays inside the kit's
# tolerance (one ulp of the dtype, relative). A tolerance test cannot see this mistake; counting the elements that
# differ from the native function can, because the kit's kernel rounds at the same points and differs from it on
# none or almost none (the order of its fp32 sum may flip a rare rounding). On random rows the eager pair differs on
# more elements still: `F.rms_norm` also multiplies by the weight in fp32 and rounds once, where vLLM's native
# rounds the normalized value to the weight's dtype first. So the unfused pair is a *baseline* for speed, not the
# contract for values, and a PR must say which one it matched.
#
# ## Overlapping memory goes to the fallback
#
# The kernel normalizes rows in parallel programs: a program stores its rows of `x` and `residual` while others may
# still be loading theirs. If the output of one program lands where another reads, the result depends on the order
# the programs run. So the predicate's `no_overlap` condition sends any in-place call whose `x`, `residual` and
# `weight` share memory to the composite, whose order is defined (both results first, then the residual, then `x`).
# The boundary points cover the aliasings `fastpath_lib.fused.cases` can build. Each in-place call below runs on
# fresh copies and is compared with the composite: the residual bitwise, the output within the kit's tolerance.

# %%
alias_rows = []
for alias in ("none", "disjoint", "same", "overlap", "interleaved", "weight_in_x"):
    case = FusedCaseSpec(rows=ROWS, cols=1024, alias=alias).build(seed=5, device=DEVICE)
    d = fused_op.explain(*case.args(), inplace=True)
    mine, composite = case.fresh(), case.fresh()
    with fastpath_lib.record_routes() as routes:
        fastpath_lib.fused_add_rms_norm_(*mine.args())
    reference.native_(*composite.args())
    alias_rows.append({"alias": alias, "in-place route": ",".join(routes), "why": "; ".join(d.reasons) or "-",
                       "functional route": fused_op.explain(*case.args()).route,
                       "matches the composite": torch.equal(mine.residual, composite.residual)
                       and torch.allclose(mine.x, composite.x, *reference.tolerance(mine.x.dtype)),
                       "outside untouched": mine.outside_untouched()})
alias_df = pd.DataFrame(alias_rows)
assert alias_df[["matches the composite", "outside untouched"]].all().all()
alias_df

# %% [markdown]
# `disjoint` (the two row halves of one buffer) shares a storage but no byte, so it keeps the Triton route;
# `interleaved` (the column halves of one buffer) shares no *element* either, but its byte ranges interleave, and
# the test on byte ranges is conservative: fallback, which is always correct. The functional form writes new tensors,
# so aliased inputs are harmless to it.
#
# What the condition prevents, shown by calling the in-place kernel directly, without the predicate, on `residual` =
# `x` shifted by one row (the same width as above, where each program normalizes fewer rows than the tensor has):

# %% tags=["nbval-ignore-output"]
from fastpath_lib.fused import kernels
from fastpath_lib.rmsnorm.kernels import forward_rows_per_program

print("rows per program at 1024 columns:", forward_rows_per_program(1024))
case = FusedCaseSpec(rows=ROWS, cols=1024, alias="overlap").build(seed=6, device=DEVICE)
raw, composite = case.fresh(), case.fresh()
kernels.run_(*raw.args())  # no predicate: the kernel runs on aliased memory
reference.native_(*composite.args())
wrong = ((raw.x - composite.x).abs() > 1e-3).any(-1)
print(f"rows of x that differ from the composite: {int(wrong.sum())} of {ROWS}")

# %% [markdown]
# A program read rows of `x` that the previous program had already overwritten through `residual`. Under the
# interpreter the programs run one after another, so the damage is the same on every run; on a GPU it depends on
# scheduling, which makes it worse: a test may pass a thousand times. The predicate, not luck, keeps such calls off
# the kernel.
#
# ## The mechanism: bytes saved by fusion
#
# A memory-bound op is as fast as the bytes it moves. The unfused pair reads `x` and `residual` and writes the sum,
# then reads the sum again and writes the output: five passes over `rows × cols`. The fused kernel reads `x` and
# `residual` once and writes the new residual and the output: four. The kit's bytes model
# (`fastpath_lib.fused.spec.FUSED_SPEC.bytes_moved`) computes both; the weight is read once per call either way.

# %%
from fastpath_lib.fused.spec import FUSED_SPEC

model = []
for name, rows_, cols, dtype in (("decode, M=1", 1, 4096, torch.bfloat16), ("batch", 256, 4096, torch.bfloat16),
                                 ("prefill", 4096, 4096, torch.bfloat16), ("prefill fp32", 4096, 4096, torch.float32)):
    elem = torch.empty((), dtype=dtype).element_size()
    fused = FUSED_SPEC.bytes_moved(rows_, cols, elem, elem)
    unfused = FUSED_SPEC.bytes_moved(rows_, cols, elem, elem, fused=False)
    model.append({"case": name, "shape": f"{rows_}x{cols} {str(dtype)[6:]}", "unfused MiB": unfused / 2**20,
                  "fused MiB": fused / 2**20, "saved": f"{1 - fused / unfused:.1%}",
                  "unfused / fused": round(unfused / fused, 3)})
pd.DataFrame(model).round(3)

# %% [markdown]
# One pass in five is the most a memory-bound fused kernel can save against the unfused pair, and a little less
# where the weight's read is not negligible (decode). That is an upper bound from the mechanism; the time is a
# measurement.
#
# ## The question a vLLM reviewer asks first
#
# *Does it beat the unfused pair, and does it beat `torch.compile`'s own fusion of the pair?* vLLM compiles its
# models: inductor can fuse the add and the norm into one generated kernel, which moves the same four passes as
# ours. Against that baseline the bytes model predicts no saving, so a claim of speed there needs a measurement, and
# so does any claim at all. The kit's operator spec (`fastpath_lib.opspec.get("fused_add_rms_norm")`) declares the
# matrix before anything is timed: the baselines every case is timed against, the cases, each with the outcome its
# author expects on a GPU (a prediction, not a result) and why, and the bytes each implementation moves (from the
# spec's bytes models, not typed):

# %%
from fastpath_lib import opspec

spec = opspec.get("fused_add_rms_norm")
first = spec.baseline[0]
print("baselines:", ", ".join(spec.baselines), f"(outcomes are read against the first, {first})")
declared = pd.DataFrame([{"case": c.id, "dtype": c.dtype, f"expected vs {first}": c.expected,
                          "MiB fused": spec.bytes_moved(c.rows, c.cols, getattr(torch, c.dtype), "forward") / 2**20,
                          **{f"MiB {name}": model(c.rows, c.cols, getattr(torch, c.dtype), "forward") / 2**20
                             for name, model in spec.bytes_models.items() if name in spec.baselines}}
                         for c in spec.matrix()])
print(declared[f"expected vs {first}"].value_counts().to_dict())
declared.round(2)

# %% [markdown]
# Each case carries its author's reason. Two of them, the decode token and a large prefill:

# %%
for c in spec.matrix():
    if c.id in ("decode_m1_4096_bf16", "prefill_4096x4096_bf16"):
        print(textwrap.fill(f"{c.id} ({c.expected}): {c.rationale}", 110), end="\n\n")

# %% [markdown]
# Timings taken here would say nothing about a GPU: the kernels run in Triton's interpreter, in Python. The kit
# labels every timing by where it was taken (`fastpath_lib.bench.schema`), and on a CPU this lesson times nothing.
# On a GPU the cell below times the spec's baselines and the fused op on one prefill shape with the kit's timer; the
# full answer is the matrix, run by `./kit bench --op fused_add_rms_norm` and recorded with its environment.

# %% tags=["nbval-ignore-output"]
from fastpath_lib.bench.schema import GPU_LABEL, measurement_label
from fastpath_lib.bench.timing import gpu_measurement, quantile, settings_for, time_callable

label = measurement_label({"gpu_measurement": gpu_measurement()})
print("timings in this process:", label)
if label == GPU_LABEL:
    x, r, w = FusedCaseSpec(rows=4096, cols=4096, dtype=torch.bfloat16).build(seed=7, device=DEVICE).args()
    with torch.no_grad():
        for name, fn in {**spec.baselines, "fused (dispatched)": spec.function}.items():
            samples = time_callable(lambda: fn(x, r, w, 1e-6), settings_for(quick=True))["samples_us"]
            print(f"{name:24} median {quantile(samples, 0.5):9.2f} us ({label})")
else:
    print("nothing is timed on this machine; the matrix above is a prediction until a GPU run records it")

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
# ## The in-place form upstream: vLLM's providers
#
# vLLM's IR (`vllm.ir`) keeps the native function as the contract; a kernel joins an op as a *provider* with
# `supported` (a static platform check), `supports_args` (a per-call check with the native's own signature) and
# `inplace=True` where it writes `x` and `x_residual`. The kit's plugin, `fastpath_lib/vllm_plugin.py`, adds the
# provider `fastpath_triton` to `rms_norm` and to `fused_add_rms_norm`; `pip install` of the kit registers it through
# vLLM's `vllm.general_plugins` entry point. `./kit setup` installs vLLM's wheel without its dependencies (`vllm.ir`
# needs only torch and `regex`), so the cells below use the real `vllm.ir` (vLLM's log lines vary between runs).

# %% tags=["nbval-ignore-output"]
from fastpath_lib import vllm_plugin

try:
    ir = vllm_plugin.load_vllm_ir()  # imports vllm.ir and registers the plugin's providers
except ModuleNotFoundError as exc:
    ir = None
    print("vllm.ir is not available here, so the vLLM cells below print nothing:", exc)
else:
    op = ir.ops.fused_add_rms_norm
    print({name: {"supported": impl.supported, "inplace": impl.inplace} for name, impl in op.impls.items()})

# %% [markdown]
# Registering is not enabling. vLLM runs a provider only when the op's priority list names it (a model's kernel
# configuration sets it; a test or a block uses `op.set_priority`); without a priority every call takes `native`.
# The inputs come from vLLM's own input generator for the op:

# %% tags=["nbval-ignore-output"]
if ir is not None:
    args = op.generate_inputs(num_tokens=ROWS, hidden_size=64, dtype=torch.float32, device=DEVICE)
    print("no priority set:                      ", op.dispatch(*args).provider)
    with op.set_priority([vllm_plugin.PROVIDER, "native"]):
        print("priority [fastpath_triton, native]:   ", op.dispatch(*args).provider)

# %% [markdown]
# `ROWS` is twice the row threshold of the device in use. A call of 16 x 64 is eligible only under the interpreter,
# whose threshold is 8 rows; on CUDA the threshold is 1024 rows until a recorded sweep lowers it, so there the same
# call goes to `native` (vLLM) or the composite (the kit).
#
# vLLM's op has two overloads. `op(...)` is functional: before it calls an in-place provider it clones `x` and
# `x_residual` (`IrOpImpl.func_impl_fn`), so the caller's tensors keep their values. `op.maybe_inplace(...)` hands
# the provider the caller's own tensors, which vLLM's model code donates:

# %% tags=["nbval-ignore-output"]
if ir is not None:
    x, r = args[0].clone(), args[1].clone()
    with op.set_priority([vllm_plugin.PROVIDER, "native"]):
        op(x, r, *args[2:])
        print("op(...) left x and x_residual alone:  ", torch.equal(x, args[0]) and torch.equal(r, args[1]))
        op.maybe_inplace(x, r, *args[2:])
        print("op.maybe_inplace(...) wrote both:     ", not torch.equal(x, args[0]) and not torch.equal(r, args[1]))

# %% [markdown]
# When vLLM compiles a model, its lowering pass (`vllm/compilation/passes/ir/lowering_pass.py`) picks the provider
# on the graph's FakeTensors (`op.dispatch(*fake_args)`) and traces its `func_impl_fn` into the graph. A FakeTensor
# has no data pointer, so a raw Triton launch cannot be traced: the plugin's provider calls the kit's registered op
# (with its fake implementation), and the trace is two clones and that one opaque op:

# %% tags=["nbval-ignore-output"]
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx

if ir is not None:
    with op.set_priority([vllm_plugin.PROVIDER, "native"]):
        with FakeTensorMode() as mode:
            impl = op.dispatch(*(mode.from_tensor(a) if torch.is_tensor(a) else a for a in args))
        graph = make_fx(impl.func_impl_fn, tracing_mode="fake")(*args)
    print("chosen on FakeTensors:", impl.provider)
    print("traced:", [str(n.target) for n in graph.graph.nodes if n.op == "call_function"])

# %% [markdown]
# So `supports_args` reads only what a FakeTensor knows: device, dtype, shape, strides, modes. And vLLM compiles with
# a symbolic token count: on an unbacked one (vllm-project/vllm#39358) the answer must still be a plain `bool`, with
# no guard on the count. What only run time knows (pointer alignment, overlap, and the row threshold when the count
# was symbolic) is decided inside the op on every call, which takes the composite when it fails:

# %%
from torch.fx.experimental.symbolic_shapes import ShapeEnv

shapes = ShapeEnv()
with FakeTensorMode(shape_env=shapes):
    tokens = shapes.create_unbacked_symint()
    fake = [torch.empty(tokens, 4096, dtype=torch.bfloat16, device=DEVICE) for _ in range(2)]
    verdict = vllm_plugin.fused_add_rms_norm_supports_args(*fake, torch.empty(4096, device=DEVICE), 1e-6)
print(f"token count {tokens}: supports_args -> {type(verdict).__name__} {verdict}, guards added: {len(shapes.guards)}")

# %% [markdown]
# Under Inductor, vLLM's compiler, the provider's writes are functionalized as the kit's own in-place calls were
# above (`auto_functionalized_v2`), and they stay in the graph as `copy_` back into `x` and `x_residual` until
# Inductor's reinplacing pass (`reinplace_inplaceable_ops`) sees that nothing reads the old values and calls the op
# on the inputs themselves. The graph before that pass, then the call in the code Inductor generates:

# %% tags=["nbval-ignore-output"]
from torch._inductor import config as inductor_config
from torch._inductor.utils import run_and_get_code

before = []
x, r, w = FusedCaseSpec(rows=ROWS, cols=64).build(seed=9, device=DEVICE).args()
def record(graph):
    before.extend(str(n.target).replace("torch.ops.", "") for n in graph.nodes if n.op == "call_function")

with inductor_config.patch(post_grad_custom_post_pass=record), torch.no_grad():
    _, codes = run_and_get_code(torch.compile(vllm_plugin.fused_add_rms_norm, fullgraph=True), x, r, w, 1e-6)
print("before reinplacing:", before)
print("generated:", [line.strip() for c in codes for line in c.splitlines() if line.strip().startswith("torch.ops")])

# %% [markdown]
# The file a learner submits to vLLM cannot import the kit. `tools/make_upstream.py` generates it,
# `upstream/vllm_triton_layernorm.py`, from the kit's one implementation: the kernels, the launch rule and the row
# helpers are copied by name; the glue registers vLLM-style opaque ops (`direct_register_custom_op`, each with a fake
# implementation), imports Triton through `vllm.triton_utils` and reads `supported` from vLLM's platform object.
# `tests/test_vllm_upstream.py` checks that it is current and within vLLM's pre-commit rules:

# %%
source = (runtime.ROOT / "upstream" / "vllm_triton_layernorm.py").read_text().splitlines()
shown = ("from vllm", "SUPPORTED =", "direct_register_custom_op(", "def rms_norm(", "def fused_add_rms_norm(")
print("\n".join(source[:2] + [line for line in source if line.startswith(shown)]))

# %% [markdown]
# Two differences from the kit's own dispatch are deliberate. `supports_args` never reads the kit's force switch:
# vLLM's rule is that enablement does not hang on global state such as an environment variable (the priority list
# decides, and `native` ends it). And `supported` is the platform only: the in-tree file says CUDA, sm_80 or newer;
# the plugin also counts Triton's interpreter, so this CPU runs it.
#
# ## Recap
#
# - The contract of an in-place op covers what it writes, what may alias, and what the caller observes after an
#   exception: the kit's form computes and runs every check its writes could fail before it writes, so a failed call
#   leaves its inputs untouched (a leaf that requires grad or a broadcasting `x` included).
# - `mutates_args` declares the writes; functionalization turns the op into a functional call plus copies under
#   `torch.compile`; `opcheck`'s schema test catches a write the declaration omits.
# - Where an intermediate is rounded is part of the contract: the variance of the rounded residual stays within one
#   ulp and so within tolerance, and only a comparison that counts differing elements sees it.
# - Overlapping `x`, `residual` and `weight` go to the composite (conservatively, on byte ranges); a kernel run on
#   aliased memory reads what another program already wrote.
# - The fusion saves one pass in five against the unfused pair and none against `torch.compile`'s own fusion: both
#   baselines belong in the matrix, and only a GPU run answers the reviewer.
# - A vLLM provider runs only when the priority names it; it calls a registered op (a compiler traces it on
#   FakeTensors), its `supports_args` reads metadata only and never guards on the token count, and vLLM's functional
#   overload clones `x` and `x_residual` before an in-place provider writes them.
#
# ## Knowledge check
#
# Answer each question in your own words first, then open the guide.
#
# **1. A colleague's in-place kernel writes `residual` first, then computes the output from `residual`. All tests
# pass with separate buffers. Which test do you add, and what does it catch?**

# %% [markdown]
# <details><summary>Answer guide</summary>
#
# Call it with `x` and `residual` sharing memory (the same tensor, or one shifted by a row) and compare with the
# composite. With separate buffers reading `residual` after writing it is harmless; with aliasing, the write has
# already changed what the computation reads, so the output (or another program's rows) comes from overwritten
# values. Then decide the contract: the kit sends such calls to the composite (`no_overlap`), and the test asserts
# both the route and the values.
# </details>

# %% [markdown]
# **2. You register an in-place custom op with `mutates_args=()` because "the compiler does not need to know". What
# can go wrong, and which check tells you before a user does?**

# %% [markdown]
# <details><summary>Answer guide</summary>
#
# The compiler treats the argument as unchanged: functionalization records no write, so the compiler may move the
# op past other reads of that tensor, reuse a value it computed before the call, or let the argument share a buffer
# with something else. Compiled and eager runs then differ, silently and only in some graphs.
# `torch.library.opcheck`'s schema test runs the op and compares each argument before and after the call: an
# undeclared write fails it, as the toy op showed.
# </details>

# %% [markdown]
# **3. Your kernel takes the variance of the new residual after rounding it to bf16. Every test at the kit's bf16
# tolerance passes. Is it correct, and how would a test show it?**

# %% [markdown]
# <details><summary>Answer guide</summary>
#
# No: vLLM's native function takes the variance of the unrounded fp32 sum, and that rounding point is part of the
# contract. The difference is at most about one ulp per output, inside the tolerance, so an `allclose` test cannot
# see it. A test can: count the elements that differ from the native function (a kernel that rounds at the same
# points differs on almost none), or use inputs whose sums all round the same way, where the rounded variance moves
# every output.
# </details>

# %% [markdown]
# **4. The PR shows the fused kernel beating `add` followed by `F.rms_norm` on every shape. What does a vLLM
# reviewer ask next?**

# %% [markdown]
# <details><summary>Answer guide</summary>
#
# Whether it beats `torch.compile` of the same pair, since vLLM compiles its models and inductor fuses the add and
# the norm itself: against that baseline the bytes model predicts no saving, so any gain must be shown by a GPU
# measurement of the predeclared matrix (decode M=1 included, with the expected non-wins), with the environment and
# raw samples. They will also ask which contract the values match (vLLM's native rounding points, not the eager
# pair's), and that `supports_args` sends aliased and unsupported calls to the native function.
# </details>
