"""The host cost of the kit's vLLM providers (:mod:`fastpath_lib.bench.vllmhost`): ``supports_args`` on a call it
rejects and one it accepts, and vLLM's ``dispatch`` with the kit's provider first against vLLM's native path, timed in
a child process (importing vLLM changes this process's environment and Inductor), with rows in the host-cost family,
the CLI's host output and the PR note's host section; rows skipped with the reason where vLLM cannot be imported."""

from __future__ import annotations

import importlib.util
import json
import sys

import pandas as pd
import pytest

from fastpath_lib.bench import cli, vllmhost
from fastpath_lib.bench import report as bench_report
from fastpath_lib.bench.analysis import classify
from fastpath_lib.bench.schema import HOST_FAMILY
from fastpath_lib.vllm_plugin import PROVIDER, vllm_site

#: The vLLM IR ops the registered ops provide, as their specs name them (RMSNorm's and the fused op's).
VLLM_OPS = tuple(vllmhost.vllm_ops().values())


def _vllm_importable() -> bool:
    return importlib.util.find_spec("vllm") is not None or (vllm_site() / "vllm" / "ir").is_dir()


#: Two ops whose specs name a vLLM IR op the kit cannot time: one vLLM's registry lacks, one the kit's provider
#: module provides no provider for (vLLM 0.33 has ``gelu_and_mul_sparse``; the kit provides only its norms).
STRANGERS = {"ghost_op": "no_such_ir_op", "gelu_like_op": "gelu_and_mul_sparse"}


@pytest.fixture(scope="module")
def measured():
    """Both ops, a few short blocks each, and :data:`STRANGERS` (the child imports vLLM once)."""
    from fastpath_lib import opspec

    for name, ir_op in STRANGERS.items():
        opspec.register(opspec.OpSpec(name, abs, abs, tuple, str, baselines={"b": abs}, pr_text={"vllm_op": ir_op}))
    try:
        rows = vllmhost.measure_vllm_host(rounds=5)
    finally:
        for name in STRANGERS:
            opspec.unregister(name)
    strange = [any(f"_{v}_" in r["case_id"] for v in STRANGERS.values()) for r in rows]
    return (pd.DataFrame([r for r, s in zip(rows, strange) if not s]),
            pd.DataFrame([r for r, s in zip(rows, strange) if s]))


def test_rows_per_op_input_and_side_in_the_host_family(measured):
    measured = measured[0]
    assert set(measured.family) == {HOST_FAMILY}
    want = {(f"vllm_{op}_{kind}", p) for op in VLLM_OPS for kind in vllmhost.INPUTS
            for p in vllmhost.PROVIDERS}
    assert set(zip(measured.case_id, measured.provider)) == want and len(measured) == len(want)
    if not _vllm_importable():
        assert (measured.status == "skipped").all() and measured.note.str.contains("vllm.ir cannot be imported").all()


def test_the_check_and_both_dispatches_are_timed_where_vllm_imports(measured):
    measured = measured[0]
    if not _vllm_importable():
        pytest.skip(f"vLLM's wheel is not in {vllm_site()} (./kit setup installs it): the rows say skipped instead")
    assert (measured.status == "ok").all(), measured[["case_id", "provider", "note"]]
    assert measured.note.str.contains("not a GPU measurement").all() and measured.note.str.contains("vLLM 0.").all()
    for r in measured.itertuples():
        samples = json.loads(r.samples_us)
        assert len(samples) == 5 and r.min_us == pytest.approx(min(samples), abs=1e-4) and r.min_us > 0
    t = vllmhost.vllm_table(classify(measured))
    for op in VLLM_OPS:
        rej, acc = t.loc[f"vllm_{op}_reject"], t.loc[f"vllm_{op}_accept"]
        assert (rej.verdict, rej.picked) == ("rejected", "native"), op  # a decode token: below the row threshold
        assert (acc.verdict, acc.picked) == ("accepted", PROVIDER), op
        assert rej["shape"] == "1x4096" and acc["dtype"] == "bfloat16"
        for r in (rej, acc):
            # the kit's priority runs the check inside the dispatch; native's runs none
            assert r.dispatch_us > r.native_us + 0.5 * r.supports_args_us, (op, r)
            assert r.added_us == pytest.approx(r.dispatch_us - r.native_us)


def test_without_vllm_the_rows_say_why_and_nothing_raises(monkeypatch, tmp_path):
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed in this environment itself: it cannot be hidden from the child")
    monkeypatch.setenv("FASTPATH_VLLM_SITE", str(tmp_path))  # the child inherits it: an empty folder
    rows = pd.DataFrame(vllmhost.measure_vllm_host(["rms_norm"], rounds=1))
    assert len(rows) == len(vllmhost.INPUTS) * len(vllmhost.PROVIDERS) and (rows.status == "skipped").all()
    assert rows.note.str.startswith("skipped: vllm.ir cannot be imported").all() and rows.median_us.isna().all()
    assert str(tmp_path) in rows.note.iloc[0]  # where the kit looked
    t = vllmhost.vllm_table(rows)
    assert t.status.str.contains("cannot be imported").all() and t.supports_args_us.isna().all()


