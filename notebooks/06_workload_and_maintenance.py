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
# **What you will do**: replay a workload's calls weighted by frequency, pick a row threshold from a sweep, and price
# the change: CI, compile time, binary size, an off switch, an owner, CUDA graphs.
#
# **What you need**: lessons 03 and 05; this CPU.
#
# **Time**: about 30 minutes.
#
# **What you will learn**
# - how to replay a workload's calls (prefill and decode shapes and how often each occurs) and weight the
#   per-call times by frequency, so the totals add up;
# - how the per-architecture row threshold is chosen from a recorded sweep, and traced back to it;
# - what runs on every push (CI tests) and what runs on a schedule on a GPU (sweeps), and why;
# - what the change costs to keep: compile time, binary size, a way off, an owner; and why not `torch.compile` or
#   an existing kernel instead;
# - what CUDA-graph capture (as vLLM serves) does to the route of each call.
#
# A reviewer asks two questions a shape sweep cannot answer: *does this help a real model?* and *who pays for it
# later?*

# %% tags=["nbval-ignore-output"]
import torch
import fastpath_lib
# no CUDA: run the kernels in Triton's CPU interpreter (a no-op on a GPU)
fastpath_lib.use_interpreter()
from fastpath_lib import runtime

DEVICE = runtime.lesson_device()  # "cuda" on a GPU, else "cpu"; prints the mode and versions
_ = torch.manual_seed(0)

import pandas as pd
from fastpath_lib import bench
from fastpath_lib.bench import buildcost, trace
from fastpath_lib.rmsnorm.predicate import limits_for

R = limits_for(DEVICE).min_rows

# %% [markdown]
# ## 1. A workload is a call trace, with frequencies
#
# Serving a decoder makes two kinds of norm calls. **Prefill** normalizes every prompt token at once: one forward
# of `batch x prompt` rows. **Decode** then generates one token per step: a forward of `batch` rows, once per new
# token. Each forward calls the norm `2 x layers + 1` times. For one request of 512 prompt tokens and 128 new
# tokens on a 32-layer, 4096-wide model:

# %%
calls = trace.serving_trace(hidden=4096, layers=32, batch=1, prompt_tokens=512, decode_steps=128)
pd.DataFrame([{"phase": c.phase, "shape": c.shape, "dtype": str(c.dtype).removeprefix("torch."),
               "calls": c.count}
              for c in calls])

# %% [markdown]
# 99 % of the calls are decode calls of one row, which the fast path never takes. What matters is *time*, not
# calls: a 512-row prefill norm moves about 340 times the bytes of a decode norm (512 times the rows in and out,
# and the weight read once by both). So the replay times each distinct call
# once, for `F.rms_norm` and the dispatched op side by side, and multiplies by its count. Every total is the sum of
# its rows, and each share is a row's part of that sum: nothing can exceed the whole.
#
# Here the prefill call would take the Triton route, which runs in the interpreter: it is **not measured**. The
# decode calls take the fallback and are timed for real: CPU time, `F.rms_norm` on this CPU plus the dispatch.

# %% tags=["nbval-ignore-output"]
replayed = trace.replay_trace(calls)
tot = replayed.attrs["totals"]
print(tot["label"], f"| {tot['measured_calls']} of {tot['calls']} calls measured")
replayed

# %% [markdown]
# The decode rows' totals are one request's worth. What carries over to a GPU host is the decode row's extra per
# call (`dispatched_us - baseline_us`, printed below): the dispatch's own Python, paid on every one of the 8320
# decode calls (lesson 05, section 2, says why only the extra carries over). It is the quantity lesson 05's host table
# measures for a 1x4096 decode call (fp16 there, bf16 here), by the same method: each time here is the fastest of as
# many blocks as the host table's, each about as long as its block of decode calls (`fastpath_lib.bench.hostmethod`
# says why short blocks; lesson 05, section 2, what such a time can and cannot resolve), so compare the two. The
# request's total multiplies a difference of two such times by the call count, so it is printed to two significant
# figures, as an order of magnitude.

# %% tags=["nbval-ignore-output"]
dec = replayed.set_index("phase").loc["decode"]
print(f"decode, per call: F.rms_norm {dec.baseline_us:.1f} us, dispatched {dec.dispatched_us:.1f} us, "
      f"the dispatch's extra {dec.dispatched_us - dec.baseline_us:.1f} us")
