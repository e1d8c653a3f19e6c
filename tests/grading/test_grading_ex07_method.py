"""Exercise 07's measurement_method part: the note gives how the numbers were measured (timer, warm-up,
synchronization, median of N samples, q80 - q20 spread, raw samples) from the environment it was handed."""

import re

import pytest

from fastpath_lib import exercises as ex

pytest.importorskip("jupytext")  # tests/solved.py reads the solutions with it

from solved import solved  # noqa: E402


def _by_part(results):
    return {r.part: r for r in results}


def _note():
    return solved("ex07")["write_pr_note"]


def test_the_solution_gives_the_method_on_every_table():
    r = _by_part(ex.check_pr_note(_note(), show=False))
    assert r["measurement_method"].passed, r["measurement_method"].feedback


def _without(pattern):
    def write(df, env):
        return "\n".join(ln for ln in _note()(df, env).splitlines() if not re.search(pattern, ln))
    return write


def test_each_missing_fact_fails_the_part_and_only_it():
    for pattern, words in ((r"^## Method|^Timer", "warm-up"), (r"^Synchronization", "synchronized"),
                           (r"median", "median"), (r"^Raw samples", "raw samples")):
        r = _by_part(ex.check_pr_note(_without(pattern), show=False))
        assert not r["measurement_method"].passed and words in r["measurement_method"].feedback, (pattern, r)
        assert all(x.passed for k, x in r.items() if k != "measurement_method"), pattern


def test_a_method_written_for_the_fixed_environment_fails():
    fixed = ex.synthetic_environment()["harness"]

    def write(df, env):
        return _note()(df, dict(env, harness=fixed) if env.get("device") == "cuda" else env)

    r = _by_part(ex.check_pr_note(write, show=False))
    assert not r["measurement_method"].passed and "drawn" in r["measurement_method"].feedback


def test_each_number_must_be_the_environments_own():
    for key in ("warmup_ms", "samples"):
        def write(df, env, key=key):
            return _note()(df, dict(env, harness=dict(env["harness"], **{key: 123457})))

        r = _by_part(ex.check_pr_note(write, show=False))
        assert not r["measurement_method"].passed, key
