"""Running RMSNorm's matrix into a results folder: every case, for every provider, with raw samples and mechanism
columns, on the generic runner.

Each case is timed by :func:`fastpath_lib.bench.opbench.time_case` with RMSNorm's spec
(:mod:`fastpath_lib.rmsnorm.spec`), as any registered op's matrix is. Providers (:data:`PROVIDERS`):

* ``baseline`` — ``torch.nn.functional.rms_norm`` (the reference the PR must beat or match);
* ``triton`` — the kernel launchers of :mod:`fastpath_lib.rmsnorm.kernels` called directly, bypassing the predicate
  (skipped, with the predicate's reason, where the kernel itself cannot take the input);
* ``dispatched`` — :func:`fastpath_lib.rms_norm`, predicate included: what users get;
* ``compiled`` — ``torch.compile`` of the op's composite (``F.rms_norm`` for RMSNorm; compile time recorded
  separately, excluded from the samples).

A ``backward`` case times forward+backward of each provider; every repetition takes the next of several freshly drawn
random input sets (never zeros). :func:`run_matrix` adds what a results folder needs around the cases: the copy
bandwidth, a staging folder written after every case, the analyses and the PR note. Times in microseconds.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pandas as pd

import fastpath_lib.bench.results as results
from fastpath_lib import opspec, runtime
from fastpath_lib.bench.analysis import classify
from fastpath_lib.bench.host import measure_host
from fastpath_lib.bench.matrix import BenchCase, load_cases
from fastpath_lib.bench.metadata import environment, region
from fastpath_lib.bench.opbench import not_run, providers_of, time_case
from fastpath_lib.bench.report import NOTE_FILES, pr_note
from fastpath_lib.bench.schema import CSV_COLUMNS, NOT_GPU, measurement_label
from fastpath_lib.bench.sweep import threshold_sweep
from fastpath_lib.bench.timing import copy_bandwidth, gpu_measurement, settings_for
from fastpath_lib.bench.workload import compile_cost, compiled_facts, replay

__all__ = ["PROVIDERS", "CSV_COLUMNS", "run_matrix", "matrix_environment"]

PROVIDERS = ("baseline", "triton", "dispatched", "compiled")


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def matrix_environment(settings: dict, *, copy_gbps: float, copy_label: str, providers, cases, declared,
                       gpu: bool) -> dict:
    """``environment.json`` for a matrix run: the machine, the harness settings, and which cases were declared."""
    env = environment(dict(settings, copy_bandwidth=copy_label, copy_gbps=copy_gbps, providers=list(providers),
                           cases=len(cases)))
    env["gpu_measurement"] = gpu
    env["measurement_label"] = measurement_label(env)
    env["declared_cases"] = list(declared)
    limits = opspec.default().limits
    env["region"] = region(limits(runtime.kernel_device())) if limits is not None else None
    return env


def _ordered(rows: list[dict], order: list[str]) -> pd.DataFrame:
    pos = {cid: i for i, cid in enumerate(order)}
    prov = {p: i for i, p in enumerate(PROVIDERS)}
    rows = sorted(rows, key=lambda r: (pos.get(r["case_id"], len(pos)), prov.get(r["provider"], len(prov))))
    return pd.DataFrame(rows, columns=CSV_COLUMNS)


def run_matrix(cases: list[BenchCase] | None = None, *, quick: bool = False, out_dir: str | Path | None = None,
               progress: bool = True, force: bool = False, providers=PROVIDERS, analyses: bool = True,
               extra_env: dict | None = None, declared: list[str] | None = None, host: bool = False,
               deadline: float | None = None, folder: Path | None = None,
               copy: tuple[float, str] | None = None, interrupted=None) -> pd.DataFrame:
    """Run the matrix; optionally write a complete results folder.

    Args:
        cases: the cases to run (default :func:`~fastpath_lib.bench.load_cases`).
        quick: small shapes and short budgets (same case ids).
        out_dir: when given, write ``results.csv``, ``environment.json``, ``boundary.png``, ``boundary.csv``,
            ``pr_note.md`` and ``pr_note_vllm.md`` (plus ``threshold.csv``, ``replay.json``, ``compile_cost.json``
            and, unless ``quick``, the compiled kernels' facts ``compiled.json``, when ``analyses``) there,
            through a staging folder renamed into place only when everything is written. It must not exist unless
            ``force``.
        progress: print progress lines on stderr.
        force: replace an existing ``out_dir``.
        providers: subset of :data:`PROVIDERS`.
        analyses: also run the row-threshold sweep, the workload replay and the compile-cost probe.
        extra_env: merged into ``environment.json``.
        declared: the ids of the predeclared matrix this run is part of (default: ``cases``); the note says how many
            of them ran and names the rest.
        host: also measure the host-overhead family (:mod:`fastpath_lib.bench.host`).
        deadline: a ``time.monotonic()`` value; cases not started by then are not run (``torch.compile`` runs after
            the other providers of every case, so a short budget loses it first).
        folder: write ``results.csv`` here after every case (the evidence command's staging folder); no note, no
            rename.
        copy: ``(GB/s, label)`` of a copy bandwidth measured earlier in the same run (default: measured here).
        interrupted: ``callable(folder, missing)`` told where an interrupted run (``KeyboardInterrupt``: Ctrl-C, or
            SIGTERM where the caller turns it into one) left ``out_dir`` and what it lacks; such a run renames its
            staging folder to ``out_dir`` all the same, marked ``INCOMPLETE`` with every step not finished named
            (:func:`~fastpath_lib.bench.results.finish_interrupted`), and raises on.

    Returns:
        the classified results (one row per case and provider; times in microseconds);
        ``df.attrs["environment"]`` holds the metadata.

    Note:
        Off CUDA every timing is a CPU / Triton-interpreter timing, labelled "not a GPU measurement".
    """
    cases = load_cases() if cases is None else list(cases)
    declared = [c.id for c in cases] if declared is None else list(declared)
    staging = results.begin(out_dir, force=force) if out_dir is not None else None
    # the steps not finished yet, in order (an interrupted run's marker names those still here)
    left = ([results.MATRIX_STEP] if cases else []) + (["the host-overhead family"] if host else []) + (
        ["the analyses (threshold sweep, replay, compile cost, compiled facts)"] if staging is not None and analyses
        else []) + (["the PR notes"] if staging is not None else [])
    try:
        return _run(cases, declared, staging, left, quick=quick, out_dir=out_dir, progress=progress, force=force,
                    providers=providers, analyses=analyses, extra_env=extra_env, host=host, deadline=deadline,
                    folder=folder, copy=copy)
    except KeyboardInterrupt:
        if staging is None or not staging.exists():
            raise
        out, missing = results.finish_interrupted(staging, out_dir, left, force=force, cases=[c.id for c in cases],
                                                  providers=providers)
        (interrupted or (lambda o, m: _stderr(f"interrupted: {o} keeps what finished; " + "; ".join(m))))(
            out, missing)
        raise


def _run(cases, declared, staging, left: list[str], *, quick, out_dir, progress, force, providers, analyses,
         extra_env, host, deadline, folder, copy) -> pd.DataFrame:
    """:func:`run_matrix`'s run, taking each step off ``left`` as it finishes."""
    log = _stderr if progress else None
    settings = settings_for(quick)
    gpu = gpu_measurement()
    t_start = time.perf_counter()
    copy_gbps, copy_label = copy or copy_bandwidth("cuda" if runtime.cuda_available() else "cpu", quick)
    env = matrix_environment(settings, copy_gbps=copy_gbps, copy_label=copy_label, providers=providers, cases=cases,
                             declared=declared, gpu=gpu)
    env.update(extra_env or {})
    if log:
        log(f"bench: {len(cases)} cases x {len(providers)} providers, {settings['timer']}"
            f"{'' if gpu else ' -- ' + NOT_GPU}; {copy_label}: {copy_gbps:.1f} GB/s")
    write_to = staging if staging is not None else folder
    if write_to is not None:  # first, so a run cut in the middle still says what was declared and where it ran
        (Path(write_to) / "environment.json").write_text(json.dumps(env, indent=2, default=str) + "\n")
    spec = opspec.default()
    impls = providers_of(spec)
    device = "cuda" if runtime.cuda_available() else "cpu"
    ops = [opspec.OpCase.from_entry(c.to_json()) for c in cases]  # a case file's entries as the spec's cases
    rows: list[dict] = []
    first = [p for p in providers if p != "compiled"]
    passes = [first] + ([["compiled"]] if "compiled" in providers else [])
    for k, provs in enumerate(passes):
        for i, case in enumerate(cases, 1):
            if deadline is not None and time.monotonic() > deadline:
                rows.extend(not_run(spec, ops[i - 1], provs, quick=quick, gpu=gpu,
                                    note="the run's time budget ran out"))
                continue
            if log:
                r, c, _ = case.dims(quick)
                log(f"[{i}/{len(cases)}] {case.id} ({r}x{c} {case.dtype} {case.layout} {case.pass_})"
                    f"{' torch.compile' if k else ''} elapsed {time.perf_counter() - t_start:.0f}s")
            rows.extend(time_case(spec, ops[i - 1], {p: impls[p] for p in provs}, quick=quick, gpu=gpu,
                                  settings=settings, device=device, check=k == 0, log=log, copy_gbps=copy_gbps))
            if write_to is not None:
                results.write_table(write_to, _ordered(rows, [c.id for c in cases]))
    if cases:
        left.remove(results.MATRIX_STEP)
    if host:
        rows.extend(measure_host(quick=quick, log=log))
        left.remove("the host-overhead family")
    df = classify(_ordered(rows, [c.id for c in cases]))
    df.attrs["environment"] = env
    if staging is not None:
        results.write(staging, df, env)  # the matrix and host rows, classified, kept whatever happens after them
        extras = {}
        if analyses:
            if log:
                log(f"analyses: threshold sweep, replay, compile cost (elapsed {time.perf_counter() - t_start:.0f}s)")
            table = threshold_sweep(quick=quick)
            table.to_csv(staging / "threshold.csv", index=False)
            proposal = table.attrs.get("proposal")
            (staging / "threshold_proposal.json").write_text(json.dumps(proposal, indent=2, default=str))
            extras = {"threshold": {"table": table, "proposal": proposal},
                      "replay": replay(quick=quick, settings=settings),
                      "compile_cost": compile_cost(cases, quick=quick)}
            for name in ("replay", "compile_cost"):
                (staging / f"{name}.json").write_text(json.dumps(extras[name], indent=2, default=str))
            if not quick:  # compiling for sm_80 and sm_90 needs no GPU, but outlasts a quick run
                facts = compiled_facts(cases)
                if facts["rows"]:
                    extras["compiled"] = facts["rows"]
                    (staging / "compiled.json").write_text(json.dumps(facts["rows"], indent=2, default=str))
            left.remove("the analyses (threshold sweep, replay, compile cost, compiled facts)")
        env["wall_s"] = round(time.perf_counter() - t_start, 1)
        results.write(staging, df, env)
        for template, name in NOTE_FILES.items():  # the kit's form and vLLM's
            (staging / name).write_text(pr_note(df=df, env=env, template=template, **extras))
        results.finish(staging, out_dir, force=force)
        if log:
            log(f"wrote {out_dir} in {env['wall_s']}s")
    elif folder is not None:
        results.write(folder, df, env)
    return df
