"""Exercise 09: contract-parity tests, graded by the ops they must pass and the broken ops they must catch.

``my_contract_tests(op)`` runs the learner's checks against ``op`` (an op with ``F.rms_norm``'s signature) and
raises on the first broken promise. It is run against two correct ops, the kit's op and ``F.rms_norm`` itself (it
must return normally on both), and against contract-breaking ops the grader builds around ``F.rms_norm`` (each must
make it raise). Every op reaches the learner's code as the same kind of wrapper, so an answer that recognises the
correct ops by identity or name gains nothing. One graded part per promise category; feedback says which categories
still have a broken op that slipped through, never which op or which input would catch it. Catching counts only when
both correct ops pass, and a function that never fails scores nothing.

In the grader (``python -m fastpath_lib grade``) the ops run in the grader's process, never in the learner's kernel:
each run hands the tests a fresh stub of the same source (:mod:`~fastpath_lib.grading.engine.runner_stubs`) whose
every call, and the backward and forward-mode derivative of a differentiable call, is answered here by that run's op
(:class:`OpServer`, :meth:`fastpath_lib.grading.engine.remote.Session.run_tests`). Each correct op runs twice, all runs
in an order drawn at grading time; the kernel holds no table of ops, sees no op's code and learns only what the calls
return, write and raise. Tests that read the op's attributes, code or identity (:func:`inspection`) score nothing,
in the notebook's check as in the grader.
The stub has first derivatives only (its backward and jvp are not themselves differentiable).

Note:
    In a notebook (advisory feedback) this is a guard, not a sandbox: code that digs into the wrapper's private
    attributes can tell the ops apart.
"""

from __future__ import annotations

import inspect
import numbers

import torch
import torch.nn.functional as F

from fastpath_lib.grading.engine import remote, sources
from fastpath_lib.grading.registry import Result
from fastpath_lib.grading.report.feedback import Fail, graded
from fastpath_lib.grading.rules import borrowed
from fastpath_lib.grading.rules.mutation import (INSPECTS, broken_op_results, first_errors, inspection,
                                                 inspection_stated, remote_outcomes)

__all__ = ["check_contract_tests", "CATEGORIES", "variants", "OpServer", "BROKEN", "STATED"]

#: The wording of the rules this check refuses tests by (besides forbidden calls): the exercise states each
#: (``tests/course/test_exercise_instructions.py``).
STATED = inspection_stated()

#: The promise categories, one graded part each (after ``passes_correct_ops``).
CATEGORIES = ("dtype", "layout", "aliasing", "eps", "autograd", "forward_ad", "exceptions")
_PARTS = ("passes_correct_ops",) + CATEGORIES
_WHAT = {
    "dtype": "an op whose output dtype differs from F.rms_norm's for some input dtype",
    "layout": "an op whose output strides differ from F.rms_norm's for some input layout",
    "aliasing": "an op whose output shares memory with, or writes into, its input",
    "eps": "an op that uses another eps than F.rms_norm (the default, or one passed explicitly)",
    "autograd": "an op whose gradients (for the input or the weight) differ from F.rms_norm's",
    "forward_ad": "an op whose forward-mode derivative (torch.func.jvp, dual tensors) differs from F.rms_norm's",
    "exceptions": "an op that raises where F.rms_norm raises something else (another type, or the same type with "
                  "another message), or raises where F.rms_norm does not: for each argument a caller can get wrong, "
                  "compare the type and the message side by side with F.rms_norm's",
}
_GRADER = borrowed.kit("grading", why="that is the grader's own machinery") + borrowed.kit(
    "rmsnorm/op.py", "rms_norm", why="compare with F.rms_norm, the owner of the contract, not with the kit's op")
#: The op under test, and the parts of the broken ops that autograd calls after the op returned.
_GIVEN = borrowed.given("grading/checks/ex09_contract.py", "_Op.__call__", "_ZeroTangent.backward",
                        "_ZeroTangent.jvp", "_noisy_backward.<locals>.<lambda>", why="the op under test")


class _Op:
    """The op handed to the learner's tests: every op, correct or broken, looks the same from outside."""

    __slots__ = ("_impl",)
    __name__ = "op"

    def __init__(self, impl):
        self._impl = impl

    def __call__(self, input, normalized_shape, weight=None, eps=None):
        return self._impl(input, normalized_shape, weight, eps)

    def __repr__(self) -> str:
        return "<op under test>"


def _low(x) -> bool:
    return isinstance(x, torch.Tensor) and x.dtype in (torch.float16, torch.bfloat16)


