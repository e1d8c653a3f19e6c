"""Exercise 09: contract-parity tests, graded by the ops they must pass and the broken ops they must catch.

``my_contract_tests(op)`` runs the learner's checks against ``op`` (an op with ``F.rms_norm``'s signature) and
raises on the first broken promise. It is run against two correct ops, the kit's op and ``F.rms_norm`` itself (it
must return normally on both), and against contract-breaking ops the grader builds around ``F.rms_norm`` (each must
make it raise). Every op reaches the learner's code as the same kind of wrapper, so an answer that recognises the
correct ops by identity or name gains nothing. One graded part per promise category; feedback says which categories
still have a broken op that slipped through, never which op or which input would catch it. Catching counts only when
both correct ops pass, and a function that never fails scores nothing.

In the grader (``python -m fastpath_lib grade``) the ops run in the grader's process, never in the learner's kernel:
each run hands the tests a fresh stub of the same source (:mod:`fastpath_lib.grading.runner`) whose every call, and
the backward and forward-mode derivative of a differentiable call, is answered here by that run's op
(:class:`OpServer`, :meth:`fastpath_lib.grading.remote.Session.run_tests`). Each correct op runs twice, all runs in
an order drawn at grading time; the kernel holds no table of ops, sees no op's code and learns only what the calls
return, write and raise. Tests that read the op's attributes, code or identity (:func:`inspection`) score nothing.
The stub has first derivatives only (its backward and jvp are not themselves differentiable).

Note:
    In a notebook (advisory feedback) this is a guard, not a sandbox: code that digs into the wrapper's private
    attributes can tell the ops apart.
"""

from __future__ import annotations

import inspect
import random

import torch
import torch.nn.functional as F

from fastpath_lib.grading import borrowed, remote, sources
from fastpath_lib.grading.feedback import Fail, describe_error, graded
from fastpath_lib.grading.registry import Result, points_of

__all__ = ["check_contract_tests", "CATEGORIES", "variants", "inspection", "OpServer", "remote_outcomes",
           "run_order", "first_errors", "broken_op_results"]

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
    "exceptions": "an op that raises where F.rms_norm raises something else, or raises where F.rms_norm does not",
}
_GRADER = borrowed.kit("grading", why="that is the grader's own machinery") + borrowed.kit(
    "rmsnorm/op.py", "rms_norm", why="compare with F.rms_norm, the owner of the contract, not with the kit's op")
#: The op under test, and the parts of the broken ops that autograd calls after the op returned.
_GIVEN = borrowed.kit("grading/ex09_contract.py", "_Op.__call__", "_ZeroTangent.backward", "_ZeroTangent.jvp",
                      "_noisy_backward.<locals>.<lambda>", why="the op under test")


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
    """Forward and backward right, forward-mode derivative zero (what a custom op without a jvp rule used to give)."""

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
        if not isinstance(x, torch.Tensor) or isinstance(ns, int):
            return F.rms_norm(x, ns, w, eps)
        return fn.apply(x, tuple(ns), w, eps)
    return impl


def _new_error_type(x, ns, w, eps):
    if isinstance(x, torch.Tensor) and not isinstance(ns, int) and tuple(x.shape[x.dim() - len(ns):]) != tuple(ns):
        raise ValueError(f"normalized_shape {list(ns)} does not match the input")
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
    "exceptions": (_new_error_type, _raises_outside_region),
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


def run_order(runs: list[str]) -> list[str]:
    """``runs`` in an order drawn now (the kernel cannot predict which op a run faces)."""
    order = list(runs)
    random.SystemRandom().shuffle(order)
    return order


def remote_outcomes(tests, stub: str, servers: dict, runs: list[str]) -> dict[str, list]:
    """Run the learner's ``tests`` in their kernel once per entry of ``runs`` (variant names, in an order drawn now),
    each on a fresh stub ``stub`` whose calls ``servers[variant]()`` answers here; returns variant -> the errors of
    its runs (``None``: the tests passed)."""
    out: dict[str, list] = {}
    for variant in run_order(runs):
        out.setdefault(variant, []).append(remote.session(tests).run_tests(tests, stub, servers[variant]()))
    return out


#: What a test that inspects the op instead of calling it reads (attributes, and names of modules or builtins).
_INSPECTING_ATTRS = frozenset({"__closure__", "__code__", "__globals__", "__wrapped__", "__self__", "__func__",
                               "__dict__", "__qualname__", "__module__", "cell_contents", "__defaults__",
                               "__kwdefaults__", "__reduce__", "__reduce_ex__", "__getstate__", "__slots__",
                               "__class__", "f_locals", "f_globals", "f_back", "co_code", "co_consts", "co_name"})
