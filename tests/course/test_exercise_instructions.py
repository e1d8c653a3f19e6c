"""An exercise's instructions state what its check holds the learner to, taken from the check's own constants: the
answers a small answer space accepts, the limits a check refuses beyond, the columns a function is handed, and a spec
that runs as written (issue 44, reader 8 items 3, 7, 8, 9 and 11). In-process: the exercises' text is read, no kernel
starts."""

from __future__ import annotations

import math
import re
from pathlib import Path

import nbformat
import pytest
import torch

from fastpath_lib.grading.registry import EXERCISES

ROOT = Path(__file__).resolve().parents[2]


def _markdown(exercise: str) -> str:
    (path,) = (ROOT / "exercises").glob(f"{exercise}_*.ipynb")
    return "\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown")


def _code(exercise: str) -> str:
    (path,) = (ROOT / "exercises").glob(f"{exercise}_*.ipynb")
    return "\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code")


def test_ex13_names_every_answer_its_check_accepts():
    """``switch`` is accepted in three exact forms: the instruction gives each (and every verdict and action)."""
    from fastpath_lib.grading.rules.ex13_scenarios import ACTIONS, SWITCHES, VERDICTS

    text = _markdown("ex13")
    missing = [w for w in (*VERDICTS, *ACTIONS, *SWITCHES) if f'"{w}"' not in text]
    assert not missing, missing


def test_ex13_says_which_switch_needs_no_code_change_and_the_kit_agrees():
    """Part 5 accepts the environment variable and the context manager; only the variable is "no code change":
    it is the kit's, read at import, and ``force_fallback()`` is a context manager used in code."""
    import contextlib

    import fastpath_lib
    from fastpath_lib import routing
    from fastpath_lib.grading.rules.ex13_scenarios import SWITCHES

    text = " ".join(_markdown("ex13").split())
    env = next(s for s in SWITCHES if "=" in s)
    assert f'`"{env}"`, which needs no code change, or the context manager' in text
    assert "without a code change" not in text
    assert env == f"{routing.FORCE_ENV}=1"
    assert isinstance(fastpath_lib.force_fallback(), contextlib.AbstractContextManager)


def test_ex08_states_the_element_cap_of_its_evidence_check():
    from fastpath_lib.grading.checks import ex08_evidence

    cap = ex08_evidence._MAX_ELEMENTS
    assert f"2**{int(math.log2(cap))} elements" in _markdown("ex08") and 2 ** int(math.log2(cap)) == cap


def test_ex06_names_the_columns_my_classify_is_handed():
    """The rule's formula reads the table's own columns (``row["baseline_median_us"]``), none that is not there."""
    from fastpath_lib.grading.materials import RESULT_COLUMNS

    text = _markdown("ex06")
    used = set(re.findall(r'row\["(\w+)"\]', text))
    assert used and used <= set(RESULT_COLUMNS), used - set(RESULT_COLUMNS)
    named = set(re.findall(r"`(\w*(?:median|spread)\w*)`", text))
    assert named <= set(RESULT_COLUMNS), named - set(RESULT_COLUMNS)


def test_ex02_prints_the_memory_rule_its_check_holds():
    from fastpath_lib.grading.checks.ex02_kernel import MEMORY_RULE

    (path,) = (ROOT / "solutions").glob("ex02_*.ipynb")
    printed = "".join(o.get("text", "") for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"
                      for o in c.get("outputs", []))
    assert all(clause in printed for clause in MEMORY_RULE), MEMORY_RULE
    assert "ex.MEMORY_RULE" in _code("ex02")  # the exercise prints it too (the cell is no stub)


def _spec_block(exercise: str) -> str:
    (block,) = re.findall(r"```python\n(.*?)```", _markdown(exercise).split("## The spec", 1)[1], re.S)[:1]
    return block


@pytest.mark.parametrize("shape, dtype, slice_rows", [
    ((4, 64), torch.float16, False), ((2, 3, 40), torch.float16, False), ((6, 24), torch.float16, True),
    ((1, 9000), torch.float32, False)])
