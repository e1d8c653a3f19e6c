# ---
# jupyter:
#   fastpath:
#     exercise: ex01
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
# # Exercise 01 — the float64 reference
#
# Lesson 01 fixed the operator's contract: `torch.nn.functional.rms_norm(input, normalized_shape, weight=None,
# eps=None)`. Every claim a reviewer checks later is measured against a *reference* that is independent of both
# routes. Here you write it.
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


# %% [markdown]
# ## Part 1: the default eps
#
# The spec, from PyTorch's docs: when `eps` is `None`, `F.rms_norm` uses `torch.finfo(dtype).eps` of the dtype
# *it computes in*. fp16 and bf16 inputs are computed in fp32 (the "opmath" type); fp64 stays fp64. Write
# `my_default_eps(dtype)` from that rule: an answer that calls the kit's own (`fastpath_lib.rmsnorm.limits`'s
# `default_eps`, or `fastpath_lib.testing`'s `_eps_for`) or anything of the grader's (`fastpath_lib.grading`) fails the
# part.

# %%
def my_default_eps(dtype: torch.dtype) -> float:
    """Return the eps F.rms_norm uses when eps=None, for an input of `dtype` (a float)."""
    # BEGIN SOLUTION
    opmath = torch.float64 if dtype == torch.float64 else torch.float32
    return torch.finfo(opmath).eps
    # END SOLUTION


# %% tags=["grader-check"]
ex.check_default_eps(my_default_eps)


# %% [markdown]
# ## Part 2: the reference
#
# The definition in plain torch, for `normalized_shape` of length `k` (the last `k` dims):
#
# ```python
# y = x / torch.sqrt(x.pow(2).mean(dim=last_k_dims, keepdim=True) + eps) * weight
# ```
#
# Requirements: compute and return **float64** (whatever the input dtype), use `my_default_eps(x.dtype)` when
# `eps is None` (and keep an explicit `eps=0.0`!), multiply by the weight only when there is one, and never modify
# the input. The check calls it on fp16, bf16, fp32 and fp64 inputs, each with `eps=None` on values small enough
# that the default eps moves the result.
#
# Write it from the definition: the part fails when your reference calls any operator of torch's *normalization*
# family (every operator that returns its input rescaled by a statistic of itself, under every name the installed
# torch has: `F.rms_norm`, `F.layer_norm`, `F.group_norm`, `F.normalize`, `torch._fused_rms_norm`, `torch.nn.RMSNorm`,
# ...), or the kit's own code for it: its reference (`fastpath_lib.testing`'s `reference_rms_norm`, `reference_grads`
# and `_ref_graph`), its operator (`fastpath_lib.rmsnorm.op`, `fastpath_lib.rmsnorm.module`), its kernels
# (`fastpath_lib.rmsnorm.kernels`) or its default eps (`default_eps`, `_eps_for`, as in part 1). Reductions that return
# a norm are not in the family: `x.pow(2).mean(...)`, `torch.linalg.vector_norm` and `torch.norm` are yours to use.

# %%
def my_reference(x, normalized_shape, weight=None, eps=None):
    """Return RMSNorm of `x` over its last `normalized_shape` dims, from the definition: a float64 tensor of
    `x`'s shape."""
    # BEGIN SOLUTION
    eps = my_default_eps(x.dtype) if eps is None else float(eps)
    x64 = x.detach().to(torch.float64)
    dims = tuple(range(-len(normalized_shape), 0))
    y = x64 * torch.rsqrt(x64.pow(2).mean(dims, keepdim=True) + eps)
    if weight is not None:
        y = y * weight.detach().to(torch.float64)
    return y
    # END SOLUTION


# %% tags=["grader-check"]
ex.check_reference(my_reference)

# %% [markdown]
# ## Questions
#
# 1. Why does the fp16 case with tiny values catch a reference that uses `torch.finfo(torch.float16).eps`?
# 2. Why is the reference computed in float64 rather than in the input's dtype?
# 3. What does the `eps=0.0` case catch that `eps=None` does not?
