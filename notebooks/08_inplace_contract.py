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
# # 08 · The in-place fused op: what it writes, what may alias, where it rounds
#
# A pre-norm transformer block (Llama's, for one) ends each sub-layer with
# `residual = x + residual; x = rms_norm(residual) * weight`. Serving stacks fuse the two into one op,
# `fused_add_rms_norm(x, residual, weight, eps) -> (out, residual)`, whose fast implementations write both results
# *into their inputs*. The kit builds it as its second operator
# (`fastpath_lib/fused/`), with the same pipeline as RMSNorm: a written reference, a predicate, Triton kernels,
# custom ops, boundary points and a matrix.
#
# **What you will do**: run the in-place form, break it on purpose (an exception halfway, an undeclared write, a
# rounding moved, aliased memory), and see which check catches each; then read the fused op's predeclared matrix.
#
# **What you need**: lessons 01 (a contract), 03 (a predicate) and 05 (a predeclared matrix); this CPU (the kernels
# run in Triton's interpreter). Exercise 12 grades what this lesson teaches.
#
# **Time**: about 40 minutes.
#
# **What you will learn**
# - that the contract of an in-place op includes what it writes, what may alias, and what a caller observes after an
#   exception;
# - how `torch.library.custom_op(mutates_args=...)` declares the writes, what functionalization makes of them under
#   `torch.compile`, and how `opcheck`'s schema test catches a write nobody declared;
# - that an intermediate's precision is part of the contract (which sum is normalized, and where it is rounded);
# - why overlapping memory goes to the fallback, and what a kernel does to aliased inputs when it does not;
# - the mechanism of the fusion (the bytes it saves), and the baselines a reviewer measures it against.

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

ROWS = 2 * limits_for(DEVICE).min_rows  # past the row threshold on any device

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
# in-place op. A mutable custom op without a `Functionalize` kernel is wrapped in `auto_functionalized_v2`, which
# runs it on copies; the kit registers a `Functionalize` kernel for `fastpath::fused_add_rms_norm_`, which calls the
# functional op `fastpath::fused_add_rms_norm` instead. Either way the graph computes the written values as new
# tensors; how they reach the caller's tensors is AOTAutograd's choice, by `keep_inference_input_mutations`. Its
# default, `False`, which the backend below keeps, returns them as graph outputs and copies them into the caller's
# tensors after the graph; the default Inductor backend sets it to `True` for inference graphs, which keep the
# mutation in the graph as a `copy_()` into the input at the graph's end. Here is a decoder-layer-shaped function
# (two sub-layers, each ending in the in-place add + RMSNorm), compiled with `fullgraph=True` (no graph break), with
# a backend that prints the graph after functionalization:

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
# Each call became the functional op `fastpath.fused_add_rms_norm.default`, which returns the output and the new
# residual, and the kernel still ran (the routes). With this backend the write into the caller's `h` is not inside
# the graph: the compiled function returns the new value and AOTAutograd copies it into `h` afterwards, so the caller
# sees what eager mode shows. None of this works unless the
# schema is honest: an undeclared write would be invisible to functionalization, and the compiled graph could read a
# stale copy. (`tests/fused/test_fused_ops.py` also compiles the functional form, with its Triton backward.)
#
# ## An intermediate's precision is part of the contract
#
# The contract (vLLM's native function, above) normalizes the *unrounded* fp32 sum `s`: both the values it scales
# and their mean square come from `s`, not from the new residual, which is `s` rounded to bf16 or fp16. An unfused
# pair (`h = x + residual`, then `F.rms_norm(h)`) can only see the rounded sum. Is that a difference anyone could
# observe? Below, against the native function: a variant that normalizes `s` but takes the mean square of the
# rounded residual (the plausible mistake of a kernel author), `F.rms_norm` of the fp32 sum, the eager pair, which
# normalizes the rounded sum, and a model of the rounding points of vLLM's own CUDA kernel (the "vLLM kernel" column:
# `vllm_kernel_points` stores the sum in x's dtype and normalizes what it stored, then rounds as the native function
# does). The model is written from `fused_add_rms_norm_kernel` in `csrc/layernorm_kernels.cu` on vLLM's main branch;
# the pinned 0.33.0 wheel ships that kernel only compiled, in the extension `vllm._C_stable_libtorch` behind
# `torch.ops._C.fused_add_rms_norm`, and nothing here reads or runs it. The weight is
# all ones, so the product with the weight rounds nothing; the rows are random bf16 and fp16, and a bf16 row built so
# that every element's sum rounds the same way (`1 + 0.005` rounds up to the next bf16 value).

# %%
def variance_of_rounded(x, residual, weight, eps=None):
    """The plausible mistake: normalize the fp32 sum, with the mean square of the residual *after* rounding."""
    s = x.float() + residual.float()
    new_residual = s.to(x.dtype)
    var = new_residual.float().pow(2).mean(-1, keepdim=True)
    n = s * torch.rsqrt(var + default_eps(x.dtype))
    return (n.to(weight.dtype) * weight).to(x.dtype), new_residual

