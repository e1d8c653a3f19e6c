"""Learners' real mistakes, one class each, lose points with feedback that names the fix; an honest answer unlike the
solution keeps its marks. In-process: the check functions called on answer objects, no notebook or kernel."""

from __future__ import annotations

import linecache
from pathlib import Path

import pytest
import torch

jupytext = pytest.importorskip("jupytext")

from fastpath_lib import exercises as ex  # noqa: E402
from tests.solved import solved  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _solution_cells(exercise: str) -> list[str]:
    (path,) = (ROOT / "solutions").glob(f"{exercise}_*.py")
    return [c.source for c in jupytext.read(path).cells
            if c.cell_type == "code" and "grader-check" not in c.metadata.get("tags", [])]


def _run_cells(cells: list[str], tag: str) -> dict:
    """The cells in one namespace, each readable back through linecache (Triton's interpreter reads a kernel's
    source there)."""
    ns: dict = {}
    for i, cell in enumerate(cells):
        name = f"<{tag} cell {i}>"
        linecache.cache[name] = (len(cell), None, cell.splitlines(True), name)
        exec(compile(cell, name, "exec"), ns)
    return ns


# --- exercise 08: a softmax without the max shift ---------------------------------------------------------------------

_SHIFTED = "e = tl.exp(x - tl.max(x, axis=0))"
_SHIFTED_REF = "e = torch.exp(x64 - x64.amax(-1, keepdim=True))"


def _softmax_answer(kernel_line: str = _SHIFTED, reference_line: str = _SHIFTED_REF) -> dict:
    cells = _solution_cells("ex08")
    assert any(_SHIFTED in c for c in cells) and any(_SHIFTED_REF in c for c in cells)
    return _run_cells([c.replace(_SHIFTED, kernel_line).replace(_SHIFTED_REF, reference_line) for c in cells],
                      f"ex08 {kernel_line} {reference_line}")


def test_a_softmax_without_the_max_shift_loses_the_kernel_and_the_reference_and_feedback_names_the_shift():
    """Small random inputs never reach exp's overflow; the check draws one logit of 100 per row and rows around
    +-1000, where the unshifted softmax gives NaN (inf / inf) or 0 / 0."""
    ns = _softmax_answer("e = tl.exp(x)", "e = torch.exp(x64)")
    (kernel,) = ex.check_capstone_kernel("softmax", ns["launch"], show=False)
    (reference,) = ex.check_capstone_reference("softmax", ns["reference"], show=False)
    for r in (kernel, reference):
        assert not r.passed and "one logit of 100 per row" in r.feedback, r.feedback
        assert "subtract each row's max before exp" in r.feedback, r.feedback


def test_an_honest_softmax_unlike_the_solution_passes_the_large_logit_cases():
    """Shifted by the row's mean instead of its max would overflow; shifted by the max written another way (the
    exp2 form, the reference by logsumexp) keeps full marks."""
    ns = _softmax_answer("e = tl.exp2((x - tl.max(x, axis=0)) * 1.4426950408889634)",
                         "e = torch.exp(x64 - torch.logsumexp(x64, -1, keepdim=True))")
    assert all(r.passed for r in ex.check_capstone_kernel("softmax", ns["launch"], show=False))
    assert all(r.passed for r in ex.check_capstone_reference("softmax", ns["reference"], show=False))


_FILL_ZERO = ('other=-float("inf")).to(tl.float32)\n    e = tl.exp(x - tl.max(x, axis=0))',
              'other=0.0).to(tl.float32)\n    e = tl.where(mask, tl.exp(x - tl.max(x, axis=0)), 0.0)')


def _kernel_changed(old: str, new: str) -> dict:
    cells = _solution_cells("ex08")
    assert any(old in c for c in cells)
    return _run_cells([c.replace(old, new) for c in cells], f"ex08 {old} {new}")


