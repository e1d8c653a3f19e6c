"""The grading command and the checks: zero on the untouched exercises/ (each run as a kernel would run it, all in one
process; one of them graded end to end in the sandbox) (full marks on solutions/ is
test_grading_solutions.py, a file of its own so that it runs beside this one), broken notebooks
(a raising cell, a hang, garbage) reported as failed parts, never as a crash, and the distributed check cells restored
and run by the grader itself. Tampering is tested in test_grading_integrity.py, bad answers in
test_grading_checks.py."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")  # the notebook packages are absent on a bare GPU machine

import torch  # noqa: E402

from fastpath_lib import exercises as ex  # noqa: E402
from fastpath_lib.cases import CaseSpec  # noqa: E402
from fastpath_lib.grading.engine import cli, sandbox  # noqa: E402
from fastpath_lib.grading.engine import notebook as NB  # noqa: E402
from fastpath_lib.grading.engine.notebook import CHECK_TAG, calls  # noqa: E402
from fastpath_lib.grading.registry import EXERCISES, MIME, Result  # noqa: E402
from fastpath_lib.grading.rules import mutants  # noqa: E402
from tests.solved import digest, grade_unchanged  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = sorted((ROOT / "solutions").glob("ex[0-9][0-9]_*.ipynb"))
EXERCISE_NBS = sorted((ROOT / "exercises").glob("ex[0-9][0-9]_*.ipynb"))


def _by_part(grade):
    return {p.part: p for p in grade.parts}


#: the untouched exercise graded end to end, in the grader's sandbox (its kernel, its restored check cells); every
#: exercise's untouched notebook also runs in one plain process below: zero needs no sandbox to be shown
END_TO_END = "ex12_fused_inplace_contract.ipynb"


@pytest.fixture(scope="module")
def exercise_grades():
    return grade_unchanged([ROOT / "exercises" / END_TO_END])


@pytest.fixture(scope="module")
def untouched_runs():
    """Every untouched exercise run as a notebook kernel would run it, all in one process
    (``tests/grading/run_notebooks_plain.py``): its checks' results, per notebook."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "grading" / "run_notebooks_plain.py"),
                           *map(str, EXERCISE_NBS)], capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_every_exercise_has_a_solution_and_an_exercise():
    ids = sorted(p.name[:4] for p in SOLUTIONS)
    assert ids == sorted(EXERCISES), ids
    assert [p.name for p in EXERCISE_NBS] == [p.name for p in SOLUTIONS]


def test_untouched_exercises_score_zero_on_every_part(untouched_runs):
    assert [Path(r["path"]).name for r in untouched_runs] == [p.name for p in EXERCISE_NBS]
    for run in untouched_runs:
        ex_id = Path(run["path"]).name[:4]
        by_part = {r.get("part"): r for r in run["results"]}
        assert set(by_part) == {n for n, _ in EXERCISES[ex_id]}, (run["path"], run["results"])
        for part, r in by_part.items():
            assert not r["passed"] and r["feedback"], (run["path"], part)
            assert "NotImplementedError" in r["feedback"] or "not implemented" in r["feedback"], (run["path"], part)


def test_an_untouched_exercise_scores_zero_in_the_grader(exercise_grades):
    assert [g.exercise for g in exercise_grades] == [END_TO_END[:4]]
    for g in exercise_grades:
        assert g.isolation == (sandbox.ISOLATED if sandbox.available() else sandbox.UNISOLATED), (g.path, g.notes)
        for p in g.parts:
            assert p.earned == 0 and not p.passed, (g.path, p.part)
            assert p.feedback, (g.path, p.part)
            assert "NotImplementedError" in p.feedback or "not implemented" in p.feedback, (g.path, p.part)


def _mutated(tmp_path, name, edit):
    src = ROOT / "solutions" / name
    nb = nbformat.read(src, as_version=4)
    edit(nb)
    out = tmp_path / name
    nbformat.write(nb, out)
    return out


def _exercise_with(tmp_path, name, edit):
    nb = nbformat.read(ROOT / "exercises" / name, as_version=4)
    edit(nb)
    out = tmp_path / name
    nbformat.write(nb, out)
    return out


def test_deleted_check_cell_is_restored_and_graded(tmp_path):
    def drop(nb):
        nb.cells = [c for c in nb.cells if "check_reference" not in c.source]

    g = cli.grade_notebook(_mutated(tmp_path, "ex01_reference.ipynb", drop), timeout=120)
    assert g.earned == g.points == 3, [(p.part, p.feedback) for p in g.parts]
    assert any("deleted: restored" in n for n in g.notes), g.notes


