# ---
# jupyter:
#   fastpath:
#     exercise: ex09
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
# # Exercise 09 — contract-parity tests that catch a broken op
#
# Lesson 01 listed what `F.rms_norm` promises. Here you write the tests: `my_contract_tests(op)` runs your checks
# against `op`, an operator with `F.rms_norm`'s signature `op(input, normalized_shape, weight=None, eps=None)`, and
# raises `AssertionError` (a plain `assert`) on the first promise `op` breaks. It must return normally for an op that
# keeps them all. Compare with `F.rms_norm` itself, the owner of the contract, never with the kit's op.
#
# The promises, one graded category each:
#
# * **dtype**: the output's dtype and values, for every floating dtype `F.rms_norm` accepts;
# * **layout**: the output's strides, for the memory layouts an input can come in;
# * **aliasing**: what the call does to memory: the output it returns, and the input it was given;
# * **eps**: the eps the op uses, whichever way the caller gives it, or leaves it out;
# * **autograd**: the gradients of every input that can require one;
# * **forward_ad**: the forward-mode derivative (`torch.func.jvp`);
# * **exceptions**: what an invalid call raises (type and message), for each argument a caller can get wrong, and
#   that a valid call does not raise.
#
# For each promise, ask which input would make a broken op *show* it. One ordinary fp32 input of ordinary size,
# compared by value, passes on almost every broken op: a promise about strides needs an input whose strides are not
# the usual ones, a promise about eps needs inputs for which eps changes the result, and an argument is only tested
# at the values where a careless implementation could go wrong.
#
# **How it is graded.** Your tests run against the kit's op and against `F.rms_norm` (they must pass on both), and
# against broken ops the grader builds, each breaking one promise (each must make your tests fail). Feedback names the
# categories with a broken op that got through, not the op. Tests that fail on a correct op earn nothing, and so do
# tests that never fail.
#
# Tests score nothing on every part, in the check below as in the grader, when they use the grader's code
# (`fastpath_lib.grading`), when they call the kit's op (`fastpath_lib.rmsnorm.op`'s `rms_norm`, that is
# `fastpath_lib.rms_norm`), or when they inspect the op instead of calling it: a contract test calls the op and checks
# what it returns, writes or raises; it does not inspect the op. Inspecting is reading a private attribute (`op._impl`)
# other than an imported module's (`torch._dynamo`) or a tensor's own state (below); reading an attribute `__class__`,
# `__closure__`, `__code__`, `__defaults__`, `__dict__`, `__func__`, `__getstate__`, `__globals__`, `__kwdefaults__`,
# `__module__`, `__qualname__`, `__reduce__`, `__reduce_ex__`, `__self__`, `__slots__`, `__wrapped__`, `cell_contents`,
# `co_code`, `co_consts`, `co_name`, `f_back`, `f_globals` or `f_locals`, or the `__name__` of a name (`op.__name__`);
# or using `inspect`, `gc`, `dis`, `ctypes`, `sys._getframe`, `dir` or `vars`. A tensor's own state is not the op:
# `x._version` (the version counter lesson 08 reads to see a write), `x._base` and torch's other data attributes of a
# tensor are yours to read.
#
# Keep shapes small: on a CPU the kit's op runs its Triton kernels in the interpreter. In the grader the ops run in the
# grader's process and `op` forwards each call there: it has first derivatives (backward, `torch.func.jvp`, dual
# tensors), not second ones, and no `vmap`.
#
# **How this works.** Fill in each cell marked `# FILL ME IN (roughly N lines)` (delete the `raise
# NotImplementedError`), run it, then run the check below it: it prints `passed`, or what is missing.
# `python -m fastpath_lib grade exercises/` runs all notebooks in a fresh kernel and prints your score; the solved
# versions are in `solutions/`.

# %%
import torch
import torch.nn.functional as F
import fastpath_lib
# no CUDA: run the kernels in Triton's CPU interpreter (a no-op on a GPU)
fastpath_lib.use_interpreter()
from fastpath_lib import exercises as ex

