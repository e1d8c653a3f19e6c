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
# # 04 · Boundary tests: both routes, generated from the predicate
#
# **What you will do**: generate the boundary points from the predicate, run both routes against the reference at
# each, and add the checks a boundary point cannot make (opcheck, compile, non-finite inputs, guard bands).
#
# **What you need**: lesson 03; this CPU.
#
# **Time**: about 25 minutes.
#
# **What you will learn**
# - how boundary tests are *generated* from the predicate's declarations (`boundary_points()`), not written by hand;
# - how to run both routes (dispatched, and `force_fallback()`) against the float64 reference and assert the route;
# - why the predicate declares an 8-byte offset and a width of 24 columns, and what tiny magnitudes do to a test;
# - `torch.library.opcheck`, `torch.compile(fullgraph=True)`, autocast and non-finite inputs;
# - randomized cases between the boundary points (hypothesis);
# - guard bands: poisoned buffers that catch out-of-bounds reads and writes on a CPU, and why a GPU still needs
#   compute-sanitizer;
# - what a predeclared loss *inside* the eligible region means for the predicate.

# %% tags=["nbval-ignore-output"]
import torch
import fastpath_lib
# no CUDA: run the kernels in Triton's CPU interpreter (a no-op on a GPU)
fastpath_lib.use_interpreter()
from fastpath_lib import runtime

DEVICE = runtime.lesson_device()  # "cuda" on a GPU, else "cpu"; prints the mode and versions
_ = torch.manual_seed(0)

import dataclasses
import warnings
import pandas as pd
import torch.nn.functional as F
from fastpath_lib.boundary import boundary_points
from fastpath_lib.cases import CaseSpec
from fastpath_lib.rmsnorm.predicate import PREDICATE, limits_for, make_call
from fastpath_lib.testing import compare, reference_rms_norm

R = limits_for(DEVICE).min_rows

# %% [markdown]
# ## Boundary points from the predicate
#
# Every condition declares its boundary as small changes to an eligible base case (16×64 fp32 with a weight, rows
# raised to the threshold). `boundary_points()` applies each change under the limits in force. A *tensor* point is
# built as tensors and run through both routes; a *context* point replaces a field of the call context the predicate
# reads instead: the execution state (forced, capture, `create_graph`, forward AD, a functorch transform,
# interpreter off, another GPU architecture) or the input's kind (a nested tensor, a DTensor, a sparse layout). The
# section after the table lists every context point.

# %%
points = boundary_points(device=DEVICE)
table = pd.DataFrame([{"id": p.id, "holds": p.holds, "kind": "context" if p.context else "tensor",
                       "case": p.spec.label()} for p in points])
print(len(points), "points:", table.kind.value_counts().to_dict())
table.head(12)

# %% [markdown]
# ## Context points: evaluate the predicate on a changed context
#
# The context points cannot all be produced on this machine (an sm_75 GPU, a CUDA graph capture), so they are
# checked on the predicate's context: the call's `RMSNormCall` with one field replaced.

# %%
results = []
for p in (p for p in points if p.context):
    x, ns, w = p.spec.build(seed=0).args()
    ctx = dataclasses.replace(make_call(x, ns, w), **p.context)
    failed = PREDICATE.evaluate(ctx).failed
    results.append({"id": p.id, "holds": p.holds, "condition held": p.condition not in failed})
ctx_df = pd.DataFrame(results)
assert (ctx_df["holds"] == ctx_df["condition held"]).all()
ctx_df


# %% [markdown]
# ## Tensor points: both routes against the reference
#
# For each tensor point: the declared outcome must match `explain`; the dispatched call must take the route
# `explain` named and the forced call (`force_fallback()`) the fallback, each counted by `record_routes`; both
# outputs must match the float64 reference; and the poisoned input buffers must be bit-for-bit unchanged. Invalid
# calls must raise `F.rms_norm`'s exception type. Small shapes: a few seconds under the interpreter.
#
# One point calls `F.rms_norm` with an fp32 input and an fp16 weight. Torch's fused CPU kernel needs the two dtypes
# to match (as for a bf16 input with an fp32 weight), so torch warns, with a path on this machine, and computes the
# unfused way; the result is still correct, so the table cell silences that one warning.

