"""Exercises 09-11 (contract-parity tests, the per-architecture row threshold, commit hygiene): the solutions' own
functions get full marks, and borrowed, trivial and forged answers get no points. (The solution notebooks' full marks
and the untouched exercises' zero under the grader, for every exercise: test_grading.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

jupytext = pytest.importorskip("jupytext")
pytest.importorskip("pandas")

import fastpath_lib  # noqa: E402
from fastpath_lib import exercises as ex  # noqa: E402
from fastpath_lib.grading.registry import EXERCISES  # noqa: E402
from tests.solved import earned, solved  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def by_part(results) -> dict:
    return {r.part: r for r in results}


def fb(results) -> str:
    return "\n".join(f"{r.part}: {r.feedback}" for r in results)


# --- ex09: contract-parity tests -----------------------------------------------------------------------------------

def ex09(tests, kit_op=None):
    return ex.check_contract_tests(tests, fastpath_lib.rms_norm if kit_op is None else kit_op, show=False)


def test_ex09_solution_gets_full_marks():
    results = ex09(solved("ex09")["my_contract_tests"])
    assert [r.part for r in results] == [p for p, _ in EXERCISES["ex09"]]
    assert all(r.passed for r in results), fb(results)


def _never_fails(op):
    op(torch.randn(16, 32), [32])


def _always_fails(op):
    raise AssertionError("broken")


def _by_identity(op):  # forged: recognises the correct ops instead of testing them
    if op is F.rms_norm or op is fastpath_lib.rms_norm or getattr(op, "__name__", "") == "rms_norm":
        return
    raise AssertionError("not a known good op")


def _against_kit_op(op):  # borrowed: the kit's op as the oracle instead of F.rms_norm
    x = torch.full((16, 32), 1e-4).half()
    torch.testing.assert_close(op(x, [32]), fastpath_lib.rms_norm(x, [32]))


def _with_grader_ops(op):  # borrowed: runs the grader's broken ops to find out what to compare
    from fastpath_lib.grading.checks import ex09_contract as g

    x = torch.randn(16, 32)
    for impls in g.BROKEN.values():
        for impl in impls:
            impl(x.clone(), [32], None, None)
    torch.testing.assert_close(op(x, [32]), F.rms_norm(x, [32]))


def _values_only(op):  # honest but thin: fp32 values only
    x, w = torch.randn(16, 32), torch.randn(32)
    torch.testing.assert_close(op(x, [32], w), F.rms_norm(x, [32], w))


def _too_tight(op):  # fails on a correct op: a bitwise check against F.rms_norm in fp16
    x = torch.randn(16, 32).half()
    assert torch.equal(op(x, [32]), F.rms_norm(x, [32]).add(1e-3))
    solved("ex09")["my_contract_tests"](op)


EX09_BAD = {
    "trivial: never fails": _never_fails,
    "trivial: always fails": _always_fails,
    "trivial: stub": lambda op: (_ for _ in ()).throw(NotImplementedError),
    "trivial: not a function": "my_contract_tests",
    "forged: recognises the correct ops": _by_identity,
    "forged: fails on a correct op, catches everything": _too_tight,
    "borrowed: the kit's op as the oracle": _against_kit_op,
    "borrowed: the grader's broken ops": _with_grader_ops,
}


@pytest.mark.parametrize("name", sorted(EX09_BAD))
def test_ex09_bad_answer_gets_no_points(name):
    results = ex09(EX09_BAD[name])
    assert results and earned(results) == 0, fb(results)
    assert all(r.feedback for r in results)


def test_ex09_borrowed_answers_are_named():
    assert "F.rms_norm, the owner of the contract" in ex09(_against_kit_op)[0].feedback
    assert "grader's own machinery" in ex09(_with_grader_ops)[0].feedback


_EX09_PROBES = {
    # a tensor's version counter (lesson 08's probe): the op leaves its input unwritten; fp32 values on top
    "version": "import torch\nimport torch.nn.functional as F\ndef t(op):\n    x = torch.randn(16, 32)\n"
               "    v = x._version\n    y = op(x, [32])\n    assert x._version == v, 'the op wrote its input'\n"
               "    torch.testing.assert_close(y, F.rms_norm(x, [32]))",
    "class": "import torch\ndef t(op):\n    try:\n        op(torch.randn(4, 8), [9])\n    except Exception as e:\n"
             "        assert e.__class__ is RuntimeError",
}


@pytest.mark.parametrize("probe, refused", [("version", False), ("class", True)])
def test_ex09_notebook_check_applies_the_graders_inspection_rule(probe, refused):
    """The notebook's check refuses what the grader refuses (reader 13b F2: ``passed`` here, 0 in the grader), and a
    tensor's ``_version`` is no inspection of the op (F1)."""
    from fastpath_lib.grading.engine import sources
    from fastpath_lib.grading.rules.mutation import INSPECTS

    cells = [_EX09_PROBES[probe]]
    ns: dict = {}
    exec(compile(cells[0], "<learner>", "exec"), ns)
    with sources.using(cells):
        results = by_part(ex09(ns["t"]))
    said = results["passes_correct_ops"].feedback
    assert (INSPECTS in said) is refused and results["passes_correct_ops"].passed is not refused, said


