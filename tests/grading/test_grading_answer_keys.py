"""Answer keys that restate a bench rule agree with the kit's rule (issue 28, item 7): exercise 10's threshold rule
with the sweep's proposal (fastpath_lib/bench/sweep.py), exercise 13's results tables with the bench's bytes model
(``bytes_moved``, imported from fastpath_lib/bench/timing.py wherever it lives) and its noise-band rule. A change to
either side fails here, not in a learner's grade."""

from __future__ import annotations

import random

import pandas as pd
import pytest
import torch

from fastpath_lib.bench import sweep, timing
from fastpath_lib.grading.checks import ex10_threshold
from fastpath_lib.grading.rules import ex13_scenarios


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


def test_ex13_results_tables_use_the_benchs_bytes_model():
    """Every case of the drawn results tables: the key's bytes model is the bench's, and a row the key calls suspect
    is one whose bytes differ from it or whose bandwidth is above the copy bandwidth."""
    import csv
    import io

    for seed in range(10):
        for sc in ex13_scenarios.draw("results_table", random.Random(seed)):
            want = ex13_scenarios.expected("results_table", sc)
            for r in csv.DictReader(io.StringIO(sc["csv"])):
                if r["provider"] != "dispatched":
                    continue
                dtype = getattr(torch, r["dtype"])
                assert ex13_scenarios.ELEMENT_BYTES[r["dtype"]] == torch.empty((), dtype=dtype).element_size()
                model = timing.bytes_moved(int(r["rows"]), int(r["cols"]), dtype, r["pass"])
                assert ex13_scenarios.model_bytes(int(r["rows"]), int(r["cols"]), r["dtype"], r["pass"]) == model
                too_fast = model / (float(r["median_us"]) * 1e-6) / 1e9 > float(r["copy_gbps"])
                assert (r["case_id"] in want["suspect"]) == (int(r["bytes_moved"]) != model or too_fast), r
