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
# # 03 · The eligibility predicate: when the fast path runs, and why not
#
# **What you will do**: read each eligibility condition with the reason it exists, ask `explain()` why a call falls
# back, and measure what a call outside the region costs on this machine.
#
# **What you need**: lessons 01 and 02; this CPU.
#
# **Time**: about 25 minutes.
#
# **What you will learn**
# - each condition of the RMSNorm predicate, its category and *why* it exists;
# - how `fastpath_lib.explain()` reports every failed condition with the actual and the required value;
# - how to read the boundary of a condition (15/16/17/24 columns, transposed, offsets, threshold − 1), one change
#   at a time;
# - the mode and tensor-kind conditions (forward-mode AD, `torch.func` transforms, nested and other tensor kinds,
#   channels-last);
# - why the dispatch evaluates the same rules a second, cheaper way, and what a call outside the region costs;
# - how to explore the predicate interactively (`route_explorer()`).
#
# The design follows PyTorch's SDPA selector: a list of small named checks, each able to say why it failed, in a
# module that imports no GPU code, so it is tested on any machine.

# %% tags=["nbval-ignore-output"]
import torch
import fastpath_lib
# no CUDA: run the kernels in Triton's CPU interpreter (a no-op on a GPU)
fastpath_lib.use_interpreter()
from fastpath_lib import runtime

DEVICE = runtime.lesson_device()  # "cuda" on a GPU, else "cpu"; prints the mode and versions
_ = torch.manual_seed(0)

# %matplotlib inline
import pandas as pd
from fastpath_lib.cases import CaseSpec
from fastpath_lib.rmsnorm.predicate import ALLOWED_MODES, PREDICATE, limits_for

LIMITS = limits_for(DEVICE)
pd.set_option("display.max_colwidth", None)  # every reason in full

# %% [markdown]
# ## The conditions
#
# `PREDICATE.table()` lists every condition with its category, the rule in words, why it exists, and the boundary
# points it declares (each marked *in* or *out*). The tests and the PR note's scope section are generated from
# these same declarations. The table below adds a `kind` column, what each condition protects, read from the same
# declarations:
#
# - `mode`: the **mode** and **tensor kind** conditions hand calls to `F.rms_norm`'s own rules;
# - `speed`: the kernel runs on both sides of the condition, correct on both, and is predicted to serve the calls
#   outside it slower than the baseline (a prediction a GPU measurement confirms or corrects);
# - `support`: the rest, what Triton and the kernels support and what a correct result needs; outside `cols`, for
#   one, no kernel launches at all (the launch rule has no block for a row wider than `MAX_COLS`).
#
# The docs and the PR note end every speed condition's *why* with one clause saying its cost is a prediction; the
# table shows each *why* without it, and the clause once, under the table.

# %%
from IPython.display import display
from fastpath_lib.eligibility import SPEED_PREDICTION


def kind(condition):
    if condition.category in ("mode", "tensor kind"):
        return "mode"
    return "speed" if condition.speed else "support"


conditions = pd.DataFrame(PREDICATE.table())
conditions.insert(1, "kind", [kind(c) for c in PREDICATE.conditions])
conditions["why"] = [c.why for c in PREDICATE.conditions]
display(conditions)
print(f"Every speed condition's why ends: {SPEED_PREDICTION}.")

# %% [markdown]
# The categories a reviewer will ask about, and how many conditions each has:

# %%
conditions.groupby('category', sort=False).size()

# %% [markdown]
# Modes that do *not* force the fallback are declared too, each with the reason it is safe:

# %%
pd.DataFrame(ALLOWED_MODES.items(), columns=['mode', 'why the fast path stays on'])

# %% [markdown]
# ## `explain()` inside and outside the boundary
#
# `explain` takes the same arguments as `rms_norm` and returns a `Decision`: `route`, `eligible`, `reasons` (every
# failed condition, with the actual and the required value) and `failed` (the names). We build cases with
# `CaseSpec`, each changing **one thing** of an eligible base case (R×64 fp32 with an fp32 weight, R the row
# threshold in force here), so each case out of the region fails exactly one condition:

