# ---
# jupyter:
#   fastpath:
#     exercise: ex13
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
# # Exercise 13 — review readiness
#
# Six parts, each about an artefact a reviewer of the fast path reads: the kit's `capture.json` beside a call, a
# pytest report against the claims of a PR note, a results table in `results.csv`'s schema, review comments on the
# PR note, the maintenance costs of lesson 06, and a change of the default `eps`. Each part asks for a small
# function; its check draws new artefacts every time it runs (new numbers, new ids, shuffled), with every verdict,
# every action and every failing condition in every draw, so write the rule, not the answers to the examples shown
# here. The lesson
# each part comes from is named in its heading.
#
# A part fails when its function calls what the part asks you to do yourself: the grader's own code (anything in
# `fastpath_lib.grading`: its scenarios, its rules, its checks and their answer keys), the bytes model
# (`bytes_moved` of `fastpath_lib.bench.timing` and of `fastpath_lib.rmsnorm.cost`), the predicate's functions
# (`fastpath_lib.rmsnorm.predicate`: its limits, such as `MAX_COLS`, are yours to import from
# `fastpath_lib.rmsnorm.limits`), the capture reader (`fastpath_lib.rmsnorm.capture`), or the kit's reading of a
# results table (`classify`, `summary_table`, `boundary_table` and `outcome_counts` of `fastpath_lib.bench.analysis`:
# the rule they build on, `outcome` and `noise_band`, is yours to use from `fastpath_lib.bench.outcome`). In the
# grader your kernel is not handed those modules at all.
#
# **How this works.** Fill in each cell marked `# FILL ME IN (roughly N lines)` (delete the `raise
# NotImplementedError`), run it, then run the check below it: it prints `passed`, or the scenarios where your
# answer differs from the lesson's rule. `python -m fastpath_lib grade exercises/` runs all notebooks in a fresh
# kernel and prints your score; the solved versions are in `solutions/`.

# %%
import csv
import io
import math
import xml.etree.ElementTree as ET

from fastpath_lib import exercises as ex
from fastpath_lib.rmsnorm.limits import MAX_COLS, MIN_CAPABILITY

# the kit's win/neutral/loss rule (exercise 06): outcome(candidate / baseline, noise band), and its noise band
from fastpath_lib.bench.outcome import noise_band, outcome

print("max columns:", MAX_COLS, "| minimum compute capability:", MIN_CAPABILITY)

# %% [markdown]
# ## 1. Which conditions fail? An old GPU and a CUDA-graph capture (lessons 03 and 06) — 1 point
#
# `call` describes one call: `device` (`"cuda"` or `"cpu"`), `interpreter` (Triton's CPU interpreter on),
# `capability` (`[major, minor]` on CUDA, else `None`), `capturing` (a CUDA graph is being captured), `forced`
# (the fallback switch is on), `dtype` (`"float16"`, `"bfloat16"`, `"float32"` or `"float64"`), `rows`, `cols` and
# `min_rows` (the row threshold in force for that device). `capture` is the kit's `capture.json` as `json.load`
# reads it (lesson 06, section 8): an `"_about"` text, then one entry per architecture whose CUDA-graph capture test
# was recorded, `{"sm_90": {"passed": True, "source": "results/...", "why": ..., ...}, ...}`.
#
# Return the names of the predicate's conditions that fail, out of `forced`, `cuda_graph_capture`, `device`,
# `architecture`, `dtype`, `cols` and `min_rows` (every failing one, as `explain()` lists them; an empty list
# means the Triton route). The predicate's `device` condition holds for a CUDA tensor with the interpreter off, or a
# CPU tensor with it on: a CUDA tensor while the interpreter is on fails `device` (the interpreter runs the kernels on
# the CPU), and `architecture` is judged only on CUDA with the interpreter off. Lesson 06's rule for captured calls: a call made while a graph is captured takes the
# fast path only on an architecture whose **recorded** capture test **passed**; no entry, or an entry that says
# `"passed": false`, keeps it on the fallback.
#
# Example: `call = {"device": "cuda", "interpreter": False, "capability": [7, 5], "capturing": True, "forced":
# False, "dtype": "bfloat16", "rows": 4096, "cols": 4096, "min_rows": 1024}` with `capture = {"_about": "...",
# "sm_90": {"passed": True, "source": "results/h100"}}` fails `architecture` and `cuda_graph_capture` (no passed
# test for sm_75).

