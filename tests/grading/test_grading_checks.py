"""Every exercise check, fed borrowed, trivial and forged answers, gives no points; the solutions' own functions get
full marks. Runs the checks in-process (no notebook), on the functions of ``solutions/exNN_*.py``.

*Borrowed*: the kit's own objects or the grader's helpers handed back, or called from a wrapper. *Trivial*: stubs,
constants and skeletons. *Forged*: answers shaped to pass without the work (answers recorded from the kit for the
fixed cases, a note written for one table, a route label without a kernel behind it).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path

import pytest
import torch

jupytext = pytest.importorskip("jupytext")
pytest.importorskip("pandas")

from fastpath_lib import exercises as ex  # noqa: E402
from fastpath_lib.cases import CaseSpec  # noqa: E402
from fastpath_lib.eligibility import Boundary, Condition, Predicate  # noqa: E402
from fastpath_lib.grading.registry import EXERCISES  # noqa: E402
from fastpath_lib.grading.registry import mutant_part as mutants_part  # noqa: E402
from fastpath_lib.grading.rules import mutants  # noqa: E402
from tests.solved import earned, solved  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
def feedback(results) -> str:
    return "\n".join(f"{r.part}: {r.feedback}" for r in results)


# --- the solutions pass (tests/grading/test_grading_solutions.py grades them in the grader, every part passed, and
# compares each check cell's saved output with it), so a failing answer below fails for its own reason

def _kit_op():
    import fastpath_lib

    return fastpath_lib.rms_norm


def _fused_op():
    import fastpath_lib

    return fastpath_lib.fused_add_rms_norm_


# --- borrowed, trivial and forged answers ---------------------------------------------------------------------------

def _default_eps_wrapper(dtype):
    from fastpath_lib.rmsnorm.predicate import default_eps

    return default_eps(dtype)


def _reference_wrapper(x, ns, w=None, eps=None):
    from fastpath_lib.testing import reference_rms_norm

    return reference_rms_norm(x, ns, w, eps)


def _reference_via_torch(x, ns, w=None, eps=None):
    return torch.nn.functional.rms_norm(x.double(), ns, None if w is None else w.double(), eps)


def _reference_via_kit_op(x, ns, w=None, eps=None):
    import fastpath_lib

    return fastpath_lib.rms_norm(x.double(), ns, None if w is None else w.double(), eps)


def _recorded_reference():
    """Answers recorded from the kit's reference for the fixed cases, looked up by the input's bytes."""
    from fastpath_lib.grading.checks.ex01_reference import FIXED_CASES
    from fastpath_lib.testing import reference_rms_norm

    book = {}
    for _, spec, eps in FIXED_CASES:
        x, ns, w = spec.build(seed=1, device="cpu").args()
        book[(x.detach().double().contiguous().numpy().tobytes(), eps)] = reference_rms_norm(x, ns, w, eps)

    def forged(x, ns, w=None, eps=None):
        got = book.get((x.detach().double().contiguous().numpy().tobytes(), eps))
        return got if got is not None else x.double()
    return forged


def _kit_backward(dy, h, w, rstd):
    from fastpath_lib.rmsnorm import kernels

    eps = float((1 / rstd.double() ** 2 - h.double().pow(2).mean(-1)).mean())  # eps recovered from rstd
    return kernels.backward(dy, h, w, eps)


def _backward_recomputing_rstd(dy, h, w, rstd):  # ignores the saved rstd: the default eps is not the one used
    h64, dy64 = h.double(), dy.double()
    r = torch.rsqrt(h64.pow(2).mean(-1, keepdim=True) + torch.finfo(torch.float32).eps)
    n = h64 * r
    g = dy64 * (w.double() if w is not None else 1.0)
    dh = r * (g - n * (g * n).mean(-1, keepdim=True))
    return dh.to(h.dtype), ((dy64 * n).sum(0).to(w.dtype) if w is not None else None)


def _triton_noop():
    import triton
    import triton.language as tl

    @triton.jit
    def noop(X_ptr, R_ptr, W_ptr, H_ptr, Y_ptr, RSTD_ptr, X_row_stride, R_row_stride, H_row_stride, Y_row_stride,
             n_cols, eps, BLOCK_SIZE: tl.constexpr):
        pass
    return noop


def _kernel_without_rstd():
    import triton
    import triton.language as tl

    @triton.jit
    def no_rstd(X_ptr, R_ptr, W_ptr, H_ptr, Y_ptr, RSTD_ptr, X_row_stride, R_row_stride, H_row_stride, Y_row_stride,
                n_cols, eps, BLOCK_SIZE: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(X_ptr + row * X_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
        r = tl.load(R_ptr + row * R_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
        h = (x + r).to(H_ptr.dtype.element_ty)
        tl.store(H_ptr + row * H_row_stride + cols, h, mask=mask)
        hf = h.to(tl.float32)
        rstd = 1.0 / tl.sqrt(tl.sum(hf * hf, axis=0) / n_cols + eps)
        w = tl.load(W_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(Y_ptr + row * Y_row_stride + cols, (hf * rstd * w).to(Y_ptr.dtype.element_ty), mask=mask)
    return no_rstd


def _kit_kernel():
    from fastpath_lib.rmsnorm import kernels

    return kernels.rms_norm_fwd_kernel


def _v2_helper_condition(rule):
    import fastpath_lib.grading.checks.ex03_predicate as g

    expected = vars(g)["_v2_expected"]  # a learner reaching into the grader
    return lambda c: None if expected(rule, c) else (f"{rule}: {c.input.dtype} {tuple(c.input.shape)} 32 8192 "
                                                     f"float16 bfloat16 {c.input.data_ptr() % 32}")


def _kit_v1_condition(name):
    from fastpath_lib.rmsnorm.predicate import PREDICATE

    return PREDICATE[name].check


def _constant_reason(rule):
    truth = {"dtype": lambda x: x.dtype in ex.V2_DTYPES, "cols": lambda x: x.shape[-1] <= ex.V2_MAX_COLS}[rule]
    return lambda c: None if truth(c.input) else "no"


def _monolithic_predicate():
    s = solved("ex03")

    def everything(c):
        return s["check_dtype"](c) or s["check_cols"](c) or s["check_alignment"](c)
    from fastpath_lib.rmsnorm.predicate import PREDICATE

    return Predicate("v2", [Condition("v2", "all of it", everything, "dtype"), PREDICATE["non_empty"],
                            PREDICATE["last_dim_contiguous"], PREDICATE["row_stride"]])


def _kit_boundary_cases():
    from fastpath_lib.boundary import boundary_points

    return [CaseSpec(**{k: v for k, v in p.case.items() if k in CaseSpec.__dataclass_fields__})
            for p in boundary_points()][:24]


def _six_neutral():
    return [(f"c{i}", CaseSpec(4096, 4096, torch.bfloat16), "neutral", "large rows should be memory bound")
            for i in range(6)]


def _kit_matrix_from_json():
    data = json.loads((ROOT / "fastpath_lib" / "bench" / "cases.json").read_text())["cases"]
    dt = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
    return [(c["id"], CaseSpec(*c["shape"], dt[c["dtype"]], layout=c["layout"], pad=c.get("pad", 0),
                               offset=c.get("offset", 0)), c["expected"], c["rationale"]) for c in data]


def _kit_matrix_reworded(how):
    """The kit's matrix with each rationale changed by ``how(i, rationale)`` and, optionally, its shapes nudged."""
    def matrix():
        return [(cid, spec, exp, how(i, why)) for i, (cid, spec, exp, why) in enumerate(_kit_matrix_from_json())]
    return matrix


