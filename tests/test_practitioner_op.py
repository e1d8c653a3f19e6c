"""A practitioner's op unlike RMSNorm (``tests/absmax_op.py``: no weight, forward only, 3-d rows, its own
Triton kernel) through every documented command, with no edit to the kit: ``bench --op module:SPEC --quick`` (the
matrix and the host cost, both notes), ``evidence --op module:SPEC --dry-run``, the registration every child process
of a run sees, the evidence steps under the interpreter, and the generated boundary tests. Its notes must hold no
sentence about another op.

Cost: one quick bench run and the per-op steps on tiny shapes, in this process (no child process, no compile).
"""

from __future__ import annotations

import json
import re

import pytest
import triton
import triton.language as tl

from fastpath_lib import opspec
from fastpath_lib.bench import cli, evidence, evidence_steps
from fastpath_lib.bench.evidence_plan import all_steps
from fastpath_lib.bench.report import NOTE_FILES
from fastpath_lib.bench.step_process import StepContext
from fastpath_lib.boundary import BoundaryCoverageWarning, boundary_points, boundary_tests
from fastpath_lib.triton_casts import round_to, to_fp32
from tests import absmax_op as op
from tests import bias_square_op as sq

REF = "tests.absmax_op:SPEC"
#: Words that belong to another op: a note about the absmax scale must hold none of them.
FOREIGN = re.compile(r"rms|weight|backward|F\.rms_norm|fused|residual", re.IGNORECASE)

# the generated boundary tests, as a practitioner's test file has them: one line (its `device` condition declares
# no boundary point, so generating them warns, naming it)
with pytest.warns(BoundaryCoverageWarning, match=r"absmax_scale: conditions with no boundary point: device \("):
    test_absmax_scale_boundaries = boundary_tests(op.SPEC)


@pytest.fixture(scope="module")
def registered():
    opspec.load(REF)
    yield op.SPEC
    opspec.unregister(op.SPEC.name)


@pytest.fixture(scope="module")
def bench_folder(registered, tmp_path_factory):
    """One quick bench run of the op (matrix and host cost), shared by the tests that read it."""
    import contextlib
    import io

    from fastpath_lib.bench import hostmethod

    out = tmp_path_factory.mktemp("absmax") / "run"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), pytest.MonkeyPatch.context() as mp:
        mp.setattr(hostmethod, "QUICK_BLOCKS", 3)  # what the run reports is read, not its host timings
        assert cli.bench_main(["--op", REF, "--quick", "--out", str(out)]) == 0
    (out.parent / "bench.out").write_text(printed.getvalue())  # what bench printed, for the tests that read it
    return out


def test_bench_runs_the_matrix_and_the_host_cost(bench_folder):
    import pandas as pd

    df = pd.read_csv(bench_folder / "results.csv")
    assert {"tokens_fp16", "wide_fp32"} <= set(df.case_id) and "host_decode_fp16" in set(df.case_id)
    env = json.loads((bench_folder / "environment.json").read_text())
    assert env["op"] == "absmax_scale" and env["op_ref"] == REF


def test_its_results_csv_gives_no_bandwidth_from_cpu_timings(bench_folder):
    """prac14: ``results.csv`` had a ``gbps`` on CPU rows (0.117 for an eager baseline). Every timed row of a run
    that is not a GPU measurement leaves ``gbps`` and ``pct_copy_bw`` empty and says why in its note."""
    import pandas as pd

    from fastpath_lib.bench.schema import NO_BANDWIDTH

    df = pd.read_csv(bench_folder / "results.csv")
    timed = df[(df.status == "ok") & (df.family != "host-overhead")]
    assert len(timed) and not timed.gpu_measurement.any()
    assert timed.gbps.isna().all() and timed.pct_copy_bw.isna().all(), timed[["case_id", "provider", "gbps"]]
    assert timed.note.str.contains(NO_BANDWIDTH, regex=False).all(), timed.note.tolist()


def test_bench_and_the_notes_warn_of_a_short_matrix_and_of_conditions_no_boundary_point_probes(bench_folder):
    """The op's 2 cases and its `device` condition (no boundary point) are warned of, read from its spec, in bench's
    output and in the notes (summary and eligibility); an op with neither gap (RMSNorm) gets no such warning."""
    n = len(op.SPEC.matrix())
    printed = (bench_folder.parent / "bench.out").read_text()
    assert f"warning: absmax_scale: {n} cases (the kit asks for at least {opspec.MIN_CASES})" in printed, printed
    assert "warning: absmax_scale: conditions with no boundary point: device" in printed, printed
    note = (bench_folder / "pr_note.md").read_text()
    head, elig = note.split("## Eligibility region and fallback")
    assert f"{n} cases (the kit asks for at least {opspec.MIN_CASES})" in head.split("## Summary")[1]
    assert "conditions with no boundary point: device**" in elig.split("\n## ")[0]
    vllm = (bench_folder / "pr_note_vllm.md").read_text()
    assert "conditions with no boundary point: device" in vllm and f"{n} cases (the kit asks for at least" in vllm
    rms = opspec.get("rms_norm")
    assert rms.coverage_gaps() == [] and len(rms.matrix()) >= opspec.MIN_CASES


@pytest.mark.parametrize("note", sorted(NOTE_FILES.values()))
def test_every_sentence_of_its_notes_is_its_own(bench_folder, note):
    text = (bench_folder / note).read_text()
    foreign = [line for line in text.splitlines() if FOREIGN.search(line)]
    assert not foreign, f"{note} speaks of another op:\n" + "\n".join(foreign[:12])
    assert f"--op {REF}" in text  # the rerun command works in a fresh process


def test_every_process_of_a_run_registers_the_op(registered, monkeypatch):
    """``evidence --op module:SPEC`` exports the reference; a fresh registry (a child process's) registers the op
    from it, so a step's ``opspec.get(NAME)`` finds it."""
    monkeypatch.delenv(opspec.ENV_VAR, raising=False)
    monkeypatch.setattr(evidence, "dry_run", lambda budget, steps: 0)
    assert evidence.main(["--op", REF, "--dry-run"]) == 0
    import os

    assert REF in os.environ[opspec.ENV_VAR].split(",")
    opspec.unregister("absmax_scale")  # as a child starts: nothing registered but the built-in ops
    monkeypatch.setattr(opspec, "_declared_loaded", [])
    assert "absmax_scale" in opspec.names() and opspec.get("absmax_scale") is op.SPEC


def test_the_dry_run_plans_every_per_op_step_for_it(registered, capsys, monkeypatch):
    monkeypatch.setattr(evidence_steps, "collect_tests", lambda: (True, "not collected here"))
    steps = all_steps()
    assert "absmax_scale_matrix" in [s.name for s in steps]
    per_op = [s.name for s in steps if "absmax_scale" in s.ops]
    assert {"absmax_scale_matrix", "sweep", "capture", "replay", "compile_cost", "compiled"} <= set(per_op)
    own = next(s for s in steps if s.name == "absmax_scale_matrix")  # its cost read from its spec
    assert own.min_s >= evidence.START_S + 3 and "2 cases x 3 providers" in own.basis, own
    from fastpath_lib.bench.preflight import PREFLIGHT_EST_S, PREFLIGHT_S

    expect = sum(s.est_s for s in steps) + PREFLIGHT_EST_S
    for budget in (expect + 1, expect - 1):  # the minimums fit both; the expected time fits only the first
        assert sum(s.min_s for s in steps) + PREFLIGHT_S <= budget
        evidence.dry_run(budget, steps, collect=False)
        out = capsys.readouterr().out
        assert ("dry run: the plan fits" in out) == (budget > expect), out[-600:]
    assert "op absmax_scale: step replay skips it: decoder_step (OpSpec.decoder_step) is not declared" in out
    # prac13 F4: every step that skips it is listed, compiled_baselines (no `compiled` baseline) among them
    assert ("step compiled_baselines skips it: a `compiled` entry in baselines (OpSpec.baselines) is not declared"
            in out), out[-1500:]
    assert "op rms_norm: every per-op step runs it" in out


def test_the_dry_run_speaks_of_no_norm_but_the_kit_s_own_ops_by_name(registered, capsys, monkeypatch):
    """prac14: the dry run of a run with a practitioner's op said "every norm that step", "a cold Inductor compile
    of a norm", "RMSNorm's proposal": words of the kit's op in the texts of steps that run every op. Every text of
    the plan names an op by its spec's name; with the kit's own ops' names taken out, no norm is left."""
    monkeypatch.setattr(evidence_steps, "collect_tests", lambda: (True, "not collected here"))
    evidence.dry_run(10_000, all_steps(), collect=False)
    text = capsys.readouterr().out
    assert "absmax_scale" in text
    for name in sorted(opspec.built_in(), key=len, reverse=True):  # fused_add_rms_norm before rms_norm
        text = text.replace(name, "KIT_OP")
    leftover = [line for line in text.splitlines() if re.search(r"norm|\bfused\b", line, re.IGNORECASE)]
    assert not leftover, "\n".join(leftover)


