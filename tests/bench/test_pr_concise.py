"""A concise PR note (issue 27 item 7): each form (the kit's, vLLM's template, PyTorch's) of both ops shows at most
``WORD_LIMIT`` words outside ``<details>``, says "not a GPU measurement" once when off a GPU, and folds the full
tables instead of dropping them. The fixture is the SIMULATED GPU evidence folder of ``tests/bench/test_bench.py`` grown
to each op's whole declared matrix (every outcome, a loss inside the region, a failed step, every baseline timed)."""

from __future__ import annotations

import re

import pandas as pd
import pytest

import fastpath_lib.fused  # noqa: F401  (registers fused_add_rms_norm)
from fastpath_lib import opspec
from fastpath_lib.bench.note_brief import WORD_LIMIT, words_outside_details
from fastpath_lib.bench.report import TEMPLATES, pr_note
from fastpath_lib.bench.schema import CSV_COLUMNS, NOT_GPU
from fastpath_lib.grading.checks import ex07_note
from tests.bench.test_bench import SYNTHETIC_GPU_ENV, _host_rows, _row

OPS = ("rms_norm", "fused_add_rms_norm")
#: dispatched time against a baseline of 1.0 us: win, neutral, loss, in turn over the cases the region admits
TIMES = (0.5, 1.01, 1.6)


def _frame(spec) -> pd.DataFrame:
    rows = []
    for i, c in enumerate(spec.matrix()):
        route = "fallback" if c.expected == "fallback" else "triton"
        t = 1.0 if route == "fallback" else TIMES[i % 3]
        kw = dict(route=route, expected=c.expected, rows=c.rows, cols=c.cols, dtype=c.dtype, rationale=c.rationale)
        rows += [_row(c.id, "baseline", 1.0, **kw), _row(c.id, "dispatched", t, **kw),
                 _row(c.id, "compiled", 0.9, compile_s=2.5, **kw)]
        rows += [_row(c.id, name, 1.2, **kw) for name in list(spec.baselines)[1:] if name != "compiled"]
    df = pd.concat([pd.DataFrame(rows, columns=CSV_COLUMNS), _host_rows(1.2, eligible_measured=True)],
                   ignore_index=True)
    return df.assign(gpu_measurement=True)


def _notes(op: str, gpu: bool) -> dict[str, str]:
    spec = opspec.get(op)
    df = _frame(spec)
    env = dict(SYNTHETIC_GPU_ENV, synthetic=False, compute_capability="sm_90", torch="2.13.0", triton="3.6.0",
               git_commit="0123456789abcdef", timestamp="2026-12-05T12:00:00", op=op,
               declared_cases=[c.id for c in spec.matrix()] + ["a_case_the_budget_never_reached"],
               harness={"timer": "cuda events", "copy_gbps": 3000.0, "copy_bandwidth": "device copy of 1 GiB"})
    if not gpu:
        df, env = df.assign(gpu_measurement=False), dict(env, gpu_measurement=False, device_name=None)
    extras = dict(
        tests={"core": {"tests": 1900, "failures": 0, "errors": 0, "skipped": 3}, "gpu": {"tests": 14, "failures": 0}},
        replay={"layers": 4, "dim": 4096, "batch": 8, "seq": 512, "dtype": "bfloat16", "logits_close": True,
                "gpu_measurement": gpu, "label": "GPU measurement" if gpu else NOT_GPU, "e2e_baseline_us": 1000.0,
                "e2e_fastpath_us": 950.0, "norm_share_baseline": 0.1, "trace": {
                    "rows": [{"phase": "prefill", "shape": "512x4096", "calls": 64, "route": "triton"},
                             {"phase": "decode", "shape": "1x4096", "calls": 8192, "route": "fallback"}],
                    "totals": {"calls": 8256, "measured_calls": 8256, "complete": gpu, "gpu_measurement": gpu,
                               "baseline_total_us": 30000.0, "dispatched_total_us": 29000.0}}},
        compile_cost={"specializations": 12, "compiles": True, "per_specialization": [], "total_compile_s": 30.0,
                      "max_compile_s": 3.5, "cache_bytes": 5 * 2 ** 20},
        compiled=[{"kernel": k, "arch": "sm_90", "dtype": d, "BLOCK_SIZE": 4096, "registers": 32, "spills": 0}
                  for k in ("forward", "backward") for d in ("float16", "bfloat16", "float32")],
        threshold={"table": pd.DataFrame({"case_id": ["r64", "r128", "r256"]}),
                   "proposal": {"line": "CUDA_MIN_ROWS[(9, 0)] = 128"}},
        manifest={"steps": [{"name": "sanitizer", "status": "skipped", "why": "compute-sanitizer not found"},
                            {"name": "capture", "status": "failed", "why": "timed out after 15 s"}]})
    return {t: pr_note(df=df, env=env, spec=op, template=t, **extras) for t in TEMPLATES}


