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
# # 06 · Workload replay and maintenance cost
#
# **What you will learn**
# - how to replay a real workload's calls (shapes, dtypes, layouts and their frequencies) instead of a synthetic
#   sweep, and what share of calls the fast path actually takes;
# - what the change costs to keep: compile time, the fallback switch, and an owner.
#
# A reviewer asks two questions a shape sweep cannot answer: *does this help a real model?* and *who pays for it
# later?*

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

import pandas as pd
from fastpath_lib import bench
from fastpath_lib.rmsnorm.predicate import limits_for

R = limits_for(DEVICE).min_rows

# %% [markdown]
# ## Workload replay
#
# `bench.replay` runs a small decoder forward twice with the same weights: once with `torch.nn.RMSNorm`, once with
# `fastpath_lib.RMSNorm`. It checks that the logits agree, counts the routes the fast model's norms take, and
# times the whole forward and the norms alone, so the result says what share of a step RMSNorm is and what the
# fast path changes end to end (on a GPU: 8 × 512 tokens, dim 4096, bf16; on a CPU: tiny sizes).

# %% tags=["nbval-ignore-output"]
replay = bench.replay(quick=True)
print(replay["label"])
print("logits agree:", replay["logits_close"], "| fast model routes:", replay["fast_model_routes"])

# %% [markdown]
# The timings (on a CPU, interpreter times: **not a GPU measurement**). Read `norm_share_baseline` first: if the
# norms are 3 % of a step, even an infinitely fast norm saves at most 3 %.

# %% tags=["nbval-ignore-output"]
pd.Series(replay, dtype=object).to_frame('value')

# %% [markdown]
# ## Maintenance cost: compile time
#
# The Triton kernels are compiled on first use for each specialization (dtype, block size, constexprs). On a GPU
# that is a one-off cost per process that users see as a slower first step; under the interpreter there is no
# compilation, so the number below is not comparable.

# %%
cost = bench.compile_cost()  # the full matrix; without CUDA it only lists, nothing compiles
print("specializations the matrix compiles:", cost["specializations"])
pd.DataFrame(cost["list"])

# %% [markdown]
# On a GPU the probe measures first-call minus second-call time per specialization in a fresh process; here:

# %% tags=["nbval-ignore-output"]
print({k: v for k, v in cost.items() if k != "list"})

# %% [markdown]
# ## Maintenance cost: the fallback switch and an owner
#
# Every fast path needs a way off that does not require a code change, and somebody who answers when it breaks.
# Here the switch is `force_fallback()` (tests, debugging) and `FASTPATH_FORCE_FALLBACK=1` (production):

# %%
x = torch.randn(2 * R, 64, device=DEVICE)
with fastpath_lib.record_routes() as routes, fastpath_lib.force_fallback():
    fastpath_lib.rms_norm(x, [64])
print("with force_fallback():", dict(routes))

# %% [markdown]
# The cost to list in the PR, so a reviewer can weigh it against the measured gain:
#
# | cost | this change |
# |---|---|
# | code | two Triton kernels, their launchers, a predicate of named conditions (lesson 03 lists them), a custom op |
# | tests | generated boundary tests (both routes), contract parity, opcheck, compile, GPU-only tests under compute-sanitizer |
# | compile time | Triton JIT on first use per specialization (see above, measured on a GPU) |
# | way off | `force_fallback()`, `FASTPATH_FORCE_FALLBACK=1` |
# | re-tuning | the row threshold per GPU architecture (`CUDA_MIN_ROWS`), from a recorded sweep |
# | owner | named in the PR; answers for regressions and for new architectures |
#
# ## Recap
#
# - A workload replay measures what share of real calls the fast path takes, not only how fast it is.
# - Compile time, the off switch, re-tuning and an owner are part of the change's price.
#
# **Questions**
# 1. A fast path wins 2× on the sweep but takes 5 % of the workload's calls. Is it worth merging?
# 2. Why is a switch that needs no code change important for production users?
# 3. What should happen to `CUDA_MIN_ROWS` when a new GPU architecture ships?