# %%
R = LIMITS.min_rows
cases = {
    "cols=15": CaseSpec(rows=R, cols=15), "cols=16": CaseSpec(rows=R, cols=16),
    "cols=17": CaseSpec(rows=R, cols=17), "cols=24": CaseSpec(rows=R, cols=24),
    "transposed": CaseSpec(rows=R, cols=64, layout="transposed"),
    "offset 4 bytes": CaseSpec(rows=R, cols=64, offset=1),
    "offset 8 bytes": CaseSpec(rows=R, cols=64, offset=2),
    "offset 16 bytes": CaseSpec(rows=R, cols=64, offset=4),
    "threshold-1 rows": CaseSpec(rows=R - 1, cols=64), "threshold rows": CaseSpec(rows=R, cols=64),
    # the weight stays fp32
    "input fp64": CaseSpec(rows=R, cols=64, dtype=torch.float64, weight=torch.float32),
}
decisions = {name: fastpath_lib.explain(*spec.build(seed=0, device=DEVICE).args())
             for name, spec in cases.items()}
assert all(len(d.failed) <= 1 for d in decisions.values()), "a case changed more than one thing"
pd.DataFrame([{"case": name, "route": d.route, "failed": ", ".join(d.failed)}
              for name, d in decisions.items()])

# %% [markdown]
# The fp64 case keeps the base case's fp32 weight, so it changes one thing; had it built an fp64 weight too
# (`weight="same"`), it would have changed two things and failed `weight_dtype` as well. Its decision names exactly
# one failed condition:

# %%
decisions["input fp64"]

# %% [markdown]
# Widths 15 and 17 fail only `row_stride_alignment`: in fp32 a row of 15 floats is 60 bytes, so most rows start off
# a 16-byte boundary; 24 columns (96 bytes) are aligned although 24 is not a power of two. An input that
# starts 4 or 8 bytes past a 16-byte boundary fails `input_alignment`. The kernel would still be correct (lesson 02
# ran 181 columns); lesson 02's compiled-code table shows what changes: compiled for an aligned launch the kernel
# loads and stores 16 bytes per instruction, for a misaligned one a single element (2 bytes in fp16). That it is
# then slower than `F.rms_norm` is the prediction behind the condition, until a GPU run measures it. A
# `Decision` renders its reasons in full; here for a case that fails several conditions at once. `explain` runs
# *every* condition, so the user sees every reason that applies to the input as given, not only the first. A
# condition that needs a row layout stays silent while the layout fails: the row stride's alignment is measured on
# rows one stride apart, so this case's width (17 fp64 elements = 136 bytes, not a multiple of 16) is reported only
# once the transpose is fixed (the line the cell prints first):

# %%
x = (CaseSpec(rows=R - 1, cols=17, dtype=torch.float64, layout="transposed")
     .build(seed=0, device=DEVICE).x)
print("with the transpose fixed (x.contiguous()), failing:", fastpath_lib.explain(x.contiguous(), [17]).failed)
fastpath_lib.explain(x, [17])

# %% [markdown]
# The same numbers through the fallback switch: `force_fallback()` adds the `forced` reason and restores the
# previous state when the block ends (also on an exception).

# %%
x = torch.randn(2 * R, 64, device=DEVICE)
with fastpath_lib.force_fallback():
    print(fastpath_lib.explain(x, [64]))
print(fastpath_lib.explain(x, [64]))

# %% [markdown]
# Under `torch.compile` the op sees fake tensors while tracing: they have no data pointer, so the alignment
# conditions answer "unknown until run time" and the real decision is taken when the graph runs:

# %%
from torch._subclasses.fake_tensor import FakeTensorMode

with FakeTensorMode():
    print(fastpath_lib.explain(torch.empty(2 * R, 64, device=DEVICE), [64]))

