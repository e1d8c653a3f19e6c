# ---
# jupyter:
#   fastpath:
#     exercise: ex05
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
# # Exercise 05 — a predeclared benchmark case matrix
#
# A reviewer trusts a benchmark whose cases were chosen *before* the numbers were seen, and that includes cases
# where the fast path should not help. Choose at least 12 cases and say what you expect of each, in the kit's words
# (`ex.OUTCOMES`, the words of the benchmark's classification): `"win"`, `"neutral"`, `"loss"` or `"fallback"`, with
# a one-line rationale of your own. `my_matrix()` returns them as a list of 4-tuples
# `(case_id, CaseSpec, expected, rationale)`: a str id, a `CaseSpec` object (not a dict of its fields), one of those
# words, and the sentence, e.g. `("llama_4096x4096_bf16", CaseSpec(4096, 4096, torch.bfloat16), "win", "...")`.
# Nothing is timed here; the check applies the benchmark's own coverage rules
# (`fastpath_lib.bench.matrix.coverage_rules`, the rules the kit's predeclared matrix meets in lesson 05, less the
# one on forward and backward cases: yours are forward only) and two of its own (no case beyond the kit's largest,
# and expectations that agree with the predicate):
#
# * at least 12 cases, unique ids, no case repeated, at least 8 distinct shapes; at least 2 **small** (<= 65536
#   elements) and 2 **large** (>= 4096x4096 elements), an **M=1 decode** case (one row), no case beyond the
#   kit's largest (64M elements, e.g. 8192x8192), and none empty (an input without rows or columns cannot be timed);
# * at least 2 **aligned** (16-byte pointer, row stride and width) and 2 **odd** cases (misaligned width, pointer or
#   stride, or transposed); 2 **contiguous** and 1 supported **strided** case (row slice or step); fp32, fp16 and
#   bf16; every case in a dtype and layout the benchmark times (those three dtypes and float64; any `CaseSpec` layout
#   but `channels_last`);
# * at least 1 case expected to **win**, 2 expected **not to improve** (neutral or loss) and 2 **fallback** cases;
#   every expectation agrees with the predicate's route on a GPU (conservative row threshold 1024);
# * **rationales** (part of the expectations): each at least four words. Remove every word with a digit in it (`16`,
#   `fp8`, `h100`), the words of the case's own id, dtype (with `half`, `float`, `single`, `bfloat`), layout and
#   expectation, `forward`, `exercise` and the commonest words (`the`, `of`, ...). At least three words must remain,
#   and no two cases' remaining words may overlap by half or more (shared / all of the two): one template filled
#   with each case's fields, or with a word or two changed per case, says no why.
#
# Each rule costs the part it belongs to (sizes, layouts and dtypes, expectations), nothing else. Your cases may be
# lesson 05's shapes or any model's: what scores nothing is the kit's predeclared matrix handed back (a single
# rationale that repeats three quarters of the words of one of its rationales, at least four, fails every part; so do
# three quarters of its cases or more kept under new words), and a `my_matrix` that calls the
# kit's benchmark code (`fastpath_lib.bench`, where its matrix and the rules above live) or the grader's
# (`fastpath_lib.grading`): the cases and their expectations are yours to choose, and the rules are the check's to
# apply.
#
# **How this works.** Fill in each cell marked `# FILL ME IN (roughly N lines)` (delete the `raise
# NotImplementedError`), run it, then run the check below it: it prints `passed`, or a table of *yours vs expected*.
# `python -m fastpath_lib grade exercises/` runs all notebooks in a fresh kernel and prints your score; the solved
# versions are in `solutions/`.

# %%
import torch
import fastpath_lib
# no CUDA: run the kernels in Triton's CPU interpreter (a no-op on a GPU)
fastpath_lib.use_interpreter()
from fastpath_lib import exercises as ex
from fastpath_lib.cases import CaseSpec


# %%
def my_matrix():
    """Return a list of 4-tuples `(case_id, CaseSpec, expected, rationale)`: `case_id` a str, `expected` one of
    `ex.OUTCOMES`, `rationale` a sentence of your own."""
    # BEGIN SOLUTION
    bf16, f16, f32 = torch.bfloat16, torch.float16, torch.float32
    return [
        ("llama_4096x4096_bf16", CaseSpec(4096, 4096, bf16), "win",
         "32 MiB of input, 64 MiB moved per call: predicted memory-bound, and one pass moves the fewest bytes"),
        ("batch_1024x8192_bf16", CaseSpec(1024, 8192, bf16), "win",
         "at the row threshold but with 8192-wide rows there are enough bytes to hide the launch"),
        ("wide_2048x16384_fp16", CaseSpec(2048, 16384, f16), "neutral",
         "16384 columns fill the registers of one program, and spills could cost what fusion saves"),
        ("mid_4096x1024_fp16", CaseSpec(4096, 1024, f16), "win",
         "many medium rows keep every SM busy with coalesced loads"),
        ("slice_2048x4096_bf16", CaseSpec(2048, 4096, bf16, layout="row_slice", pad=64), "win",
         "a slice of a fused QKV buffer is read in place, where torch may copy it first"),
        ("step_2048x2048_fp32", CaseSpec(2048, 2048, f32, layout="step"), "neutral",
         "every other row halves the useful bytes per cache line for both routes alike"),
        ("fp32_1024x4096", CaseSpec(1024, 4096, f32), "neutral",
         "fp32 in and out leaves the reference close to the copy bandwidth already"),
        ("nonpow2_1024x1000_fp16", CaseSpec(1024, 1000, f16), "loss",
         "1000 columns pad to a block of 1024 and waste masked lanes on every row"),
        ("small_1024x64_fp32", CaseSpec(1024, 64, f32), "neutral",
         "64-wide rows give each program almost no work, so launch cost dominates"),
        ("decode_1x4096_bf16", CaseSpec(1, 4096, bf16), "fallback",
         "one token per step: too little work to pay for a launch, so the predicate sends it to torch"),
        ("tiny_512x64_fp16", CaseSpec(512, 64, f16), "fallback",
         "512 rows sit below the conservative threshold of 1024"),
        ("transposed_4096x256_fp16", CaseSpec(4096, 256, f16, layout="transposed"), "fallback",
         "a transposed view has no contiguous rows for the kernel to load"),
        ("too_wide_256x32768_bf16", CaseSpec(256, 32768, bf16), "fallback",
         "32768 columns exceed what one program holds in registers"),
        ("odd_stride_1024x1023_fp32", CaseSpec(1024, 1023, f32), "fallback",
         "a 4092-byte row stride breaks the 16-byte alignment of every other row"),
    ]
    # END SOLUTION


# %% tags=["grader-check"]
ex.check_case_matrix(my_matrix)

# %% [markdown]
# ## Questions
#
# 1. Why declare the fallback cases in a benchmark at all, when the fast path does not run there?
# 2. Which of your cases would you drop first if the GPU time were halved, and which never?
