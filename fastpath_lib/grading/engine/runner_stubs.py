"""The ops under test the grader's agent hands the learner's tests (ex09, ex12): stubs whose calls run in the grader.

This text runs in the learner's kernel with :mod:`~fastpath_lib.grading.engine.runner`'s, in one namespace
(:class:`fastpath_lib.grading.engine.remote.Session` executes this one first): the stubs call the agent's ``_op``
(one call of the op under test, answered by the grader), and the agent's ``("tests", fn, stub)`` request calls
:func:`_tests`. Like the agent, it imports nothing of the grader and leaves no module installed.
"""
# ruff: noqa: F821 - _op is the agent's (runner.py), defined in the same namespace when this text runs


def _rms_norm_stub():
    """Exercise 09's op under test: ``F.rms_norm``'s signature; forward, backward and forward-mode derivatives run
    in the grader (first derivatives: the backward and the jvp are not themselves differentiable)."""
    import torch
    from torch.autograd import forward_ad

    last = [None]  # the call id of the latest forward (functorch runs setup_context at each level)

    def tracked(t):
        return isinstance(t, torch.Tensor) and (t.requires_grad or forward_ad.unpack_dual(t).tangent is not None
                                                or torch._C._functorch.is_functorch_wrapped_tensor(t))

    class RemoteRMSNorm(torch.autograd.Function):
        @staticmethod
        def forward(x, w, ns, eps, grads):
            out, call = _op("forward", (x, ns, w, eps), grads=list(grads))
            last[0] = call
            return out

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.call, ctx.grads = last[0], inputs[4]

        @staticmethod
        def backward(ctx, dy):
            (dx, dw), _ = _op("backward", (dy,), call=ctx.call)
            return (dx if ctx.grads[0] else None), (dw if ctx.grads[1] else None), None, None, None

        @staticmethod
        def jvp(ctx, x_t, w_t, ns_t, eps_t, grads_t):
            out, _ = _op("jvp", (x_t, w_t), call=ctx.call)
            return torch.zeros_like(x_t) + out  # on the tangent's own functorch level

    def rms_norm(input, normalized_shape, weight=None, eps=None):
        if isinstance(input, torch.Tensor) and (tracked(input) or tracked(weight)) \
                and (weight is None or isinstance(weight, torch.Tensor)):
            grads = (bool(input.requires_grad), bool(weight is not None and weight.requires_grad))
            return RemoteRMSNorm.apply(input, weight, normalized_shape, eps, grads)
        return _op("call", (input, normalized_shape, weight, eps))[0]

    return rms_norm


def _registered_under_test():
    """Exercise 12's registered op: ``fastpath_grading::op_under_test_``, declared to write ``x`` and ``residual``;
    registered once per kernel, its implementation a call of the grader's op."""
    import torch

    try:
        return torch.ops.fastpath_grading.op_under_test_
    except (AttributeError, RuntimeError):
        pass

    @torch.library.custom_op("fastpath_grading::op_under_test_", mutates_args=("x", "residual"))
    def op_under_test_(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None,
                       eps: float | None) -> None:
        _op("call", (x, residual, weight, eps), compiled=True)

    @op_under_test_.register_fake
    def _(x, residual, weight, eps):
        return None

    return torch.ops.fastpath_grading.op_under_test_


def _fused_stub():
    """Exercise 12's op under test: ``op_(x, residual, weight=None, eps=None) -> (x, residual)``. Eager calls run the
    grader's op; under ``torch.compile`` the call is the registered op (whose schema declares the writes), and the
    grader answers it as the compiled graph would run its op."""
    import torch

    registered = _registered_under_test()

    def fused_add_rms_norm_(x, residual, weight=None, eps=None):
        if torch.compiler.is_compiling():
            registered(x, residual, weight, eps)
            return x, residual
        return _op("call", (x, residual, weight, eps), grad=torch.is_grad_enabled())[0]

    return fused_add_rms_norm_


_STUBS = {"rms_norm": _rms_norm_stub, "fused_add_rms_norm_": _fused_stub}


def _tests(fn, stub):
    """``fn(op)`` on a fresh stub of the op under test: ``None`` when it returned, else ``[type name, message]``."""
    import torch

    op = _STUBS[stub]()
    torch._dynamo.reset()  # each run compiles afresh: no cache, no recompile limit carried between runs
    try:
        fn(op)
        return None
    except Exception as exc:  # noqa: BLE001 - a failing test is an answer
        return [type(exc).__name__, str(exc)[:300]]