# %% [markdown]
# ## Modes and tensor kinds: what `F.rms_norm` serves with its own rules
#
# Forward-mode AD (dual tensors), `torch.func` transforms (vmap, grad, vjp, jvp, jacrev, jacfwd, hessian), tensor
# kinds other than plain strided tensors (nested, sparse) and channels-last inputs all take the fallback:
# `F.rms_norm` already has exact tangents and batching rules, handles nested tensors and keeps channels-last strides;
# on a sparse input it raises its own error, and so does the fallback.
# A DTensor is different: the op's sharding rule runs the op on each rank's local shard, and the route is decided on
# that shard (lesson 09).
# One example of each (under `vmap`, `explain` runs inside the transform, on the per-sample view):

# %%
import torch.autograd.forward_ad as fwAD

x, w = torch.randn(2 * R, 64, device=DEVICE), torch.randn(64, device=DEVICE)
with fwAD.dual_level():
    print("forward AD:   ",
          fastpath_lib.explain(fwAD.make_dual(x, torch.randn_like(x)), [64], w).reasons)
seen = {}
def probe(sample):
    seen["vmap"] = fastpath_lib.explain(sample, [64], w).reasons
    return sample
_ = torch.func.vmap(probe)(x.view(2, R, 64))
print("vmap:         ", seen["vmap"])
nested = torch.nested.nested_tensor([torch.randn(3, 64), torch.randn(5, 64)],
                                    layout=torch.jagged).to(DEVICE)
print("nested:       ", fastpath_lib.explain(nested, [64], w).reasons)
channels_last = torch.randn(2, 4, R, 64, device=DEVICE).to(memory_format=torch.channels_last)
print("channels_last:", fastpath_lib.explain(channels_last, [64], w).failed)

# %% [markdown]
# A channels-last 4-D input also fails the stride conditions (its last dimension has stride 4, the channel count);
# `memory_format` is declared on its own because it names the *contract* reason: `F.rms_norm` returns channels-last
# strides for it, and the kernel writes row-major rows. Lesson 01 shows the forward-mode AD case from the user's
# side: the tangent equals `F.rms_norm`'s.
#
# ## Two evaluations of one predicate
#
# `explain` is for people: it runs every condition and formats a reason for each failure, work of the order of a
# whole fallback call (both measured below, in "What a call outside the region costs"). The dispatch cannot pay
# that on every call, so `fastpath_lib.rmsnorm.predicate` states the same rules a second time as booleans:
# `eligible` (cheapest and most decisive first, short-circuiting, no strings, no environment reads; under
# `torch.compile` each test becomes a guard) and `runtime_eligible` (what only run time knows: data-pointer
# alignment, CUDA-graph capture). A hypothesis test in `tests/` checks that the two evaluations agree on the inputs
# it generates (a test gives evidence on the cases it runs, not a proof).

# %%
from fastpath_lib.rmsnorm.predicate import eligible, runtime_eligible

rows = []
for name in ("cols=16", "cols=17", "transposed", "offset 4 bytes", "threshold-1 rows",
             "input fp64"):
    x, ns, w = cases[name].build(seed=0, device=DEVICE).args()
    rows.append({"case": name, "eligible (static)": eligible(x, ns, w, False),
                 "runtime_eligible (pointers)": runtime_eligible(x, w),
                 "explain().eligible": fastpath_lib.explain(x, ns, w).eligible})
pd.DataFrame(rows)

# %% [markdown]
# The misaligned input passes the static decision and fails at run time: its shape and strides are fine, only its
# data pointer is off (the dispatch asks `runtime_eligible` only after the static decision passed). Reasons are built
# only on demand: `explain()`, or `record_routes(reasons=True)`, which counts the failed conditions of the fallback
# calls it sees (plain `record_routes()` counts routes only):

# %%
with fastpath_lib.record_routes(reasons=True) as routes:
    for name in ("cols=16", "cols=17", "transposed", "threshold-1 rows"):
        fastpath_lib.rms_norm(*cases[name].build(seed=0, device=DEVICE).args())
print(routes, routes.reasons)

