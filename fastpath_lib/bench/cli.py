"""``python -m fastpath_lib bench`` and ``python -m fastpath_lib compare``.

Bad input (a missing or malformed case file, a case lacking fields, a folder that is not a results folder) gets one
line naming the problem on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time

import pandas as pd

__all__ = ["bench_main", "compare_main", "threshold_main", "fail", "interpreter_or_refuse"]


def fail(msg: str, code: int = 2) -> int:
    """Print ``error: msg`` on stderr and return ``code`` (the command's exit status)."""
    print(f"error: {msg}", file=sys.stderr)
    return code


def _show(df: pd.DataFrame, **kw) -> str:
    with pd.option_context("display.width", 220, "display.max_columns", 30, "display.max_rows", 200,
                           "display.max_colwidth", 60):
        return df.to_string(float_format=lambda v: f"{v:.4g}", **kw)


def _load_cases(path: str | None, only: str | None):
    """The cases to run and the declared ids; raises ``ValueError`` with one line on bad input."""
    from fastpath_lib.bench.matrix import load_cases

    try:
        cases = load_cases(path)
    except FileNotFoundError:
        raise ValueError(f"--cases {path}: no such file") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"--cases {path}: not valid JSON ({exc})") from None
    except (OSError, KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"--cases {path or 'default'}: {exc}") from None
    declared = [c.id for c in cases]
    if only:
        want = [w for w in only.split(",") if w]
        unknown = sorted(set(want) - set(declared))
        if unknown:
            raise ValueError(f"--only: unknown case ids {unknown}; known: {', '.join(declared)}")
        cases = [c for c in cases if c.id in want]
    return cases, declared


def print_host(df: pd.DataFrame, spec=None) -> None:
    """The host-overhead table of ``spec``'s rows (default: the default op, the one ``bench`` runs without
    ``--op``), with the fallback's target against its first baseline, then vLLM's dispatch where the rows hold it
    (:func:`fastpath_lib.bench.vllmhost.vllm_table`)."""
    from fastpath_lib import opspec
    from fastpath_lib.bench.host import TARGET_RATIO, host_table
    from fastpath_lib.bench.vllmhost import LABEL, vllm_table

    spec = spec or opspec.default()
    baseline = spec.baseline[0]
    t = host_table(df, spec)
    if len(t):
        print(f"\nhost time per call (us; fastest of many interleaved blocks; fallback target: dispatched <= "
              f"{TARGET_RATIO}x {baseline})")
        shown = t.drop(columns=["target", "warnings"])
        print(_show(shown if shown["launcher_us"].notna().any() else shown.drop(columns=["launcher_us"])))
        for case, warned in t["warnings"].items():
            if isinstance(warned, str) and warned:
                print(f"  {case} warned (recorded, not printed while timing): {warned}")
    v = vllm_table(df)
    if len(v):
        print(f"\nvLLM's dispatch per call (us; {LABEL}): supports_args alone, dispatch with the kit's provider first, "
              "dispatch with native only")
        print(_show(v))


def interpreter_or_refuse() -> str | None:
    """Opt in to Triton's interpreter on a machine without CUDA, as ``./kit`` does (``TRITON_INTERPRET=1`` unless
    the variable is set): call before any op's module is imported (Triton decides a kernel's mode when it is
    decorated). Returns why the run is refused (no CUDA and the interpreter set off: no Triton kernel would run), or
    ``None``."""
    import os

    from fastpath_lib import runtime

    if runtime.ENV not in os.environ:
        runtime.use_interpreter()
    if not (runtime.cuda_available() or runtime.interpreter_enabled()):
        return (f"no CUDA device and {runtime.ENV}={os.environ.get(runtime.ENV)}: no Triton kernel would run, so "
                f"every call would take the fallback; unset {runtime.ENV} (the command then runs the kernels in "
                "Triton's interpreter) or run on a GPU")
    return None


