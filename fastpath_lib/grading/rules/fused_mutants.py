"""Exercise 12's ops under test: in-place fused residual-add + RMSNorm, correct by several routes or broken in one way.

Every op here has the in-place form's signature, ``op_(x, residual, weight=None, eps=None) -> (x, residual)``, and
follows :func:`fastpath_lib.fused.reference.native_` (the contract) except for one seeded fault. Each broken op is
the composite's steps with one of them changed, so it differs from the composite only on the kind of call its
category names: the same checks and exceptions before any write, the same results on separate buffers, the same
return. The faults, by graded category (never named to a learner while one survives):

* *writes*: the sum written into ``x`` and the output into ``residual``; ``x`` left alone;
* *returns*: copies returned instead of the caller's own ``x`` and ``residual`` (the same values);
* *aliasing*: results written ``x`` first and the residual re-read afterwards; results written ``x`` first (both
  right unless the two share memory: an aliased buffer ends holding the sum, not the output); one row after another on
  the live buffers (right when x is residual, wrong only on views whose rows are shifted, ``x = b[1:]``,
  ``residual = b[:-1]``); ``x`` first only when x is residual (partial overlap sent to the composite): each regime of
  shared memory has an op only it shows;
* *declared_mutation*: a ``torch.library`` custom op declared ``mutates_args=()`` that writes anyway: the composite
  in eager mode, wrong under ``torch.compile`` (functionalization trusts the schema and the write is lost);
* *residual_rounding*: the new residual rounded through the weight's dtype before x's; the new residual rounded
  toward zero instead of to nearest (one unit in the last place at most); both hidden within the output's tolerance
  (an element they would move further is the composite's); and the residual one unit in the last place toward zero
  only where that is at most 2**-10 of its value (fp16 and fp32 inputs), hidden from any comparison with
  ``rtol >= 1e-3``: only a bit-for-bit comparison sees them;
* *variance*: the mean square taken from the rounded residual instead of the fp32 sum, hidden within the output's
  tolerance (an element it would move further is the composite's): only an input whose exact answer is known shows it;
* *raises_cleanly*: a call that raises writes the sum into ``residual`` first (the same exception as the composite's).

Correct controls: the kit's op (the check cell's argument), the composite itself, and another route (``1/sqrt`` of
the sum of squares over the width, both results computed before any write) that differs from the composite in the
output's last bits, within the contract's tolerance.

The grader runs these ops in its own process (:class:`fastpath_lib.grading.checks.ex12_inplace.OpServer`); the learner's
kernel never holds them. :func:`build_pair` builds exercise 12's overlap cases from plain recipes.
"""

from __future__ import annotations

import itertools
import numbers

import torch

from fastpath_lib.fused import reference
from fastpath_lib.fused.reference import native, native_
from fastpath_lib.rmsnorm.limits import default_eps

__all__ = ["CORRECT", "BROKEN", "variants", "impls", "compiled", "Op", "build_pair"]


def _eps(x, eps):
    return default_eps(x.dtype) if eps is None else float(eps)


def _composite(x, residual, weight, eps):
    return native_(x, residual, weight, eps)


def _checked(x, residual, weight, results=None) -> None:
    """The composite's checks before its first write (``check_inplace``): every broken op runs them as the composite
    does, but the one whose fault is a write before raising, so a call that must raise tells no other op apart."""
    if results is None:
        reference.check_inplace(x, residual, weight)
    else:
        reference.check_inplace(x, residual, weight, results=results)


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


# --- the broken ops: the composite's steps, one of them changed -------------------------------------------------------
#
# Each broken op is :func:`_inplace` with one step replaced: the same checks in the same order, the same results on
# separate buffers but where its category says, the same writes, the same return. So a test earns a category only
# by the kind of call that category names (a call that raises cannot catch a wrong write; a call on separate buffers
# cannot catch a fault of aliased ones).

def _results(x, residual, weight, eps):
    return native(x, residual, weight, eps)


def _write(x, residual, out, new):
    residual.copy_(new)
    x.copy_(out)


def _own(x, residual):
    return x, residual


def _inplace(x, residual, weight, eps, *, results=_results, write=_write, give=_own):
    """The composite (:func:`fastpath_lib.fused.reference.native_`), step by step: check, compute both results,
    check where they go, ``write(x, residual, out, new)``, return ``give(x, residual)``."""
    _checked(x, residual, weight)
    out, new = results(x, residual, weight, eps)
    _checked(x, residual, weight, (out, new))
    write(x, residual, out, new)
    return give(x, residual)


