"""Exercise 10: the per-architecture row threshold, chosen from (synthetic) sweep data with the kit's noise-band rule.

``choose_threshold(df) -> {arch: min_rows or None}``: per architecture and row width, the smallest swept row count
from which the fast path is never a loss at any larger swept row count; the architecture's threshold is the largest
of those over its widths, and ``None`` when some width still loses at its largest swept row count (the rule of
:func:`fastpath_lib.bench.sweep.propose`, with the outcome rule of :mod:`fastpath_lib.bench.analysis`, imported
through :mod:`fastpath_lib.grading.vocabulary`: one source). The check compares on the notebook's table and on tables
drawn afresh at every call (new architectures, crossovers and noise), so answers looked up for the notebook's table
do not pass. The learner imports the outcome rule (``noise_band``, ``outcome``) rather than copying it; calling the
kit's threshold rule (:mod:`fastpath_lib.bench.sweep`) or the grader's helpers fails.
"""

from __future__ import annotations

import random

from fastpath_lib.bench.analysis import noise_band
from fastpath_lib.grading import borrowed
from fastpath_lib.grading.feedback import Fail, graded, table
from fastpath_lib.grading.registry import Result, points_of
from fastpath_lib.grading.vocabulary import LOSS, NEUTRAL, WIN, outcome

__all__ = ["check_threshold", "sweep_table", "expected_thresholds", "SWEEP_LABEL", "SWEEP_COLUMNS"]

SWEEP_LABEL = "SYNTHETIC sweep drawn from a seed by fastpath_lib (teaching data): invented numbers, not a measurement"
SWEEP_COLUMNS = ["arch", "cols", "rows", "baseline_us", "baseline_q20_us", "baseline_q80_us", "fastpath_us",
                 "fastpath_q20_us", "fastpath_q80_us"]
_ARCHS = ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120")
_ROWS = tuple(2 ** k for k in range(3, 15))  # 8 .. 16384
_GRADER = borrowed.kit("grading", why="that is the grader's own answer") + borrowed.kit(
    "bench/sweep.py", why="that is the kit's own threshold rule")
_PARTS = ("thresholds", "no_threshold")


def _ratio(rng, want: str, band: float) -> float:
    if want == LOSS:
        return 1 + band + rng.uniform(0.05, 0.5)
    if want == WIN:
        return 1 - band - rng.uniform(0.05, 0.35)
    return 1 + rng.uniform(-0.5, 0.5) * band  # neutral: inside the band


def _width_outcomes(rng, n: int, still_loses: bool) -> list[str]:
    """Outcomes along the swept rows: losses, then (after a crossover) never a loss; with traps on both sides."""
    k = rng.randint(2, n - 3)  # index of the crossover
    outs = [LOSS] * k + [rng.choice((WIN, WIN, NEUTRAL)) for _ in range(n - k)]
    outs[rng.randrange(0, k - 1)] = rng.choice((WIN, NEUTRAL))  # an early non-loss before the last loss
    outs[k + rng.randrange(0, n - k)] = NEUTRAL  # a slower median inside the noise band: not a loss
    if still_loses:
        outs[-1] = LOSS
    return outs


def sweep_table(seed: int | None = None):
    """A synthetic sweep (pandas DataFrame, ``attrs["source"]`` says so): per architecture two row widths, the
    baseline (``F.rms_norm``) and the fast path timed across row counts 8..16384, medians with 20/80 % quantiles in
    microseconds. ``seed=None`` draws a fresh one; one architecture's fast path still loses at the largest size."""
    import pandas as pd

    rng = random.Random(seed) if seed is not None else random.SystemRandom()
    archs = sorted(rng.sample(_ARCHS, 4), key=_ARCHS.index)
    losing = rng.choice(archs)
    rows = []
    for arch in archs:
        widths = sorted(rng.sample((512, 1024, 2048, 4096, 8192), 2))
        lose_width = rng.choice(widths) if arch == losing else None
        for cols in widths:
            for r, want in zip(_ROWS, _width_outcomes(rng, len(_ROWS), cols == lose_width)):
                b = round(2.0 + r * cols * 4 / 2.5e6 * rng.uniform(0.9, 1.1), 3)  # ~2.5 TB/s plus launch time
                fb, ff = rng.uniform(0.01, 0.12), rng.uniform(0.01, 0.12)
                f = round(b * _ratio(rng, want, max(fb, ff)), 3)
                rows.append((arch, cols, r, b, round(b * (1 - fb / 2), 4), round(b * (1 + fb / 2), 4), f,
                             round(f * (1 - ff / 2), 4), round(f * (1 + ff / 2), 4)))
    df = pd.DataFrame(rows, columns=SWEEP_COLUMNS)
    df.attrs["source"] = SWEEP_LABEL
    return df