def test_ex09_check_needs_the_kit_op_as_its_second_argument():
    results = ex09(solved("ex09")["my_contract_tests"], kit_op=F.rms_norm)
    assert earned(results) == 0 and "kit's op" in results[0].feedback


def test_ex09_thin_tests_name_the_categories_that_got_through():
    res = by_part(ex09(_values_only))
    assert res["passes_correct_ops"].passed
    for cat in ("dtype", "layout", "eps", "forward_ad", "exceptions"):
        assert not res[cat].passed and res[cat].feedback.startswith("survivors"), (cat, res[cat].feedback)
    assert res["aliasing"].passed  # the in-place op changes x before F.rms_norm reads it
    text = fb(list(res.values()))
    for private in ("_fp32_out", "_eps_1e5", "_ZeroTangent", "_in_place", "1e-5", "channels_last", "float64"):
        assert private not in text, private  # categories, never the op or the input that would catch it


#: category -> the lines of the solution that check its promise (substrings of the first and the last line)
_SECTIONS = {
    "layout": ("# layout", "layout: strides differ"),
    "eps": ("# eps matters", "eps={eps} differs"),
    "autograd": ("# autograd: dx and dw", "torch.autograd.grad(F.rms_norm"),
    "forward_ad": ("got = torch.func.jvp", "close(got, torch.func.jvp"),
    "exceptions": ("# exceptions", "assert errors[0] == errors[1]"),
}


def _solution_without(category: str):
    src = next(c.source for c in jupytext.read(next((ROOT / "solutions").glob("ex09_*.py"))).cells
               if "def my_contract_tests" in c.source)
    lines = src.splitlines()
    first, last = _SECTIONS[category]
    a = next(i for i, line in enumerate(lines) if first in line)
    b = next(i for i, line in enumerate(lines) if i >= a and last in line)
    kept = "\n".join(lines[:a] + lines[b + 1:])
    ns = {"torch": torch, "F": F}
    exec(compile(kept, f"<ex09 without {category}>", "exec"), ns)
    return ns["my_contract_tests"]


@pytest.mark.parametrize("category", sorted(_SECTIONS))
def test_ex09_dropping_a_promise_loses_its_category(category):
    res = by_part(ex09(_solution_without(category)))
    assert res["passes_correct_ops"].passed, res["passes_correct_ops"].feedback
    assert not res[category].passed and res[category].feedback.startswith("survivors"), res[category].feedback
    assert res["dtype"].passed


def test_ex09_exceptions_compared_by_type_only_lose_the_category_and_feedback_names_the_message():
    """The exercise asks for type and message: the solution's exception test with the message left out passes on a
    correct op and lets through an op that raises F.rms_norm's type with a message of its own."""
    src = next(c.source for c in jupytext.read(next((ROOT / "solutions").glob("ex09_*.py"))).cells
               if "def my_contract_tests" in c.source)
    assert "errors.append((type(e).__name__, str(e)))" in src
    ns = {"torch": torch, "F": F}
    exec(compile(src.replace("errors.append((type(e).__name__, str(e)))", "errors.append(type(e).__name__)"),
                 "<ex09 type only>", "exec"), ns)
    res = by_part(ex09(ns["my_contract_tests"]))
    assert res["passes_correct_ops"].passed and res["dtype"].passed, res["passes_correct_ops"].feedback
    assert not res["exceptions"].passed and "message" in res["exceptions"].feedback, res["exceptions"].feedback


# --- ex10: the per-architecture row threshold ----------------------------------------------------------------------