# %% [markdown]
# `torch.testing.assert_close` raises `AssertionError` with a clear diff, and checks dtypes too. Keep shapes small
# (under the interpreter 16 x 32 is eligible for the kit's fast path; on a GPU without the interpreter it starts at
# 1024 rows unless a recorded sweep sets that GPU's own threshold:
# `fastpath_lib.rmsnorm.limits.limits_for("cuda", interpret=False).min_rows`), and give each assertion a message
# naming its promise.


# %%
def my_contract_tests(op) -> None:
    """Raise AssertionError on the first promise of F.rms_norm that ``op`` breaks."""
    # BEGIN SOLUTION
    close = torch.testing.assert_close
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):  # dtype and values
        x, w = torch.randn(16, 32).to(dtype), torch.randn(32).to(dtype)
        want, got = F.rms_norm(x, [32], w), op(x, [32], w)
        assert got.dtype == want.dtype, f"dtype: {got.dtype} for {dtype} input, F.rms_norm gives {want.dtype}"
        close(got, want)
    x = torch.randn(2, 4, 8, 16).to(memory_format=torch.channels_last)  # layout
    assert op(x, [16]).stride() == F.rms_norm(x, [16]).stride(), "layout: strides differ from F.rms_norm's"
    tiny = torch.full((16, 32), 1e-4).half()  # eps matters: mean square 1e-8
    for eps in (None, 0.0, 1e-3):
        close(op(tiny, [32], eps=eps), F.rms_norm(tiny, [32], eps=eps), msg=f"eps={eps} differs")
    x = torch.randn(16, 32)  # aliasing
    before = x.clone()
    y = op(x, [32])
    assert y.untyped_storage().data_ptr() != x.untyped_storage().data_ptr(), "aliasing: output shares the input"
    assert torch.equal(x, before), "aliasing: the input was modified"
    x, w, dy = torch.randn(16, 32, requires_grad=True), torch.randn(32, requires_grad=True), torch.randn(16, 32)
    got = torch.autograd.grad(op(x, [32], w), (x, w), dy)  # autograd: dx and dw
    close(got, torch.autograd.grad(F.rms_norm(x, [32], w), (x, w), dy), rtol=1e-4, atol=1e-5)
    xd, wd, t = x.detach(), w.detach(), torch.randn(16, 32)  # forward AD
    got = torch.func.jvp(lambda a: op(a, [32], wd), (xd,), (t,))[1]
    close(got, torch.func.jvp(lambda a: F.rms_norm(a, [32], wd), (xd,), (t,))[1], rtol=1e-4, atol=1e-5)
    for args in ((xd, [31]), (xd, 32), (xd, [32], torch.ones(31))):  # exceptions
        errors = []
        for fn in (op, F.rms_norm):
            try:
                fn(*args)
                errors.append(None)
            except Exception as e:  # noqa: BLE001 - the type and message are what we compare
                errors.append((type(e).__name__, str(e)))
        assert errors[0] == errors[1], f"exceptions: {errors[0]} vs F.rms_norm's {errors[1]}"
    # END SOLUTION


# %% tags=["grader-check"]
ex.check_contract_tests(my_contract_tests, fastpath_lib.rms_norm)

# %% [markdown]
# ## Questions
#
# 1. Your tests pass on `F.rms_norm` itself. Why is that a requirement, not a formality?
# 2. A test that compares only output *values*, on one fp32 input of ordinary magnitude, passes on most broken ops.
#    For each promise, what must change in the input or in the comparison for a fault there to show?
#
# <details><summary>Answer guide</summary>
#
# 1. A contract test that fails on the owner of the contract tests something else (an assumption about the
#    default eps, a tolerance too tight for fp16): it would block a correct fast path and teach nothing about a
#    broken one.
# 2. Each promise needs its own input and its own comparison. *dtype*: compare the dtype itself, for each input
#    dtype (comparing after a cast hides it). *layout*: compare strides, on inputs whose strides are not the
#    default ones. *aliasing*: compare storages, and keep a copy of the input to compare with after the call.
#    *eps*: inputs whose mean square is near eps or below it, and every form of the argument, its edge values
#    included. *autograd* and *forward_ad*: the derivatives of each differentiable input, with the tolerances of
#    the dtype. *exceptions*: the exception's type and message side by side with `F.rms_norm`'s, for each argument
#    a caller can get wrong, and a valid call next to each bad one.
# </details>