def two_figures(v: float) -> str:
    return f"{float(f'{v:.2g}'):g}"
print(f"decode: {dec.calls} calls; "
      f"dispatch adds about {two_figures(dec.dispatch_extra_total_us / 1e3)} ms per request "
      f"(about {two_figures(dec.dispatch_extra_total_us / 128)} us per generated token)")
pd.Series({k: round(v, 1) if isinstance(v, float) else v for k, v in tot.items()},
          name="totals over the measured rows").to_frame()

# %% [markdown]
# On a GPU the same replay times every row, prefill included. Note what decides the prefill row there: with no
# recorded threshold for the GPU's architecture, `min_rows` is a conservative 1024, so a 512-token prefill falls back
# too and the fast path takes *no* call of this request. Whether that is right is what the sweep in section 3
# answers.
#
# Why not time a whole tiny model, then the norms alone, and divide? Two interpreter timings taken at different
# moments on a busy machine are independent measurements: the norms alone can come out longer than the whole
# forward pass, and their ratio means nothing. Per-call times weighted by counts, measured side by side, add up by
# construction.
#
# ## 2. The model still computes the same thing
#
# Speed aside, swapping the norm must not change the model. `TinyDecoder` (in `fastpath_lib.bench.workload`) is a
# small Llama-style decoder; build it twice with the same weights, once with `torch.nn.RMSNorm` and once with
# `fastpath_lib.RMSNorm`, and compare the logits (no timing: on this machine that would time the interpreter):

# %%
from fastpath_lib.bench.workload import TinyDecoder

base = TinyDecoder(dim=64, layers=2, heads=4, hidden=128).to(DEVICE).eval()
fast = TinyDecoder(dim=64, layers=2, heads=4, hidden=128,
                   norm_cls=fastpath_lib.RMSNorm).to(DEVICE).eval()
fast.load_state_dict(base.state_dict())
tokens = torch.randint(0, 256, (2, 8), device=DEVICE)
with torch.no_grad(), fastpath_lib.record_routes() as routes:
    a, b = base(tokens), fast(tokens)
print("logits agree:", torch.allclose(a, b, atol=1e-4, rtol=1e-4),
      "| routes of the 5 norm calls:", dict(routes))

# %% [markdown]
# ## 3. Choosing the per-architecture row threshold from a sweep
#
# `min_rows` is the row count below which a launch costs more than it saves. It differs per GPU architecture, so it
# is not typed in: a **sweep** times the dispatched call (`fastpath_lib.rms_norm`, its row threshold lowered for the
# sweep so it takes the Triton route wherever everything else allows) against `F.rms_norm` across row counts (1 to
# 16384), several widths and every dtype the kit admits on the GPU. It times them as the host cost is timed, host
# time included (blocks of back-to-back calls, each ending in a device sync): the threshold decides eager calls, and
# a small eager call is host-bound, so device time alone would put it too low. The rule picks, per width and dtype,
# the smallest swept row count *from which the fast route never loses*; the threshold is the largest of those. A
# worked example with outcomes only:
#
# | rows | 256 | 512 | 1024 | 2048 | 4096 |
# |---|---|---|---|---|---|
# | 2048 columns | loss | neutral | loss | win | win |
# | 8192 columns | loss | win | win | win | win |
#
# 2048 columns: 2048 (512 is neutral, but 1024 loses again). 8192 columns: 512. Threshold: max(2048, 512) = 2048.
# "Never loses from here on" rather than "first win" keeps a noisy early win from setting it too low.
#
# What is recorded, and where it comes from:

# %% tags=["nbval-ignore-output"]
from fastpath_lib.rmsnorm import thresholds
from fastpath_lib.rmsnorm.limits import DEFAULT_CUDA_MIN_ROWS

print("recorded thresholds:", thresholds.entries() or "none (no GPU sweep is recorded)")
print("every architecture without one uses the conservative default:",
      DEFAULT_CUDA_MIN_ROWS, "rows")
print("this machine:", limits_for(DEVICE))

# %% [markdown]
# The sweep runs here too, on tiny shapes, so you can see its table; off a GPU it refuses to propose anything:

