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
# # 01 · The operator contract: what `F.rms_norm` promises
#
# **What you will do**: check each promise `F.rms_norm` makes (dtypes, `eps`, strides, aliasing, exceptions, autocast,
# gradients, compile, forward-mode AD) live in a cell, and see the float64 reference that states them.
#
# **What you need**: lesson 00; this CPU.
#
# **Time**: about 20 minutes.
#
# **What you will learn**
# - the promises `torch.nn.functional.rms_norm` makes (dtypes, the default `eps`, output dtype and layout, no
#   aliasing, exceptions, autocast, gradients, `torch.compile`, forward-mode AD and `torch.func` transforms), each
#   checked live in a cell;
# - how a *semantic reference* (`fastpath_lib.testing.reference_rms_norm`, float64 from the definition) states
#   the contract independently of both routes;
# - that a fast path must keep every promise, including the error it raises for a bad call.
#
# A fast path that is faster but breaks one promise is a regression for somebody. Writing the promises down
# before writing the kernel turns "looks right" into a checklist a reviewer can run.

# %% tags=["nbval-ignore-output"]
import torch
import fastpath_lib
# no CUDA: run the kernels in Triton's CPU interpreter (a no-op on a GPU)
fastpath_lib.use_interpreter()
from fastpath_lib import runtime

DEVICE = runtime.lesson_device()  # "cuda" on a GPU, else "cpu"; prints the mode and versions
_ = torch.manual_seed(0)

import torch.nn.functional as F
from fastpath_lib.rmsnorm.predicate import limits_for
from fastpath_lib.testing import compare, reference_grads, reference_rms_norm

ROWS = 2 * limits_for(DEVICE).min_rows  # past the row threshold on any device

# %% [markdown]
# ## The semantic reference
#
# The reference computes `y = x / sqrt(mean(x**2) + eps) * w` in float64, from the definition. Both routes are
# compared with it within a per-dtype tolerance (`fastpath_lib.testing.TOLERANCES`). Its source:

# %% tags=["nbval-ignore-output"]
import inspect
from fastpath_lib import testing

print(inspect.getsource(testing._ref_graph))

# %% [markdown]
# The relative tolerance is one unit in the last place (the dtype's machine epsilon) for fp16 and bf16. For fp32 it
# is wider: fp32's rounding is far finer than the error of an fp32 mean square summed over thousands of terms, and
# the last column counts the fp32 units it allows. An absolute floor covers outputs near zero:

# %%
import pandas as pd

pd.DataFrame([{"dtype": str(dtype).removeprefix("torch."), "atol": atol, "rtol": rtol,
               "why": testing.TOLERANCE_NOTES[dtype], "rtol in units of the last place": rtol / torch.finfo(dtype).eps}
              for dtype, (atol, rtol) in testing.TOLERANCES.items()]
             ).set_index("dtype")

# %% [markdown]
# ## Promise 1 — dtypes and strides: the output has the input's dtype and `F.rms_norm`'s strides
#
# fp16, bf16 and fp32 inputs compute in fp32 internally and round once to the input dtype. The output is a new
# tensor with the strides `F.rms_norm` gives it: contiguous for a strided row view (here a row slice of a wider
# buffer), but channels-last for a channels-last input, whose strides `F.rms_norm` keeps (the predicate's
# `memory_format` condition sends such inputs to the fallback for that reason; the last line shows one).

# %%
base = torch.randn(ROWS, 80, device=DEVICE)
for dtype in (torch.float32, torch.float16, torch.bfloat16):
    x = base.to(dtype)[:, :64]  # a strided view: row stride 80
    w = torch.randn(64, device=DEVICE).to(dtype)
    ours, ref = fastpath_lib.rms_norm(x, [64], w), F.rms_norm(x, [64], w)
    print(f"{str(dtype):15} out {ours.dtype}, contiguous={ours.is_contiguous()}, "
          f"stride {ours.stride()} (F.rms_norm: {ref.stride()}), "
          f"mismatch: {compare(ours, reference_rms_norm(x, [64], w), dtype)}")
x = torch.randn(2, 3, 4, 64, device=DEVICE).to(memory_format=torch.channels_last)
ours, ref = fastpath_lib.rms_norm(x, [64]), F.rms_norm(x, [64])
print(f"channels-last in   : contiguous={ours.is_contiguous()}, stride {ours.stride()} "
      f"(F.rms_norm: {ref.stride()}), route: {fastpath_lib.explain(x, [64]).route}")

# %% [markdown]
# ## Promise 2 — the default `eps`
#
# With `eps=None`, `F.rms_norm` uses the machine epsilon of the dtype it *computes* in: fp32's, also for fp16 and
# bf16 inputs (not `torch.finfo(torch.float16).eps`). We check it live on inputs so small that `eps` dominates the
# mean square: for fp16 and bf16 only fp32's matches (for fp32 inputs the two candidates are the same number).