def _shuffled_words(i, why):
    words = why.split()
    return " ".join(words[1::2] + words[::2])


#: Rationales of one's own, each saying a different why (not one template filled with each case's numbers, which the
#: matrix rules refuse as the same rationale).
_OWN_SOUNDING = (
    "a single token step where launch latency dominates everything",
    "few rows per call so kernel startup outweighs the bytes",
    "moderate batch still short of the tuned row cutoff",
    "right at the cutoff where neither path clearly leads",
    "prompt processing streams megabytes and rewards fusion",
    "gradient pass fuses the weight reduction deterministically",
    "far beyond cache capacity so bandwidth sets the pace",
    "single precision reference already runs near copy speed",
    "skinny rows leave each program little useful work",
    "widest admissible rows strain the register file",
    "mid sized backward whose reduction pass eats savings",
    "view into a wider buffer read without copying",
    "alternate rows skipped through the stride in place",
    "columns are not contiguous so eligibility fails",
    "unaligned width breaks the vector load requirement",
    "pointer offset by two bytes defeats alignment",
    "rows exceed what one program can hold",
)


def _kit_cases_new_words_nudged():
    """The kit's cases under new words, ids renamed and every shape grown by a few rows and columns."""
    out = []
    for i, (_cid, spec, exp, _) in enumerate(_kit_matrix_from_json()):
        rows = spec.rows + (spec.rows > 1) * (1 if (spec.rows + 1) * spec.cols <= 1 << 26 else -1)
        cols = spec.cols + (8 if spec.cols % 8 == 0 and spec.cols < 16384 and rows * (spec.cols + 8) <= 1 << 26 else 0)
        spec = dataclasses.replace(spec, rows=rows, cols=cols)
        out.append((f"mine_{i}", spec, exp, _OWN_SOUNDING[i]))
    return lambda: out


def _kit_matrix_via_bench():
    from fastpath_lib import bench

    return [(c.id, c.spec(), c.expected, c.rationale) for c in bench.load_cases()]


def _solution_matrix_with_old_words():
    return [(cid, spec, "improve" if exp == "win" else exp, why)
            for cid, spec, exp, why in solved("ex05")["my_matrix"]()]


def _classify_with_grader(row):
    import pandas as pd

    return ex.expected_classes(pd.DataFrame([row]))[row["case_id"]]


def _classify_with_kit_rule(row):
    from fastpath_lib.bench.analysis import outcome

    if row["route"] == "fallback":
        return "fallback"
    b, c = row["baseline_median_us"], row["candidate_median_us"]
    return outcome(c / b, max(row["baseline_spread_us"] / b, row["candidate_spread_us"] / c))


def _recorded_classes():
    book = ex.expected_classes(ex.synthetic_results())
    return lambda row: book.get(row["case_id"], "neutral")


def _kit_pr_note(df, env):
    from fastpath_lib.bench import report

    return report.pr_note(df=df, env=env)


_SKELETON = "\n".join(f"## {h}\n" for h in ("Summary", "Scope", "Eligibility and fallback", "Semantic evidence",
                                           "Mechanism", "Performance", "Limitations"))


def _note_for_one_table():
    fixed = solved("ex07")["write_pr_note"](ex.synthetic_results(), ex.synthetic_environment())
    return lambda df, env: fixed


def _reference_from_grader(x):
    from fastpath_lib.grading.checks import ex08_capstone

    return ex08_capstone._REFERENCES["softmax"][0](x)


def _launch_torch(x):
    return torch.softmax(x, dim=-1)


def _launch_plain_torch(x):  # no kernel: the answer is torch arithmetic, not torch's softmax
    e = torch.exp(x.float() - x.float().amax(-1, keepdim=True))
    return (e / e.sum(-1, keepdim=True)).to(x.dtype)


def _launch_noop_then_torch(x):
    s = solved("ex08")
    s["launch"](x)  # a real launch of the learner's kernel, but the answer comes from torch
    return torch.softmax(x, dim=-1)


def _copied_condition_predicate():
    s = solved("ex08")
    dtype = s["make_predicate"]().conditions[0]
    return Predicate("softmax", [dataclasses.replace(dtype, name=f"dtype_as_{cat}", category=cat)
                                 for cat in ("dtype", "shape", "stride")])


def _constant_predicate():
    return Predicate("softmax", [Condition(n, n, lambda x: None, cat, boundaries=(
        Boundary("same", {}, True), Boundary("fp64", {"dtype": torch.float64}, False)))
        for n, cat in (("a", "dtype"), ("b", "shape"), ("c", "stride"))])


def _dispatch_label_only(x):
    s = solved("ex08")
    return torch.softmax(x, dim=-1), s["make_predicate"]().evaluate(x).route


def _dispatch_launching_on_fallback(x):
    s = solved("ex08")
    d = s["make_predicate"]().evaluate(x)
    y = s["launch"](x.float()).to(x.dtype) if x.dim() == 2 else torch.softmax(x, -1)
    return y, d.route


def _s(exercise, name):
    return lambda: solved(exercise)[name]


