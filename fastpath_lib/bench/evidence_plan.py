"""The evidence run's plan (:mod:`fastpath_lib.bench.evidence`): its steps, each with a fixed minimum, what it is
expected to cost and where that figure comes from, and how the budget is shared among them.

Each step starts with its minimum (its process start, torch's import and CUDA's start included) plus its weight's share
of what is left once the minimum of every step still to run is set aside (:func:`allot`); time a step does not use
flows onward. :func:`fits` says whether a plan's minimums fit a budget and what the expected total leaves over;
``python -m fastpath_lib evidence --dry-run`` prints it, and the preflight refuses a plan that does not fit.
"""

from __future__ import annotations

import dataclasses

__all__ = ["Step", "STEPS", "OPTIONAL", "DEFAULT_BUDGET_S", "SHARED", "START_S", "STATUSES", "all_steps", "op_steps",
           "op_costs", "sweep_line", "UNIT_S",
           "allot", "plan", "fits", "budget_split"]

DEFAULT_BUDGET_S = 420.0
#: Step statuses from best to worst (:data:`fastpath_lib.bench.evidence_steps.STATUSES`).
STATUSES = ("ran", "skipped", "partial", "failed")
_STEPS_MODULE = "fastpath_lib.bench.evidence_steps"


@dataclasses.dataclass(frozen=True)
class Step:
    """One step of the evidence run.

    Args:
        name: identifier (manifest key, log name).
        title: what it does, in words.
        weight: its share of the time left over when no step expects more than its minimum (:func:`allot`).
        target: ``"module:function"`` run in a child process with a :class:`~fastpath_lib.bench.evidence_steps.
            StepContext`.
        writes: the files it writes (for the plan).
        needs: modules it imports (checked by ``--dry-run``).
        min_s: the fixed minimum it is started with (its process start, torch's import and CUDA's start included);
            with less left it is skipped rather than started.
        op: the registered operator(s) the step serves, comma-separated (passed to the step as ``ctx.op``; a step of
            one job for several ops loops over them); ``None`` for a shared step.
        est_s: what it is expected to take on the GPU machine (16 cores, one H100/H200).
        basis: where ``est_s`` comes from: ``"measured: ..."`` (on this project's CPU machine, for what runs
            without a GPU) or ``"estimate: ..."`` (what it is reasoned from).
    """

    name: str
    title: str
    weight: float
    target: str
    writes: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()
    min_s: float = 3.0
    op: str | None = None
    est_s: float | None = None
    basis: str = ""

    @property
    def ops(self) -> tuple[str, ...]:
        """The operators the step serves (empty for a shared step)."""
        return tuple(self.op.split(",")) if self.op else ()


def _s(name: str) -> str:
    return f"{_STEPS_MODULE}:{name}"


_CORE = ("torch", "triton", "numpy", "fastpath_lib", "fastpath_lib.opspec", _STEPS_MODULE)
#: The ``op`` key of the shared steps in :func:`budget_split`.
SHARED = "shared"
#: Every step's process starts Python, imports torch and the kit and starts CUDA before its work: measured 6 s on the
#: project's shared 2-core CPU machine (``python -c "import torch, fastpath_lib, ...evidence_steps, ...opbench"``,
#: busy), estimated 5 s on the GPU machine with CUDA's start; every minimum below includes it.
START_S = 5.0
#: Seconds one case of one provider takes in a matrix step on the GPU machine (do_bench's 25 + 100 ms, the check, the
#: profile; the fused op's 13 cases x 5 providers were estimated at 35 s with the start).
CELL_S = 0.45
_START = f"{START_S:.0f} s process start, torch import and CUDA start (measured 6 s on the project's CPU machine)"


def _kit_ops() -> tuple[str, str]:
    """The names of the kit's own ops (its default op and the fused op), whose costs the fixed estimates measured: a
    plan's texts name them so, never an op of the practitioner's."""
    from fastpath_lib import opspec

    kit = (*opspec.built_in(), "the default op", "the fused op")
    return kit[0], kit[1]


