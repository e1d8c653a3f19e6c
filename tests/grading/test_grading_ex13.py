"""Exercise 13 (review readiness): the solution passes every part on scenarios drawn anew, and constant, trivial,
borrowed (the kit's oracle or the grader's rule), memorised and plausible-but-wrong answers fail the part they
answer; every answer of a small answer space occurs in every draw (issue 28, item 6)."""

import copy
import csv
import io
import json
import random
import tempfile
from pathlib import Path

import pytest

from fastpath_lib import exercises as ex
from fastpath_lib.grading.checks.ex13_review import PARTS
from fastpath_lib.grading.registry import EXERCISES
from fastpath_lib.grading.rules import ex13_scenarios as S

pytest.importorskip("jupytext")  # tests/solved.py reads the solutions with it

from solved import earned, solved  # noqa: E402

#: part -> the solution's function for it
FN = {"route_conditions": "failed_conditions", "test_report": "read_report", "results_table": "read_results",
      "review_comments": "answer_review", "maintenance_cost": "maintenance_cost", "contract_change": "migration"}
#: part -> the scenario's keys, in the order the check passes them
ARGS = {"route_conditions": ("call", "capture"), "test_report": ("report", "claims"), "results_table": ("csv",),
        "review_comments": ("comments", "cases"), "maintenance_cost": ("replay", "build"),
        "contract_change": ("change", "calls")}
SEEDS = (0, 1, 2)


def _sol(part):
    return solved("ex13")[FN[part]]


def _passes(part, fn, seed=None) -> bool:
    (r,) = ex.check_readiness(part, fn, show=False, seed=seed)
    assert r.exercise == "ex13" and r.part == part
    return r.passed


def _args(part, sc):
    return tuple(sc[k] for k in ARGS[part])


def test_parts_are_the_registered_ones_ten_points():
    assert PARTS == tuple(p for p, _ in EXERCISES["ex13"])
    assert dict(EXERCISES["ex13"]) == {"route_conditions": 1, "test_report": 2, "results_table": 2,
                                       "review_comments": 2, "maintenance_cost": 2, "contract_change": 1}


def test_the_solution_passes_every_part_on_many_draws():
    for seed in range(12):
        for part in PARTS:
            (r,) = ex.check_readiness(part, _sol(part), show=False, seed=seed)
            assert r.passed, (seed, part, r.feedback)
    assert all(_passes(p, _sol(p)) for p in PARTS)  # and on a draw from the system's randomness


def test_draws_differ_between_calls():
    for part in PARTS:
        assert S.draw(part, random.Random(1)) != S.draw(part, random.Random(2)), part


def _raise(*_):
    raise NotImplementedError


def test_the_stub_scores_zero_with_not_implemented():
    for part in PARTS:
        (r,) = ex.check_readiness(part, _raise, show=False)
        assert not r.passed and "not implemented" in r.feedback, part
    assert earned(ex.check_readiness("no_such_part", _sol("contract_change"), show=False)) == 0


def test_a_check_shows_its_result_and_returns_none(capsys):
    assert ex.check_readiness("contract_change", _sol("contract_change")) is None
    assert "contract_change" in capsys.readouterr().out


#: part -> constant answers: the one value, all-True, all-empty, every label in turn
CONSTANT = {
    "route_conditions": [lambda c, cap: [], lambda c, cap: ["cuda_graph_capture", "architecture"],
                         lambda c, cap: ["forced", "cuda_graph_capture", "device", "architecture", "dtype", "cols",
                                         "min_rows"]],
    "test_report": [lambda rep, claims, v=v: {c["id"]: v for c in claims} for v in S.VERDICTS]
    + [lambda rep, claims: {c["id"]: True for c in claims}],
    "results_table": [lambda t, v=v: {"suspect": [], "beats_compiled": [], "verdict": v}
                      for v in ("fast path", "compile it", "no claim")]
    + [lambda t: {"suspect": sorted({r["case_id"] for r in csv.DictReader(io.StringIO(t))}),
                  "beats_compiled": sorted({r["case_id"] for r in csv.DictReader(io.StringIO(t))}),
                  "verdict": "fast path"}],
    "review_comments": [lambda comments, cases, a=a: {c["id"]: a for c in comments} for a in S.ACTIONS]
    + [lambda comments, cases: {c["id"]: True for c in comments}],
    "maintenance_cost": [lambda r, b: {"saved_share": 0, "unmeasured_calls": 0, "binaries": 0, "cold_start_s": 0.0,
                                       "cubin_bytes": 0, "switch": "FASTPATH_FORCE_FALLBACK=1", "owner": "@ada"}],
    "contract_change": [lambda ch, calls: {"own_commit": True, "affected": [], "pin": {}, "justification": "x"},
                        lambda ch, calls: {"own_commit": True, "affected": [c["id"] for c in calls],
                                           "pin": {c["id"]: 2.0 ** -23 for c in calls},
                                           "justification": "The default eps changes to 1e-06 for every caller, "
                                                            "so pin the old one where output must not move."}],
}