# %% [markdown]
# ## What a call outside the region costs
#
# Outside its region the op must cost little more than `F.rms_norm` (the kit's target: at most
# `host.TARGET_RATIO` times its host time): on a GPU an M=1 decode row is expected to be
# launch-bound, so every microsecond of Python per call adds to the very small-row regression the predicate exists to
# prevent. So a failing `eligible` calls `F.rms_norm` directly, and the reasons are built only by `explain()`.
# Measured here side by side by the kit's one host-timing method (`fastpath_lib.bench.hostmethod.fastest_blocks`:
# short interleaved blocks of calls, the fastest block of each side; [lesson 05](05_benchmark_matrix.ipynb), section 2,
# says what it resolves and what it cannot). The ratio line gives the ratio, the band this run resolves it to, and
# what the two say about the kit's target; the last line times `explain()`, which evaluates every condition and
# builds the reasons: roughly what building them on every call would add, less the boolean check the dispatch already
# pays. This is **host time on this CPU**, not GPU performance:

# %% tags=["nbval-ignore-output"]
import torch.nn.functional as F
from fastpath_lib.bench import host, hostmethod

decode = host.fallback_cases()[0]  # M=1 decode row, fp16: below the row threshold, so it falls back
x, ns, w = decode.build(DEVICE).args()
print(decode.id, "x".join(map(str, x.shape)), "route:", fastpath_lib.explain(x, ns, w).route)
print(f"{hostmethod.BLOCKS} interleaved blocks of {hostmethod.CALLS} calls, the fastest block of each:")
timed = hostmethod.fastest_blocks({"F.rms_norm": lambda: F.rms_norm(x, ns, w),
                                   "fastpath_lib.rms_norm": lambda: fastpath_lib.rms_norm(x, ns, w),
                                   "explain()": lambda: fastpath_lib.explain(x, ns, w)})
for name, t in timed.items():
    print(f"{name:22} {t['best_us']:7.2f} us per call")
ratio = timed["fastpath_lib.rms_norm"]["best_us"] / timed["F.rms_norm"]["best_us"]
band = hostmethod.halves_band(timed["fastpath_lib.rms_norm"]["samples_us"], timed["F.rms_norm"]["samples_us"])
print(f"dispatched / F.rms_norm: {ratio:.3f}, band {band:.3f}; against the kit's target (at most "
      f"{host.TARGET_RATIO}): {hostmethod.ratio_reading(ratio, band, host.TARGET_RATIO)}")
print(f"explain() (every condition and its reason): {timed['explain()']['best_us']:.1f} us per call, "
      f"{timed['explain()']['best_us'] / timed['F.rms_norm']['best_us']:.1f}x F.rms_norm's own time")

# %% [markdown]
# The ratio line's last word (`within`, `OVER`, `cannot tell` or `noise`) is what this run can say about the kit's
# target; [lesson 05](05_benchmark_matrix.ipynb), section 2, explains the band and the four readings. Under the
# interpreter a CPU call gets past the
# predicate's first line, and each fallback call timed here and in the host family leaves at its size tests (too few
# rows, a strided last dimension), so the ratio includes those tests; a CPU tensor without the interpreter leaves at the first line. What a reviewer asks
# for is the GPU host's ratio (the evidence run's host step), not this CPU's.
#
# `python -m fastpath_lib bench --family host` prints the kit's own table for this call and the host family's other
# calls ([docs/benchmarks.md](../docs/benchmarks.md#benchmarks) lists them). Others make the same choice in other ways:
# vLLM's `CustomOp` picks its forward once, when a module is built, and SDPA checks its conditions in C++.

# %% [markdown]
# ## A map of the alignment and row boundaries
#
# Each cell below is one `explain` call (no kernel runs): rows around the threshold × widths 1 to 48, in fp32 and
# fp16. Eligible widths are multiples of 4 elements in fp32 and of 8 in fp16 (16 bytes), from the threshold up.

# %%
import matplotlib.pyplot as plt