ANSWERS = {
    "ex01 default_eps borrowed: the kit's rule": lambda: ex.check_default_eps(_kit_default_eps(), show=False),
    "ex01 default_eps borrowed: wrapped": lambda: ex.check_default_eps(_default_eps_wrapper, show=False),
    "ex01 default_eps trivial: a constant": lambda: ex.check_default_eps(lambda d: 1.1920928955078125e-07,
                                                                           show=False),
    "ex01 default_eps trivial: stub": lambda: ex.check_default_eps(lambda d: None, show=False),
    "ex01 reference borrowed: the kit's reference": lambda: ex.check_reference(_kit_reference(), show=False),
    "ex01 reference borrowed: wrapped": lambda: ex.check_reference(_reference_wrapper, show=False),
    "ex01 reference borrowed: F.rms_norm in float64": lambda: ex.check_reference(_reference_via_torch, show=False),
    "ex01 reference borrowed: the kit's op": lambda: ex.check_reference(_reference_via_kit_op, show=False),
    "ex01 reference trivial: the input": lambda: ex.check_reference(lambda x, ns, w=None, eps=None: x.double(),
                                                                    show=False),
    "ex01 reference forged: recorded answers": lambda: ex.check_reference(_recorded_reference(), show=False),
    "ex02 kernel borrowed: the kit's forward kernel": lambda: ex.check_add_rms_norm_kernel(_kit_kernel(), show=False),
    "ex02 kernel trivial: a kernel that stores nothing": lambda: ex.check_add_rms_norm_kernel(_triton_noop(),
                                                                                              show=False),
    "ex02 kernel trivial: h and y, no rstd saved": lambda: ex.check_add_rms_norm_kernel(_kernel_without_rstd(),
                                                                                         show=False),
    "ex02 kernel trivial: not a kernel": lambda: ex.check_add_rms_norm_kernel(lambda *a: None, show=False),
    "ex02 backward borrowed: the kit's backward": lambda: ex.check_backward_with_saved_rstd(_kit_backward,
                                                                                           show=False),
    "ex02 backward forged: rstd recomputed": lambda: ex.check_backward_with_saved_rstd(_backward_recomputing_rstd,
                                                                                      show=False),
    "ex02 backward trivial: dy back": lambda: ex.check_backward_with_saved_rstd(lambda dy, h, w, r: (dy, None),
                                                                               show=False),
    "ex03 dtype borrowed: the kit's v1 condition": lambda: ex.check_dtype_condition(_kit_v1_condition("dtype"),
                                                                                   show=False),
    "ex03 dtype borrowed: the grader's rule": lambda: ex.check_dtype_condition(_v2_helper_condition("dtype"),
                                                                              show=False),
    "ex03 dtype trivial: reason 'no'": lambda: ex.check_dtype_condition(_constant_reason("dtype"), show=False),
    "ex03 cols trivial: reason 'no'": lambda: ex.check_cols_condition(_constant_reason("cols"), show=False),
    "ex03 cols borrowed: the kit's v1 condition": lambda: ex.check_cols_condition(_kit_v1_condition("cols"),
                                                                                 show=False),
    "ex03 alignment borrowed: the grader's rule": lambda: ex.check_alignment_condition(
        _v2_helper_condition("alignment"), show=False),
    "ex03 alignment borrowed: the kit's v1 condition": lambda: ex.check_alignment_condition(
        _kit_v1_condition("input_alignment"), show=False),
    "ex03 alignment trivial: always holds": lambda: ex.check_alignment_condition(lambda c: None, show=False),
    "ex03 predicate borrowed: the kit's predicate": lambda: ex.check_v2_predicate(_kit_predicate, show=False),
    "ex03 predicate trivial: no conditions": lambda: ex.check_v2_predicate(lambda: Predicate("v2", []), show=False),
    "ex03 predicate forged: one condition for every rule": lambda: ex.check_v2_predicate(_monolithic_predicate,
                                                                                        show=False),
    "ex04 borrowed: the kit's boundary generator": lambda: ex.check_boundary_cases(_kit_boundary_cases, show=False),
    "ex04 trivial: one ordinary case": lambda: ex.check_boundary_cases(lambda: [CaseSpec()], show=False),
    "ex04 trivial: stub": lambda: ex.check_boundary_cases(lambda: None, show=False),
    "ex04 forged: a sweep of 30 cases": lambda: ex.check_boundary_cases(
        lambda: [CaseSpec(8 + i, 64) for i in range(30)], show=False),
    "ex05 borrowed: the kit's matrix via bench": lambda: ex.check_case_matrix(_kit_matrix_via_bench, show=False),
    "ex05 borrowed: the kit's matrix copied from its file": lambda: ex.check_case_matrix(_kit_matrix_from_json,
                                                                                        show=False),
    "ex05 borrowed: the kit's matrix, a phrase before each rationale": lambda: ex.check_case_matrix(
        _kit_matrix_reworded(lambda i, why: f"I expect that {why}"), show=False),
    "ex05 borrowed: the kit's matrix, each rationale's words shuffled": lambda: ex.check_case_matrix(
        _kit_matrix_reworded(_shuffled_words), show=False),
    "ex05 borrowed: the kit's matrix, rationales rewritten": lambda: ex.check_case_matrix(
        _kit_matrix_reworded(lambda i, why: _OWN_SOUNDING[i]), show=False),
    "ex05 borrowed: the kit's cases renamed, nudged, rewritten": lambda: ex.check_case_matrix(
        _kit_cases_new_words_nudged(), show=False),
    "ex05 trivial: six identical neutral cases": lambda: ex.check_case_matrix(_six_neutral, show=False),
    "ex05 forged: not the kit's words": lambda: ex.check_case_matrix(_solution_matrix_with_old_words, show=False),
    "ex06 borrowed: the grader's expected classes": lambda: ex.check_classification(_classify_with_grader,
                                                                                   show=False),
    "ex06 borrowed: the kit's outcome rule": lambda: ex.check_classification(_classify_with_kit_rule, show=False),
    "ex06 trivial: always neutral": lambda: ex.check_classification(lambda row: "neutral", show=False),
    "ex06 forged: answers recorded for the fixed table": lambda: ex.check_classification(_recorded_classes(),
                                                                                        show=False),
    "ex07 borrowed: the kit's PR note": lambda: ex.check_pr_note(_kit_pr_note, show=False),
    "ex07 trivial: a skeleton of empty sections": lambda: ex.check_pr_note(lambda df, env: _SKELETON, show=False),
    "ex07 forged: a note written for one table": lambda: ex.check_pr_note(_note_for_one_table(), show=False),
    "ex08 reference borrowed: the grader's reference": lambda: ex.check_capstone_reference(
        "softmax", _reference_from_grader, show=False),
    "ex08 reference borrowed: torch's op": lambda: ex.check_capstone_reference(
        "softmax", lambda x: torch.softmax(x.double(), -1), show=False),
    "ex08 reference trivial: an op the kit does not know": lambda: ex.check_capstone_reference(
        "my_op", lambda x: x.double(), show=False),
    "ex08 kernel borrowed: torch's op, no kernel": lambda: ex.check_capstone_kernel("softmax", _launch_torch,
                                                                                    show=False),
    "ex08 kernel forged: torch arithmetic, no kernel": lambda: ex.check_capstone_kernel("softmax", _launch_plain_torch,
                                                                                         show=False),
    "ex08 kernel forged: a launch for show, torch's answer": lambda: ex.check_capstone_kernel(
        "softmax", _launch_noop_then_torch, show=False),
    "ex08 kernel forged: checked against another op": lambda: ex.check_capstone_kernel(
        "log_softmax", solved("ex08")["launch"], show=False),
    "ex08 predicate forged: one condition under three categories": lambda: ex.check_capstone_predicate(
        _copied_condition_predicate, lambda x: x, solved("ex08")["BASE"], show=False),
    "ex08 predicate trivial: conditions that always hold": lambda: ex.check_capstone_predicate(
        _constant_predicate, lambda x: x, solved("ex08")["BASE"], show=False),
    "ex08 dispatch forged: a Triton label without a kernel": lambda: ex.check_capstone_dispatch(
        "softmax", _dispatch_label_only, solved("ex08")["make_predicate"], lambda x: x, show=False),
    "ex08 dispatch forged: a kernel on the fallback route": lambda: ex.check_capstone_dispatch(
        "softmax", _dispatch_launching_on_fallback, solved("ex08")["make_predicate"], lambda x: x, show=False),
    # more bad answers for ex09-ex11: tests/grading/test_grading_new_exercises.py
    "ex09 trivial: tests that never fail": lambda: ex.check_contract_tests(lambda op: None, _kit_op(), show=False),
    "ex12 overlaps trivial: always True": lambda: ex.check_overlaps(lambda a, b: True, show=False),
    "ex12 tests trivial: tests that never fail": lambda: ex.check_inplace_tests(lambda op_: None, _fused_op(),
                                                                                show=False),
    # more bad answers for ex12: tests/grading/test_grading_ex12.py
    "ex10 trivial: None everywhere": lambda: ex.check_threshold(lambda df: dict.fromkeys(df["arch"]), show=False),
    "ex11 trivial: one commit": lambda: ex.check_commit_plan(
        lambda hunks: [{"kind": "behaviour", "message": "the change", "hunks": [h["id"] for h in hunks]}], show=False),
    "ex08 evidence trivial: an empty matrix": lambda: ex.check_capstone_evidence(
        solved("ex08")["make_predicate"], lambda x: x, lambda: [], solved("ex08")["plot_points"], show=False),
    "ex13 trivial: the readable version always": lambda: ex.check_readiness(
        "review_comments", lambda comments, cases: {c["id"]: "keep_readable" for c in comments}, show=False),
}