def _steps_before_ops(primary: str, every: str) -> tuple[Step, ...]:
    """The shared steps, the default op's matrix (``primary``) and the steps every op runs in one job (``every``: the
    registered ops, comma-separated)."""
    rms, fused = _kit_ops()
    return (
        Step("selftest", "self-test: the kit's own kernels on CUDA against the float64 reference", 10, _s("selftest"),
             ("selftest.txt",), _CORE + ("fastpath_lib.selftest",), min_s=15, est_s=15,
             basis=f"estimate: {_START}, then a few JIT compiles (Triton 3.6 also builds its C launcher once)"),
        Step("gpu_tests", "pytest -m gpu tests (the CUDA-only tests), JUnit XML", 20, _s("gpu_tests"),
             ("tests/gpu.xml",), _CORE + ("pytest",), min_s=20, est_s=25,
             basis="estimate: pytest start-up and collection of tests/ (measured 9 s on the project's CPU machine), "
                   "then the gpu tests; stops between tests at its deadline and says how many ran"),
        Step("core_tests", "the core tests on CUDA (predicate, boundaries, contract, modes, hypothesis), JUnit XML",
             30, _s("core_tests"), ("tests/core.xml",), _CORE + ("pytest", "hypothesis"), min_s=30, est_s=40,
             basis="estimate: collection (measured 6 s on the project's CPU machine), then as many tests as the "
                   "budget allows (stops between tests; the manifest says collected vs run)"),
        Step("matrix", f"{primary}'s predeclared matrix (inputs built on the device once per case, one profiler "
             "session per case; the copy bandwidth first; torch.compile in its own step)", 40, _s("matrix"),
             ("results.csv", "environment.json", "boundary.png", "boundary.csv", "copy_bandwidth.json",
              "nvidia_smi.json"), _CORE + ("pandas", "matplotlib", "fastpath_lib.bench.opbench"),
             op=primary, min_s=30, est_s=35,
             basis=f"estimate: {_START}; 17 cases x 3 providers at do_bench's 25 + 100 ms, ~1.3 s a case with its "
                   "check, its profile and the graph timing of microsecond calls; cases past the deadline are "
                   "recorded as not run (the step is then partial)"),
        Step("sweep", "the row-threshold sweep of every op: host-inclusive time of the dispatched call against the "
             "baseline (blocks of back-to-back calls, each ending in a sync), every admitted dtype; a proposal for "
             "each op declaring OpSpec.thresholds", 25, _s("sweep"),
             ("threshold.csv", "threshold_proposal.json", "ops/NAME/threshold.csv"),
             _CORE + ("fastpath_lib.bench.sweep", "fastpath_lib.bench.hostmethod"), op=every,
             min_s=30, est_s=40,
             basis=f"estimate: {_START}; {rms} 15 row counts x 3 widths x 3 dtypes, {fused} 8 x 1 x 3, each "
                   "point 2 x 16 blocks of ~4 ms (~0.16 s with its inputs): ~26 s, plus first launches of kernel "
                   "variants the matrix did not compile; points past the deadline are left out (partial, and no "
                   "threshold is proposed)"),
        Step("capture", "CUDA-graph capture of every op at the boundary shapes, eager and through its custom op (what "
             "compile graphs and vLLM call), replayed on new data against the reference; a verdict per op and path",
             15, "fastpath_lib.bench.capture:step", ("capture_test.json",), _CORE + ("fastpath_lib.bench.capture",),
             op=every, min_s=30, est_s=40,
             basis=f"estimate: {_START}; 40 captures ({rms}'s 12 and {fused}'s 8, by each of two paths) with "
                   "their warm-ups, under 1 s each once the matrix has compiled the kernels"),
    )


