"""The PR note of any registered operator, in the kit's form and in vLLM's template (issue 17 items 1-2,
issue 18 item 5b): each template's sections in order, no speed-up off a GPU in any of them, the speed-ups on a
GPU-flagged (SYNTHETIC) frame, a third op's notes written by ``bench --op`` naming that op only."""

from __future__ import annotations

import dataclasses
import re

import pandas as pd
import pytest
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from fastpath_lib import opspec, runtime
from fastpath_lib.bench import cli
from fastpath_lib.bench.templates import PATCH_TITLE
from fastpath_lib.bench.report import NOTE_FILES, PR_TEXT_KEYS, TEMPLATES, pr_note
from fastpath_lib.bench.schema import NOT_GPU
from fastpath_lib.eligibility import Boundary, Condition, Predicate
from tests.bench.test_bench import SYNTHETIC_CPU_ENV, SYNTHETIC_GPU_ENV, synthetic_results

#: Each form's level-2 headings, in order (what the projects' templates ask for; the kit's own sections).
HEADINGS = {
    "kit": ["Summary", "Eligibility region and fallback", "Semantic evidence", "Mechanism",
            "Performance: every predeclared case", "Workload replay", "Why not an existing primitive or torch.compile",
            "Maintenance", "Limitations"],
    "vllm": ["Purpose", "Test Plan", "Test Result", "(Optional) Documentation Update", "AI Assistance"],
}
#: What only a GPU branch writes: a speed-up figure or range.
SPEED_CLAIM = re.compile(r"\d\.\d+x|[Ss]peed-ups over|beats")

# --- a third operator, registered here from the kit's generic parts -------------------------------------------------

MAX_COLS = 128


def _cols_ok(x):
    return None if x.shape[-1] <= MAX_COLS else f"{x.shape[-1]} columns, need <= {MAX_COLS}"


PREDICATE = Predicate("row l2 normalize", [
    Condition("cols", f"row width <= {MAX_COLS}", _cols_ok, "shape",
              boundaries=(Boundary("cols=max", {"cols": MAX_COLS}, True),
                          Boundary("cols=max+1", {"cols": MAX_COLS + 1}, False)))])


def l2_reference(x):
    return F.normalize(x.float(), dim=-1).to(x.dtype)


def l2_route(x):
    return PREDICATE.evaluate(x).route