def test_ex10_solution_gets_full_marks():
    results = ex.check_threshold(solved("ex10")["choose_threshold"], show=False)
    assert [r.part for r in results] == [p for p, _ in EXERCISES["ex10"]]
    assert all(r.passed for r in results), fb(results)


@pytest.mark.parametrize("seed", range(6))
def test_ex10_expected_is_the_kits_sweep_rule(seed):
    """The grader's answer is bench.sweep.propose's on the same data (one rule), and every drawn table needs it:
    an early win before the last loss, the largest crossover over widths, and one architecture with none."""
    import pandas as pd

    from fastpath_lib.bench.sweep import propose
    from fastpath_lib.grading.checks.ex10_threshold import expected_thresholds

    df = ex.sweep_table(seed)
    assert "SYNTHETIC" in df.attrs["source"]
    want = expected_thresholds(df)
    for arch, a in df.groupby("arch"):
        recs = []
        for r in a.itertuples():
            for provider, pre in (("baseline", "baseline"), ("triton", "fastpath")):
                recs.append({"cols": r.cols, "rows": r.rows, "provider": provider, "case_id": f"{r.cols}x{r.rows}",
                             "status": "ok", "route": "triton", "expected": None, "gpu_measurement": True,
                             "q20_us": getattr(r, f"{pre}_q20_us"), "median_us": getattr(r, f"{pre}_us"),
                             "q80_us": getattr(r, f"{pre}_q80_us")})
        assert propose(pd.DataFrame(recs), capability=(9, 0))["proposed_min_rows"] == want[arch], arch
    assert sum(v is None for v in want.values()) == 1 and len(want) == 4
    assert set(want) != set(expected_thresholds(ex.sweep_table(seed + 100))) or want != expected_thresholds(
        ex.sweep_table(seed + 100))


def test_ex10_sweeps_only_architectures_whose_threshold_the_predicate_reads(monkeypatch):
    """The answer guide says an architecture the sweep gives no threshold takes the conservative default, so the Triton
    route still runs there: true in every draw, since each drawn architecture is admitted by default and reads its
    own entry of ``CUDA_MIN_ROWS`` (sm_75, inside ``allow_sm75()``, would read none)."""
    import types

    from fastpath_lib.rmsnorm import limits as L

    guide = " ".join((ROOT / "solutions" / "ex10_row_threshold.py").read_text().replace("#", " ").split())
    default = f"the predicate takes its conservative default (`min_rows={L.DEFAULT_CUDA_MIN_ROWS}`)"
    assert f"{default}, so the Triton route still runs" in guide
    for arch in sorted({a for seed in range(20) for a in ex.sweep_table(seed)["arch"]}):
        cap = (int(arch[3:-1]), int(arch[-1]))  # "sm_120" -> (12, 0)
        call = types.SimpleNamespace(device_type="cuda", interpret=False, capability=cap, limits=L.Limits(),
                                     input=None, weight=None)
        assert L.check_arch(call) is None, arch
        assert L.limits_for("cuda", interpret=False, capability=cap).min_rows == L.DEFAULT_CUDA_MIN_ROWS, arch
        monkeypatch.setitem(L.CUDA_MIN_ROWS, cap, 4096)
        assert L.limits_for("cuda", interpret=False, capability=cap).min_rows == 4096, arch


def _first_non_loss(df):  # forgets "never a loss at any larger size"
    out = {}
    for arch, a in df.groupby("arch"):
        per = []
        for _, t in a.sort_values("rows").groupby("cols"):
            ok = (t["fastpath_us"] <= t["baseline_us"] * 1.2).tolist()
            per.append(t["rows"].tolist()[ok.index(True)] if True in ok else None)
        out[arch] = None if None in per else max(per)
    return out


def _no_noise_band(df):  # the right walk, but every slower median counts as a loss
    out = {}
    for arch, a in df.groupby("arch"):
        per = []
        for _, t in a.sort_values("rows").groupby("cols"):
            lost, rows = (t["fastpath_us"] > t["baseline_us"]).tolist(), t["rows"].tolist()
            after = max((i + 1 for i, x in enumerate(lost) if x), default=0)
            per.append(rows[after] if after < len(rows) else None)
        out[arch] = None if None in per else max(per)
    return out