def bench_main(argv: list[str] | None = None) -> int:
    """Run the matrix (and the host-overhead family) into a results folder and print the summary tables.

    ``python -m fastpath_lib bench --out DIR [--quick] [--cases FILE] [--only IDS] [--force] [--no-analyses]
    [--family all|matrix|host]``; ``--family host`` alone needs no ``--out`` (it prints the host table).
    """
    p = argparse.ArgumentParser(prog="python -m fastpath_lib bench", description=bench_main.__doc__)
    p.add_argument("--out", help="results folder to create (must not exist unless --force)")
    p.add_argument("--quick", action="store_true", help="small shapes, short budgets, same case ids")
    p.add_argument("--cases", help="a JSON case file (default: the kit's predeclared matrix)")
    p.add_argument("--force", action="store_true", help="replace an existing results folder")
    p.add_argument("--no-analyses", action="store_true", help="skip the threshold sweep, replay and compile cost")
    p.add_argument("--only", help="comma-separated case ids to run (a subset of the matrix)")
    p.add_argument("--family", choices=("all", "matrix", "host"), default="all",
                   help="the predeclared matrix, the host-overhead family, or both (default)")
    p.add_argument("--op", default=None,
                   help="the registered operator (fastpath_lib.opspec.names()) whose matrix to run, or "
                        "MODULE:ATTRIBUTE naming an OpSpec to register first (default: the first registered op, "
                        "the full pipeline with its case file and analyses)")
    args = p.parse_args(argv)
    refused = interpreter_or_refuse()
    if refused:
        return fail(refused)
    from fastpath_lib import opspec

    if args.op is not None:
        try:
            spec = opspec.load(args.op)
        except (ImportError, AttributeError, KeyError, ValueError, TypeError) as exc:
            return fail(f"--op {args.op}: {exc}")
        if spec is not opspec.default():
            return _bench_op(args, spec)
    from fastpath_lib import bench
    from fastpath_lib.bench.schema import NOT_GPU, cpu_mode

    if args.family == "host" and not args.out:
        df = bench.classify(pd.DataFrame(bench.measure_host(quick=args.quick)))
        print_host(df)
        return 0
    if not args.out:
        return fail("--out DIR is required (only --family host runs without a results folder)")
    try:
        cases, declared = _load_cases(args.cases, args.only)
    except ValueError as exc:
        return fail(str(exc))
    if args.family == "host":
        cases = []
    t0 = time.perf_counter()
    try:
        with _stopped_by_signals() as stopped:  # an interrupted run keeps what finished (run_matrix says what)
            try:
                df = bench.run_matrix(cases, quick=args.quick, out_dir=args.out, force=args.force, declared=declared,
                                      analyses=not args.no_analyses and args.family != "host",
                                      host=args.family != "matrix", interrupted=_say_interrupted)
            except stopped:
                return 130
    except FileExistsError as exc:
        return fail(str(exc))
    env = df.attrs["environment"]
    if len(cases):
        print(_show(bench.summary_table(df, gpu=env["gpu_measurement"])))
        from fastpath_lib.bench.analysis import coverage_line

        print(f"\n{coverage_line(df, env)}")
    print_host(df)
    if not env["gpu_measurement"]:
        print(f"\n{NOT_GPU.upper()}: {cpu_mode(env)} timings; matrix outcomes read unmeasured and no "
              "speed-up is claimed (host time per call is a CPU measurement).")
    from pathlib import Path

    written = ", ".join(sorted(p.name for p in Path(args.out).iterdir()))
    print(f"\nwrote {args.out} ({written}) in {time.perf_counter() - t0:.0f} s")
    return _wrong_exit(df)


def _with_host_rows(spec, df: pd.DataFrame, quick: bool) -> pd.DataFrame:
    """``df`` with ``spec``'s host-overhead family appended (timed here), and its table printed against the op's first
    baseline (each form against its own composite)."""
    from fastpath_lib.bench.analysis import classify
    from fastpath_lib.bench.ophost import measure_host_op

    host = classify(pd.DataFrame(measure_host_op(spec, quick=quick)))
    print_host(host, spec)
    out = classify(pd.concat([df, host], ignore_index=True)) if len(df) else host
    out.attrs["environment"] = df.attrs["environment"]
    return out


