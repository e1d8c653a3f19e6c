"""Exercise 12's ops under test: in-place fused residual-add + RMSNorm, correct by several routes or broken in one way.

Every op here has the in-place form's signature, ``op_(x, residual, weight=None, eps=None) -> (x, residual)``, and
follows :func:`fastpath_lib.fused.reference.native_` (the contract) except for one seeded fault. The faults, by graded
category (never named to a learner while one survives):

* *writes*: the sum written into ``x`` and the output into ``residual``; ``x`` left alone (the output returned new);
* *returns*: copies returned instead of the caller's own ``x`` and ``residual``;
* *aliasing*: a kernel that writes the output first and re-reads the residual afterwards (right unless the two share
  memory); results written ``x`` first (an aliased buffer ends holding the sum, not the output);
* *declared_mutation*: a ``torch.library`` custom op declared ``mutates_args=()`` that writes anyway: right in eager
  mode, wrong under ``torch.compile`` (functionalization trusts the schema and the write is lost);
* *residual_rounding*: the new residual rounded through the weight's dtype before x's;
* *variance*: the mean square taken from the rounded residual instead of the fp32 sum;
* *raises_cleanly*: the residual written before the weight's shape is checked, so a call that raises leaves it changed.

Correct controls: the kit's op (the check cell's argument), the composite itself, and another route (``1/sqrt`` of
the sum of squares over the width, both results computed before any write) that differs from the composite in the
output's last bits, within the contract's tolerance.

The grader runs these ops in its own process (:class:`fastpath_lib.grading.checks.ex12_inplace.OpServer`); the learner's
kernel never holds them. :func:`build_pair` builds exercise 12's overlap cases from plain recipes.
"""

from __future__ import annotations

import numbers

import torch

from fastpath_lib.fused import reference
from fastpath_lib.fused.reference import native, native_
from fastpath_lib.rmsnorm.limits import default_eps

__all__ = ["CORRECT", "BROKEN", "variants", "impls", "Op", "build_pair"]


def _eps(x, eps):
    return default_eps(x.dtype) if eps is None else float(eps)


def _composite(x, residual, weight, eps):
    return native_(x, residual, weight, eps)


def _checked(x, residual, weight, results=None) -> None:
    """The composite's checks before its first write, where the reference has them (``check_inplace``): every op
    here but the one whose fault is a write before raising keeps that promise, so a test of it catches that op only."""
    check = getattr(reference, "check_inplace", None)
    if check is not None and results is None:
        check(x, residual, weight)
    elif check is not None:
        check(x, residual, weight, results=results)


def _other_route(x, residual, weight, eps):
    _checked(x, residual, weight)
    s = x.float() + residual.float()  # both inputs read into new tensors before anything is written
    rstd = 1.0 / torch.sqrt(s.square().sum(-1, keepdim=True) / s.shape[-1] + _eps(x, eps))
    n = s * rstd
    out = (n.to(weight.dtype) * weight if weight is not None else n).to(x.dtype)
    _checked(x, residual, weight, (out, s.to(x.dtype)))
    residual.copy_(s.to(x.dtype))
    x.copy_(out)
    return x, residual


def _swapped(x, residual, weight, eps):
    out, s = native(x, residual, weight, eps)
    _checked(x, residual, weight, (out, s))
    residual.copy_(out)
    x.copy_(s)
    return x, residual


def _x_untouched(x, residual, weight, eps):
    out, s = native(x, residual, weight, eps)
    _checked(x, residual, weight, (out, s))
    residual.copy_(s)
    return out, residual


def _returns_copies(x, residual, weight, eps):
    native_(x, residual, weight, eps)
    return x.clone(), residual.clone()


def _rereads_residual(x, residual, weight, eps):
    xf = x.to(torch.float32, copy=True)
    out, s = native(x, residual, weight, eps)
    _checked(x, residual, weight, (out, s))
    x.copy_(out)
    residual.copy_((xf + residual.float()).to(x.dtype))  # reads residual after x was written
    return x, residual


def _writes_x_first(x, residual, weight, eps):
    out, s = native(x, residual, weight, eps)
    _checked(x, residual, weight, (out, s))
    x.copy_(out)
    residual.copy_(s)
    return x, residual


_UNDECLARED: list = []


def _undeclared_op():
    """A custom op that writes ``x`` and ``residual`` but declares ``mutates_args=()`` (registered on first use)."""
    if not _UNDECLARED:
        @torch.library.custom_op("fastpath_grading::fused_add_rms_norm_", mutates_args=())
        def op(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None, eps: float | None) -> None:
            native_(x, residual, weight, eps)

        @op.register_fake
        def _(x, residual, weight, eps):
            return None

        _UNDECLARED.append(op)
    return _UNDECLARED[0]