def test_edited_check_cell_is_restored(tmp_path):
    def edit(nb):  # the stubs stay; the check is pointed at the kit's own answers
        for c in nb.cells:
            if "ex.check_reference(" in c.source:
                c.source = "import fastpath_lib.testing as T\nex.check_reference(T.reference_rms_norm)"
            if "ex.check_default_eps(" in c.source:
                c.source = "from fastpath_lib.rmsnorm.predicate import default_eps\nex.check_default_eps(default_eps)"

    g = cli.grade_notebook(_exercise_with(tmp_path, "ex01_reference.ipynb", edit), timeout=120)
    assert g.earned == 0 and all("not implemented" in p.feedback for p in g.parts), g.parts
    assert sum("edited: restored" in n for n in g.notes) == 2, g.notes


def test_saved_and_displayed_outputs_never_count(tmp_path):
    solved = nbformat.read(ROOT / "solutions" / "ex01_reference.ipynb", as_version=4)
    saved = {c.get("id"): c.get("outputs", []) for c in solved.cells if c.cell_type == "code"}

    def forge(nb):  # the stubs carry the solution's saved "passed" outputs, and a cell displays forged results
        for c in nb.cells:
            if c.cell_type == "code":
                c.outputs = saved.get(c.get("id"), [])
        forged = [Result("ex01", part, pts, True).bundle() for part, pts in (("default_eps", 1), ("reference", 2))]
        nb.cells.append(nbformat.v4.new_code_cell(  # the result bundles written out (the kernel sees no registry)
            f"import json\nfrom IPython.display import display\nfor b in json.loads({json.dumps(forged)!r}):\n"
            "    display(b, raw=True)"))

    g = cli.grade_notebook(_exercise_with(tmp_path, "ex01_reference.ipynb", forge), timeout=120)
    assert g.earned == 0 and g.status == "ok", (g.status, g.reason, [(p.part, p.feedback) for p in g.parts])


def _ex08_min_rows(nb):
    """The solution with the row threshold lessons 03 and 05 teach under the interpreter (8), and its matrix's
    one-row case declared a fallback accordingly."""
    for c in nb.cells:
        if "def make_predicate" in c.source:
            c.source = c.source.replace("MAX_COLS = 8192\n", "MAX_COLS = 8192\nMIN_ROWS = 8\n").replace(
                '    return Predicate("softmax", [', """    def rows(x):
        n = x.numel() // max(x.shape[-1], 1)
        return None if n >= MIN_ROWS else f"{n} rows, need >= {MIN_ROWS}"
    return Predicate("softmax", [
        Condition("min_rows", f">= {MIN_ROWS} rows", rows, "speed",
                  boundaries=(Boundary("rows=min", {"rows": MIN_ROWS}, True),
                              Boundary("rows=min-1", {"rows": MIN_ROWS - 1}, False))),""")
        if "def capstone_matrix" in c.source:
            c.source = c.source.replace('torch.bfloat16}, "neutral")', 'torch.bfloat16}, "fallback")')


def _ex08_zeroing_op(nb):
    """A uniform answer made to agree by zeroing the op's input in place."""
    cell = next(c for c in nb.cells if c.source.startswith("def softmax(x):"))
    cell.source = ("def softmax(x):\n    d = make_predicate().evaluate(x)\n    x.zero_()\n"
                   "    return torch.full_like(x, 1 / x.shape[-1]), d.route\n")


@pytest.mark.parametrize("edit, passes", [(_ex08_min_rows, True), (_ex08_zeroing_op, False)],
                         ids=["MIN_ROWS = 8", "input zeroed in place"])
def test_ex08_dispatch_in_the_grader(tmp_path, edit, passes):
    """Red-team findings: an op with the taught MIN_ROWS = 8 was told "every case took route {'fallback'}"; an op
    zeroing its input scored the dispatch part, as the grader computed the expected value from what the learner's
    kernel left in the input. The call now declares no output: a write into the input fails the case."""
    g = cli.grade_notebook(_mutated(tmp_path, "ex08_capstone.ipynb", edit), timeout=240)
    parts = _by_part(g)
    assert parts["dispatch"].passed is passes, parts["dispatch"].feedback
    if not passes:  # every case the part ran (its fixed cases and the predicate's widest and narrowest) was written
        wrong = re.search(r"(\d+) of (\d+) cases wrong", parts["dispatch"].feedback)
        assert wrong and wrong[1] == wrong[2], parts["dispatch"].feedback
        assert parts["dispatch"].feedback.count("wrote into its input") == int(wrong[1]), parts["dispatch"].feedback
    assert all(p.passed for name, p in parts.items() if name != "dispatch"), [(p.part, p.feedback) for p in g.parts]