def _swapped(x, residual, weight, eps):
    def write(x, residual, out, new):
        residual.copy_(out)
        x.copy_(new)
    return _inplace(x, residual, weight, eps, write=write)


def _x_untouched(x, residual, weight, eps):
    def write(x, residual, out, new):
        residual.copy_(new)  # the output is computed and dropped: x keeps its old values
    return _inplace(x, residual, weight, eps, write=write)


def _returns_copies(x, residual, weight, eps):
    return _inplace(x, residual, weight, eps, give=lambda x, residual: (x.clone(), residual.clone()))


def _rereads_residual(x, residual, weight, eps):
    def write(x_, residual_, out, new):
        x_.copy_(out)
        residual_.copy_((xf + residual_.float()).to(x_.dtype))  # reads residual after x was written
    xf = x.to(torch.float32, copy=True)
    return _inplace(x, residual, weight, eps, write=write)


def _writes_x_first(x, residual, weight, eps):
    def write(x, residual, out, new):
        x.copy_(out)
        residual.copy_(new)
    return _inplace(x, residual, weight, eps, write=write)


def _rows_in_order(x, residual, weight, eps):
    """One row after another on the live buffers, each row read, normalized and written before the next row is read
    (a kernel with one program per row whose programs run in order, as Triton's interpreter runs them). Right on
    separate buffers and when x is residual (a row reads only itself); wrong where a row of ``x`` is another row of
    ``residual`` (``x = b[1:]``, ``residual = b[:-1]``): the next row reads a row already written. Eager calls only:
    under ``torch.compile`` it is the composite (:func:`compiled`; a traced loop over rows costs seconds a compile)."""
    if torch.compiler.is_compiling():
        return _inplace(x, residual, weight, eps)

    def write(x, residual, out, new):
        for row in itertools.product(*map(range, x.shape[:-1])):
            row_out, row_new = native(x[row], residual[row], weight, eps)  # from what the buffers hold now
            residual[row].copy_(row_new)
            x[row].copy_(row_out)
    return _inplace(x, residual, weight, eps, write=write)


def _x_first_when_same(x, residual, weight, eps):
    """Partial overlap sent to the composite and one memory taken as safe (torch's own in-place ops accept an input
    that is exactly the output and refuse a partial overlap), where a fast path writes ``x`` first: right on separate
    buffers and on partially overlapping views, wrong when x is residual (the memory ends holding the sum)."""
    def write(x, residual, out, new):
        same = x is residual if torch.compiler.is_compiling() else (  # a traced graph compares no data pointers
            (x.data_ptr(), x.stride()) == (residual.data_ptr(), residual.stride()))
        for t, value in ((x, out), (residual, new)) if same else ((residual, new), (x, out)):
            t.copy_(value)
    return _inplace(x, residual, weight, eps, write=write)


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
    """The composite in eager mode (a custom op's own dispatch differs there: autograd, vmap, messages); under
    ``torch.compile``, the custom op whose schema declares no write, which the compiled graph drops."""
    if not torch.compiler.is_compiling():
        return _inplace(x, residual, weight, eps)
    _undeclared_op()(x, residual, weight, None if eps is None else float(eps))
    return x, residual


def _within_tolerance(got: torch.Tensor, want: torch.Tensor) -> torch.Tensor:
    """``got`` where it is within the contract's output tolerance of ``want``, ``want`` elsewhere: a rounding fault
    that no comparison within tolerance can see (a correct route may differ from the composite that much)."""
    atol, rtol = reference.tolerance(want.dtype)
    hidden = (got.double() - want.double()).abs() <= atol + rtol * want.double().abs()
    return torch.where(hidden, got, want)


def _residual_via_weight_dtype(x, residual, weight, eps):
    def results(x, residual, weight, eps):
        out, new = native(x, residual, weight, eps)
        s = x.float() + residual.float()
        return out, _within_tolerance((s.to(weight.dtype) if weight is not None else s).to(x.dtype), new)
    return _inplace(x, residual, weight, eps, results=results)


