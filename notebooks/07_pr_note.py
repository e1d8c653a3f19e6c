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
# # 07 · The PR note, reviewable commits, and the reviewer's knowledge check
#
# **What you will learn**
# - how to draft the PR note from recorded results (`bench.pr_note`), so every number in it has a source;
# - how to split the change into commits a reviewer can read one at a time;
# - the questions a reviewer will ask, with answer guides to open *after* you have answered.

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

import tempfile
from pathlib import Path

from IPython.display import Markdown, display
from fastpath_lib import bench

# %% [markdown]
# ## Drafting the note from the results
#
# The note is generated from a results folder: the predeclared matrix, the environment, the raw samples and the
# classification. Nothing in it is typed by hand, so nothing can drift from what was measured. Without recorded
# GPU results the note says that it has no GPU evidence, rather than inventing any.

# %% tags=["nbval-ignore-output"]
source = bench.latest_gpu_results(root="../results")
if source is None:  # no GPU evidence recorded: draft from a 2-case CPU quick run, which the note labels as such
    source = Path(tempfile.mkdtemp(prefix="fastpath-lesson07-")) / "run"
    picked = [c for c in bench.load_cases() if c.id in ("decode_m1_fp16", "batch_1024_fp16")]
    bench.run_matrix(picked, quick=True, out_dir=source, progress=False, analyses=False)
    print("no recorded GPU results: drafting from a CPU quick run (NOT a GPU measurement)")
note = bench.pr_note(source)
print(note.splitlines()[0])

# %% [markdown]
# The draft, rendered. Check that it names the hardware, that every predeclared case appears, and — without GPU
# results — that it says the Performance claim is *unmeasured* instead of quoting interpreter timings:

# %% tags=["nbval-ignore-output"]
Markdown(note)

# %%
import shutil

if "fastpath-lesson07-" in str(source):  # remove only the scratch run made above
    shutil.rmtree(source.parent, ignore_errors=True)

# %% [markdown]
# ## Splitting the change into reviewable commits
#
# One PR, several commits, each of which builds and passes the tests on its own:
#
# 1. **Semantic change** — the custom op, the predicate and the kernels, behind the fallback; the contract tests
#    (`F.rms_norm` parity, exceptions, autocast, gradients, compile).
# 2. **Mechanical refactor** — moves and renames with no behaviour change (for example routing call sites
#    through the new op); a reviewer can skim it, because the tests did not change.
# 3. **Tests** — the generated boundary tests, guard bands, `opcheck`, GPU tests for compute-sanitizer.
# 4. **Benchmark** — the predeclared matrix, the harness, the recorded results and environment, the note.
#
# Mixing a refactor into the semantic commit hides the one line that changes behaviour among hundreds that do not.
#
# ## The reviewer's knowledge check
#
# Answer each question in your own words first, then open the guide.
#
# **1. Why should a performance PR include shapes where the new path is not faster?**

# %% [markdown]
# <details><summary>Answer guide</summary>
#
# They show the boundary is where the predicate says it is: the neutral and losing shapes are exactly the ones the
# fast path must *not* take, and measuring them proves the threshold protects the baseline. They also show the
# author did not pick the matrix after seeing the results (predeclared), and they give users on those shapes an
# honest answer ("no change for you"). A PR with only wins hides its regressions and invites the reviewer to go
# looking for them.
# </details>

# %% [markdown]
# **2. The benchmark shows 1.8× on 4096×4096 bf16. What else do you need before believing it?**

# %% [markdown]
# <details><summary>Answer guide</summary>
#
# The baseline it was compared with (the real `F.rms_norm`, same inputs), the environment (GPU, clocks, driver,
# versions), the raw samples and their spread, the bytes moved and the resulting GB/s against the device's
# bandwidth (is 1.8× even possible?), and the rest of the predeclared matrix.
# </details>

# %% [markdown]
# **3. How do you know the fast path computes the same thing as the fallback for inputs nobody tested by hand?**

# %% [markdown]
# <details><summary>Answer guide</summary>
#
# The boundary tests are generated from the predicate's declarations, so every condition is tested on both sides
# of its limit, through both routes, against a float64 reference with per-dtype tolerances; the guard bands catch
# out-of-bounds access; hypothesis cases cover the space in between; `opcheck` checks the op's registration.
# </details>

# %% [markdown]
# **4. Why does the fast path send invalid calls to the fallback instead of raising its own error?**

# %% [markdown]
# <details><summary>Answer guide</summary>
#
# So users keep `F.rms_norm`'s exception types and messages: code that catches `RuntimeError` for a shape mismatch,
# or tests that match the message, keep working. The fast path adds speed, never a new error.
# </details>

# %% [markdown]
# **5. A user reports wrong results on a new GPU. What do they do today, and what do you do?**

# %% [markdown]
# <details><summary>Answer guide</summary>
#
# Today: `FASTPATH_FORCE_FALLBACK=1` (no code change), and `fastpath_lib.explain(...)` to report the route. You:
# reproduce with the self-test and the GPU tests under compute-sanitizer on that architecture, and, until fixed,
# exclude it in the predicate's `architecture` condition.
# </details>

# %% [markdown]
# ## Recap
#
# - Generate the PR note from recorded results; never type a number into it.
# - Split the change: semantic, mechanical, tests, benchmark.
# - Include the neutral and losing shapes: they are the evidence that the boundary is right.
#
# **Questions**
# 1. Which commit of the four would you review most carefully, and why?
# 2. What does the PR note say when there are no GPU results at all?
