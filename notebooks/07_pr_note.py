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
# **What you will do**: draft the PR note from recorded results, read it as a reviewer would, split the change into
# reviewable commits, and answer the reviewer's questions.
#
# **What you need**: lessons 05 and 06; this CPU.
#
# **Time**: about 20 minutes.
#
# **What you will learn**
# - how to draft the PR note from recorded results (`bench.pr_note`), so every number in it has a source, and how to
#   check that the draft is honest about what it rests on;
# - how to split the change into commits a reviewer can read one at a time;
# - the questions a reviewer will ask, with answer guides to open *after* you have answered.

# %% tags=["nbval-ignore-output"]
import torch
import fastpath_lib
# no CUDA: run the kernels in Triton's CPU interpreter (a no-op on a GPU)
fastpath_lib.use_interpreter()
from fastpath_lib import runtime

DEVICE = runtime.lesson_device()  # "cuda" on a GPU, else "cpu"; prints the mode and versions
_ = torch.manual_seed(0)

import textwrap

from IPython.display import Markdown
from fastpath_lib import bench
from fastpath_lib.bench import reading

# %% [markdown]
# ## Drafting the note from the results
#
# The note is generated from results: the predeclared matrix, the environment, the raw samples, the host-overhead
# family and the classification. Every measured number and every verdict in it is read from those results; the
# sentences about the op come from its spec, which reads its limits, row thresholds and capture record
# (`capture.json`) when the note is drafted. No number is typed into the note, so none can drift from what was
# measured. The source is the newest recorded GPU run in `results/` when there is one. Without one, the draft comes
# from a quick run of 3 of the 17 cases on this machine, and the note must say so: *not a GPU measurement*.

# %% tags=["nbval-ignore-output"]
rec = reading.recorded_gpu_run()
print(textwrap.fill(rec.line(), 110))
if rec.found:
    note = bench.pr_note(rec.folder)
else:
    # 3 cases at quick shapes plus the host family: a draft that shows the format and labels itself
    picked = [c for c in bench.load_cases()
              if c.id in ("decode_m1_fp16", "batch_1024_fp16", "prefill_4096x4096_fp16")]
    df = bench.run_matrix(picked, quick=True, progress=False, analyses=False, host=True,
                          providers=("baseline", "triton", "dispatched"),
                          declared=[c.id for c in bench.load_cases()])
    note = bench.pr_note(df=df, env=df.attrs["environment"])
print(note.splitlines()[0])

# %% [markdown]
# ## Reading the draft as a reviewer
#
# Before reading the prose, check that the note is honest about what it rests on: how many of the predeclared
# cases ran (and which did not), whether the performance claim is backed by a GPU measurement, and that what was
# not measured says *not measured* instead of a number (a 0.0 GB/s cell would read as a terrible kernel, not as a
# missing measurement).

# %% tags=["nbval-ignore-output"]
import re
from IPython.display import display

KEYS = ("Measured on", "predeclared cases run", "Performance claim", "Copy ceiling",
        "Host cost on the fallback")
sentences = [s for line in note.splitlines()
             for s in re.split(r"(?<=\.) ", line.removeprefix("- "))]
# what the note rests on
found = {k: next((s for s in sentences if k in s), "(missing)") for k in KEYS}
display(Markdown("\n".join(f"- {s}" for s in found.values())))
print("cells saying 'not measured':", note.count("not measured"),
      "| '0.0 GB/s' anywhere:", "0.0 GB/s" in note)

# %% [markdown]
# The draft, rendered. Check that it names the hardware, that every predeclared case is accounted for (open the
# folded tables), and that off a GPU no speed-up is claimed: the Performance section lists each case's route, the
# outcome expected on a GPU and the outcome observed (*unmeasured* where a kernel runs), the timing method, and the
# fallback's host cost per call against its target, which a CPU does measure.

# %% tags=["nbval-ignore-output"]
Markdown(note)

# %% [markdown]
# ## A concise note: what stays in sight, what is folded
#
# A reviewer reads the first screen and decides how to read the rest. So the note keeps at most 600 words outside
# its folded blocks (HTML's `details` element, which GitHub renders closed): what changes, the region in a few
# lines, the counts of wins, neutral cases and losses with the scope restriction the losses call for, the command
# that reruns the evidence, and, off a GPU, "not a GPU measurement" said once. The full tables (every condition with
# its boundary points, every case, the environment, the mechanism) stay in the note, folded: nothing is dropped to
# fit. The kit writes two forms: its own, and vLLM's PR template. Where a Triton kernel lands differs by ecosystem:
# in vLLM, a provider of an IR op, in a file in `vllm/kernels/triton/`, that the platform's priority selects (vLLM's
# form describes the patch in `upstream/`: the files it changes, when the new path runs, how to turn it on and off).
# Lesson 09 reads the patch itself. PyTorch takes DSL kernels into its eager ops through `torch/_native` (lesson 09
# reads how). The second cell below lists the override calls in the installed torch's sources (where a call passes a variable for the
# op or the key, the table shows the variable's name); the PyTorch note describes the kit's patch there alone, so it
# is written with that patch (`upstream/pytorch_native_pr_note.md`), not from these results.

# %% tags=["nbval-ignore-output"]
from fastpath_lib.bench.note_brief import WORD_LIMIT, words_outside_details

