"""Command line: ``python -m fastpath_lib COMMAND ...`` (``selftest``, ``explain``, ``bench``, ``compare``,
``evidence``, ``threshold``, ``capture``, ``grade``, ``release``, ``autograde``)."""

from __future__ import annotations

import importlib
import sys

COMMANDS = {
    "selftest": ("fastpath_lib.cli", "selftest_main", "check that Triton computes the kit's kernels correctly here"),
    "explain": ("fastpath_lib.cli", "explain_main", "print the route and reasons for a case of any op (--op)"),
    "bench": ("fastpath_lib.bench.cli", "bench_main", "run the predeclared benchmark matrix into a results folder"),
    "compare": ("fastpath_lib.bench.cli", "compare_main", "per-case drift between two results folders"),
    "evidence": ("fastpath_lib.bench.evidence", "main", "the whole GPU evidence run, time-boxed, into one folder"),
    "threshold": ("fastpath_lib.bench.cli", "threshold_main", "record the row threshold a GPU sweep supports"),
    "capture": ("fastpath_lib.rmsnorm.graph_capture", "capture_main",
                "record whether CUDA-graph capture passed on a GPU"),
    "grade": ("fastpath_lib.grading.engine.cli", "main", "grade exercise notebooks and print a score table"),
    "release": ("fastpath_lib.release", "main", "write a course release: a student folder and an autograder"),
    "autograde": ("fastpath_lib.grading.engine.autograde", "main",
                  "grade a Gradescope, PrairieLearn or nbgrader layout"),
}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        print("usage: python -m fastpath_lib COMMAND [ARGS]\n\ncommands:")
        for name, (_, _, doc) in COMMANDS.items():
            print(f"  {name:<9} {doc}")
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    module, func, _ = COMMANDS[argv[0]]
    try:
        entry = getattr(importlib.import_module(module), func)
    except ModuleNotFoundError as exc:
        if exc.name != module:
            raise
        print(f"{argv[0]}: not in this copy of the kit (a course's student release leaves it out)", file=sys.stderr)
        return 2
    return int(entry(argv[1:]) or 0)


if __name__ == "__main__":
    sys.exit(main())