# %%
def raises_like_reference(x, ns, w):
    """None for a valid call; for an invalid one, whether our op raises F.rms_norm's
    exception type."""
    try:
        F.rms_norm(x, ns, w)
        return None
    except Exception as exc:  # noqa: BLE001
        try:
            fastpath_lib.rms_norm(x, ns, w)
            return "no error!"
        except type(exc):
            return f"raises {type(exc).__name__}"


# %%
def run_point(p):
    case = p.spec.build(seed=7, device=DEVICE)
    x, ns, w = case.args()
    d = fastpath_lib.explain(x, ns, w)
    row = {"id": p.id, "route": d.route, "declared ok": (p.condition not in d.failed) == p.holds}
    if (raised := raises_like_reference(x, ns, w)) is not None:
        return {**row, "dispatched": raised, "fallback": "-"}
    with fastpath_lib.record_routes() as routes:
        y = fastpath_lib.rms_norm(x, ns, w)
    with fastpath_lib.force_fallback(), fastpath_lib.record_routes() as fb_routes:
        y_fb = fastpath_lib.rms_norm(x, ns, w)
    ref = reference_rms_norm(x, ns, w)
    ok = lambda out: compare(out, ref, x.dtype) or "ok"
    return {**row, "dispatched": ok(y) if routes == {d.route: 1} else f"route {routes}",
            "fallback": ok(y_fb) if fb_routes == {"fallback": 1} else f"route {fb_routes}",
            "inputs untouched": case.inputs_untouched()}


# %%
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="Mismatch dtype between input and weight")
    tensor_df = pd.DataFrame([run_point(p) for p in points if not p.context])
assert (tensor_df["declared ok"].all()
        and tensor_df["dispatched"].isin(["ok", "raises RuntimeError"]).all())
assert ((tensor_df["fallback"].isin(["ok", "-"])).all()
        and tensor_df["inputs untouched"].fillna(True).all())
print(tensor_df.route.value_counts().to_dict())
tensor_df

# %% [markdown]
# ## Two points that catch plausible mistakes
#
# Two of the generated points exist to catch predicates and kernels that are *almost* right:
#
# - **an input 8 bytes past a 16-byte boundary** (`input_alignment[offset 8 bytes]`, out). The 4-byte point alone
#   would let through a predicate that checks `ptr % 8`, a habit from fp64 code: both points fail `% 16`, only the
#   8-byte one separates `% 8` from `% 16`;
# - **24 columns** (`row_stride_alignment[cols=24 (not a power of two)]`, in). 96 bytes per fp32 row are aligned,
#   so the point is eligible although 24 is not a power of two: it catches a predicate that demands power-of-two
#   widths (too strict), and a kernel whose mask is wrong when `BLOCK_SIZE` (32) exceeds the width (8 idle lanes).

# %%
catching_points = ["input_alignment[offset 8 bytes]",
              "row_stride_alignment[cols=24 (not a power of two)]"]
tensor_df[tensor_df["id"].isin(catching_points)]

# %% [markdown]
# ## Tiny magnitudes: a numerical edge the declarations do not cover
#
# The conditions say nothing about values, but tiny values are an edge of their own. At 1e-4 in fp16 the mean square
# is about 8% of `eps`, so the output depends on the default `eps` (lesson 01). At 1e-20 in fp32 `eps` dominates and
# the outputs are about 1e-16, far below `compare`'s absolute floor (`atol` 1e-5): a kernel writing zeros would pass
# too, so look at the relative error. At 1e-22 with `eps=0` the fp32 square is subnormal and loses digits: both
# routes miss the float64 reference by about 3%, but agree with `F.rms_norm`, the contract.