def test_masked_lanes_loaded_as_zero_are_told_the_fill_value_not_the_shift_on_every_all_negative_row():
    """The kernel subtracts a max (right on one logit of 100 and rows around +1000), but its masked lanes load 0.0,
    which wins the max of an all-negative row whose width is not a power of 2: those rows (two widths) name
    other=-float('inf'), the power-of-2 width stays right, and no wrong row is told to subtract the max."""
    from fastpath_lib.grading.rules import ex08_faults

    (r,) = ex.check_capstone_kernel("softmax", _kernel_changed(*_FILL_ZERO)["launch"], show=False)
    wrong = [line for line in r.feedback.splitlines() if "around -1000" in line and not line.rstrip().endswith("ok")]
    assert not r.passed and len(wrong) >= 2, r.feedback
    assert all(ex08_faults.FILL in line and ex08_faults.SHIFT not in line for line in wrong), r.feedback


def test_an_off_by_one_mask_is_told_the_mask_and_the_column_past_the_row_not_atomics():
    """`cols <= n_cols`: program r stores column n_cols of its row, which is row r + 1's first element; the run shows
    two programs storing one element, but the fix is the mask, named before any race advice."""
    (r,) = ex.check_capstone_kernel("softmax", _kernel_changed("mask = cols < n_cols", "mask = cols <= n_cols")[
        "launch"], show=False)
    assert not r.passed and "`cols < n_cols`" in r.feedback and "outside [0, " in r.feedback, r.feedback
    assert "atomic_add" not in r.feedback, r.feedback


def test_race_and_out_of_bounds_records_past_a_row_name_the_mask_as_the_grader_words_them():
    """The records as the grader's replay hands them back (their str): a race on row 1's first element between its own
    program and program 0 (column 33 of row 0), and a load at column 48 of a padded row, name the mask and the column;
    a race of two programs neither of which owns the row, or an access within [0, n_cols), names nothing."""
    import numpy as np

    from fastpath_lib.grading.rules.ex08_faults import out_of_row
    from fastpath_lib.traffic_records import OutOfBounds, Race

    race = str(Race("k", 0, "Y_ptr", 33, (1, 0, 0), "stores", (0, 0, 0), "stores", 4))
    said = out_of_row(race, {"load": 33, "store": 33}, 33)
    assert said and "program 0 (row 0) stores column 33" in said and "`cols < n_cols`" in said, said
    other = race.replace("(0, 0, 0)", "(3, 0, 0)").replace("(1, 0, 0)", "(2, 0, 0)")  # neither is row 1's own
    assert out_of_row(other, {"load": 33, "store": 33}, 33) is None
    offsets = np.arange(64) + 5 * 53
    oob = str(OutOfBounds("k", 0, (5, 0, 0), "load", "X_ptr", "in X_ptr's storage outside its elements (a neighbour "
                          "row or padding)", offsets, np.arange(64) <= 48, np.arange(64) == 48))
    said = out_of_row(oob, {"load": 53, "store": 48}, 48)
    assert said and "column(s) 48 of its row, outside [0, 48)" in said, said
    assert out_of_row(oob, {"load": 53, "store": 48}, 64) is None


def test_an_op_whose_triton_route_returns_fp32_for_fp16_input_loses_the_dispatch_part():
    """The contract: y in the input's dtype on both routes. A Triton route that returns fp32 for an fp16 input is
    right in value and wrong in dtype, which the dispatch part names (as the kernel part does)."""
    s = solved("ex08")

    def op(x):
        d = s["make_predicate"]().evaluate(x)
        return (s["launch"](x).float(), d.route) if d.eligible else (torch.softmax(x, dim=-1), d.route)
    (r,) = ex.check_capstone_dispatch("softmax", op, s["make_predicate"], lambda x: x, show=False)
    assert not r.passed and "output dtype float32, expected the input's" in r.feedback, r.feedback


def test_wrong_values_on_the_triton_route_only_name_the_kernel_as_the_cause():
    """Learner 13's off-by-one mask lost the dispatch part showing only numbers: where only the Triton route's values
    are wrong and the fallback's right, the feedback says the kernel computes them; a wrong fallback gets no such
    line. (Run in this process, so the kernel here is right and its launcher's answer is scaled: an out-of-bounds
    store in this process would corrupt memory; in the grader the replay drops it.)"""
    s = solved("ex08")

    def op(scale_triton, scale_fallback):
        def run(x):
            d = s["make_predicate"]().evaluate(x)
            return ((s["launch"](x) * scale_triton, d.route) if d.eligible
                    else (torch.softmax(x, dim=-1) * scale_fallback, d.route))
        return run
    (r,) = ex.check_capstone_dispatch("softmax", op(1.01, 1.0), s["make_predicate"], lambda x: x, show=False)
    assert not r.passed and "only values your op computes on the Triton route are wrong" in r.feedback, r.feedback
    (r,) = ex.check_capstone_dispatch("softmax", op(1.0, 1.01), s["make_predicate"], lambda x: x, show=False)
    assert not r.passed and "only values your op computes on the Triton route" not in r.feedback, r.feedback