def _fp32_out(x, ns, w, eps):
    if _low(x):
        return F.rms_norm(x.float(), ns, None if w is None else w.float(), eps)
    return F.rms_norm(x, ns, w, eps)


def _contiguous_out(x, ns, w, eps):
    return F.rms_norm(x, ns, w, eps).contiguous()


def _in_place(x, ns, w, eps):
    y = F.rms_norm(x, ns, w, eps)
    if isinstance(x, torch.Tensor) and not x.requires_grad and y.shape == x.shape and y.dtype == x.dtype:
        with torch.no_grad():
            x.copy_(y)
        return x
    return y


def _eps_1e5(x, ns, w, eps):
    return F.rms_norm(x, ns, w, 1e-5 if eps is None else eps)


def _eps_own_dtype(x, ns, w, eps):
    return F.rms_norm(x, ns, w, torch.finfo(x.dtype).eps if eps is None and _low(x) else eps)


def _eps_zero_is_default(x, ns, w, eps):
    return F.rms_norm(x, ns, w, eps or None)


def _weight_detached(x, ns, w, eps):
    return F.rms_norm(x, ns, None if w is None else w.detach(), eps)


def _noisy_backward(x, ns, w, eps):
    y = F.rms_norm(x, ns, w, eps)
    if y.requires_grad:
        y.register_hook(lambda g: g * (1 + 0.05 * torch.randn_like(g)))
    return y


class _ZeroTangent(torch.autograd.Function):
    """Forward and backward right, forward-mode derivative zero (the silent failure a parity test of the
    forward-mode derivative must catch)."""

    @staticmethod
    def forward(x, ns, w, eps):
        return F.rms_norm(x, ns, w, eps)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, ns, w, eps = inputs
        ctx.save_for_backward(x, w)
        ctx.ns, ctx.eps = ns, eps

    @staticmethod
    def backward(ctx, dy):
        x, w = ctx.saved_tensors
        with torch.enable_grad():
            xx = x.detach().requires_grad_()
            ww = None if w is None else w.detach().requires_grad_()
            y = F.rms_norm(xx, ctx.ns, ww, ctx.eps)
            got = torch.autograd.grad(y, [t for t in (xx, ww) if t is not None], dy)
        return got[0], None, (got[1] if w is not None else None), None

    @staticmethod
    def jvp(ctx, x_t, ns_t, w_t, eps_t):
        return torch.zeros_like(x_t)


class _NoJvp(_ZeroTangent):
    """Forward and backward right; forward-mode AD raises (no jvp rule)."""

    jvp = torch.autograd.Function.jvp


def _function_op(fn):
    def impl(x, ns, w, eps):
        if not isinstance(x, torch.Tensor) or isinstance(ns, numbers.Integral):
            return F.rms_norm(x, ns, w, eps)
        return fn.apply(x, tuple(ns), w, eps)
    return impl


def _new_error_type(x, ns, w, eps):
    if (isinstance(x, torch.Tensor) and not isinstance(ns, numbers.Integral)
            and tuple(x.shape[x.dim() - len(ns):]) != tuple(ns)):
        raise ValueError(f"normalized_shape {list(ns)} does not match the input")
    return F.rms_norm(x, ns, w, eps)


def _own_message(x, ns, w, eps):
    """The type F.rms_norm raises for a weight of the wrong shape, with a message of its own."""
    if isinstance(w, torch.Tensor) and not isinstance(ns, numbers.Integral) and tuple(w.shape) != tuple(ns):
        raise RuntimeError(f"weight must have shape {list(ns)}")
    return F.rms_norm(x, ns, w, eps)


def _raises_outside_region(x, ns, w, eps):
    if isinstance(x, torch.Tensor) and x.dtype == torch.float64:
        raise TypeError("fast path: float64 is not supported")
    return F.rms_norm(x, ns, w, eps)


#: category -> the broken ops of that category (never named to the learner).
BROKEN = {
    "dtype": (_fp32_out,),
    "layout": (_contiguous_out,),
    "aliasing": (_in_place,),
    "eps": (_eps_1e5, _eps_own_dtype, _eps_zero_is_default),
    "autograd": (_weight_detached, _noisy_backward),
    "forward_ad": (_function_op(_ZeroTangent), _function_op(_NoJvp)),
    "exceptions": (_new_error_type, _own_message, _raises_outside_region),
}


def _kit_op_given(kit_op):
    if remote.is_proxy(kit_op):
        code = borrowed.code_of(kit_op)
    else:
        code = getattr(inspect.unwrap(kit_op), "__code__", None) if callable(kit_op) else None
    if code is None or not borrowed.KIT_OP.names(code):
        raise Fail("the check's second argument must be the kit's op, fastpath_lib.rms_norm (as in the check cell)")
    return kit_op


