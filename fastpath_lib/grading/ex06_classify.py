"""Exercise 06: classifying results, on a synthetic table (and the data exercise 07 writes its note from).

``my_classify(row) -> "win" | "neutral" | "loss" | "fallback"`` is checked on the fixed synthetic table of the
notebook and on a table drawn afresh at every call (new case ids and numbers), so a lookup of the fixed table's
answers does not pass. The rule is the kit's one rule (:func:`~fastpath_lib.grading.vocabulary.outcome`, with the
noise band of :mod:`fastpath_lib.bench.analysis`); calling it, or the grader's helpers, from the classifier fails.
"""

from __future__ import annotations

import random
from collections import Counter

from fastpath_lib.grading import borrowed
from fastpath_lib.grading.feedback import Fail, graded, part, table
from fastpath_lib.grading.registry import Result
from fastpath_lib.grading.vocabulary import FALLBACK, LOSS, NEUTRAL, NOT_GPU, OUTCOMES, WIN, outcome

__all__ = ["check_classification", "synthetic_results", "synthetic_environment", "interpreter_results",
           "interpreter_environment", "drawn_results", "expected_classes", "SYNTHETIC_LABEL", "harness"]

#: SYNTHETIC TEACHING DATA, NOT A MEASUREMENT. Invented numbers with the shape of a results table (medians and
#: 20-80 % spreads, q80 - q20, in microseconds), built so that each classification rule is exercised. No GPU ran them.
_SYNTHETIC = (
    # case_id, route, baseline_median_us, baseline_spread_us, candidate_median_us, candidate_spread_us
    ("c01_4096x4096_bf16", "triton", 210.0, 2.0, 140.0, 1.5),
    ("c02_8192x1024_fp16", "triton", 95.0, 1.0, 71.0, 1.0),
    ("c03_1024x8192_fp32", "triton", 180.0, 3.0, 178.0, 3.0),
    ("c04_2048x4096_bf16_slice", "triton", 60.0, 0.6, 56.0, 0.5),
    ("c05_1024x128_fp16", "triton", 9.0, 0.2, 9.8, 0.2),
    ("c06_1024x64_fp32", "triton", 8.0, 0.1, 7.95, 0.1),
    ("c07_4096x4096_bf16_noisy", "triton", 200.0, 45.0, 160.0, 40.0),
    ("c08_1024x1000_fp16_nonpow2", "triton", 14.0, 0.4, 14.3, 0.4),
    ("c09_512x4096_fp16_small", "fallback", 11.0, 0.2, 11.1, 0.2),
    ("c10_4096x4096_fp16_transposed", "fallback", 300.0, 4.0, 240.0, 4.0),
    ("c11_4096x32768_bf16_wide", "fallback", 900.0, 9.0, 905.0, 9.0),
    ("c12_2048x2048_fp32_step", "triton", 40.0, 0.4, 47.0, 0.5),
)
_COLUMNS = ["case_id", "route", "baseline_median_us", "baseline_spread_us", "candidate_median_us",
            "candidate_spread_us"]

SYNTHETIC_LABEL = "SYNTHETIC teaching dataset: invented numbers, not a measurement"

_GRADER = borrowed.kit("grading", why="that is the grader's own answer") + borrowed.kit(
    "bench", why="that is the kit's own classification rule")


def _frame(rows, source: str):
    import pandas as pd

    df = pd.DataFrame(rows, columns=_COLUMNS)
    df.attrs["source"] = source
    return df


def synthetic_results():
    """The fixed results table of exercises 06 and 07 (a pandas DataFrame, synthetic: see :data:`SYNTHETIC_LABEL`)."""
    return _frame(_SYNTHETIC, SYNTHETIC_LABEL)


def drawn_results(seed: int | None = None):
    """A synthetic table drawn at random (new case ids and numbers): three cases of each outcome, well clear of the
    noise band's edges. ``seed=None`` draws a fresh one."""
    rng = random.Random(seed) if seed is not None else random.SystemRandom()
    rows = []
    for i, want in enumerate(rng.sample(list(OUTCOMES) * 3, 3 * len(OUTCOMES))):
        b = round(rng.uniform(5, 500), 2)
        fb, fc = rng.uniform(0.01, 0.15), rng.uniform(0.01, 0.15)
        band = max(fb, fc)
        ratio = {WIN: rng.uniform(0.3, 1 - band - 0.05), LOSS: rng.uniform(1 + band + 0.05, 2.5),
                 NEUTRAL: rng.uniform(1 - band * 0.5, 1 + band * 0.5), FALLBACK: rng.uniform(0.5, 1.5)}[want]
        c = round(b * ratio, 4)
        cid = f"d{i + 1:02d}_{rng.choice((1, 64, 512, 2048, 8192))}x{rng.choice((128, 1000, 4096))}"
        rows.append((cid, "fallback" if want == FALLBACK else "triton", b, round(b * fb, 4), c, round(c * fc, 4)))
    return _frame(rows, "SYNTHETIC table drawn at random by the check, not a measurement")