_KERNEL_HEAD = "    x = tl.load(X_ptr + row * X_row_stride + cols, mask=mask, other=OTHER).to(tl.float32)\n"
#: op -> (the honest kernel's lines after the load, its float64 reference, the mistaken lines after the load)
_OPS = {
    "log_softmax": ("-float('inf')",
                    "    z = x - tl.max(x, axis=0)\n    y = z - tl.log(tl.sum(tl.exp(z), axis=0))\n",
                    "    y = x - tl.log(tl.sum(tl.exp(x), axis=0))\n"),
    "l2_normalize": ("0.0",
                     "    y = x / tl.maximum(tl.sqrt(tl.sum(x * x, axis=0)), 1e-12)\n",
                     "    y = x / tl.sqrt(tl.sum(x * x, axis=0))\n"),
    "layer_norm": ("0.0",
                   "    mean = tl.sum(x, axis=0) / n_cols\n    d = tl.where(mask, x - mean, 0.0)\n"
                   "    y = d / tl.sqrt(tl.sum(d * d, axis=0) / n_cols + 1e-5)\n",
                   "    mean = tl.sum(x, axis=0) / n_cols\n"
                   "    y = (x - mean) / tl.sqrt(tl.sum(x * x, axis=0) / n_cols - mean * mean + 1e-5)\n"),
}


def _kernel_answer(op: str, body: str) -> dict:
    other, _, _ = _OPS[op]
    cells = _solution_cells("ex08")
    (i,) = [i for i, c in enumerate(cells) if "def softmax_kernel" in c]
    src = cells[i]
    start = src.index("    x = tl.load(")
    end = src.index("    tl.store(")
    store = src[end:].replace("(e / tl.sum(e, axis=0))", "y")
    cells[i] = src[:start] + _KERNEL_HEAD.replace("OTHER", other) + body + store
    return _run_cells(cells, f"ex08 {op} {hash(body)}")


@pytest.mark.parametrize("op", sorted(_OPS))
def test_each_operators_known_mistake_loses_the_kernel_with_its_fix_and_an_honest_kernel_passes(op):
    """log_softmax without the max shift (rows around +-1000), l2_normalize without the eps clamp (a zero row),
    layer_norm by E[x^2] - E[x]^2 (fp16 rows with a mean of 1000): each fails its regime's rows, the honest kernel
    passes every case."""
    _, honest, mistaken = _OPS[op]
    assert all(r.passed for r in ex.check_capstone_kernel(op, _kernel_answer(op, honest)["launch"], show=False))
    (r,) = ex.check_capstone_kernel(op, _kernel_answer(op, mistaken)["launch"], show=False)
    from fastpath_lib.grading.rules.ex08_faults import REGIMES as _REGIMES

    assert not r.passed and any(fix in r.feedback for *_, fix in _REGIMES[op]), r.feedback


# --- exercise 05: an honest LLM matrix, a case beyond the largest, rationales from one template --------------------