def _kit_default_eps():
    from fastpath_lib.rmsnorm.predicate import default_eps

    return default_eps


def _kit_reference():
    from fastpath_lib.testing import reference_rms_norm

    return reference_rms_norm


def _kit_predicate():
    from fastpath_lib.rmsnorm.predicate import PREDICATE

    return PREDICATE


def test_every_check_is_fed_bad_answers():
    covered = {name.split()[0] for name in ANSWERS}
    assert covered == set(EXERCISES)
    checks = [n for n in ex.__all__ if n.startswith("check_")]
    text = " ".join(ANSWERS)
    for check, words in (("check_default_eps", "default_eps"), ("check_reference", "ex01 reference"),
                         ("check_add_rms_norm_kernel", "ex02 kernel"),
                         ("check_backward_with_saved_rstd", "ex02 backward"), ("check_dtype_condition", "ex03 dtype"),
                         ("check_cols_condition", "ex03 cols"), ("check_alignment_condition", "ex03 alignment"),
                         ("check_v2_predicate", "ex03 predicate"), ("check_boundary_cases", "ex04"),
                         ("check_case_matrix", "ex05"), ("check_classification", "ex06"), ("check_pr_note", "ex07"),
                         ("check_capstone_reference", "ex08 reference"), ("check_capstone_kernel", "ex08 kernel"),
                         ("check_capstone_predicate", "ex08 predicate"), ("check_capstone_dispatch", "ex08 dispatch"),
                         ("check_contract_tests", "ex09"), ("check_threshold", "ex10"),
                         ("check_commit_plan", "ex11"), ("check_readiness", "ex13"),
                         ("check_overlaps", "ex12 overlaps"), ("check_inplace_tests", "ex12 tests"),
                         ("check_capstone_evidence", "ex08 evidence")):
        assert words in text, check
        checks.remove(check)
    assert not checks, f"checks without bad answers: {checks}"


@pytest.mark.parametrize("name", sorted(ANSWERS))
def test_bad_answer_gets_no_points(name):
    results = ANSWERS[name]()
    assert results and earned(results) == 0, feedback(results)
    assert all(r.feedback for r in results)


# --- what the feedback says -------------------------------------------------------------------------------------------

def test_borrowed_answer_is_named():
    (r,) = ex.check_reference(_reference_wrapper, show=False)
    assert "reference_rms_norm" in r.feedback and "write it yourself" in r.feedback
    (r,) = ex.check_default_eps(_kit_default_eps(), show=False)
    assert "handed back" in r.feedback


def test_vague_reason_names_what_is_missing():
    (r,) = ex.check_cols_condition(_constant_reason("cols"), show=False)
    assert "actual width (8193)" in r.feedback and "limit (8192)" in r.feedback


def _with_listing(rule, extra):
    """The solution's condition for ``rule`` whose reasons also say ``extra(c)``."""
    fn = solved("ex03")[f"check_{rule}"]
    return lambda c: None if (why := fn(c)) is None else f"{why} {extra(c)}"


@pytest.mark.parametrize("rule, extra, stray", [
    ("cols", lambda c: " ".join(map(str, range(20000))), "3, 4, 5, 6, 7, 8 and "),
    ("alignment", lambda c: " ".join(f"a{i}" for i in range(200)), "3, 5, 6, 7, 9"),
    ("dtype", lambda c: "(one of float16 bfloat16 float32 float64 int8 bool)", "float64, int8, bool"),
    ("cols", lambda c: "(the alignment rule wants 32 bytes)", ": 32"),
], ids=["every number", "numbers in words", "every dtype", "another rule's value"])
def test_ex03_a_reason_naming_values_not_the_cases_fails(rule, extra, stray):
    """Red-team finding: a reason listing every number from 0 to 19,999 named the actual width by chance and passed."""
    (r,) = getattr(ex, f"check_{rule}_condition")(_with_listing(rule, extra), show=False)
    assert not r.passed and "not this case's" in r.feedback and stray in r.feedback, r.feedback
    assert len(r.feedback) < 2000, "the feedback quotes a long reason in full"


def _honest_dtype(c):
    x = c.input
    if x.dtype in (torch.float16, torch.bfloat16):
        return None
    return f"dtype {x.dtype} ({x.element_size()} bytes each) in a {tuple(x.shape)} input; v2 takes fp16/bf16 (2 bytes)"


def _honest_cols(c):
    w = c.input.shape[-1]
    return None if w <= 8192 else f"rows of {w} ({w * c.input.element_size()} bytes) are {w - 8192} past the 8192 cap"


def _honest_alignment(c):
    x, p = c.input, c.input.data_ptr() + 4096  # the grader's copy of the input lies elsewhere, aligned alike
    if p % 32:
        return f"pointer {hex(p)} is {p % 32} bytes off a 32-byte boundary ({32 - p % 32} to go)"
    st = ex.row_stride(x)
    if x.numel() // max(x.shape[-1], 1) > 1 and st is not None and st * x.element_size() % 32:
        return f"strides {x.stride()} of {tuple(x.shape)} {x.dtype}: {st * x.element_size()} bytes a row, not 32k"
    return None


def test_ex03_honest_reasons_unlike_the_solutions_pass():
    """Reasons that name the case's own numbers in other ways (hex pointer, shape, strides, bytes, the gap) pass."""
    results = (ex.check_dtype_condition(_honest_dtype, show=False) + ex.check_cols_condition(_honest_cols, show=False)
               + ex.check_alignment_condition(_honest_alignment, show=False))
    assert all(r.passed for r in results), feedback(results)