@pytest.mark.parametrize("part", PARTS)
def test_constant_answers_fail(part):
    for i, fn in enumerate(CONSTANT[part]):
        assert not any(_passes(part, fn, s) for s in SEEDS), (part, i)


@pytest.mark.parametrize("part", PARTS)
def test_borrowed_grader_rule_fails(part):
    def borrowed(*args):
        return S.expected(part, dict(zip(ARGS[part], args)))

    (r,) = ex.check_readiness(part, borrowed, show=False, seed=0)
    assert not r.passed and "grader's own rule" in r.feedback, (part, r.feedback)


def _kit_capture(call, capture):
    """The kit's own capture.json reader on the file the scenario describes (the oracle, borrowed)."""
    from fastpath_lib.rmsnorm import capture as kit

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "capture.json"
        path.write_text(json.dumps(capture))
        ok = call["capability"] is not None and tuple(call["capability"]) in kit.load(path)
    return _sol("route_conditions")(call, {"_about": "", **({"sm_x": {"passed": True}} if ok else {})})


def _kit_bytes(table, where="fastpath_lib.bench.timing"):
    """The solution with the kit's bytes model (``bench.timing.bytes_moved``, or where it lives,
    ``rmsnorm.cost.bytes_moved``) in place of its own."""
    import importlib

    import torch

    bytes_moved = importlib.import_module(where).bytes_moved

    rows = list(csv.DictReader(io.StringIO(table)))
    bad = [r["case_id"] for r in rows if r["provider"] == "dispatched" and int(r["bytes_moved"]) != bytes_moved(
        int(r["rows"]), int(r["cols"]), getattr(torch, r["dtype"]), r["pass"])]
    return dict(_sol("results_table")(table), suspect=sorted(set(bad)))


def _kit_classify(table):
    """The kit's results classifier (``bench.analysis.classify``) read for the verdict."""
    import pandas as pd

    from fastpath_lib.bench.analysis import classify

    df = classify(pd.read_csv(io.StringIO(table)))
    return dict(_sol("results_table")(table), beats_compiled=sorted(df[df.vs_baseline == "win"].case_id))


#: answers that call the kit's own oracle for the part
ORACLE = {"route_conditions": _kit_capture, "results_table": _kit_bytes,
          "results_table (rmsnorm.cost)": lambda table: _kit_bytes(table, "fastpath_lib.rmsnorm.cost")}


@pytest.mark.parametrize("oracle", sorted(ORACLE))
def test_the_kits_oracle_borrowed_fails(oracle):
    part = oracle.split()[0]
    (r,) = ex.check_readiness(part, ORACLE[oracle], show=False, seed=0)
    assert not r.passed and "yourself" in r.feedback, (part, r.feedback)


def test_the_kits_results_classifier_borrowed_fails():
    (r,) = ex.check_readiness("results_table", _kit_classify, show=False, seed=0)
    assert not r.passed and "the kit's reading of a results table" in r.feedback, r.feedback


def test_answers_recorded_for_one_draw_fail_on_another():
    for part in PARTS:
        recorded = [_sol(part)(*_args(part, sc)) for sc in S.draw(part, random.Random(0))]
        answers = iter(recorded * 3)
        assert not _passes(part, lambda *a, it=answers: next(it), seed=5), part


def _mod(part, patch):
    """The solution's function for ``part`` with its answer changed by ``patch(args, answer)``."""
    base = _sol(part)
    return lambda *a: patch(a, base(*copy.deepcopy(a)))


def _drop(verdict_from, to):
    return lambda a, out: {k: to if v == verdict_from else v for k, v in out.items()}


def _skips_count_as_passes(report, claims):
    return _sol("test_report")(report.replace("<skipped", "<system-out").replace("</skipped>", "</system-out>"),
                               claims)


def _errors_ignored(report, claims):
    return _sol("test_report")(report.replace("<error", "<system-err").replace("</error>", "</system-err>"), claims)


def _by_name_only(report, claims):
    import xml.etree.ElementTree as ET

    root = ET.fromstring(report)
    for c in root.iter("testcase"):
        c.set("classname", "x")
    return _sol("test_report")(ET.tostring(root, encoding="unicode"), [dict(c, module="x") for c in claims])