def test_a_failing_or_slow_child_gives_skipped_rows_with_the_reason(monkeypatch, tmp_path):
    late = pd.DataFrame(vllmhost.measure_vllm_host(["fused_add_rms_norm"], rounds=1, timeout=0.01))
    assert (late.status == "skipped").all() and late.note.str.contains("overran").all()
    script = tmp_path / "broken-python"
    script.write_text("#!/bin/sh\necho 'ImportError: simulated breakage' >&2\nexit 3\n")
    script.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(script))
    broken = pd.DataFrame(vllmhost.measure_vllm_host(["rms_norm"], rounds=1))
    assert (broken.status == "skipped").all()
    assert broken.note.str.endswith("failed: ImportError: simulated breakage").all()
    assert vllmhost.measure_vllm_host([]) == []


def test_the_ops_timed_are_those_whose_spec_names_a_vllm_ir_op_vllm_has_and_the_kit_provides(measured):
    """Which ops are timed comes from their specs (``pr_text["vllm_op"]``), vLLM's own registry of IR ops and the
    kit's provider module: an op vLLM lacks or the kit provides no provider for gets skipped rows saying which."""
    from fastpath_lib import opspec

    assert vllmhost.vllm_ops(["rms_norm", "fused_add_rms_norm"]) == {"rms_norm": "rms_norm",
                                                                     "fused_add_rms_norm": "fused_add_rms_norm"}
    spec = opspec.OpSpec("no_vllm_op", abs, abs, tuple, str, baselines={"b": abs})
    opspec.register(spec)
    try:
        assert vllmhost.vllm_ops([spec.name]) == {} and vllmhost.measure_vllm_host([spec.name]) == []
    finally:
        opspec.unregister(spec.name)
    rows = measured[1]
    assert len(rows) == len(STRANGERS) * len(vllmhost.INPUTS) * len(vllmhost.PROVIDERS)
    assert (rows.status == "skipped").all(), rows[["case_id", "status"]]
    if _vllm_importable():
        notes = dict(zip(rows.case_id.str.extract(r"vllm_(.*)_(?:reject|accept)")[0], rows.note))
        assert "has no IR op no_such_ir_op" in notes["no_such_ir_op"], notes
        assert "provides no gelu_and_mul_sparse" in notes["gelu_and_mul_sparse"], notes


def _synthetic() -> pd.DataFrame:
    rows = []
    for op in VLLM_OPS:
        for kind, (verdict, picked) in {"reject": ("rejected", "native"), "accept": ("accepted", PROVIDER)}.items():
            for p, us in zip(vllmhost.PROVIDERS, (1.0, 3.0, 0.5)):
                timing = {"best_us": us, "samples_us": [us, us + 1], "number": 10, "blocks": 2, "warmup": 1}
                rows.append({"op": op, "kind": kind, "provider": p, "rows": 1,
                             "route": {"supports_args": verdict, "vllm_dispatch": picked}.get(p, "native"),
                             "timing": timing})
    return rows


def test_the_cli_and_the_pr_note_show_vllms_dispatch_labelled_cpu_host_time(monkeypatch, capsys):
    answer = {"rows": _synthetic(), "vllm": "vLLM 0.33.0, provider fastpath_triton"}

    class Done:
        returncode, stderr, stdout = 0, "", "vLLM logs a line first\n" + json.dumps(answer) + "\n"

    monkeypatch.setattr(vllmhost.subprocess, "run", lambda *a, **k: Done())
    df = classify(pd.DataFrame(vllmhost.measure_vllm_host()))
    t = vllmhost.vllm_table(df)
    assert list(t.index) == [f"vllm_{op}_{k}" for op in VLLM_OPS for k in ("reject", "accept")]
    assert (t.added_us == 2.5).all() and (t.supports_args_us == 1.0).all()
    cli.print_host(df)
    out = capsys.readouterr().out
    assert "vLLM's dispatch per call" in out and vllmhost.LABEL in out and "vllm_rms_norm_accept" in out
    ev = bench_report.Evidence(df=df, env={}, gpu=False, synthetic=False, label="CPU host time")
    note = "\n".join(bench_report.host_mechanism(ev))
    assert vllmhost.LABEL in note and f'`["{PROVIDER}", "native"]`' in note
    line = next(ln for ln in note.splitlines() if ln.startswith("| vllm_fused_add_rms_norm_accept |"))
    assert f"| accepted | {PROVIDER} | 1.00 | 3.00 | 0.50 | +2.50 |" in line