def synthetic_environment() -> dict:
    """The environment record that goes with :func:`synthetic_results` (it names itself synthetic)."""
    from fastpath_lib import runtime

    v = runtime.versions()
    return {"device_kind": "cuda", "device": "synthetic GPU (teaching data)", "torch": v["torch"],
            "triton": v["triton"], "synthetic": True, "note": SYNTHETIC_LABEL, "harness": harness()}


def harness(warmup_ms: int = 50, samples: int = 100, raw: str = "raw_samples.csv") -> dict:
    """How the synthetic table says it was timed (the method a PR note reports with the numbers)."""
    return {"timer": "triton.testing.do_bench", "warmup_ms": warmup_ms, "samples": samples,
            "sync": "the device is synchronized before each timing is read (CUDA events)",
            "statistic": "median", "spread": "q80 - q20", "raw_samples": raw}


def interpreter_results():
    """A results table shaped like a run under Triton's CPU interpreter: synthetic too, and not GPU data."""
    df = synthetic_results().head(4).copy()
    df["candidate_median_us"] = df["baseline_median_us"] * 0.5
    df.attrs["source"] = f"SYNTHETIC interpreter-shaped data, {NOT_GPU}"
    return df


def interpreter_environment() -> dict:
    """The environment record of :func:`interpreter_results`."""
    env = synthetic_environment()
    env.update(device_kind="cpu", device="Triton CPU interpreter", note=NOT_GPU,
               harness=dict(harness(warmup_ms=5, samples=9, raw="interpreter_raw.csv"), timer="time.perf_counter",
                            sync="none: CPU calls return when done"))
    return env


def _expected_class(row) -> str:
    if row["route"] == "fallback":
        return FALLBACK
    b, c = row["baseline_median_us"], row["candidate_median_us"]
    return outcome(c / b, max(row["baseline_spread_us"] / b, row["candidate_spread_us"] / c))


def expected_classes(df) -> dict[str, str]:
    """The classification of each case by the kit's rule (the answer of exercise 06, given to exercise 07)."""
    return {r["case_id"]: _expected_class(r) for _, r in df.iterrows()}


def _classified(my_classify, df) -> dict:
    return {r["case_id"]: borrowed.run(my_classify, (r,), _GRADER) for _, r in df.iterrows()}


def _classification(tables, my_classify) -> None:
    problems = []
    for name, df in tables:
        exp, yours = expected_classes(df), _classified(my_classify, df)
        bad = sum(yours[c] != exp[c] for c in exp)
        if bad:
            rows = [(c, yours[c], exp[c], "" if yours[c] == exp[c] else "<-- differs") for c in exp]
            problems.append(f"{name}: {bad} of {len(exp)} cases classified differently\n"
                            + table(rows, ("case", "yours", "expected", "")))
    if problems:
        raise Fail("\n".join(problems))


def _counts(tables, my_classify) -> str:
    for name, df in tables:
        yours, want = Counter(_classified(my_classify, df).values()), Counter(expected_classes(df).values())
        if yours != want:
            raise Fail(f"{name}: counts yours {dict(sorted(yours.items()))} vs expected "
                       f"{dict(sorted(want.items()))}")
    want = Counter(expected_classes(tables[0][1]).values())
    return "counts: " + ", ".join(f"{k}={want[k]}" for k in OUTCOMES)


def _grade(tables, my_classify) -> list[Result]:
    """The two parts, each judged on its own."""
    return [part("ex06", "classification", _classification, tables, my_classify),
            part("ex06", "summary_counts", _counts, tables, my_classify)]


def check_classification(my_classify, *, show: bool = True):
    """``my_classify(row) -> "win" | "neutral" | "loss" | "fallback"`` on the synthetic table and a freshly drawn
    one."""
    tables = (("the notebook's table", synthetic_results()), ("a table drawn now", drawn_results()))
    return graded("ex06", ("classification", "summary_counts"), _grade, tables, my_classify, show=show)