def rms_norm_of_fp32_sum(x, residual, weight, eps=None):
    s = x.float() + residual.float()
    return F.rms_norm(s, [x.shape[-1]], weight.float(), default_eps(x.dtype)).to(x.dtype), s.to(x.dtype)

def unfused_pair(x, residual, weight, eps=None):  # normalizes the rounded sum h
    h = x + residual
    return F.rms_norm(h, [x.shape[-1]], weight, default_eps(x.dtype)), h

def vllm_kernel_points(x, residual, weight, eps=None):  # the native function's steps, on the rounded sum h
    h = x + residual
    return reference.native(h, torch.zeros_like(h), weight, eps)


# %%
def inputs(kind, dtype, weight=None):
    g = torch.Generator().manual_seed(4)
    if kind == "random":
        x, r = (torch.randn(ROWS, 256, generator=g) for _ in range(2))
    else:  # every sum 1.005: rounded up in bf16, so the rounded variance is larger
        x, r = torch.ones(ROWS, 256), torch.full((ROWS, 256), 0.005)
    w = torch.ones(256) if weight is None else weight
    return x.to(DEVICE, dtype), r.to(DEVICE, dtype), w.to(DEVICE, dtype)

VARIANTS = {"rounded variance": variance_of_rounded, "F.rms_norm(fp32 sum)": rms_norm_of_fp32_sum,
            "add, F.rms_norm": unfused_pair, "vLLM kernel": vllm_kernel_points,
            "kit": fastpath_lib.fused_add_rms_norm}

def differ(kind, dtype, weight=None):
    x, r, w = inputs(kind, dtype, weight)
    want, want_res = reference.native(x, r, w)
    atol, rtol = reference.tolerance(dtype)
    row = {"inputs": kind, "dtype": str(dtype)[6:]}
    for name, fn in VARIANTS.items():
        out, res = fn(x, r, w)
        row[f"{name}: differ"] = f"{(out != want).float().mean().item():.1%}"
        row[f"{name}: in tol"] = torch.allclose(out.float(), want.float(), atol=atol, rtol=rtol)
        assert torch.equal(res, want_res)  # the new residual is the same everywhere
    return row

prec = pd.DataFrame([differ(kind, dtype) for kind, dtype in
                     (("random", torch.bfloat16), ("random", torch.float16), ("sums round up", torch.bfloat16))])
prec

# %% [markdown]
# Read the table column by column. The new residual is bitwise the same in every implementation (the assert): the
# sum is rounded once. The *output* is not. Taking the mean square from the rounded residual moves a few percent of
# the random outputs, and on the rows built to round one way it moves every output, yet each one stays inside the
# kit's tolerance (one unit in the last place of bf16 or fp16, relative). A tolerance test cannot see this mistake;
# counting the elements that differ from the native function can, because the kit's kernel rounds at the same points
# and differs from it on none or almost none (the order of its fp32 sum may flip a rare rounding).
#
# The eager pair differs from the native function too (on the random rows, on more elements than the rounded-variance
# mistake, and on the same ones as vLLM's kernel's rounding points), and the column beside it says why:
# `F.rms_norm` of the fp32 sum matches the native function, so the
# difference is not `F.rms_norm`'s arithmetic but *which sum it normalizes*: the eager pair can only normalize the
# rounded `h`. (Exercise 02's kernel rounds where the eager pair rounds, by its spec, and differs from it only in the
# last bits of `rstd`; it is a different contract from this op's, and the table is the measure of the difference.)
#
# A weight other than ones adds a second difference: the native function rounds the normalized value to
# the weight's dtype before it multiplies, `F.rms_norm` multiplies in fp32 and rounds once. Measured with a random
# weight in the same bf16 rows, against the op's tolerance and against the bound the bench holds baselines to
# (`reference.rounded_sum_tolerance`):

# %%
w_random = torch.rand(256, generator=torch.Generator().manual_seed(5)) + 0.5
row = differ("random", torch.bfloat16, w_random)
x, r, w = inputs("random", torch.bfloat16, w_random)
want, _ = reference.native(x, r, w)
batol, brtol = reference.rounded_sum_tolerance(torch.bfloat16)
print("op's tolerance:", reference.tolerance(torch.bfloat16), " baselines' bound: atol", batol, "rtol", round(brtol, 5))
for name, fn in VARIANTS.items():
    out = fn(x, r, w)[0].float()
    print(f"{name:22} differ {row[f'{name}: differ']:>6}   in tol {row[f'{name}: in tol']!s:5}   in the "
          f"baselines' bound {torch.allclose(out, want.float(), atol=batol, rtol=brtol)}")