def _bench_op(args, spec) -> int:
    """``bench --op NAME``: another registered operator's matrix and its host-overhead family (``--family`` picks
    one), timed and classified; with ``--out``, written with the boundary plot and the PR note in the kit's form and
    vLLM's template (:data:`NOTE_FILES`)."""
    from fastpath_lib import opspec
    from fastpath_lib.bench import results
    from fastpath_lib.bench.analysis import coverage_line, summary_table
    from fastpath_lib.bench.opbench import run_op
    from fastpath_lib.bench.report import NOTE_FILES, pr_note
    from fastpath_lib.bench.schema import NOT_GPU, cpu_mode

    if args.cases or args.no_analyses:
        return fail(f"--op {args.op}: --cases and --no-analyses apply to {opspec.names()[0]} (the default op) only")
    only = [w for w in args.only.split(",") if w] if args.only else None
    unknown = sorted(set(only or []) - {c.id for c in spec.matrix()})
    if unknown:
        return fail(f"--only: unknown case ids {unknown} of op {spec.name}")
    staging = None
    if args.out:
        try:
            staging = results.begin(args.out, force=args.force)
        except FileExistsError as exc:
            return fail(str(exc))
    if args.family == "host":  # the host-overhead family alone: no matrix case runs
        only = []
    steps = ([] if args.family == "host" else ["the matrix"]) + ([] if args.family == "matrix" else [
        "the host-overhead family"]) + (["the PR notes"] if staging is not None else [])
    with _stopped_by_signals() as stopped:
        try:
            df = run_op(spec, quick=args.quick, only=only, folder=staging)  # results.csv after every case
            env = df.attrs["environment"]
            env["op_ref"] = opspec.reference_of(spec) if ":" not in args.op else args.op
            if args.family != "host":
                print(_show(summary_table(df, gpu=env["gpu_measurement"])))
                print(f"\n{spec.name}: {coverage_line(df, env)}")
                steps.remove("the matrix")
                if staging is not None:  # the finished matrix is kept whatever happens to the steps after it
                    results.write(staging, df, env)
            for gap in spec.coverage_gaps():  # the spec's shortfalls, on every run (the notes say them too)
                print(f"warning: {spec.name}: {gap}")
            if args.family != "matrix":
                df = _with_host_rows(spec, df, args.quick)
                steps.remove("the host-overhead family")
                if staging is not None:  # the host rows too
                    results.write(staging, df, env)
            if not env["gpu_measurement"]:
                print(f"\n{NOT_GPU.upper()}: {cpu_mode(env)} timings; outcomes read unmeasured"
                      + ("; host time per call is a CPU measurement." if args.family != "matrix" else "."))
            print_not_run(spec, folder=staging is not None, df=df)
            if staging is not None:
                for template, name in NOTE_FILES.items():
                    (staging / name).write_text(pr_note(df=df, env=env, spec=spec, template=template))
                out = results.finish(staging, args.out, force=args.force)
        except stopped:
            if staging is None or not staging.exists():  # no folder, or the finished one already renamed
                raise KeyboardInterrupt from None
            from fastpath_lib.bench.opbench import providers_of

            ran = [c.id for c in spec.matrix() if only is None or c.id in only]
            out, missing = results.finish_interrupted(
                staging, args.out, steps, force=args.force, cases=ran, providers=list(providers_of(spec)),
                after_error=[p for p, i in providers_of(spec).items() if i == opspec.COMPILED])
            _say_interrupted(out, missing)
            return 130
    if staging is not None:
        plot = "boundary.png (the dispatch-boundary plot), " if (out / "boundary.png").exists() else ""
        print(f"wrote {out}: results.csv, environment.json, {plot}PR notes {', '.join(NOTE_FILES.values())} "
              "(the kit's form and vLLM's template)")
    return _wrong_exit(df)


def _say_interrupted(out, missing: list[str]) -> None:
    from fastpath_lib.bench.results import INCOMPLETE_MARKER

    print(f"interrupted: {out} keeps what finished, marked {INCOMPLETE_MARKER}; " + "; ".join(missing),
          file=sys.stderr)


class _Stop(KeyboardInterrupt):
    """Ctrl-C or SIGTERM arrived during a ``bench`` run: a ``KeyboardInterrupt``, so no ``except Exception`` of the
    run (a provider's failure recorded as its row) takes it for a failure and runs on."""


@contextlib.contextmanager
def _stopped_by_signals():
    """Within the block, Ctrl-C and SIGTERM (``timeout``'s signal) raise :class:`_Stop` (yielded, to catch), so the run
    can keep what finished; the previous handlers come back after it (a thread other than the main one changes
    nothing: Ctrl-C raises ``KeyboardInterrupt`` there, also caught)."""
    import signal
    import threading

    previous = {}
    if threading.current_thread() is threading.main_thread():
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

        def stop(signum, frame):
            raise _Stop()

        for sig in previous:
            signal.signal(sig, stop)
    try:
        yield (_Stop, KeyboardInterrupt)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def print_not_run(spec, *, folder: bool = True, df: pd.DataFrame | None = None) -> None:
    """The analyses ``bench --op`` leaves out, each with why: the spec field it needs, or the evidence step that runs
    it (:data:`~fastpath_lib.bench.note_evidence.ANALYSES`); ``folder``: the run writes a results folder (``--out``),
    which then lacks their files. The torch.compile rows are read off the run's own rows ``df``: not listed where it
    timed them, else the reason its rows give (one reason per mode, the one the note gives)."""
    from fastpath_lib.bench.note_evidence import ANALYSES, compiled_not_run, not_run

    print("\nanalyses bench --op does not run" + (" (no such file in the folder):" if folder else ":"))
    for file, (what, _, _) in ANALYSES.items():
        why = compiled_not_run(spec, df) if file == "results.csv (compiled rows)" else not_run(spec, file)
        if why:
            print(f"  {file} ({what}): not run: {why}")