def test_the_plan_counts_its_cost_in_every_shared_step_that_runs_it_read_from_its_spec(registered, monkeypatch):
    """Each shared step that runs the op (not those that skip it) expects the op's cost on top of the kit's own ops',
    read from its spec (the full sweep, with ``thresholds``, costs more than the quick one); the dry run's line says
    what the sweep does for an op without ``thresholds``, ``axes`` or ``lower_threshold``."""
    import dataclasses

    from fastpath_lib.bench import evidence_plan

    with_op = {s.name: s for s in all_steps()}
    kit_only = opspec.built_in()
    monkeypatch.setattr(opspec, "built_in", lambda: (*kit_only, "absmax_scale"))  # as if its cost were in the figures
    base = {s.name: s for s in all_steps()}
    costs = evidence_plan.op_costs(op.SPEC)
    assert {"sweep", "host", "pr_note"} <= set(costs) and not {"replay", "compile_cost", "capture"} & set(costs)
    for name, (seconds, what) in costs.items():
        assert seconds > 0 and with_op[name].est_s == round(base[name].est_s + seconds), name
        assert f"absmax_scale: {what}" in with_op[name].basis
    full = evidence_plan.op_costs(dataclasses.replace(op.SPEC, thresholds=object()))
    assert full["sweep"][0] > costs["sweep"][0]
    line = evidence_plan.sweep_line(dataclasses.replace(op.SPEC, axes=None))
    assert "the quick sweep (OpSpec.thresholds not declared" in line and "OpSpec.axes not declared" in line
    assert "OpSpec.lower_threshold not declared" in line


@pytest.mark.parametrize("step", ["matrix", "sweep", "replay", "compile_cost", "compiled_facts", "capture"])
def test_each_evidence_step_runs_it_or_names_the_missing_field(registered, tmp_path, step, monkeypatch):
    from fastpath_lib.bench import capture, opbench

    quick = opbench.settings_for(True)  # the steps are under test here, not the timings: the shortest budgets
    monkeypatch.setattr(opbench, "settings_for", lambda q: dict(quick, target_s=0.01, min_reps=3, max_reps=3))
    target = capture.step if step == "capture" else getattr(evidence_steps, step)
    ctx = StepContext(out=tmp_path, budget_s=25.0, started=__import__("time").monotonic(), op="absmax_scale")
    ctx.write_json("copy_bandwidth.json", {"gbps": 10.0, "label": "copy (test)", "device_name": "cpu"})  # not timed
    res = target(ctx)
    assert res["status"] in ("ran", "skipped", "partial"), res
    if res["status"] == "skipped":  # what the op leaves out is named as the spec's field
        assert "OpSpec." in res["why"] and "not declared" in res["why"], res
    assert "rms" not in json.dumps(res).lower(), res


def test_the_boundary_points_use_its_case_class(registered):
    points = boundary_points(spec=op.SPEC)
    assert all(isinstance(p.spec, op.Case) for p in points)
    assert {p.id for p in points} == {"dtype[bf16]", "dtype[fp64]", "cols[cols=max]", "cols[cols=max+1]",
                                      "contiguous[transposed]"}


def test_a_boundary_naming_a_field_the_case_class_lacks_names_the_condition_the_field_and_the_fix():
    """A boundary that sets `requires_grad`, on a spec whose case class (the kit's default, ``CaseSpec``) has no such
    field, is refused with the condition, the boundary's label, the field and ``OpSpec.case_spec``; so is a base case
    naming one; the op's own case class (which takes the fields it declares) gives the points."""
    import dataclasses

    from fastpath_lib.eligibility import Boundary, Condition, Predicate

    grad = Condition("no_grad", "no autograd recording", lambda call: None, "autograd",
                     boundaries=(Boundary("requires grad", {"requires_grad": True}, False),))
    spec = dataclasses.replace(op.SPEC, case_spec=None, predicate=Predicate("p", [*op.PREDICATE.conditions, grad]))
    with pytest.raises(ValueError, match=r"^no_grad\[requires grad\]: the boundary changes `requires_grad`, not a "
                                         r"field of CaseSpec; declare OpSpec\.case_spec"):
        boundary_points(spec=spec)
    with pytest.raises(ValueError, match=r"^OpSpec\.boundary_base names `seq`, not a field of Case; declare "
                                         r"OpSpec\.case_spec"):
        boundary_points(spec=dataclasses.replace(op.SPEC, boundary_base={**op.SPEC.boundary_base, "seq": 2}))
    assert len(boundary_points(spec=op.SPEC)) == sum(len(c.boundaries) for c in op.PREDICATE.conditions)


def _doc_blocks() -> list[str]:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "practitioners.md").read_text()
    return re.findall(r"```python\n(.*?)```", text, re.S)


def test_the_worked_example_in_the_docs_runs_as_written(monkeypatch, tmp_path):
    """docs/practitioners.md's whole op (no weight, no backward) and its one-line test file, run as printed: the
    generated boundary tests pass and a quick matrix times it."""
    from fastpath_lib.bench import opbench
    from fastpath_lib.boundary import check_point

    module, test_file = _doc_blocks()[:2]
    (tmp_path / "my_ops.py").write_text(module)
    (tmp_path / "test_my_ops.py").write_text(test_file)
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = opspec.load("my_ops:SPEC")
    try:
        namespace: dict = {}
        with pytest.warns(BoundaryCoverageWarning, match="conditions with no boundary point: device"):
            exec(compile(test_file, "test_my_ops.py", "exec"), namespace)
        assert callable(namespace["test_row_absmax_boundaries"])
        points = boundary_points(spec=spec)
        assert len(points) == 3 and all(check_point(spec, p) is None for p in points), [check_point(spec, p)
                                                                                        for p in points]
        quick = opbench.settings_for(True)
        monkeypatch.setattr(opbench, "settings_for", lambda q: dict(quick, target_s=0.01, min_reps=3, max_reps=3))
        df = opbench.run_op(spec, quick=True)
        assert set(df.case_id) == {"prefill_fp16", "prefill_bf16", "toowide_fp32"}
        assert set(df.status) <= {"ok", "skipped"}, df[["case_id", "provider", "status", "note"]]
    finally:
        opspec.unregister(spec.name)


def test_the_capture_step_merges_each_declaring_ops_part(registered, tmp_path):
    """An op that declares a capture test gets its part run within the step's time and written beside the others';
    the verdict passes only when every op and path passed."""
    import dataclasses
    import time

    from fastpath_lib.bench import capture

    def part(ok):
        return lambda deadline, log: {"cases": [{"op": "absmax_scale", "ok": ok}],
                                      "declared": {"absmax_scale": {"eager": 1}},
                                      "verdicts": {"absmax_scale": {"eager": {"passed": ok, "why": "w", "cases": 1}}}}

    for ok, status in ((True, "ran"), (False, "failed")):
        opspec.register(dataclasses.replace(op.SPEC, capture=part(ok)), replace=True)
        ctx = StepContext(out=tmp_path, budget_s=20.0, started=time.monotonic(), op="absmax_scale")
        res = capture.step(ctx)
        data = json.loads((tmp_path / capture.RESULTS_NAME).read_text())
        assert res["status"] == status and data["passed"] is ok and data["declared"] == {"absmax_scale": {"eager": 1}}
    opspec.register(op.SPEC, replace=True)


def test_the_pr_note_step_drafts_its_note_beside_its_results(bench_folder, tmp_path):
    import shutil
    import time

    shutil.copytree(bench_folder, tmp_path / "run")  # stands in for the default op's files too
    shutil.copytree(bench_folder, tmp_path / "run" / "ops" / "absmax_scale")
    ctx = StepContext(out=tmp_path / "run", budget_s=20.0, started=time.monotonic())
    res = evidence_steps.pr_note(ctx)
    note = (tmp_path / "run" / "ops" / "absmax_scale" / "pr_note.md").read_text()
    assert res["status"] == "ran" and "ops/absmax_scale/pr_note.md" in res["why"], res
    assert op.SPEC.title in note and not [line for line in note.splitlines() if FOREIGN.search(line)]


def _binary(rows, cols, dtype):
    """The absmax kernel's binary: one per dtype and block (its launcher's one rule); ``None`` past one block."""
    import triton

    return {"kernel": "absmax_scale_kernel", "dtype": str(dtype)[6:], "BLOCK_SIZE": triton.next_power_of_2(cols)} \
        if cols <= op.MAX_COLS else None


def _step(fn, delta, residual, weight, eps):
    """Where the scale sits in a pre-norm decoder, as a practitioner might place it: on the residual stream."""
    s = residual + delta
    return fn(s), s


#: The op with the two fields the replay and the compile cost read (module level: a fresh process finds it).
DECLARING = __import__("dataclasses").replace(op.SPEC, specialization=_binary, decoder_step=_step)


@pytest.mark.parametrize("step", ["replay", "compile_cost"])
def test_replay_and_compile_cost_run_it_from_its_spec_even_as_the_default_op(registered, tmp_path, step, monkeypatch):
    """With the fields declared, the step runs the op through them, also where the op is the default op (its files at
    the top of the folder): the step reads no op by name."""
    import time

    from fastpath_lib.bench import workload

    opspec.register(DECLARING, replace=True)
    monkeypatch.setattr(evidence_steps, "primary", lambda: "absmax_scale")
    quick = workload.settings_for(True)
    monkeypatch.setattr(workload, "settings_for", lambda q: dict(quick, target_s=0.01, min_reps=3, max_reps=3))
    try:
        res = getattr(evidence_steps, step)(StepContext(out=tmp_path, budget_s=25.0, started=time.monotonic(),
                                                        op="absmax_scale"))
    finally:
        opspec.register(op.SPEC, replace=True)
    saved = json.loads((tmp_path / f"{step}.json").read_text())
    assert res["status"] == "ran" and saved["op"] == "absmax_scale", res
    assert not re.search(r"\brms|fused", json.dumps([res, saved]), re.IGNORECASE), res  # the decoder's "norms" aside
    if step == "replay":  # every norm of the decoder was its step, each call routed by its predicate
        assert saved["baseline"] == "torch_eager" and saved["logits_close"], saved
        assert saved["fast_model_routes"] == {"triton": saved["norm_calls_per_forward"]}
        assert saved["trace"]["totals"]["calls"] > 0
    else:  # its one forward case expected fast, at full size: one binary
        assert [(s["cases"], s["BLOCK_SIZE"], s["dtype"]) for s in saved["list"]] == [(["tokens_fp16"], 256, "float16")]