def _llm_matrix():
    """An ordinary LLM matrix written without the solution: 8 of its 13 cases are near the kit's predeclared cases
    (lesson 05 shows those shapes, and they are every model's)."""
    from fastpath_lib.cases import CaseSpec

    bf16, f16, f32 = torch.bfloat16, torch.float16, torch.float32
    return [
        ("decode_1x4096_fp16", CaseSpec(1, 4096, f16), "fallback",
         "one token per step: a single row sits below the row threshold"),
        ("decode_8x4096_bf16", CaseSpec(8, 4096, bf16), "fallback",
         "eight sequences decoding together are still too few rows to route"),
        ("prefill_4096x4096_bf16", CaseSpec(4096, 4096, bf16), "win",
         "a long prompt streams 32 MiB, memory bound, where fusing saves a pass"),
        ("prefill_4096x4096_fp16", CaseSpec(4096, 4096, f16), "win",
         "half precision prompt of the same size keeps the bandwidth argument"),
        ("prefill_8192x8192_bf16", CaseSpec(8192, 8192, bf16), "win",
         "a 70B-style hidden width doubles bytes per row and amortizes launch"),
        ("batch_1024x4096_fp32", CaseSpec(1024, 4096, f32), "neutral",
         "single precision at the threshold: the reference path is already near copy speed"),
        ("small_1024x128_fp16", CaseSpec(1024, 128, f16), "neutral",
         "narrow rows give each program too little work to beat the library"),
        ("odd_1024x1000_bf16", CaseSpec(1024, 1000, bf16), "loss",
         "a width that is no power of two wastes masked lanes in every block"),
        ("slice_2048x4096_bf16", CaseSpec(2048, 4096, bf16, layout="row_slice", pad=64), "win",
         "a view into a wider buffer is read in place without a copy"),
        ("tiny_64x64_fp32", CaseSpec(64, 64, f32), "fallback",
         "a toy input under the threshold never reaches the kernel at all"),
        ("transposed_4096x512_fp16", CaseSpec(4096, 512, f16, layout="transposed"), "fallback",
         "columns with a stride break the contiguous-row requirement"),
        ("wide_128x65536_bf16", CaseSpec(128, 65536, bf16), "fallback",
         "vocabulary-sized rows exceed what one program may hold"),
        ("misaligned_2048x4095_fp16", CaseSpec(2048, 4095, f16), "fallback",
         "an odd width leaves rows off the sixteen byte boundary"),
    ]


def test_an_llm_matrix_that_shares_the_kits_shapes_gets_full_marks():
    from fastpath_lib.grading.checks import ex05_matrix

    matrix = _llm_matrix()
    assert len(ex05_matrix._kit_shaped(matrix, ex05_matrix._kit_cases())) >= 8  # what the old rule refused
    results = ex.check_case_matrix(lambda: matrix, show=False)
    assert all(r.passed for r in results), [(r.part, r.feedback) for r in results]


def test_a_case_beyond_the_largest_costs_the_size_part_only_and_says_which():
    from fastpath_lib.cases import CaseSpec

    matrix = _llm_matrix() + [("prefill_16384x5120_bf16", CaseSpec(16384, 5120, torch.bfloat16), "win",
                               "a long prompt at a 5120 hidden width moves the most bytes of all")]
    by = {r.part: r for r in ex.check_case_matrix(lambda: matrix, show=False)}
    assert not by["size_coverage"].passed and "prefill_16384x5120_bf16: 16384x5120 is beyond it" in \
        by["size_coverage"].feedback, by["size_coverage"].feedback
    assert by["layout_coverage"].passed and by["expectations"].passed, by


@pytest.mark.parametrize("case, part, says", [
    (("empty_0x64_fp32", (0, 64), "contiguous"), "size_coverage", "shape (0, 64) must be [rows, cols] with both >= 1"),
    (("nhwc_64x64_fp16", (64, 64), "channels_last"), "layout_coverage", "layout 'channels_last' not in"),
])
def test_a_case_the_benchmark_cannot_time_costs_its_own_part_only(case, part, says):
    """Reader 16b F9: an empty input (the predicate's ``non_empty`` fallback) or a layout the benchmark does not time
    costs the part its rule belongs to (sizes; layouts and dtypes), and the feedback names the case."""
    from fastpath_lib.cases import CaseSpec

    cid, (rows, cols), layout = case
    matrix = _llm_matrix() + [(cid, CaseSpec(rows, cols, torch.float16, layout=layout), "fallback",
                               "nothing here the kernel could ever be asked to touch")]
    by = {r.part: r for r in ex.check_case_matrix(lambda: matrix, show=False)}
    assert not by[part].passed and says in by[part].feedback and cid in by[part].feedback, by[part].feedback
    assert all(r.passed for p, r in by.items() if p != part), by