# %%
for dtype in (torch.float32, torch.float16, torch.bfloat16):
    x = torch.full((ROWS, 64), 1e-4, device=DEVICE).to(dtype)
    y = F.rms_norm(x, [64])
    candidates = {"fp32 machine eps": torch.finfo(torch.float32).eps,
                  "the dtype's own machine eps": torch.finfo(dtype).eps}
    matches = [f"{name} ({eps:.3g})" for name, eps in candidates.items()
               if compare(y, reference_rms_norm(x, [64], None, eps), dtype) is None]
    print(f"{str(dtype):15} F.rms_norm's default eps matches: {', '.join(matches)}")

# %% [markdown]
# The library states the same rule once, in `default_eps`, and the fast path uses it:

# %%
from fastpath_lib.rmsnorm.predicate import default_eps

x = torch.full((ROWS, 64), 1e-4, device=DEVICE).half()
print({str(d)[6:]: default_eps(d) for d in (torch.float32, torch.float16, torch.bfloat16)})
print("fast path, eps=None, mismatch vs F.rms_norm:", compare(fastpath_lib.rms_norm(x, [64]),
      F.rms_norm(x, [64]).double(), x.dtype))

# %% [markdown]
# ## Promise 3 — no aliasing, inputs untouched
#
# The output never shares memory with the input, and the call writes nothing into its inputs. `CaseSpec` builds
# inputs inside NaN-poisoned buffers and keeps a pristine copy, so "untouched" is checked bit for bit.

# %%
from fastpath_lib.cases import CaseSpec

case = CaseSpec(rows=ROWS, cols=64, layout="row_slice", pad=4).build(seed=1, device=DEVICE)
x, ns, w = case.args()
y = fastpath_lib.rms_norm(x, ns, w)
print("shares memory with x:", y.untyped_storage().data_ptr() == x.untyped_storage().data_ptr())
y.add_(1.0)  # writing to the output must not change the input
print("inputs (views and poison) untouched:", case.inputs_untouched())

# %% [markdown]
# ## Promise 4 — exceptions
#
# A bad call raises the same exception type, with the same message, as `F.rms_norm`: `RuntimeError` when
# `normalized_shape` does not match the input, `TypeError` when it is an `int`. The predicate sends invalid calls
# to the fallback, so the fallback raises its own error.

# %%
x = torch.randn(4, 8, device=DEVICE)
bad_calls = {"shape mismatch": (x, [7]), "int normalized_shape": (x, 8),
             "weight shape mismatch": (x, [8], torch.ones(7, device=DEVICE))}
for name, args in bad_calls.items():
    errors = []
    for fn in (F.rms_norm, fastpath_lib.rms_norm):
        try:
            fn(*args)
        except Exception as e:  # noqa: BLE001 - we want to see which one
            errors.append((type(e).__name__, str(e)))
    print(f"{name:22} F: {errors[0][0]:13} fastpath: {errors[1][0]:13} "
          f"same message: {errors[0] == errors[1]}")

# %% [markdown]
# ## Promise 5 — autocast
#
# Autocast changes `F.rms_norm`'s output dtype on some devices and not on others, and the custom op must follow. The kit
# decides where to register its policy from the torch version (`autocast_fp32_devices()`: CUDA, by a version check
# from torch 2.12 on). A
# version check is a claim, so test it live: ask this torch's dispatcher which autocast device types have a kernel for
# `aten::rms_norm` (a private query), and run `F.rms_norm` under autocast on this device. The kit registers its policy
# for CUDA alone: on the CPU autocast has no `rms_norm` kernel (the list below), so a CPU call keeps its dtype as
# `F.rms_norm`'s does, and on a device such as XPU a call fails the `device` condition and is `F.rms_norm` itself.
# Either way our output dtype must equal `F.rms_norm`'s.

# %%
from fastpath_lib.rmsnorm.op import autocast_fp32_devices

live = [d for d in ("cpu", "cuda", "xpu", "mps", "hpu")
        if torch._C._dispatch_has_kernel_for_dispatch_key("aten::rms_norm", f"Autocast{d.upper()}")]
print("autocast has an rms_norm kernel in this torch for:", live)
print("the op registers its fp32 policy for:", autocast_fp32_devices(),
      "| agrees on cuda:", ("cuda" in live) == ("cuda" in autocast_fp32_devices()))