@pytest.mark.parametrize("found", ["absent", "provided", "unchecked"])
def test_naming_a_vllm_ir_op_the_kits_patch_does_not_provide_proposes_no_patch(bench_folder, found):
    """The kit's vLLM patch provides other IR ops: the vLLM form stays the op's own, says that no patch is generated,
    and says what the run's vLLM dispatch rows found in vLLM's registry (``IrOp.registry``): the op provides the IR
    op only where vLLM has it, with no sentence about another op."""
    import dataclasses

    import pandas as pd

    from fastpath_lib.bench import vllmhost
    from fastpath_lib.bench.report import pr_note

    name = "gelu_and_mul_sparse"
    spec = dataclasses.replace(op.SPEC, pr_text={**op.SPEC.pr_text, "vllm_op": name})
    df = pd.read_csv(bench_folder / "results.csv")
    env = json.loads((bench_folder / "environment.json").read_text())
    vrows = {"absent": vllmhost._skipped([name], f"vLLM 0.33.0 has no IR op {name} (vllm.ir.op.IrOp.registry)"),
             "provided": [dict(r, status="ok", note="", min_us=1.0, rows=r["rows"] or 8)
                          for r in vllmhost._skipped([name], "")],
             "unchecked": []}[found]
    note = pr_note(df=pd.concat([df, pd.DataFrame(vrows)], ignore_index=True), env=env, spec=spec, template="vllm")
    assert "no vLLM patch is generated" in note and op.SPEC.title in note
    provides = f"The op provides `vllm.ir.ops.{name}`" in note
    assert provides == (found == "provided"), note[:1500]
    assert (f"vLLM 0.33.0 has no IR op {name}" in note) == (found == "absent")
    assert ("was not checked" in note) == (found == "unchecked")
    assert not [line for line in note.splitlines() if FOREIGN.search(line)], note[:2000]


# --- the op with planted faults: what the generated tests, bench and the note must catch --------------------------

def _wrong_fast(x):
    """The Triton route 2% off."""
    return op.fast(x) * 1.02


def _wrong(x):
    return _wrong_fast(x) if op.route(x) == "triton" else op.reference(x)


#: The op with a wrong fast route (``--op tests.test_practitioner_op:WRONG``).
WRONG = __import__("dataclasses").replace(op.SPEC, name="absmax_wrong", function=_wrong, fast=_wrong_fast)


