"""Write the solved exercise notebooks ``solutions/exNN_*.ipynb`` with nbformat, then execute them in place.

    PYTHONPATH=. python tools/build_exercises.py            # write and execute all
    PYTHONPATH=. python tools/build_exercises.py ex03 ex04  # only these
    PYTHONPATH=. python tools/build_exercises.py --no-execute

Solution code sits between ``# BEGIN SOLUTION`` and ``# END SOLUTION``; ``tools/make_exercises.py`` turns those
blocks into ``# FILL ME IN (roughly N lines)`` stubs for ``exercises/``. Run it after this script.
"""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "solutions"
KERNELSPEC = {"name": "python3", "display_name": "Python 3", "language": "python"}
IGNORE = "nbval-ignore-output"

SETUP = """\
import torch
import fastpath_lib  # sets TRITON_INTERPRET=1 when there is no CUDA device
from fastpath_lib import exercises as ex
from fastpath_lib.cases import CaseSpec"""


def md(text):
    return nbformat.v4.new_markdown_cell(textwrap.dedent(text).strip("\n"))


def code(src, *, ignore=False):
    if src.startswith(SETUP):  # SETUP + an indented tail
        src = SETUP + "\n" + textwrap.dedent(src[len(SETUP):].lstrip("\n"))
    cell = nbformat.v4.new_code_cell(textwrap.dedent(src).strip("\n"))
    if ignore:
        cell.metadata["tags"] = [IGNORE]
    return cell