@pytest.fixture(scope="module", params=[(op, gpu) for op in OPS for gpu in (True, False)],
                ids=lambda p: f"{p[0]}-{'gpu' if p[1] else 'cpu'}")
def notes(request):
    return request.param, _notes(*request.param)


def _visible(note: str) -> str:
    return re.sub(r"<details>.*?</details>", "", note, flags=re.S)  # the kit's folds are never nested


def test_every_form_of_both_ops_is_concise(notes):
    (op, gpu), by_form = notes
    for template, note in by_form.items():
        n = words_outside_details(note)
        assert 150 < n <= WORD_LIMIT, (op, gpu, template, n)
        if template == "kit":  # vLLM's form describes the patch alone: no kit table to fold
            assert len(note.split()) > 3 * n, (op, template)  # the full tables are there, folded
        assert ex07_note.words_outside_details(note) == n  # exercise 07 grades by the kit's rule
    assert ex07_note.WORD_LIMIT == WORD_LIMIT


def test_off_a_gpu_it_is_said_once_and_the_rest_is_folded(notes):
    (op, gpu), by_form = notes
    spec = opspec.get(op)
    for template, note in by_form.items():
        visible = _visible(note)
        assert visible.count(NOT_GPU) == (0 if gpu else 1), (template, visible.count(NOT_GPU))
        if template == "vllm":  # the patch's note: tested below
            continue
        assert f"bench --op {op} --out" in visible, template  # the test command
        for c in spec.matrix():
            assert f"| {c.id} |" in note and f"| {c.id} |" not in visible, (template, c.id)  # every case, folded
        for cond in spec.predicate.conditions:
            assert f"| {cond.name} |" in note and f"| {cond.name} |" not in visible, (template, cond.name)
        assert "| compute_capability | sm_90 |" in note and "| harness.timer | cuda events |" in note  # environment
        assert "Copy ceiling" in note and "| bytes moved |" not in visible  # the mechanism, folded
        assert "Evidence step `capture` failed: timed out after 15 s" in visible  # a failed step stays in sight
        if gpu:
            assert re.search(r"win \d+, neutral \d+, loss [1-9]", visible) and "inside the region" in visible, template
            assert "CUDA_MIN_ROWS[(9, 0)] = 128" in visible, template
        else:
            assert "no scope restriction is drawn" in visible and not re.search(r"(?i)speed-ups? (over|\d)", visible)


