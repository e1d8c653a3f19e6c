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
# # 00 · Setup: the kit, the two ways it runs, and a self-test
#
# **What you will do**: check that Triton computes correct results on this machine, make a first call and see its
# route, and choose between the fast track and the full course.
#
# **What you need**: Python, PyTorch and a little Triton; the kit set up by `./kit lab` (no GPU needed).
#
# **Time**: about 15 minutes.
#
# **What you will learn**
# - how Fastpath Kit runs the same Triton kernels on a GPU *and* on a laptop CPU (Triton's interpreter);
# - how to check that Triton computes correct results on your machine (`fastpath_lib.selftest.run()`);
# - the three claims a reviewer checks in a performance PR, which the next lessons build one by one.
#
# The running example is a Triton RMSNorm fast path (forward and backward) behind an *eligibility predicate*,
# with `torch.nn.functional.rms_norm` as the fallback. The notebooks import everything from the library
# `fastpath_lib`; no library code is copied into them.

# %% [markdown]
# ## The fast track
#
# The core of the method: four steps, each a few sections of one lesson and the exercise that grades it. Run this
# notebook first (the self-test below says whether Triton computes correctly here). For each step, open the lesson, run
# all its cells (Run > Run All Cells), read the sections named, then do the exercise and run its check cells. The *run
# and read* column is the lesson's recorded cold run plus the sections named, at the kit's reading rates
# (`docs/lesson_times.json`); nothing measures the exercises, so no time is given for them. The full course, every
# lesson in order, takes about five hours; the fast track leaves out lessons 01, 02, 06, 08 and 09 (the contract in
# full, the kernels, the workload, the second operator and the upstream forms).
#
# | step | read | then do | run and read |
# |---|---|---|---|
# | 1. **Declare the region**: a predicate whose conditions each say why a call falls back | [lesson 03](03_eligibility_predicate.ipynb): "The conditions", "`explain()` inside and outside the boundary" | [exercise 03](../exercises/ex03_predicate.ipynb) | 10 min |
# | 2. **Test its edges**: boundary points generated from the predicate, both routes at each | [lesson 04](04_boundary_tests.ipynb): "Boundary points from the predicate", "Tensor points: both routes against the reference" | [exercise 04](../exercises/ex04_boundary_cases.ipynb) | 10 min |
# | 3. **Run the predeclared matrix**: cases and expected outcomes declared before anything is timed | [lesson 05](05_benchmark_matrix.ipynb): "1. Predeclare", "4. The format, on this machine: a quick run" | [exercise 05](../exercises/ex05_case_matrix.ipynb) | 15 min |
# | 4. **Write the note**: wins, neutral cases, losses, and the scope they justify | [lesson 07](07_pr_note.ipynb): "Drafting the note from the results", "Reading the draft as a reviewer" | [exercise 07](../exercises/ex07_pr_note.ipynb) | 10 min |
#
# At the end, grade the four exercises (a score table):
#
# ```bash
# ./kit grade exercises/ex03_predicate.ipynb exercises/ex04_boundary_cases.ipynb \
#     exercises/ex05_case_matrix.ipynb exercises/ex07_pr_note.ipynb
# ```
#
# On this CPU nothing is timed as a GPU would time it: step 3's quick run shows the format of the evidence, and the
# note step 4 drafts from its own quick run says so.

# %% [markdown]
# ## Where are we running?
#
# The first cell of every lesson imports `fastpath_lib`, opts in to Triton's interpreter with
# `fastpath_lib.use_interpreter()`, and prints the mode, the versions and where the tensors run, a line each
# (`runtime.lesson_device()`: more lines where the versions or the GPU are older than the kit's tested ones).
# Without CUDA,
# `use_interpreter()` sets `TRITON_INTERPRET=1` before any kernel is imported (Triton reads it when a kernel is
# decorated), so the kernels run in Triton's CPU interpreter; on a CUDA machine it does nothing. Importing the library
# itself registers its own operators (the `fastpath::` namespace) with torch's dispatcher and changes nothing else
# process-wide: no torch operator, no environment variable, not Triton's mode. Without the opt-in, every CPU call takes
# `F.rms_norm` and `explain` names the `device` condition. The output of this cell changes from machine to machine, so
# the notebook tests ignore it.