@pytest.mark.parametrize("template", [
    "{cid}: a {dtype} {layout} case of {rows}x{cols}, expected {exp}",
    "I expect {exp} for this {dtype} case of shape {rows} by {cols} ({layout} layout)",
])
def test_rationales_from_one_template_over_the_cases_fields_lose_the_expectations_part(template):
    """The solution's cases with each rationale one f-string over the case's own fields: no why, and the feedback
    names the cases that share the template."""
    own = ex_matrix_solution()
    templated = [(cid, spec, exp, template.format(cid=cid, dtype=str(spec.dtype).replace("torch.", ""),
                                                  layout=spec.layout, rows=spec.rows, cols=spec.cols, exp=exp))
                 for cid, spec, exp, _ in own]
    by = {r.part: r for r in ex.check_case_matrix(lambda: templated, show=False)}
    fb = by["expectations"].feedback
    assert not by["expectations"].passed and ("the same rationale as" in fb and "say why" in fb or
                                              "fewer than 3 words of its own" in fb), fb
    assert by["size_coverage"].passed and by["layout_coverage"].passed


def test_rationales_of_one_word_each_lose_the_expectations_part():
    """Issue 41 (attack 8, B4): each rationale the case's size and one word of its own (``4096 by 4096 alpha``): no
    two share a word, and none says why. A rationale keeps at least three words of its own."""
    words = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november".split()
    own = ex_matrix_solution()
    one_word = [(cid, spec, exp, f"{spec.rows} by {spec.cols} {w}") for (cid, spec, exp, _), w in zip(own, words)]
    by = {r.part: r for r in ex.check_case_matrix(lambda: one_word, show=False)}
    fb = by["expectations"].feedback
    assert not by["expectations"].passed and f"{own[0][0]}: no rationale saying why (fewer than 3 words" in fb, fb
    assert by["size_coverage"].passed and by["layout_coverage"].passed


@pytest.mark.parametrize("template", ["no reason given here {word}",
                                      "{word}: the same words fill this case, {rows} rows"])
def test_rationales_from_one_template_with_a_word_changed_per_case_lose_the_expectations_part(template):
    """Issue 41 (attack 7, A2): a template with one word changed per case (``no reason given here alpha``, ``...
    bravo``) had rationales that differed, so each was "of its own". Half the words of another case's rationale or
    more (leaving out numbers, the case's fields and the commonest words) is the same rationale."""
    words = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november".split()
    own = ex_matrix_solution()
    templated = [(cid, spec, exp, template.format(word=w, rows=spec.rows))
                 for (cid, spec, exp, _), w in zip(own, words)]
    by = {r.part: r for r in ex.check_case_matrix(lambda: templated, show=False)}
    fb = by["expectations"].feedback
    assert not by["expectations"].passed and f"{own[0][0]}: the same rationale as {own[1][0]}" in fb and \
        "half its words or more" in fb, fb
    assert by["size_coverage"].passed and by["layout_coverage"].passed


def ex_matrix_solution():
    return solved("ex05")["my_matrix"]()


# --- exercise 04: survivors named by the inputs they fail on ------------------------------------------------------

def _ex04_regime_cases():
    """kernel mutant -> a case of the regime its feedback names (the wording is the mutant's own ``regime``)."""
    from fastpath_lib.cases import CaseSpec

    return {
        "kernel_mean_over_block": CaseSpec(8, 48), "backward_mean_over_block": CaseSpec(8, 48),
        "kernel_ignores_row_stride": CaseSpec(8, 64, layout="row_slice", pad=16),
        "backward_ignores_row_stride": CaseSpec(8, 64, layout="row_slice", pad=16),
        "kernel_unmasked_tail": CaseSpec(8, 40), "kernel_weight_always_applied": CaseSpec(8, 64, weight=None),
        "kernel_eps_outside_sqrt": CaseSpec(8, 64, scale=1e-4),
        "kernel_half_precision_squares": CaseSpec(8, 64, torch.float16, scale=300.0),
        "launcher_eps_default_of_input_dtype": CaseSpec(8, 64, torch.float16, scale=1e-2),
        "backward_drops_partial_row_block": CaseSpec(9, 64),
    }