# %%
tiny = []
for dtype, scale, eps in ((torch.float16, 1e-4, None), (torch.float32, 1e-20, None),
                          (torch.float32, 1e-22, 0.0)):
    x, ns, w = (CaseSpec(rows=R, cols=64, dtype=dtype, scale=scale)
                .build(seed=5, device=DEVICE).args())
    with fastpath_lib.record_routes() as routes:
        y = fastpath_lib.rms_norm(x, ns, w, eps)
    ref = reference_rms_norm(x, ns, w, eps)
    same = lambda expected: "ok" if compare(y, expected, dtype) is None else "outside tolerance"
    tiny.append({"dtype": str(dtype)[6:], "scale": f"{scale:g}",
                 "eps": "default" if eps is None else eps,
                 "route": ",".join(routes),
                 "max |y|": f"{y.abs().max().item():.2g}", "vs reference": same(ref),
                 "max rel err": f"{((y.double() - ref).abs() / ref.abs()).max().item():.1e}",
                 "vs F.rms_norm": same(F.rms_norm(x, ns, w, eps).double())})
pd.DataFrame(tiny)

# %% [markdown]
# ## `opcheck`: is the custom op registered correctly?
#
# `torch.library.opcheck` runs the op's schema, fake-tensor, autograd-registration and AOT-dispatch tests on
# sample inputs: the checks that make `torch.compile` and `torch.export` trust the op.

# %%
x = torch.randn(R, 64, device=DEVICE, requires_grad=True)
w = torch.randn(64, device=DEVICE, requires_grad=True)
torch.library.opcheck(torch.ops.fastpath.rms_norm.default, (x, [64], w, None))
torch.library.opcheck(torch.ops.fastpath.rms_norm.default, (x.detach(), [64], None, 1e-5))
print("opcheck passed")

# %% [markdown]
# ## `torch.compile(fullgraph=True)` across the row threshold
#
# One compiled function, two shapes on either side of the threshold, no graph break. The static conditions are
# decided while tracing and become guards (a new shape recompiles): the graph below the threshold holds plain
# `F.rms_norm`, which inductor can fuse with its neighbours, so `record_routes` sees no call of the op (`{}`); the
# graph at the threshold holds `fastpath::rms_norm`, which checks the data pointers when the graph runs.

# %%
compiled = torch.compile(lambda a: fastpath_lib.rms_norm(a, [64]), fullgraph=True, dynamic=False)
for rows in (R - 1, R):
    a = torch.randn(rows, 64, device=DEVICE)
    with fastpath_lib.record_routes() as routes:
        y = compiled(a)
    print(f"{rows} rows: {dict(routes)}, "
          f"mismatch: {compare(y, reference_rms_norm(a, [64]), a.dtype)}")

# %% [markdown]
# Autocast: the output dtype of both routes equals `F.rms_norm`'s under autocast on this device.

# %%
low = torch.float16 if DEVICE == "cuda" else torch.bfloat16
a = torch.randn(R, 64, device=DEVICE)
with torch.autocast(DEVICE, dtype=low):
    want = F.rms_norm(a, [64]).dtype
    got = fastpath_lib.rms_norm(a, [64]).dtype
    with fastpath_lib.force_fallback():
        got_fb = fastpath_lib.rms_norm(a, [64]).dtype
print("same dtype as F.rms_norm under autocast:", want == got == got_fb)

# %% [markdown]
# ## Non-finite inputs
#
# An `inf` in a row makes the mean square infinite, `rstd` 0, and `inf * 0 = nan`; a `nan` spreads over its row.
# Both routes must put NaN and Inf in the same places as the reference (`compare` uses `equal_nan`).

# %%
a = torch.randn(R, 64, device=DEVICE)
a[1, 3], a[2, 5], a[3, 0] = float("inf"), float("nan"), -float("inf")
with fastpath_lib.record_routes() as routes:
    y = fastpath_lib.rms_norm(a, [64])
with fastpath_lib.force_fallback():
    y_fb = fastpath_lib.rms_norm(a, [64])
ref = reference_rms_norm(a, [64])
print(dict(routes), "| dispatched:", compare(y, ref, a.dtype),
      "| fallback:", compare(y_fb, ref, a.dtype))
print("row 1:", y[1, :5].tolist())

# %% [markdown]
# Overflow is different: with `x = 1e20` in fp32, `x * x` overflows to `inf` in fp32 (both routes, and
# `F.rms_norm`, compute in fp32), so the output is 0, while the float64 reference gives 1. The contract is
# parity with `F.rms_norm`, so such a test compares the routes with `F.rms_norm`, not with the float64 reference —
# and the PR note should say so.

