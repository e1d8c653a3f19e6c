"""Run-to-run drift: the same cases in two results folders, and which classifications changed."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from fastpath_lib.bench.results import load_results
from fastpath_lib.bench.schema import is_gpu_measurement

__all__ = ["compare", "ENV_KEYS", "NOT_TIMED"]

#: Row statuses of a provider one run did not time (``--quick`` skips torch.compile off CUDA; an evidence matrix leaves
#: it to its own step): a row timed in one folder only is a difference of mode, not a changed classification.
NOT_TIMED = ("skipped", "not run")

#: Environment keys whose difference ``compare`` reports.
ENV_KEYS = ("device_name", "compute_capability", "gpu_measurement", "torch", "triton", "cuda_version", "git_commit",
            "interpreter")


def compare(old_dir: str | Path, new_dir: str | Path) -> pd.DataFrame:
    """Per-case, per-provider drift between two results folders, flagging changed classifications.

    Args:
        old_dir, new_dir: results folders.

    Returns:
        columns ``case_id, provider, old_us, new_us, drift_pct, old_observed, new_observed, changed, old_band,
        new_band``; ``attrs`` carry ``environment_differences`` (device, versions, commit), ``only_old`` and
        ``only_new`` (``case_id/provider`` of the rows only one folder has), ``not_timed`` (``case_id/provider:
        why``: rows both folders hold but one did not time, :data:`NOT_TIMED`, never counted as changed; the runs'
        mode, ``--quick`` or full, is in ``environment_differences`` as ``mode``) and ``not_gpu`` (``old``, ``new``: the
        folders that are not a GPU measurement, whose outcomes read unmeasured and whose drift says nothing of a GPU).

    Raises:
        FileNotFoundError, ValueError: a folder is missing or is not a results folder (one line each, from
            :func:`~fastpath_lib.bench.results.load_results`).

    Note:
        Comparing a CPU run with a GPU run is allowed but flagged in ``environment_differences``.
    """
    old, eo = load_results(old_dir)
    new, en = load_results(new_dir)
    m = old.merge(new, on=["case_id", "provider"], how="outer", suffixes=("_old", "_new"), indicator=True)
    out = pd.DataFrame({
        "case_id": m["case_id"], "provider": m["provider"], "old_us": m["median_us_old"], "new_us": m["median_us_new"],
        "old_observed": m["observed_old"], "new_observed": m["observed_new"], "old_band": m["noise_band_old"],
        "new_band": m["noise_band_new"]})
    out["drift_pct"] = 100 * (out["new_us"] / out["old_us"] - 1)
    untimed = {side: m[f"status_{side}"].astype(str).isin(NOT_TIMED) for side in ("old", "new")}
    one_side = (untimed["old"] ^ untimed["new"]) & (m["_merge"] == "both")
    out["changed"] = ((out["old_observed"].astype(str) != out["new_observed"].astype(str)) & (m["_merge"] == "both")
                      & ~one_side)
    out.attrs["not_timed"] = [
        f"{r.case_id}/{r.provider}: {'old' if u else 'new'} did not time it "
        f"({getattr(r, 'note_old' if u else 'note_new')})"
        for r, u in zip(m[one_side].itertuples(), untimed["old"][one_side])]
    out = out[["case_id", "provider", "old_us", "new_us", "drift_pct", "old_observed", "new_observed", "changed",
               "old_band", "new_band"]]
    out.attrs["environment_differences"] = {k: (eo.get(k), en.get(k)) for k in ENV_KEYS if eo.get(k) != en.get(k)}
    modes = tuple("--quick" if (e.get("harness") or {}).get("quick") else "full" for e in (eo, en))
    if modes[0] != modes[1]:
        out.attrs["environment_differences"]["mode"] = modes
    out.attrs["not_gpu"] = [side for side, df in (("old", old), ("new", new)) if not is_gpu_measurement(df)]
    for side, which in (("only_old", "left_only"), ("only_new", "right_only")):  # case/provider rows one side lacks
        one = m[m["_merge"] == which]
        out.attrs[side] = sorted(set(one["case_id"].astype(str) + "/" + one["provider"].astype(str)))
    return out