def test_raising_cell_does_not_stop_later_parts(tmp_path):
    def boom(nb):
        nb.cells.insert(2, nbformat.v4.new_code_cell("raise RuntimeError('boom')"))

    g = cli.grade_notebook(_mutated(tmp_path, "ex01_reference.ipynb", boom), timeout=120)
    assert g.status == "errors" and "RuntimeError" in g.reason and "boom" in g.reason
    assert g.earned == g.points == 3  # the parts after the error were still executed and graded


def test_hanging_notebook_times_out_and_keeps_earlier_parts(tmp_path):
    def hang(nb):
        i = next(i for i, c in enumerate(nb.cells) if "check_default_eps" in c.source)
        nb.cells.insert(i + 1, nbformat.v4.new_code_cell("import time\nwhile True:\n    time.sleep(0.1)"))

    # 20 s: the kernel's start and its imports (torch, Triton, the kit) come out of the same limit, and take several
    # seconds on a busy 2-core machine
    g = cli.grade_notebook(_mutated(tmp_path, "ex01_reference.ipynb", hang), timeout=20)
    parts = _by_part(g)
    assert g.status == "timeout", (g.status, g.reason)
    assert parts["default_eps"].passed
    assert not parts["reference"].passed and "check did not run" in parts["reference"].feedback
    assert "limit" in parts["reference"].feedback
    assert g.seconds < 60


@pytest.mark.skipif(not sandbox.available(), reason="needs the sandbox (bwrap)")
def test_a_cell_that_breaks_the_run_is_the_notebooks_error_and_never_reruns_it_outside_the_sandbox(tmp_path):
    """An attacker's finding: an output nbformat refuses raised out of the run, which read as "the sandbox could not
    start", and --isolation auto ran the notebook again unisolated, where it read solutions/. Once the notebook's code
    has run in the sandbox, what breaks the run is the notebook's error."""
    def breaks(nb):
        i = next(i for i, c in enumerate(nb.cells) if "check_default_eps" in c.source)
        nb.cells.insert(i + 1, nbformat.v4.new_code_cell("display({'text/plain': 123}, raw=True)"))

    g = cli.grade_notebook(_mutated(tmp_path, "ex01_reference.ipynb", breaks), timeout=120, isolation="auto")
    assert g.isolation == sandbox.ISOLATED and not g.notes, (g.isolation, g.notes)
    assert g.status == "errors" and "broke the run" in g.reason, (g.status, g.reason)
    assert _by_part(g)["default_eps"].passed and not _by_part(g)["reference"].passed


def test_data_files_left_out_of_the_working_copy_are_named_in_the_notes(tmp_path):
    """A data file beside the notebook travels with its working copy; a link, or a file over the limit, stays behind
    and the report says so (a cell that reads it fails only in the grader)."""
    (tmp_path / "nb").mkdir()
    (tmp_path / "nb" / "ex01_reference.ipynb").write_text("{}")
    (tmp_path / "nb" / "small.csv").write_text("a,b\n1,2\n")
    with open(tmp_path / "nb" / "big.pt", "wb") as fh:
        fh.truncate(NB.DATA_FILE_LIMIT)
    (tmp_path / "nb" / "link.csv").symlink_to(tmp_path / "nb" / "small.csv")
    (tmp_path / "copy").mkdir()
    notes = NB.copy_data_files(tmp_path / "nb", tmp_path / "copy")
    assert sorted(p.name for p in (tmp_path / "copy").iterdir()) == ["small.csv"]
    assert len(notes) == 2, notes
    assert notes[0].startswith("big.pt was not copied") and "8.0 MiB" in notes[0], notes
    assert notes[1].startswith("link.csv was not copied") and "a link" in notes[1], notes


def test_unreadable_notebook_is_a_failed_exercise(tmp_path):
    bad = tmp_path / "ex03_predicate.ipynb"
    bad.write_text("{ this is not json")
    g = cli.grade_notebook(bad)
    assert g.status == "unreadable" and g.exercise == "ex03"
    assert g.points == sum(p for _, p in EXERCISES["ex03"]) and g.earned == 0