def notebook(ex_id, cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = list(cells)
    for i, c in enumerate(nb.cells):
        c["id"] = f"{ex_id}-{i:02d}"
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata["language_info"] = {"name": "python"}
    nb.metadata["fastpath"] = {"exercise": ex_id}
    return nb


HOW = """\
**How this works.** Fill in each cell marked `# FILL ME IN (roughly N lines)` (delete the `raise
NotImplementedError`), run it, then run the check below it: it prints `passed`, or a table of *yours vs expected*.
`python -m fastpath_lib grade exercises/` runs all notebooks in a fresh kernel and prints your score; the solved
versions are in `solutions/`."""


# --- ex01 --------------------------------------------------------------------------------------------------------

EX01 = [
    md("""
    # Exercise 01 — the float64 reference

    Lesson 01 fixed the operator's contract: `torch.nn.functional.rms_norm(input, normalized_shape, weight=None,
    eps=None)`. Every claim a reviewer checks later is measured against a *reference* that is independent of both
    routes. Here you write it.

    """ + HOW),
    code(SETUP),
    md("""
    ## Part 1: the default eps

    The spec, from PyTorch's docs: when `eps` is `None`, `F.rms_norm` uses `torch.finfo(dtype).eps` of the dtype
    *it computes in*. fp16 and bf16 inputs are computed in fp32 (the "opmath" type); fp64 stays fp64. Write
    `my_default_eps(dtype)`.
    """),
    code("""
    def my_default_eps(dtype: torch.dtype) -> float:
        \"\"\"F.rms_norm's eps when eps=None, for an input of `dtype`.\"\"\"
        # BEGIN SOLUTION
        opmath = torch.float64 if dtype == torch.float64 else torch.float32
        return torch.finfo(opmath).eps
        # END SOLUTION
    """),
    code("ex.check_default_eps(my_default_eps)"),
    md("""
    ## Part 2: the reference

    The definition in plain torch, for `normalized_shape` of length `k` (the last `k` dims):

    ```python
    y = x / torch.sqrt(x.pow(2).mean(dims=last_k_dims, keepdim=True) + eps) * weight
    ```

    Requirements: compute and return **float64** (whatever the input dtype), use `my_default_eps(x.dtype)` when
    `eps is None` (and keep an explicit `eps=0.0`!), multiply by the weight only when there is one, and never modify
    the input.
    """),
    code("""
    def my_reference(x, normalized_shape, weight=None, eps=None):
        \"\"\"RMSNorm in float64 from the definition.\"\"\"
        # BEGIN SOLUTION
        eps = my_default_eps(x.dtype) if eps is None else float(eps)
        x64 = x.detach().to(torch.float64)
        dims = tuple(range(-len(normalized_shape), 0))
        y = x64 * torch.rsqrt(x64.pow(2).mean(dims, keepdim=True) + eps)
        if weight is not None:
            y = y * weight.detach().to(torch.float64)
        return y
        # END SOLUTION
    """),
    code("ex.check_reference(my_reference)"),
    md("""
    ## Questions

    1. Why does the fp16 case with tiny values catch a reference that uses `torch.finfo(torch.float16).eps`?
    2. Why is the reference computed in float64 rather than in the input's dtype?
    3. What does the `eps=0.0` case catch that `eps=None` does not?
    """),
]

# --- ex02 --------------------------------------------------------------------------------------------------------

EX02 = [
    md("""
    # Exercise 02 — the forward Triton kernel

    One program per row: load the row (masking the tail beyond `n_cols`), accumulate the mean square in fp32, scale
    by `rstd = 1 / sqrt(mean_sq + eps)` and the weight, store in the output's dtype. The check launches your kernel
    with a grid of `(n_rows,)` and `BLOCK_SIZE = next_power_of_2(n_cols)` on irregular shapes (7x33 row slice,
    3x781 bf16, 1x1, every other row, tiny values), writes into an output inside a poisoned buffer, and compares with
    the float64 reference. Under Triton's CPU interpreter this takes a few seconds.

    """ + HOW),
    code(SETUP + """
    import triton
    import triton.language as tl"""),
    md("""
    ## The spec (plain torch)

    ```python
    x = x_row.float(); rstd = 1 / torch.sqrt((x * x).mean() + eps)
    y_row = (x * rstd * w.float()).to(x_row.dtype)      # without a weight: (x * rstd).to(...)
    ```

    ## Part 1: the forward kernel
    """),
    code("""
    @triton.jit
    def my_rms_norm_fwd(
        X_ptr,  # input rows [n_rows, n_cols], last dim contiguous
        W_ptr,  # weight [n_cols] (ignore it when HAS_WEIGHT is False)
        Y_ptr,  # output rows [n_rows, n_cols]
        X_row_stride,  # elements between input rows
        Y_row_stride,  # elements between output rows
        n_cols,  # row width
        eps,  # added to the mean square
        HAS_WEIGHT: tl.constexpr,  # multiply by W
        BLOCK_SIZE: tl.constexpr,  # power of two >= n_cols
    ):
        # BEGIN SOLUTION
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(X_ptr + row * X_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
        rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
        y = x * rstd
        if HAS_WEIGHT:
            y = y * tl.load(W_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(Y_ptr + row * Y_row_stride + cols, y.to(Y_ptr.dtype.element_ty), mask=mask)
        # END SOLUTION
    """),
    code("ex.check_forward_kernel(my_rms_norm_fwd)"),
    md("""
    ## Part 2 (stretch): the backward

    With `n = x * rstd` and `g = dy * w` (fp32): `dx = rstd * (g - n * mean(g * n))`, and `dw = sum over rows of
    dy * n`. Write a kernel with one program per row that stores `dx` and its row of an fp32 `dw_partial
    [n_rows, n_cols]` buffer, and a launcher `my_backward(dy2d, x2d, weight, eps) -> (dx, dw)` that sums the partial
    rows (`dw` is `None` without a weight).
    """),
    code("""
    @triton.jit
    def my_rms_norm_bwd(DY_ptr, X_ptr, W_ptr, DX_ptr, DW_ptr, DY_row_stride, X_row_stride, n_cols, eps,
                        HAS_WEIGHT: tl.constexpr, BLOCK_SIZE: tl.constexpr):
        # BEGIN SOLUTION
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(X_ptr + row * X_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(DY_ptr + row * DY_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
        rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
        n = x * rstd
        g = dy
        if HAS_WEIGHT:
            g = dy * tl.load(W_ptr + cols, mask=mask, other=0.0).to(tl.float32)
            tl.store(DW_ptr + row * n_cols + cols, dy * n, mask=mask)
        dx = rstd * (g - n * (tl.sum(g * n, axis=0) / n_cols))
        tl.store(DX_ptr + row * n_cols + cols, dx.to(DX_ptr.dtype.element_ty), mask=mask)
        # END SOLUTION


    def my_backward(dy2d, x2d, weight, eps):
        # BEGIN SOLUTION
        n_rows, n_cols = x2d.shape
        dy2d = dy2d.contiguous()
        dx = torch.empty((n_rows, n_cols), dtype=x2d.dtype, device=x2d.device)
        partial = torch.empty((n_rows, n_cols), dtype=torch.float32, device=x2d.device)
        my_rms_norm_bwd[(n_rows,)](dy2d, x2d, weight if weight is not None else x2d, dx, partial, dy2d.stride(0),
                                   x2d.stride(0), n_cols, eps, HAS_WEIGHT=weight is not None,
                                   BLOCK_SIZE=triton.next_power_of_2(n_cols))
        return dx, (partial.sum(0).to(weight.dtype) if weight is not None else None)
        # END SOLUTION
    """),
    code("ex.check_backward_kernel(my_backward)"),
    md("""
    ## Questions

    1. Which case fails when the store is not masked, and how does the check notice (there is no compute-sanitizer
       on a CPU)?
    2. Why is `row` cast to int64 before multiplying by the stride?
    3. The kit's backward reduces `dw` over a fixed block of rows per program. What does that buy over atomics?
    """),
]

# --- ex03 --------------------------------------------------------------------------------------------------------

EX03 = [
    md("""
    # Exercise 03 — predicate conditions for a changed spec

    A downstream team wants a stricter fast path, *v2*: **at most 8192 columns, only fp16 and bf16 inputs, and
    32-byte alignment** (the input's data pointer, and the row stride in bytes when there is more than one row).
    Write the three conditions as small named checks in the style of lesson 03: each takes the call context `c`
    (`c.input`, `c.weight`, `c.normalized_shape`) and returns `None` when it holds, or a reason naming the actual
    and the required value. The checks probe your conditions on a set of cases and compare with the spec.

    """ + HOW),
    code(SETUP + """
    from fastpath_lib.eligibility import Condition, Predicate
    from fastpath_lib.rmsnorm.predicate import PREDICATE"""),
    md("""
    ## The spec (plain torch)

    ```python
    dtype_ok = x.dtype in (torch.float16, torch.bfloat16)
    cols_ok = x.shape[-1] <= 8192
    stride = ex.row_stride(x)                  # elements between rows, None if the dims do not collapse
    align_ok = x.data_ptr() % 32 == 0 and (rows <= 1 or stride is None or stride * x.element_size() % 32 == 0)
    ```
    (`stride is None` is left to the `row_stride` condition.)
    """),
    code("""
    def check_dtype(c):
        # BEGIN SOLUTION
        if c.input.dtype in ex.V2_DTYPES:
            return None
        return f"input {c.input.dtype}, need float16 or bfloat16"
        # END SOLUTION


    ex.check_dtype_condition(check_dtype)
    """),
    code("""
    def check_cols(c):
        # BEGIN SOLUTION
        n = c.input.shape[-1] if c.input.dim() else 1
        return None if n <= ex.V2_MAX_COLS else f"{n} columns, need <= {ex.V2_MAX_COLS}"
        # END SOLUTION


    ex.check_cols_condition(check_cols)
    """),
    code("""
    def check_alignment(c):
        # BEGIN SOLUTION
        x, a = c.input, ex.V2_ALIGN_BYTES
        if x.data_ptr() % a:
            return f"data pointer {x.data_ptr() % a} bytes past a {a}-byte boundary, need 0"
        rows, stride = x.numel() // max(x.shape[-1], 1), ex.row_stride(x)
        if rows > 1 and stride is not None and stride * x.element_size() % a:
            return f"row stride {stride * x.element_size()} bytes, need a multiple of {a}"
        return None
        # END SOLUTION


    ex.check_alignment_condition(check_alignment)
    """),
    md("""
    ## Part 4: the v2 predicate

    Assemble the predicate: your three conditions plus the unchanged `non_empty`, `last_dim_contiguous` and
    `row_stride` conditions of the kit's predicate (`PREDICATE["non_empty"]` etc.), each with a requirement in words
    and a category.
    """),
    code("""
    def make_v2_predicate():
        # BEGIN SOLUTION
        return Predicate("rmsnorm_v2", [
            Condition("dtype", "input fp16 or bf16", check_dtype, "dtype"),
            Condition("cols", f"row width <= {ex.V2_MAX_COLS}", check_cols, "shape"),
            PREDICATE["non_empty"], PREDICATE["last_dim_contiguous"], PREDICATE["row_stride"],
            Condition("alignment", "32-byte input pointer and row stride", check_alignment, "alignment"),
        ])
        # END SOLUTION


    ex.check_v2_predicate(make_v2_predicate)
    """),
    md("""
    ## Questions

    1. Why must every condition report the *actual* value, not only "not eligible"?
    2. Which probe shows that a single-row input should pass the alignment condition whatever its width?
    3. What would go wrong if the predicate returned after the first failing condition?
    """),
]

# --- ex04 --------------------------------------------------------------------------------------------------------

EX04 = [
    md("""
    # Exercise 04 — boundary cases, graded by mutation

    A good set of boundary tests fails when the fast path is wrong. The grader holds **13 seeded faulty variants**
    (mutants) of the RMSNorm fast path: predicates with an off-by-one threshold, a missing stride check, the wrong
    alignment modulus..., and kernels with an unmasked tail, a wrong mean, eps in the wrong place... Your cases
    catch a mutant when some case gets a **different route** from the faulty predicate than from the correct one,
    or a **wrong result** (or a write outside the output) from the faulty kernel. Each mutant you catch is a point.

    Limits in force here (the interpreter's, on any machine): `min_rows = 8`, `max_cols = 16384`, alignment 16 bytes.
    At most 24 cases, each small.

    """ + HOW),
    code(SETUP + """
    from IPython.display import Markdown
    from fastpath_lib.rmsnorm.predicate import PREDICATE
    Markdown(PREDICATE.markdown_table())  # the conditions your cases probe""", ignore=True),
    md("""
    ## The spec

    `CaseSpec(rows, cols, dtype, weight="same"|None|dtype, layout, pad, offset, weight_offset, scale)`; layouts are
    `contiguous`, `batched`, `row_slice` (row stride `cols + pad`), `step` (every other row), `transposed`,
    `permuted`. `fastpath_lib.explain(*CaseSpec(...).build().args())` tells you the route of a case.
    """),
    code("""
    def my_boundary_cases():
        # BEGIN SOLUTION
        f16 = torch.float16
        return [
            CaseSpec(8, 64),                          # exactly at the row threshold
            CaseSpec(8, 16384),                       # exactly at the column limit
            CaseSpec(16, 64, layout="permuted"),      # dims that do not collapse
            CaseSpec(16, 64, layout="transposed"),    # last dim not contiguous
            CaseSpec(16, 64, offset=2),               # pointer 8-byte aligned, not 16
            CaseSpec(16, 17),                         # row stride 68 bytes
            CaseSpec(16, 64, torch.float64, weight=torch.float32),  # unsupported input dtype, valid weight
            CaseSpec(16, 64, weight_offset=1),        # misaligned weight
            CaseSpec(16, 48, layout="row_slice", pad=4),  # width 48: not a power of two; stride 52
            CaseSpec(16, 24, f16, weight=None),       # no weight, tail not a multiple of 16
            CaseSpec(16, 64, scale=1e-2),             # tiny values: eps matters
        ]
        # END SOLUTION
    """),
    code("ex.check_boundary_cases(my_boundary_cases)"),
    md("""
    ## Questions

    1. Which single case catches both `kernel_mean_over_block` and `kernel_unmasked_tail`? Why is that not enough to
       catch `kernel_ignores_row_stride`?
    2. Why is `CaseSpec(8, 64)` worth more than `CaseSpec(1000, 64)` as a row-threshold test?
    3. The mutants here are seeded by hand. What kind of bug could none of them represent?
    """),
]

# --- ex05 --------------------------------------------------------------------------------------------------------

EX05 = [
    md("""
    # Exercise 05 — a predeclared benchmark case matrix

    A reviewer trusts a benchmark whose cases were chosen *before* the numbers were seen, and that includes cases
    where the fast path should not help. Choose at least 12 cases and say what you expect of each:
    `"improve"`, `"neutral"`, `"loss"` or `"fallback"`. Nothing is timed here; the check only applies the rules:

    * at least 12 cases, unique ids; at least 2 **small** (<= 65536 elements) and 2 **large** (>= 4M elements);
    * at least 2 **aligned** (16-byte pointer and row stride) and 2 **odd** cases; 2 **contiguous** and 2
      **strided** (row slice, step, transposed, permuted);
    * at least 2 cases expected **not to improve** (neutral or loss) and 2 **fallback** cases, and every expectation
      agrees with the predicate's route on a GPU (conservative row threshold 1024).

    """ + HOW),
    code(SETUP),
    code("""
    def my_matrix():
        # BEGIN SOLUTION
        bf16, f16, f32 = torch.bfloat16, torch.float16, torch.float32
        return [
            ("llama_4096x4096_bf16", CaseSpec(4096, 4096, bf16), "improve"),
            ("decode_1024x8192_bf16", CaseSpec(1024, 8192, bf16), "improve"),
            ("wide_2048x16384_fp16", CaseSpec(2048, 16384, f16), "improve"),
            ("mid_4096x1024_fp16", CaseSpec(4096, 1024, f16), "improve"),
            ("slice_2048x4096_bf16", CaseSpec(2048, 4096, bf16, layout="row_slice", pad=64), "improve"),
            ("step_2048x2048_fp32", CaseSpec(2048, 2048, f32, layout="step"), "neutral"),
            ("fp32_1024x4096", CaseSpec(1024, 4096, f32), "neutral"),
            ("nonpow2_1024x1000_fp16", CaseSpec(1024, 1000, f16), "loss"),
            ("small_1024x64_fp32", CaseSpec(1024, 64, f32), "neutral"),
            ("tiny_512x64_fp16", CaseSpec(512, 64, f16), "fallback"),
            ("transposed_4096x256_fp16", CaseSpec(4096, 256, f16, layout="transposed"), "fallback"),
            ("too_wide_256x32768_bf16", CaseSpec(256, 32768, bf16), "fallback"),
            ("odd_stride_1024x1023_fp32", CaseSpec(1024, 1023, f32), "fallback"),
        ]
        # END SOLUTION
    """),
    code("ex.check_case_matrix(my_matrix)"),
    md("""
    ## Questions

    1. Why declare the fallback cases in a benchmark at all, when the fast path does not run there?
    2. Which of your cases would you drop first if the GPU time were halved, and which never?
    """),
]

# --- ex06 --------------------------------------------------------------------------------------------------------

EX06 = [
    md("""
    # Exercise 06 — classifying measured results

    > **The table below is a SYNTHETIC teaching dataset**: invented numbers in the shape of a results table, so the
    > classification rules can be practised without a GPU. They are *not measurements* of any device.

    Classify each case as `win`, `neutral`, `loss` or `fallback`:

    * a case whose route is `fallback` is `"fallback"`, whatever its timings;
    * otherwise `ratio = candidate_median / baseline_median`, and the **noise band** is the larger relative 20-80 %
      spread of the two sample sets: `max(baseline_spread / baseline_median, candidate_spread / candidate_median)`
      (a spread is `q80 - q20`); `ratio < 1 - band` is a win, `ratio > 1 + band` a loss, anything inside the band
      neutral. This is the rule `fastpath_lib.bench` applies to real runs.

    """ + HOW),
    code(SETUP + """
    results = ex.synthetic_results()
    print(results.attrs["source"])
    results"""),
    code("""
    def my_classify(row) -> str:
        \"\"\"'win' | 'neutral' | 'loss' | 'fallback' for one row of the table.\"\"\"
        # BEGIN SOLUTION
        if row["route"] == "fallback":
            return "fallback"
        b, c = row["baseline_median_us"], row["candidate_median_us"]
        band = max(row["baseline_spread_us"] / b, row["candidate_spread_us"] / c)
        ratio = c / b
        return "win" if ratio < 1 - band else "loss" if ratio > 1 + band else "neutral"
        # END SOLUTION
    """),
    code("ex.check_classification(my_classify)"),
    md("""
    ## Questions

    1. `c07` shows a 20 % lower median. Why is it not a win?
    2. `c10` is faster on the candidate side but routed to the fallback. What does that difference measure?
    """),
]

# --- ex07 --------------------------------------------------------------------------------------------------------

EX07 = [
    md("""
    # Exercise 07 — the PR note

    Write a function that turns a results table and its environment record into the PR note of lesson 07. The
    check calls it twice: on the synthetic GPU-shaped table of exercise 06 (the environment says it is synthetic)
    and on a CPU-interpreter-shaped table. It looks for

    * the sections, as Markdown headings: **Summary**, **Eligibility and fallback**, **Semantic evidence**,
      **Mechanism**, **Performance**, **Limitations**;
    * a performance table with one row per case id (first cell) and its class (win/neutral/loss/fallback, as in
      exercise 06) — every class must match the data; the note names its wins, neutral cases and losses, and says
      the data is synthetic;
    * on data whose `env["device_kind"]` is not `"cuda"`: the words "not a GPU measurement", no speed-up claim
      ("faster", "speed-up", "1.5x faster") and no case marked a win.

    """ + HOW),
    code(SETUP + """
    results, env = ex.synthetic_results(), ex.synthetic_environment()
    classes = ex.expected_classes(results)  # exercise 06's rule (solve that one first)
    env"""),
    code("""
    def write_pr_note(results, env) -> str:
        # BEGIN SOLUTION
        gpu = env.get("device_kind") == "cuda"
        classes = ex.expected_classes(results) if gpu else {c: "not measured" for c in results["case_id"]}
        lines = ["## Summary",
                 "A Triton RMSNorm fast path behind an eligibility predicate; F.rms_norm is the fallback.",
                 f"Data: {env.get('device')}. {env.get('note', '')}", ""]
        if gpu:
            for cls in ("win", "neutral", "loss", "fallback"):
                ids = [c for c, k in classes.items() if k == cls]
                lines.append(f"- {cls}: {', '.join(ids) or 'none'}")
        else:
            lines.append("These timings are not a GPU measurement; no performance claim is made from them.")
        lines += ["", "## Eligibility and fallback", "Every ineligible call runs F.rms_norm (see the predicate table).",
                  "", "## Semantic evidence", "Both routes match the float64 reference within the tolerance table.",
                  "", "## Mechanism", "One read and one write of each row; one launch per call.", "",
                  "## Performance", "| case | route | baseline us | candidate us | class |", "|---|---|---|---|---|"]
        for _, r in results.iterrows():
            lines.append(f"| {r['case_id']} | {r['route']} | {r['baseline_median_us']} | "
                         f"{r['candidate_median_us']} | {classes[r['case_id']]} |")
        lines += ["", "## Limitations", "Synthetic teaching data stands in for a GPU run here."]
        return "\\n".join(lines)
        # END SOLUTION
    """),
    code("ex.check_pr_note(write_pr_note)"),
    md("""
    ## Questions

    1. Why must the table list the neutral and losing cases, not only the wins?
    2. What should a note say about interpreter timings, and what must it never say?
    """),
]
# --- ex08 --------------------------------------------------------------------------------------------------------

EX08 = [
    md("""
    # Exercise 08 — capstone: the same workflow for a second operator

    Apply the whole workflow to a row-wise operator of your choice with the kit's generic pieces
    (`fastpath_lib.eligibility.Predicate/Condition/Boundary`, `fastpath_lib.cases.CaseSpec`). The solution uses a
    **row-wise softmax**; a fused add+RMSNorm or a log-softmax work the same way. Set `OP_NAME` to `"softmax"` or
    `"log_softmax"` to have your reference compared with torch's; another name gets the shape/dtype checks only.

    1. a float64 reference; 2. a small Triton kernel (one program per row); 3. a predicate whose conditions
    *declare* their boundaries, which the check verifies; 4. a dispatching op that takes the predicate's route.

    """ + HOW),
    code(SETUP + """
    import triton
    import triton.language as tl
    from fastpath_lib.eligibility import Boundary, Condition, Predicate

    OP_NAME = "softmax\""""),
    code("""
    def reference(x):
        \"\"\"Your operator in float64 over the last dim.\"\"\"
        # BEGIN SOLUTION
        x64 = x.detach().to(torch.float64)
        e = torch.exp(x64 - x64.amax(-1, keepdim=True))
        return e / e.sum(-1, keepdim=True)
        # END SOLUTION


    ex.check_capstone_reference(OP_NAME, reference)
    """),
    code("""
    @triton.jit
    def softmax_kernel(X_ptr, Y_ptr, X_row_stride, Y_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
        # BEGIN SOLUTION
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(X_ptr + row * X_row_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
        e = tl.exp(x - tl.max(x, axis=0))
        tl.store(Y_ptr + row * Y_row_stride + cols, (e / tl.sum(e, axis=0)).to(Y_ptr.dtype.element_ty), mask=mask)
        # END SOLUTION


    def launch(x2d):
        y = torch.empty(x2d.shape, dtype=x2d.dtype, device=x2d.device)
        softmax_kernel[(x2d.shape[0],)](x2d, y, x2d.stride(0), y.stride(0), x2d.shape[1],
                                        BLOCK_SIZE=triton.next_power_of_2(x2d.shape[1]))
        return y


    ex.check_capstone_kernel(launch, reference)
    """),
    md("""
    ## The predicate

    The context is the input tensor itself. Each condition declares boundaries as changes to `BASE` (CaseSpec
    fields) and whether it should then hold; the check builds each point and runs your condition on it. Cover at
    least three categories, each condition with a point where it holds and one where it fails.
    """),
    code("""
    BASE = {"rows": 16, "cols": 64, "dtype": torch.float32, "weight": None}
    MAX_COLS = 8192


    def make_predicate():
        # BEGIN SOLUTION
        def dtype(x):
            ok = x.dtype in (torch.float16, torch.bfloat16, torch.float32)
            return None if ok else f"{x.dtype}, need fp16/bf16/fp32"

        def cols(x):
            return None if 0 < x.shape[-1] <= MAX_COLS else f"{x.shape[-1]} columns, need 1..{MAX_COLS}"

        def last_dim(x):
            return None if x.dim() == 2 and x.stride(-1) == 1 else f"strides {x.stride()}, need 2-d with stride 1"

        return Predicate("softmax", [
            Condition("dtype", "fp16, bf16 or fp32", dtype, "dtype",
                      boundaries=(Boundary("fp16", {"dtype": torch.float16}, True),
                                  Boundary("fp64", {"dtype": torch.float64}, False))),
            Condition("cols", f"1..{MAX_COLS} columns", cols, "shape",
                      boundaries=(Boundary("cols=max", {"cols": MAX_COLS}, True),
                                  Boundary("cols=max+1", {"cols": MAX_COLS + 1}, False))),
            Condition("last_dim_contiguous", "2-d, last dim stride 1", last_dim, "stride",
                      boundaries=(Boundary("row slice", {"layout": "row_slice", "pad": 3}, True),
                                  Boundary("transposed", {"layout": "transposed"}, False))),
        ])
        # END SOLUTION


    ex.check_capstone_predicate(make_predicate, lambda x: x, BASE)
    """),
    code("""
    def softmax(x):
        \"\"\"The op: Triton where the predicate allows, torch.softmax otherwise; returns (y, route).\"\"\"
        d = make_predicate().evaluate(x)
        if d.eligible:
            return launch(x), d.route
        return torch.softmax(x, dim=-1), d.route


    ex.check_capstone_dispatch(softmax, make_predicate, lambda x: x, reference)
    """),
    md("""
    ## Questions

    1. Which parts of the RMSNorm workflow carried over unchanged, and which did you have to rethink?
    2. What would your benchmark matrix (exercise 05) look like for this operator?
    """),
]

NOTEBOOKS = {
    "ex01_reference": EX01, "ex02_forward_kernel": EX02, "ex03_predicate": EX03, "ex04_boundary_cases": EX04,
    "ex05_case_matrix": EX05, "ex06_classify": EX06, "ex07_pr_note": EX07, "ex08_capstone": EX08,
}


def execute(path: Path) -> None:
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    client = NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}})
    with client.setup_kernel(env=env):
        for i, cell in enumerate(nb.cells):
            if cell.cell_type == "code":
                client.execute_cell(cell, i)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
    nbformat.write(nb, path)


def main(argv):
    run = "--no-execute" not in argv
    only = [a for a in argv if not a.startswith("--")]
    SOLUTIONS.mkdir(exist_ok=True)
    for name, cells in NOTEBOOKS.items():
        if only and not any(name.startswith(o) for o in only):
            continue
        path = SOLUTIONS / f"{name}.ipynb"
        nbformat.write(notebook(name[:4], [nbformat.from_dict(dict(c)) for c in cells]), path)
        if run:
            import time

            t0 = time.monotonic()
            execute(path)
            print(f"{path.relative_to(ROOT)}: executed in {time.monotonic() - t0:.1f} s")
        else:
            print(f"{path.relative_to(ROOT)}: written")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