def _steps_after_ops(both: str) -> tuple[Step, ...]:
    rms, fused = _kit_ops()
    return (
        Step("replay", "workload replay of every op declaring its decoder step (a small decoder calling the op as its "
             "OpSpec.decoder_step does; its serving trace)", 8, _s("replay"), ("replay.json", "ops/NAME/replay.json"),
             _CORE + ("fastpath_lib.bench.workload", "fastpath_lib.bench.trace"),
             op=both, min_s=15, est_s=20,
             basis=f"estimate: {_START}; per op, a 4-layer dim-4096 decoder at 8 x 512 tokens and its quick serving "
                   "trace, a few seconds each"),
        Step("compile_cost", "compile cost per kernel specialization of every op declaring its binaries (fresh "
             "process, empty cache)", 8,
             _s("compile_cost"), ("compile_cost.json", "ops/NAME/compile_cost.json"),
             _CORE + ("fastpath_lib.bench.workload",), op=both, min_s=20, est_s=30,
             basis=f"estimate: {_START}; ~30 specializations at 0.3-1 s of JIT compile each in a fresh process; "
                   "the probe's time limit is caught and recorded"),
        Step("compiled", "compile-time facts of every op's kernels (vector width, registers, spills)", 5,
             _s("compiled_facts"), ("compiled.json", "ops/NAME/compiled.json"),
             _CORE + ("fastpath_lib.bench.workload",), op=both, min_s=20, est_s=25,
             basis=f"measured: {rms}'s 116 specializations for sm_80 and sm_90 in 38 s, {fused}'s 72 in 58 s, "
                   "one worker on the project's busy 2-core CPU machine (no GPU needed): ~100 core-seconds, about "
                   f"8 s on the GPU machine's 15 workers, plus {_START}"),
        Step("host", "host overhead of every op's dispatch (vs its baseline, vs the launcher, vLLM's dispatch vs "
             "native), appended to each op's results.csv", 10, _s("host"),
             ("results.csv (host-overhead rows)", "ops/NAME/results.csv (host-overhead rows)"),
             _CORE + ("fastpath_lib.opspec", "fastpath_lib.bench.ophost", "fastpath_lib.bench.vllmhost"),
             min_s=15, est_s=20,
             basis=f"measured: the host families of {rms} and {fused} in 7.8 s with the quick blocks on the project's "
                   "CPU machine without vLLM (the GPU machine has none; with vLLM installed its child process makes "
                   "it 60 s), "
                   f"plus {_START}; each block also synchronizes on CUDA"),
        Step("compiled_baselines", "torch.compile of each op's composite on a few cases (its smallest and largest "
             "forward case), the deadline checked before each cold compile", 15,
             _s("compiled_baselines"), ("results.csv (compiled rows)", "ops/NAME/results.csv (compiled rows)"),
             _CORE + ("fastpath_lib.bench.opbench",), op=both, min_s=40, est_s=45,
             basis=f"estimate: a cold Inductor compile of {rms}'s or {fused}'s composite is 5-40 s on 16 cores (10 s "
                   "typical); two forward "
                   "cases per op (smallest and largest), as many as the budget allows (the rest recorded as not "
                   "started, the step then partial)"),
        Step("pr_note", "the PR note of every op drafted from this folder, and what it lacks", 2, _s("pr_note"),
             ("pr_note.md", "ops/NAME/pr_note.md"), _CORE + ("fastpath_lib.bench.report",), min_s=8, est_s=8,
             basis="measured: 7.4 s on the project's CPU machine (run_evidence with the host, compiled and PR-note "
                   "steps)"),
    )


#: Opt-in steps (``--with NAME``): not in the default plan, each with why.
OPTIONAL: dict[str, tuple[Step, str]] = {
    "sanitizer": (Step("sanitizer", "compute-sanitizer --tool memcheck over the boundary shapes (absence or refusal "
                       "recorded)", 10, _s("sanitizer"), ("sanitizer/memcheck.txt",),
                       _CORE + ("fastpath_lib.boundary", "fastpath_lib.testing"), min_s=120, est_s=150,
                       basis="estimate: 48 boundary points, each JIT compile and launch under memcheck (several "
                             "times slower); some lent GPUs refuse the tool ('Device not supported')"),
                  "memcheck needs about 2-3 minutes, more than a 420 s plan can spare, and has refused some lent "
                  "GPUs: `--with sanitizer` adds it (with a budget that fits it)"),
}