# %%
def failed_conditions(call, capture) -> list:
    """Return the names of the conditions the call fails, as a list (empty when it takes the fast path)."""
    # BEGIN SOLUTION
    cuda = call["device"] == "cuda"
    arch = f"sm_{call['capability'][0]}{call['capability'][1]}" if cuda and call["capability"] else None
    recorded = capture.get(arch) if arch else None
    captured_ok = isinstance(recorded, dict) and recorded.get("passed") is True
    fails = {"forced": call["forced"], "cuda_graph_capture": call["capturing"] and not captured_ok,
             "device": cuda == call["interpreter"],
             "architecture": cuda and not call["interpreter"] and tuple(call["capability"]) < MIN_CAPABILITY,
             "dtype": call["dtype"] not in ("float16", "bfloat16", "float32"),
             "cols": call["cols"] > MAX_COLS, "min_rows": call["rows"] < call["min_rows"]}
    return [name for name, failed in fails.items() if failed]
    # END SOLUTION


# %% tags=["grader-check"]
ex.check_readiness("route_conditions", failed_conditions)


# %% [markdown]
# ## 2. What does the test report support? (lessons 04 and 06) — 2 points
#
# `report` is the text of a pytest JUnit report (`pytest --junitxml=report.xml`): one `<testcase classname=...
# name=...>` per test, holding a `<failure>`, an `<error>` (the test could not even run: a fixture or a crash), a
# `<skipped>` (skipped, for example a GPU test on CI's CPU runner, or an expected failure, `type="pytest.xfail"`),
# or nothing (passed). `claims` lists what the PR note's test section says:
# `{"id", "claim", "module", "tests", "gpu_only"}`; a claim's tests are the test cases whose `classname` is its
# `module` and whose `name` starts with its `tests`.
#
# Return `{claim id: verdict}`: `"contradicted"` when any of its tests failed or errored; otherwise `"untested"`
# when none of its tests is in the report or any of them was skipped (a skipped test is no evidence: the GPU-only
# tests run in the scheduled GPU job, not on CI's CPU runner); otherwise `"supported"`.

# %%
def read_report(report, claims) -> dict:
    """Return `{claim id: verdict}`, each verdict one of `"supported"`, `"contradicted"`, `"untested"`."""
    # BEGIN SOLUTION
    cases = [(c.get("classname"), c.get("name"), {child.tag for child in c})
             for c in ET.fromstring(report).iter("testcase")]
    verdicts = {}
    for claim in claims:
        mine = [tags for module, name, tags in cases
                if module == claim["module"] and name.startswith(claim["tests"])]
        if any(tags & {"failure", "error"} for tags in mine):
            verdicts[claim["id"]] = "contradicted"
        elif not mine or any("skipped" in tags for tags in mine):
            verdicts[claim["id"]] = "untested"
        else:
            verdicts[claim["id"]] = "supported"
    return verdicts
    # END SOLUTION


# %% tags=["grader-check"]
ex.check_readiness("test_report", read_report)