def _oob_kernel_source():
    import triton
    import triton.language as tl

    @triton.jit
    def oob_kernel(X_ptr, Y_ptr, n_cols, BLOCK_SIZE: tl.constexpr):
        """The absmax kernel with its store mask one lane too wide."""
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK_SIZE)
        x = tl.load(X_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        peak = tl.max(tl.abs(x), axis=0)
        tl.store(Y_ptr + row * n_cols + cols, (x / tl.where(peak > 0, peak, 1.0)).to(Y_ptr.dtype.element_ty),
                 mask=cols <= n_cols)

    return oob_kernel


def _oob_fast(x):
    import torch
    import triton

    y = torch.empty_like(x)
    n = x.shape[-1]
    _oob_kernel_source()[(x.numel() // n,)](x, y, n, BLOCK_SIZE=2 * triton.next_power_of_2(n))
    return y


def _oob(x):
    return _oob_fast(x) if op.route(x) == "triton" else op.reference(x)


OOB = __import__("dataclasses").replace(op.SPEC, name="absmax_oob", function=_oob, fast=_oob_fast)


@pytest.fixture
def short_timing(monkeypatch):
    from fastpath_lib.bench import opbench

    quick = opbench.settings_for(True)  # what the run reports is under test here, not the timings
    monkeypatch.setattr(opbench, "settings_for", lambda q: dict(quick, target_s=0.01, min_reps=3, max_reps=3))


def test_a_wrong_fast_route_fails_bench_and_heads_both_notes(short_timing, tmp_path):
    """The wrong route's rows are errors; the baseline (the reference itself) is timed as usual; bench exits 1; both
    notes open with how many cases are wrong."""
    import pandas as pd

    out = tmp_path / "wrong"
    try:
        assert cli.bench_main(["--op", "tests.test_practitioner_op:WRONG", "--quick", "--family", "matrix",
                               "--out", str(out)]) == 1
    finally:
        opspec.unregister(WRONG.name)
    df = pd.read_csv(out / "results.csv").set_index(["case_id", "provider"])
    assert df.loc[("tokens_fp16", "dispatched"), "status"] == "error" == df.loc[("tokens_fp16", "triton"), "status"]
    assert "differs from the reference" in df.loc[("tokens_fp16", "dispatched"), "note"]
    base = df.loc[("tokens_fp16", "baseline")]
    assert base.status == "ok" and base.median_us > 0, base
    assert df.loc[("wide_fp32", "dispatched"), "status"] == "ok"  # the fallback case is right
    for name in NOTE_FILES.values():
        body = (out / name).read_text().split("## ", 2)[1]  # the first section: Summary, or vLLM's Purpose
        first_line = body.splitlines()[2]
        assert first_line.startswith("**1 of 2 cases wrong"), (name, first_line)
    assert "**wrong 1**." in (out / "pr_note.md").read_text()


def test_an_out_of_bounds_store_fails_the_generated_tests_and_bench(short_timing):
    from fastpath_lib.bench import opbench

    point = next(p for p in boundary_points(spec=OOB) if p.id == "cols[cols=max]")
    with pytest.warns(BoundaryCoverageWarning):  # its `device` condition has no boundary point
        generated = boundary_tests(OOB)
    with pytest.raises(AssertionError, match="out-of-bounds access"):
        generated(point)
    df = opbench.run_op(OOB, quick=True, only=["tokens_fp16"])
    row = df[df.provider == "dispatched"].iloc[0]
    assert row.status == "error" and "out-of-bounds" in row.note and row.median_us > 0, row.to_dict()
    from fastpath_lib.bench.analysis import wrong_cases

    assert list(wrong_cases(df)) == ["tokens_fp16"]


def _drifted(x):
    """A dispatch whose own width rule is one column short of the predicate's (``<`` where it says ``<=``)."""
    return op.fast(x) if op.route(x) == "triton" and x.shape[-1] < op.MAX_COLS else op.reference(x)


def _always_fast(x):
    """A dispatch that launches the kernel on every input it can take (a contiguous copy of a strided one)."""
    return op.fast(x.contiguous()) if x.dtype in op.DTYPES and x.shape[-1] <= op.MAX_COLS else op.reference(x)


#: The op with a dispatch that drifted from its predicate, each with ``route`` left to the kit (derived from the
#: predicate, as the docs' example writes it): a route report alone cannot tell them from the op.
DRIFTED = __import__("dataclasses").replace(op.SPEC, name="absmax_drifted", function=_drifted, route=None)
ALWAYS_FAST = __import__("dataclasses").replace(op.SPEC, name="absmax_always_fast", function=_always_fast, route=None)


@pytest.mark.parametrize("spec, point_id, said", [
    (DRIFTED, "cols[cols=max]", "the predicate says triton, the call launched no Triton kernel: it took the fallback"),
    (ALWAYS_FAST, "contiguous[transposed]",
     "the predicate says fallback, the call launched absmax_scale_kernel: it took the Triton route")],
    ids=["drifted", "always_fast"])
def test_the_generated_tests_read_the_route_from_what_the_call_launched(spec, point_id, said):
    """Both drifted dispatches give the reference's values and a ``route`` that agrees with the predicate; the point
    fails on the route the call took, naming the point, the predicate's route and what was launched. The op itself
    passes the same point."""
    from fastpath_lib.boundary import check_point

    point = next(p for p in boundary_points(spec=spec) if p.id == point_id)
    assert spec.route(*spec.args(point.spec.build(seed=7))) == ("triton" if point.holds else "fallback")
    assert check_point(spec, point) == f"{point_id}: {said}"
    assert check_point(op.SPEC, point) is None


def test_a_declared_route_that_drifts_fails_with_the_documented_message():
    """prac14: a spec's own ``route`` (its dispatch's booleans, ``<`` where the predicate says ``<=``) failed its
    point with ``dispatched to fallback, the predicate says triton ([])``, not the documented form. It fails with the
    message docs/practitioners.md prints, word for word; where the predicate says fallback, the failed conditions
    follow it, never an empty list."""
    import dataclasses
    import pathlib

    from fastpath_lib.boundary import check_point

    def route(x):
        return "triton" if op.route(x) == "triton" and x.shape[-1] < op.MAX_COLS else "fallback"

    drifted = dataclasses.replace(DRIFTED, name="absmax_route_drifted", route=route)
    edge = next(p for p in boundary_points(spec=drifted) if p.id == "cols[cols=max]")
    doc = (pathlib.Path(__file__).parents[1] / "docs" / "practitioners.md").read_text()
    said = check_point(drifted, edge)
    assert said == "cols[cols=max]: the predicate says triton, OpSpec.route says fallback"
    assert f"`{said}`" in " ".join(doc.split()), "docs/practitioners.md does not print the message the check gives"
    always = dataclasses.replace(op.SPEC, name="absmax_always_triton", route=lambda x: "triton")
    beyond = next(p for p in boundary_points(spec=always) if not p.holds and p.condition == "cols")
    said = check_point(always, beyond)
    assert said.startswith(f"{beyond.id}: the predicate says fallback (cols: ") and said.endswith(
        "), OpSpec.route says triton") and "[]" not in said, said


def test_bench_marks_a_dispatched_row_whose_route_is_not_the_predicate_s(short_timing):
    """The dispatched call that falls back where the predicate says triton is an error row, untimed, its route column
    the route it took; the fast route called directly is right and timed."""
    from fastpath_lib.bench import opbench

    drifted = __import__("dataclasses").replace(DRIFTED, cases=[opspec.OpCase(
        "edge_fp32", 2, op.MAX_COLS, "float32", "win", "exactly the widest row", quick=(2, op.MAX_COLS))])
    df = opbench.run_op(drifted, quick=True).set_index("provider")
    row = df.loc["dispatched"]
    assert row.status == "error" and not row.median_us > 0, row.to_dict()
    assert row.note == ("route: the predicate says triton, the call launched no Triton kernel: it took the "
                        "fallback") and row.route == "fallback"
    assert df.loc["triton", "status"] == "ok"


def _wrong_backward_fast(dy, x, b):
    """``fast_backward`` with the derivative's factor 1 instead of 2."""
    sq.forward(x, b)
    return sq.backward(dy, x, 1.0)


@pytest.mark.parametrize("wrong, said", [
    (dict(function=lambda x, b: sq.with_scale(1.0)(x, b) if sq.PREDICATE.evaluate((x, b)).eligible
          else sq.reference(x, b)), "gradients: gradient of x: max error"),
    (dict(fast_backward=_wrong_backward_fast), "fast route's gradients (fast_backward): gradient of x: max error")],
    ids=["public_function", "fast_backward"])
def test_the_generated_tests_compare_gradients_where_the_spec_declares_a_backward(wrong, said):
    """Every point the predicate takes compares the gradients too, at the spec's gradient tolerance: a wrong backward
    (the public function's autograd, or the spec's ``fast_backward``) fails each such point, naming the input; the
    points it turns down, and the op itself, pass."""
    from fastpath_lib.boundary import check_point

    spec = __import__("dataclasses").replace(sq.SPEC, **wrong)
    points = boundary_points(spec=spec)
    failed = {p.id: check_point(spec, p) for p in points}
    taken = {p.id for p in points if p.holds}
    assert taken == {"dtype[fp16]", "cols[cols=max]"}
    assert all(failed[i].startswith(f"{i}: {said}") for i in taken), failed
    assert all(failed[p.id] is None for p in points if not p.holds), failed
    assert [check_point(sq.SPEC, p) for p in points] == [None] * len(points)


def test_the_notes_of_an_op_with_a_backward_and_a_bias_say_nothing_of_a_weight(short_timing):
    """Both notes of an op with a backward and a per-column vector that is no weight: the counted-traffic table names
    the vector by the op's own argument (``bias``), in whole passes plus ``w`` for the forward and the backward, and no
    sentence speaks of a weight, a residual, RMSNorm or rows read twice (the op declares no ``pr_text["traffic"]``)."""
    from fastpath_lib.bench import opbench
    from fastpath_lib.bench.report import pr_note

    df = opbench.run_op(sq.SPEC, quick=True, only=["rows_fp32", "train_fp32"])
    assert set(df.status) == {"ok"}, df[["case_id", "provider", "status", "note"]]
    for template in NOTE_FILES:
        note = pr_note(df=df, env=df.attrs["environment"], spec=sq.SPEC, template=template)
        assert "plus w, a vector one row wide (`bias`), counted once per launch that reads it" in note, template
        assert "| rows_fp32 | forward | 4x64 | 1 |" in note and "| 2 + w |" in note and "| 5 + w |" in note
        foreign = [line for line in note.splitlines()
                   if re.search(r"weight|residual|rms|reads each row twice", line, re.IGNORECASE)]
        assert not foreign, (template, foreign)


def test_without_cuda_or_the_interpreter_nothing_claims_the_kernel_ran(monkeypatch, bench_folder, tmp_path):
    """The generated tests fail saying no kernel would run; bench refuses an explicit TRITON_INTERPRET=0; the note
    of a run without the interpreter says no Triton kernel ran."""
    import sys

    import pandas as pd

    from fastpath_lib import runtime
    from fastpath_lib.bench.report import pr_note

    point = boundary_points(spec=op.SPEC)[0]
    monkeypatch.setattr(runtime, "cuda_available", lambda: False)
    monkeypatch.setattr(runtime, "_interpret", False)
    monkeypatch.setattr(runtime, "_opted_in", False)
    with pytest.warns(BoundaryCoverageWarning):  # its `device` condition has no boundary point
        generated = boundary_tests(op.SPEC)
    with pytest.raises(AssertionError, match="no Triton kernel would run"):
        generated(point)
    monkeypatch.setenv(runtime.ENV, "0")
    assert cli.bench_main(["--op", REF, "--quick", "--out", str(tmp_path / "off")]) == 2
    assert not (tmp_path / "off").exists()
    # unset, the command opts in as ./kit does (before any kernel is imported: Triton decides then)
    monkeypatch.delenv(runtime.ENV)
    monkeypatch.setattr(runtime, "_interpret", None)
    monkeypatch.delitem(sys.modules, runtime._KERNELS)
    assert cli.interpreter_or_refuse() is None and runtime.interpreter_enabled()
    env = dict(json.loads((bench_folder / "environment.json").read_text()), interpreter=False)
    note = pr_note(df=pd.read_csv(bench_folder / "results.csv"), env=env, spec=op.SPEC)
    assert "no Triton kernel ran" in note and "Triton interpreter)" not in note


def test_the_limitations_name_the_layouts_the_matrix_ran(bench_folder):
    """The note's sentence on what the matrix timed is read off the cases run: a strided case is named as such."""
    import pandas as pd

    from fastpath_lib.bench.report import pr_note

    df = pd.read_csv(bench_folder / "results.csv")
    env = json.loads((bench_folder / "environment.json").read_text())
    plain = pr_note(df=df, env=env, spec=op.SPEC)
    assert "the forward pass on `contiguous` inputs (the layouts of its 2 cases run)" in plain
    df.loc[df.case_id == "wide_fp32", "layout"] = "transposed"
    strided = pr_note(df=df, env=env, spec=op.SPEC, template="vllm")
    assert "the forward pass on `contiguous` and `transposed` inputs" in strided


def test_each_analysis_it_lacks_names_the_field_it_needs(bench_folder, capsys):
    """bench --op's output and the note say why each absent analysis did not run: the spec field it needs, or (the
    field declared) the evidence step that runs it."""
    import dataclasses

    from fastpath_lib.bench.report import pr_note

    cli.print_not_run(op.SPEC)
    out = capsys.readouterr().out
    assert "replay.json (the workload replay): not run: decoder_step (OpSpec.decoder_step) is not declared" in out
    assert "compiled.json (the compiled-code facts): not run: kernels (OpSpec.kernels), compiler" in out
    note = pr_note(bench_folder, spec=op.SPEC)
    assert ("Not run: decoder_step (OpSpec.decoder_step) is not declared by the op's spec; the replay runs a small "
            "decoder with the op as its every normalization step, so it fits normalization ops only.") in note
    assert "specialization (OpSpec.specialization) is not declared" in note
    declared = pr_note(bench_folder, spec=dataclasses.replace(op.SPEC, decoder_step=_step))
    assert "Not run: the GPU evidence run's `replay` step runs it" in declared


def test_a_folder_s_note_loads_the_op_its_environment_names(bench_folder, tmp_path):
    """pr_note(DIR) in a process where the op is not registered loads it from environment.json's ``op_ref``."""
    import shutil

    from fastpath_lib.bench.report import pr_note

    folder = tmp_path / "run"
    shutil.copytree(bench_folder, folder)
    opspec.unregister(op.SPEC.name)  # as in a fresh process
    try:
        assert op.SPEC.title in pr_note(folder, template="vllm")
        assert op.SPEC.name in opspec.names()
        env = json.loads((folder / "environment.json").read_text())
        (folder / "environment.json").write_text(json.dumps(dict(env, op_ref="tests.no_such_module:SPEC")))
        opspec.unregister(op.SPEC.name)
        with pytest.raises(ValueError, match="op_ref"):
            pr_note(folder)
    finally:
        opspec.register(op.SPEC, replace=True)


def _launchable(x):
    """The fast route's own limit (what ``fast_unsupported`` declares): one block per row."""
    return None if x.shape[-1] <= 2 * op.MAX_COLS else f"{x.shape[-1]} columns, more than one block"


#: A right public function with a wrong fast route that the spec times outside the predicate (``fast_unsupported``).
WRONG_OUTSIDE = __import__("dataclasses").replace(op.SPEC, name="absmax_wrong_outside", fast=_wrong_fast,
                                                  fast_unsupported=_launchable)


def test_a_wrong_fast_route_is_never_timed_where_fast_unsupported_lets_it_run(short_timing):
    """Every ``triton`` row that would be timed is checked first, inside the predicate (``tokens_fp16``) and outside
    it (``wide_fp32``, which the predicate turns down and ``fast_unsupported`` lets run); the public function stays
    right and is timed."""
    from fastpath_lib.bench import opbench
    from fastpath_lib.bench.analysis import wrong_cases

    df = opbench.run_op(WRONG_OUTSIDE, quick=True).set_index(["case_id", "provider"])
    for case in ("tokens_fp16", "wide_fp32"):
        row = df.loc[(case, "triton")]
        assert row.status == "error" and "differs from the reference" in row.note, row.to_dict()
        assert not row.median_us > 0, row.to_dict()  # not timed
        assert df.loc[(case, "dispatched"), "status"] == "ok"
    assert sorted(wrong_cases(df.reset_index())) == ["tokens_fp16", "wide_fp32"]


def _gated(x):
    """A gated activation, ``silu(x[..., :d]) * x[..., d:]``: its output is half its input's width."""
    import torch.nn.functional as F

    d = x.shape[-1] // 2
    return (F.silu(x[..., :d].float()) * x[..., d:].float()).to(x.dtype)


#: An op whose output is not its input's shape, with a backward case (autograd records: the composite runs).
GATED = __import__("dataclasses").replace(
    op.SPEC, name="gated_test", function=_gated, reference=_gated, route=lambda x: "fallback", fast=None,
    predicate=None, context=None, boundary_base=None, limits=None, host_cases=(), baselines={"torch_eager": _gated},
    cases=[opspec.OpCase("train_fp32", 8, 256, "float32", "fallback", "autograd records: the composite runs",
                         quick=(4, 64), pass_="backward")])


def test_a_backward_case_takes_the_gradient_of_the_op_s_output_shape(short_timing):
    """The incoming gradient is built from the op's output (half the input's width here), so every provider runs
    forward then backward and is timed."""
    from fastpath_lib.bench import opbench

    df = opbench.run_op(GATED, quick=True).set_index("provider")
    for provider in ("baseline", "dispatched"):
        row = df.loc[provider]
        assert row.status == "ok" and row.median_us > 0 and row["pass"] == "backward", row.to_dict()


class _GatedWrongBackward(__import__("torch").autograd.Function):
    """The gated activation with a wrong backward: the gradient of the gate half is dropped."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return _gated(x)

    @staticmethod
    def backward(ctx, dy):
        import torch

        (x,) = ctx.saved_tensors
        with torch.enable_grad():
            leaf = x.detach().requires_grad_(True)
            (dx,) = torch.autograd.grad(_gated(leaf), leaf, dy)
        return torch.cat([torch.zeros_like(dx[..., : x.shape[-1] // 2]), dx[..., x.shape[-1] // 2:]], -1)


def _wrong_fast_backward(dy, x):
    """The fast route's forward then backward, with the gradient scaled by 1.5."""
    import torch

    leaf = x.detach().requires_grad_(True)
    with torch.enable_grad():
        (dx,) = torch.autograd.grad(_gated(leaf), leaf, dy)
    return (1.5 * dx,)


#: The gated op with a right forward and a wrong backward on both of its own routes: the public function's autograd
#: and the fast route's launcher (timed outside the predicate through ``fast_unsupported``).
GATED_WRONG_BACKWARD = __import__("dataclasses").replace(
    GATED, name="gated_wrong_backward", function=_GatedWrongBackward.apply, fast=_gated,
    fast_backward=_wrong_fast_backward, fast_unsupported=lambda x: None)


def test_a_wrong_backward_is_refused_untimed_naming_the_input_and_its_error(short_timing):
    """A backward case compares each own route's gradients with the reference's before timing: the public function
    (autograd of a wrong ``backward``) and the fast route (``fast_backward``) both differ, so both rows are errors,
    untimed, naming the input and the max error; the baseline (the reference) is timed."""
    from fastpath_lib.bench import opbench
    from fastpath_lib.bench.analysis import wrong_cases

    df = opbench.run_op(GATED_WRONG_BACKWARD, quick=True).set_index("provider")
    for provider in ("dispatched", "triton"):
        row = df.loc[provider]
        assert row.status == "error" and not row.median_us > 0, row.to_dict()
        assert re.search(r"differs from the reference: gradient of x: max error [0-9.e+-]+ over atol", row.note), \
            row.note
    assert df.loc["baseline", "status"] == "ok"
    assert list(wrong_cases(df.reset_index())) == ["train_fp32"]


# --- bf16 under the interpreter: a plain cast truncates, fastpath_lib.triton_casts rounds as the GPU does ------------

@triton.jit
def _absmax_bf16_kernel(X_ptr, Y_ptr, n_cols, BLOCK_SIZE: tl.constexpr, CASTS: tl.constexpr):
    """The absmax kernel converting with the kit's casts (``CASTS``) or with Triton's own (as on a GPU)."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(X_ptr + row * n_cols + cols, mask=mask, other=0.0)
    x = to_fp32(x) if CASTS else x.to(tl.float32)
    peak = tl.max(tl.abs(x), axis=0)
    y = x / tl.where(peak > 0, peak, 1.0)
    y = round_to(y, Y_ptr.dtype.element_ty) if CASTS else y.to(Y_ptr.dtype.element_ty)
    tl.store(Y_ptr + row * n_cols + cols, y, mask=mask)


def _bf16_spec(casts: bool):
    import dataclasses

    import torch

    def fast(x):
        y = torch.empty_like(x)
        n = x.shape[-1]
        _absmax_bf16_kernel[(x.numel() // n,)](x, y, n, BLOCK_SIZE=triton.next_power_of_2(n), CASTS=casts)
        return y

    def function(x):
        return fast(x) if op.route(x) == "triton" else op.reference(x)

    return dataclasses.replace(
        op.SPEC, name=f"absmax_bf16_{casts}", function=function, fast=fast, tolerances={torch.bfloat16: (0.0, 0.0)},
        host_cases=(), cases=[opspec.OpCase("tokens_bf16", 8, 256, "bfloat16", "win", "bitwise: one rounding, as "
                                            "torch's", quick=(4, 64))])


def test_a_bf16_kernel_matches_torch_under_the_interpreter_with_the_kit_s_casts_and_bench_says_so(short_timing):
    """With plain casts, the bf16 kernel differs from torch under the interpreter (it truncates) and bench's note and
    the generated boundary test name the casts to use; with ``fastpath_lib.triton_casts`` the same kernel matches torch
    bit for bit."""
    from fastpath_lib.bench import opbench
    from fastpath_lib.boundary import check_point

    plain_spec, kit_spec = _bf16_spec(False), _bf16_spec(True)
    plain = opbench.run_op(plain_spec, quick=True).set_index("provider")
    for provider in ("dispatched", "triton"):
        assert plain.loc[provider, "status"] == "error", plain.loc[provider].to_dict()
        assert "fastpath_lib.triton_casts" in plain.loc[provider, "note"] and "truncates" in plain.loc[provider, "note"]
    kit = opbench.run_op(kit_spec, quick=True).set_index("provider")
    assert (kit.loc[["dispatched", "triton"], "status"] == "ok").all(), kit[["status", "note"]]
    point = next(p for p in boundary_points(spec=plain_spec) if p.id == "dtype[bf16]")
    assert "fastpath_lib.triton_casts" in (check_point(plain_spec, point) or "")
    assert check_point(kit_spec, point) is None


@triton.jit
def _int8_off_by_two_kernel(X_ptr, Q_ptr, n_cols, BLOCK_SIZE: tl.constexpr):
    """Each row of bf16 ``x`` quantized to int8, ``trunc(100 * x / max|x|)``, stored two steps too high from 80 up."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(X_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    peak = tl.max(tl.abs(x), axis=0)
    q = (x / tl.where(peak > 0, peak, 1.0) * 100.0).to(tl.int8)
    tl.store(Q_ptr + row * n_cols + cols, tl.where(q >= 80, q + 2, q), mask=mask)


def test_a_wrong_int8_output_of_a_bf16_input_gets_its_error_and_tolerance_and_no_bf16_hint():
    """A Triton kernel with plain casts, bf16 in and int8 out, two steps off on its largest values (within the reach
    of the interpreter's bf16 truncation there, were the output bf16): the boundary point says the max error and the
    tolerance, as bench does, and no bf16 rounding hint, because the compared value is int8 (prac13 F1)."""
    import dataclasses

    import torch

    from fastpath_lib import runtime
    from fastpath_lib.boundary import check_point

    def fast(x):
        q = torch.empty(x.shape, dtype=torch.int8, device=x.device)
        n = x.shape[-1]
        _int8_off_by_two_kernel[(x.numel() // n,)](x, q, n, BLOCK_SIZE=triton.next_power_of_2(n))
        return q

    def reference(x):
        peak = x.float().abs().amax(-1, keepdim=True)
        return (x.float() / torch.where(peak > 0, peak, 1.0) * 100.0).trunc().to(torch.int8)

    spec = dataclasses.replace(op.SPEC, name="absmax_int8", function=lambda x: fast(x) if op.route(x) == "triton"
                               else reference(x), fast=fast, reference=reference, baselines={"eager": reference},
                               tolerances={torch.bfloat16: (1.0, 0.0)}, host_cases=())
    point = next(p for p in boundary_points(spec=spec) if p.id == "dtype[bf16]")
    said = check_point(spec, point)
    assert said == "dtype[bf16]: output 0: max error 2 over atol 1.0, rtol 0.0", said
    assert runtime.INTERPRETER_BF16 not in said


# --- an op vLLM has outside its IR: the note says what vLLM has, read from vLLM's source ----------------------------

_LAYER_SOURCE = '''
import torch
from vllm.model_executor.custom_op import CustomOp as Op


@Op.register("gate_and_mul")
class GateAndMul(Op):
    def __init__(self):
        self.op = torch.ops._C.gate_and_mul

    def forward_native(self, x):
        return x
'''

_OTHER_REGISTRY = '''
from vllm.model_executor.hw_agnostic.custom_op import CustomOp


@CustomOp.register("gate_and_mul")
class GateAndMulElsewhere(CustomOp):
    pass
'''


def _vllm_tree(tmp_path):
    root = tmp_path / "vllm"
    (root / "model_executor" / "a_hw_agnostic").mkdir(parents=True)  # read first: another CustomOp, not vLLM's
    (root / "model_executor" / "a_hw_agnostic" / "act.py").write_text(_OTHER_REGISTRY)
    (root / "model_executor" / "act.py").write_text(_LAYER_SOURCE)
    return root


def test_the_vllm_note_of_an_op_outside_vllm_s_ir_names_its_custom_op_layer_and_kernel(bench_folder, tmp_path):
    """vLLM's registry has no IR op of the spec's name: the note quotes the spec's name as given and says what vLLM
    has for it, the layer registered with vLLM's own ``CustomOp.register`` (read from the source, not another class
    of that name) and the ``torch.ops._C`` kernel it calls; a name with no layer says so."""
    import dataclasses

    import pandas as pd

    from fastpath_lib.bench import vllm_source, vllmhost
    from fastpath_lib.bench.report import pr_note

    root = _vllm_tree(tmp_path)
    assert vllm_source.custom_op_layer("gate_and_mul", root) == {
        "layer": "GateAndMul", "file": "vllm/model_executor/act.py", "c_ops": ["gate_and_mul"], "native": True}
    assert vllm_source.custom_op_layer("no_such_op", root) is None
    assert "nor a CustomOp layer registered as no_such_op" in vllm_source.layer_sentence("no_such_op", root)
    name = "gate_and_mul"
    spec = dataclasses.replace(op.SPEC, pr_text={**op.SPEC.pr_text, "vllm_op": name})
    why = f"vLLM 0.33.0 has no IR op {name} (vllm.ir.op.IrOp.registry); {vllm_source.layer_sentence(name, root)}"
    df = pd.concat([pd.read_csv(bench_folder / "results.csv"), pd.DataFrame(vllmhost._skipped([name], why))],
                   ignore_index=True)
    note = pr_note(df=df, env=json.loads((bench_folder / "environment.json").read_text()), spec=spec, template="vllm")
    assert f"The spec names the vLLM op `{name}`" in note and f"`vllm.ir.ops.{name}`" not in note, note[:2000]
    assert ("the CustomOp layer `GateAndMul` (`vllm/model_executor/act.py`" in note
            and "`torch.ops._C.gate_and_mul`" in note), note[:2000]
    # prac14 F6 (3): vLLM's kernel is the baseline a reviewer compares with, not timed off a GPU; where a Triton
    # kernel enters (the layer's forward_cuda, or an out-of-tree registration); vLLM's tests the spec names, or none
    purpose = note[note.index("## Purpose"):note.index("## Test Plan")]
    assert ("vLLM's own kernel for it, `torch.ops._C.gate_and_mul` (which `GateAndMul` calls), is the baseline a "
            "vLLM reviewer compares a Triton gate_and_mul with; this run did not time it (off a GPU it cannot run)"
            ) in purpose, purpose
    assert "a branch in `GateAndMul.forward_cuda` (`vllm/model_executor/act.py`)" in purpose
    # every vLLM dispatch row skipped: one line with the reason, no caption of a timing that never ran, no shapes
    assert f"vLLM's dispatch per call: not timed (vLLM 0.33.0 has no IR op {name}" in note
    assert '"fastpath_triton", "native"' not in note and "vllm_gate_and_mul_accept" not in note
    assert "`@GateAndMul.register_oot`" in purpose
    plan = note[note.index("## Test Plan"):note.index("## Test Result")]
    assert "vLLM's own tests for `GateAndMul`: none named by the spec (`pr_text[\"vllm_tests\"]`)" in plan, plan
    named = dataclasses.replace(spec, pr_text={**spec.pr_text, "vllm_tests": ["tests/kernels/test_act.py"]})
    note = pr_note(df=df, env=json.loads((bench_folder / "environment.json").read_text()), spec=named, template="vllm")
    assert "`pr_text[\"vllm_tests\"]`): `tests/kernels/test_act.py`; a vLLM PR runs them" in note


def test_row_counts_read_as_whole_numbers_where_the_table_holds_a_missing_one(bench_folder):
    """A skipped row with no row count (vLLM's, say) turns the column to floats: every shape the notes, the mechanism
    table, the boundary table and the plot's key print stays ``ROWSxCOLS`` in whole numbers."""
    import pandas as pd

    from fastpath_lib.bench import vllmhost
    from fastpath_lib.bench.analysis import boundary_table
    from fastpath_lib.bench.plot import boundary_plot
    from fastpath_lib.bench.report import pr_note

    df = pd.read_csv(bench_folder / "results.csv")
    df = pd.concat([df, pd.DataFrame(vllmhost._skipped(["some_ir_op"], "not here"))], ignore_index=True)
    assert df["rows"].dtype == float  # what a run's table holds
    env = json.loads((bench_folder / "environment.json").read_text())
    floats = re.compile(r"\d\.0x\d")
    for template in ("kit", "vllm"):
        note = pr_note(df=df, env=env, spec=op.SPEC, template=template)
        assert "2x8192" in note and not floats.search(note), floats.search(note)
    assert boundary_table(df)["rows"].dtype.kind == "i"
    key = "\n".join(t.get_text() for t in boundary_plot(df, env=env).axes[0].texts)
    assert "ran 4x64" in key and not floats.search(key), key


def test_generic_sentences_fit_the_run_and_the_op(bench_folder, registered, capsys):
    """The PyTorch form's refusal names no other op; bench without ``--out`` speaks of no folder; compare of two CPU
    runs says that neither is a GPU measurement."""
    import pandas as pd

    from fastpath_lib.bench.report import pr_note

    df, env = pd.read_csv(bench_folder / "results.csv"), json.loads((bench_folder / "environment.json").read_text())
    with pytest.raises(ValueError, match="drafts no PyTorch form") as refused:
        pr_note(df=df, env=env, spec=op.SPEC, template="pytorch")
    assert not FOREIGN.search(str(refused.value)), refused.value
    assert cli.bench_main(["--op", REF, "--quick", "--family", "host"]) == 0
    assert "folder" not in capsys.readouterr().out
    assert cli.compare_main([str(bench_folder), str(bench_folder)]) == 0
    assert "NOT A GPU MEASUREMENT: neither folder is a GPU measurement" in capsys.readouterr().out


def test_a_host_row_that_was_not_timed_names_the_op_s_own_baseline(registered, capsys):
    """prac13 F7: a declared fallback host case whose call takes the Triton route here is not timed; its row named the
    default op's baseline (``ratio_to F.rms_norm``). It names the op's first baseline, in the table, bench's printout
    and the note."""
    import dataclasses

    import pandas as pd
    import torch

    from fastpath_lib.bench import ophost
    from fastpath_lib.bench.analysis import classify
    from fastpath_lib.bench.host import host_table
    from fastpath_lib.bench.report import Evidence, host_mechanism

    spec = dataclasses.replace(op.SPEC, host_cases=(opspec.HostCase(
        "host_narrow_fp16", op.Case(rows=2, cols=64, dtype=torch.float16), "declared fallback, eligible here"),))
    rows = classify(pd.DataFrame(ophost.measure_host_op(spec, rounds=1, vllm=False)))
    assert set(rows.status) == {"not measured"}, rows[["provider", "status", "note"]]
    assert host_table(rows, spec).loc["host_narrow_fp16", "ratio_to"] == "torch_eager"
    cli.print_host(rows, spec)
    note = "\n".join(host_mechanism(Evidence(df=rows, env={}, gpu=False, synthetic=False, label="", spec=spec)))
    for text in (capsys.readouterr().out, note):
        assert "torch_eager" in text and not FOREIGN.search(text), text


def test_default_host_cases_are_built_as_the_matrix_declares_them(registered):
    """prac13 F8: a spec without ``host_cases`` times its decode-sized fallback cases; one declared transposed was
    built contiguous (layout, pad and offset dropped), took the fast route and was never timed. Each is built as
    declared, and its rows say the layout, pad and offset timed."""
    import dataclasses

    import pandas as pd

    from fastpath_lib.bench import ophost

    strided = opspec.OpCase("decode_t_fp16", 4, 64, "float16", "fallback", "a transposed decode batch: strided",
                            layout="transposed", pad=3, offset=2)
    spec = dataclasses.replace(op.SPEC, host_cases=(), cases=[*op.SPEC.matrix(), strided])
    (case,) = [c for c in ophost.host_cases(spec) if c.id == "host_decode_t_fp16"]
    assert (case.case.layout, case.case.pad, case.case.offset) == ("transposed", 3, 2)
    assert not case.build("cpu").x.is_contiguous()
    rows = pd.DataFrame(ophost.measure_host_op(dataclasses.replace(spec, host_cases=(case,)), rounds=1, vllm=False))
    assert (rows.status == "ok").all() and (rows.route == "fallback").all(), rows[["route", "status", "note"]]
    assert set(zip(rows.layout, rows.pad, rows.offset)) == {("transposed", 3, 2)}


@pytest.mark.skipif(not __import__("fastpath_lib").runtime.interpreter_enabled(), reason="routes under the interpreter")
def test_default_host_cases_are_the_fallback_cases_that_fall_back_here_and_the_note_says_why_none(registered):
    """prac14 F4: the default host cases were the fallback cases of at most 16 rows, which fell back on CUDA only (a
    row threshold): off a GPU they took the fast route and the note said "not measured in this run", no reason. The
    default is the predicate's on the run's device: the cases that fall back here (a wider one cut to 16 rows)."""
    import dataclasses

    import pandas as pd

    from fastpath_lib.bench import ophost
    from fastpath_lib.bench.note_sections import host_verdict
    from fastpath_lib.bench.report import Evidence
    from fastpath_lib.bench.schema import CSV_COLUMNS

    cuda_only = opspec.OpCase("decode_fp16", 2, 64, "float16", "fallback", "under a CUDA row threshold")  # fast here
    wide = opspec.OpCase("wide_fp16", 64, 8192, "float16", "fallback", "wider than one block")
    spec = dataclasses.replace(op.SPEC, host_cases=(), cases=[cuda_only, wide])
    (case,) = ophost.host_cases(spec, "cpu")
    assert (case.id, case.case.rows, case.case.cols) == ("host_wide_fp16", ophost.MAX_HOST_ROWS, 8192)
    assert ophost.no_host_case_reason(spec, "cpu") == ""
    only = dataclasses.replace(spec, cases=[cuda_only])
    assert ophost.host_cases(only, "cpu") == []
    why = ophost.no_host_case_reason(only, "cpu")
    assert "decode_fp16" in why and "on cpu" in why and "declare host_cases" in why, why
    empty = pd.DataFrame(columns=CSV_COLUMNS)
    (line,) = host_verdict(Evidence(df=empty, env={"device": "cpu"}, gpu=False, synthetic=False, label="", spec=only))
    assert line == f"- Host cost on the fallback route: not measured in this run ({why}).", line
    from fastpath_lib.bench.report import host_mechanism  # the Mechanism section gives the same reason

    ev = Evidence(df=empty, env={"device": "cpu"}, gpu=False, synthetic=False, label="", spec=only)
    assert host_mechanism(ev) == [line.removeprefix("- ")], host_mechanism(ev)


def test_a_host_case_is_timed_on_inputs_built_as_declared_not_on_clones(registered):
    """prac14 F9: each side's inputs were clones of one build; a clone drops an offset (and a padded row stride), so
    the dispatched side of a misaligned fallback case took the fast route: under the interpreter the full host family
    then ran for minutes. Each side is built from the case, so every timed call takes the fallback it declares."""
    import dataclasses

    import pandas as pd
    import torch

    from fastpath_lib.bench import ophost
    from fastpath_lib.cases import CaseSpec

    seen = []

    def function(x, *_):
        seen.append(x.storage_offset() != 0)
        return x * 1

    spec = dataclasses.replace(op.SPEC, function=function, route=lambda x, *_: "fallback" if x.storage_offset()
                               else "triton", host_cases=(opspec.HostCase(
                                   "host_off1", CaseSpec(rows=2, cols=64, dtype=torch.float32, offset=1), "offset"),))
    rows = pd.DataFrame(ophost.measure_host_op(spec, rounds=1, vllm=False))
    assert (rows.status == "ok").all() and (rows.route == "fallback").all(), rows[["route", "status", "note"]]
    assert seen and all(seen), seen


def test_bench_gives_the_compiled_rows_one_true_reason_per_mode(capsys):
    """prac14 F5: bench printed "not run: the GPU evidence run's `compiled_baselines` step runs it" in a full run that
    timed the compiled rows, and in --quick a reason other than the note's. It reads the run's own compiled rows."""
    import dataclasses

    import pandas as pd

    from fastpath_lib.bench.note_evidence import compiled_not_run
    from fastpath_lib.bench.schema import CSV_COLUMNS, empty_row
    from fastpath_lib.bench.timing import COMPILE_SKIPPED

    spec = dataclasses.replace(op.SPEC, baselines={**op.SPEC.baselines, "compiled": op.reference})
    label = "results.csv (compiled rows) (the torch.compile baseline): not run"

    def printed(status, note):
        df = pd.DataFrame([empty_row(case_id="c", provider="compiled", status=status, note=note)], columns=CSV_COLUMNS)
        cli.print_not_run(spec, df=df)
        return capsys.readouterr().out, compiled_not_run(spec, df)

    full, why = printed("ok", "")
    assert label not in full and why is None, full
    quick, why = printed("skipped", COMPILE_SKIPPED)
    assert f"{label}: {COMPILE_SKIPPED}" in quick and why == COMPILE_SKIPPED
    assert "`compiled_baselines` step" not in quick
    cli.print_not_run(op.SPEC)  # no compiled baseline declared: the field it needs
    assert "a `compiled` entry in baselines (OpSpec.baselines) is not declared" in capsys.readouterr().out


def test_compare_of_a_quick_run_with_a_full_run_reports_the_mode_not_a_change(bench_folder, tmp_path, capsys):
    """prac14 F11: ``compare quick full`` exited 1 on "compiled skipped->unmeasured", a row --quick does not time off
    CUDA: a difference of mode, reported as such; a real change of classification still counts."""
    import shutil

    import pandas as pd

    from fastpath_lib.bench.timing import COMPILE_SKIPPED

    df = pd.read_csv(bench_folder / "results.csv")
    row = df[(df.case_id == "tokens_fp16") & (df.provider == "dispatched")].iloc[0]
    folders = {}
    for name, status, quick in (("quick", "skipped", True), ("full", "ok", False)):
        d = folders[name] = tmp_path / name
        shutil.copytree(bench_folder, d)
        compiled = row.copy()
        compiled["provider"], compiled["status"] = "compiled", status
        compiled["note"] = COMPILE_SKIPPED if status == "skipped" else ""
        pd.concat([df, compiled.to_frame().T]).to_csv(d / "results.csv", index=False)
        env = json.loads((d / "environment.json").read_text())
        env["harness"]["quick"] = quick
        (d / "environment.json").write_text(json.dumps(env))
    assert cli.compare_main([str(folders["quick"]), str(folders["full"])]) == 0
    out = capsys.readouterr().out
    assert "environment differs: mode: --quick -> full" in out, out
    assert f"tokens_fp16/compiled: old did not time it ({COMPILE_SKIPPED})" in out, out
    assert "0 case/provider classifications changed" in out, out
    full = pd.read_csv(folders["full"] / "results.csv")
    full.loc[(full.case_id == "tokens_fp16") & (full.provider == "dispatched"), "status"] = "error"
    full.to_csv(folders["full"] / "results.csv", index=False)
    assert cli.compare_main([str(folders["quick"]), str(folders["full"])]) == 1  # a changed outcome still counts


def test_a_run_stopped_after_its_matrix_keeps_the_matrix_in_the_output_folder(bench_folder, tmp_path, monkeypatch,
                                                                                capsys):
    """prac14 F9: a full run killed (SIGTERM from ``timeout``) during its host family left a hidden staging folder
    holding only ``INCOMPLETE``: the finished matrix was lost. The matrix's files stay, in the output folder, marked
    incomplete with what did not finish named. (No run here: the matrix is the fixture's, the host step signals.)"""
    import os
    import signal

    import pandas as pd

    from fastpath_lib.bench import opbench, results

    df = pd.read_csv(bench_folder / "results.csv")
    df = df[df.family != "host-overhead"].reset_index(drop=True)
    env = json.loads((bench_folder / "environment.json").read_text())

    def matrix(spec, **kw):
        out = df.copy()
        out.attrs["environment"] = dict(env)
        return out

    def killed(*a, **k):
        os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(opbench, "run_op", matrix)
    monkeypatch.setattr(cli, "_with_host_rows", killed)
    before = signal.getsignal(signal.SIGTERM)
    out = tmp_path / "full"
    assert cli.bench_main(["--op", REF, "--out", str(out)]) == 130
    assert signal.getsignal(signal.SIGTERM) == before  # the handler is given back
    assert {"results.csv", "environment.json", "boundary.png"} <= {p.name for p in out.iterdir()}, list(out.iterdir())
    marker = (out / results.INCOMPLETE_MARKER).read_text()
    assert marker.startswith("interrupted (Ctrl-C / SIGTERM)") and "- not finished: the host-overhead family" in marker
    assert "- not finished: the PR notes" in marker and "the matrix" not in marker, marker
    assert set(pd.read_csv(out / "results.csv").case_id) == set(df.case_id)
    assert not list(tmp_path.glob(".full.partial-*")) and "not finished: the host-overhead family" in (
        capsys.readouterr().err)


def test_a_run_stopped_in_its_matrix_keeps_the_cases_it_finished_and_names_those_it_did_not(registered, tmp_path,
                                                                                            monkeypatch, capsys):
    """An ``--op`` run stopped (SIGTERM) in its matrix's second case keeps the first case's rows in the output
    folder, its marker naming the case not run and each step after the matrix. (No timing: the rows are made here.)"""
    import os
    import signal

    import pandas as pd

    from fastpath_lib.bench import opbench, results

    ids = [c.id for c in op.SPEC.matrix()]

    def case_rows(spec, case, provs, **kw):
        if case.id == ids[1]:
            os.kill(os.getpid(), signal.SIGTERM)
        return [{"case_id": case.id, "provider": p, "status": "ok", "median_us": 1.0} for p in provs]

    monkeypatch.setattr(opbench, "time_case", case_rows)
    out = tmp_path / "cut"
    assert cli.bench_main(["--op", REF, "--quick", "--out", str(out)]) == 130
    assert set(pd.read_csv(out / "results.csv").case_id) == {ids[0]} and (out / "environment.json").is_file()
    marker = (out / results.INCOMPLETE_MARKER).read_text()
    assert f"- not finished: the matrix: 1 of {len(ids)} cases not run: {ids[1]}\n" in marker, marker
    assert "- not finished: the host-overhead family\n" in marker and "- not finished: the PR notes\n" in marker
    assert not list(tmp_path.glob(".cut.partial-*")) and f"cases not run: {ids[1]}" in capsys.readouterr().err


def test_a_stop_while_a_provider_is_timed_stops_the_run_never_recorded_as_that_provider_s_failure(
        registered, tmp_path, monkeypatch):
    """A SIGTERM arriving inside a provider's timing (where a failing baseline is caught and recorded as an error row,
    the run going on) stops the run: no row records the stop, the case is named not run, and the exit is 130."""
    import os
    import signal

    from fastpath_lib.bench import opbench, results

    def killed(call, settings):
        os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(opbench, "timed_fields", killed)
    out = tmp_path / "stopped"
    assert cli.bench_main(["--op", REF, "--quick", "--family", "matrix", "--out", str(out)]) == 130
    marker = (out / results.INCOMPLETE_MARKER).read_text()
    assert f"- not finished: the matrix: {len(op.SPEC.matrix())} of {len(op.SPEC.matrix())} cases not run" in marker


def test_the_notes_rerun_command_reruns_the_run_they_describe(bench_folder):
    """prac13 F9: the notes printed ``bench --op REF --out DIR`` (this matrix) for a ``--quick`` or ``--only`` run,
    a command that runs another matrix. The command carries the run's own ``--quick`` (environment.json's harness),
    ``--only`` and ``--family`` (the rows it holds), and the line names the generated boundary tests."""
    import pandas as pd

    from fastpath_lib.bench.note_brief import bench_command
    from fastpath_lib.bench.report import Evidence, pr_note

    df, env = pd.read_csv(bench_folder / "results.csv"), json.loads((bench_folder / "environment.json").read_text())
    whole = f"python -m fastpath_lib bench --op {REF} --out DIR --quick"
    for template in ("kit", "vllm"):
        note = pr_note(df=df, env=env, spec=op.SPEC, template=template)
        assert f"`{whole}` (this run)" in note, template
        assert f'`test_absmax_scale_boundaries = boundary_tests(opspec.load("{REF}"))`' in note, template
        # prac14 F6: the one-liner alone fails off CUDA without the interpreter: the note prints the opt-in before it
        opt_in = "`import fastpath_lib; fastpath_lib.use_interpreter()` (before the op is loaded"
        assert opt_in in note and note.index(opt_in) < note.index("boundary_tests(opspec.load"), template
        assert "Triton's interpreter, as in this run; on CUDA it does nothing" in note, template

    def command(rows, **changed):
        return bench_command(Evidence(df=rows, env={**env, **changed}, gpu=False, synthetic=False, label="",
                                      spec=op.SPEC))

    assert command(df) == whole
    one = df[df.case_id == "tokens_fp16"]
    assert command(one) == f"{whole} --only tokens_fp16 --family matrix"
    assert command(df[df.family == "host-overhead"], harness={}) == whole.replace(" --quick", " --family host")
    assert opspec.load(REF) is op.SPEC  # the boundary line's reference loads the op


def _zero_row_fault(x):
    """The kit's absmax kernel, then a planted fault on an all-zero row (prac13 F15: a quantizer whose zero-row guard
    is gone): every other row is right, so random inputs never show it."""
    y = op.fast(x)
    zero = x.abs().amax(-1) == 0
    return y.masked_fill(zero.unsqueeze(-1), float("nan"))


def test_the_generated_tests_run_the_value_regimes_a_random_input_never_draws():
    """prac13 F15: every generated input was random normal, so a wrong result on an all-zero row passed every test.
    The generated tests run the eligible base case with each of the spec's value regimes (default: a zero row, a row
    of equal values, a row of extreme values) written into its first row; a spec may declare its own or none."""
    import dataclasses

    from fastpath_lib.boundary import check_point, value_points

    points = value_points(op.SPEC)
    assert [p.id for p in points] == ["values[zero row]", "values[equal values]", "values[extreme values]"]
    assert all(check_point(op.SPEC, p) is None for p in points), [check_point(op.SPEC, p) for p in points]
    faulty = dataclasses.replace(op.SPEC, fast=_zero_row_fault,
                                 function=lambda x: _zero_row_fault(x) if op.route(x) == "triton" else op.reference(x))
    said = {p.label: check_point(faulty, p) for p in points}
    assert said["zero row"] and said["zero row"].startswith("values[zero row]: output 0"), said
    assert said["equal values"] is None and said["extreme values"] is None, said
    assert all(check_point(faulty, p) is None for p in boundary_points(spec=faulty))  # random rows: all pass
    own = dataclasses.replace(op.SPEC, value_regimes={"ones": lambda row: row.fill_(1.0)})
    assert [p.id for p in value_points(own)] == ["values[ones]"]
    assert value_points(dataclasses.replace(op.SPEC, value_regimes={})) == []
    assert len(boundary_points(op.SPEC)) == len(boundary_points(spec=op.SPEC))  # the spec given first (prac13 F6)


def test_explain_gives_the_route_and_reasons_of_any_op_from_its_own_case_class(registered, capsys):
    """prac13 F3: ``explain`` built RMSNorm's case and asked RMSNorm's predicate whatever the op. With ``--op`` it
    builds the op's case class from its base case, the given fields changed, and asks the op's predicate."""
    from fastpath_lib.cli import explain_main

    assert explain_main(["--op", REF, "--cols", "8192", "--dtype", "fp16"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(op.Case(cols=8192, dtype=op.torch.float16).label()) and "route=fallback" in out
    assert "8192 columns, more than 4096" in out and not FOREIGN.search(out), out
    assert explain_main(["--op", REF]) == 0 and "route=triton" in capsys.readouterr().out  # its base case
    with pytest.raises(SystemExit) as exited:  # prac14 F8: not offered to an op that takes no weight
        explain_main(["--op", REF, "--no-weight"])
    assert exited.value.code == 2 and "unrecognized arguments: --no-weight" in capsys.readouterr().err
    assert explain_main(["--op", "no_such_module:SPEC"]) == 2 and "No module named" in capsys.readouterr().err


def test_explain_opts_in_to_the_interpreter_takes_torch_dtype_names_and_offers_no_weight_by_the_op(
        registered, capsys, monkeypatch):
    """prac14 F8: ``explain --op`` did not opt in to the interpreter as bench does (every call read ``device: cpu``),
    rejected ``--dtype float64`` (only ``fp64``), and offered ``--no-weight`` to a weightless op whose case class is
    the kit's ``CaseSpec`` (it has a weight field the op never reads)."""
    import dataclasses

    from fastpath_lib import cli as top
    from fastpath_lib import runtime

    opted = []
    monkeypatch.delenv(runtime.ENV, raising=False)
    monkeypatch.setattr(runtime, "use_interpreter", lambda *a, **k: opted.append(1) or True)
    assert top.explain_main(["--op", REF, "--dtype", "float64"]) == 0 and opted == [1]
    assert "route=fallback" in (out := capsys.readouterr().out) and "- dtype: torch.float64" in out, out
    assert top._dtype("torch.bfloat16") is op.torch.bfloat16 and top._dtype("fp16") is op.torch.float16
    with pytest.raises(Exception, match="no dtype"):
        top._dtype("float99")
    assert top._takes_weight(None) and top._takes_weight(sq.SPEC)  # sq passes the case's weight vector as its bias
    assert not top._takes_weight(dataclasses.replace(op.SPEC, case_spec=None))  # CaseSpec, the weight unread


def _deprecated_baseline(x):
    import warnings

    warnings.warn("this composite is deprecated", UserWarning, stacklevel=2)
    return op.reference(x)


def test_a_baseline_s_warning_is_recorded_in_its_matrix_row_not_printed(short_timing):
    """prac13 F5: a baseline's warning (ATen's deprecated quantize_per_channel) was printed on stderr in the matrix
    and its rows' ``warnings`` column stayed empty. One call's warnings are recorded in the row; none escapes."""
    import dataclasses
    import warnings

    from fastpath_lib.bench import opbench

    spec = dataclasses.replace(op.SPEC, baselines={**op.SPEC.baselines, "deprecated": _deprecated_baseline})
    with warnings.catch_warnings(record=True) as escaped:
        warnings.simplefilter("always")
        df = opbench.run_op(spec, quick=True, only=["tokens_fp16"])
    by = df.set_index("provider")
    assert by.loc["deprecated", "status"] == "ok", by[["status", "warnings"]]
    assert by.loc["deprecated", "warnings"] == "this composite is deprecated", by[["status", "warnings"]]
    assert not by.loc["baseline", "warnings"], by.loc["baseline", "warnings"]
    assert not [str(w.message) for w in escaped if "deprecated" in str(w.message)]


def test_a_vllm_op_that_is_only_a_custom_ops_binding_is_named_from_the_pinned_vllm(tmp_path):
    """prac13 F14: vLLM has most quantization kernels neither as an IR op nor as a CustomOp layer but as a binding in
    ``vllm/_custom_ops.py`` (``scaled_int8_quant``); the note said only what vLLM lacks. It names the binding, its
    line and the ``torch.ops._C`` kernels it calls, read from the source (a fake tree here; the pinned vLLM below)."""
    from fastpath_lib import vllm_plugin
    from fastpath_lib.bench import vllm_source

    root = _vllm_tree(tmp_path)
    (root / "_custom_ops.py").write_text("import torch\n\n\ndef int8_rows(x):\n    return torch.ops._C.int8_rows(x)\n")
    said = vllm_source.layer_sentence("int8_rows", root)
    assert said.startswith("nor a CustomOp layer registered as int8_rows"), said
    assert ("it has int8_rows as the function `vllm._custom_ops.int8_rows` (`vllm/_custom_ops.py`, line 4), which "
            "calls vLLM's compiled kernel `torch.ops._C.int8_rows`") in said, said
    assert vllm_source.custom_ops_function("no_such_op", root) is None
    pinned = vllm_plugin.vllm_site() / "vllm"
    if not (pinned / "_custom_ops.py").is_file():
        pytest.skip(f"the pinned vLLM is not installed at {pinned} (./kit setup installs it)")
    found = vllm_source.custom_ops_function("scaled_int8_quant", pinned)
    assert found and "dynamic_scaled_int8_quant" in found["c_ops"], found