def _run(tests, impl) -> BaseException | None:
    """What the learner's tests raised on the op built from ``impl`` (``None``: they passed)."""
    try:
        borrowed.run(tests, (_Op(impl),), _GRADER, allow_none=True, given=_GIVEN)
    except Fail:
        raise
    except Exception as exc:  # noqa: BLE001 - a failing test is what we look for
        return exc
    return None


def variants() -> list[str]:
    """Every op a run uses: the two correct ones (``kit``, ``torch``) and ``category:index`` for each broken op."""
    return ["kit", "torch"] + [f"{c}:{i}" for c, fns in BROKEN.items() for i in range(len(fns))]


class OpServer:
    """One run's op under test, in the grader: what the kernel's stub asks (a call, or the forward, backward and jvp
    of a differentiable call) answered by ``impl`` on the grader's own tensors."""

    def __init__(self, impl):
        self.op, self.calls = _Op(impl), []

    def __call__(self, message: dict) -> dict:
        return remote.serve_op(message, self._run)

    def _run(self, kind, args, message):
        if kind == "call":
            return self.op(*args)
        if kind == "forward":
            x, ns, w, eps = args
            grads = list(message.get("grads") or ()) + [False, False]
            x = x.detach().requires_grad_(bool(grads[0]))
            w = None if w is None else w.detach().requires_grad_(bool(grads[1]))
            with torch.enable_grad():
                y = self.op(x, ns, w, eps)
            self.calls.append((x, ns, w, eps, y))
            return y.detach(), {"id": len(self.calls) - 1}
        x, ns, w, eps, y = self.calls[int(message.get("call"))]
        if kind == "backward":
            wrt = [t for t in (x, w) if t is not None and t.requires_grad]
            got = iter(torch.autograd.grad(y, wrt, args[0], allow_unused=True))
            return [next(got) if t is not None and t.requires_grad else None for t in (x, w)]
        if kind == "jvp":
            x_t, w_t = args
            primals = (x.detach(),) + (() if w is None else (w.detach(),))
            tangents = (torch.zeros_like(x) if x_t is None else x_t,) + (
                () if w is None else (torch.zeros_like(w) if w_t is None else w_t,))
            return torch.func.jvp(lambda a, *b: self.op(a, ns, b[0] if b else None, eps), primals, tangents)[1]
        raise ValueError(f"unknown call {kind!r}")


def _remote_outcomes(tests, kit_op) -> dict[str, list[BaseException | None]]:
    """Variant -> what the learner's tests raised on each run of it, the runs in an order drawn now."""
    kit_op = _kit_op_given(kit_op)
    borrowed.reject_handed_back(tests, _GRADER, _GIVEN)
    _refuse_inspection(remote.root(tests))
    impls = {"kit": remote.session(tests).kit_op("rms_norm"), "torch": F.rms_norm} | {
        f"{c}:{i}": fn for c, fns in BROKEN.items() for i, fn in enumerate(fns)}
    servers = {v: (lambda impl=impls[v]: OpServer(impl)) for v in impls}
    return remote_outcomes(tests, "rms_norm", servers, variants() + ["kit", "torch"])


def _refuse_inspection(root: str) -> None:
    """:class:`Fail` when the tests named ``root`` inspect the op (:func:`inspection`), in the notebook as in the
    grader."""
    seen = inspection(sources.closure_source(root)) if root else None
    if seen:
        raise Fail(f"your tests read {seen}: {INSPECTS}")


def _grade(tests, kit_op) -> list[Result]:
    if remote.is_proxy(tests):
        first = first_errors(_remote_outcomes(tests, kit_op))
    else:
        kit_op = _kit_op_given(kit_op)
        _refuse_inspection(getattr(tests, "__name__", ""))
        impls = {"kit": kit_op, "torch": F.rms_norm} | {f"{c}:{i}": fn for c, fns in BROKEN.items()
                                                         for i, fn in enumerate(fns)}

        def first(variant):
            return _run(tests, impls[variant])
    return broken_op_results("ex09", first, (("the kit's op", "kit"), ("F.rms_norm itself", "torch")),
                             {c: len(BROKEN[c]) for c in CATEGORIES}, _WHAT,
                             "passes on the kit's op and on F.rms_norm, and fails on broken ones")


def check_contract_tests(my_contract_tests, kit_op, *, show: bool = True):
    """``my_contract_tests(op)`` passes on the kit's op and on ``F.rms_norm`` and catches every broken op."""
    return graded("ex09", _PARTS, _grade, my_contract_tests, kit_op, show=show)
