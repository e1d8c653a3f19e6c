"""``selftest`` and ``explain`` subcommands."""

from __future__ import annotations

import argparse

import torch

from fastpath_lib.cases import LAYOUTS, CaseSpec

_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "fp64": torch.float64}


def _dtype(name: str) -> torch.dtype:
    """``--dtype``: the kit's short names (``fp16``, ``bf16``, ``fp32``, ``fp64``) or torch's (``float16``,
    ``bfloat16``, ``torch.float64``, ``half``, ...).

    >>> _dtype("bf16"), _dtype("float64"), _dtype("torch.half")
    (torch.bfloat16, torch.float64, torch.float16)
    """
    if name in _DTYPES:
        return _DTYPES[name]
    got = getattr(torch, name.removeprefix("torch."), None)
    if isinstance(got, torch.dtype):
        return got
    raise argparse.ArgumentTypeError(f"{name!r} is no dtype: use {', '.join(_DTYPES)} or a torch name (float16, "
                                     "bfloat16, float32, float64, ...)")


def _takes_weight(op) -> bool:
    """Whether ``--no-weight`` means anything for ``op`` (``None``: the default op): its case class has a ``weight``
    field and the op's arguments (``OpSpec.args``) pass the weight its base case builds."""
    import dataclasses

    make = CaseSpec if op is None else (op.case_spec or CaseSpec)
    if not (dataclasses.is_dataclass(make) and any(f.name == "weight" for f in dataclasses.fields(make))):
        return False
    if op is None:
        return True
    try:
        built = make(**(op.boundary_base or {})).build(seed=0, device="cpu")
    except Exception:  # noqa: BLE001 - a case this machine cannot build: the option stays, as the class has it
        return True
    weight = getattr(built, "weight", None)
    return isinstance(weight, torch.Tensor) and any(a is weight for a in op.args(built))


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
    the predicate's reasons for one case, with Triton's interpreter opted in off CUDA as ``bench`` does
    (``--no-weight`` only for an op that takes a weight; ``--dtype`` the kit's or torch's names). Without
    ``--op``, a case of the default op (RMSNorm: 16x64 fp32 with a weight unless told); with ``--op NAME`` or ``--op
    module:SPEC``, a case of that op's case class (``OpSpec.case_spec``) built from its eligible base case
    (``boundary_base``) with the fields given here changed, decided by its predicate on its context. Exit 2 on an op
    or a field the command cannot use."""
    first = argparse.ArgumentParser(add_help=False)
    first.add_argument("--op", default=None)
    ref = first.parse_known_args(argv)[0].op
    import os

    from fastpath_lib import runtime

    if runtime.ENV not in os.environ:  # as bench does: off CUDA, Triton's interpreter (unless TRITON_INTERPRET is
        runtime.use_interpreter()  # set), so the route printed is the one a run takes; before the op is imported
    op = None
    if ref is not None:
        from fastpath_lib import opspec

        try:
            op = opspec.load(ref)
        except (ImportError, AttributeError, KeyError, ValueError, TypeError) as exc:
            import sys

            print(f"error: --op {ref}: {exc}", file=sys.stderr)
            return 2
    ap = argparse.ArgumentParser(prog="python -m fastpath_lib explain", description="Route and reasons for a case.")
    ap.add_argument("--op", default=None, help="a registered op, or MODULE:ATTRIBUTE naming an OpSpec (default: the "
                                               "default op)")
    ap.add_argument("--rows", type=int, default=None, help="default 16, or the op's base case")
    ap.add_argument("--cols", type=int, default=None, help="default 64, or the op's base case: the width of the "
                                                           "op's input rows, as its case class builds them")
    ap.add_argument("--dtype", type=_dtype, default=None,
                    help="fp16, bf16, fp32, fp64 or a torch name (float16, bfloat16, ...); default fp32, or the op's "
                         "base case")
    ap.add_argument("--layout", choices=LAYOUTS, default=None)
    ap.add_argument("--offset", type=int, default=None, help="elements between buffer start and input")
    if _takes_weight(op):
        ap.add_argument("--no-weight", action="store_true", help="a case without a weight (the op takes one)")
    args = ap.parse_args(argv)
    given = {k: v for k, v in (("rows", args.rows), ("cols", args.cols), ("layout", args.layout),
                               ("offset", args.offset), ("dtype", args.dtype)) if v is not None}
    if getattr(args, "no_weight", False):
        given["weight"] = None
    if op is None:
        import fastpath_lib

        spec = CaseSpec(**{"rows": 16, "cols": 64, **given})
        print(spec.label())
        print(fastpath_lib.explain(*spec.build().args()))
        return 0
    return _explain_op(ref, op, given)


def _explain_op(ref: str, op, given: dict) -> int:
    import sys

    def fail(msg: str) -> int:
        print(f"error: --op {ref}: {msg}", file=sys.stderr)
        return 2

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