# %%
a = torch.randn(R, 64, device=DEVICE)
a[0] = 1e20
y, base = fastpath_lib.rms_norm(a, [64]), F.rms_norm(a, [64])
print("fast path row 0:", y[0, :3].tolist(), "| F.rms_norm row 0:", base[0, :3].tolist(),
      "| reference:", reference_rms_norm(a, [64])[0, :3].tolist())
print("fast path equals F.rms_norm:", torch.allclose(y, base, atol=1e-5, rtol=2e-6, equal_nan=True))

# %% [markdown]
# ## Randomized cases between the boundary points
#
# The boundary points test each limit; hypothesis draws cases from everywhere else — widths, dtypes, weights,
# layouts, offsets, magnitudes — and checks every one against the reference. `derandomize=True` makes the draw the
# same on every run (a notebook's output must not change); the test suite runs more examples
# (`tests/rmsnorm/test_hypothesis.py`).

# %%
from hypothesis import given, settings, strategies as st

seen = set()
specs = st.builds(CaseSpec, rows=st.integers(1, 2 * R),
                  cols=st.sampled_from([1, 8, 15, 16, 24, 64, 100]),
                  dtype=st.sampled_from([torch.float32, torch.float16, torch.bfloat16]),
                  weight=st.sampled_from(["same", None, torch.float32]),
                  pad=st.sampled_from([0, 4]),
                  layout=st.sampled_from(["contiguous", "row_slice", "transposed"]),
                  offset=st.sampled_from([0, 2, 4]),
                  scale=st.sampled_from([1e-3, 1.0, 50.0]))

@settings(max_examples=25, deadline=None, derandomize=True, database=None)
@given(spec=specs)
def matches_reference(spec):
    x, ns, w = spec.build(seed=0, device=DEVICE).args()
    with fastpath_lib.record_routes() as routes:
        y = fastpath_lib.rms_norm(x, ns, w)
    seen.update(routes)
    assert compare(y, reference_rms_norm(x, ns, w), x.dtype) is None, spec.label()

# bf16/fp16 inputs with an fp32 weight: torch's unfused-path warning, as above
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="Mismatch dtype between input and weight")
    matches_reference()
print("every drawn case matched the reference; routes taken:", sorted(seen))

# %% [markdown]
# ## Guard bands: out-of-bounds reads and writes on a CPU
#
# `CaseSpec.build` puts each input inside a NaN-filled buffer: a kernel that *reads* past its view picks up NaN and
# fails the comparison; `inputs_untouched()` catches any *write* into the inputs. For the output,
# `poisoned_like` makes a view inside a buffer with poison on both sides, and the launcher writes into it
# (`out=`). An odd width (17) and a row slice (stride 20) make off-by-one errors likely:

# %%
from fastpath_lib.cases import CaseSpec, output_guard_intact, poisoned_like
from fastpath_lib.rmsnorm import kernels

case = CaseSpec(rows=R + 1, cols=17, layout="row_slice", pad=3).build(seed=3, device=DEVICE)
x, ns, w = case.args()
view, buf, pristine = poisoned_like((R + 1, 17), x.dtype, x.device, pad=16)
kernels.forward(x, w, 1e-6, out=view)
print("output matches:", compare(view, reference_rms_norm(x, ns, w, 1e-6), x.dtype) is None)
print("output guard intact:", output_guard_intact(buf, pristine, 16))
print("inputs untouched:", case.inputs_untouched())

# %% [markdown]
# The guard does catch a bad write — here one simulated by hand, one element past the view's end:

# %%
buf[16 + view.numel()] = 0.0  # SIMULATED off-by-one write just past the output view
print("output guard intact after a stray write:", output_guard_intact(buf, pristine, 16))