def _smallest_width(df):  # the crossover of the smallest width only
    s = solved("ex10")["choose_threshold"]
    return s(df[df["cols"] == df.groupby("arch")["cols"].transform("min")])


def _recorded():  # forged: the notebook's answers, looked up
    from fastpath_lib.grading.checks.ex10_threshold import expected_thresholds

    book = expected_thresholds(ex.sweep_table(0))
    return lambda df: {a: book.get(a, 1024) for a in df["arch"].unique()}


def _via_grader(df):
    from fastpath_lib.grading.checks.ex10_threshold import expected_thresholds

    return expected_thresholds(df)


def _via_propose(df):
    import pandas as pd

    from fastpath_lib.bench.sweep import propose

    out = {}
    for arch, a in df.groupby("arch"):
        recs = [{"cols": r.cols, "rows": r.rows, "provider": p, "case_id": f"{r.cols}x{r.rows}", "status": "ok",
                 "route": "triton", "expected": None, "gpu_measurement": True, "q20_us": getattr(r, f"{k}_q20_us"),
                 "median_us": getattr(r, f"{k}_us"), "q80_us": getattr(r, f"{k}_q80_us")}
                for r in a.itertuples() for p, k in (("baseline", "baseline"), ("triton", "fastpath"))]
        out[arch] = propose(pd.DataFrame(recs), capability=(9, 0))["proposed_min_rows"]
    return out


EX10_BAD = {
    "trivial: None everywhere": lambda df: {a: None for a in df["arch"].unique()},
    "trivial: the smallest swept size": lambda df: {a: 8 for a in df["arch"].unique()},
    "trivial: empty dict": lambda df: {},
    "trivial: stub": lambda df: None,
    "wrong: first non-loss": _first_non_loss,
    "wrong: no noise band": _no_noise_band,
    "wrong: smallest width only": _smallest_width,
    "forged: the notebook's answers recorded": _recorded(),
    "borrowed: the grader's answer": _via_grader,
    "borrowed: the kit's sweep rule": _via_propose,
}


@pytest.mark.parametrize("name", sorted(EX10_BAD))
def test_ex10_bad_answer_gets_no_points(name):
    results = []
    for _ in range(3):  # the tables are drawn afresh: a wrong rule must fail on every draw, not on a lucky one
        results += ex.check_threshold(EX10_BAD[name], show=False)
    assert results and earned(results) == 0, fb(results)
    assert all(r.feedback for r in results)


def test_ex10_borrowed_answers_are_named():
    assert "grader's own answer" in ex.check_threshold(_via_grader, show=False)[0].feedback
    assert "kit's own threshold rule" in ex.check_threshold(_via_propose, show=False)[0].feedback


# --- ex11: commit hygiene ------------------------------------------------------------------------------------------

def ex11(fn):
    return ex.check_commit_plan(fn, show=False)


def _what(hunk) -> str:
    """What a hunk does, as the solution reads it from the hunk's file and diff (its texts change at every draw)."""
    return solved("ex11")["what"](hunk)


def _solution_plan():
    """The solution's plan as (kind, message, what each hunk does), recovered by running it on one draw."""
    hunks = ex.change_hunks(7)
    does = {h["id"]: _what(h) for h in hunks}
    return [(c["kind"], c["message"], [does[i] for i in c["hunks"]]) for c in solved("ex11")["plan_commits"](hunks)]


def _planner(edit):
    """A plan_commits built from the solution's plan, changed by ``edit(plan) -> plan``."""
    plan = edit([(k, m, list(ds)) for k, m, ds in _solution_plan()])

    def plan_commits(hunks):
        id_of = {_what(h): h["id"] for h in hunks}
        return [{"kind": k, "message": m, "hunks": [id_of[d] for d in ds]} for k, m, ds in plan]
    return plan_commits


def _find(plan, role):
    return next(i for i, (_, _, ds) in enumerate(plan) if role in ds)


def _routing_as_refactor(plan):
    i = _find(plan, "route")
    k, m, ds = plan[i]
    return [("refactor", "Route the model's norm (a pure refactor?)", ["route"])] + plan[:i] + \
        [(k, m, [d for d in ds if d != "route"])] + plan[i + 1:]


def _simplify_as_refactor(plan):
    i = _find(plan, "simplify")
    return [("refactor",) + plan[i][1:]] + plan[:i] + plan[i + 1:]