# %% tags=["nbval-ignore-output"]
sweep = bench.threshold_sweep(quick=True)
print(sweep.attrs["proposal"]["reason"])
sweep[["cols", "rows", "dtype", "provider", "route", "median_us", "vs_baseline", "gpu_measurement"]]

# %% [markdown]
# On a GPU, `python -m fastpath_lib threshold results/<device>-<date>` recomputes the proposal from the folder's raw
# `threshold.csv` (it refuses CPU, synthetic or unfinished folders, and a stored proposal that disagrees with the
# raw data) and writes `fastpath_lib/rmsnorm/thresholds.json` with the folder it came from, the device, the commit
# and the per-width crossovers; `--check` prints it without writing. The predicate reads that file at import. A
# reviewer can trace every threshold to a results folder in the repository, and a new architecture gets the
# default until someone records a sweep for it.
#
# ## 4. CI tests on every push, sweeps on a schedule
#
# Two workflows. Correctness is cheap to check and must gate every change; performance needs a real GPU,
# takes minutes and is noisy, so it runs on a schedule on a fixed machine and is compared run to run:

# %% tags=["nbval-ignore-output"]
from pathlib import Path

import yaml

WORKFLOWS = Path(fastpath_lib.__file__).resolve().parents[1] / ".github" / "workflows"
for name in ("ci", "gpu-sweep"):
    wf = yaml.safe_load((WORKFLOWS / f"{name}.yml").read_text())
    triggers = wf.get("on", wf.get(True))  # YAML 1.1 reads the key `on` as True
    for job, spec in wf["jobs"].items():
        steps = [s.get("name") or s.get("uses") for s in spec["steps"]]
        print(f"{name}: on {triggers} -> job {job} on {spec['runs-on']}:\n   "
              + "\n   ".join(steps))

# %% [markdown]
# | | CI (`ci.yml`) | scheduled sweep (`gpu-sweep.yml`) |
# |---|---|---|
# | when | every push and pull request | weekly, or by hand |
# | where | a CPU runner (Triton's interpreter), kernels also compiled ahead of time for sm_75, sm_80, sm_86, sm_89, sm_90 and sm_120 | a self-hosted GPU runner |
# | checks | the contract, the boundary tests on both routes, the predicate, the lessons and exercises (`test`); the evidence command's plan and CPU-testable parts under the GPU machine's package set and versions (the other two jobs) | speed: the matrix, the threshold sweep, host cost, workload, compile cost |
# | fails on | any test | a step that fails; drift is reported (`compare` against the newest committed run) |
# | output | pass / fail | a results folder to review and commit, and the threshold the sweep supports (`--check`) |
#
# A performance number never gates a push: it would make CI flaky and would need a GPU per push. A correctness test
# never waits for the schedule: a wrong result must not merge.
#
# ## 5. Compile time and binary size
#
# Every choice the kit's launchers make (kernel x dtype x block size x warps x rows per program x weight x alignment x
# architecture) is a separate binary, and Triton's JIT splits each choice further: the kernels are plain
# `@triton.jit`, so every integer argument (the row count, the row strides, the width) is marked from the call's value
# (a multiple of 16, the value 1, or neither), and each combination of marks compiles apart. Triton compiles each
# binary on its first use on a machine and writes it to its on-disk cache (`~/.triton/cache`, or
# `TRITON_CACHE_DIR`); a later process finds it there and loads it instead of compiling. The counts below are of the
# launchers' choices, before Triton's marks; the last line prints the marks by the pinned Triton's own rule (`'D'`: a
# multiple of 16, compiled in as `tt.divisibility = 16`; `constexpr`: the value itself compiled in):

# %% tags=["nbval-ignore-output"]
from triton._C.libtriton import native_specialize_impl  # the rule Triton's JIT applies to each argument
from triton.backends.compiler import BaseBackend

cost = bench.compile_cost()  # the full matrix; without CUDA it only counts, nothing compiles
print("launcher choices the matrix triggers:", cost["specializations"])
print("launcher choices the eligible region can make, sm_80 + sm_90:", buildcost.region_specializations())
print("Triton's mark on an integer argument, by value:",
      {n: native_specialize_impl(BaseBackend, n, False, True, True) for n in (1, 17, 48, 4096)})