# %% [markdown]
# ## Why sanitizers matter on a GPU
#
# Guard bands catch errors that land *next to* a view. On a GPU an out-of-bounds access may land anywhere — in
# another tensor, or in memory the allocator has not handed out — and often gives no error at all. Before a GPU
# PR, run the GPU tests under NVIDIA's compute-sanitizer, with PyTorch's caching allocator off
# (`PYTORCH_NO_CUDA_MEMORY_CACHING=1`): the allocator carves many tensors out of one block, so an access past one
# tensor's end lands in its neighbour, inside memory the sanitizer sees as allocated, and a reused block looks
# initialised. With caching off every tensor is its own allocation. `tools/sanitize_boundaries.py` launches both
# kernels at every generated boundary point and nothing else (the evidence command runs it under memcheck, time-boxed);
# the GPU tests (`-m gpu`) cover more calls and take longer. Run the script on every kernel change, the tests before a
# PR:
#
# ```bash
# # out-of-bounds and misaligned accesses: the boundary points, then the GPU tests
# PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool memcheck python tools/sanitize_boundaries.py
# PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool memcheck python -m pytest tests -m gpu -x
# # shared-memory races
# compute-sanitizer --tool racecheck python -m pytest tests -m gpu -x
# # reads of uninitialised device memory
# PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool initcheck python -m pytest tests -m gpu -x
# ```
#
# The interpreter stands in for part of this only: [lesson 02](02_triton_kernel.ipynb)'s table of what the interpreter
# cannot show owns the list (global-memory races between programs are flagged here by `traffic.watch(races=True)`; the
# rest needs the GPU tools above).
#
# Boundary tests check that the routes *agree* at the points they run; they say nothing about speed. A case the
# predicate accepts and the benchmark matrix predicts to lose (narrow rows) is [lesson 05](05_benchmark_matrix.ipynb)'s,
# section 6, with what an honest author does about it.
#
# ## Recap
#
# - Boundary points are generated from the predicate; adding a condition adds its tests. Points such as the 8-byte
#   offset and 24 columns separate a correct predicate from an almost-correct one.
# - Every tensor point runs both routes against the reference and asserts the route taken; hypothesis covers the
#   cases in between.
# - `opcheck`, `torch.compile(fullgraph=True)`, autocast and non-finite inputs are part of the contract; tiny and
#   huge magnitudes are compared with `F.rms_norm` where fp32 itself loses digits.
# - Guard bands catch out-of-bounds accesses next to a view on a CPU; compute-sanitizer is still needed on a GPU.
# - Routes that agree say nothing about speed: a predicted loss inside the region is lesson 05's question.
#
# ## Knowledge check
#
# Answer each question in your own words first, then open the guide.
#
# **1. Why test *threshold − 1, threshold, threshold + 1* and not just one value on each side?**

# %% [markdown]
# <details><summary>Answer guide</summary>
#
# Off-by-one mistakes live exactly there: `>` instead of `>=` moves the boundary by one row. *threshold − 1* (out)
# and *threshold* (in) pin the comparison; *threshold + 1* checks that nothing special happens just inside. One
# value far on each side would pass for both the right and the wrong comparison.
# </details>

# %% [markdown]
# **2. Your predicate checks `data_ptr() % 8 == 0`. Which declared point catches it, and which one does not?**

# %% [markdown]
# <details><summary>Answer guide</summary>
#
# The 8-byte offset catches it: its pointer is a multiple of 8, so the wrong check accepts it while the declaration
# says *out*. The 4-byte offset does not: it fails `% 8` and `% 16` alike, so both predicates send it to the
# fallback. That is why the boundary points include the 8-byte offset.
# </details>

# %% [markdown]
# **3. At 1e-20 in fp32 every test passes. Why is that weak evidence, and what would you check instead?**

# %% [markdown]
# <details><summary>Answer guide</summary>
#
# The outputs are about 1e-16, inside `compare`'s absolute tolerance (1e-5), so even an all-zero output would pass.
# Check the relative error (or scale the comparison), and compare with `F.rms_norm` where fp32 itself loses digits
# (subnormal squares, overflow), since parity with `F.rms_norm` is the contract.
# </details>

# %% [markdown]
# ## Read next
#
# - [Exercise 04](../exercises/ex04_boundary_cases.ipynb): boundary cases, graded by the faulty predicates and kernels they catch.
# - [Lesson 05](05_benchmark_matrix.ipynb): the predeclared benchmark matrix.