def _tests_after(plan):
    i = _find(plan, "condition_test")
    k, m, ds = plan[i]
    return plan[:i] + [(k, m, [d for d in ds if d != "condition_test"])] + plan[i + 1:] + \
        [("test", "Add the tests", ["condition_test"])]


def _move_split(plan):
    i = _find(plan, "move_in")
    k, m, ds = plan[i]
    return plan[:i] + [(k, m, [d for d in ds if d != "move_in"]), ("refactor", "Add the moved helper", ["move_in"])] \
        + plan[i + 1:]


def _docs_first(plan):
    i = _find(plan, "readme")
    k, m, ds = plan[i]
    docs = [d for d in ds if d in ("readme", "changelog")]
    first = next(j for j, p in enumerate(plan) if p[0] != "refactor")
    rest = plan[:i] + [(k, m, [d for d in ds if d not in docs])] + plan[i + 1:]
    return rest[:first] + [("docs", "Document the row-width condition", docs)] + rest[first:]


def _lumped(plan):
    """Two commits: every refactor, then every behaviour change with its tests and docs."""
    return [("refactor", "All the refactors", [d for k, _, ds in plan if k == "refactor" for d in ds]),
            ("behaviour", "The row-width condition, the simplification and the routing",
             [d for k, _, ds in plan if k != "refactor" for d in ds])]


def _new_test_first(plan):
    """The test of the new condition in a test commit of its own, just before the condition: that commit is red."""
    i = _find(plan, "condition")
    k, m, ds = plan[i]
    return plan[:i] + [("test", "Test the row-width condition", ["condition_test"]),
                       (k, m, [d for d in ds if d != "condition_test"])] + plan[i + 1:]


def _readme_after(plan):
    """The README's generated table in a docs commit after the condition: the condition's commit fails test_docs."""
    i = _find(plan, "readme")
    k, m, ds = plan[i]
    return plan[:i] + [(k, m, [d for d in ds if d != "readme"]), ("docs", "README table", ["readme"])] + plan[i + 1:]


def _pin_test_last(plan):
    i = _find(plan, "pin_test")
    return plan[:i] + plan[i + 1:] + [plan[i]]


def _other_good_plan(plan):
    """Another reviewable history: the pinning test with the routing, the move before the rename, the changelog in
    a docs commit of its own after the change, the simplification last."""
    at = {role: plan[_find(plan, role)] for role in ("rename", "move_out", "condition", "simplify", "route")}
    cond = at["condition"]
    return [at["move_out"], at["rename"], (cond[0], cond[1], [d for d in cond[2] if d != "changelog"]),
            ("docs", "CHANGELOG entry for the row-width condition", ["changelog"]),
            (at["route"][0], at["route"][1], at["route"][2] + ["pin_test"]), at["simplify"]]


def test_ex11_solution_gets_full_marks():
    results = ex11(solved("ex11")["plan_commits"])
    assert [r.part for r in results] == [p for p, _ in EXERCISES["ex11"]]
    assert all(r.passed for r in results), fb(results)


def test_ex11_another_reviewable_plan_gets_full_marks():
    results = ex11(_planner(_other_good_plan))
    assert all(r.passed for r in results), fb(results)


def test_ex11_answer_key_lists_the_hunks_in_the_order_of_their_texts():
    from fastpath_lib.grading import materials
    from fastpath_lib.grading.checks import ex11_commits

    key = ex11_commits._HUNKS
    assert len(key) == len(materials.HUNKS)
    for (file, description, _), h in zip(materials.HUNKS, key):  # the texts are the materials, the kinds the key
        assert description.startswith("Test:") == (h.nature in ("test", "pin")), (h.key, description)
        assert file.endswith(".md") == (h.nature == "docs"), (h.key, file)


def test_ex11_hunks_are_drawn_afresh():
    a, b = ex.change_hunks(), ex.change_hunks()
    assert {h["id"] for h in a} != {h["id"] for h in b}
    assert ex.change_hunks(0) == ex.change_hunks(0) and set(ex.change_hunks(0)[0]) == {"id", "file", "description",
                                                                                         "diff"}
    texts = [{(h["file"], h["description"], h["diff"]) for h in ex.change_hunks(seed)} for seed in range(6)]
    assert all(len(t) == 12 for t in texts) and len({frozenset(t) for t in texts}) == 6
    from fastpath_lib.grading import materials

    for n in range(12):  # every hunk's own words vary across draws
        assert len({(h["description"], h["diff"]) for seed in range(40) for k, h in materials.drawn_hunks(seed)
                    if k == n}) > 1, n


