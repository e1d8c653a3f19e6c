# ---
# jupyter:
#   fastpath:
#     exercise: ex10
#   jupytext:
#     formats: ipynb,py:percent
#     notebook_metadata_filter: fastpath,-jupytext.text_representation.jupytext_version
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Exercise 10 — the per-architecture row threshold, from sweep data
#
# > **The sweep below is SYNTHETIC**: `fastpath_lib` draws it from a seed so the choice can be practised without a
# > GPU. Its numbers are invented, *not measurements* of any device.
#
# The predicate sends calls with fewer rows than a per-architecture `min_rows` to the fallback. The kit chooses that
# number from a sweep: the fast path and the baseline (`F.rms_norm`) timed across row counts, for a few row widths, on
# each architecture. Write `choose_threshold(df) -> {arch: min_rows}` with the kit's rule:
#
# * each swept point is a `win`, `neutral` or `loss` by the kit's **one outcome rule**: `outcome(ratio, band)` with
#   `ratio = fastpath_us / baseline_us` and the noise band `noise_band(fastpath q20, median, q80, baseline q20,
#   median, q80)`. Import both from `fastpath_lib.bench.outcome`; do not copy them;
# * per architecture and width, the crossover is the **smallest swept row count from which the fast path is never a
#   loss at any larger swept size** (an early win followed by a loss does not count; `neutral` is not a loss);
# * the architecture's `min_rows` is the **largest** crossover over its widths, and `None` when some width still loses
#   at its largest swept row count (no threshold can be proposed from that sweep).
#
# The check runs your function on this table and on two tables drawn afresh. The crossover and the maximum are yours to
# write: a `choose_threshold` that calls the kit's sweep code (`fastpath_lib.bench.sweep`, which chooses the kit's own
# thresholds) or the grader's (`fastpath_lib.grading`, which holds the expected ones) fails every part.
#
# **How this works.** Fill in each cell marked `# FILL ME IN (roughly N lines)` (delete the `raise
# NotImplementedError`), run it, then run the check below it: it prints `passed`, or a table of *yours vs expected*.
# `python -m fastpath_lib grade exercises/` runs all notebooks in a fresh kernel and prints your score; the solved
# versions are in `solutions/`.

# %%
from fastpath_lib import exercises as ex
from fastpath_lib.bench.outcome import noise_band, outcome

sweep = ex.sweep_table(seed=0)
print(sweep.attrs["source"])
sweep[sweep["arch"] == sweep["arch"].iloc[0]].head(12)

# %% [markdown]
# One line per swept point. `pivot_table` shows each architecture's sweep at a glance (the ratio, fast path over
# baseline, per width and row count):

# %%
(sweep.assign(ratio=sweep["fastpath_us"] / sweep["baseline_us"])
 .pivot_table(index="rows", columns=["arch", "cols"], values="ratio").round(2))


# %%
def choose_threshold(df) -> dict:
    """Return `{arch: min_rows}`, with `None` as an arch's value when some width still loses at its largest swept
    row count."""
    # BEGIN SOLUTION
    out = {}
    for arch, by_arch in df.groupby("arch", sort=False):
        per_width = []
        for _, t in by_arch.sort_values("rows").groupby("cols"):
            lost = [outcome(r.fastpath_us / r.baseline_us, noise_band(
                r.fastpath_q20_us, r.fastpath_us, r.fastpath_q80_us, r.baseline_q20_us, r.baseline_us,
                r.baseline_q80_us)) == "loss" for r in t.itertuples()]
            rows = t["rows"].tolist()
            after = max((i + 1 for i, loss in enumerate(lost) if loss), default=0)  # just past the last loss
            per_width.append(rows[after] if after < len(rows) else None)
        out[arch] = None if None in per_width else max(per_width)
    return out
    # END SOLUTION


# %% tags=["grader-check"]
ex.check_threshold(choose_threshold)

# %% [markdown]
# ## Questions
#
# 1. Why the *largest* crossover over the widths, not the smallest or a mean?
# 2. One architecture gets no threshold. What would you do before enabling the fast path there?
# 3. Why must these numbers come from a GPU sweep recorded with its environment, never from this table or a CPU run?
#
# <details><summary>Answer guide</summary>
#
# 1. The threshold is one number for every width: below the largest crossover, some width still loses. Taking the
#    largest keeps the promise "never a loss above `min_rows`" for every swept width.
# 2. Record no threshold for it and do not enable the fast path there yet: with no entry the predicate takes its
#    conservative default (`min_rows=1024`), so the Triton route still runs at the sizes where the sweep showed a
#    loss; until the loss is understood, that architecture needs the fallback (`force_fallback()`, or a predicate
#    condition that excludes it). Find out why it loses at large sizes (the kernel's launch configuration, the
#    width's tiling) or sweep larger sizes; a threshold must never be guessed past the data.
# 3. The threshold is a performance claim about one architecture; synthetic or interpreter timings measure nothing
#    about it. `python -m fastpath_lib threshold RESULTS_DIR` records the value with the results folder it came from.
# </details>
