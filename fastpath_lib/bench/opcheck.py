"""The checks an op's bench row passes before it is timed: its outputs against the spec's reference within the
spec's tolerance (:func:`compare_outputs`), its inputs left as they were (:func:`check_call`), and, in a backward
case, its gradients of every floating-point tensor argument against the reference's by autograd within
:meth:`~fastpath_lib.opspec.OpSpec.grad_tolerance` (:func:`compare_gradients`, :func:`check_backward`)."""

from __future__ import annotations

import contextlib

import torch

from fastpath_lib import launches
from fastpath_lib.opspec import OpSpec

__all__ = ["as_tuple", "detached", "grad_inputs", "compare_outputs", "check_call", "arg_names", "gradients",
           "compare_gradients", "check_backward"]


def as_tuple(v) -> tuple:
    return tuple(v) if isinstance(v, (tuple, list)) else (v,)


def compare_outputs(spec: OpSpec, got, want, dtype: torch.dtype) -> str | None:
    """``None`` when every output of ``got`` matches ``want`` within the spec's tolerance for it, else why not."""
    got, want = as_tuple(got), as_tuple(want)
    if len(got) != len(want):
        return f"{len(got)} outputs, the reference returns {len(want)}"
    for i, (g, w, (atol, rtol)) in enumerate(zip(got, want, spec.output_tolerances(dtype, len(want)))):
        which = f"output {i}: " if len(want) > 1 else ""
        if g.shape != w.shape or g.dtype != w.dtype:
            return f"{which}{tuple(g.shape)} {g.dtype}, reference {tuple(w.shape)} {w.dtype}"
        if not torch.allclose(g.float(), w.float(), atol=atol, rtol=rtol, equal_nan=True):
            err = (g.float() - w.float()).abs().max().item()
            rule = "bitwise" if atol == rtol == 0 else f"atol {atol}, rtol {rtol}"
            return f"{which}max error {err:.3g} over {rule}"
    return None


def check_call(spec: OpSpec, fn, args: tuple, dtype: torch.dtype, *, grad: bool = False,
               launched: list | None = None) -> str | None:
    """``None`` when ``fn(*args)`` matches the reference and leaves its inputs unchanged, else why not.

    ``grad``: call ``fn`` with autograd on, as a backward case times it (a compiled baseline checked under
    ``no_grad`` would compile a second graph: one cold compile more per backward case). ``launched``: a list the
    names of the Triton kernels ``fn``'s call launched are added to (:func:`fastpath_lib.launches.observe`)."""
    before = [a.detach().clone() if isinstance(a, torch.Tensor) else None for a in args]
    watch = launches.observe() if launched is not None else contextlib.nullcontext([])
    with torch.enable_grad() if grad else torch.no_grad(), watch as seen:
        got = fn(*args)
    if launched is not None:
        launched.extend(seen)
    got = tuple(detached(g) for g in got) if isinstance(got, (tuple, list)) else detached(got)
    changed = [i for i, (a, b) in enumerate(zip(args, before))
               if b is not None and not torch.allclose(a, b, rtol=0, atol=0, equal_nan=True)]
    if changed:
        return f"it wrote into its input(s) {changed}: an in-place call cannot be timed on rotating inputs"
    with torch.no_grad():
        want = spec.reference(*args)
    return compare_outputs(spec, got, want, dtype)


def arg_names(spec: OpSpec, n: int) -> list[str]:
    """The names of the reference's first ``n`` parameters (``argument i`` where its signature cannot be read)."""
    import inspect

    try:
        params = [p.name for p in inspect.signature(spec.reference).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return [params[i] if i < len(params) else f"argument {i}" for i in range(n)]


def gradients(fn, args: tuple, dy) -> tuple:
    """The gradients of ``fn(*args)``'s output(s) against ``dy``, one per floating-point tensor argument (``None``
    where the output does not depend on it)."""
    with torch.enable_grad():
        return tuple(torch.autograd.grad(fn(*args), grad_inputs(args), dy, allow_unused=True))


def compare_gradients(spec: OpSpec, got, args: tuple, dy, dtype: torch.dtype) -> str | None:
    """``None`` when ``got`` (a route's gradients, one per floating-point tensor argument of ``args``; ``None``
    entries dropped) matches the reference's gradients by autograd within :meth:`~fastpath_lib.opspec.OpSpec.
    grad_tolerance`, else why not, naming the input."""
    fresh = tuple(a.detach().clone().requires_grad_(True) if any(a is g for g in grad_inputs(args)) else a
                  for a in args)
    try:
        want = gradients(spec.reference, fresh, dy)
    except Exception as exc:  # noqa: BLE001 - a reference without a gradient cannot vouch for a route's
        return f"the reference has no gradient to check it against ({type(exc).__name__}: {exc})"[:300]
    got = [g for g in as_tuple(got) if g is not None]
    names = [n for n, a in zip(arg_names(spec, len(args)), args) if any(a is g for g in grad_inputs(args))]
    pairs = [(n, w) for n, w in zip(names, want) if w is not None]
    if len(got) != len(pairs):
        return f"{len(got)} gradients, the reference gives {len(pairs)} ({', '.join(n for n, _ in pairs)})"
    atol, rtol = spec.grad_tolerance(dtype)
    for g, (name, w) in zip(got, pairs):
        if g.shape != w.shape or g.dtype != w.dtype:
            return f"gradient of {name}: {tuple(g.shape)} {g.dtype}, reference {tuple(w.shape)} {w.dtype}"
        if not torch.allclose(g.float(), w.float(), atol=atol, rtol=rtol, equal_nan=True):
            err = (g.float() - w.float()).abs().max().item()
            rule = "bitwise" if atol == rtol == 0 else f"atol {atol:.3g}, rtol {rtol:.3g}"
            return f"gradient of {name}: max error {err:.3g} over {rule}"
    return None


def check_backward(spec: OpSpec, fn, args: tuple, dy, dtype: torch.dtype, *, launcher: bool = False) -> str | None:
    """``None`` when the gradients of a backward case's route match the reference's, else why not: ``fn`` by
    autograd, or with ``launcher`` the spec's ``fast_backward(dy, *args)``."""
    try:
        got = spec.fast_backward(dy, *args) if launcher else gradients(fn, args, dy)
    except Exception as exc:  # noqa: BLE001 - a backward that raises is a wrong route, recorded as its row
        return f"its backward raised {type(exc).__name__}: {exc}"[:300]
    return compare_gradients(spec, got, args, dy, dtype)



def detached(v):
    return v.detach() if isinstance(v, torch.Tensor) else v



def grad_inputs(args: tuple) -> tuple:
    """The floating-point tensor arguments of a call: what a backward case differentiates."""
    return tuple(a for a in args if isinstance(a, torch.Tensor) and a.is_floating_point())