@triton.jit
def l2_kernel(X_ptr, Y_ptr, n_cols, BLOCK_SIZE: tl.constexpr):
    """``y = x / max(||x||, 1e-12)`` per row in fp32, one program per row."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    x = tl.load(X_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    y = x / tl.maximum(tl.sqrt(tl.sum(x * x, axis=0)), 1e-12)
    tl.store(Y_ptr + row * n_cols + cols, y.to(Y_ptr.dtype.element_ty), mask=cols < n_cols)


def l2_normalize(x):
    """The public function: its Triton kernel where the predicate holds (the kit reads the route from the launch)."""
    if l2_route(x) != "triton":
        return l2_reference(x)
    x = x.contiguous()
    y = torch.empty_like(x)
    l2_kernel[(x.numel() // x.shape[-1],)](x, y, x.shape[-1], BLOCK_SIZE=triton.next_power_of_2(x.shape[-1]))
    return y


L2 = opspec.OpSpec(
    name="row_l2_normalize_test", function=l2_normalize, reference=l2_reference, args=lambda built: (built.x,),
    route=l2_route, predicate=PREDICATE, context=lambda x: x, tolerances={torch.float32: (1e-6, 1e-5)},
    cases=[opspec.OpCase("narrow", 64, 64, "float32", "win", "one row per program, one pass", quick=(8, 64)),
           opspec.OpCase("wide", 8, 512, "float32", "fallback", "wider than the predicate allows", quick=(4, 256))],
    bytes_moved=lambda rows, cols, dtype, pass_: 2 * rows * cols * 4,
    baselines={"F.normalize": lambda x: F.normalize(x, dim=-1)},
    title="Row L2 normalize: a fast path behind an eligibility predicate (test op)")


@pytest.fixture
def l2_op():
    opspec.register(L2)
    yield L2
    opspec.unregister(L2.name)


def _cpu_frame():
    return synthetic_results().assign(gpu_measurement=False), dict(SYNTHETIC_CPU_ENV, synthetic=False)


def _headings(note: str) -> list[str]:
    return [line[3:] for line in note.splitlines() if line.startswith("## ")]


def _first_section(note: str) -> str:
    parts = re.split(r"^## ", note, flags=re.M)
    return parts[1]


# --- the tests ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("template", TEMPLATES)
def test_each_template_has_its_sections_in_order(template):
    df, env = _cpu_frame()
    note = pr_note(df=df, env=env, template=template)
    assert _headings(note) == HEADINGS[template]
    title = note.splitlines()[0]
    assert title == (f"# {PATCH_TITLE}" if template == "vllm" else "# " + opspec.get("rms_norm").title)
    if template == "vllm":
        assert note.index("## Test Result") < note.rindex("<details>") < note.rindex("</details>")  # the checklist
        assert "- [x] The purpose of the PR" in note
        ai = note.split("## AI Assistance", 1)[1]
        assert "- [ ] No AI tools were used" in ai and "- [ ] AI tools were used" in ai  # the author's to tick
        assert "#ISSUE_NUMBER" not in note


def test_the_pytorch_form_is_written_with_its_patch():
    df, env = _cpu_frame()
    with pytest.raises(ValueError, match=r"'pytorch': pr_note drafts no PyTorch form, for any op: .* "
                                         r"upstream/pytorch_native_pr_note.md"):
        pr_note(df=df, env=env, template="pytorch")
    assert (runtime.ROOT / "upstream" / "pytorch_native_pr_note.md").is_file()
    assert "pytorch" not in TEMPLATES and "pytorch" not in NOTE_FILES


@pytest.mark.parametrize("op", ["rms_norm", "third"])
@pytest.mark.parametrize("template", TEMPLATES)
def test_off_a_gpu_no_template_claims_a_speed_up(template, op, l2_op):
    df, env = _cpu_frame()
    note = pr_note(df=df, env=env, template=template, spec=l2_op if op == "third" else None)
    assert not SPEED_CLAIM.search(note), SPEED_CLAIM.search(note)
    first = _first_section(note)  # the claim sits up front (Summary / Purpose), not only in the tables
    assert "Performance claim: unmeasured" in first and NOT_GPU in first
    if template == "vllm":
        assert "- [ ] The test results' before/after comparison: unmeasured (not a GPU measurement)" in note


@pytest.mark.parametrize("template", TEMPLATES)
def test_a_gpu_flagged_frame_gets_its_speed_ups(template, l2_op):
    note = pr_note(df=synthetic_results(), env=SYNTHETIC_GPU_ENV, template=template, spec=l2_op)
    first = _first_section(note)
    assert "over F.normalize" in first and "2.00x" in first  # syn_win: 1.0 us / 0.5 us
    assert "unmeasured" not in first and "SYNTHETIC DATA" in note
    if template == "vllm":  # the box is ticked for a GPU run, never for a constructed table
        assert "- [ ] The test results, before and after: every case against F.normalize above (SYNTHETIC" in note
        real = pr_note(df=synthetic_results(), env=dict(SYNTHETIC_GPU_ENV, synthetic=False), template=template,
                       spec=l2_op)
        assert "- [x] The test results, before and after: every case against F.normalize above (GPU measurement)" \
            in real and "SYNTHETIC" not in real


def test_a_third_op_gets_the_plot_and_both_notes_naming_it_only(l2_op, tmp_path, capsys, monkeypatch):
    from fastpath_lib.bench import opbench

    quick = opbench.settings_for(True)  # the files are under test here, not the timings: the shortest budgets
    monkeypatch.setattr(opbench, "settings_for", lambda q: dict(quick, target_s=0.01, min_reps=3, max_reps=3))
    out = tmp_path / "l2"
    assert cli.bench_main(["--op", L2.name, "--quick", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"wrote {out}: " in printed and "boundary.png" in printed
    assert (out / "boundary.png").stat().st_size > 0
    for template, name in NOTE_FILES.items():
        assert name in printed
        note = (out / name).read_text()
        assert _headings(note) == HEADINGS[template], name
        assert L2.title in note.splitlines()[0] and (template == "kit" or "`F.normalize`" in note), name
        assert "l2_normalize" in _first_section(note) and "row width <= 128" in note, name
        assert not re.search(r"rms|RMSNorm|F\.rms", note, re.I), (name, re.search(r".*rms.*", note, re.I))
        if "not a GPU measurement" in (out / "environment.json").read_text():
            # host time per call is a CPU measurement (bench --op times it too): its ratios are no speed claim
            kernel_lines = "\n".join(line for line in note.splitlines() if "host" not in line.lower())
            assert not SPEED_CLAIM.search(kernel_lines) and "Performance claim: unmeasured" in note, name
            assert "Host cost" in note, name


def test_the_ops_own_sentences_and_bad_requests(l2_op):
    df, env = _cpu_frame()
    mine = dataclasses.replace(L2, pr_text={"summary": "One pass per row: read x, write y.",
                                            "limitations": ["- fp32 only, on purpose."], "noun": "L2"},
                               tolerances={torch.float32: ((1e-6, 1e-5), (0.0, 0.0))})  # per output of a tuple
    for template in TEMPLATES:
        note = pr_note(df=df, env=env, spec=mine, template=template, owner="Ada")
        assert "One pass per row: read x, write y." in _first_section(note)
        assert "- fp32 only, on purpose." in note and "Ada re-runs" in note
        assert template == "kit" or "- float32 output 0 atol 1e-06, rtol 1e-05, output 1 bitwise" in note
        assert ("- Baselines: each checked against the reference before it is timed (one that differs computes "
                "another function and is not timed), at the op's tolerances.") in note, template
    looser = dataclasses.replace(mine, baseline_tolerances=opspec.BaselineTolerances(
        {torch.float32: ((1e-6, 2e-5), (0.0, 0.0))}, "its eager pair rounds the norm once more"))
    for template in TEMPLATES:
        note = pr_note(df=df, env=env, spec=looser, template=template)
        assert "at the op's tolerances or, for float32, at looser ones (below)." in note, template
        assert "- float32 output 0 atol 1e-06, rtol 2e-05, output 1 bitwise" in note, template
        assert "Why: its eager pair rounds the norm once more." in note, template
    with pytest.raises(ValueError, match=r"unknown PR note template 'github'; choose one of: kit, vllm$"):
        pr_note(df=df, env=env, template="github")
    with pytest.raises(ValueError, match=r"unknown pr_text keys \['sumary'\]; known: " + ", ".join(PR_TEXT_KEYS)):
        pr_note(df=df, env=env, spec=dataclasses.replace(L2, pr_text={"sumary": "typo"}))
    with pytest.raises(ValueError, match="no op named 'nope'"):
        pr_note(df=df, env=env, spec="nope")
    assert "row_l2_normalize_test" in pr_note(df=df, env=dict(env, op=L2.name))  # the op the results name


def test_further_baselines_are_compared_on_a_gpu_only(l2_op):
    """The reviewer's question for a fused op (does it beat the unfused pair and torch.compile's fusion?): the spec's
    further baselines, timed as their own providers, get a speed-up range on a GPU and none off it."""
    two = dataclasses.replace(L2, baselines={**L2.baselines, "eager pair": l2_reference})
    df = synthetic_results()
    extra = df[df.provider == "baseline"].assign(provider="eager pair", median_us=2.0, q20_us=1.9, q80_us=2.1)
    gpu_df = pd.concat([df, extra], ignore_index=True)
    for template in TEMPLATES:
        note = pr_note(df=gpu_df, env=SYNTHETIC_GPU_ENV, spec=two, template=template)
        # 2.0 us / 1.6 us (syn_loss) to 2.0 us / 0.5 us (syn_win)
        assert "`eager pair` 1.25x-4.00x (4 cases)" in note, template
        cpu = pr_note(df=gpu_df.assign(gpu_measurement=False), env=dict(SYNTHETIC_CPU_ENV, synthetic=False), spec=two,
                      template=template)
        assert "`eager pair` was timed on 4 cases; off a GPU no comparison is drawn" in cpu, template
        assert not SPEED_CLAIM.search(cpu), template


#: A sentence saying a captured call takes the fallback (true of the kit's ops until their capture test passed).
CAPTURE_FALLBACK = re.compile(r"captur[^.\n]*takes (the fallback|`F\.rms_norm`)|fallback[^.\n]*under[^.\n]*captur",
                              re.I)


@pytest.mark.parametrize("op", ["rms_norm", "fused_add_rms_norm"])
def test_the_vllm_form_says_what_is_true_of_the_patch_under_capture(op):
    """vLLM's form describes the patch, whose provider refuses neither CUDA-graph capture nor small batches: it
    never carries the kit op's capture fallback; the kit's form keeps its op's own sentence; and a case's rationale
    that names the fallback under capture says it is the kit's op."""
    df, env = _cpu_frame()
    spec = opspec.get(op)
    vllm = pr_note(df=df, env=env, template="vllm", spec=spec)
    assert not CAPTURE_FALLBACK.search(vllm), CAPTURE_FALLBACK.search(vllm)
    assert "no token-count threshold and nothing refused under capture" in vllm
    kit = pr_note(df=df, env=env, template="kit", spec=spec)
    limits = spec.pr_text.get("limitations", [])
    own = [line for line in (limits() if callable(limits) else limits) if CAPTURE_FALLBACK.search(line)]
    assert all(line in kit for line in own) and (op != "rms_norm" or own)
    cases = spec.cases() if callable(spec.cases) else spec.cases
    for case in cases:
        if CAPTURE_FALLBACK.search(case.rationale):
            assert "the kit's op" in case.rationale and "vLLM's CUDA-graph capture" not in case.rationale, case.id


def test_the_kit_notes_capture_limitation_follows_capture_json(monkeypatch):
    """The kit form's capture sentence is read from the record the ``cuda_graph_capture`` condition reads: with no
    passed test every captured call takes ``F.rms_norm``; with one, the note names where the fast path runs."""
    from fastpath_lib.rmsnorm import capture

    df, env = _cpu_frame()
    monkeypatch.setattr(capture, "VERIFIED", frozenset())
    none = pr_note(df=df, env=env, template="kit", spec=opspec.get("rms_norm")).split("## Limitations")[1]
    assert "takes `F.rms_norm` on every architecture" in none and "the reference" not in none
    monkeypatch.setattr(capture, "VERIFIED", frozenset({((9, 0), "rms_norm", "eager")}))
    passed = pr_note(df=df, env=env, template="kit", spec=opspec.get("rms_norm")).split("## Limitations")[1]
    assert "sm_90 (eager)" in passed and "on every architecture" not in passed
