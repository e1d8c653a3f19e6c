"""The operator spec (issue 17 items 1-2): RMSNorm registered through it, and a third operator registered from the
kit's generic parts (a row-wise softmax) getting boundary points, a quick matrix, the plot and a results folder with
no change to the toolkit."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

import fastpath_lib
from fastpath_lib import opspec
from fastpath_lib.bench import cli, results
from fastpath_lib.bench.opbench import run_op
from fastpath_lib.bench.plot import boundary_plot
from fastpath_lib.bench.schema import FALLBACK, UNMEASURED, is_gpu_measurement
from fastpath_lib.boundary import boundary_points
from fastpath_lib.cases import CaseSpec
from fastpath_lib.eligibility import Boundary, Condition, Predicate

# --- a third operator, from the kit's generic parts only ------------------------------------------------------------

MAX_SOFTMAX_COLS = 256


@dataclasses.dataclass(frozen=True)
class _Limits:
    max_cols: int = MAX_SOFTMAX_COLS


def _cols_ok(ctx):
    n = ctx.shape[-1]
    return None if n <= MAX_SOFTMAX_COLS else f"{n} columns, need <= {MAX_SOFTMAX_COLS}"


def _dtype_ok(ctx):
    return None if ctx.dtype in (torch.float32, torch.float16) else f"{ctx.dtype}, need float32 or float16"


SOFTMAX_PREDICATE = Predicate("row softmax", [
    Condition("cols", f"row width <= {MAX_SOFTMAX_COLS}", _cols_ok, "shape",
              boundaries=(Boundary("cols=max", lambda lim: {"cols": lim.max_cols}, True),
                          Boundary("cols=max+1", lambda lim: {"cols": lim.max_cols + 1}, False))),
    Condition("dtype", "float32 or float16", _dtype_ok, "dtype",
              boundaries=(Boundary("fp16", {"dtype": torch.float16}, True),
                          Boundary("bf16", {"dtype": torch.bfloat16}, False))),
])


@triton.jit
def softmax_kernel(X_ptr, Y_ptr, n_cols, BLOCK_SIZE: tl.constexpr):
    """A numerically stable row softmax in fp32, one program per row."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(X_ptr + row * n_cols + cols, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.where(mask, tl.exp(x - tl.max(x, axis=0)), 0.0)
    tl.store(Y_ptr + row * n_cols + cols, (e / tl.sum(e, axis=0)).to(Y_ptr.dtype.element_ty), mask=mask)