# %% [markdown]
# A model touches few of them (one hidden size, one dtype: a forward and a backward or two), each compiled once per
# combination of marks its calls bring (a token count that is a multiple of 16 and one that is not are two binaries
# of the same choice), but a user sees each
# one's compile as a slower first step wherever the cache is empty (a new machine or container, a new Triton
# version, a changed kernel), and a cache on disk. Compile two of them for sm_90 here, into an empty cache (Triton
# compiles for a GPU target without a GPU):

# %% tags=["nbval-ignore-output"]
from fastpath_lib.rmsnorm import compiled

two = compiled.specializations([4096], archs=(90,), dtypes=("bfloat16",), weights=("same",))[:2]
aot = (buildcost.aot_build_cost(two) if not compiled.missing_tools()
       else {"note": compiled.missing_tools()})
print(aot["note"])
print({k: aot.get(k) for k in ("total_compile_s", "cache_bytes", "cubin_bytes", "files")})
pd.DataFrame(aot.get("per_specialization", []))

# %% tags=["nbval-ignore-output"]
per = pd.DataFrame(aot.get("per_specialization", []))
if len(per):
    print(f"compile per specialization on this CPU: {per.compile_s.min():.2f} to {per.compile_s.max():.2f} s; "
          f"cubin per specialization: {aot['cubin_bytes'] / len(per) / 1024:.0f} KiB on average")

# %% [markdown]
# The cache is what a new process reads. Compile the first of them in a fresh process into an empty cache, then
# again in another fresh process with the same cache: the second finds the binary on disk (`from_cache`: Triton ran
# no ptxas for it, and the kit reads the register count it kept beside the binary). Whether it also takes less time
# the last line prints rather than the text promising it: the time is the `triton.compile` call alone, and in a fresh
# process a cache hit still loads the NVIDIA backend and hashes Triton's own files, `libtriton` included, for the
# cache key (`triton/runtime/cache.py`, `triton_key`) before it reads the binary, which for a kernel this small can
# cost about as much as the compile it saves, so on a busy machine the two times can come out either way:

# %% tags=["nbval-ignore-output"]
import dataclasses
import json
import os
import subprocess
import sys
import tempfile

took = []
with tempfile.TemporaryDirectory() as cache:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"} | {"TRITON_CACHE_DIR": cache}
    for attempt in ("first process, empty cache", "second process, same cache"):
        out = os.path.join(cache, "facts.json")
        subprocess.run([sys.executable, "-m", "fastpath_lib.rmsnorm.compiled", out], check=True, env=env,
                       input=json.dumps([dataclasses.asdict(two[0])]), text=True, capture_output=True)
        row = json.load(open(out))[0]
        took.append(row["compile_s"])
        print(f"{attempt:27}: {row['compile_s']:.3f} s, from_cache={row['from_cache']}")
print(f"second minus first: {took[1] - took[0]:+.3f} s, the cache hit "
      f"{'faster' if took[1] < took[0] else 'not faster'} this run")