def _reference_with_default(eps_of):
    """A reference from the definition, written unlike the solution's, whose default eps is ``eps_of(dtype)``."""
    def reference(x, ns, w=None, eps=None):
        eps = eps_of(x.dtype) if eps is None else eps
        x64 = x.to(torch.float64)
        dims = list(range(x.dim() - len(ns), x.dim()))
        y = x64 / (x64.square().sum(dims, keepdim=True) / x64[(0,) * (x.dim() - len(ns))].numel() + eps).sqrt()
        return y if w is None else y * w.to(torch.float64)
    return reference


#: default eps rules right for some dtypes only (attack round 9, C4), and the rule written otherwise than the solution
_EX01_EPS = {
    "fp32's for every dtype": (False, lambda d: torch.finfo(torch.float32).eps),
    "the input dtype's": (False, lambda d: torch.finfo(d).eps),
    "fp16 promoted, bf16 not": (False, lambda d: torch.finfo(torch.float32 if d == torch.float16 else d).eps),
    "promoted with fp32": (True, lambda d: torch.finfo(torch.promote_types(d, torch.float32)).eps),
}


@pytest.mark.parametrize("name", sorted(_EX01_EPS))
def test_ex01_a_default_eps_right_for_some_dtypes_only_loses_the_reference(name):
    """The reference is graded over its whole domain: every floating dtype, float64 included, with eps=None on values
    where the default eps moves the result; the fixed cases alone decide (the drawn ones add to them)."""
    honest, eps_of = _EX01_EPS[name]
    (r,) = ex.check_reference(_reference_with_default(eps_of), show=False)
    assert r.passed == honest, r.feedback
    if not honest:  # a fixed case with the default eps is among those that differ
        assert any("eps=None" in line and not line.startswith("drawn") and not line.rstrip().endswith(" ok")
                   for line in r.feedback.splitlines()), r.feedback


def _ex03_rule_on(rule, reads):
    """A condition of ``rule`` written as the solution's, but reading its quantity the way ``reads(x)`` does
    (``(width,)`` for cols, ``(rows, row stride)`` for alignment)."""
    def cols(c):
        n = reads(c.input)[0]
        return None if n <= ex.V2_MAX_COLS else f"{n} columns, need <= {ex.V2_MAX_COLS}"

    def alignment(c):
        x, a = c.input, ex.V2_ALIGN_BYTES
        if x.data_ptr() % a:
            return f"data pointer {x.data_ptr() % a} bytes past a {a}-byte boundary, need 0"
        rows, stride = reads(x)
        if rows > 1 and stride is not None and stride * x.element_size() % a:
            return f"row stride {stride * x.element_size()} bytes, need a multiple of {a}"
        return None
    return {"cols": cols, "alignment": alignment}[rule]


def _ex03_predicate_with(rule, condition):
    s = solved("ex03")
    from fastpath_lib.rmsnorm.predicate import PREDICATE

    conds = {"dtype": s["check_dtype"], "cols": s["check_cols"], "alignment": s["check_alignment"], rule: condition}
    return lambda: Predicate("v2", [
        Condition("dtype", "fp16 or bf16", conds["dtype"], "dtype"),
        Condition("cols", "<= 8192", conds["cols"], "shape"),
        PREDICATE["non_empty"], PREDICATE["last_dim_contiguous"], PREDICATE["row_stride"],
        Condition("alignment", "32 bytes", conds["alignment"], "alignment")])