def _not_a_loss(r) -> bool:
    band = noise_band(r.fastpath_q20_us, r.fastpath_us, r.fastpath_q80_us, r.baseline_q20_us, r.baseline_us,
                      r.baseline_q80_us)
    return outcome(r.fastpath_us / r.baseline_us, band) != LOSS


def expected_thresholds(df) -> dict[str, int | None]:
    """The kit's rule on a sweep table: ``{arch: min_rows or None}`` (the grader's answer; not for learners)."""
    out: dict[str, int | None] = {}
    for arch, by_arch in df.groupby("arch", sort=False):
        per_width = []
        for _, t in by_arch.groupby("cols"):
            t = t.sort_values("rows")
            ok = [_not_a_loss(r) for r in t.itertuples()]
            rs = [int(v) for v in t["rows"]]
            per_width.append(next((rs[k] for k in range(len(rs)) if all(ok[k:])), None))
        out[str(arch)] = None if None in per_width else max(per_width)
    return out


def _answer(choose, df) -> dict:
    got = borrowed.run(choose, (df.copy(),), _GRADER)
    if not isinstance(got, dict):
        raise Fail(f"choose_threshold must return a dict arch -> min_rows, got {type(got).__name__}")
    return {str(k): v for k, v in got.items()}


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return not isinstance(a, bool) and isinstance(a, (int, float)) and float(a) == float(b)


def _compare(tables, choose):
    """``(rows of threshold archs that differ, rows of no-threshold archs that differ, full table text)``."""
    bad_t, bad_n, rows = 0, 0, []
    for name, df in tables:
        exp, yours = expected_thresholds(df), _answer(choose, df)
        for arch, want in exp.items():
            got = yours.get(arch, "missing")
            ok = _same(got, want)
            bad_t += not ok and want is not None
            bad_n += not ok and want is None
            rows.append((name, arch, got, want, "" if ok else "<-- differs"))
        for extra in sorted(set(yours) - set(exp)):
            bad_t += 1
            rows.append((name, extra, yours[extra], "(no such arch)", "<-- differs"))
    return bad_t, bad_n, table(rows, ("table", "arch", "yours", "expected", ""))


def _grade(tables, choose_threshold) -> list[Result]:
    bad_t, bad_n, text = _compare(tables, choose_threshold)
    res = [Result("ex10", "thresholds", points_of("ex10", "thresholds"), not bad_t,
                  f"{bad_t} architecture thresholds differ\n{text}" if bad_t else
                  "every threshold matches the kit's rule")]
    if bad_t:
        res.append(Result("ex10", "no_threshold", points_of("ex10", "no_threshold"), False,
                          "graded once the thresholds match (an answer of None everywhere is not a rule)"))
    else:
        res.append(Result("ex10", "no_threshold", points_of("ex10", "no_threshold"), not bad_n,
                          f"{bad_n} architectures whose fast path still loses at its largest size should have "
                          f"no threshold (None)\n{text}" if bad_n else "None where the fast path still loses"))
    return res


def check_threshold(choose_threshold, *, show: bool = True):
    """``choose_threshold(df) -> {arch: min_rows or None}`` on the notebook's table and on two tables drawn now."""
    tables = [("notebook's", sweep_table(0)), ("drawn now 1", sweep_table()), ("drawn now 2", sweep_table())]
    return graded("ex10", _PARTS, _grade, tables, choose_threshold, show=show)