def _op_files(name: str, *files: str) -> tuple[str, ...]:
    return tuple(f"ops/{name}/{f}" for f in files)


def op_steps(name: str) -> tuple[Step, ...]:
    """The step of its own a registered operator other than the default op gets: its predeclared matrix against every
    baseline (but ``torch.compile``), written under ``ops/NAME/``. Its sweep, replay, capture, compile cost, compiled
    facts and compiled baselines run inside the shared step of the same job (one process per job: every process
    start costs its torch import and CUDA start). The expected time is read from the spec: its cases times its
    providers (every baseline but ``torch.compile``, the dispatched call, the fast route where it has one) at
    :data:`CELL_S` each."""
    from fastpath_lib import opspec

    spec = opspec.get(name)
    cases = len(spec.matrix())
    providers = sum(b != opspec.COMPILED for b in spec.baselines) + 1 + (spec.fast is not None)
    # at least the few seconds every step's minimum covers; whole seconds, so the minimum never exceeds the estimate
    est = round(START_S + max(3.0, CELL_S * cases * providers))
    needs = _CORE + ("fastpath_lib.opspec", "fastpath_lib.bench.opbench")
    return (Step(f"{name}_matrix", f"{name}: its predeclared matrix against its baselines (torch.compile in its own "
                 "step)", 30, _s("matrix"), _op_files(name, "results.csv", "environment.json", "boundary.png"),
                 needs, op=name, min_s=min(30.0, est), est_s=est,
                 basis=f"estimate: {_START}; {cases} cases x {providers} providers at do_bench's 25 + 100 ms with "
                       f"the check, ~{CELL_S} s each"),)


#: What one unit of a shared per-op step costs for an op beyond the kit's own (whose costs each step's fixed estimate
#: covers), from that step's basis: a sweep point (2 x 16 blocks of ~4 ms with its inputs), a host case (both built-in
#: ops' 7 cases and one form in 7.8 s), a compile-cost binary (0.3-1 s of JIT compile; its probe a fresh process),
#: a compiled-facts build (~100 core-seconds for 188 builds, 15 workers), a torch.compile case (a cold Inductor compile,
#: 10 s typical), a replay (a small decoder and a quick trace, a few seconds), a capture test (no count in the spec)
#: and a note.
UNIT_S = {"sweep": 0.16, "host": 1.0, "compile_cost": 1.0, "compiled": 0.04, "compiled_baselines": 10.0,
          "replay": 5.0, "capture": 10.0, "pr_note": 2.0}


def op_costs(spec) -> dict[str, tuple[float, str]]:
    """step -> ``(expected seconds, what they count)`` of each shared step that runs ``spec`` (a step whose field the
    spec leaves out skips it: no cost), read from the spec: its sweep grid, host cases, binaries, builds and cases."""
    from fastpath_lib.bench.note_evidence import steps_skipping
    from fastpath_lib.bench.opbench import pick_compiled_cases
    from fastpath_lib.bench.schema import FALLBACK
    from fastpath_lib.bench.sweep import sweep_grid
    from fastpath_lib.bench.workload import op_specializations

    skips, out = steps_skipping(spec), {}

    def add(step, n, what):
        out[step] = (n * UNIT_S[step], f"{what} at ~{UNIT_S[step]:g} s")

    if "sweep" not in skips:
        rows, cols, dtypes = sweep_grid(spec, quick=spec.thresholds is None, gpu=True)
        add("sweep", len(rows) * len(cols) * len(dtypes),
            f"{len(rows)} row counts x {len(cols)} widths x {len(dtypes)} dtypes")
    # the GPU run's host cases: the declared ones, else at most every predeclared fallback case (which of them fall
    # back is the predicate's on the GPU, not on the machine that plans)
    n_host = len(spec.host_cases) or sum(c.expected == FALLBACK for c in spec.matrix())
    add("host", n_host + len(spec.host_forms), f"{n_host} host cases")
    if "compile_cost" not in skips:
        n = len(op_specializations(spec) or [])
        out["compile_cost"] = (START_S + n * UNIT_S["compile_cost"], f"{n} binaries at ~{UNIT_S['compile_cost']:g} s "
                                                                     "in a fresh process")
    if "compiled" not in skips:
        add("compiled", len(spec.kernels()), f"{len(spec.kernels())} builds")
    if "compiled_baselines" not in skips:
        add("compiled_baselines", len(pick_compiled_cases(spec)), f"{len(pick_compiled_cases(spec))} cold compiles")
    for step in ("replay", "capture"):
        if step not in skips:
            add(step, 1, "one run")
    add("pr_note", 1, "its two notes")
    return out