#: conditions that read their quantity off another one, each right on one-row 2-D inputs (attack round 9, C2)
_EX03_MISREAD = {
    "cols from numel": ("cols", lambda x: (x.numel(),)),
    "cols from shape[1]": ("cols", lambda x: (x.shape[1] if x.dim() > 1 else x.shape[-1],)),
    "cols from shape[0]": ("cols", lambda x: (x.shape[0],)),
    "rows shape[0], stride(0)": ("alignment", lambda x: (x.shape[0] if x.dim() > 1 else 1,
                                                         x.stride(0) if x.dim() > 1 else None)),
    "stride(-2)": ("alignment", lambda x: (x.numel() // x.shape[-1], x.stride(-2) if x.dim() > 1 else None)),
    "rows shape[0]": ("alignment", lambda x: (x.shape[0] if x.dim() > 1 else 1, ex.row_stride(x))),
}
#: the same rules read off the right quantity in other ways than the solution's
_EX03_HONEST = {
    "cols from size(-1)": ("cols", lambda x: (x.size(-1),)),
    "rows as a product": ("alignment", lambda x: (__import__("math").prod(x.shape[:-1]), ex.row_stride(x))),
    "rows as numel over width": ("alignment", lambda x: (x.numel() // x.size(-1), ex.row_stride(x))),
}


@pytest.mark.parametrize("name", sorted(_EX03_MISREAD) + sorted(_EX03_HONEST))
def test_ex03_a_condition_reading_another_quantity_loses_its_part_and_the_predicate(name):
    """The probes span 1-D to 3-D inputs, many rows and leading strides unlike the row stride, in pairs that differ in
    one quantity: a rule read off the element count, ``shape[0]``/``shape[1]`` or ``stride(0)``/``stride(-2)`` decides
    one of a pair wrongly, in its own part and in the predicate; the right quantity read another way passes both."""
    rule, reads = {**_EX03_MISREAD, **_EX03_HONEST}[name]
    cond = _ex03_rule_on(rule, reads)
    results = (getattr(ex, f"check_{rule}_condition")(cond, show=False)
               + ex.check_v2_predicate(_ex03_predicate_with(rule, cond), show=False))
    if name in _EX03_HONEST:
        assert all(r.passed for r in results), feedback(results)
    else:
        assert not any(r.passed for r in results), feedback(results)
        assert "<-- differs" in results[0].feedback, results[0].feedback


def test_ex04_feedback_names_categories_never_mutants():
    results = ex.check_boundary_cases(lambda: [CaseSpec(8, 64), CaseSpec(16, 64, layout="transposed")], show=False)
    assert [r.part for r in results] == [f"{c} mutants" for c in mutants.CATEGORIES]
    text = feedback(results)
    assert not any(m in text for m in mutants.MUTANTS), text
    assert "too loose" in text and "too strict" in text and "survivors" in text
    by = {r.part: r for r in results}
    assert not by["shape limits mutants"].passed and not by["backward kernel mutants"].passed


def test_ex04_mutants_are_two_sided_and_cover_backward_and_numerics():
    sides = {m.side for m in mutants.ALL if m.kind == "predicate"}
    assert sides == {"too loose", "too strict"}
    assert {m.kind for m in mutants.ALL} == {"predicate", "forward", "backward"}
    names = set(mutants.MUTANTS)
    assert {"launcher_eps_default_of_input_dtype", "kernel_half_precision_squares"} <= names


def test_ex04_mutant_kernels_run_in_a_grader_started_without_the_interpreter_switch():
    """``python -m fastpath_lib grade`` on a machine without CUDA, started without ./kit (plain CI, Gradescope): the
    grader's own process launches exercise 04's mutant kernels, so they must opt in to the interpreter themselves
    (before: every part of the solution scored 0, "0 active drivers")."""
    import subprocess
    import sys

    from fastpath_lib import runtime

    if runtime.cuda_available():
        pytest.skip("with CUDA the kernels run on the GPU")
    code = ("import torch; from fastpath_lib.grading.rules import mutant_kernels as K\n"
            "from fastpath_lib.testing import reference_rms_norm\n"
            "x = torch.randn(8, 64); y = torch.empty_like(x); K.run_forward(0, x, None, None, y)\n"
            "assert torch.allclose(y, reference_rms_norm(x, (64,), None, None).float(), atol=1e-5)\n"
            "import os; print('interpreter', os.environ.get('TRITON_INTERPRET'))")
    env = {k: v for k, v in runtime.child_env().items() if k != runtime.ENV}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300,
                          cwd=runtime.ROOT)
    assert done.returncode == 0 and "interpreter 1" in done.stdout, done.stderr[-2000:]


@pytest.fixture(scope="module")
def ex04_kills():
    """The solution's cases and, per case alone, the mutants it catches (the grader's verdicts: a mutant is caught by
    a set of cases when one of them catches it, so leaving a case out is read off this table)."""
    from fastpath_lib.grading.checks import ex04_boundary

    cases = solved("ex04")["my_boundary_cases"]()
    kills = []
    for c in cases:
        caught, errors = ex04_boundary._verdicts([c])
        assert not errors, errors
        kills.append({m for m, hit in caught.items() if hit})
    return cases, kills


def _lost_without(cases, kills, drop) -> list[str]:
    caught = set().union(*(k for i, k in enumerate(kills) if i != drop))
    return [c for c in mutants.CATEGORIES if any(m.name not in caught for m in mutants.by_category(c))]


@pytest.mark.parametrize("drop", range(18))
def test_each_solution_case_is_needed_or_redundant_by_design(drop, ex04_kills):
    """Leaving one case out of the solution leaves a published mutant alive, except the cases another one covers."""
    cases, kills = ex04_kills
    assert len(cases) == 18
    lost = _lost_without(cases, kills, drop)
    # threshold rows (the column-limit case has 8 rows); every other row and a batch (the published too-strict layout
    # mutant also refuses the row slice: they are needed for its other draws, test below); fp16 eps/precision
    redundant = {0, 7, 8, 16, 17}
    assert bool(lost) != (drop in redundant), (cases[drop].label(), lost)


_F16, _BF16 = torch.float16, torch.bfloat16
#: boundary cases written otherwise than the solution's: other dtypes, widths, offsets and scales
_HONEST_EX04 = [
    CaseSpec(8, 128, _F16), CaseSpec(7, 128, _F16), CaseSpec(8, 16384, _BF16), CaseSpec(8, 16392, _BF16),
    CaseSpec(16, 32, _F16, layout="permuted"), CaseSpec(16, 32, _F16, layout="transposed"),
    CaseSpec(9, 40, layout="row_slice", pad=8), CaseSpec(8, 64, _F16, layout="step"),
    CaseSpec(8, 16, _BF16, layout="batched"), CaseSpec(16, 64, _F16, offset=4), CaseSpec(16, 64, _F16, offset=8),
    CaseSpec(16, 20, _F16), CaseSpec(16, 64, _F16, weight_offset=2), CaseSpec(16, 64, torch.float64, weight=_F16),
    CaseSpec(16, 40, _BF16, weight=None), CaseSpec(16, 64, scale=1e-3), CaseSpec(16, 64, _F16, scale=3e-3),
    CaseSpec(16, 64, _F16, scale=400.0)]


@pytest.mark.parametrize("who", ["solution", "honest"])
def test_ex04_every_draw_is_caught_by_boundary_cases(who):
    """Every drawn predicate mutant (60 draws) and every backward row blocking is caught by the solution's cases and
    by boundary cases written otherwise: what the check draws never costs an honest answer its points."""
    import random

    from fastpath_lib.grading.checks import ex04_boundary

    cases = solved("ex04")["my_boundary_cases"]() if who == "solution" else _HONEST_EX04
    for seed in range(60):
        drawn = tuple(m for m in mutants.drawn(random.Random(seed)) if m.kind == "predicate")
        caught, errors = ex04_boundary._verdicts(cases, drawn)
        assert not errors and all(caught.values()), (seed, [n for n, hit in caught.items() if not hit], errors)
    blocked = mutants.KERNEL_MUTANTS["backward_drops_partial_row_block"]
    for programs in (2, 3, 4):
        caught, _ = ex04_boundary._verdicts(cases, (dataclasses.replace(blocked, programs=programs),))
        assert all(caught.values()), programs


def test_ex04_mutants_are_drawn_at_every_check(monkeypatch):
    """Red-team finding: the mutants were fixed and published, so 16 cases fitted to them offline scored 7/7. The
    check draws from a family too large to enumerate, and cases fitted to the published mutants (the solution before
    it had an every-other-row view and a batch) miss the too-strict layout mutant in most draws."""
    import random

    from fastpath_lib.grading.checks import ex04_boundary

    assert mutants.FAMILY_SIZE > 10 ** 10
    draws = [mutants.drawn(random.Random(seed)) for seed in range(2)]
    assert [m.name for m in draws[0]] == list(mutants.MUTANTS) and draws[0] != draws[1]
    fitted = [c for c in solved("ex04")["my_boundary_cases"]() if c.layout not in ("step", "batched")]
    caught, _ = ex04_boundary._verdicts(fitted)
    assert all(caught.values()), "the fitted cases catch every published mutant"
    missed = 0
    for seed in range(40):
        drawn = tuple(m for m in mutants.drawn(random.Random(seed)) if m.name == "dense_rows_only")
        missed += not ex04_boundary._verdicts(fitted, drawn)[0]["dense_rows_only"]
    assert missed >= 10, missed
    seen = []
    real = mutants.drawn
    monkeypatch.setattr(mutants, "drawn", lambda rng: seen.append(rng) or real(rng))
    ex.check_boundary_cases(lambda: [CaseSpec(16, 64, layout="transposed")], show=False)
    assert len(seen) == 1 and isinstance(seen[0], random.SystemRandom)


def test_leaving_a_case_out_reads_the_same_through_the_check(ex04_kills):
    """The table above agrees with the check itself on one case left out."""
    cases, kills = ex04_kills
    drop = 1
    rest = cases[:drop] + cases[drop + 1:]
    failed = [r.part for r in ex.check_boundary_cases(lambda: rest, show=False) if not r.passed]
    assert failed and failed == [mutants_part(c) for c in _lost_without(cases, kills, drop)], failed


def test_ex05_reports_the_kit_vocabulary():
    results = ex.check_case_matrix(_solution_matrix_with_old_words, show=False)
    assert all("win, neutral, loss, fallback" in r.feedback for r in results)


@pytest.mark.parametrize("name", [n for n in ANSWERS if n.startswith("ex05 borrowed: the kit") and "," in n])
def test_ex05_a_reworded_copy_is_named_a_copy(name):
    results = ANSWERS[name]()
    assert "predeclared" in results[0].feedback and "your own" in results[0].feedback, feedback(results)


@pytest.mark.parametrize("name", [n for n in ANSWERS if n.startswith("ex05 borrowed: the kit") and "," in n])
def test_ex05_a_reworded_copy_fails_only_for_being_a_copy(name, monkeypatch):
    from fastpath_lib.grading.checks import ex05_matrix

    monkeypatch.setattr(ex05_matrix, "_reject_copies", lambda rows: None)
    results = ANSWERS[name]()
    assert all(r.passed for r in results), feedback(results)


@pytest.mark.parametrize("reword", [lambda why: f"As I see it, {why}", lambda why: _shuffled_words(0, why),
                                    lambda why: why.rsplit(" ", 1)[0].upper()], ids=["phrase", "shuffled", "cut"])
def test_ex05_one_reworded_kit_rationale_is_a_copy(reword):
    kit_why = _kit_matrix_from_json()[4][3]
    own = solved("ex05")["my_matrix"]()
    mine = [own[0][:3] + (reword(kit_why),)] + own[1:]
    results = ex.check_case_matrix(lambda: mine, show=False)
    assert earned(results) == 0 and "1 rationales are copied" in results[0].feedback, feedback(results)


def test_ex05_some_cases_like_the_kits_are_allowed():
    """A matrix of its own that shares a few cases with the kit's (under new words) still passes."""
    kit = _kit_matrix_from_json()
    own = solved("ex05")["my_matrix"]()
    shared = [(f"k{i}", spec, exp, _OWN_SOUNDING[i]) for i, (_, spec, exp, _) in enumerate(kit[:4])]
    results = ex.check_case_matrix(lambda: own + shared, show=False)
    assert all(r.passed for r in results), feedback(results)


def _ex06_rule(band_of, form="ratio"):
    def classify(row):
        if row["route"] != "triton":
            return "fallback"
        b, c = row["baseline_median_us"], row["candidate_median_us"]
        band = band_of(b, c, row["baseline_spread_us"], row["candidate_spread_us"])
        if form == "ratio":
            return "win" if c / b < 1 - band else "loss" if c / b > 1 + band else "neutral"
        if form == "product":  # the same rule, its arithmetic ordered otherwise
            return "win" if c < b * (1 - band) else "loss" if c > b * (1 + band) else "neutral"
        change = 100 * (c - b) / b  # in percent
        return "win" if change < -100 * band else "loss" if change > 100 * band else "neutral"
    return classify


_EX06_KIT_BAND = lambda b, c, bs, cs: max(bs / b, cs / c)  # noqa: E731
_EX06_WRONG_BANDS = {"no band (10 %)": lambda *_: 0.10, "no band (5 %)": lambda *_: 0.05,
                     "no band (3 %)": lambda *_: 0.03, "the baseline's spread only": lambda b, c, bs, cs: bs / b,
                     "the candidate's spread only": lambda b, c, bs, cs: cs / c,
                     "the mean of the two": lambda b, c, bs, cs: (bs / b + cs / c) / 2,
                     "both spreads over the baseline": lambda b, c, bs, cs: max(bs, cs) / b}


def test_ex06_every_draw_passes_every_correct_rule():
    """Red-team finding: one notebook scored 3/3 in 8 runs of 10 and 0/3 in 2. The drawn table held a point telling
    the kit's two-sided band from a one-sided one only in about 4 draws of 5. Now every draw passes the solution and
    the rule written otherwise, and fails the rules with another band (next test)."""
    answers = {"solution": solved("ex06")["my_classify"], "product": _ex06_rule(_EX06_KIT_BAND, "product"),
               "percent": _ex06_rule(_EX06_KIT_BAND, "percent")}
    for _ in range(40):
        for name, fn in answers.items():
            results = ex.check_classification(fn, show=False)
            assert all(r.passed for r in results), f"{name}: {feedback(results)}"


@pytest.mark.parametrize("wrong", list(_EX06_WRONG_BANDS))
def test_ex06_every_draw_fails_a_rule_with_another_band(wrong):
    """Points just inside and just outside the band, set by either side's spread, in every draw: the verdict on a
    wrong band never depends on the draw."""
    from fastpath_lib.grading.checks.ex06_classify import drawn_results
    from fastpath_lib.grading.given import expected_classes

    fn = _ex06_rule(_EX06_WRONG_BANDS[wrong])
    for seed in range(200):
        df = drawn_results(seed)
        expected = expected_classes(df)
        assert any(fn(r) != expected[r["case_id"]] for _, r in df.iterrows()), f"seed {seed} passes {wrong}"
    assert earned(ex.check_classification(fn, show=False)) == 0


def test_ex07_accepts_an_honest_no_claim_note():
    base = solved("ex07")["write_pr_note"]

    def honest(df, env):
        note = base(df, env)
        if env["device"] != "cuda":
            note += ("\nNo speed-up is claimed. We make no speed-up claims from interpreter data, and nothing here "
                     "shows the kernel is faster.\n")
        return note
    res = {r.part: r for r in ex.check_pr_note(honest, show=False)}
    assert res["no_claims_from_cpu_data"].passed, res["no_claims_from_cpu_data"].feedback

    def claims(df, env):  # a case line's multiplier marks a win (prose is a person's to read)
        return base(df, env) + f"\n\n- {df['case_id'].iloc[0]}: 2x faster\n"
    res = {r.part: r for r in ex.check_pr_note(claims, show=False)}
    assert not res["no_claims_from_cpu_data"].passed and "2x faster" in res["no_claims_from_cpu_data"].feedback


def test_ex07_rows_must_agree_with_their_routes():
    base = solved("ex07")["write_pr_note"]

    def wrong_route(df, env):
        return base(df, env).replace("| fallback | ", "| triton | ", 1)
    res = {r.part: r for r in ex.check_pr_note(wrong_route, show=False)}
    assert not res["consistent_with_data"].passed and "route" in res["consistent_with_data"].feedback


def _thresholded_predicate(min_rows):
    """The solution's predicate plus the row threshold lessons 03 and 05 teach (``MIN_ROWS``)."""
    s = solved("ex08")

    def rows(x):
        n = x.numel() // max(x.shape[-1], 1)
        return None if n >= min_rows else f"{n} rows, need >= {min_rows}"

    def make():
        base = s["make_predicate"]()
        return Predicate("softmax", [*base.conditions, Condition("min_rows", f">= {min_rows} rows", rows, "speed",
                         boundaries=(Boundary("at", {"rows": min_rows}, True),
                                     Boundary("below", {"rows": min_rows - 1}, False)))])
    return make


def _dispatch_with(make_predicate):
    launch = solved("ex08")["launch"]

    def op(x):
        d = make_predicate().evaluate(x)
        return (launch(x), d.route) if d.eligible else (torch.softmax(x, dim=-1), d.route)
    return op


@pytest.mark.parametrize("min_rows", [8, 16])
def test_ex08_dispatch_accepts_a_taught_row_threshold(min_rows):
    """Red-team finding: an op with MIN_ROWS = 8 (the interpreter's threshold, lessons 03 and 05) was told "every case
    took route {'fallback'}": every case the fast path could take had 5 or 7 rows."""
    make = _thresholded_predicate(min_rows)
    results = ex.check_capstone_dispatch("softmax", _dispatch_with(make), make, lambda x: x, show=False)
    assert all(r.passed for r in results), feedback(results)


def test_ex08_dispatch_names_the_inputs_when_no_case_takes_the_fast_path():
    make = _thresholded_predicate(32)
    (r,) = ex.check_capstone_dispatch("softmax", _dispatch_with(make), make, lambda x: x, show=False)
    assert not r.passed and "every case took route {'fallback'}" in r.feedback, r.feedback
    assert "16x40" in r.feedback and "16 rows, need >= 32" in r.feedback and "7x33" in r.feedback, r.feedback


def _dispatch_zeroing_input(x):
    """A uniform answer made right by zeroing the input first (the expected value was computed after the call)."""
    d = solved("ex08")["make_predicate"]().evaluate(x)
    x.zero_()
    return torch.full_like(x, 1 / x.shape[-1]), d.route


def test_ex08_dispatch_refuses_an_op_that_writes_its_input():
    (r,) = ex.check_capstone_dispatch("softmax", _dispatch_zeroing_input, solved("ex08")["make_predicate"],
                                      lambda x: x, show=False)
    assert not r.passed and "wrote into its input" in r.feedback, r.feedback
    # the fallback cases are the ones that agreed with a zeroed input: each is named
    assert r.feedback.count("wrote into its input") >= 2, r.feedback


def test_ex08_results_name_the_operator():
    s = solved("ex08")
    (r,) = ex.check_capstone_kernel(s["OP_NAME"], s["launch"], show=False)
    assert r.subject == "softmax" and "[softmax]" in r.text()


# --- whose error it was -----------------------------------------------------------------------------------------------

def _defined_in(path: Path, source: str, name: str):
    """A function defined in ``path`` (a notebook cell's file, or the grader's own folder), as if imported from it."""
    scope: dict = {"torch": torch}
    exec(compile(source, str(path), "exec"), scope)
    return scope[name]


def test_feedback_names_the_learners_line_not_torchs(tmp_path):
    from fastpath_lib.grading.report.feedback import part

    cell = tmp_path / "ipykernel_4242" / "1234567.py"  # where a kernel keeps a notebook cell's code
    cell.parent.mkdir()
    cell.write_text("def ref(x):\n    return torch.nn.functional.rms_norm(x, [4])\n")
    bad = _defined_in(cell, cell.read_text(), "ref")
    r = part("ex01", "default_eps", functools.partial(bad, torch.ones(3)))
    assert not r.passed and r.feedback.startswith("your code raised RuntimeError")
    assert r.feedback.endswith("(line 2: return torch.nn.functional.rms_norm(x, [4]))")  # the learner's, not torch's


def test_an_error_raised_by_the_check_itself_is_not_blamed_on_the_learner(tmp_path):
    from fastpath_lib.grading.engine.remote import answered_error
    from fastpath_lib.grading.report import feedback

    answer = _defined_in(tmp_path / "cell.py", "def answer():\n    return 3\n", "answer")
    check = _defined_in(Path(feedback.__file__).with_name("simulated_check.py"),  # a check of the grader's own
                        "def check(answer):\n    return len(answer())\n", "check")
    r = feedback.part("ex01", "default_eps", functools.partial(check, answer))  # the check raises on the answer
    assert not r.passed and r.feedback.startswith("the check raised TypeError: object of type 'int' has no len()")
    assert "not in a line of yours" in r.feedback
    remote = answered_error(["ValueError", "bad shape"])  # raised in the learner's kernel, no line named
    assert feedback.describe_error(remote).startswith("your code raised ValueError: bad shape")


def test_ex08_reference_and_kernel_inputs_are_drawn_at_every_check(monkeypatch):
    """The reference and kernel parts grade values drawn at each check (the same shapes and regimes each time), so a
    reference or kernel fitted to published inputs cannot pass; both parts take their inputs from that one draw."""
    import random

    from fastpath_lib.grading.checks import ex08_capstone

    first, second = (ex08_capstone._inputs("softmax", "cpu") for _ in range(2))
    fixed = len(first) - len(ex08_capstone._regime_cases("softmax", 0)) - 1  # the drawn shape differs by design
    assert [label for label, _ in first[:fixed]] == [label for label, _ in second[:fixed]]
    assert any(not torch.equal(a.x, b.x) for (_, a), (_, b) in zip(first[:fixed], second[:fixed]))
    drawn = []
    real = ex08_capstone._inputs
    monkeypatch.setattr(ex08_capstone, "_inputs", lambda *a: drawn.append(a) or real(*a))

    def refuses(x):
        raise NotImplementedError

    ex.check_capstone_reference("softmax", refuses, show=False)
    ex.check_capstone_kernel("softmax", refuses, show=False)
    assert [op for op, _ in drawn] == ["softmax", "softmax"], drawn
    seeds = []  # the dispatch part draws its inputs' values at each check too

    class Drawing(random.SystemRandom):
        def randrange(self, *a):
            seeds.append(super().randrange(*a))
            return seeds[-1]

    monkeypatch.setattr(ex08_capstone.random, "SystemRandom", Drawing)
    s = solved("ex08")
    ex.check_capstone_dispatch("softmax", s["softmax"], s["make_predicate"], lambda x: x, show=False)
    assert seeds, "the dispatch part built its inputs without a draw"


@pytest.mark.parametrize("spell", [hex, str, lambda p: f"{p:_}", oct], ids=["hex", "decimal", "underscores", "octal"])
def test_ex03_an_alignment_reason_names_the_pointer_in_any_spelling_python_reads(spell):
    """Learner 17, F3: ``data_ptr 0x5603b6358650 is not 32-byte aligned`` names the actual value (the pointer, as the
    learner's process sees its copy of the input) and the requirement."""
    def alignment(c):
        x, p = c.input, c.input.data_ptr() + 4096  # the grader's copy of the input lies elsewhere, aligned alike
        if p % 32:
            return f"data_ptr {spell(p)} is not 32-byte aligned"
        st = ex.row_stride(x)
        if x.numel() // max(x.shape[-1], 1) > 1 and st is not None and st * x.element_size() % 32:
            return f"row stride {st * x.element_size()} bytes is not a multiple of 32"
        return None
    (r,) = ex.check_alignment_condition(alignment, show=False)
    assert r.passed, r.feedback


def test_ex03_a_reason_missing_one_value_says_which_in_plain_words():
    (r,) = ex.check_cols_condition(lambda c: None if c.input.shape[-1] <= 8192 else "too wide for 8192", show=False)
    assert "reason does not name the actual width" in r.feedback and "names no the" not in r.feedback, r.feedback
