# ---
# jupyter:
#   fastpath:
#     exercise: ex12
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
# # Exercise 12 — the in-place fused op: overlap condition and contract tests that catch a broken op
#
# `fastpath_lib.fused_add_rms_norm_(x, residual, weight, eps)` writes the normalized output into `x` and the sum into
# `residual`, and returns `(x, residual)`. Its contract is the composite `native_` of
# `fastpath_lib.fused.reference` (lesson 08): the sum in fp32, the new residual that sum rounded once to x's dtype,
# the mean square of the *unrounded* fp32 sum, then the output; both results computed before anything is written,
# the residual written first, then `x`.
#
# **What this exercise cannot grade.** The ops your tests judge run in Triton's CPU interpreter, which runs programs
# one after another: an aliased call there damages memory the same way on every run, where a GPU's scheduling makes
# it differ from run to run. Races, timing and the other GPU-only properties of lesson 02's "What the interpreter
# cannot show" are outside what it grades.
#
# **Part (a).** The Triton route may only run when `x`, `residual` and the weight share no memory: a program that
# writes `x` while another reads an overlapping `residual` reads values already overwritten. Write
# `overlaps(a, b) -> bool`: `True` when the two tensors may share memory, `False` when their bytes are apart. Use
# the tensors' public attributes (`untyped_storage()`, `data_ptr()`, `shape`, `stride()`, `element_size()`).
#
# Part (a) scores nothing when `overlaps` calls the kit's own overlap rule (`fastpath_lib.fused.predicate`,
# `fastpath_lib.fused.op`, `fastpath_lib.rmsnorm.predicate`), the grader's code (`fastpath_lib.grading`), torch's own
# overlap checks (`torch._C._overlaps`, `torch._debug_has_internal_overlap`) or numpy's (`shares_memory`,
# `may_share_memory`), or reads any other private name: anything under `torch._`, or a `_`-attribute other than a
# tensor's own state (as in part (b), `x._base` and `x._version` are yours to read).
#
# **Part (b).** Write `my_inplace_tests(op_)`: it calls `op_` (an op with the in-place form's signature) and raises
# `AssertionError` on the first promise it breaks:
#
# * **writes**: what ends up in `x` and in `residual` (the new residual bit for bit, the output within the
#   tolerance of `fastpath_lib.fused.reference.tolerance(dtype)`);
# * **returns**: what the call returns, and whether it is the caller's own memory;
# * **aliasing**: calls where `x` and `residual` are one tensor, and calls on views of one buffer whose rows are
#   shifted by one (`x = b[1:]`, `residual = b[:-1]`; each of the two has a broken op that only it shows): the op must
#   leave memory as the composite does (the residual bit for bit, the output within tolerance, as for **writes**);
# * **declared_mutation**: an op is also used under `torch.compile`, where what the schema declares decides what
#   survives. Use `torch.compile(fn, backend="aot_eager", fullgraph=True)`: it functionalizes as Inductor does,
#   without generating code, so it is quick on a CPU; and Inductor, the default backend, cannot compile the
#   composite itself here (see below);
# * **residual_rounding** and **variance**: the rounding points, for every dtype pair of input and weight. Random
#   inputs only show them within the output's tolerance: choose inputs whose exact answer you know;
# * **raises_cleanly**: a call that raises must have written nothing.
#
# Compare with the contract, `native` / `native_` from `fastpath_lib.fused.reference`, never with the kit's op.
#
# **How it is graded.** Part (a) is asked about pairs of tensors the grader builds now. Part (b) runs against three
# correct ops (the kit's, the composite, and another route that differs from the composite in the output's last bits),
# where it must pass, and against broken ops, one fault each, where it must fail. Feedback names the categories with a
# broken op that got through, not the op. Your tests score nothing on every part of (b) when they:
#
# * fail on a correct op, or never fail;
# * share three lines or more with the kit's own fused-op tests, or import the kit's tests (the modules `tests`,
#   `conftest` or `runpy`, or a `test_fused*` function from a module; your own names are yours);
# * call the kit's fused op or its parts (`fastpath_lib.fused.op`, `fastpath_lib.fused.kernels`,
#   `fastpath_lib.fused.predicate`) or the grader's code (`fastpath_lib.grading`);
# * inspect the op instead of calling it: a contract test calls the op and checks what it returns, writes or raises;
#   it does not inspect the op. Inspecting is reading a private attribute (`op_._impl`) other than an imported
#   module's (`torch._dynamo`) or a tensor's own state (below); reading an attribute `__class__`, `__closure__`,
#   `__code__`, `__defaults__`, `__dict__`, `__func__`, `__getstate__`, `__globals__`, `__kwdefaults__`, `__module__`,
#   `__qualname__`, `__reduce__`, `__reduce_ex__`, `__self__`, `__slots__`, `__wrapped__`, `cell_contents`,
#   `co_code`, `co_consts`, `co_name`, `f_back`, `f_globals` or `f_locals`, or the `__name__` of a name
#   (`op_.__name__`); using `inspect`, `gc`, `dis`, `ctypes`, `sys._getframe`, `dir` or `vars`;
# * watch the op run instead of judging what it leaves: any name containing `TorchFunctionMode`, `TorchDispatchMode`,
#   `__torch_function__`, `__torch_dispatch__`, `torch.profiler`, `torch.autograd.profiler`, `torch.fx`, `make_fx`,
#   `torch.export`, `torch.jit`, `setprofile`, `settrace`, `traceback` or `torch.ops.fastpath`, an attribute `.code`,
#   `.f_code`, `.graph`, `.graph_module`, `.nodes`, `.print_readable` or `.tb_frame`, or a `torch.compile` backend
#   that is not a literal string.
#
# A tensor's own state is not the op: `x._version` (the version counter lesson 08 reads to see a write), `x._base` and
# torch's other data attributes of a tensor are yours to read. The check below applies these rules as the grader does.
#
# Keep shapes small: under the interpreter 16 rows are eligible for the kit's Triton route. For aliasing use 16 x 1024,
# as lesson 08 does: at 64 columns one program normalizes all 16 rows, so `residual` = `x` shifted by one row cannot
# show its race; at 1024 columns each row has its own program.
#
# **How this works.** Fill in each cell marked `# FILL ME IN (roughly N lines)` (delete the `raise
# NotImplementedError`), run it, then run the check below it: it prints `passed`, or what is missing.
# `python -m fastpath_lib grade exercises/` runs all notebooks in a fresh kernel and prints your score; the solved
# versions are in `solutions/`.

