"""``python -m fastpath_lib bench`` and ``python -m fastpath_lib compare``."""

from __future__ import annotations

import argparse
import sys
import time

import pandas as pd

__all__ = ["bench_main", "compare_main"]


def bench_main(argv: list[str] | None = None) -> int:
    """Run the matrix into a results folder and print the summary table.

    ``python -m fastpath_lib bench --out DIR [--quick] [--cases FILE] [--force] [--no-analyses] [--tests JUNIT]``
    """
    from fastpath_lib import bench

    p = argparse.ArgumentParser(prog="python -m fastpath_lib bench", description=bench_main.__doc__)
    p.add_argument("--out", required=True, help="results folder to create (must not exist unless --force)")
    p.add_argument("--quick", action="store_true", help="small shapes, short budgets, same case ids")
    p.add_argument("--cases", help="a JSON case file (default: the kit's predeclared matrix)")
    p.add_argument("--force", action="store_true", help="replace an existing results folder")
    p.add_argument("--no-analyses", action="store_true", help="skip the threshold sweep, replay and compile cost")
    p.add_argument("--only", help="comma-separated case ids to run (a subset of the matrix)")
    args = p.parse_args(argv)
    cases = bench.load_cases(args.cases)
    if args.only:
        want = args.only.split(",")
        unknown = sorted(set(want) - {c.id for c in cases})
        if unknown:
            p.error(f"unknown case ids: {unknown}")
        cases = [c for c in cases if c.id in want]
    t0 = time.perf_counter()
    try:
        df = bench.run_matrix(cases, quick=args.quick, out_dir=args.out, force=args.force,
                              analyses=not args.no_analyses)
    except FileExistsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    env = df.attrs["environment"]
    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.max_rows", 100):
        print(bench.summary_table(df, gpu=env["gpu_measurement"]).to_string(float_format=lambda v: f"{v:.4g}"))
    if not env["gpu_measurement"]:
        print("\nNOT A GPU MEASUREMENT: CPU / Triton-interpreter timings; no speed-up is claimed from them.")
    print(f"\nwrote {args.out} (results.csv, environment.json, boundary.png, pr_note.md) in "
          f"{time.perf_counter() - t0:.0f} s")
    return 0


def compare_main(argv: list[str] | None = None) -> int:
    """Per-case drift between two results folders; exit 1 when a classification changed.

    ``python -m fastpath_lib compare OLD_DIR NEW_DIR``
    """
    from fastpath_lib import bench

    p = argparse.ArgumentParser(prog="python -m fastpath_lib compare", description=compare_main.__doc__)
    p.add_argument("old")
    p.add_argument("new")
    args = p.parse_args(argv)
    diff = bench.compare(args.old, args.new)
    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.max_rows", 200):
        print(diff.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    for k, (a, b) in diff.attrs["environment_differences"].items():
        print(f"environment differs: {k}: {a} -> {b}")
    for side in ("only_old", "only_new"):
        if diff.attrs[side]:
            print(f"{side.replace('_', ' in ')}: {', '.join(diff.attrs[side])}")
    changed = diff[diff.changed]
    print(f"\n{len(changed)} case/provider classifications changed"
          + (": " + ", ".join(f"{r.case_id}/{r.provider} {r.old_observed}->{r.new_observed}"
                              for r in changed.itertuples()) if len(changed) else ""))
    return 1 if len(changed) else 0