# %% [markdown]
# Small for one model, but it multiplies: each new dtype, width class or architecture adds binaries and compile
# time, and each is a case the tests must cover. On a GPU, `bench.compile_cost` measures the JIT in a fresh process
# with an empty cache (first call minus second) and the cache size; the PR note reports both.
#
# ## 6. Why not an existing primitive, or `torch.compile`?
#
# A reviewer's first question, and the matrix is built to answer it:
#
# - **`F.rms_norm` itself** is the baseline of every case; the fast path is only worth its cost where it beats it by
#   more than the noise band, which only a GPU run shows.
# - **`torch.compile`** of `F.rms_norm` generates a fused Triton kernel on a GPU too, with no new code to maintain. The
#   GPU evidence run times it on the op's smallest and largest eligible forward cases
#   ([docs/benchmarks.md](../docs/benchmarks.md#gpu-evidence) owns the list of what that run includes), and the PR
#   note's "Why not" section reports those cases. If it
#   matches the fast path, the honest answer is "compile it" (for code that can be compiled: eager callers and
#   graph breaks are the remaining argument).
# - **An existing kernel** (Liger-Kernel, Apex, vLLM's) costs a dependency, its own contract (does it raise
#   `F.rms_norm`'s errors? support every dtype, stride, autograd mode?), its licence and its release cadence. Lesson
#   05's peer data shows why its published numbers do not settle the question: an unfused baseline, one shape family.
#
# Until a GPU run compares against `torch.compile`, the note claims nothing over it.
#
# ## 7. The fallback switch and an owner
#
# Every fast path needs a way off that does not require a code change, and somebody who answers when it breaks.
# Here that way is `FASTPATH_FORCE_FALLBACK=1` in the environment (production; read at import); in code, the context
# manager `force_fallback()` does the same inside a block (tests, debugging):

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
# | code | two Triton kernels, their launch rule, a predicate of named conditions (lesson 03), a custom op |
# | tests | generated boundary tests (both routes), contract parity, opcheck, compile, GPU-only tests under compute-sanitizer |
# | compile time, binary size | per specialization, measured in section 5; JIT where the disk cache lacks it |
# | way off | `force_fallback()`, `FASTPATH_FORCE_FALLBACK=1` |
# | re-tuning | the row threshold per GPU architecture, from a recorded sweep (section 3) |
# | scheduled GPU time | the weekly sweep, and someone to read its drift report |
# | owner | named in the PR; answers for regressions and for new architectures |
#
# ## 8. CUDA graphs: the kit's op and the vLLM routes
#
# vLLM does not run the model eagerly at every step. It captures the forward in CUDA graphs, once per batch size
# (in tokens) in its `compilation_config.cudagraph_capture_sizes`: decode batches, and, with piecewise graphs
# (attention left outside the graph), every batch up to the largest capture size, prefill and mixed batches
# included. Each step then *replays* the graph of its size: the recorded kernels run again on new data, and inside a
# captured graph no Python runs, the dispatch included. With piecewise graphs the pieces between attention layers are
# replayed and attention runs eagerly between them, so Python does run there, but not the norms' dispatch, which
# sits inside the pieces. One of the predicate's conditions decides what those graphs hold:

# %%
from fastpath_lib.rmsnorm.predicate import PREDICATE

cap = PREDICATE["cuda_graph_capture"]
print(f"{cap.name}: {cap.requirement}\n  why: {cap.why}")
print("  declared boundary points:", {b.label: "eligible" if b.holds else "fallback" for b in cap.boundaries})

# %% [markdown]
# So every call of the kit's op made while a graph is being captured takes the fallback, and the graph records
# `F.rms_norm`'s kernel. The condition stays until a GPU run records a passing capture test for the architecture
# (capture at the boundary shapes, replay with new data, compare with the reference); only then can a captured call
# take the fast path there.
#
# The condition belongs to the kit's op; the kit's two vLLM routes decide otherwise ([lesson
# 09](09_upstream_review.ipynb) owns how a provider enters vLLM and how the priority and the lowering pass choose):
#
# - **The patch**: its providers refuse neither a capture nor any token count; where the priority puts them first,
#   the graphs hold the patch's kernel.
# - **The plugin, vLLM's default graph**: The plugin's providers decline a symbolic token count (vLLM's lowering under
#   Inductor), so under Inductor with vLLM's default graph, compiled for a symbolic token count, native keeps every
#   batch, captured or not.
# - **The plugin where sizes are known** (without Inductor, or a graph compiled for one size, `compile_sizes`): its
#   providers apply the condition above, and a call they refuse runs the next provider of vLLM's priority: without
#   Inductor vLLM's C kernel, what vLLM runs without the kit. In a graph compiled for one size the trace picks the
#   kit's provider ahead of time wherever its check admits that size; a call there that the kit's op refuses at run
#   time (one being captured, or a pointer the trace could not see) runs that next provider's function, under
#   Inductor native's eager function (several kernels), not the code Inductor would have generated for it: an eager
#   composite in its place.
#
# For the request of section 1, with vLLM 0.33's default largest capture size (512 tokens, 1024 on data-center
# Blackwell GPUs, lower when `max_num_seqs` is small; read your own configuration):

# %%
CAPTURE_SIZE = 512  # tokens: the largest batch vLLM captures by default; yours is in cudagraph_capture_sizes
graphed = sum(c.count for c in calls if c.rows <= CAPTURE_SIZE)
total = sum(c.count for c in calls)
print(f"{graphed} of {total} norm calls are graph replays (rows <= {CAPTURE_SIZE}): the kit's op holds its fallback")
print(f"{total - graphed} run outside a graph, where the kit's predicate decides per call")