def _table(table, fix):
    rows = list(csv.DictReader(io.StringIO(table)))
    for r in rows:
        fix(r)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def _forward_bytes_always(table):
    """The bytes model without the backward (every row counted as a forward)."""
    out = _sol("results_table")(_table(table, lambda r: r.update({"pass": "forward"})))
    return out


def _owner_by(build, pick):
    """The owner of the kernel's file by ``pick(matching lines)``, the lines as ``(pattern, handle)``."""
    path, lines = build["kernel_file"], [ln.split() for ln in build["codeowners"].splitlines() if ln[:1] not in "#"]
    hits = [(p, h) for p, h in lines if p == "*" or path.endswith(p[1:]) or path.startswith(p[1:])]
    return pick(hits)


def _first_match(hits):
    return hits[0][1]


def _deepest_directory(hits):
    """The most specific directory line (a common misreading: GitHub takes the last matching line)."""
    return max((p.count("/"), i, h) for i, (p, h) in enumerate(hits))[2]


#: plausible wrong rules, each one the lessons warn about
WRONG = {
    "route_conditions": [
        *[_mod("route_conditions", lambda a, out, cond=cond: [c for c in out if c != cond])  # one condition ignored
          for cond in S.ROUTE_CONDITIONS],
        # a recorded entry taken as a pass, whatever it says
        lambda call, cap: _sol("route_conditions")(call, {k: dict(v, passed=True) if isinstance(v, dict) else v
                                                          for k, v in cap.items()}),
        # capture never allowed (the rule before a capture test existed)
        lambda call, cap: _sol("route_conditions")(call, {"_about": cap["_about"]}),
    ],
    "test_report": [_skips_count_as_passes, _errors_ignored, _by_name_only,
                    _mod("test_report", _drop("untested", "supported")),
                    _mod("test_report", _drop("contradicted", "untested"))],
    "results_table": [
        _forward_bytes_always,
        lambda t: dict(_sol("results_table")(t), suspect=[]),  # nothing suspect
        lambda t: _sol("results_table")(t) | {k: v for k, v in _sol("results_table")(_table(  # suspect rows trusted
            t, lambda r: r.update(copy_gbps="1e9", bytes_moved=str(S.model_bytes(
                int(r["rows"]), int(r["cols"]), r["dtype"], r["pass"]))))).items() if k != "suspect"},
        lambda t: _sol("results_table")(_table(t, lambda r: r.update(route="triton"))),  # fallback rows counted
        lambda t: _sol("results_table")(_table(t, lambda r: r.update(gpu_measurement="True"))),  # CPU data claimed
        lambda t: _sol("results_table")(_table(t, lambda r: r.update(q20_us=r["median_us"], q80_us=r["median_us"])
                                               if r["median_us"] else None)),  # no noise band
    ],
    "review_comments": [_mod("review_comments", _drop("reclassify", "show_raw_samples")),
                        _mod("review_comments", _drop("add_case", "point_to_case")),
                        _mod("review_comments", _drop("measure_compiled", "show_compiled")),
                        _mod("review_comments", _drop("keep_readable", "keep_unrolled"))],
    "maintenance_cost": [
        lambda r, b: _sol("maintenance_cost")(r, dict(b, warm_disk_cache=False)),
        lambda r, b: _sol("maintenance_cost")(r, dict(b, calls=[dict(x, **{"pass": "forward"}) for x in b["calls"]])),
        _mod("maintenance_cost", lambda a, out: dict(out, owner="the team")),
        _mod("maintenance_cost", lambda a, out: dict(out, owner="@TBD")),
        _mod("maintenance_cost", lambda a, out: dict(out, owner="@oncall-" + str(len(a[0][1]["shape"])) + str(
            a[0][0]["calls"] % 7))),
        _mod("maintenance_cost", lambda a, out: dict(out, owner="@qq")),  # round 9, C5: any handle
        _mod("maintenance_cost", lambda a, out: dict(out, owner=_owner_by(a[1], _first_match))),
        _mod("maintenance_cost", lambda a, out: dict(out, owner=_owner_by(a[1], _deepest_directory))),
        _mod("maintenance_cost", lambda a, out: dict(out, switch="revert the PR")),
        _mod("maintenance_cost", lambda a, out: dict(out, unmeasured_calls=0)),
    ],
    "contract_change": [lambda ch, calls: _sol("contract_change")({"default_eps": -1.0}, calls) | {
                            "justification": _sol("contract_change")(ch, calls)["justification"]},
                        _mod("contract_change", lambda a, out: dict(out, own_commit=False))],
}