def test_cli_json_and_exit_status(tmp_path, capsys):
    def solve_part_one(nb):
        solved = nbformat.read(ROOT / "solutions" / "ex01_reference.ipynb", as_version=4)
        source = {c.get("id"): c.source for c in solved.cells}
        for c in nb.cells:
            if "def my_default_eps" in c.source:
                c.source = source[c.get("id")]

    path = _exercise_with(tmp_path, "ex01_reference.ipynb", solve_part_one)
    before = digest([path])
    rc = cli.main([str(path), "--json", "--timeout", "120"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 1 and out["score"] == 1 and out["max"] == 3
    assert "not implemented" in out["notebooks"][0]["parts"][1]["feedback"]
    assert digest([path]) == before
    assert cli.main([str(tmp_path / "missing.ipynb")]) == 2


def test_cli_gradescope_format_writes_a_valid_results_json(tmp_path, capsys, monkeypatch):
    from fastpath_lib.grading.report import gradescope

    fake = cli.NotebookGrade("ex01_reference.ipynb", "ex01", "ok", "", 1.0,
                             [cli.PartGrade("ex01", "default_eps", 1, 1, True, ""),
                              cli.PartGrade("ex01", "reference", 2, 0, False, "yours vs expected")])
    monkeypatch.setattr(cli, "grade_notebook", lambda path, **kwargs: fake)
    monkeypatch.setattr(sandbox, "problem", lambda: None)  # --format gradescope grades only in the sandbox
    nb = tmp_path / "ex01_reference.ipynb"
    nb.write_text("{}")
    assert cli.main([str(nb), "--format", "gradescope"]) == 1
    printed = json.loads(capsys.readouterr().out)
    assert gradescope.validate(printed) == [] and printed["score"] == 1
    assert [(t["name"], t["score"], t["max_score"]) for t in printed["tests"]] == [("ex01 default_eps", 1, 1),
                                                                                  ("ex01 reference", 0, 2)]
    out = tmp_path / "results" / "results.json"
    assert cli.main([str(nb), "--format", "gradescope", "--output", str(out)]) == 1
    assert json.loads(out.read_text()) == printed
    assert cli.main([str(nb), "--json", "--format", "gradescope"]) == 2
    assert cli.main([str(nb), "--output", str(out)]) == 2


def test_cli_table_has_a_score_line(tmp_path, capsys):
    bad = tmp_path / "ex06_classify.ipynb"
    bad.write_text("[]")
    assert cli.main([str(bad)]) == 1
    text = capsys.readouterr().out
    assert "score: 0/3" in text and "exercise" in text and "feedback" in text


# --- the checks fail on wrong answers, not only on stubs -------------------------------------------------------

def test_results_carry_the_machine_readable_marker():
    (r,) = ex.check_default_eps(lambda d: torch.finfo(d).eps, show=False)
    assert not r.passed and "yours" in r.feedback and "expected" in r.feedback
    b = r.bundle()
    assert b[MIME]["part"] == "default_eps" and b[MIME]["passed"] is False and "FAILED" in b["text/plain"]


def test_reference_with_wrong_eps_default_fails():
    def wrong(x, ns, w=None, eps=None):
        eps = eps or torch.finfo(x.dtype).eps  # two bugs: eps of fp16 itself, and eps=0.0 becomes the default
        x64 = x.double()
        y = x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps)
        return y * w.double() if w is not None else y

    (r,) = ex.check_reference(wrong, show=False)
    assert not r.passed
    assert "fp16 tiny values" in r.feedback and "eps=0.0" in r.feedback and "2 dims" in r.feedback


def test_weak_boundary_cases_leave_mutants_alive():
    res = {r.part: r for r in ex.check_boundary_cases(lambda: [CaseSpec(16, 64), CaseSpec(16, 64, layout="transposed")],
                                                       show=False)}
    assert len(res) == len(mutants.CATEGORIES)
    for category in ("shape limits", "forward kernel", "numerics", "dtype", "backward kernel"):
        assert not res[f"{category} mutants"].passed and res[f"{category} mutants"].feedback.startswith("survivors")


def test_case_matrix_rules_reject_a_contiguous_only_matrix():
    cases = [(f"c{i}", CaseSpec(1024 * (i + 1), 4096, torch.bfloat16), "win", f"case {i} is large and memory bound")
             for i in range(12)]
    res = {r.part: r for r in ex.check_case_matrix(lambda: cases, show=False)}
    assert not res["size_coverage"].passed and "small" in res["size_coverage"].feedback
    assert not res["layout_coverage"].passed and "strided" in res["layout_coverage"].feedback
    assert not res["expectations"].passed and "fallback" in res["expectations"].feedback


def test_classifier_without_noise_band_fails():
    def no_band(row):
        if row["route"] == "fallback":
            return "fallback"
        return "win" if row["candidate_median_us"] < row["baseline_median_us"] else "loss"

    res = ex.check_classification(no_band, show=False)
    assert not res[0].passed and "c07_4096x4096_bf16_noisy" in res[0].feedback


def test_a_speed_up_claimed_in_prose_is_for_a_person_and_in_a_case_line_on_cpu_data_it_loses():
    """Exercise 07 scores structured elements only: "2x faster everywhere" in prose earns and costs nothing (the
    feedback says a person reads prose); a case line marking a CPU-timed case a win loses the no-claims part."""
    import jupytext

    from fastpath_lib.bench.schema import UNMEASURED, WIN

    ns: dict = {}
    for cell in jupytext.read(ROOT / "solutions" / "ex07_pr_note.py").cells:
        if cell.cell_type == "code" and CHECK_TAG not in cell.metadata.get("tags", []):
            exec(cell.source, ns)

    def prose(df, env):
        return ns["write_pr_note"](df, env) + "\nThe kernel is 2x faster everywhere.\n"

    res = {r.part: r for r in ex.check_pr_note(prose, show=False)}
    assert all(r.passed for r in res.values()), [(r.part, r.feedback) for r in res.values() if not r.passed]
    assert "not scored" in res["consistent_with_data"].feedback

    def case_line(df, env):
        note = ns["write_pr_note"](df, env)
        return note if env.get("device") == "cuda" else note.replace(f": {UNMEASURED},", f": {WIN},", 1)

    res = {r.part: r for r in ex.check_pr_note(case_line, show=False)}
    assert not res["no_claims_from_cpu_data"].passed, res["no_claims_from_cpu_data"].feedback


def test_v2_predicate_check_rejects_the_kit_predicate():
    from fastpath_lib.rmsnorm.predicate import PREDICATE

    (r,) = ex.check_v2_predicate(lambda: PREDICATE, show=False)
    assert not r.passed and "differ" in r.feedback


def test_solution_and_exercise_notebooks_carry_kernelspec_and_id():
    for p in SOLUTIONS + EXERCISE_NBS:
        nb = nbformat.read(p, as_version=4)
        assert nb.metadata["kernelspec"]["name"] == "python3", p
        assert nb.metadata["fastpath"]["exercise"] == p.name[:4], p
    ex_nb = nbformat.read(EXERCISE_NBS[0], as_version=4)
    assert all(not c.get("outputs") for c in ex_nb.cells if c.cell_type == "code")
    assert copy.deepcopy(ex_nb) == ex_nb


def test_every_check_call_is_a_tagged_cell_of_its_own():
    """The grader restores and runs exactly the tagged cells: each holds one check call and nothing else, every
    check call of a solution is in one, and the exercise carries the same cells under the same ids."""
    for sol, exe in zip(SOLUTIONS, EXERCISE_NBS):
        cells = [c for c in nbformat.read(sol, as_version=4).cells if c.cell_type == "code"]
        tagged = [c for c in cells if CHECK_TAG in c.metadata.get("tags", [])]
        assert tagged, sol
        for c in tagged:
            assert len(calls(c.source)) == 1 and len(c.source.strip().splitlines()) == 1, (sol, c.source)
        assert all(not calls(c.source) for c in cells if c not in tagged), sol
        ex_cells = {c.get("id"): c for c in nbformat.read(exe, as_version=4).cells}
        for c in tagged:
            assert ex_cells[c.get("id")].source == c.source, (exe, c.get("id"))


@pytest.mark.parametrize("spec", [CaseSpec(1024, 64), CaseSpec(1023, 64), CaseSpec(2048, 64, layout="permuted"),
                                  CaseSpec(1025, 64, layout="permuted"), CaseSpec(2048, 17),
                                  CaseSpec(1024, 64, layout="row_slice", pad=2), CaseSpec(0, 64)],
                         ids=lambda s: s.label())
def test_case_matrix_route_shortcut_matches_a_full_build(spec):
    import dataclasses

    from fastpath_lib.grading.checks.ex05_matrix import gpu_route
    from fastpath_lib.rmsnorm import predicate as rms

    x, ns, w = spec.build(device="cpu").args()
    c = dataclasses.replace(rms.make_call(x, ns, w), limits=rms.Limits(min_rows=rms.DEFAULT_CUDA_MIN_ROWS),
                            interpret=False, device_type="cuda", capability=(9, 0))
    assert gpu_route(spec) == rms.PREDICATE.evaluate(c).route