# %% [markdown]
# ## 3. Read a results table: the mechanism, and why not `torch.compile`? (lessons 02, 05 and 06) — 2 points
#
# `table` is the text of a `results.csv` (the columns of `fastpath_lib.bench.CSV_COLUMNS`; read it with
# `csv.DictReader` or `pandas.read_csv(io.StringIO(table))`). Each case has three rows, one per `provider`:
# `"baseline"` (`F.rms_norm`), `"dispatched"` (the fast path, with the `route` it took) and `"compiled"`
# (`torch.compile` of `F.rms_norm`, `status` `"skipped"` where it did not run). Return
# `{"suspect": [case ids], "beats_compiled": [case ids], "verdict": ...}`:
#
# * `suspect`: cases whose dispatched row cannot be right. Either its `bytes_moved` is not lesson 05's bytes model
#   for its `pass` (each input read once, each output written once; a forward reads x and the weight and writes y;
#   a `"backward"` row times forward and backward, which also reads dy, x and the weight and writes dx and dw), or
#   its achieved bandwidth in GB/s, `bytes_moved / (median_us * 1e-6) / 1e9` (bytes per second over `1e9`), is
#   above the run's `copy_gbps` (no kernel copies faster than a copy: the timer missed the kernel).
# * `beats_compiled`: only where the table is a GPU measurement (`gpu_measurement` true on every row: the text
#   `"True"` as `csv` reads it): the cases, not suspect,
#   whose dispatched call took the `"triton"` route and **wins** (by `outcome`) against both the baseline and the
#   compiled row, each comparison with the kit's noise band: the larger of the two rows' relative 20-80 % spreads,
#   `noise_band(q20, median, q80, other_q20, other_median, other_q80)`. A row with a `status` other than `"ok"`
#   supports no claim.
# * `verdict`: `"no claim"` when the table is not a GPU measurement, else `"fast path"` when some case beats both,
#   else `"compile it"`.

# %%
def read_results(table) -> dict:
    """Return `{"suspect": [case ids], "beats_compiled": [case ids], "verdict": str}`."""
    # BEGIN SOLUTION
    size = {"float16": 2, "bfloat16": 2, "float32": 4}
    cases = {}
    for row in csv.DictReader(io.StringIO(table)):
        cases.setdefault(row["case_id"], {})[row["provider"]] = row
    gpu = all(r["gpu_measurement"] == "True" for c in cases.values() for r in c.values())

    def t(r, col):
        return float(r[col])

    suspect, beats = [], []
    for cid, rows in cases.items():
        d = rows["dispatched"]
        act = int(d["rows"]) * int(d["cols"]) * size[d["dtype"]]
        w = int(d["cols"]) * size[d["dtype"]]
        model = 2 * act + w if d["pass"] == "forward" else 5 * act + 3 * w
        gbps = int(d["bytes_moved"]) / (t(d, "median_us") * 1e-6) / 1e9
        if int(d["bytes_moved"]) != model or gbps > t(d, "copy_gbps"):
            suspect.append(cid)
            continue
        if not gpu or d["route"] != "triton" or any(r["status"] != "ok" for r in rows.values()):
            continue
        wins = [outcome(t(d, "median_us") / t(o, "median_us"),
                        noise_band(t(d, "q20_us"), t(d, "median_us"), t(d, "q80_us"),
                                   t(o, "q20_us"), t(o, "median_us"), t(o, "q80_us"))) == "win"
                for o in (rows["baseline"], rows["compiled"])]
        if all(wins):
            beats.append(cid)
    verdict = "no claim" if not gpu else "fast path" if beats else "compile it"
    return {"suspect": suspect, "beats_compiled": beats, "verdict": verdict}
    # END SOLUTION


# %% tags=["grader-check"]
ex.check_readiness("results_table", read_results)


# %% [markdown]
# ## 4. Answer review comments with evidence, not a defence (lesson 07) — 2 points
#
# `comments` are a reviewer's comments on the PR note: `{"id", "author", "path", "line", "kind", "body", ...}`;
# `cases` is the note's case table: `{"case_id", "shape", "route", "baseline_us", "dispatched_us", "band",
# "compiled_us"}` (`compiled_us` is `None` where `torch.compile` was not measured). Return `{comment id: action}`:
#
# * `"kind": "doubt_win"` (with `case_id`): `"show_raw_samples"` when the data does show a win there (`outcome` of
#   dispatched / baseline with the case's `band`), else `"reclassify"` (the note was wrong; change it);
# * `"kind": "missing_case"` (with `shape`, `"ROWSxCOLS"`): `"point_to_case"` when a case of that shape was
#   measured, else `"add_case"` (measure it);
# * `"kind": "why_not_compile"`: `"show_compiled"` when every case has `compiled_us`, else `"measure_compiled"`;
# * `"kind": "readability"` (with `variants`: `{"readable": {"median_us", "spread_us"}, "unrolled": {...}}`): the
#   harder-to-read version is worth it only where it **wins** against the readable one beyond the noise
#   (`outcome`, with the larger of the two relative spreads, `spread_us / median_us`, as the band): then
#   `"keep_unrolled"`, otherwise `"keep_readable"`.