def _with_costs(step: Step, costs: dict[str, dict[str, tuple[float, str]]]) -> Step:
    """``step`` with the cost of every op beyond the kit's own that it runs added to its expected seconds and
    basis."""
    extra = [(name, *c[step.name]) for name, c in costs.items() if step.name in c]
    if not extra:
        return step
    return dataclasses.replace(step, est_s=round((step.est_s or step.min_s) + sum(s for _, s, _ in extra)),
                               basis=step.basis + "; plus " + "; ".join(f"{name}: {what}, {s:.0f} s"
                                                                        for name, s, what in extra))


def sweep_line(spec) -> str:
    """What the evidence run's sweep does for ``spec``, from its fields: the full or the quick sweep (``thresholds``),
    its grid, where its widths come from (``axes``), whether it lowers the row threshold (``lower_threshold``)."""
    from fastpath_lib.bench.sweep import sweep_grid

    quick = spec.thresholds is None
    rows, cols, dtypes = sweep_grid(spec, quick=quick, gpu=True)
    parts = [("the quick sweep (OpSpec.thresholds not declared: no threshold is recorded)" if quick
              else "the full sweep, its proposal recorded (OpSpec.thresholds)")
             + f", {len(rows)} row counts x width {', '.join(map(str, cols))} x {len(dtypes)} dtypes",
             "widths from OpSpec.axes" if spec.axes is not None else
             "widths read from its matrix (OpSpec.axes not declared: " + ("its middle --quick width" if quick else
                                                                           "its fast cases' widths") + ")",
             "the row threshold lowered to 1 (OpSpec.lower_threshold)" if spec.lower_threshold is not None else
             "the dispatched call timed as it dispatches (OpSpec.lower_threshold not declared: no lower threshold "
             "can be found)"]
    return "sweep: " + "; ".join(parts)


def all_steps(with_: tuple[str, ...] = ()) -> tuple[Step, ...]:
    """The plan for every operator registered now (:func:`fastpath_lib.opspec.names`): the shared and RMSNorm's
    steps, each other op's :func:`op_steps`, then the steps every op shares by job, the host step, the compiled
    baselines and the PR note; ``with_`` adds :data:`OPTIONAL` steps (after the tests). A shared step's expected
    seconds are the kit's own ops' plus, for each other op it runs, :func:`op_costs` from that op's spec."""
    from fastpath_lib import opspec

    unknown = [n for n in with_ if n not in OPTIONAL]
    if unknown:
        raise ValueError(f"no optional step {unknown}; there are: {', '.join(OPTIONAL)}")
    names = opspec.names()
    head = _steps_before_ops(names[0], ",".join(names))
    extra = tuple(OPTIONAL[n][0] for n in with_)
    tests = [i for i, s in enumerate(head) if s.name.endswith("_tests")][-1] + 1
    ops = tuple(s for n in names[1:] for s in op_steps(n))
    costs = {n: op_costs(opspec.get(n)) for n in names if n not in opspec.built_in()}
    steps = (*head[:tests], *extra, *head[tests:], *ops, *_steps_after_ops(",".join(names)))
    return tuple(_with_costs(s, costs) for s in steps)