def test_vllm_describes_the_patch_and_only_the_patch(notes):
    """vLLM's form opens with the change to vLLM and why, says how vLLM chooses the provider (no option, no layer
    change), names vLLM's baselines as vLLM runs them, the tests to run in vLLM's tree and the GPU data still missing,
    and carries nothing of the kit's own op: no case, no condition, no kit timing, no paragraph twice."""
    from fastpath_lib.bench.templates import PATCH_TITLE, VLLM_PATCH, VLLM_TEST, patch_files

    (op, gpu), by_form = notes
    note = by_form["vllm"]
    visible = _visible(note)
    assert note.splitlines()[0] == f"# {PATCH_TITLE}"
    purpose = visible.split("## Purpose", 1)[1].split("## Test Plan", 1)[0]
    assert purpose.lstrip().startswith('This PR adds `"triton"` providers of `vllm.ir.ops.rms_norm`')
    assert "Why: on CUDA the platform's default priority is `[\"native\"]` under Inductor" in purpose
    assert '`[\"vllm_c\", \"native\"]` without it' in purpose and "no config field" in purpose
    assert "rms_norm_backend" not in note and "forward_cuda" not in note and "+rms_norm" not in note
    files = patch_files()
    assert [f for f, _, _ in files] == ["vllm/kernels/triton/__init__.py", "vllm/kernels/triton/layernorm.py",
                                        VLLM_TEST]
    assert all(f"- `{f}` (+{a} -{r})" in note and f"`{f}` (+" not in visible for f, a, r in files)  # folded
    plan = visible.split("## Test Plan", 1)[1].split("## Test Result", 1)[0]
    assert f"pytest {VLLM_TEST} -v" in plan and f"git apply {VLLM_PATCH.rsplit('/', 1)[1]}" in plan
    assert "decode batches 1-256" in plan and "Inductor's compiled `native`" in plan and "accuracy run" in plan
    spec = opspec.get(op)
    assert not any(f"| {c.id} |" in note for c in spec.matrix())  # none of the kit's tables
    assert not any(f"| {cond.name} |" in note for cond in spec.predicate.conditions)
    assert "CUDA_MIN_ROWS" not in note and "Copy ceiling" not in note
    paragraphs = [p for p in note.split("\n\n") if len(p) > 80]
    assert len(paragraphs) == len(set(paragraphs))


def test_vllm_quotes_the_wheel_and_says_nothing_of_the_kits_tooling(notes):
    """What the vLLM note says of vLLM is in the pinned wheel's files, word for word: the deprecation whole (IR and
    option), the ``VLLM_USE_OINK_OPS`` baseline, the norm-fusion side effect. It names none of the kit's tools, and
    says where its bit-for-bit result comes from (the interpreter, with the harness's fp32->bf16 conversion)."""
    from fastpath_lib.vllm_plugin import vllm_site

    _, by_form = notes
    note = by_form["vllm"]
    assert not re.search(r"\bkit\b|fastpath|not attached", note, re.I), re.search(r"\bkit\b|fastpath", note, re.I)
    quote = re.search(r'says: "(Deprecated: vLLM IR is being removed, [^"]+)"', note).group(1)
    assert "option will be removed in v0.34.0" in quote and "selected by the platform" in quote
    assert "VLLM_USE_OINK_OPS" in note and "`fuse_norm_quant` at O1-O3" in note
    assert "Triton's interpreter" in note and "converting fp32 to bf16 as a GPU does" in note
    site = vllm_site() / "vllm"
    if not (site / "config" / "kernel.py").is_file():
        pytest.skip(f"vLLM's wheel is not in {site.parent}")
    flat = " ".join((site / "config" / "kernel.py").read_text().split())
    assert quote in flat
    assert '["oink"] + default' in (site / "platforms" / "cuda.py").read_text()
    fusion = (site / "config" / "vllm.py").read_text()
    assert 'ir_op_priority.rms_norm[0] != "native"' in fusion and '"fuse_norm_quant": enable_norm_fusion' in fusion


@pytest.mark.parametrize("markdown, words", [
    ("one two three", 3),
    ("a | --- | b", 2),  # table rules are not words
    ("before <details><summary>title here</summary>\n\nhidden words\n</details> after", 4),
    ("x <details><summary>s</summary> <details><summary>inner</summary> deep </details> hid </details> y", 3),
    ("x <details><summary>s</summary> never closed", 5),  # an unclosed block folds nothing
    ("x <DETAILS open><summary>s</summary> seen </DETAILS> y", 4),  # an open fold shows its body: a reader sees it
    ("x <DETAILS><summary>s</summary> hid </DETAILS> y", 3),
])
def test_words_outside_details(markdown, words):
    assert words_outside_details(markdown) == words == ex07_note.words_outside_details(markdown)