_INSPECTING_NAMES = frozenset({"inspect", "gc", "dis", "id", "vars", "dir", "ctypes", "sys._getframe"})


def inspection(source: str) -> str | None:
    """What in ``source`` (the code a learner's tests reach) inspects an object instead of calling it, or ``None``.

    >>> inspection("def t(op):\\n    assert op.__name__ == 'rms_norm'")
    'op.__name__'
    >>> inspection("def t(op):\\n    print(type(op(1)).__name__)")
    """
    import ast

    for tree in filter(None, (sources.parse(source),)):
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and (node.attr in _INSPECTING_ATTRS or (
                    node.attr.startswith("_") and not node.attr.startswith("__")) or (
                    node.attr == "__name__" and isinstance(node.value, ast.Name))):
                return f"{ast.unparse(node)}"
            if isinstance(node, (ast.Name, ast.Attribute)) and ast.unparse(node) in _INSPECTING_NAMES:
                return ast.unparse(node)
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                mods = [a.name for a in node.names] + [node.module or ""] if isinstance(node, ast.ImportFrom) \
                    else [a.name for a in node.names]
                if any(m.split(".")[0] in _INSPECTING_NAMES for m in mods):
                    return f"import {', '.join(mods)}"
    return None


def _remote_outcomes(tests, kit_op) -> dict[str, list[BaseException | None]]:
    """Variant -> what the learner's tests raised on each run of it, the runs in an order drawn now."""
    kit_op = _kit_op_given(kit_op)
    borrowed.reject_handed_back(tests, _GRADER, _GIVEN)
    seen = inspection(sources.closure_source(remote.root(tests)))
    if seen:
        raise Fail(f"your tests read {seen}: a contract test calls the op and checks what it returns or raises, "
                   f"it does not inspect the op")
    impls = {"kit": remote.session(tests).kit_op("rms_norm"), "torch": F.rms_norm} | {
        f"{c}:{i}": fn for c, fns in BROKEN.items() for i, fn in enumerate(fns)}
    servers = {v: (lambda impl=impls[v]: OpServer(impl)) for v in impls}
    return remote_outcomes(tests, "rms_norm", servers, variants() + ["kit", "torch"])


def first_errors(outcomes: dict[str, list]):
    """``first(variant)`` over :func:`shuffled_outcomes`'s answer: the first error the tests raised on any run of the
    variant (``None``: they passed on every run), what :func:`broken_op_results` takes."""
    def first(variant):
        return next((e for e in outcomes.get(variant, [None]) if e is not None), None)
    return first


def broken_op_results(exercise: str, first, controls, broken: dict[str, int], what: dict[str, str],
                      passing: str) -> list[Result]:
    """The parts of tests graded by broken ops: ``passes_correct_ops``, then one per category of ``broken``
    (category -> how many broken ops, run as ``"category:i"``). ``first(variant)`` is the first error the tests
    raised on that variant (``None``: they passed); ``controls`` are ``(label, variant)`` of correct ops. No point
    while the tests fail a correct op, or while they pass on every op."""
    def result(name: str, ok: bool, text: str) -> Result:
        return Result(exercise, name, points_of(exercise, name), ok, text)

    alarms = []
    for label, variant in controls:
        exc = first(variant)
        if exc is not None and "not implemented" in describe_error(exc):
            raise exc
        if exc is not None:
            alarms.append(f"on {label}: {describe_error(exc)}")
    if alarms:
        why = "no credit while your tests fail on an op that keeps every promise (see passes_correct_ops): a test " \
              "that fails everything catches nothing"
        return [result("passes_correct_ops", False, "your tests fail on a correct op (one that keeps every promise)\n"
                       + "\n".join(alarms))] + [result(c, False, why) for c in broken]
    alive = {c: sum(first(f"{c}:{i}") is None for i in range(n)) for c, n in broken.items()}
    if all(alive[c] == n for c, n in broken.items()):
        why = "your tests pass on every op, broken ones included: they check nothing yet"
        return [result(n, False, why) for n in ("passes_correct_ops", *broken)]
    return [result("passes_correct_ops", True, passing)] + [
        result(c, True, "caught every broken op of this category") if not alive[c]
        else result(c, False, f"survivors: {what[c]}") for c in broken]


def _grade(tests, kit_op) -> list[Result]:
    if remote.is_proxy(tests):
        first = first_errors(_remote_outcomes(tests, kit_op))
    else:
        kit_op = _kit_op_given(kit_op)
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