# %%
def answer_review(comments, cases) -> dict:
    """Return `{comment id: action}`, each action one of the actions above."""
    # BEGIN SOLUTION
    by_id = {c["case_id"]: c for c in cases}
    answers = {}
    for c in comments:
        if c["kind"] == "doubt_win":
            r = by_id[c["case_id"]]
            won = outcome(r["dispatched_us"] / r["baseline_us"], r["band"]) == "win"
            answers[c["id"]] = "show_raw_samples" if won else "reclassify"
        elif c["kind"] == "missing_case":
            answers[c["id"]] = "point_to_case" if any(r["shape"] == c["shape"] for r in cases) else "add_case"
        elif c["kind"] == "why_not_compile":
            measured = all(r["compiled_us"] is not None for r in cases)
            answers[c["id"]] = "show_compiled" if measured else "measure_compiled"
        else:
            v = c["variants"]
            band = max(x["spread_us"] / x["median_us"] for x in v.values())
            won = outcome(v["unrolled"]["median_us"] / v["readable"]["median_us"], band) == "win"
            answers[c["id"]] = "keep_unrolled" if won else "keep_readable"
    return answers
    # END SOLUTION


# %% tags=["grader-check"]
ex.check_readiness("review_comments", answer_review)


# %% [markdown]
# ## 5. The maintenance cost in the PR (lesson 06) — 2 points
#
# `replay` is lesson 06's replay table for one request (`trace.replay_trace`'s rows): `{"phase", "shape", "dtype",
# "calls", "route", "status", "baseline_us", "dispatched_us", "baseline_total_us", "dispatched_total_us", ...}`;
# rows whose `status` is not `"ok"` were not measured (their times are `None`). `build` is `{"calls", "binaries",
# "warm_disk_cache", "kernel_file", "codeowners"}`: each call `{"pass", "dtype", "cols"}` needs the forward binary for its dtype and block size
# (the next power of two >= `cols`), and a `"backward"` call the backward binary too; `binaries` lists every
# `{"kernel", "dtype", "block", "compile_s", "cubin_bytes"}`. With a warm on-disk cache, a fresh process loads the
# binaries an earlier one compiled: nothing compiles.
#
# Return the PR's cost lines: `{"saved_share", "unmeasured_calls", "binaries", "cold_start_s", "cubin_bytes",
# "switch", "owner"}`: the share of the measured baseline total the fast path saves (totals over the measured rows
# only), how many calls those totals leave out, how many distinct binaries the calls need, the seconds a fresh
# process spends compiling them, their size, the kit's switch off the fast path (a str, written as a reader would
# use it: the environment variable with its value, `"FASTPATH_FORCE_FALLBACK=1"`, which needs no code change, or the
# context manager, `"force_fallback()"` or `"fastpath_lib.force_fallback()"`), and the person who answers for it:
# the person the scenario's CODEOWNERS file names for the kernel's file: `build["codeowners"]` read for
# `build["kernel_file"]` as GitHub reads it (a line starting with `#` is a comment; every other line is a pattern and
# a handle; `*` matches every file, `*.EXT` every file whose name ends in `.EXT`, `/DIR/` every file under the
# directory `DIR` at the repository's root; the last line that matches the file names its owner, not the first one
# nor the most specific one). The check compares your owner with that handle: no other name, however plausible, is
# the owner.

