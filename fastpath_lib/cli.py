"""``selftest`` and ``explain`` subcommands."""

from __future__ import annotations

import argparse

import torch

from fastpath_lib.cases import LAYOUTS, CaseSpec

_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "fp64": torch.float64}


def selftest_main(argv: list[str]) -> int:
    argparse.ArgumentParser(prog="python -m fastpath_lib selftest", description=(
        "Check Triton here: the kit's own kernels (RMSNorm's, forward and backward) against torch. An op of your own "
        "is checked by its generated boundary tests (fastpath_lib.boundary.boundary_tests).")).parse_args(argv)
    from fastpath_lib import runtime, selftest

    print(runtime.describe())
    res = selftest.run()
    print(res)
    return 0 if res.ok else 1


def explain_main(argv: list[str]) -> int:
    """``explain [--op REF] [--rows N] [--cols N] [--dtype D] [--layout L] [--offset N] [--no-weight]``: the route and
    the predicate's reasons for one case. Without ``--op``, a case of the default op (RMSNorm: 16x64 fp32 with a
    weight unless told); with ``--op NAME`` or ``--op module:SPEC``, a case of that op's case class
    (``OpSpec.case_spec``) built from its eligible base case (``boundary_base``) with the fields given here changed,
    decided by its predicate on its context. Exit 2 on an op or a field the command cannot use."""
    ap = argparse.ArgumentParser(prog="python -m fastpath_lib explain", description="Route and reasons for a case.")
    ap.add_argument("--op", default=None, help="a registered op, or MODULE:ATTRIBUTE naming an OpSpec (default: the "
                                               "default op)")
    ap.add_argument("--rows", type=int, default=None, help="default 16, or the op's base case")
    ap.add_argument("--cols", type=int, default=None, help="default 64, or the op's base case")
    ap.add_argument("--dtype", choices=sorted(_DTYPES), default=None, help="default fp32, or the op's base case")
    ap.add_argument("--layout", choices=LAYOUTS, default=None)
    ap.add_argument("--offset", type=int, default=None, help="elements between buffer start and input")
    ap.add_argument("--no-weight", action="store_true", help="a case without a weight (a case class with `weight`)")
    args = ap.parse_args(argv)
    given = {k: v for k, v in (("rows", args.rows), ("cols", args.cols), ("layout", args.layout),
                               ("offset", args.offset)) if v is not None}
    if args.dtype is not None:
        given["dtype"] = _DTYPES[args.dtype]
    if args.no_weight:
        given["weight"] = None
    if args.op is None:
        import fastpath_lib

        spec = CaseSpec(**{"rows": 16, "cols": 64, **given})
        print(spec.label())
        print(fastpath_lib.explain(*spec.build().args()))
        return 0
    return _explain_op(args.op, given)


def _explain_op(ref: str, given: dict) -> int:
    import sys

    from fastpath_lib import opspec

    def fail(msg: str) -> int:
        print(f"error: --op {ref}: {msg}", file=sys.stderr)
        return 2

    try:
        op = opspec.load(ref)
    except (ImportError, AttributeError, KeyError, ValueError, TypeError) as exc:
        return fail(str(exc))
    make = op.case_spec or CaseSpec
    try:
        case = make(**{**(op.boundary_base or {}), **given})
        call = op.args(case.build())
    except (TypeError, ValueError) as exc:
        return fail(f"its case class {make.__name__} cannot build this case ({exc})")
    print(case.label() if hasattr(case, "label") else case)
    if op.predicate is None or op.context is None:
        print(f"route: {op.route(*call)} (the spec declares no predicate and context: no reasons to give)")
        return 0
    print(op.predicate.evaluate(op.context(*call)))
    return 0