def test_ex03s_spec_runs_as_written_and_agrees_with_its_check(shape, dtype, slice_rows):
    """Every name the spec uses is defined in it or by the notebook (``ex``, ``torch``, ``math``), and it decides as
    the check does."""
    from types import SimpleNamespace

    from fastpath_lib import exercises as ex
    from fastpath_lib.grading.checks.ex03_predicate import _v2_expected

    x = torch.zeros(shape, dtype=dtype)
    if slice_rows:  # rows 12 columns apart: a row stride of 24 bytes, not a multiple of 32
        x = torch.zeros((shape[0], shape[1] + 12), dtype=dtype)[:, 12:]
    ns: dict = {"x": x, "ex": ex, "torch": torch, "math": math}
    exec(_spec_block("ex03"), ns)
    ctx = SimpleNamespace(input=x)
    for name in ("dtype", "cols", "alignment"):
        assert ns[f"{'align' if name == 'alignment' else name}_ok"] == _v2_expected(name, ctx), (name, shape)


_ORDINALS = ("first", "second", "third", "fourth")


def test_ex11_names_its_gates_by_the_bullets_that_state_them():
    """"The second and third rules" are the bullets of the gates (``_GATES``), one behaviour change per commit and
    every commit green, in the list's own order."""
    from fastpath_lib.grading.checks.ex11_commits import _GATES

    text = _markdown("ex11")
    bullets = re.findall(r"^\* (.+?)(?=^\*|^\n|\Z)", text.split("\n\n", 2)[2], re.M | re.S)
    said = re.search(r"earns points once it keeps the (\w+) and (\w+) rules", text)
    assert said and len(bullets) == 3, (said, bullets)
    named = [bullets[_ORDINALS.index(w)] for w in said.groups()]
    words = {"one_change_per_commit": "**one** behaviour change", "every_commit_green": "every commit builds"}
    assert [words[g] in b for g, b in zip(_GATES, named)] == [True, True], named


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_ex11_states_every_rule_its_check_holds_in_the_bullet_of_its_part():
    """Every rule of the check (``RULES``: the check reports a breach through it only) is in the exercise's words, in
    the bullet of the part it fails: the gates' bullets by the sentence that names them, refactors_apart's by the one
    that names its rule (reader 12b F3: docs before their change, and a commit's kind, gated every point unstated)."""
    from fastpath_lib.grading.checks.ex11_commits import _GATES, RULES

    text = _markdown("ex11")
    bullets = re.findall(r"^\* (.+?)(?=^\*|^\n|\Z)", text.split("\n\n", 2)[2], re.M | re.S)
    gates = re.search(r"earns points once it keeps the (\w+) and (\w+) rules", text)
    own = re.search(r"The (\w+) rule, refactors apart from behaviour, is graded as a part of its own", text)
    assert gates and own and len(bullets) == 3, (gates, own, bullets)
    bullet_of = dict(zip((*_GATES, "refactors_apart"), (*gates.groups(), own.group(1))))
    unstated = {key: r.stated for key, r in RULES.items()
                if _flat(r.stated) not in _flat(bullets[_ORDINALS.index(bullet_of[r.part])])}
    assert not unstated, unstated


def test_ex11s_check_reports_a_breach_only_through_its_rules():
    """A plan breaking the docs rule is told the rule's own words: the table the instructions are checked against is
    the one the check reads."""
    from fastpath_lib.grading.checks import ex11_commits as C

    good = [("test", ["pin_test"]), ("refactor", ["rename", "rename_test"]), ("refactor", ["move_out", "move_in"]),
            ("behaviour", ["condition", "condition_test", "readme"]), ("behaviour", ["simplify"]),
            ("behaviour", ["route", "route_test"]), ("docs", ["changelog"])]
    assert not any(C._violations(good).values())
    early = [good[6], *good[:6]]  # the changelog before the condition it describes
    assert C._violations(early)["one_change_per_commit"] == [f"{C.RULES['docs_early'].broken} (1x)"]


def test_ex04_names_everything_its_check_refuses_to_be_called():
    """Each module (and function) the check refuses an answer for calling (``_GENERATED``) is named in the
    instructions, with what the refusal costs (reader 12b F2)."""
    from fastpath_lib.grading.checks.ex04_boundary import _GENERATED
    from fastpath_lib.grading.rules.borrowed import _module_of

    text = _flat(_markdown("ex04"))
    named = {f"`{_module_of(file)}`" for file, _, _ in _GENERATED.targets}
    named |= {f"`{qual}`" for _, qual, _ in _GENERATED.targets if qual != "*"}
    assert len(named) >= 3 and not {n for n in named if n not in text}, {n for n in named if n not in text}
    assert "fails every part of the check" in text