low = torch.float16 if DEVICE == "cuda" else torch.bfloat16
for dtype in (torch.float32, torch.float16):
    x = torch.randn(ROWS, 64, device=DEVICE).to(dtype)
    with torch.autocast(DEVICE, dtype=low):
        ref, ours = F.rms_norm(x, [64]), fastpath_lib.rms_norm(x, [64])
    print(f"input {str(dtype):14} F.rms_norm -> {ref.dtype}, fastpath -> {ours.dtype}, "
          f"same: {ref.dtype == ours.dtype}")

# %% [markdown]
# ## Promise 6 — gradients
#
# `dx` and `dw` must match the reference's gradients (float64 autograd), within the gradient tolerances. The
# Triton route has its own backward kernel; `record_routes("backward")` shows it ran.

# %%
x = torch.randn(ROWS, 64, device=DEVICE, requires_grad=True)
w = torch.randn(64, device=DEVICE, requires_grad=True)
dy = torch.randn(ROWS, 64, device=DEVICE)
with fastpath_lib.record_routes("backward") as routes:
    fastpath_lib.rms_norm(x, [64], w).backward(dy)
ref_dx, ref_dw = reference_grads(x, [64], w, None, dy)
print("backward route:", routes)
print("dx mismatch:", compare(x.grad, ref_dx, x.dtype, grad=True))
print("dw mismatch:", compare(w.grad, ref_dw, w.dtype, grad=True))

# %% [markdown]
# Higher-order gradients (`create_graph=True`) are part of the contract too. The Triton backward is not itself
# differentiable, so the op differentiates `F.rms_norm` (the fallback) instead — the predicate's `grad_order`
# condition, and the route printed below:

# %%
with fastpath_lib.record_routes("backward") as routes:
    (gx,) = torch.autograd.grad(fastpath_lib.rms_norm(x, [64], w).sum(), x, create_graph=True)
(ggx,) = torch.autograd.grad(gx.sum(), x)
print("backward route with create_graph=True:", routes,
      "| second-order grad finite:", bool(ggx.isfinite().all()))

# %% [markdown]
# ## Promise 7 — `torch.compile`
#
# `fastpath::rms_norm` is a `torch.library.custom_op` with a fake implementation, so `torch.compile(fullgraph=True)`
# traces it without a graph break. The shape, dtype and stride conditions on static sizes are decided while tracing
# (they become guards). When the compiled graph runs, the op decides again on the real tensors what only run time
# knows: the data pointers' alignment and whether a CUDA graph is being captured (`runtime_eligible`), and any size the
# tracer held symbolically (a compile with `dynamic=True`, an export's dynamic dims).

# %%
compiled = torch.compile(lambda a, b: fastpath_lib.rms_norm(a, [64], b), fullgraph=True)
x = torch.randn(ROWS, 64, device=DEVICE)
with fastpath_lib.record_routes() as routes:
    y = compiled(x, w.detach())
print("route at run time:", routes)
print("mismatch vs reference:", compare(y, reference_rms_norm(x, [64], w), x.dtype))

# %% [markdown]
# ## Promise 8 — forward-mode AD and `torch.func` transforms
#
# `F.rms_norm` has a forward-mode derivative (`torch.func.jvp`, `jacfwd`, dual tensors) and works under every
# `torch.func` transform (`grad`, `vjp`, `vmap`, ...). A Triton kernel launched directly has neither: given a dual
# tensor it returns an output with **no** tangent, silently, and under `torch.func.jvp` it cannot read the wrapped
# tensor's data and raises. The kernel, called without the op around it:

# %%
import torch.autograd.forward_ad as fwAD
from fastpath_lib.rmsnorm import kernels

x, t = torch.randn(ROWS, 64, device=DEVICE), torch.randn(ROWS, 64, device=DEVICE)
with fwAD.dual_level():
    y = kernels.forward(fwAD.make_dual(x, t), w.detach(), 1e-6)
    print("the raw kernel on a dual tensor, tangent:", fwAD.unpack_dual(y).tangent)
try:
    torch.func.jvp(lambda a: kernels.forward(a, w.detach(), 1e-6), (x,), (t,))
except RuntimeError as exc:
    print("the raw kernel under torch.func.jvp raises", type(exc).__name__)

# %% [markdown]
# So the predicate's `forward_ad` and `functorch_transform` conditions send those calls to `F.rms_norm`, whose rules
# apply, and the op's tangents are `F.rms_norm`'s:

# %%
ours, ref = ((lambda a: fastpath_lib.rms_norm(a, [64], w.detach())),
             (lambda a: F.rms_norm(a, [64], w.detach())))
tan_ours, tan_ref = torch.func.jvp(ours, (x,), (t,))[1], torch.func.jvp(ref, (x,), (t,))[1]
print("jvp tangent equals F.rms_norm's:", torch.equal(tan_ours, tan_ref),
      "| all zero:", bool((tan_ours == 0).all()))