# %% tags=["nbval-ignore-output"]
import torch
import fastpath_lib
# no CUDA: run the kernels in Triton's CPU interpreter (a no-op on a GPU)
fastpath_lib.use_interpreter()
from fastpath_lib import runtime

DEVICE = runtime.lesson_device()  # "cuda" on a GPU, else "cpu"; prints the mode and versions
_ = torch.manual_seed(0)

# %% [markdown]
# Either way Triton has a backend here: CUDA on a GPU, the interpreter on a CPU. The interpreter executes each
# program instance with numpy, one after another: results are exact enough to test, but a call's time grows with
# its programs (a 4096×4096 call is slow), so the lessons keep shapes small on the CPU.

# %%
print("Triton can run here:", runtime.interpreter_enabled() or runtime.cuda_available())

# %% [markdown]
# ## On a hosted GPU older than sm_80 (Colab, Kaggle)
#
# Colab and Kaggle notebooks offer a Tesla T4 (Kaggle's default GPU), compute capability 7.5 (sm_75). Triton's supported
# NVIDIA GPUs start at 8.0, so the kit's predicate refuses the T4 and every dispatched call takes `F.rms_norm`: the
# lessons run, but the lines `lesson_device()` prints in the first code cell (under "Where are we running?") say that
# their timings measure the fallback. The cell just above still prints `True` there (it asks only whether CUDA or the
# interpreter is present), but by default the kit's predicate sends no call to Triton on such a GPU. The predicate
# refuses an older GPU such as a Tesla P100 (sm_60) the same way, but whether the lessons run there at all is up to the
# host's PyTorch build: a build without sm_60 kernels, such as Kaggle's default one, fails at the first CUDA operation,
# `F.rms_norm` included. Choose the T4. Upload or clone the kit's folder, then install the kit alone (`--no-deps`: the
# notebook keeps its own torch, triton, numpy, pandas and matplotlib, whose CUDA build matches the machine;
# `lesson_device()` names torch or triton if older than the kit is tested with), and the packages the lessons
# import beyond those:
#
# ```
# %pip install --no-deps -e .
# %pip install hypothesis ipywidgets pyyaml
# ```
#
# The kernels do compile for sm_75 (`tests/rmsnorm/test_compiled.py` compiles both ops' kernels for it, spill-free for
# every specialization the launchers use). To run them on a T4, opt in for a block: `selftest.allow_sm75()` runs the
# self-test on the T4 first and then admits fp16 and fp32 (never bf16) inside its `with` block only. Those calls are
# outside Triton's support matrix and unmeasured: no sweep set their row threshold. On any other GPU or machine the
# block changes nothing, as here:

# %% tags=["nbval-ignore-output"]
from fastpath_lib import selftest

with selftest.allow_sm75() as note:
    print(note)

# %% [markdown]
# ## The self-test
#
# The interpreter runs on numpy, so a Triton and numpy pair the kit was not tested with can compute wrong results
# without an error. `selftest.run()` launches the kit's own kernels (RMSNorm's and the fused residual-add +
# RMSNorm's) on small fixed inputs (odd and power-of-two widths; fp32, fp16, bf16, without bf16 on a GPU older than
# sm_80) and compares forward, `dx` and `dw` with the float64 reference. When a check fails, a minimal Triton probe
# with the same primitives says whether the kit's kernels or the toolchain is at fault (`result.culprit`). The test
# suite runs it first and stops when it fails.

# %%
result = selftest.run()
print("self-test ok:", result.ok)
print("problems:", result.problems)
assert result.ok, result

# %% [markdown]
# The full line names the versions, so its output is ignored by the notebook tests:

# %% tags=["nbval-ignore-output"]
print(result)

# %% [markdown]
# ## A first call
#
# `fastpath_lib.rms_norm` has the signature of `torch.nn.functional.rms_norm`. Whether a call takes the Triton
# route depends on the predicate; one of its limits, the row threshold, depends on the device (8 rows under the
# interpreter, a per-architecture value on CUDA). We take twice the threshold so the call is past the row
# threshold on any device (on a GPU the predicate refuses, such as a T4, it still falls back).

# %% tags=["nbval-ignore-output"]
from fastpath_lib.rmsnorm.predicate import limits_for