source = dict(results_dir=rec.folder) if rec.found else dict(df=df, env=df.attrs["environment"])
forms = {t: bench.pr_note(**source, template=t) for t in ("kit", "vllm")}
for t, text in forms.items():
    print(f"{t:8s} {words_outside_details(text):4d} words in sight (at most {WORD_LIMIT}), "
          f"{len(text.split()):5d} in all")
purpose = forms["vllm"].split("## Purpose")[1].split("###")[0]
Markdown(purpose)

# %%
from fastpath_lib.rmsnorm import native_override

for d in native_override.declared_overrides():  # every register_op_override call in the installed torch/_native
    print(f"{d['dsl']:8s} {d['op']:26s} {d['dispatch_key']:13s} {d['file']}")
pytorch_note = (runtime.ROOT / "upstream" / "pytorch_native_pr_note.md").read_text()
print("\n" + pytorch_note.split("## Summary")[0].strip())

# %% [markdown]
# ## Splitting the change into reviewable commits
#
# One PR, several commits, each of which builds and passes the tests on its own, and each of which is either a
# change of behaviour or a change of structure, never both:
#
# 1. **Tests that pin today's behaviour** — contract tests of the public op against `F.rms_norm` (values, dtypes,
#    exceptions, autocast, gradients, compile). They pass before any fast path exists, so they show, on the cases
#    they run, that the later commits keep the contract. (Tests go *before* or *with* the change they check, never
#    after it.)
# 2. **Semantic change: the op** — the custom op, the predicate and the kernels behind the fallback, *with* their
#    tests: the generated boundary tests on both routes, guard bands, `opcheck`, the GPU tests for
#    compute-sanitizer.
# 3. **Semantic change: routing call sites through the new op** — `nn.RMSNorm` users of the model now get
#    `fastpath_lib.rms_norm`. That is a behaviour change, not a refactor: calls that used to run `F.rms_norm` may
#    now take the Triton route, with other rounding and other speed. It gets its own commit, with tests that assert
#    the routes at those call sites, so it can be reviewed and reverted on its own.
# 4. **Pure refactors** — moves and renames with no behaviour change (say, the numeric limits moved into their own
#    module). A reviewer can skim them *because* no test changed and all still pass.
# 5. **Evidence** — the predeclared matrix and harness (the matrix before any result), then the recorded results
#    folder, the environment and this note.
#
# Mixing a refactor into a semantic commit hides the one line that changes behaviour among hundreds that do not;
# calling a behaviour change a refactor tells the reviewer not to look at it.
#
# ## Recap
#
# - Generate the PR note from recorded results; never type a number into it. Read its coverage line, its
#   measurement label and its "not measured" cells before its prose.
# - Split the change: tests first or with the change, each behaviour change (the op, then routing call sites
#   through it) in its own commit, pure refactors apart, evidence last.
# - Include the neutral and losing shapes: they show where the boundary belongs.
# - Keep the note concise: at most 600 words in sight, the full tables folded, not dropped.
#
# ## The reviewer's knowledge check
#
# Answer each question in your own words first, then open the guide.
#
# **1. Why should a performance PR include shapes where the new path is not faster?**

# %% [markdown]
# <details><summary>Answer guide</summary>
#
# They show where the fast path helps and where it does not, which is what the predicate's boundary is drawn from.
# The kit's own neutral and losing cases are all inside the region (the predicate admits them): each is either a
# cost the note states and accepts, or evidence of a missing eligibility condition. The fallback cases beside them
# measure what a call outside the region costs against the baseline. They also show the
# author did not pick the matrix after seeing the results (predeclared), and they give users on those shapes an
# honest answer ("no change for you"). They are the baseline for future devices and compilers: when a new GPU or a
# better `torch.compile` arrives, the same cases, run again, show whether today's neutral shape has become a loss
# (or a win). The shapes that do not win are how the predicate's conditions get found (lesson 05's narrow rows). A
# PR with only wins hides its regressions and invites the reviewer to go looking for them.
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
# Today: restart the process with `FASTPATH_FORCE_FALLBACK=1` (read at import; no code change), and
# `fastpath_lib.explain(...)` to report the route. You: reproduce with the self-test and the GPU tests under
# compute-sanitizer on that architecture, and, until fixed, exclude it in the predicate's `architecture` condition.
# </details>

# %% [markdown]
# **6. A commit titled "refactor: route the model's norms through fastpath_lib.rms_norm" changes no test. Approve?**

# %% [markdown]
# <details><summary>Answer guide</summary>
#
# No. Routing call sites through the new op changes which code runs for those calls (some now take the Triton
# route), so it is a behaviour change mislabelled as a refactor, and "no test changed" here means it is untested,
# not that it is safe. Ask for it as its own semantic commit with tests that assert the routes (and the contract)
# at those call sites, and keep the real refactors, which change no behaviour, in separate commits.
# </details>

# %% [markdown]
# ## Read next
#
# - [Exercise 07](../exercises/ex07_pr_note.ipynb): write the PR note from results.
# - [Exercise 11](../exercises/ex11_commit_hygiene.ipynb): one behaviour change per commit, every commit green.
# - [Exercise 13](../exercises/ex13_review_readiness.ipynb): check a PR's readiness the way a reviewer will.
# - [Lesson 08](08_inplace_contract.ipynb): a second operator, in place: fused residual-add + RMSNorm.