@pytest.mark.parametrize("part", PARTS)
def test_plausible_wrong_rules_fail(part):
    for i, fn in enumerate(WRONG[part]):
        assert not any(_passes(part, fn, s) for s in SEEDS), (part, i)


def _answers(part, seed):
    """Every single answer the grader expects over one draw."""
    out = []
    for sc in S.draw(part, random.Random(seed)):
        want = S.expected(part, sc)
        out += list(want.values()) if part in ("test_report", "review_comments") else [want]
    return out


def test_every_answer_of_a_small_answer_space_occurs_in_every_draw():
    for seed in range(40):
        assert set(_answers("test_report", seed)) == set(S.VERDICTS), seed
        assert set(_answers("review_comments", seed)) == set(S.ACTIONS), seed
        tables = _answers("results_table", seed)
        assert {t["verdict"] for t in tables} == {"fast path", "compile it", "no claim"}, seed
        assert all(t["suspect"] for t in tables), seed  # a row that cannot be right in every table
        routes = _answers("route_conditions", seed)
        assert frozenset() in routes and any("cuda_graph_capture" in r for r in routes), seed
        costs = _answers("maintenance_cost", seed)
        assert {c["cold_start_s"] == 0 for c in costs} == {True, False}, seed
        assert {c["unmeasured_calls"] == 0 for c in costs} == {True, False}, seed
        builds = [sc["build"] for sc in S.draw("maintenance_cost", random.Random(seed))]
        for pick in (_first_match, _deepest_directory):  # each misreading of CODEOWNERS errs in every draw
            assert any(_owner_by(b, pick) != c["owner"] for b, c in zip(builds, costs)), (seed, pick)


def test_every_route_condition_fails_alone_in_every_draw():
    """Part 1: in every draw each condition fails in some call, in one call as the only failure, and one call takes
    the fast path; so an answer that ignores any one condition fails every draw, not only by chance."""
    for seed in range(300):
        answers = [S.expected("route_conditions", sc) for sc in S.draw("route_conditions", random.Random(seed))]
        assert frozenset() in answers, seed
        for cond in S.ROUTE_CONDITIONS:
            assert frozenset({cond}) in answers, (seed, cond)  # where an answer that ignores cond is wrong


def test_every_way_a_claim_goes_untested_occurs_in_every_draw():
    """All skipped, partly skipped, an expected failure, and no test at all: each is "untested"."""
    for seed in range(10):
        reports = "".join(sc["report"] for sc in S.draw("test_report", random.Random(seed)))
        assert 'type="pytest.xfail"' in reports and 'type="pytest.skip"' in reports and "<error" in reports, seed


def test_route_conditions_follow_the_capture_json_rule():
    """Part 1 follows lesson 06: a captured call keeps the fast path only where capture.json records a passed test;
    its scenarios are capture.json as the kit writes it (the kit's reader accepts them)."""
    from fastpath_lib.rmsnorm import capture as kit

    for seed in range(6):
        for sc in S.draw("route_conditions", random.Random(seed)):
            with tempfile.TemporaryDirectory() as d:
                path = Path(d) / "capture.json"
                path.write_text(json.dumps(sc["capture"]))
                verified = {c for c, op, p in kit.load(path) if (op, p) == ("rms_norm", "eager")}  # an rms_norm call
            cap = sc["call"]["capability"]
            want_capture = sc["call"]["capturing"] and (cap is None or tuple(cap) not in verified)
            assert ("cuda_graph_capture" in S.expected("route_conditions", sc)) == want_capture, sc


def test_results_tables_are_in_the_kits_schema_and_read_by_its_reader():
    import pandas as pd

    from fastpath_lib.bench.analysis import classify
    from fastpath_lib.bench.schema import CSV_COLUMNS, is_gpu_measurement

    for sc in S.draw("results_table", random.Random(3)):
        df = pd.read_csv(io.StringIO(sc["csv"]))
        assert list(df.columns) == CSV_COLUMNS
        want = S.expected("results_table", sc)
        assert is_gpu_measurement(df) == (want["verdict"] != "no claim")
        wins = classify(df)
        for cid in want["beats_compiled"]:  # the kit's own classifier agrees on the dispatched row
            assert wins[(wins.case_id == cid) & (wins.provider == "dispatched")].vs_baseline.item() == "win"


def test_the_maintenance_replay_is_the_kits_replay_table():
    from fastpath_lib.bench.trace import TRACE_COLUMNS

    for sc in S.draw("maintenance_cost", random.Random(4)):
        for row in sc["replay"]:
            assert set(row) <= set(TRACE_COLUMNS), set(row) - set(TRACE_COLUMNS)


