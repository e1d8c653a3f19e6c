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

from fastpath_lib.bench.analysis import noise_band
from fastpath_lib.grading.materials import sweep_table
from fastpath_lib.grading.registry import Result, points_of
from fastpath_lib.grading.report.feedback import Fail, graded, real, table
from fastpath_lib.grading.rules import borrowed
from fastpath_lib.grading.vocabulary import LOSS, outcome

__all__ = ["check_threshold", "expected_thresholds"]

_GRADER = borrowed.kit("grading", why="that is the grader's own answer") + borrowed.kit(
    "bench/sweep.py", why="that is the kit's own threshold rule")
_PARTS = ("thresholds", "no_threshold")


def _not_a_loss(r) -> bool:
    band = noise_band(r.fastpath_q20_us, r.fastpath_us, r.fastpath_q80_us, r.baseline_q20_us, r.baseline_us,
                      r.baseline_q80_us)
    return outcome(r.fastpath_us / r.baseline_us, band) != LOSS


#: The rule, in the exercise's words (``solutions/ex10_*.py``), as the feedback states it.
RULE = ("per architecture and width, the crossover is the smallest swept row count from which the fast path is never "
        "a loss at any larger swept size (an early win followed by a loss does not count); the architecture's "
        "min_rows is the largest crossover over its widths, and None when some width still loses at its largest "
        "swept size")


def _widths(by_arch) -> dict[int, tuple[int | None, int | None]]:
    """width -> (its crossover, the first row count that is not a loss) of one architecture's rows."""
    out = {}
    for cols, t in by_arch.groupby("cols"):
        t = t.sort_values("rows")
        ok = [_not_a_loss(r) for r in t.itertuples()]
        rs = [int(v) for v in t["rows"]]
        out[int(cols)] = (next((rs[k] for k in range(len(rs)) if all(ok[k:])), None),
                          next((rs[k] for k in range(len(rs)) if ok[k]), None))
    return out


def expected_thresholds(df) -> dict[str, int | None]:
    """The kit's rule on a sweep table: ``{arch: min_rows or None}`` (the grader's answer; not for learners)."""
    out: dict[str, int | None] = {}
    for arch, by_arch in df.groupby("arch", sort=False):
        per_width = [c for c, _ in _widths(by_arch).values()]
        out[str(arch)] = None if None in per_width else max(per_width)
    return out


def _why(df, arch: str, got) -> str:
    """What ``got`` for ``arch`` misses of :data:`RULE`, from the table's own rows."""
    widths = _widths(df[df["arch"].astype(str) == arch])
    cross = {w: c for w, (c, _) in widths.items()}
    said = f"{arch}: crossovers by width {cross}"
    firsts = [f for _, f in widths.values()]
    regained = [w for w, (c, f) in widths.items() if f is not None and c != f]
    if regained and None not in firsts and _same(got, max(firsts)):
        w = regained[0]
        return (f"{said}; yours is where the fast path first stops losing, but at width {w} it loses again above "
                f"{widths[w][1]} rows: the crossover is from where it never loses at any larger size")
    known = [c for c in cross.values() if c is not None]
    if None not in cross.values() and len(set(known)) > 1 and _same(got, min(known)):
        return f"{said}; yours is the smallest crossover over the widths: min_rows is the largest"
    if None in cross.values():
        return f"{said}; a width still loses at its largest swept size, so min_rows is None"
    return f"{said}; min_rows is the largest of them, {max(known)}"


def _answer(choose, df) -> dict:
    got = borrowed.run(choose, (df.copy(),), _GRADER)
    if not isinstance(got, dict):
        raise Fail(f"choose_threshold must return a dict arch -> min_rows, got {type(got).__name__}")
    return {str(k): v for k, v in got.items()}


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return real(a) == float(b)  # any real number: a count read from the DataFrame is a numpy integer


def _compare(tables, choose):
    """``(rows of threshold archs that differ, rows of no-threshold archs that differ, full table text)``: the text
    starts with what the first differing architectures miss of the rule (:func:`_why`)."""
    bad_t, bad_n, rows, why = 0, 0, [], []
    for name, df in tables:
        exp, yours = expected_thresholds(df), _answer(choose, df)
        for arch, want in exp.items():
            got = yours.get(arch, "missing")
            ok = _same(got, want)
            bad_t += not ok and want is not None
            bad_n += not ok and want is None
            rows.append((name, arch, got, want, "" if ok else "<-- differs"))
            why += [] if ok or got == "missing" else [f"{name} table, {_why(df, arch, got)}"]
        for extra in sorted(set(yours) - set(exp)):
            bad_t += 1
            rows.append((name, extra, yours[extra], "(no such arch)", "<-- differs"))
    text = table(rows, ("table", "arch", "yours", "expected", ""))
    return bad_t, bad_n, (f"the rule: {RULE}\n" + "\n".join(why[:3]) + "\n" if why else "") + text


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
