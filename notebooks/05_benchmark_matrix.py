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
# # 05 · The benchmark matrix: predeclared, raw, with metadata
#
# **What you will learn**
# - why the benchmark cases are *declared before* anything is measured, including cases where the fast path is
#   expected to be neutral or to lose;
# - how a run records raw samples and the environment (GPU, driver, versions) next to the results;
# - how to read the results as a reviewer: mechanism (GB/s against the device's ceiling) and performance
#   (win / neutral / loss per case), and where the dispatch boundary sits.
#
# The matrix is the Performance claim's evidence. A reviewer distrusts a PR that shows only its best shape.

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

# %matplotlib inline
import dataclasses
import tempfile
from pathlib import Path

import pandas as pd
from IPython.display import display
from fastpath_lib import bench

pd.set_option("display.max_colwidth", 80)

# %% [markdown]
# ## 1. Predeclare
#
# The matrix lives in a file in the repository, written (and reviewed) before the first measurement. Each case says
# what it probes and what the author expects — including the shapes where the new path should not be faster
# (small, launch-bound calls; shapes the predicate sends to the fallback).

# %%
cases = bench.load_cases()
print(len(cases), "predeclared cases; expected outcomes:", pd.Series([c.expected for c in cases]).value_counts().to_dict())
pd.DataFrame([dataclasses.asdict(c) for c in cases])[["id", "family", "shape", "dtype", "layout", "pass_",
                                                       "expected", "rationale"]]

# %% [markdown]
# `check_coverage` is the reviewer's first question turned into code: does the matrix have at least 12 cases, and
# does it include expected neutral, losing and fallback cases, not only wins? An empty list means it does.

# %%
print(bench.check_coverage(cases))

# %% [markdown]
# ## 2. Run — live on a GPU, recorded results otherwise
#
# On a GPU this lesson measures the whole matrix (a few minutes). Without one it does **not** produce GPU numbers:
# it analyses the newest results recorded on a GPU in `results/` and says so; if there are none, it runs the
# CPU quick mode on two cases so you can see the format — those timings are **NOT a GPU measurement** and say
# nothing about the fast path's speed.

# %% tags=["nbval-ignore-output"]
recorded = bench.latest_gpu_results(root="../results")
scratch = Path(tempfile.mkdtemp(prefix="fastpath-lesson05-")) / "run"
if DEVICE == "cuda":  # a few minutes; `python -m fastpath_lib bench` records a full folder in results/
    SOURCE, RESULTS_DIR = "live GPU measurement", scratch
    df = bench.run_matrix(cases, out_dir=RESULTS_DIR, progress=False, analyses=False)
elif recorded is not None:
    SOURCE, RESULTS_DIR = f"recorded GPU results ({recorded.name})", recorded
    df, _ = bench.load_results(recorded)
else:  # two cases, tiny shapes: shows the format only
    SOURCE, RESULTS_DIR = "CPU quick mode on 2 cases: NOT a GPU measurement", scratch
    picked = [c for c in cases if c.id in ("decode_m1_fp16", "batch_1024_fp16")] or cases[:2]
    df = bench.run_matrix(picked, quick=True, out_dir=RESULTS_DIR, progress=False, analyses=False)
print("source:", SOURCE)

# %% [markdown]
# ## 3. Metadata
#
# Results without the environment cannot be reproduced or compared: GPU model, driver, CUDA, torch, triton, clocks,
# the commit. The run writes them to `environment.json` next to `results.csv`.

# %% tags=["nbval-ignore-output"]
_, env = bench.load_results(RESULTS_DIR)
pd.Series(env, dtype=object).to_frame("value")

# %% [markdown]
# ## 4. Raw results
#
# One row per case, route, mode and sample: the raw samples, not only a summary, so a reviewer can recompute
# medians and spreads. (The numbers depend on the machine; the notebook tests do not compare them.)

# %% tags=["nbval-ignore-output"]
print(SOURCE)
df[["case_id", "provider", "rows", "cols", "dtype", "route", "status", "median_us", "q20_us", "q80_us",
    "samples_us", "gpu_measurement"]].head(12)

# %% [markdown]
# ## 5. Performance and mechanism
#
# `bench.classify` labels each case *win*, *neutral*, *loss* or *fallback* from the measured ratio to the baseline.
# The mechanism columns turn time into GB/s from bytes moved, which a reviewer compares with the device's memory
# bandwidth: a fast path near the ceiling has no headroom left; one far below it is limited by something else.

# %% [markdown]
# Without GPU measurements the table leaves the speed-up column out. The `observed` column still compares the
# interpreter's time with a native CPU kernel, so it reads *loss* for every Triton-route case: that says how slow
# the interpreter is, nothing about a GPU.

# %% tags=["nbval-ignore-output"]
print(SOURCE)
bench.summary_table(df)  # without GPU measurements it leaves the speed-up column out

# %% [markdown]
# Mechanism: the bytes a call must move (each input read once, each output written once), the GB/s that makes,
# and its share of the measured copy bandwidth. The byte count is the same formula as lesson 02's fused version:

# %%
from fastpath_lib.bench.harness import bytes_moved

print("forward 4096x4096 bf16:", bytes_moved(4096, 4096, torch.bfloat16, "forward") / 2**20, "MiB")
print("fwd+bwd 4096x4096 bf16:", bytes_moved(4096, 4096, torch.bfloat16, "backward") / 2**20, "MiB")

# %% tags=["nbval-ignore-output"]
print(SOURCE)
df[df.provider != "compiled"][["case_id", "provider", "bytes_moved", "gbps", "copy_gbps", "pct_copy_bw"]]

# %% [markdown]
# ## 6. The dispatch boundary
#
# The plot shows the speed-up over the baseline against problem size, with the row threshold drawn in: to the left
# the predicate keeps the baseline (launch overhead would outweigh the saving), to the right the fast path should
# win. If a losing case sits right of the line, the threshold is too low; if winning cases sit left of it, it is
# too conservative.

# %% tags=["nbval-ignore-output"]
fig = bench.boundary_plot(df, env=df.attrs.get("environment"))
display(fig)
bench.boundary_table(df)

# %% [markdown]
# The scratch folder of this lesson's run is removed (recorded results in `results/` are left alone):

# %%
import shutil

shutil.rmtree(scratch.parent, ignore_errors=True)

# %% [markdown]
# ## What the numbers say
#
# Read the matrix in this order: is every case there that was declared (none silently dropped)? Do the losing and
# neutral cases fall where the author predicted, and does the predicate send them to the fallback? Are the wins
# near the bandwidth ceiling (mechanism) or suspiciously above it (a measurement error: caching, a missing
# synchronisation)? Only then: how large are the wins.
#
# ## Recap
#
# - Declare the cases first, including the ones you expect to lose; record raw samples and the environment.
# - Interpreter or CPU timings are never performance evidence; without a GPU, analyse recorded GPU results.
# - The boundary plot is how a reviewer checks the row threshold.
#
# **Questions**
# 1. Why must the case list be committed *before* the first GPU run?
# 2. A case reaches 5 TB/s on a GPU with 4.8 TB/s of bandwidth. What do you suspect?
# 3. Which columns of `environment.json` would you need to reproduce a run a year later?