def _toward_zero(wide: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``wide`` rounded to ``dtype`` toward zero (Triton's ``fp_downcast_rounding="rtz"``), not to nearest."""
    near = wide.to(dtype)
    bits = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float32: torch.int32}.get(dtype)
    if bits is None:
        return near
    away = near.to(wide.dtype).abs() > wide.abs()  # rounded away from zero: one step back toward it
    stepped = (near.view(bits) - 1).view(dtype)
    return torch.where(away & torch.isfinite(near) & (near != 0), stepped, near)


def _residual_toward_zero(x, residual, weight, eps):
    def results(x, residual, weight, eps):
        out, _ = native(x, residual, weight, eps)
        wide = x.double() + residual.double()  # the exact sum (what an fp32 addition rounds to nearest)
        return out, _toward_zero(wide, x.dtype)
    return _inplace(x, residual, weight, eps, results=results)


#: The largest relative step :func:`_residual_one_ulp_hidden` takes: fp16's unit in the last place relative to 1, so
#: every fp16 (and fp32) element and no bf16 element; below ``rtol=1e-3`` (ad hoc, or torch.testing's fp16 default).
HIDDEN_STEP = 2 ** -10


def _residual_one_ulp_hidden(x, residual, weight, eps):
    """The new residual rounded toward zero where that is one step of at most :data:`HIDDEN_STEP` of its value (the
    composite's elsewhere), the output exact: a comparison within any tolerance of ``rtol >= 1e-3`` (``allclose``,
    ``assert_close``, the output's tolerance) passes it; only the residual compared bit for bit catches it."""
    def results(x, residual, weight, eps):
        out, new = native(x, residual, weight, eps)
        low = _toward_zero(x.double() + residual.double(), x.dtype)
        step = (low.double() - new.double()).abs()
        return out, torch.where(step <= HIDDEN_STEP * new.double().abs(), low, new)
    return _inplace(x, residual, weight, eps, results=results)


def _variance_of_rounded(x, residual, weight, eps):
    """The mean square of the rounded residual. Where that moves an output element beyond the contract's tolerance
    the element is the composite's: the fault shows only bit for bit, on an input whose exact answer is known, never to
    a comparison within tolerance on ordinary inputs (which a correct route may differ by)."""
    def results(x, residual, weight, eps):
        want, new = native(x, residual, weight, eps)
        s = x.float() + residual.float()
        n = s * torch.rsqrt(new.float().pow(2).mean(-1, keepdim=True) + _eps(x, eps))
        out = (n.to(weight.dtype) * weight if weight is not None else n).to(x.dtype)
        return _within_tolerance(out, want), new
    return _inplace(x, residual, weight, eps, results=results)


def _writes_before_raising(x, residual, weight, eps):
    """The composite, but a call that raises writes the sum into ``residual`` first (where it can): same checks, same
    exception, same results on every call that does not raise."""
    try:
        _checked(x, residual, weight)
        out, new = native(x, residual, weight, eps)
        _checked(x, residual, weight, (out, new))
    except Exception:
        try:
            with torch.no_grad():
                residual.copy_((x.float() + residual.float()).to(x.dtype))
        except Exception:  # noqa: BLE001, S110 - where even that write cannot happen, the op raises as the composite
            pass
        raise
    _write(x, residual, out, new)
    return x, residual


#: The correct controls besides the kit's op.
CORRECT = {"composite": _composite, "other_route": _other_route}
#: category -> the broken ops of that category, in the order the grader's feedback lists categories.
BROKEN = {
    "writes": (_swapped, _x_untouched),
    "returns": (_returns_copies,),
    "aliasing": (_rereads_residual, _writes_x_first, _rows_in_order, _x_first_when_same),
    "declared_mutation": (_undeclared,),
    "residual_rounding": (_residual_via_weight_dtype, _residual_toward_zero, _residual_one_ulp_hidden),
    "variance": (_variance_of_rounded,),
    "raises_cleanly": (_writes_before_raising,),
}


def compiled(impl):
    """What a ``torch.compile`` graph of ``impl`` runs (``None``: nothing, the write dropped): the grader answers a
    compiled call of the stub with it, as :class:`Op` under ``torch.compile`` runs."""
    for fn, graph in ((_undeclared, None), (_rows_in_order, _composite)):
        if impl is fn:
            return graph
    return impl


def variants() -> list[str]:
    """Every op a run uses: ``kit``, the :data:`CORRECT` names and ``category:index`` for each broken op."""
    return ["kit", *CORRECT] + [f"{c}:{i}" for c, fns in BROKEN.items() for i in range(len(fns))]


def impls() -> dict:
    """variant -> implementation (``kit`` is not here: it is the check cell's own argument). The undeclared custom op
    is registered here, before any call: a compiled graph cannot register it, and an op that raises under
    ``torch.compile`` would be caught by any test that compiles, whatever it checks."""
    _undeclared_op()
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
