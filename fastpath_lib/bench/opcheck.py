"""The checks an op's bench row passes before it is timed: its outputs against the spec's reference within the
spec's tolerance (:func:`compare_outputs`), its inputs left as they were (:func:`check_call`), and, in a backward
case, its gradients of every floating-point tensor argument against the reference's by autograd within
:meth:`~fastpath_lib.opspec.OpSpec.grad_tolerance` (:func:`compare_gradients`, :func:`check_backward`, from
:mod:`fastpath_lib.gradcheck`, which the generated boundary tests share)."""

from __future__ import annotations

import torch

from fastpath_lib import launches
from fastpath_lib.gradcheck import (arg_names, as_tuple, check_backward, compare_gradients, grad_inputs, gradients,
                                    tensor_mismatch)
from fastpath_lib.opspec import OpSpec

__all__ = ["as_tuple", "detached", "grad_inputs", "compare_outputs", "check_call", "arg_names", "gradients",
           "compare_gradients", "check_backward"]


def compare_outputs(spec: OpSpec, got, want, dtype: torch.dtype,
                    launched: launches.Launched | None = None, *, baseline: bool = False) -> str | None:
    """``None`` when every output of ``got`` matches ``want`` within the spec's tolerance for it, else why not
    (``launched``: the kernels the call launched, for :func:`fastpath_lib.gradcheck.rounding_hint`; ``baseline``:
    at the tolerances a baseline is held to, :meth:`~fastpath_lib.opspec.OpSpec.output_tolerances`)."""
    got, want = as_tuple(got), as_tuple(want)
    if len(got) != len(want):
        return f"{len(got)} outputs, the reference returns {len(want)}"
    for i, (g, w, (atol, rtol)) in enumerate(zip(got, want, spec.output_tolerances(dtype, len(want),
                                                                                      baseline=baseline))):
        problem = tensor_mismatch(g, w, atol, rtol, f"atol {atol}, rtol {rtol}", launched)
        if problem:
            return (f"output {i}: " if len(want) > 1 else "") + problem
    return None


def check_call(spec: OpSpec, fn, args: tuple, dtype: torch.dtype, *, grad: bool = False,
               launched: list | None = None, baseline: bool = False) -> str | None:
    """``None`` when ``fn(*args)`` matches the reference and leaves its inputs unchanged, else why not.

    ``grad``: call ``fn`` with autograd on, as a backward case times it (a compiled baseline checked under
    ``no_grad`` would compile a second graph: one cold compile more per backward case). ``launched``: a list the
    names of the Triton kernels ``fn``'s call launched are added to (:func:`fastpath_lib.launches.observe`).
    ``baseline``: ``fn`` is a baseline, checked at the tolerances baselines are held to."""
    before = [a.detach().clone() if isinstance(a, torch.Tensor) else None for a in args]
    with torch.enable_grad() if grad else torch.no_grad(), launches.watch() as seen:
        got = fn(*args)
    if launched is not None and seen is not None:
        launched.extend(seen)
    got = tuple(detached(g) for g in got) if isinstance(got, (tuple, list)) else detached(got)
    changed = [i for i, (a, b) in enumerate(zip(args, before))
               if b is not None and not torch.allclose(a, b, rtol=0, atol=0, equal_nan=True)]
    if changed:
        return f"it wrote into its input(s) {changed}: an in-place call cannot be timed on rotating inputs"
    with torch.no_grad():
        want = spec.reference(*args)
    return compare_outputs(spec, got, want, dtype, seen, baseline=baseline)


def detached(v):
    return v.detach() if isinstance(v, torch.Tensor) else v