limits = limits_for(DEVICE)
print("row threshold here:", limits.min_rows, f"({limits.source})")
ROWS = 2 * limits.min_rows

# %% [markdown]
# `explain` tells which route a call would take and why; `record_routes` counts the routes actually taken; the
# float64 reference and `compare` (tolerances per dtype) check the numbers. `compare` returns `None` on a match.

# %%
from fastpath_lib.testing import compare, reference_rms_norm

x = torch.randn(ROWS, 64, device=DEVICE)
w = torch.randn(64, device=DEVICE)
print(fastpath_lib.explain(x, [64], w))
with fastpath_lib.record_routes() as routes:
    y = fastpath_lib.rms_norm(x, [64], w)
print(routes)
print("mismatch vs reference:", compare(y, reference_rms_norm(x, [64], w), x.dtype))

# %% [markdown]
# ## The three claims
#
# A reviewer of a performance PR checks three claims. Lessons 02 and 05 serve two claims, lesson 08 (the second
# operator, the in-place fused residual-add + RMSNorm: its contract, mechanism and predeclared matrix) all three, and
# lesson 00 (setup) none of the three.
# The table names the lessons that produce evidence for each of the three claims:
#
# | claim | question | lessons |
# |---|---|---|
# | **Semantic** | does the new path compute what the old one did, for every input it accepts? | 01, 02, 03, 04, 08, 09 |
# | **Mechanism** | why is it faster: bytes moved, launches, GB/s against the measured copy bandwidth? | 02, 05, 08 |
# | **Performance** | on a predeclared matrix of ≥ 12 cases, with raw samples, environment metadata, and the neutral and losing cases? | 05, 06, 07, 08 |
#
# Lesson 09's evidence is semantic: the same results on sharded inputs (DTensor).
#
# Besides these lessons the kit has exercises (`exercises/`, graded by `python -m fastpath_lib grade`), the
# benchmark CLI (`python -m fastpath_lib bench`) and the test suite (`./kit test`).

# %% [markdown]
# ## Recap
#
# - On a CPU the kernels run in Triton's interpreter: correct, slow, never a performance measurement.
# - `selftest.run()` checks that Triton computes correct results on *this* machine before you trust anything else.
# - `explain`, `record_routes`, `reference_rms_norm` and `compare` are the tools of every later lesson.
#
# ## Knowledge check
#
# Answer each question in your own words first, then open the guide.
#
# **1. Why must `fastpath_lib.use_interpreter()` run before the kernel module is imported, and why is it not done by
# `import fastpath_lib` itself?**

# %% [markdown]
# <details><summary>Answer guide</summary>
#
# Triton reads `TRITON_INTERPRET` when a kernel is decorated with `@triton.jit`, that is when the kernel module is
# imported: set later, it changes nothing for kernels already defined. Importing the library does not set it because
# that would change every other Triton kernel in the process and send a CPU user's calls through a slow interpreter;
# an explicit opt-in leaves that choice to whoever runs the lesson, the tests or `./kit`.
# </details>

# %% [markdown]
# **2. Why does the self-test use a width of 37 as well as 16?**

# %% [markdown]
# <details><summary>Answer guide</summary>
#
# 16 is a power of two, so the block has no idle lanes and a missing mask, or a mean divided by the block size, goes
# unnoticed. 37 is odd and not a power of two: its block (64) has 27 masked lanes, so any mistake in masking or in
# the divisor shows up in the comparison.
# </details>

# %% [markdown]
# **3. Which of the three claims can you fully check on a machine without a GPU?**

# %% [markdown]
# <details><summary>Answer guide</summary>
#
# The semantic claim: the interpreter runs the same kernels, so parity with the float64 reference and with `F.rms_norm`
# is checked for real, and so are races between programs on global memory (`traffic.watch(races=True)`); races inside
# one program need a GPU (lesson 02's table lists each hazard with what checks it). The
# mechanism can be argued from bytes moved and from the code compiled for a GPU target (lesson 02), but its GB/s and the
# performance claim need a GPU measurement.
# </details>

# %% [markdown]
# ## Read next
#
# - In a hurry: the fast track above, step 1.
# - [Lesson 01](01_operator_contract.ipynb): the full course, from the contract a fast path must keep.
