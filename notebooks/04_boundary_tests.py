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
# **What you will learn**
# - how boundary tests are *generated* from the predicate's declarations (`boundary_points()`), not written by hand;
# - how to run both routes (dispatched, and `force_fallback()`) against the float64 reference and assert the route;
# - `torch.library.opcheck`, `torch.compile(fullgraph=True)`, autocast and non-finite inputs;
# - guard bands: poisoned buffers that catch out-of-bounds reads and writes on a CPU, and why a GPU still needs
#   compute-sanitizer.

# %% tags=["nbval-ignore-output"]
import torch
import fastpath_lib
fastpath_lib.use_interpreter()  # no CUDA: run the kernels in Triton's CPU interpreter (a no-op on a GPU)
from fastpath_lib import runtime

print(runtime.describe())
DEVICE = "cuda" if runtime.cuda_available() and not runtime.interpreter_enabled() else "cpu"
print("running on", "a GPU (CUDA): kernels are compiled and timings are real" if DEVICE == "cuda" else
      "the CPU: Triton kernels run in the interpreter (correct but slow; no timing here is a GPU measurement)")
_ = torch.manual_seed(0)

import dataclasses
import pandas as pd
import torch.nn.functional as F
from fastpath_lib.boundary import boundary_points
from fastpath_lib.rmsnorm.predicate import PREDICATE, limits_for, make_call
from fastpath_lib.testing import compare, reference_rms_norm

R = limits_for(DEVICE).min_rows

# %% [markdown]
# ## Boundary points from the predicate
#
# Every condition declares its boundary as small changes to an eligible base case (16×64 fp32 with a weight, rows
# raised to the threshold). `boundary_points()` applies each change under the limits in force. A *tensor* point
# changes the inputs; a *context* point changes the execution state (forced, capture, `create_graph`, interpreter
# off, another GPU architecture).

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
# `explain` named (`record_routes`); the forced fallback must take the fallback; both outputs must match the
# float64 reference; and the poisoned input buffers must be bit-for-bit unchanged. Invalid calls must raise
# `F.rms_norm`'s exception type. Small shapes: a few seconds under the interpreter.

# %%
def raises_like_reference(x, ns, w):
    """None for a valid call; for an invalid one, whether our op raises F.rms_norm's exception type."""
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
    with fastpath_lib.force_fallback():
        y_fb = fastpath_lib.rms_norm(x, ns, w)
    ref = reference_rms_norm(x, ns, w)
    ok = lambda out: compare(out, ref, x.dtype) or "ok"
    return {**row, "dispatched": ok(y) if routes == {d.route: 1} else f"route {routes}", "fallback": ok(y_fb),
            "inputs untouched": case.inputs_untouched()}


# %%
tensor_df = pd.DataFrame([run_point(p) for p in points if not p.context])
assert tensor_df["declared ok"].all() and tensor_df["dispatched"].isin(["ok", "raises RuntimeError"]).all()
assert (tensor_df["fallback"].isin(["ok", "-"])).all() and tensor_df["inputs untouched"].fillna(True).all()
print(tensor_df.route.value_counts().to_dict())
tensor_df

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
# One compiled function, two shapes on either side of the threshold: no graph break, and the route is chosen at
# run time from the real tensors.

# %%
compiled = torch.compile(lambda a: fastpath_lib.rms_norm(a, [64]), fullgraph=True, dynamic=False)
for rows in (R - 1, R):
    a = torch.randn(rows, 64, device=DEVICE)
    with fastpath_lib.record_routes() as routes:
        y = compiled(a)
    print(f"{rows} rows: {dict(routes)}, mismatch: {compare(y, reference_rms_norm(a, [64]), a.dtype)}")

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
print(dict(routes), "| dispatched:", compare(y, ref, a.dtype), "| fallback:", compare(y_fb, ref, a.dtype))
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
# PR, run the GPU tests under NVIDIA's compute-sanitizer:
#
# ```bash
# compute-sanitizer --tool memcheck  python -m pytest tests -m gpu -x   # out-of-bounds and misaligned accesses
# compute-sanitizer --tool racecheck python -m pytest tests -m gpu -x   # shared-memory races
# compute-sanitizer --tool initcheck python -m pytest tests -m gpu -x   # reads of uninitialised device memory
# ```
#
# The interpreter cannot stand in for these: it runs programs one after another, so races never happen, and its
# numpy arrays do not model GPU memory.
#
# ## Recap
#
# - Boundary points are generated from the predicate; adding a condition adds its tests.
# - Every tensor point runs both routes against the reference and asserts the route taken.
# - `opcheck`, `torch.compile(fullgraph=True)`, autocast and non-finite inputs are part of the contract.
# - Guard bands catch out-of-bounds accesses next to a view on a CPU; compute-sanitizer is still needed on a GPU.
#
# **Questions**
# 1. Why test *threshold − 1, threshold, threshold + 1* and not just one value on each side?
# 2. A point is declared *out* but dispatch took Triton. Which is wrong, the declaration or the predicate?
# 3. What does the NaN poison around an input catch that comparing outputs alone would miss?
# 4. Why compare an overflowing input with `F.rms_norm` instead of the float64 reference?