def test_each_kernel_mutant_fails_on_the_regime_its_feedback_names_and_not_on_an_ordinary_case():
    """The survivors' feedback names a kind of input; a case of that kind catches the mutant (every draw of the
    backward's programs), an ordinary fp32 case of a power-of-two width does not."""
    import random

    from fastpath_lib.cases import CaseSpec
    from fastpath_lib.grading.checks.ex04_boundary import _verdicts
    from fastpath_lib.grading.rules import mutants as M

    cases = _ex04_regime_cases()
    assert set(cases) == set(M.KERNEL_MUTANTS)
    for seed in range(2):
        for m in M.drawn(random.Random(seed)):
            if m.kind == "predicate":
                continue
            assert m.regime, m.name
            caught, errors = _verdicts([cases[m.name]], (m,))
            assert caught[m.name] and not errors, (m.name, m.regime, errors)
            caught, errors = _verdicts([CaseSpec(8, 64)], (m,))
            assert not caught[m.name] and not errors, (m.name, "caught by an ordinary case")


def test_each_predicate_mutant_fails_on_the_regime_its_feedback_names_and_not_on_an_ordinary_case():
    """A predicate mutant's feedback names its condition's kind of input; the boundary points the predicate declares
    for that condition catch every draw of it, the eligible base case alone catches none, and every condition of the
    predicate has a regime (a condition added later has one or this fails)."""
    import random

    from fastpath_lib import boundary
    from fastpath_lib.cases import CaseSpec
    from fastpath_lib.grading.checks.ex04_boundary import _verdicts
    from fastpath_lib.grading.rules import mutants as M
    from fastpath_lib.rmsnorm.predicate import PREDICATE

    points = [p for p in boundary.boundary_points() if not p.context]
    assert {m.condition for m in M.ALL if m.kind == "predicate"} <= {c.name for c in PREDICATE.conditions}
    base = CaseSpec(4 * max(p.spec.rows for p in points if p.holds), 64)  # fp32, 256-byte rows: well inside
    seen = set()
    for seed in range(3):
        for m in M.drawn(random.Random(seed)):
            if m.kind != "predicate":
                continue
            seen.add(m.condition)
            assert m.regime == M._CONDITION_REGIMES[m.condition], m.name
            own = [p.spec for p in points if p.condition == m.condition]
            caught, errors = _verdicts(own, (m,))
            assert caught[m.name] and not errors, (seed, m.name, m.regime, errors)
            if m.condition in ("input_alignment", "dtype"):
                continue  # regimes that hold every eligible case (a 16-byte-aligned pointer, a supported dtype)
            caught, errors = _verdicts([base], (m,))
            assert not caught[m.name] and not errors, (seed, m.name, "caught by the eligible base case alone")
    assert seen == {m.condition for m in M.ALL if m.kind == "predicate"}


def test_ex04_survivors_feedback_names_the_regime_of_each_surviving_category():
    from fastpath_lib.cases import CaseSpec
    from fastpath_lib.grading.rules import mutants as M

    results = ex.check_boundary_cases(lambda: [CaseSpec(8, 64)], show=False)
    for r in results:
        if r.passed:
            continue
        category = next(c for c in M.CATEGORIES if c in r.feedback)
        alive = M.by_category(category)
        assert "differ from the correct code on" in r.feedback, r.feedback
        assert any(m.regime in r.feedback for m in alive), r.feedback
        assert not any(m.name in r.feedback for m in M.ALL), r.feedback  # a kind of input, never the mutant


# --- exercise 10: a crossover taken at the first win, or the smallest over the widths ---------------------------------

def _ex10_answer(first_win: bool, smallest: bool):
    from fastpath_lib.bench.analysis import noise_band
    from fastpath_lib.grading.vocabulary import LOSS, outcome

    def choose_threshold(df):
        out = {}
        for arch, g in df.groupby("arch", sort=False):
            per_width = []
            for _, w in g.groupby("cols"):
                w = w.sort_values("rows")
                ok = [outcome(p.fastpath_us / p.baseline_us, noise_band(
                    p.fastpath_q20_us, p.fastpath_us, p.fastpath_q80_us, p.baseline_q20_us, p.baseline_us,
                    p.baseline_q80_us)) != LOSS for p in w.itertuples()]
                rs = [int(r) for r in w["rows"]]
                per_width.append(next((rs[k] for k in range(len(rs)) if (ok[k] if first_win else all(ok[k:]))),
                                      None))
            out[arch] = None if None in per_width else (min if smallest else max)(per_width)
        return out
    return choose_threshold