with fwAD.dual_level():
    dual_tangent = fwAD.unpack_dual(ours(fwAD.make_dual(x, t))).tangent
print("dual-tensor tangent equals jvp's:", torch.equal(dual_tangent, tan_ref))
grads = [torch.func.grad(lambda a, f=f: f(a).square().sum())(x) for f in (ours, ref)]
print("torch.func.grad equals F.rms_norm's:", torch.equal(*grads))
xb = x.view(2, ROWS // 2, 64)
print("vmap equals F.rms_norm's:", torch.equal(torch.func.vmap(ours)(xb), torch.func.vmap(ref)(xb)))

# %% [markdown]
# ## The contract as a checklist
#
# | promise | checked by |
# |---|---|
# | fp16/bf16/fp32 in, same dtype out, `F.rms_norm`'s strides | promise 1; `tests/rmsnorm/test_contract.py` |
# | default eps = fp32 machine epsilon for fp16/bf16/fp32 | promise 2 |
# | no aliasing; inputs untouched | promise 3; guard bands (lesson 04) |
# | same exception type and message | promise 4 |
# | autocast policy = `F.rms_norm`'s | promise 5 |
# | gradients, including higher order | promise 6 |
# | `torch.compile(fullgraph=True)` | promise 7; `opcheck` (lesson 04) |
# | forward-mode AD, `torch.func` transforms | promise 8; `tests/rmsnorm/test_contract_modes.py` |
# | nested, sparse inputs; channels-last strides | `tests/rmsnorm/test_contract_modes.py`; lesson 03 |
# | DTensor inputs | `tests/rmsnorm/test_sharding.py`; lesson 09 |
#
# ## Recap
#
# - The reference is the contract in executable form: float64, from the definition, shared by tests and lessons.
# - Every promise is checked against `F.rms_norm` itself, not against what we *think* it does (the default `eps`).
# - Invalid calls go to the fallback so users keep the errors they know.
# - Modes the kernels do not implement (forward-mode AD, `torch.func` transforms) go to the fallback too, so their
#   results are `F.rms_norm`'s, never silently wrong.
#
# ## Knowledge check
#
# Answer each question in your own words first, then open the guide.
#
# **1. Why is the reference computed in float64 rather than in the input dtype?**

# %% [markdown]
# <details><summary>Answer guide</summary>
#
# So that its own rounding error is negligible next to the tolerance: both routes compute in fp32 and round once to
# the input dtype, and the comparison should measure *their* error. A reference in fp16 would carry as much error
# as the thing it checks, and two wrong results could agree.
# </details>

# %% [markdown]
# **2. Why must the fast path raise `TypeError` (not `RuntimeError`) for `normalized_shape=8`?**

# %% [markdown]
# <details><summary>Answer guide</summary>
#
# Because `F.rms_norm` does, and the exception type is part of the contract: user code that catches `TypeError`, or
# a test that expects it, must keep working. The predicate sends invalid calls to the fallback so the fallback
# raises its own error, with its own message.
# </details>

# %% [markdown]
# **3. A kernel launched directly returns, for a dual-tensor input, an output with no tangent and no error. Why is
# that worse than an exception, and what prevents it in the kit's op?**

# %% [markdown]
# <details><summary>Answer guide</summary>
#
# An exception stops the user; a missing tangent is read as zero and silently corrupts a Jacobian, a sensitivity
# analysis or a forward-mode optimizer, and nobody notices. The kernel has no forward-mode formula, so autograd treats
# its output as constant. The predicate's `forward_ad` and `functorch_transform` conditions send such calls to
# `F.rms_norm`, and promise 8 checks the tangent against `F.rms_norm`'s.
# </details>

# %% [markdown]
# **4. What does autocast change about the tensors the kernel sees, and why does the op need its own policy?**

# %% [markdown]
# <details><summary>Answer guide</summary>
#
# Under CUDA autocast `rms_norm` runs in fp32 in the pinned torch, so for an fp16 or bf16 input its output dtype
# differs from the input's. The
# live check shows that CUDA's autocast has an `rms_norm` kernel; on a GPU its last lines print the fp32 outputs. A
# custom op is opaque to autocast, so without a registered policy it would keep the input dtype and break parity with
# `F.rms_norm`; with the same policy registered the kernel sees already-cast inputs.
# </details>

# %% [markdown]
# ## Read next
#
# - [Exercise 01](../exercises/ex01_reference.ipynb): write the float64 reference and the default `eps`.
# - [Exercise 09](../exercises/ex09_contract_parity.ipynb): contract-parity tests, graded by the broken ops they catch.
# - [Lesson 02](02_triton_kernel.ipynb): the kernels that must keep this contract.