# %%
def maintenance_cost(replay, build) -> dict:
    """Return a dict with the keys `saved_share`, `unmeasured_calls`, `binaries`, `cold_start_s`, `cubin_bytes`,
    `switch` and `owner`."""
    # BEGIN SOLUTION
    measured = [r for r in replay if r["status"] == "ok"]
    base = sum(r["baseline_total_us"] for r in measured)
    fast = sum(r["dispatched_total_us"] for r in measured)
    need = set()
    for c in build["calls"]:
        block = 1 << math.ceil(math.log2(c["cols"]))
        need.add(("forward", c["dtype"], block))
        if c["pass"] == "backward":
            need.add(("backward", c["dtype"], block))
    used = [b for b in build["binaries"] if (b["kernel"], b["dtype"], b["block"]) in need]
    path, owner = build["kernel_file"], None
    for line in build["codeowners"].splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            pattern, handle = line.split()[:2]
            if (pattern == "*" or (pattern.startswith("*.") and path.endswith(pattern[1:]))
                    or (pattern.startswith("/") and path.startswith(pattern[1:]))):
                owner = handle  # the last matching line wins
    return {"saved_share": (base - fast) / base,
            "unmeasured_calls": sum(r["calls"] for r in replay if r["status"] != "ok"),
            "binaries": len(need),
            "cold_start_s": 0.0 if build["warm_disk_cache"] else sum(b["compile_s"] for b in used),
            "cubin_bytes": sum(b["cubin_bytes"] for b in used),
            "switch": "FASTPATH_FORCE_FALLBACK=1", "owner": owner}
    # END SOLUTION


# %% tags=["grader-check"]
ex.check_readiness("maintenance_cost", maintenance_cost)


# %% [markdown]
# ## 6. An intentional contract change, with its migration evidence (lesson 07) — 1 point
#
# A proposal changes the default `eps` (today `F.rms_norm`'s: the machine epsilon of the compute dtype, fp32's `2**-23`
# for fp16/bf16/fp32 inputs and fp64's `2**-52` for fp64) to `change["default_eps"]`. `calls` lists the callers: `{"id",
# "dtype", "eps"}` (`eps` is `None` where the caller relies on the default). Return `{"own_commit", "affected", "pin",
# "justification"}`: whether the change goes in a commit of its own (apart from the fast path), the ids of the callers
# whose output changes, and for each of them the `eps` to pass to keep today's output.
#
# The check scores `own_commit`, `affected` and `pin` only: `own_commit` must be `True` (lesson 07: an intentional
# contract change is a commit of its own, never folded into the fast path's), `affected` must be exactly the callers
# whose output changes, and `pin` must give exactly those callers their old eps (compared as numbers, within a
# relative 1e-9).
#
# `justification` (a non-empty `str`) is a sentence or two for the reviewer, and your instructor reads it: the check
# shows it back in its feedback and does not score it, since no program can tell whether prose is true. A good one
# says the new default, today's defaults of the callers that change, and which callers change.

# %%
def migration(change, calls) -> dict:
    """Return `{"own_commit": bool, "affected": [call ids], "pin": {call id: eps}, "justification": str}`."""
    # BEGIN SOLUTION
    new = change["default_eps"]
    old = {c["id"]: 2.0 ** -52 if c["dtype"] == "float64" else 2.0 ** -23 for c in calls}
    pin = {c["id"]: old[c["id"]] for c in calls if c["eps"] is None and old[c["id"]] != new}
    today = " and ".join(f"{v:.3g}" for v in sorted(set(pin.values()), reverse=True))
    why = (f"Moving the default eps from the machine epsilon of the compute dtype ({today} for these callers) to "
           f"{new:g} changes the output of the {len(pin)} callers that rely on the default ({', '.join(sorted(pin))}); "
           f"each of them passes its old eps explicitly, so its output stays as it is.")
    return {"own_commit": True, "affected": sorted(pin), "pin": pin, "justification": why}
    # END SOLUTION


# %% tags=["grader-check"]
ex.check_readiness("contract_change", migration)
