"""The grader does not trust the notebook: the checks run in the grader's own process, so code in the notebook that
replaces a check or its helpers, registers IPython event hooks, swaps kit modules in ``sys.modules`` or rebinds
builtins changes nothing but the learner's own answers. Where the learner's source says so, the notebook is also
reported as tampered, with no points for the affected parts; what a notebook displays never counts (nbgrader's
restored read-only cells and otter-grader's grader-run tests are the models). More attacks:
``tests/grading/test_grading_attacks.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
jupytext = pytest.importorskip("jupytext")

from fastpath_lib.grading.engine import cli  # noqa: E402
from fastpath_lib.grading.engine.notebook import ALL, CHECK_TAG, assignments, static_evidence  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

FORGE_DISPLAY = """
from IPython import get_ipython
from IPython.display import display
from fastpath_lib.grading.registry import Result
def _forge(result):
    for part, pts in (("default_eps", 1), ("reference", 2)):
        display(Result("ex01", part, pts, True).bundle(), raw=True)
get_ipython().events.register("post_run_cell", _forge)
"""

#: name -> (cell inserted after the imports, notebook it goes into, parts expected to keep their points)
TAMPERING = {
    "post_run_cell hook displaying passing results": (FORGE_DISPLAY, "exercises", ()),
    "event hook registered without saying so": (
        'ip = __import__("IPython").get_ipython()\ngetattr(ip, "eve" + "nts").register("post_execute", print)',
        "solutions", ()),
    "a check replaced": ("ex.check_default_eps = lambda *a, **k: None", "solutions", ("reference",)),
    "a check replaced through setattr": ('f = ex\nsetattr(f, "check_" + "default_eps", print)', "solutions",
                                         ("reference",)),
    "the compare helper replaced": ("import fastpath_lib.testing as T\nT.compare = lambda *a, **k: None",
                                    "exercises", ()),
    "the emit helper replaced, hidden": (('import importlib\nm = importlib.import_module("fastpath_lib.grading." + '
                                          '"feedback")\nvars(m)["_emit"] = lambda results, show: None'),
                                         "solutions", ()),
    "a kit module swapped in sys.modules": (('import sys, types\ngetattr(sys, "mod" + "ules").__setitem__('
                                             '"fastpath_lib.cases", types.ModuleType("x"))'), "solutions", ()),
    "exec shadowed by a function of the notebook": ("def exec(*args, **kwargs):\n    return None", "solutions", ()),
    "the façade swapped in sys.modules": (('import sys, types\nsys.modules["fastpath_lib.exercises"] = '
                                           'types.ModuleType("fastpath_lib.exercises")'), "exercises", ()),
}


def _with_cell(tmp_path, folder: str, source: str) -> Path:
    nb = nbformat.read(ROOT / folder / "ex01_reference.ipynb", as_version=4)
    at = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code") + 1
    nb.cells.insert(at, nbformat.v4.new_code_cell(source))
    out = tmp_path / "ex01_reference.ipynb"
    nbformat.write(nb, out)
    return out


@pytest.mark.parametrize("name", sorted(TAMPERING))
def test_tampering_changes_no_verdict(tmp_path, name):
    """On an exercise's stubs every part stays at zero. On a solution, tampering the source shows is reported, with
    no points for the affected parts; tampering it hides changes nothing, as the checks never run in the kernel."""
    source, folder, kept = TAMPERING[name]
    path = _with_cell(tmp_path, folder, source)
    learner = [c.source for c in nbformat.read(path, as_version=4).cells
               if c.cell_type == "code" and CHECK_TAG not in c.metadata.get("tags", [])]
    g = cli.grade_notebook(path, timeout=120)
    if folder == "exercises":
        assert all(p.earned == 0 for p in g.parts), [(p.part, p.feedback) for p in g.parts]
    elif static_evidence(learner):
        assert g.status == "tampered", (g.status, g.reason)
        for p in g.parts:
            assert p.passed if p.part in kept else (p.earned == 0 and p.feedback.startswith("tampered")), p
    else:  # hidden tampering changes no verdict (a cell that fails in the sandbox is reported, and costs nothing)
        assert g.earned == g.points, (g.status, g.reason, [p.feedback for p in g.parts])


def test_untampered_solution_is_not_reported(tmp_path):
    g = cli.grade_notebook(_with_cell(tmp_path, "solutions", "import matplotlib\nx = 1"), timeout=120)
    assert g.status == "ok" and g.earned == g.points, (g.status, g.reason)


def test_capstone_op_name_is_fixed_once(tmp_path):
    nb = nbformat.read(ROOT / "solutions" / "ex08_capstone.ipynb", as_version=4)
    at = next(i for i, c in enumerate(nb.cells) if CHECK_TAG in c.metadata.get("tags", [])) + 1
    nb.cells.insert(at, nbformat.v4.new_code_cell('OP_NAME = "log_softmax"'))
    path = tmp_path / "ex08_capstone.ipynb"
    nbformat.write(nb, path)
    g = cli.grade_notebook(path, timeout=180)
    by = {p.part: p for p in g.parts}
    assert not by["kernel"].passed and "OP_NAME" in by["kernel"].feedback, by["kernel"].feedback
    assert not by["reference"].passed and by["predicate_declarations"].passed


# --- the source scan, without a kernel -------------------------------------------------------------------------------

@pytest.mark.parametrize("source, scope", [
    ("from fastpath_lib import exercises as ex\nex.check_reference = print", "check_reference"),
    ("import fastpath_lib.exercises\nfastpath_lib.exercises.check_pr_note = None", "check_pr_note"),
    ("from fastpath_lib.testing import compare\nimport fastpath_lib.testing as t\nt.compare = len", ALL),
    ("from fastpath_lib.cases import CaseSpec\nCaseSpec.build = None", ALL),
    ("get_ipython().events.register('post_run_cell', print)", ALL),
    ("import sys\nsys.modules['fastpath_lib.exercises'] = None", ALL),
    ("import sys\nsys.modules.update({})", ALL),
    ("import builtins\nbuiltins.print = len", ALL),
    ("exec = print", ALL),
    ("def compile(*a):\n    return None", ALL),
    ("from fastpath_lib import exercises as ex\nsetattr(ex, 'check_reference', print)", "check_reference"),
    ("from fastpath_lib import exercises as ex\ndel ex.check_reference", "check_reference"),
    # the kit's published solution handed back: imported as a module, or read from its folder
    ("import sys\nsys.path.insert(0, '/kit/solutions')\nfrom ex04_boundary_cases import my_boundary_cases", ALL),
    ("import ex01_reference", ALL),
    ("import jupytext\nnb = jupytext.read('../solutions/ex04_boundary_cases.py')", ALL),
])
def test_source_scan_finds_replacements(source, scope):
    found = static_evidence([source])
    assert found and found[0][0] == scope, found


def test_source_scan_is_quiet_on_the_solutions_and_lessons():
    for path in sorted((ROOT / "solutions").glob("ex*.py")) + sorted((ROOT / "notebooks").glob("[0-9]*.py")):
        sources = [c.source for c in jupytext.read(path).cells if c.cell_type == "code"]
        assert static_evidence(sources) == [], path


def test_op_name_assignments_are_counted():
    assert assignments(['OP_NAME = "softmax"', "x = 1"], "OP_NAME") == 1
    assert assignments(['OP_NAME = "softmax"', 'OP_NAME = "log_softmax"'], "OP_NAME") == 2


def test_prose_naming_the_solutions_folder_is_not_a_path():
    assert static_evidence(['print("the solved versions are in solutions/")', "x = 'my solutions'",
                            "counts = {'solutions': 3}"]) == []


def test_source_scan_finds_builtins_shadowed_by_definitions():
    found = static_evidence(["def exec(code, *a):\n    pass", "from os import path as compile"])
    assert [w for _, w in found] == ["defines its own exec", "imports a name over the builtin compile"], found


def test_a_builtins_name_the_agent_does_not_run_on_is_the_learners():
    """Issue 35: ``type = row["route"]`` made a notebook "tampered", every part at zero; only the names the grader's
    agent is started with (exec, compile, __builtins__) are the grader's."""
    assert static_evidence(["type = 'fp16'", "print = len", "def open(p):\n    return p", "from os import open",
                            "getattr = None\nisinstance = None"]) == []