def test_ex04_states_its_limits_on_the_cases():
    """The number of cases and the elements of each that ex04's check refuses beyond (reader 16b F8)."""
    from fastpath_lib.grading.checks.ex04_advice import MAX_CASES, MAX_ELEMENTS

    assert f"At most {MAX_CASES} cases, each of at most {MAX_ELEMENTS:,} elements" in _flat(_markdown("ex04"))


def test_ex05_names_what_the_benchmark_cannot_time():
    """A case the benchmark refuses (a ``CaseSpec`` layout it does not time, an empty shape) costs a part of ex05:
    the text names each such layout and the empty input (reader 16b F9)."""
    from fastpath_lib.bench.matrix import BENCH_LAYOUTS
    from fastpath_lib.cases import LAYOUTS

    text = _flat(_markdown("ex05"))
    untimed = [la for la in LAYOUTS if la not in BENCH_LAYOUTS]
    assert untimed and all(f"but `{la}`" in text for la in untimed), untimed
    assert "none empty (an input without rows or columns cannot be timed)" in text


def test_ex13s_bandwidth_formula_as_written_is_the_graders():
    """The code-formatted bandwidth in part 3, evaluated on the rows of drawn tables, is the grader's number (reader
    12b F4: ``bytes_moved / median_us`` is MB/s, a thousand times the GB/s it was compared with)."""
    import csv
    import io
    import random

    from fastpath_lib.grading.rules.ex13_scenarios import achieved_gbps, draw

    formulas = [f for f in re.findall(r"`([^`]+)`", _markdown("ex13")) if "bytes_moved" in f and "median_us" in f]
    assert formulas
    rows = [r for sc in draw("results_table", random.Random(3)) for r in csv.DictReader(io.StringIO(sc["csv"]))
            if r["provider"] == "dispatched"]  # the rows the rule reads
    assert len(rows) >= 4
    for formula in formulas:
        for r in rows:
            got = eval(formula, {"bytes_moved": int(r["bytes_moved"]), "median_us": float(r["median_us"])})
            assert math.isclose(got, achieved_gbps(r), rel_tol=1e-12), (formula, r)


def _check_modules(exercise: str) -> list:
    import importlib

    return [importlib.import_module(f"fastpath_lib.grading.checks.{p.stem}")
            for p in sorted((ROOT / "fastpath_lib/grading/checks").glob(f"{exercise}_*.py"))]


def _refusals(exercise: str) -> list:
    """Every ``Forbidden`` of the exercise's check modules. What a check hands the learner's code is a ``Given``, no
    refusal; a table of refusals (exercise 08's, one per operator a learner may choose) is each of its refusals."""
    from fastpath_lib.grading.rules.borrowed import Forbidden

    values = [v for m in _check_modules(exercise) for v in vars(m).values()]
    return [f for v in values for f in (v.values() if isinstance(v, dict) else (v,)) if isinstance(f, Forbidden)]


def _unstated_refusals(exercise: str, text: str) -> list[str]:
    """What the exercise's checks refuse an answer for calling (every ``Forbidden`` of its check modules) that
    ``text`` does not name: a kit module (or a package above it refused whole) and the function of it, a torch family
    by its name (its members are the family's), a torch builtin by its name."""
    from fastpath_lib.grading.rules.borrowed import _module_of

    refusals = _refusals(exercise)
    whole = {_module_of(file) for f in refusals for file, qual, _ in f.targets if qual == "*"}

    def named(module: str) -> bool:
        return f"`{module}`" in text or f"`{module}." in text

    def covered(module: str) -> bool:
        parts = module.split(".")
        return any(".".join(parts[:i]) in whole and named(".".join(parts[:i])) for i in range(2, len(parts) + 1))

    missing = []
    for f in refusals:
        missing += [f"torch's {family} family" for family, _ in f.families if f"*{family}* family" not in text]
        for file, qual, _ in f.targets:
            module = _module_of(file)
            if (module.startswith("torch") and f.families) or covered(module):
                continue
            if not named(module) or (qual != "*" and f"`{qual}`" not in text and f"{module}.{qual}`" not in text):
                missing.append(module if qual == "*" else f"{module}.{qual}")
        missing += [name for name, _ in f.builtins if not f.families and name not in text]
    return sorted(set(missing))