widths, row_counts = range(1, 49), [R - 1, R, R + 1]
fig, axes = plt.subplots(2, 1, figsize=(10, 3), sharex=True)
for ax, dtype in zip(axes, (torch.float32, torch.float16)):
    grid = [[fastpath_lib.explain(torch.empty(r, c, device=DEVICE, dtype=dtype), [c]).eligible
             for c in widths]
            for r in row_counts]
    ax.imshow(grid, cmap="Greens", aspect="auto", extent=(0.5, 48.5, len(row_counts) - 0.5, -0.5))
    ax.set_yticks(range(len(row_counts)), [f"{r} rows" for r in row_counts])
    ax.set_title(f"{str(dtype)[6:]}: green = triton route", fontsize=9)
axes[-1].set_xlabel("cols")
fig.tight_layout()

# %% [markdown]
# ## The explorer
#
# Change a case with the controls and watch the route and the reasons. It only evaluates the predicate, so it
# answers instantly on any machine. (Widget output is not compared by the notebook tests.)

# %% tags=["nbval-ignore-output"]
from fastpath_lib.widgets import route_explorer

route_explorer()

# %% [markdown]
# ## Recap
#
# - Each condition has a name, a category, a rule, a reason to exist and declared boundary points.
# - `explain` runs every condition and reports actual vs required values; invalid calls go to the fallback.
# - Some limits protect correctness, some protect speed; the row threshold comes from a GPU sweep (conservative
#   until one is recorded).
# - Modes and tensor kinds with their own rules in `F.rms_norm` (forward AD, `torch.func`, nested, channels-last)
#   take the fallback, which is `F.rms_norm` itself, so they behave exactly as `F.rms_norm`.
# - The dispatch decides with booleans (`eligible`, `runtime_eligible`); reasons are built only on demand.
#
# ## Knowledge check
#
# Answer each question in your own words first, then open the guide.
#
# **1. An fp16 input with 12 columns falls back, an fp32 one with 12 columns does not. Why? Check with `explain`.**

# %% [markdown]
# <details><summary>Answer guide</summary>
#
# The row stride in bytes: 12 fp16 values are 24 bytes, not a multiple of 16, so every other row starts off a
# 16-byte boundary and `row_stride_alignment` fails; 12 fp32 values are 48 bytes, a multiple of 16. The kernel
# would be correct either way; the condition protects speed (vector loads), as lesson 02's compiled code shows.
# </details>

# %% [markdown]
# **2. Why does `explain` report *all* failed conditions, while the dispatch stops at the first?**

# %% [markdown]
# <details><summary>Answer guide</summary>
#
# They serve different readers. A person fixing a call wants every reason at once, not one per attempt, and can
# afford the time `explain()` takes (measured in this lesson). The dispatch runs on every call and must cost little
# more than `F.rms_norm` outside the region, so it short-circuits on booleans, cheapest and most decisive first, and
# formats nothing. A hypothesis test checks that the two agree on the inputs it generates.
# </details>

# %% [markdown]
# **3. A boundary case with an fp64 input *and* an fp64 weight fails two conditions. Why is that a weaker test than
# two cases that each change one thing?**

# %% [markdown]
# <details><summary>Answer guide</summary>
#
# With two changes, a predicate that forgot one of the checks still sends the call to the fallback (the other
# check catches it), so the test passes and the missing check goes unnoticed. One change per case means each case
# fails exactly the condition it is about, and removing that condition makes the case take the wrong route.
# </details>

# %% [markdown]
# **4. What would go wrong if the fake-tensor case answered "eligible" instead of "unknown"?**

# %% [markdown]
# <details><summary>Answer guide</summary>
#
# A fake tensor has no data pointer, so alignment cannot be known while tracing. Answering "eligible" would promise
# the Triton route for a graph that may later run on a misaligned view; the op must re-check the pointer at run time
# (`runtime_eligible`) and fall back there, and the trace-time answer should say so honestly.
# </details>

# %% [markdown]
# ## Read next
#
# - [Exercise 03](../exercises/ex03_predicate.ipynb): predicate conditions for a changed spec, each with its reason.
# - [Lesson 04](04_boundary_tests.ipynb): tests generated from the predicate's boundaries.