def _wrong_exit(df: pd.DataFrame) -> int:
    """1, with one line per case, when the op's own routes gave an error (a result that differs from the reference,
    an out-of-bounds access, bytes the kit cannot explain); else 0. A baseline that gave an error (one that differs
    from the reference is not timed) gets a line too: the op's own routes decide the exit status."""
    from fastpath_lib.bench.analysis import baseline_errors, wrong_cases

    for line in baseline_errors(df):
        print(f"BASELINE NOT TIMED: {line}", file=sys.stderr)
    bad = wrong_cases(df)
    for case, why in bad.items():
        print(f"WRONG: {case}: {why}", file=sys.stderr)
    if bad:
        print(f"error: {len(bad)} cases wrong: the op's own route is not ready to time or review", file=sys.stderr)
    return 1 if bad else 0


def compare_main(argv: list[str] | None = None) -> int:
    """Per-case drift between two results folders; exit 1 when a classification changed, 2 on bad input.

    ``python -m fastpath_lib compare OLD_DIR NEW_DIR``
    """
    from fastpath_lib.bench.drift import compare
    from fastpath_lib.bench.schema import NOT_GPU, UNMEASURED

    p = argparse.ArgumentParser(prog="python -m fastpath_lib compare", description=compare_main.__doc__)
    p.add_argument("old")
    p.add_argument("new")
    args = p.parse_args(argv)
    try:
        diff = compare(args.old, args.new)
    except (FileNotFoundError, ValueError) as exc:
        return fail(str(exc))
    print(_show(diff, index=False))
    not_gpu = diff.attrs["not_gpu"]
    if not_gpu:  # drift between CPU timings says nothing of a GPU
        print(f"{NOT_GPU.upper()}: " + ("neither folder is a GPU measurement: the drift is between CPU timings and "
                                        f"says nothing of a GPU; outcomes read {UNMEASURED}" if len(not_gpu) == 2
                                        else f"the {not_gpu[0]} folder is {NOT_GPU}: its timings are a CPU's and "
                                        f"its outcomes read {UNMEASURED}"))
    for k, (a, b) in diff.attrs["environment_differences"].items():
        print(f"environment differs: {k}: {a} -> {b}")
    for side in ("only_old", "only_new"):
        if diff.attrs[side]:
            print(f"{side.replace('_', ' in ')}: {', '.join(diff.attrs[side])}")
    if diff.attrs["not_timed"]:  # a difference of mode (--quick skips torch.compile off CUDA), not of outcome
        print("timed in one folder only (not compared, not counted as changed): " + "; ".join(diff.attrs["not_timed"]))
    changed = diff[diff.changed]
    print(f"\n{len(changed)} case/provider classifications changed"
          + (": " + ", ".join(f"{r.case_id}/{r.provider} {r.old_observed}->{r.new_observed}"
                              for r in changed.itertuples()) if len(changed) else ""))
    return 1 if len(changed) else 0


def threshold_main(argv: list[str] | None = None) -> int:
    """Record the row threshold a recorded GPU sweep supports, with the folder it came from.

    ``python -m fastpath_lib threshold RESULTS_DIR [--check] [--file PATH]``: recomputes the proposal from the
    folder's raw ``threshold.csv`` and writes ``CUDA_MIN_ROWS`` for its architecture into
    ``fastpath_lib/rmsnorm/thresholds.json`` (``--check`` prints it without writing). Exit 1 when the sweep supports
    no threshold, 2 on bad input.
    """
    from fastpath_lib.bench.sweep import record_threshold

    p = argparse.ArgumentParser(prog="python -m fastpath_lib threshold", description=threshold_main.__doc__)
    p.add_argument("results_dir")
    p.add_argument("--check", action="store_true", help="print the threshold, write nothing")
    p.add_argument("--file", help="the thresholds file (default: fastpath_lib/rmsnorm/thresholds.json)")
    args = p.parse_args(argv)
    try:
        info = record_threshold(args.results_dir, path=args.file, write=not args.check)
    except FileNotFoundError as exc:
        return fail(str(exc))
    except ValueError as exc:
        return fail(str(exc), 1 if "no threshold supported" in str(exc) else 2)
    widths = ", ".join(f"{w} cols: {r}" for w, r in info["per_width_crossover_rows"].items())
    print(f"{info['capability']}: min_rows {info['proposed_min_rows']} (from {info['source']}; crossover per width: "
          f"{widths})")
    if info.get("missing"):
        print(f"note: {info['source']} is a partial evidence run (its sweep finished); missing: "
              + "; ".join(info["missing"]))
    print(f"wrote {info['written']}" if info["written"] else "--check: nothing written")
    return 0