def softmax_fast(x):
    """The fast route of this test op: its Triton kernel (the kit reads the route a call took from its launches)."""
    x = x.contiguous()
    y = torch.empty_like(x)
    softmax_kernel[(x.numel() // x.shape[-1],)](x, y, x.shape[-1], BLOCK_SIZE=triton.next_power_of_2(x.shape[-1]))
    return y


def softmax_reference(x):
    return torch.softmax(x.float(), -1).to(x.dtype)


def softmax_route(x):
    return SOFTMAX_PREDICATE.evaluate(x).route


def softmax(x):
    """The public function: the fast route where the predicate holds, else the reference."""
    return softmax_fast(x) if softmax_route(x) == "triton" else softmax_reference(x)


SOFTMAX = opspec.OpSpec(
    name="row_softmax_test", function=softmax, reference=softmax_reference, args=lambda built: (built.x,),
    route=softmax_route, fast=softmax_fast, predicate=SOFTMAX_PREDICATE,
    boundary_base={"rows": 4, "cols": 64, "dtype": torch.float32, "weight": None}, limits=lambda device: _Limits(),
    context=lambda x: x, tolerances={torch.float32: (1e-6, 1e-5), torch.float16: (1e-3, 1e-3)},
    cases=[opspec.OpCase("narrow_fp32", 64, 128, "float32", "win", "narrow rows fit one block: the fused pass wins",
                         quick=(4, 128)),
           opspec.OpCase("wide_fp16", 16, 1024, "float16", "fallback", "wider than the block: the reference runs",
                         quick=(4, 512))],
    bytes_moved=lambda rows, cols, dtype, pass_: 2 * rows * cols * torch.empty((), dtype=dtype).element_size(),
    baselines={"torch.softmax": lambda x: torch.softmax(x, -1)},
    title="Row softmax: a fast path behind an eligibility predicate (test op)",
)


@pytest.fixture
def short_timing(monkeypatch):
    """What a run reports is under test here, not its timings: the shortest harness budgets (three repetitions) and
    three host blocks in place of the quick run's hundred."""
    from fastpath_lib.bench import hostmethod, opbench

    quick = opbench.settings_for(True)
    monkeypatch.setattr(opbench, "settings_for", lambda q: dict(quick, target_s=0.01, min_reps=3, max_reps=3))
    monkeypatch.setattr(hostmethod, "QUICK_BLOCKS", 3)


@pytest.fixture
def softmax_op():
    opspec.register(SOFTMAX)
    yield SOFTMAX
    opspec.unregister(SOFTMAX.name)


def test_a_registered_op_gets_generated_boundary_tests(softmax_op):
    spec = opspec.get("row_softmax_test")
    points = boundary_points(spec.predicate, spec.boundary_base, spec.limits(None), device="cpu")
    assert {p.id for p in points} == {"cols[cols=max]", "cols[cols=max+1]", "dtype[fp16]", "dtype[bf16]"}
    for p in points:
        args = spec.args(p.spec.build(seed=1))
        assert (spec.predicate.check_one(p.condition, spec.context(*args)) is None) == p.holds, p.id
        assert spec.route(*args) == ("triton" if p.holds else "fallback"), p.id
        atol, rtol = spec.tolerances.get(args[0].dtype, (1e-2, 1e-2))
        torch.testing.assert_close(spec.function(*args), spec.reference(*args), atol=atol, rtol=rtol)


def test_a_registered_op_gets_a_quick_matrix_plot_and_results_folder(softmax_op, short_timing, tmp_path, capsys):
    df = run_op(opspec.get("row_softmax_test"), quick=True)
    env = df.attrs["environment"]
    assert env["op"] == "row_softmax_test" and env["declared_cases"] == ["narrow_fp32", "wide_fp16"]
    by = {(r.case_id, r.provider): r for r in df.itertuples()}
    assert by[("narrow_fp32", "dispatched")].route == "triton" and by[("wide_fp16", "dispatched")].route == "fallback"
    assert by[("wide_fp16", "triton")].status == "skipped"  # the fast route is timed only where it is taken
    assert by[("wide_fp16", "dispatched")].rows == 4 and by[("wide_fp16", "dispatched")].cols == 512  # quick shape
    assert all(by[(c, p)].status == "ok" for c in ("narrow_fp32", "wide_fp16") for p in ("baseline", "dispatched"))
    assert all(by[(c, p)].median_us > 0 for c in ("narrow_fp32", "wide_fp16") for p in ("baseline", "dispatched"))
    if not is_gpu_measurement(df, env):  # CPU: no win or loss is read
        assert by[("narrow_fp32", "dispatched")].observed == UNMEASURED
        assert by[("wide_fp16", "dispatched")].observed == FALLBACK
    assert env["region"] == {"min_rows": 1, "max_cols": MAX_SOFTMAX_COLS, "source": ""}  # from spec.limits
    fig = boundary_plot(df, env=env)
    ax = fig.axes[0]
    assert "row_softmax_test over torch.softmax" in ax.get_title()
    assert [p.get_height() for p in ax.patches] == [MAX_SOFTMAX_COLS - 1]  # its region, no row threshold line
    assert not [ln for ln in ax.get_lines() if ln.get_label().startswith("row threshold")]

    out = tmp_path / "softmax"
    assert cli.bench_main(["--op", "row_softmax_test", "--quick", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "narrow_fp32" in printed and "2 of 2 predeclared cases run" in printed
    loaded, lenv = results.load_results(out)
    matrix = loaded[loaded["family"] != "host-overhead"]  # every bench run also times the op's host cost
    assert lenv["op"] == "row_softmax_test" and set(matrix["case_id"]) == {"narrow_fp32", "wide_fp16"}
    assert "host-overhead" in set(loaded["family"]) and "host time per call" in printed
    assert (out / "boundary.png").stat().st_size > 0


def test_a_wrong_fast_route_is_caught_before_timing(softmax_op, short_timing):
    broken = dataclasses.replace(SOFTMAX, name="broken_softmax", function=lambda x: softmax(x) * 1.01)
    df = run_op(broken, quick=True, only=["narrow_fp32"]).set_index("provider")
    assert df.loc["dispatched", "status"] == "error" and "differs from the reference" in df.loc["dispatched", "note"]
    assert df.loc["baseline", "status"] == "ok" and df.loc["baseline", "median_us"] > 0  # the reference is not blamed


def test_unknown_ops_and_bad_specs_say_so(capsys):
    with pytest.raises(KeyError, match="registered: rms_norm"):
        opspec.get("nope")
    assert cli.bench_main(["--op", "nope", "--quick"]) == 2
    assert "no op named 'nope'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="baseline"):
        dataclasses.replace(SOFTMAX, baselines={})
    with pytest.raises(ValueError, match="already registered"):
        opspec.register(dataclasses.replace(SOFTMAX, name="rms_norm"))
    with pytest.raises(ValueError, match="repeat"):
        dataclasses.replace(SOFTMAX, cases=[SOFTMAX.cases[0], SOFTMAX.cases[0]]).matrix()


def test_baselines_are_held_to_the_ops_tolerances_unless_a_looser_bound_is_declared_with_its_reason():
    """No ``baseline_tolerances``: a baseline gets the op's own; declared: those, for the dtypes it names (gradients:
    four times the loosest, as the op's); tighter than the op's, or without a reason, is refused."""
    f32, f16 = torch.float32, torch.float16
    own = SOFTMAX.tolerances[f32]
    assert SOFTMAX.output_tolerances(f32, 1, baseline=True) == SOFTMAX.output_tolerances(f32, 1) == [own]
    looser = dataclasses.replace(SOFTMAX, baseline_tolerances=opspec.BaselineTolerances(
        {f32: (own[0], 3 * own[1])}, "an intermediate rounded once more"))
    assert looser.output_tolerances(f32, 1, baseline=True) == [(own[0], 3 * own[1])]
    assert looser.output_tolerances(f32, 1) == [own]
    assert looser.output_tolerances(f16, 1, baseline=True) == SOFTMAX.output_tolerances(f16, 1)  # not named: own
    assert looser.grad_tolerance(f32, baseline=True) == (4 * own[0], 12 * own[1])
    with pytest.raises(ValueError, match="tighter than the op's own"):
        dataclasses.replace(SOFTMAX, baseline_tolerances=opspec.BaselineTolerances({f32: (own[0], own[1] / 2)}, "x"))
    with pytest.raises(ValueError, match="reason"):
        opspec.BaselineTolerances({f32: own}, " ")


# --- RMSNorm through its spec ---------------------------------------------------------------------------------------

def test_rms_norm_is_registered_first_with_the_kits_own_pieces():
    from fastpath_lib.bench.matrix import load_cases
    from fastpath_lib.bench.timing import bytes_moved
    from fastpath_lib.rmsnorm import predicate as rms
    from fastpath_lib.testing import TOLERANCES

    spec = opspec.get("rms_norm")
    assert opspec.names()[0] == "rms_norm"
    assert spec.function is fastpath_lib.rms_norm and spec.reference is F.rms_norm
    from fastpath_lib.rmsnorm import cost

    assert spec.predicate is rms.PREDICATE and spec.tolerances is TOLERANCES and spec.bytes_moved is cost.bytes_moved
    assert bytes_moved(8, 64, torch.float16, "backward") == cost.bytes_moved(8, 64, torch.float16, "backward")
    assert spec.baseline == ("F.rms_norm", F.rms_norm)
    declared = load_cases()
    cases = spec.matrix()
    assert [c.id for c in cases] == [c.id for c in declared]  # the whole matrix: backward and layout cases too
    for c, d in zip(cases, declared):
        assert (c.expected, c.layout, c.pass_, c.pad, c.offset, c.family, c.dtype) == \
            (d.expected, d.layout, d.pass_, d.pad, d.offset, d.family, d.dtype), c.id
        assert (c.dims(), c.dims(True), c.pad_for(True)) == (d.shape, d.dims(True)[:2], d.dims(True)[2]), c.id
    assert {c.pass_ for c in cases} == {"forward", "backward"} and len({c.layout for c in cases}) > 1
    for built in (CaseSpec(rows=16, cols=64).build(), CaseSpec(rows=1, cols=64).build()):
        assert spec.route(*spec.args(built)) == fastpath_lib.explain(*built.args()).route


def test_rms_norm_runs_through_the_generic_matrix(short_timing):
    spec = opspec.get("rms_norm")
    case = min(spec.matrix(), key=lambda c: c.dims(True)[0] * c.dims(True)[1])
    df = run_op(spec, quick=True, only=[case.id])
    assert set(df["case_id"]) == {case.id}
    ok = df[df["status"] == "ok"]
    assert {"baseline", "dispatched"} <= set(ok["provider"]) and (ok["median_us"] > 0).all()
    assert isinstance(df, pd.DataFrame) and df.attrs["environment"]["baseline"] == "F.rms_norm"


def test_rms_norm_times_its_launcher_wherever_the_launcher_can_run(short_timing):
    """RMSNorm's spec says when its launcher cannot take an input (``fast_unsupported``): the generic matrix then times
    the launcher below the row threshold too (the fallback's case, as RMSNorm's own harness does), and skips it, with
    the reason, where the kernel itself cannot run."""
    spec = opspec.get("rms_norm")
    assert spec.fast_unsupported is not None
    x = torch.randn(1, 64)
    assert spec.fast_unsupported(x, (64,), None) is None  # one row: below the threshold, still the kernel's input
    assert "dtype" in spec.fast_unsupported(x.double(), (64,), None)
    decode = next(c for c in spec.matrix() if c.expected == "fallback" and c.dims(True)[0] == 1)
    df = run_op(spec, quick=True, only=[decode.id])
    by = df.set_index("provider")
    assert by.loc["dispatched", "route"] == "fallback" and by.loc["triton", "status"] == "ok", by[["status", "note"]]
    refused = dataclasses.replace(spec, fast_unsupported=lambda *a: "stride: planted")
    df = run_op(refused, quick=True, only=[decode.id]).set_index("provider")
    assert df.loc["triton", "status"] == "skipped" and df.loc["triton", "note"] == "launcher not run: stride: planted"


def test_rms_norm_backward_and_layout_cases_run_through_the_generic_matrix(short_timing):
    """A backward case times forward+backward of every provider (the launcher pair for ``triton``), with the
    backward's bytes and route; a layout case builds its own strides and padding and keeps them in the row."""
    from fastpath_lib.rmsnorm.cost import bytes_moved

    spec = opspec.get("rms_norm")
    bwd = min((c for c in spec.matrix() if c.pass_ == "backward"), key=lambda c: c.dims(True)[0] * c.dims(True)[1])
    sliced = next(c for c in spec.matrix() if c.layout == "row_slice")
    df = run_op(spec, quick=True, only=[bwd.id, sliced.id])
    rows, cols = bwd.dims(True)
    b = df[df.case_id == bwd.id].set_index("provider")
    assert (b["pass"] == "backward").all() and b.loc["dispatched", "route_backward"] == "triton"
    assert (b.bytes_moved == bytes_moved(rows, cols, getattr(torch, bwd.dtype), "backward")).all()
    assert b.loc["triton", "status"] == "ok" and b.loc["triton", "launches_per_call"] == 2, b[["status", "note"]]
    assert b.loc["baseline", "status"] == "ok" and b.loc["compiled", "status"] == "skipped"
    s = df[df.case_id == sliced.id].iloc[0]
    assert (s["layout"], s["pad"], s["family"]) == ("row_slice", sliced.pad_for(True), sliced.family)
    assert pd.isna(s["route_backward"]) and s["pass"] == "forward"


# --- fused residual-add + RMSNorm through its spec (issue 18 item 4; its matrix in tests/fused/test_fused_bench.py) --

def test_fused_op_is_registered_second_with_its_own_pieces(short_timing, capsys):
    from fastpath_lib.fused.cases import FusedCaseSpec
    from fastpath_lib.fused.spec import FUSED_SPEC

    assert opspec.names()[:2] == ["rms_norm", "fused_add_rms_norm"]
    spec = opspec.get("fused_add_rms_norm")
    assert spec.function is fastpath_lib.fused_add_rms_norm and spec.reference is FUSED_SPEC.reference
    assert spec.fast is FUSED_SPEC.fast_route and spec.case_spec is FusedCaseSpec
    assert list(spec.baselines) == ["unfused_eager", opspec.COMPILED, "add_then_kit_rms_norm", "vllm_c"]
    assert set(spec.bytes_models) == {*spec.baselines, "fallback"}
    with pytest.raises(ValueError, match="2 tolerance pairs"):
        spec.output_tolerances(torch.float16, 1)
    x, r, w, eps = spec.args(FusedCaseSpec(rows=16, cols=64).build(seed=3))
    assert not torch.equal(x, r) and eps == 1e-6  # the residual comes from another seed
    assert spec.route(x, r, w, eps) == fastpath_lib.fused.op.explain(x, r, w, eps).route

    assert cli.bench_main(["--op", "fused_add_rms_norm", "--quick", "--only", "decode_m1_4096_bf16"]) == 0
    printed = capsys.readouterr().out
    assert "decode_m1_4096_bf16" in printed and f"1 of {len(spec.matrix())} predeclared cases run" in printed


def test_compiled_baseline_is_built_on_first_call_and_matches_its_composite(monkeypatch):
    """``opspec.compiled``: naming the baseline compiles nothing; the first call compiles once, later calls reuse it."""
    import torch

    built = []
    real = torch.compile
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: built.append(kw) or real(fn, **kw))

    def composite(x, y):
        return x * 2 + y

    base = opspec.compiled(composite)
    assert built == [] and base.__name__ == "compiled_composite"
    x, y = torch.randn(3), torch.randn(3)
    torch.testing.assert_close(base(x, y), composite(x, y))
    torch.testing.assert_close(base(y, x), composite(y, x))
    assert built == [{"dynamic": False}]


def test_an_op_module_outside_the_kit_reaches_every_child_of_evidence(tmp_path, monkeypatch):
    """docs/practitioners.md runs ``evidence --op my_ops:SPEC`` from the folder that holds ``my_ops.py``; the run's
    children start in the kit's folder (``cwd=ROOT``), so they import the module only if its folder is on their
    ``PYTHONPATH``. A child started as the evidence run starts its steps (``runtime.child_env()``, ``cwd=ROOT``) finds
    the module; the child imports nothing but ``importlib`` (no torch)."""
    import os
    import subprocess
    import sys

    from fastpath_lib import runtime
    from fastpath_lib.bench import evidence

    folder = tmp_path / "practitioner"
    folder.mkdir()
    (folder / "carried_op_mod.py").write_text(
        "import dataclasses\nfrom tests.absmax_op import SPEC as _BASE\n"
        "SPEC = dataclasses.replace(_BASE, name='carried_op')\n")
    monkeypatch.chdir(folder)
    monkeypatch.setenv("PYTHONPATH", "")  # restored afterwards, as FASTPATH_OPS is
    monkeypatch.setenv(opspec.ENV_VAR, "")  # recorded, so the value the command sets is undone afterwards (a bare
    monkeypatch.delenv(opspec.ENV_VAR)  # delenv of an unset variable records nothing: later processes inherited it)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(folder))])
    monkeypatch.setattr(evidence, "dry_run", lambda budget, steps: 0)
    try:
        assert evidence.main(["--op", "carried_op_mod:SPEC", "--dry-run"]) == 0
        probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('carried_op_mod') is None)"
        res = subprocess.run([sys.executable, "-c", probe], cwd=runtime.ROOT, env=runtime.child_env(), timeout=60)
        entries = runtime.child_env()["PYTHONPATH"].split(os.pathsep)
        assert res.returncode == 0 and str(folder) in entries, entries
        assert not any(p.startswith(sys.prefix) for p in entries)  # nothing of the interpreter's own installation
    finally:
        opspec.unregister("carried_op")
        sys.modules.pop("carried_op_mod", None)