def _descriptions_written_down():
    """Forged, as the solution once was: the plan keyed by the notebook's descriptions."""
    notebook = ex.change_hunks(0)
    plan = [(c["kind"], c["message"], [next(h["description"] for h in notebook if h["id"] == i) for i in c["hunks"]])
            for c in solved("ex11")["plan_commits"](notebook)]

    def plan_commits(hunks):
        id_of = {h["description"]: h["id"] for h in hunks}
        return [{"kind": k, "message": m, "hunks": [id_of.get(d, "h0000") for d in ds]} for k, m, ds in plan]
    return plan_commits


def test_ex11_a_plan_keyed_by_descriptions_fails_and_one_reading_the_diffs_passes_every_draw():
    """Red-team finding: only the hunks' ids and order were drawn, so a plan keyed by the descriptions passed every
    draw. The texts change at each draw; a plan that reads files and diffs (the solution's, or another reviewable
    one) passes 60 draws, one keyed by descriptions does not."""
    from fastpath_lib.grading.checks import ex11_commits

    forged = _descriptions_written_down()
    assert earned(ex11(forged)) == 0
    for seed in range(60):
        for plan in (solved("ex11")["plan_commits"], _planner(_other_good_plan)):
            results = ex11_commits._grade([("draw", ex11_commits._draw(seed))], plan)
            assert all(r.passed for r in results), (seed, fb(results))


@pytest.mark.parametrize("edit, broken", [
    (_routing_as_refactor, {"refactors_apart", "one_change_per_commit"}),
    (_simplify_as_refactor, {"refactors_apart", "every_commit_green"}),
    (_tests_after, {"one_change_per_commit"}), (_pin_test_last, {"one_change_per_commit"}),
    (_move_split, {"every_commit_green"}), (_docs_first, {"every_commit_green", "one_change_per_commit"}),
    (_lumped, {"one_change_per_commit"}), (_new_test_first, {"every_commit_green"}),
    (_readme_after, {"every_commit_green"}),
], ids=lambda v: getattr(v, "__name__", "-"))
def test_ex11_each_broken_rule_costs_the_plan_its_points(edit, broken):
    res = by_part(ex11(_planner(edit)))
    assert {p for p, r in res.items() if not r.feedback.startswith("this rule holds")} == broken, fb(res.values())
    assert earned(res.values()) == 0, fb(res.values())
    for r in res.values():  # the rule, never the hunk
        assert not any(w in r.feedback for w in ("Route", "Simplify", "README", "row_bytes", "Block")), r.feedback


def _recorded_ids():  # forged: the solution's plan for the notebook's draw, ids written down
    plan = solved("ex11")["plan_commits"](ex.change_hunks(0))
    return lambda hunks: plan


def _via_grader_draw(hunks):  # borrowed: the grader's own draw tells the kinds
    from fastpath_lib.grading import materials as g

    g.drawn_hunks(0)
    return [{"kind": "behaviour", "message": "everything at once", "hunks": [h["id"] for h in hunks]}]


def _one_per_hunk_as_given(hunks):  # trivial: a commit per hunk, in the order given, all "behaviour"
    return [{"kind": "behaviour", "message": f"change {h['file']}", "hunks": [h["id"]]} for h in hunks]


EX11_BAD = {
    "shortcut: two commits, every behaviour change lumped": _planner(_lumped),
    "shortcut: a red commit (a new test before its change)": _planner(_new_test_first),
    "trivial: one behaviour commit": lambda hunks: [{"kind": "behaviour", "message": "the whole change",
                                                     "hunks": [h["id"] for h in hunks]}],
    "trivial: one refactor commit": lambda hunks: [{"kind": "refactor", "message": "the whole change",
                                                    "hunks": [h["id"] for h in hunks]}],
    "trivial: a commit per hunk as given": _one_per_hunk_as_given,
    "trivial: no commits": lambda hunks: [],
    "trivial: stub": lambda hunks: None,
    "trivial: half the hunks": lambda hunks: solved("ex11")["plan_commits"](hunks)[:3],
    "wrong: routing counted as a refactor": _planner(_routing_as_refactor),
    "wrong: the 'Simplify' hunk counted as a refactor": _planner(_simplify_as_refactor),
    "forged: the notebook's ids written down": _recorded_ids(),
    "borrowed: the grader's draw": _via_grader_draw,
}


