"""Answer keys that restate a bench rule agree with the kit's rule (issue 28, item 7): exercise 10's threshold rule
with the sweep's proposal (fastpath_lib/bench/sweep.py), exercise 13's mechanism bytes with the bench's bytes model
(fastpath_lib/bench/timing.py). A change to either side fails here, not in a learner's grade."""

from __future__ import annotations

import random

import pandas as pd
import pytest
import torch

from fastpath_lib.bench import sweep, timing
from fastpath_lib.grading import ex10_threshold, ex13_scenarios


def _as_bench_sweep(df: pd.DataFrame) -> pd.DataFrame:
    """One architecture of ex10's synthetic table in the shape of the bench's sweep table (one row per provider)."""
    records = []
    for r in df.itertuples():
        for provider, prefix in (("baseline", "baseline"), ("triton", "fastpath")):
            records.append({"cols": r.cols, "rows": r.rows, "dtype": "float16", "provider": provider,
                            "case_id": f"sweep_{r.rows}x{r.cols}", "status": "ok", "route": "n/a", "expected": "n/a",
                            "q20_us": getattr(r, f"{prefix}_q20_us"), "median_us": getattr(r, f"{prefix}_us"),
                            "q80_us": getattr(r, f"{prefix}_q80_us"), "samples_us": "[]", "timer": "synthetic",
                            "gpu_measurement": True})
    return pd.DataFrame(records, columns=sweep.SWEEP_COLUMNS)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_ex10_answer_key_is_the_sweeps_proposal(seed):
    df = ex10_threshold.sweep_table(seed)
    key = ex10_threshold.expected_thresholds(df)
    for arch, by_arch in df.groupby("arch", sort=False):
        got = sweep.propose(_as_bench_sweep(by_arch), capability=(9, 0))["proposed_min_rows"]
        assert got == key[str(arch)], (seed, arch, got, key[str(arch)])
    assert None in key.values() and any(v is not None for v in key.values())  # both answers are asked for


def test_ex13_mechanism_bytes_are_the_benchs_bytes_model():
    rng = random.Random(0)
    for _ in range(40):
        case = ex13_scenarios.draw("mechanism", rng)[0]
        dtype = getattr(torch, case["dtype"])
        assert ex13_scenarios.ELEMENT_BYTES[case["dtype"]] == torch.empty((), dtype=dtype).element_size()
        want = timing.bytes_moved(case["rows"], case["cols"], dtype, case["pass"], weight=case["weight"])
        assert ex13_scenarios.expected("mechanism", case)["bytes"] == want, case