#: The plan at import (the ops registered by name in :mod:`fastpath_lib.opspec`).
STEPS: tuple[Step, ...] = all_steps()


def allot(left_s: float, steps) -> float:
    """The first of ``steps``' budget with ``left_s`` seconds left for them all. On schedule (at least the sum of their
    expected seconds left), its expected seconds plus its share of the surplus, in proportion to them; behind schedule,
    its minimum plus a share of what is left above all the minimums, in proportion to how much more than its minimum
    it expects to need (by weight when no step expects more than its minimum). Time a step does not use flows onward.

    >>> a, b = Step("a", "", 1, "m:f", min_s=10, est_s=20), Step("b", "", 1, "m:f", min_s=20, est_s=60)
    >>> allot(160, (a, b)), allot(50, (a, b)), allot(25, (a, b))
    (40.0, 14.0, 10.0)
    """
    first = steps[0]
    ests = sum(s.est_s or s.min_s for s in steps)
    e0 = first.est_s or first.min_s
    if left_s >= ests:
        return e0 + (left_s - ests) * e0 / ests if ests else left_s
    slack = max(0.0, left_s - sum(s.min_s for s in steps))
    extra = sum((s.est_s or s.min_s) - s.min_s for s in steps)
    share = (e0 - first.min_s) / extra if extra > 0 else first.weight / (sum(s.weight for s in steps) or 1.0)
    return first.min_s + slack * share


def plan(budget_s: float, steps=STEPS) -> list[tuple[Step, float]]:
    """Each step with its nominal budget: :func:`allot` with ``budget_s`` for the whole plan, nothing used yet (each
    step then taking its budget).

    >>> round(sum(b for _, b in plan(480)), 6)
    480.0
    """
    out, left = [], budget_s
    for i, s in enumerate(steps):
        b = allot(left, steps[i:])
        out.append((s, b))
        left -= b
    return out


def fits(budget_s: float, steps=STEPS, preflight_s: float = 0.0, preflight_est_s: float | None = None
         ) -> tuple[bool, str]:
    """Whether the plan fits ``budget_s``: every step's minimum after the preflight's limit (``preflight_s``) and the
    expected total (the preflight's expected ``preflight_est_s``, default its limit) both within it; the line says
    each, with what is left over.

    >>> fits(420)[0]
    True
    """
    need = sum(s.min_s for s in steps) + preflight_s
    expect = sum(s.est_s or s.min_s for s in steps) + (preflight_s if preflight_est_s is None else preflight_est_s)
    ok = need <= budget_s and expect <= budget_s
    line = (f"{need:.0f} s of minimums ({len(steps)} steps{f', preflight {preflight_s:.0f} s' if preflight_s else ''}"
            f") {'fit' if need <= budget_s else 'do NOT fit'} {budget_s:.0f} s; expected {expect:.0f} s "
            f"({budget_s - expect:+.0f} s left over"
            + ("" if expect <= budget_s else ": the expected time does NOT fit; raise --budget-s") + ")")
    return ok, line


def budget_split(budget_s: float, steps=STEPS) -> dict:
    """Each operator's share of the run (``"shared"`` for the steps every op relies on): its steps, its share of the
    nominal seconds; a step serving several ops is split evenly between them.

    >>> split = budget_split(480)
    >>> sorted(split) == sorted({SHARED, *(o for s in STEPS for o in s.ops)})
    True
    >>> round(sum(v["nominal_s"] for v in split.values()))
    480
    """
    out: dict[str, dict] = {}
    for s, b in plan(budget_s, steps):
        for o in s.ops or (SHARED,):
            e = out.setdefault(o, {"steps": [], "nominal_s": 0.0})
            e["steps"].append(s.name)
            e["nominal_s"] += b / max(1, len(s.ops))
    for e in out.values():
        e["share"] = round(e["nominal_s"] / budget_s, 4) if budget_s else 0.0
        e["nominal_s"] = round(e["nominal_s"], 1)
    return out