@pytest.mark.parametrize("exercise", sorted(EXERCISES))
def test_every_refusal_of_an_exercises_check_is_stated_in_its_text(exercise):
    """What a check refuses is in the exercise's words (reader 13b F1-F3, F5): every function its rules refuse an
    answer for calling (read from the check modules' ``Forbidden`` values), and every wording a rule module gives its
    refusals (the modules' ``STATED``: the inspection rule of 09 and 12, with each name it refuses; exercise 11's
    commit message; exercise 13's owner, device and contract-change rules, and that its justification is read by
    a person, not scored)."""
    text = _flat(_markdown(exercise))
    stated = [s for m in _check_modules(exercise) for s in getattr(m, "STATED", ())]
    unstated = [s for s in stated if _flat(s) not in text] + _unstated_refusals(exercise, text)
    assert not unstated, unstated


def test_the_checks_that_refuse_by_rule_state_their_rules():
    """The exercises whose checks apply a rule beyond forbidden calls declare its wording (``STATED``), so the test
    above has something to find."""
    assert all(getattr(m, "STATED", ()) for e in ("ex07", "ex09", "ex11", "ex12", "ex13") for m in _check_modules(e))


def test_ex04s_route_snippet_routes_as_the_check_whatever_the_devices_threshold(monkeypatch):
    """The route the exercise tells the learner to read is the one its check judges by, also where ``explain`` applies
    another row threshold (a GPU's, simulated here: reader 13b F6)."""
    from fastpath_lib.cases import CaseSpec
    from fastpath_lib.grading.checks.ex04_boundary import _exercise_call
    from fastpath_lib.rmsnorm import predicate
    from fastpath_lib.rmsnorm.limits import DEFAULT_CUDA_MIN_ROWS, limits_for

    text = _markdown("ex04")
    (snippet,) = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "CaseSpec(" in b]
    assert "on a GPU it applies CUDA's row threshold" in _flat(text)
    gpu = predicate.Limits(min_rows=DEFAULT_CUDA_MIN_ROWS, source="a GPU's threshold")
    monkeypatch.setattr(predicate, "limits_for", lambda *a, **k: gpu)
    for rows, cols in ((8, 64), (7, 64), (16, 48)):
        ns: dict = {"CaseSpec": CaseSpec}
        *setup, last = snippet.replace("CaseSpec(8, 64)", f"CaseSpec({rows}, {cols})").strip().splitlines()
        exec("\n".join(setup), ns)
        route = eval(last, ns)
        args = CaseSpec(rows, cols).build().args()
        assert route == predicate.PREDICATE.evaluate(_exercise_call(*args)).route, (rows, cols)
    assert route == "triton" and predicate.PREDICATE.evaluate(predicate.make_call(*args)).route == "fallback"
    assert limits_for("cpu").min_rows == predicate.Limits().min_rows  # on a CPU explain's limits are the check's



_FAMILY = re.compile(r"\*(\w+)\* family \(([^()]*)\)")


def _refused_by(forbidden, call: str) -> str | None:
    from fastpath_lib.grading.engine import sources
    from fastpath_lib.grading.rules.borrowed import source_problem

    with sources.using(["import torch\nimport torch.nn.functional as F", f"def mine(x):\n    return {call}(x)"]):
        return source_problem("mine", forbidden)


@pytest.mark.parametrize("exercise", sorted(EXERCISES))
def test_the_torch_names_an_exercise_gives_of_a_family_are_refused_as_it_says(exercise):
    """The torch functions an exercise names as members of a refused family (``*softmax* family (`torch.softmax`,
    ...)``) are refused by its check's family, and the ones it names as outside it (``not in the family: `torch.norm`
    ...``) are not: the evidence of those sentences in docs/claims.toml."""
    text = _flat(_markdown(exercise))
    refusals = _refusals(exercise)
    for family, inside in _FAMILY.findall(text):
        (forbidden, *_) = [f for f in refusals if family in dict(f.families)]
        named = re.findall(r"`((?:F|torch)\.[\w.]+)`", inside)
        assert named and not [n for n in named if not _refused_by(forbidden, n)], (family, named)
    for outside in re.findall(r"not in the family: (.*?)\.(?:\s|$)", text):
        named = re.findall(r"`(torch\.[\w.]+)`", outside)
        assert named and not [n for n in named if any(_refused_by(f, n) for f in refusals)], named
