"""A route's gradients against its reference's, for any op's spec: the check the bench's backward cases
(:mod:`fastpath_lib.bench.opcheck`) and the generated boundary tests (:func:`fastpath_lib.boundary.check_point`) share.

:func:`gradients` differentiates a call against an incoming gradient (:func:`incoming_gradient`, shaped like the
reference's output); :func:`compare_gradients` holds a route's gradients of every floating-point tensor argument
against the reference's by autograd within :meth:`~fastpath_lib.opspec.OpSpec.grad_tolerance`, naming the input that
differs; :func:`check_backward` checks the public function by autograd or, as a launcher, the spec's
``fast_backward``. A bf16 value that differs under Triton's interpreter gets :func:`rounding_hint` where the
interpreter's cast can be the cause.
"""

from __future__ import annotations

import torch

from fastpath_lib import launches, runtime
from fastpath_lib.opspec import OpSpec

__all__ = ["CASTS_REACH", "rounding_hint", "tensor_mismatch", "as_tuple", "grad_inputs", "leaves", "arg_names",
           "incoming_gradient", "gradients", "compare_gradients", "check_backward"]


#: How many of the interpreter's casts a bf16 result may have been through (the store's, and one before it): each
#: moves a value by less than one unit in the last place.
CASTS_REACH = 2


def rounding_hint(got: torch.Tensor, want: torch.Tensor, atol: float, rtol: float,
                  launched: launches.Launched | None) -> str:
    """``"; "`` and :data:`fastpath_lib.runtime.INTERPRETER_BF16` where Triton's interpreter's bf16 cast can be why
    ``got`` differs from ``want``, else ``""``.

    It can be only for a bf16 value under the interpreter, from a call seen to launch a Triton kernel (``launched``,
    from :func:`fastpath_lib.launches.observe`; ``None``: not observed) that converts with Triton's own casts (none of
    its device calls is :mod:`fastpath_lib.triton_casts`'), and only where every element is within its tolerance plus
    :data:`CASTS_REACH` units in the last place of its value: the interpreter's cast truncates, moving each value it
    rounds toward zero by less than one ulp, at most ``eps * |v|`` (``torch.finfo(torch.bfloat16).eps``; ``tiny`` for
    a subnormal). An error past that reach is the kernel's, whatever its casts."""
    if got.dtype != torch.bfloat16 or not runtime.interpreter_enabled() or not launched:
        return ""
    if launches.converts_with_casts(launched):
        return ""
    g, w = got.detach().float(), want.detach().float()
    fin = torch.finfo(torch.bfloat16)
    size = torch.maximum(torch.maximum(g.abs(), w.abs()), torch.tensor(fin.tiny, device=g.device))
    reach = atol + rtol * w.abs() + CASTS_REACH * fin.eps * size
    inside = ((g - w).abs() <= reach) | (g.isnan() & w.isnan())
    return f"; {runtime.INTERPRETER_BF16}" if bool(inside.all()) else ""


def tensor_mismatch(got: torch.Tensor, want: torch.Tensor, atol: float, rtol: float, tolerance: str,
                    launched: launches.Launched | None = None) -> str | None:
    """Why ``got`` is not ``want`` (another shape or dtype; a value outside ``atol``/``rtol``, said as ``tolerance``,
    or "bitwise" when both are 0, with :func:`rounding_hint` for the call's ``launched`` kernels), or ``None``: the
    one comparison of an op's outputs and gradients with the reference's."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"{tuple(got.shape)} {got.dtype}, reference {tuple(want.shape)} {want.dtype}"
    if not torch.allclose(got.float(), want.float(), atol=atol, rtol=rtol, equal_nan=True):
        err = (got.float() - want.float()).abs().max().item()
        return (f"max error {err:.3g} over {'bitwise' if atol == rtol == 0 else tolerance}"
                f"{rounding_hint(got, want, atol, rtol, launched)}")
    return None


def as_tuple(v) -> tuple:
    return tuple(v) if isinstance(v, (tuple, list)) else (v,)


def grad_inputs(args: tuple) -> tuple:
    """The floating-point tensor arguments of a call: what a backward case differentiates."""
    return tuple(a for a in args if isinstance(a, torch.Tensor) and a.is_floating_point())


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


def compare_gradients(spec: OpSpec, got, args: tuple, dy, dtype: torch.dtype,
                      launched: launches.Launched | None = None, *, baseline: bool = False) -> str | None:
    """``None`` when ``got`` (a route's gradients, one per floating-point tensor argument of ``args``; ``None``
    entries dropped) matches the reference's gradients by autograd within :meth:`~fastpath_lib.opspec.OpSpec.
    grad_tolerance`, else why not, naming the input (``launched``: the kernels the route's backward launched, for
    :func:`rounding_hint`; ``baseline``: at the tolerance a baseline is held to)."""
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
    atol, rtol = spec.grad_tolerance(dtype, baseline=baseline)
    for g, (name, w) in zip(got, pairs):
        problem = tensor_mismatch(g, w, atol, rtol, f"atol {atol:.3g}, rtol {rtol:.3g}", launched)
        if problem:
            return f"gradient of {name}: {problem}"
    return None


def check_backward(spec: OpSpec, fn, args: tuple, dy, dtype: torch.dtype, *, launcher: bool = False,
                   baseline: bool = False) -> str | None:
    """``None`` when the gradients of a backward case's route match the reference's, else why not: ``fn`` by
    autograd, or with ``launcher`` the spec's ``fast_backward(dy, *args)`` (``baseline``: ``fn`` is a baseline, held
    to the baseline tolerances)."""
    try:
        with launches.watch() as seen:
            got = spec.fast_backward(dy, *args) if launcher else gradients(fn, args, dy)
    except Exception as exc:  # noqa: BLE001 - a backward that raises is a wrong route, recorded as its row
        return f"its backward raised {type(exc).__name__}: {exc}"[:300]
    return compare_gradients(spec, got, args, dy, dtype, seen, baseline=baseline)

def leaves(args: tuple) -> tuple:
    """``args`` with each floating-point tensor argument a fresh leaf that requires grad (what a backward
    differentiates)."""
    return tuple(a.detach().requires_grad_(True) if any(a is g for g in grad_inputs(args)) else a for a in args)


def incoming_gradient(spec: OpSpec, args: tuple, gen: torch.Generator):
    """The incoming gradient of a call: one tensor per output of the op (the reference run once, untimed, gives each
    output's shape, dtype and device), drawn from ``gen``; a tuple where the op returns one."""
    with torch.no_grad():
        out = spec.reference(*(a.detach() if isinstance(a, torch.Tensor) else a for a in args))
    dy = tuple(torch.randn(tuple(o.shape), generator=gen, dtype=torch.float32).to(o.device, o.dtype)
               for o in as_tuple(out))
    return dy if isinstance(out, (tuple, list)) else dy[0]