# %% [markdown]
# What this means for a port:
#
# - **Which calls are captured**: every decode step, and with piecewise graphs every batch of up to the largest
#   capture size. For the kit's op, only batches above it (long prefills, large mixed batches) run outside a graph
#   and can take the fast path; with the conservative default threshold of section 3 above vLLM's usual largest
#   capture size, that is where its region lies anyway. The patch's kernel runs in the captured batches too.
# - **What the replay counts**: section 1's replay times eager calls, so for captured calls it counts a dispatch the
#   graph never runs (the predicate runs when a graph is built, not when it is replayed) and the route an eager
#   call takes, not the fallback kernel the graph holds. Read its `dispatch_extra_total_us` as an eager-serving
#   figure (a plain PyTorch or `transformers` generate loop); for the kit's op under capture, weight only the calls
#   above the capture size.
# - **What to claim**: a port's PR says which of its batches are captured and which kernel runs in them. The kit's
#   op claims no speed-up for captured calls until the capture test has passed on that architecture and the graphs
#   are captured again; the patch's kernel runs in them, so its GPU measurements must include them.
#
# ## Recap
#
# - Replay the workload's calls with their frequencies; totals are sums of measured rows, unmeasured rows say so.
# - A row threshold is recorded only from a GPU sweep and names the folder it came from; until one is recorded for an
#   architecture, it gets the conservative default (1024 rows).
# - Correctness gates every push; performance runs on a schedule, on a GPU, and is compared run to run.
# - Compile time, binary size, the off switch, re-tuning and an owner are part of the change's price.
# - Under CUDA graphs every captured call of the kit's op takes the fallback until a GPU run records a passing
#   capture test; in vLLM the patch's providers refuse no capture, and the plugin under Inductor takes a batch only
#   in a graph compiled for its size, and refuses it there while it is captured.
#
# ## Knowledge check
#
# Answer each question in your own words first, then open the guide.
#
# **1. A fast path wins 2x on the sweep but takes 5 % of the workload's calls. Is it worth merging?**

# %% [markdown]
# <details><summary>Answer guide</summary>
#
# It depends on the *time* share of those calls, not their count: 5 % of the calls can be most of the norm time if
# they are the large prefill calls. Weight per-call times by frequency (the replay), then ask what share of the
# whole step the norms are (if the norms are 3 % of a step, even an infinitely fast norm saves at most 3 %), and
# weigh that against the maintenance cost. And check the other 95 % pay nothing extra (the host cost of the
# dispatch).
# </details>

# %% [markdown]
# **2. Why does the threshold rule take "the smallest row count from which the kernel never loses" rather than "the
# first win"?**

# %% [markdown]
# <details><summary>Answer guide</summary>
#
# A single noisy win below the real crossover would set the threshold too low, and every call between it and the
# crossover would be slower than `F.rms_norm`. Requiring no loss at any larger swept row count protects the
# baseline; the largest value over the widths protects every width. The cost is being conservative near the
# crossover, which is the side to err on.
# </details>

# %% [markdown]
# **3. Why not run the GPU benchmark in CI on every push?**

# %% [markdown]
# <details><summary>Answer guide</summary>
#
# GPU timings are noisy and machine-dependent, so a per-push performance gate would be flaky, and a GPU runner per
# push is expensive. Correctness tests are deterministic and cheap, so they gate every push (on a CPU, with the
# kernels also compiled for real GPU targets). Performance runs on a schedule on a fixed GPU, writes a results
# folder, and is compared with the previous run, so a regression shows up as drift someone reviews.
# </details>

# %% [markdown]
# **4. What should happen to `CUDA_MIN_ROWS` when a new GPU architecture ships?**

# %% [markdown]
# <details><summary>Answer guide</summary>
#
# Nothing automatic: the new architecture gets the conservative default until someone runs the sweep on it,
# reviews the results folder, commits it, and records the threshold with `python -m fastpath_lib threshold`, so
# the value names the run it came from. Copying another architecture's value would be an unmeasured guess.
# </details>

# %% [markdown]
# ## Read next
#
# - [Exercise 10](../exercises/ex10_row_threshold.ipynb): pick the per-architecture row threshold from sweep data.
# - [Lesson 07](07_pr_note.ipynb): the PR note and reviewable commits.