@pytest.mark.parametrize("first_win, smallest, said", [
    (True, False, "yours is where the fast path first stops losing"),
    (False, True, "yours is the smallest crossover over the widths: min_rows is the largest"),
])
def test_a_threshold_from_the_first_win_or_the_smallest_width_is_told_the_rule_it_breaks(first_win, smallest, said):
    """'N architecture thresholds differ' alone does not say what to fix: the feedback states the exercise's rule
    (never a loss at any larger size, the largest over the widths) and what the answer did instead, per arch."""
    from fastpath_lib.grading.checks.ex10_threshold import RULE

    by = {r.part: r for r in ex.check_threshold(_ex10_answer(first_win, smallest), show=False)}
    assert not by["thresholds"].passed, by["thresholds"].feedback
    assert RULE in by["thresholds"].feedback and said in by["thresholds"].feedback, by["thresholds"].feedback
    assert all(r.passed for r in ex.check_threshold(_ex10_answer(False, False), show=False))


# --- exercise 02: eps outside the square root -----------------------------------------------------------------------

_EPS_INSIDE = "rstd = 1.0 / tl.sqrt(tl.sum(hf * hf, axis=0) / n_cols + eps)"


def test_eps_outside_the_square_root_loses_the_forward_kernel_on_every_run():
    """`1 / (sqrt(mean(h^2)) + eps)` differs from the spec by about eps / (2 mean(h^2)): only a case whose h is small
    shows it, so the small-scale case scales the residual too (h = x + r near 0.014, eps / (2 mean(h^2)) ~ 3e-4)."""
    cells = _solution_cells("ex02")
    assert any(_EPS_INSIDE in c for c in cells)
    ns = _run_cells([c.replace(_EPS_INSIDE, "rstd = 1.0 / (tl.sqrt(tl.sum(hf * hf, axis=0) / n_cols) + eps)")
                     for c in cells], "ex02 eps outside")
    (r,) = ex.check_add_rms_norm_kernel(ns["my_add_rms_norm_fwd"], show=False)
    assert not r.passed and "scale=0.01" in r.feedback, r.feedback
    assert all(r.passed for r in ex.check_add_rms_norm_kernel(solved("ex02")["my_add_rms_norm_fwd"], show=False))


def test_a_kernel_normalizing_the_unrounded_sum_is_told_the_spec_normalizes_the_stored_h():
    """vLLM's contract (the unrounded fp32 sum) is not this spec's: the fp16/bf16 cases that show it say so."""
    cells = _solution_cells("ex02")
    assert any("    hf = h.to(tl.float32)\n" in c for c in cells)
    ns = _run_cells([c.replace("    hf = h.to(tl.float32)\n", "    hf = x + r\n") for c in cells], "ex02 unrounded")
    (r,) = ex.check_add_rms_norm_kernel(ns["my_add_rms_norm_fwd"], show=False)
    assert not r.passed and "your rstd is that of the unrounded fp32 sum x + r" in r.feedback, r.feedback


# --- exercise 02: the mean of squares reduced in the input's precision ------------------------------------------------

_MEAN_SQUARE = "rstd = 1.0 / tl.sqrt(tl.sum(hf * hf, axis=0) / n_cols + eps)"


@pytest.mark.parametrize("line, hinted", [
    # learner 13's mistake: the squares summed in the input dtype, cast to fp32 after the sum
    ("rstd = 1.0 / tl.sqrt((tl.sum(h * h, axis=0) / n_cols).to(tl.float32) + eps)", True),
    # an fp32 reduction with the wrong divisor is wrong in every dtype: no precision hint
    ("rstd = 1.0 / tl.sqrt(tl.sum(hf * hf, axis=0) / (n_cols + 1) + eps)", False),
])
def test_a_mean_square_in_fp16_is_told_to_accumulate_in_fp32(line, hinted):
    cells = _solution_cells("ex02")
    assert any(_MEAN_SQUARE in c for c in cells)
    ns = _run_cells([c.replace(_MEAN_SQUARE, line) for c in cells], f"ex02 {line}")
    (r,) = ex.check_add_rms_norm_kernel(ns["my_add_rms_norm_fwd"], show=False)
    assert not r.passed
    assert ("compute the mean of squares in float32" in r.feedback) is hinted, r.feedback
