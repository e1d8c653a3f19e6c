"""``selftest`` and ``explain`` subcommands."""

from __future__ import annotations

import argparse

import torch

from fastpath_lib.cases import LAYOUTS, CaseSpec

_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "fp64": torch.float64}


def selftest_main(argv: list[str]) -> int:
    argparse.ArgumentParser(prog="python -m fastpath_lib selftest", description="Check Triton here.").parse_args(argv)
    from fastpath_lib import runtime, selftest

    print(runtime.describe())
    res = selftest.run()
    print(res)
    return 0 if res.ok else 1


def explain_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m fastpath_lib explain", description="Route and reasons for a case.")
    ap.add_argument("--rows", type=int, default=16)
    ap.add_argument("--cols", type=int, default=64)
    ap.add_argument("--dtype", choices=sorted(_DTYPES), default="fp32")
    ap.add_argument("--layout", choices=LAYOUTS, default="contiguous")
    ap.add_argument("--offset", type=int, default=0, help="elements between buffer start and input")
    ap.add_argument("--no-weight", action="store_true")
    args = ap.parse_args(argv)
    import fastpath_lib

    spec = CaseSpec(rows=args.rows, cols=args.cols, dtype=_DTYPES[args.dtype], layout=args.layout,
                    offset=args.offset, weight=None if args.no_weight else "same")
    print(spec.label())
    print(fastpath_lib.explain(*spec.build().args()))
    return 0