# %% [markdown]
# **Why not `torch.library.opcheck`.** `opcheck` tests a registered operator (an `OpOverload`); the op handed to your
# tests is a Python function, because the in-place form returns the caller's own `x` and `residual` and a
# `torch.library` custom op cannot return its inputs. Its schema fault shows where the schema matters: under
# `torch.compile`.
#
# **Why `aot_eager`, not Inductor.** On a CPU with torch 2.13, Inductor fails on the in-place composite itself, so
# a test that compiles with the default backend fails on every correct op. A small program fails the same way (two
# in-place writes, the second reading a reduction of the value the first wrote):
#
# ```python
# def f(x, r):
#     s = x + r
#     r.copy_(s)
#     x.copy_(s.sum(-1, keepdim=True) * s)
# torch.compile(f)(torch.randn(16, 64), torch.randn(16, 64))  # InductorError: KeyError: 'buf1'
# ```
#
# Without the reduction (`x.copy_(s * 2)`) it compiles, and so does the functional composite `native`. Such a
# program is what a bug report to PyTorch carries; in these tests, compile with `aot_eager`.

# %%
import torch
import fastpath_lib
# no CUDA: run the kernels in Triton's CPU interpreter (a no-op on a GPU)
fastpath_lib.use_interpreter()
from fastpath_lib import exercises as ex
from fastpath_lib.fused.reference import native, native_, tolerance

# %% [markdown]
# ## (a) When do two tensors overlap?
#
# Two views of different storages never share memory. Within one storage, think of each view as the range of bytes from
# its first element's first byte to its last element's last byte, and mind the views whose strides are not the usual
# ones (a row expanded with stride 0, a transposed view) and views of another dtype, narrower or wider (a `uint8` view,
# an `int64` view). A conservative answer is allowed where two interleaved views share no element (the left and right
# column halves of one buffer): it only costs the fast path, never correctness. Where two views share a byte, or where
# their bytes are apart, the answer is fixed.