# %% [markdown]
# With a weight, the roundings after the normalization come into play: vLLM's kernel's rounding points and the
# rounded-variance mistake land outside the op's one-ulp tolerance on a few elements. Normalizing the rounded sum
# `h` moves each normalized value by up to `2u / (1 - u)` relative (`u = eps / 2`: one rounding of `h`, carried
# through its mean square), about one ulp more, before the same roundings as the native function. That is the bound
# the bench holds the fused op's baselines to (the op's `rtol` plus that much: `OpSpec.baseline_tolerances`), while
# the op's own routes keep one ulp: a baseline that rounds one intermediate differently computes the same function,
# and one that computes another (no normalization, another eps) is refused. Every variant here is inside that bound,
# the rounded-variance mistake too: a bound on values cannot show where a kernel rounds; counting the elements that
# differ can.
#
# So the unfused pair is a *baseline* for speed, not the contract for values, and a PR must say which one it
# matched.
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
# A memory-bound op is as fast as the bytes it moves. An unfused pair of two kernels (an add, then a fused norm)
# reads `x` and `residual` and writes the sum, then reads the sum again and writes the output: five passes over
# `rows × cols`. The fused kernel reads `x` and `residual` once and writes the new residual and the output: four.
# The kit's bytes model (`fastpath_lib.fused.spec.FUSED_SPEC.bytes_moved`) computes both; the weight is read once
# per call either way. An eager chain of smaller ops (vLLM's native function run eagerly) also writes and re-reads
# its fp32 temporaries, so it moves five passes or more.

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
# Against the two-kernel pair, one pass in five is the most a memory-bound fused kernel can save, and a little less
# where the weight's read is not negligible (decode). Against an eager chain, which moves more than the model's five
# passes, the saving can be larger. These are bounds from the mechanism; the time is a measurement.
#
# ## The question a vLLM reviewer asks first
#
# *Does it beat the unfused pair, and does it beat `torch.compile`'s own fusion of the pair?* vLLM compiles its
# models: inductor can fuse the add and the norm into one generated kernel, which moves the same four passes as
# ours. Against that baseline the bytes model predicts no saving, so a claim of speed there needs a measurement, and
# so does any claim at all. The kit's operator spec (`fastpath_lib.opspec.get("fused_add_rms_norm")`) declares the
# matrix before anything is timed: the baselines every case is timed against, the cases, each with the outcome its
# author expects on a GPU (a prediction, not a result) and why, and the bytes each implementation moves (from the
# spec's bytes models, not typed). The models count passes, not temporaries: `unfused_eager` is given the pair's
# five passes, a lower bound for the eager chain (the prefill case says "5 or more"). `vllm_c` is timed as vLLM's
# functional overload calls it: clones of `x` and the residual (four passes), then its kernel in place (four more),
# so its column is about twice the fused one. vLLM's `RMSNorm` layer calls the op's `maybe_inplace` overload, which
# runs the kernel in place without the clones: four passes, those of `MiB fused`:

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
# ## Recap
#
# - The contract of an in-place op covers what it writes, what may alias, and what the caller observes after an
#   exception: the kit's form computes and runs every check its writes could fail before it writes, so a failed call
#   leaves its inputs untouched (a leaf that requires grad or a broadcasting `x` included).
# - `mutates_args` declares the writes; functionalization turns the op into a functional call plus copies under
#   `torch.compile`; `opcheck`'s schema test catches a write the declaration omits.
# - Which sum is normalized, and where it is rounded, is part of the contract: the contract normalizes the unrounded
#   fp32 sum. Taking only the variance from the rounded sum, or normalizing the rounded sum (the eager pair, vLLM's
#   kernel), stays within the op's one-ulp tolerance with the weight all ones, not always with a random weight, and
#   always within the bound the bench holds baselines to: the op's `rtol` plus one rounding of the sum carried
#   through the normalization, about two ulps. Only a comparison that counts differing elements sees the rounding
#   point.
# - Overlapping `x`, `residual` and `weight` go to the composite (conservatively, on byte ranges); a kernel run on
#   aliased memory reads what another program already wrote.
# - By the bytes model, the fusion saves one pass in five against the two-kernel pair (more against an eager chain)
#   and none against `torch.compile`'s own fusion: both baselines belong in the matrix, and only a GPU run answers
#   the reviewer.
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
# contract. The difference is about one ulp per output, at the edge of the tolerance (inside it with the weight all
# ones; with a random weight the rounding after the normalization pushes a few elements just past it), so an
# `allclose` test may well not see it. A test can: count the elements that differ from the native function (a kernel
# that rounds at the same points differs on almost none), or use inputs whose sums all round the same way, where the
# rounded variance moves every output.
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
# pair's), and that aliased and unsupported calls take the composite, which computes the contract.
# </details>

# %% [markdown]
# ## Read next
#
# - [Exercise 12](../exercises/ex12_fused_inplace_contract.ipynb): write the in-place contract's tests and catch the
#   broken implementations the grader hands them.
# - [Lesson 09](09_upstream_review.ipynb): the same ops on sharded tensors (DTensor), and the forms they take upstream.