def test_feedback_names_the_scenarios_that_differ():
    (r,) = ex.check_readiness("test_report", _errors_ignored, show=False, seed=0)
    assert "scenarios answered differently" in r.feedback and "expected" in r.feedback
    assert len(r.feedback) < 4000


@pytest.mark.parametrize("cells, problem", [
    (["from fastpath_lib.rmsnorm import capture as C",
      "def mine(call, capture):\n    return [] if tuple(call['capability'] or ()) in C.VERIFIED else ['x']",
      "def answer(call, capture):\n    C.load('capture.json')\n    return mine(call, capture)"], "capture"),
    (["from fastpath_lib.bench.timing import bytes_moved as bm",
      "def answer(table):\n    return {'suspect': [bm(1, 1, None, 'forward')]}"], "bytes_moved"),
    (["import fastpath_lib.bench.analysis as A", "def answer(table):\n    return A.classify(table)"], "classify"),
    (["from fastpath_lib.grading.rules import ex13_scenarios as S",
      "def answer(*a):\n    return S.expected('test_report', dict(zip(('report', 'claims'), a)))"], "expected"),
    # the kit's outcome rule and noise band are the learner's to use
    (["from fastpath_lib.bench.analysis import noise_band, outcome",
      "def answer(table):\n    return outcome(1.0, noise_band(1, 1, 1, 1, 1, 1))"], None),
    (["from fastpath_lib.bench.outcome import noise_band, outcome",  # where the notebook's given cell imports them
      "def answer(table):\n    return outcome(1.0, noise_band(1, 1, 1, 1, 1, 1))"], None),
])
def test_borrowed_answers_are_found_in_the_learners_source(cells, problem):
    """In the grader the verdict comes from the learner's source (the call watch cannot see into their kernel)."""
    from fastpath_lib.grading.checks import ex13_review
    from fastpath_lib.grading.engine import sources
    from fastpath_lib.grading.rules import borrowed

    with sources.using(cells):
        got = borrowed.source_problem("answer", ex13_review._FORBIDDEN)
    assert (got is None) if problem is None else (got is not None and problem in got), got


def test_the_grader_scores_borrowed_and_constant_parts_zero(tmp_path):
    """The grader's own run of a solved notebook whose part 1 reads capture.json through the kit, whose part 2
    answers every claim "supported" and whose part 3 hands back the grader's rule: those score 0, the rest full."""
    nbformat = pytest.importorskip("nbformat")
    from fastpath_lib.grading.engine import cli

    nb = nbformat.read(Path(__file__).resolve().parents[2] / "solutions" / "ex13_review_readiness.ipynb", 4)
    cheats = {"route_conditions": "from fastpath_lib.rmsnorm import capture as _kit\n_solved = failed_conditions\n"
                                  "def failed_conditions(call, capture):\n    _kit.entries()\n"
                                  "    return _solved(call, capture)\n",
              "test_report": "def read_report(report, claims):\n    return {c['id']: 'supported' for c in claims}\n",
              "results_table": "from fastpath_lib.grading.rules.ex13_scenarios import expected as _key\n"
                               "def read_results(table):\n    return _key('results_table', {'csv': table})\n"}
    for part, cheat in cheats.items():
        at = next(i for i, c in enumerate(nb.cells) if "grader-check" in c.metadata.get("tags", [])
                  and f'"{part}"' in c.source)
        nb.cells.insert(at, nbformat.v4.new_code_cell(cheat))
    path = tmp_path / "ex13_review_readiness.ipynb"
    nbformat.write(nb, path)
    g = cli.grade_notebook(path, timeout=180)
    got = {p.part: p.earned for p in g.parts}
    assert got == {"route_conditions": 0, "test_report": 0, "results_table": 0, "review_comments": 2,
                   "maintenance_cost": 2, "contract_change": 1}, [(p.part, p.feedback) for p in g.parts]


def test_every_part_refuses_the_graders_own_code_answer_keys_included():
    """Reader 21b: part 5's answer key (``rules.ex13_cost.cost_expected``) was callable as an answer. The whole grading
    package is the grader's own: an answer that returns any of its functions' results loses the part."""
    from fastpath_lib.grading.rules import ex13_cost

    def borrowed_cost(replay, build):
        return dict(ex13_cost.cost_expected({"replay": replay, "build": build}), switch="FASTPATH_FORCE_FALLBACK=1")

    (r,) = ex.check_readiness("maintenance_cost", borrowed_cost, show=False, seed=0)
    assert not r.passed and "ex13_cost.cost_expected" in r.feedback and "grader's own" in r.feedback, r.feedback