@pytest.mark.parametrize("name", sorted(EX11_BAD))
def test_ex11_bad_answer_gets_no_points(name):
    results = ex11(EX11_BAD[name])
    assert results and earned(results) == 0, fb(results)
    assert all(r.feedback for r in results)


def test_ex11_borrowed_and_forged_answers_are_named():
    assert "grader's own answer" in ex11(_via_grader_draw)[0].feedback
    assert "drawn afresh" in ex11(_recorded_ids())[0].feedback


def _ex09_probes():
    """One kind of call each: what a test made only of that kind of call sees of an op (True: it looks correct)."""
    import torch.nn.functional as F

    def same(got, want):  # values only (the dtype is the dtype probe's)
        return torch.allclose(got.double(), want.double(), rtol=1e-3, atol=1e-4)

    def dtype(op):
        x = torch.randn(16, 32).half()
        return op(x, [32]).dtype == F.rms_norm(x, [32]).dtype

    def values_fp32(op):  # each probe computes F.rms_norm's answer first: an op that writes its input shows only
        x, w = torch.randn(16, 32), torch.randn(32)  # to the aliasing probe
        want = F.rms_norm(x, [32], w)
        return same(op(x, [32], w), want)

    def layout(op):
        x = torch.randn(2, 4, 8, 16).to(memory_format=torch.channels_last)
        return op(x, [16]).stride() == F.rms_norm(x, [16]).stride()

    def aliasing(op):
        x = torch.randn(16, 32)
        before = x.clone()
        y = op(x, [32])
        return torch.equal(x, before) and y.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()

    def eps(op):
        tiny = torch.full((16, 32), 1e-4).half()
        wants = [F.rms_norm(tiny, [32], eps=e) for e in (None, 0.0, 1e-3)]
        return all(same(op(tiny.clone(), [32], eps=e), w) for e, w in zip((None, 0.0, 1e-3), wants))

    def autograd(op):
        x, w, dy = torch.randn(16, 32, requires_grad=True), torch.randn(32, requires_grad=True), torch.randn(16, 32)
        got = torch.autograd.grad(op(x, [32], w), (x, w), dy)
        want = torch.autograd.grad(F.rms_norm(x, [32], w), (x, w), dy)
        return all(same(a, b) for a, b in zip(got, want))

    def forward_ad(op):
        x, t, w = torch.randn(16, 32), torch.randn(16, 32), torch.randn(32)
        want = torch.func.jvp(lambda a: F.rms_norm(a, [32], w), (x,), (t,))[1]
        try:
            got = torch.func.jvp(lambda a: op(a, [32], w), (x,), (t,))[1]
        except Exception:  # noqa: BLE001 - an op without a jvp rule fails here
            return False
        return same(got, want)

    def raised(fn, args):
        try:
            fn(*args)
        except Exception as e:  # noqa: BLE001 - the type and message are what we compare
            return type(e).__name__, str(e)
        return None

    def exceptions(op):
        x = torch.randn(16, 32)
        calls = ((x, [31]), (x, [32], torch.ones(31)), (x.double(), [32]))
        return all(raised(op, a) == raised(F.rms_norm, a) for a in calls)

    return {"dtype": dtype, "values": values_fp32, "layout": layout, "aliasing": aliasing, "eps": eps,
            "autograd": autograd, "forward_ad": forward_ad, "exceptions": exceptions}


def _looks_correct(probe, op) -> bool:
    try:
        return probe(op)
    except Exception:  # noqa: BLE001 - a test fails when the op raises where F.rms_norm does not
        return False


def test_ex09_each_broken_op_is_caught_only_by_calls_of_its_own_kind():
    """A category is credited only through an op that differs from F.rms_norm in that category alone: ordinary fp32
    values catch no broken op, and each op fails its own category's kind of call and no other."""
    import torch.nn.functional as F

    from fastpath_lib.grading.checks import ex09_contract as g

    probes = _ex09_probes()
    assert all(p(F.rms_norm) for p in probes.values())
    for category, fns in g.BROKEN.items():
        for fn in fns:
            caught = {name for name, p in probes.items() if not _looks_correct(p, g._Op(fn))}
            assert caught == {category}, (category, getattr(fn, "__name__", fn), caught)