def _undeclared(x, residual, weight, eps):
    _undeclared_op()(x, residual, weight, None if eps is None else float(eps))
    return x, residual


def _residual_via_weight_dtype(x, residual, weight, eps):
    s = x.float() + residual.float()
    new = (s.to(weight.dtype) if weight is not None else s).to(x.dtype)
    out, _ = native(x, residual, weight, eps)
    _checked(x, residual, weight, (out, new))
    residual.copy_(new)
    x.copy_(out)
    return x, residual


def _variance_of_rounded(x, residual, weight, eps):
    s = x.float() + residual.float()
    new = s.to(x.dtype)
    n = s * torch.rsqrt(new.float().pow(2).mean(-1, keepdim=True) + _eps(x, eps))
    out = (n.to(weight.dtype) * weight if weight is not None else n).to(x.dtype)
    _checked(x, residual, weight, (out, new))
    residual.copy_(new)
    x.copy_(out)
    return x, residual


def _writes_before_raising(x, residual, weight, eps):
    s = x.float() + residual.float()
    residual.copy_(s.to(x.dtype))
    n = s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + _eps(x, eps))
    out = n.to(weight.dtype) * weight if weight is not None else n  # a weight of the wrong width raises here
    x.copy_(out.to(x.dtype))
    return x, residual


#: The correct controls besides the kit's op.
CORRECT = {"composite": _composite, "other_route": _other_route}
#: category -> the broken ops of that category, in the order the grader's feedback lists categories.
BROKEN = {
    "writes": (_swapped, _x_untouched),
    "returns": (_returns_copies,),
    "aliasing": (_rereads_residual, _writes_x_first),
    "declared_mutation": (_undeclared,),
    "residual_rounding": (_residual_via_weight_dtype,),
    "variance": (_variance_of_rounded,),
    "raises_cleanly": (_writes_before_raising,),
}


def variants() -> list[str]:
    """Every op a run uses: ``kit``, the :data:`CORRECT` names and ``category:index`` for each broken op."""
    return ["kit", *CORRECT] + [f"{c}:{i}" for c, fns in BROKEN.items() for i in range(len(fns))]


def impls() -> dict:
    """variant -> implementation (``kit`` is not here: it is the check cell's own argument)."""
    return dict(CORRECT) | {f"{c}:{i}": fn for c, fns in BROKEN.items() for i, fn in enumerate(fns)}


def _validate(x, residual, weight, eps) -> None:
    """The same argument errors for every op under test, before any of them runs."""
    if not isinstance(x, torch.Tensor) or not isinstance(residual, torch.Tensor):
        raise TypeError("x and residual must be tensors")
    if weight is not None and not isinstance(weight, torch.Tensor):
        raise TypeError("weight must be a tensor or None")
    if eps is not None and (not isinstance(eps, numbers.Real) or isinstance(eps, bool)):
        raise TypeError("eps must be a real number or None")


class Op:
    """The op handed to the learner's tests: every op, correct or broken, looks the same from outside."""

    __slots__ = ("_impl",)
    __name__ = "fused_add_rms_norm_"

    def __init__(self, impl):
        self._impl = impl

    def __call__(self, x, residual, weight=None, eps=None):
        _validate(x, residual, weight, eps)
        return self._impl(x, residual, weight, eps)

    def __repr__(self) -> str:
        return "<op under test>"


def build_pair(recipe: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """The two tensors of one overlap case, from plain values (the same in the grader and in the kernel).

    ``recipe``: ``rows``, ``cols``, ``dtype``, and ``a``, ``b``: each ``(buffer index, steps)``, a step one of
    ``("rows", start, stop, step)``, ``("cols", start, stop, step)``, ``("expand_row", row, n)``, ``("flat", start,
    stop)``, ``("t",)``, ``("view", dtype)``. Buffer 0 and 1 are two separate ``rows x cols`` tensors.
    """
    rows, cols, dtype = recipe["rows"], recipe["cols"], recipe["dtype"]
    buffers = [torch.arange(rows * cols, dtype=torch.float64).reshape(rows, cols).to(dtype) + i for i in range(2)]

    def view(spec):
        index, steps = spec
        t = buffers[index]
        for step in steps:
            kind, args = step[0], step[1:]
            if kind == "rows":
                t = t[args[0]:args[1]:args[2]]
            elif kind == "cols":
                t = t[:, args[0]:args[1]:args[2]]
            elif kind == "expand_row":
                t = t[args[0]:args[0] + 1].expand(args[1], t.shape[-1])
            elif kind == "flat":
                t = t.reshape(-1)[args[0]:args[1]]
            elif kind == "t":
                t = t.t()
            elif kind == "view":
                t = t.view(args[0])
            else:
                raise ValueError(f"unknown step {kind!r}")
        return t

    return view(recipe["a"]), view(recipe["b"])