# %%
def overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Return whether ``a`` and ``b`` may share memory (byte ranges of one storage that intersect), a bool."""
    # BEGIN SOLUTION
    if a.numel() == 0 or b.numel() == 0 or a.untyped_storage().data_ptr() != b.untyped_storage().data_ptr():
        return False

    def span(t):
        last = sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))
        return t.data_ptr(), t.data_ptr() + (last + 1) * t.element_size()

    (a0, a1), (b0, b1) = span(a), span(b)
    return a0 < b1 and b0 < a1
    # END SOLUTION


# %%
buf = torch.zeros(8, 16)
print(overlaps(buf, buf), overlaps(buf[:4], buf[4:]), overlaps(buf[:5], buf[4:]), overlaps(buf, torch.zeros(8, 16)))

# %% tags=["grader-check"]
ex.check_overlaps(overlaps)

# %% [markdown]
# ## (b) Contract tests for the in-place form
#
# One helper runs `op_` and the composite on two copies of the same memory and returns what each left there; each
# promise is then a few lines. The output may differ from the composite's in its last bits (another reduction
# order), so compare it within tolerance; the new residual is one fp32 addition rounded once: compare it bit for bit.


# %%
def my_inplace_tests(op_) -> None:
    """Raise AssertionError on the first promise of fastpath_lib.fused_add_rms_norm_ that ``op_`` breaks."""
    # BEGIN SOLUTION
    def on_copies(make, weight=None, eps=None):
        """``make()`` builds (buffer, x, residual) afresh; ``op_`` runs on one copy, ``native_`` on another."""
        mine, ref = make(), make()
        returned = op_(mine[1], mine[2], weight, eps)
        native_(ref[1], ref[2], weight, eps)
        return mine, ref, returned

    def near(got, want, what):
        atol, rtol = tolerance(want.dtype)
        torch.testing.assert_close(got, want, atol=atol, rtol=rtol, msg=lambda m: f"{what}: {m}")

    g = torch.Generator().manual_seed(0)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):  # writes, returns, residual bit for bit
        x0, r0 = torch.randn(2, 16, 64, generator=g).to(dtype)
        for wdtype in dict.fromkeys((dtype, torch.bfloat16)):  # the weight's dtype too
            w = (1 + 0.1 * torch.randn(64, generator=g)).to(wdtype)
            mine, ref, returned = on_copies(lambda: (None, x0.clone(), r0.clone()), w)
            assert returned[0] is mine[1] and returned[1] is mine[2], "returns: not the caller's own x and residual"
            assert torch.equal(mine[2], ref[2]), f"residual {dtype}/{wdtype} weight: not the rounded fp32 sum"
            near(mine[1], ref[1], f"output written into x, {dtype}/{wdtype} weight")
    ones = torch.ones(16, 64, dtype=torch.float16)  # 1 + 0.6 ulp: the residual rounds up, the fp32 sum does not
    mine, _, _ = on_copies(lambda: (None, ones.clone(), torch.full_like(ones, 0.6 * 2 ** -10)), None, 0.0)
    assert torch.equal(mine[1], ones), "variance: constant rows must normalize to exactly 1 (fp32 sum)"
    base = torch.randn(17, 64, generator=g)
    w = 1 + 0.1 * torch.randn(64, generator=g)
    for label, make in (("x is residual", lambda: (lambda b: (b, b, b))(base.clone())),
                        ("x overlaps residual", lambda: (lambda b: (b, b[1:], b[:-1]))(base.clone()))):
        mine, ref, _ = on_copies(make, w, 1.0)
        near(mine[0], ref[0], f"aliasing, {label}: memory differs from the composite's")
    x0, r0 = torch.randn(2, 16, 64, generator=g)
    x, r = x0.clone(), r0.clone()
    try:  # raises cleanly: a weight of the wrong width
        op_(x, r, torch.ones(63))
        raised = False
    except RuntimeError:
        raised = True
    assert raised and torch.equal(x, x0) and torch.equal(r, r0), "raises: must raise and leave x and residual alone"
    compiled = torch.compile(lambda a, b: op_(a, b, w), backend="aot_eager", fullgraph=True)
    mine, ref = (x0.clone(), r0.clone()), (x0.clone(), r0.clone())
    compiled(*mine)
    native_(*ref, w)
    assert torch.equal(mine[1], ref[1]), "declared mutation: under torch.compile the residual was not written"
    near(mine[0], ref[0], "declared mutation: under torch.compile, x")
    # END SOLUTION


# %% tags=["grader-check"]
ex.check_inplace_tests(my_inplace_tests, fastpath_lib.fused_add_rms_norm_)

# %% [markdown]
# ## Questions
#
# 1. Why must the composite compute *both* results before writing either, and what does that buy a caller whose `x`
#    and `residual` overlap?
# 2. An op declares `mutates_args=()` but writes its inputs. Why is it right in eager mode, and what goes wrong under
#    `torch.compile`? Which test of `torch.library.opcheck` reports it?
# 3. The variance of the rounded residual differs from the contract's by less than the output's tolerance on random
#    inputs. How do you test a rounding point anyway?
#
# <details><summary>Answer guide</summary>
#
# 1. A write into `x` or `residual` may land in memory the other one still has to be read from. Reading everything
#    first makes the result independent of the overlap: the outcome is defined (the residual written, then the
#    output) and the same on every route, so the predicate can send any overlapping call to the composite.
# 2. Eager mode runs the implementation, which writes. Under `torch.compile`, functionalization trusts the schema: a
#    call that declares no mutation and returns nothing can be dropped, and the inputs are taken as unchanged, so the
#    caller never sees the writes. `opcheck`'s schema test (`test_schema`) runs the op and compares what it wrote
#    with what it declared.
# 3. Compare bit for bit, on inputs whose exact answer you know and where the two rounding points give different
#    answers: ask what the normalized value of a row is when every element is the same, and when the sum of an
#    element pair is not representable in the input dtype. The same goes for the weight's dtype: when it differs
#    from the input's, its rounding must reach the output and never the residual.
# </details>
