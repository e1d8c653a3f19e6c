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
# Thirteen short parts, one for each item of the lessons that the other exercises do not grade. Each asks for a
# small function that answers a *scenario* given as plain data (dicts, lists, numbers). The check draws new
# scenarios every time it runs (new numbers, new ids, shuffled), so write the rule, not the answers to the
# examples shown here. Each part takes a few minutes; the lesson it comes from is named in its heading.
#
# **How this works.** Fill in each cell marked `# FILL ME IN (roughly N lines)` (delete the `raise
# NotImplementedError`), run it, then run the check below it: it prints `passed`, or the scenarios where your
# answer differs from the lesson's rule. `python -m fastpath_lib grade exercises/` runs all notebooks in a fresh
# kernel and prints your score; the solved versions are in `solutions/`.

# %%
import math

import fastpath_lib
from fastpath_lib import exercises as ex
from fastpath_lib.rmsnorm.predicate import MAX_COLS, MIN_CAPABILITY

# the kit's win/neutral/loss rule (exercise 06): outcome(candidate / baseline, noise band)
from fastpath_lib.bench.analysis import outcome

print("max columns:", MAX_COLS, "| minimum compute capability:", MIN_CAPABILITY)

# %% [markdown]
# ## 1. Which conditions fail? An old GPU and a CUDA-graph capture (lesson 03)
#
# `call` describes one call: `device` (`"cuda"` or `"cpu"`), `interpreter` (Triton's CPU interpreter on),
# `capability` (`[major, minor]` on CUDA, else `None`), `capturing` (a CUDA graph is being captured), `forced`
# (the fallback switch is on), `dtype` (`"float16"`, `"bfloat16"`, `"float32"` or `"float64"`), `rows`, `cols`,
# `min_rows` (the row threshold in force for that device) and `capture`, the kit's `capture.json` as lesson 06
# shows it (`{"sm_90": {"passed": True, "source": ...}, ...}`: the architectures whose CUDA-graph capture test ran,
# and whether it passed). Return the names of the predicate's conditions that fail, out of `forced`,
# `cuda_graph_capture`, `device`, `architecture`, `dtype`, `cols` and `min_rows` (every failing one, as `explain()`
# lists them; an empty list means the Triton route). A captured call takes the fast path only on an architecture
# whose recorded capture test passed.
#
# Example: `{"device": "cuda", "interpreter": False, "capability": [7, 5], "capturing": True, "forced": False,
# "dtype": "bfloat16", "rows": 4096, "cols": 4096, "min_rows": 1024, "capture": {"sm_90": {"passed": True,
# "source": "results/h200"}}}` fails `architecture` and `cuda_graph_capture` (no passed test for sm_75).

# %%
def failed_conditions(call) -> list:
    # BEGIN SOLUTION
    cuda = call["device"] == "cuda"
    arch = f"sm_{call['capability'][0]}{call['capability'][1]}" if cuda and call["capability"] else None
    captured_ok = arch is not None and call["capture"].get(arch, {}).get("passed") is True
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
# ## 2. Is the mode preserved? Determinism, autocast, `torch.compile` (lessons 01 and 04)
#
# `record` is what a test observed for one mode; return `True` when the fast path preserves the mode:
#
# * `{"mode": "deterministic", "run_a": [...], "run_b": [...]}`: two runs of the same call;
# * `{"mode": "autocast", "input_dtype", "autocast_dtype", "reference_dtype", "fast_path_dtype"}`: output dtypes
#   of `F.rms_norm` and of the fast path under the same autocast region;
# * `{"mode": "compile", "eager": [...], "compiled": [...], "atol", "rtol", "graph_breaks"}`: the same call eager
#   and under `torch.compile(fullgraph=True)`.

# %%
def preserved(record) -> bool:
    # BEGIN SOLUTION
    if record["mode"] == "deterministic":
        return record["run_a"] == record["run_b"]  # bitwise, not allclose
    if record["mode"] == "autocast":
        return record["fast_path_dtype"] == record["reference_dtype"]
    close = all(abs(c - e) <= record["atol"] + record["rtol"] * abs(e)
                for c, e in zip(record["compiled"], record["eager"]))
    return close and record["graph_breaks"] == 0
    # END SOLUTION


# %% tags=["grader-check"]
ex.check_readiness("modes_preserved", preserved)

# %% [markdown]
# ## 3 and 4. Which test catches it, and where does it run? (lessons 04 and 06)
#
# `item` is a fault or a regression: `{"id", "fault", "description", "device"}` (`device`: where the tests
# run, `"cpu"` under the interpreter or `"cuda"`). The cell below prints every `fault` with its description
# (`ex.EX13_FAULTS`). Return `(kind, when)`:
#
# * `kind`, the test that catches it: `"fake"` (a fake-tensor test of `register_fake`), `"opcheck"`,
#   `"compile"` (`torch.compile(fullgraph=True)` against eager), `"guard_band"` (poisoned memory around every
#   input and output), `"sanitizer"` (compute-sanitizer: memcheck, racecheck, initcheck; CUDA only),
#   `"non_finite"` (NaN and inf inputs against the reference) or `"sweep"` (a timed GPU sweep);
# * `when`: `"ci"` (every push) or `"scheduled"` (the weekly GPU run).
#
# Part 3 grades `kind`, part 4 grades `when`.

# %%
for fault, text in ex.EX13_FAULTS.items():
    print(f"{fault:20} {text}")


# %%
def catching_test(item) -> tuple:
    # BEGIN SOLUTION
    kind = {"fake_strides": "fake", "fake_dtype": "fake", "undeclared_mutation": "opcheck",
            "compiled_guard": "compile", "graph_break": "compile", "write_past_end": "guard_band",
            "read_past_end": "guard_band", "smem_race": "sanitizer", "uninitialised": "sanitizer",
            "nan_zeroed": "non_finite", "inf_row": "non_finite", "slower_new_arch": "sweep",
            "threshold_drift": "sweep"}[item["fault"]]
    return kind, "scheduled" if kind == "sweep" else "ci"
    # END SOLUTION


# %% tags=["grader-check"]
ex.check_readiness("test_kinds", catching_test)

# %% tags=["grader-check"]
ex.check_readiness("ci_or_schedule", catching_test)


# %% [markdown]
# ## 5. Why not `torch.compile`? (lesson 06)
#
# `table` is `{"gpu_measurement": bool, "cases": [{"case_id", "baseline_us", "compiled_us", "fast_us", "band"},
# ...]}`: medians of `F.rms_norm`, of `torch.compile(F.rms_norm)` and of the fast path, with each case's relative
# noise band. Return `{"beats_compiled": [case ids], "verdict": ...}`: the cases where the fast path wins (by
# `outcome`) against **both** `F.rms_norm` and the compiled reference, and the verdict `"fast path"` (some such
# case), `"compile it"` (none) or `"no claim"` (the data is not a GPU measurement: no case counts).

# %%
def why_not(table) -> dict:
    # BEGIN SOLUTION
    if not table["gpu_measurement"]:
        return {"beats_compiled": [], "verdict": "no claim"}
    beats = [c["case_id"] for c in table["cases"]
             if outcome(c["fast_us"] / c["compiled_us"], c["band"]) == "win"
             and outcome(c["fast_us"] / c["baseline_us"], c["band"]) == "win"]
    return {"beats_compiled": beats, "verdict": "fast path" if beats else "compile it"}
    # END SOLUTION


# %% tags=["grader-check"]
ex.check_readiness("why_not_baseline", why_not)


# %% [markdown]
# ## 6. The workload replay (lesson 06)
#
# `trace` lists the distinct calls of one request: `{"phase", "rows", "count", "route", "baseline_us",
# "fast_us"}`, each timed once; `fast_us` is `None` where the call was not measured. Return
# `{"baseline_total_us", "fast_total_us", "saved_share", "unmeasured_calls"}`: totals over the *measured* rows
# (time per call times its count), the share of the baseline total the fast path saves, and how many calls the
# totals leave out.

# %%
def replay(trace) -> dict:
    # BEGIN SOLUTION
    measured = [r for r in trace if r["fast_us"] is not None]
    base = sum(r["count"] * r["baseline_us"] for r in measured)
    fast = sum(r["count"] * r["fast_us"] for r in measured)
    return {"baseline_total_us": base, "fast_total_us": fast, "saved_share": (base - fast) / base,
            "unmeasured_calls": sum(r["count"] for r in trace if r["fast_us"] is None)}
    # END SOLUTION


# %% tags=["grader-check"]
ex.check_readiness("workload_replay", replay)


# %% [markdown]
# ## 7. Compile time and binary size on a cold start (lesson 06)
#
# `case` is `{"calls", "binaries", "warm_disk_cache"}`. Each call is `{"pass", "dtype", "cols"}`; it needs the
# forward binary for its dtype and block size (the next power of two >= `cols`), and a `"backward"` call needs the
# backward binary too (a training step runs both). `binaries` lists every `{"pass", "dtype", "block",
# "compile_s", "cubin_bytes"}`. Return `{"binaries", "compile_s", "cubin_bytes"}` for the distinct binaries the
# calls need: how many, the seconds a fresh process spends compiling them, and their size. With a warm on-disk
# cache (`warm_disk_cache`), Triton loads the binaries it compiled in an earlier process: nothing compiles.

# %%
def cold_start(case) -> dict:
    # BEGIN SOLUTION
    need = set()
    for c in case["calls"]:
        block = 1 << math.ceil(math.log2(c["cols"]))
        need.add(("forward", c["dtype"], block))
        if c["pass"] == "backward":
            need.add(("backward", c["dtype"], block))
    used = [b for b in case["binaries"] if (b["pass"], b["dtype"], b["block"]) in need]
    seconds = 0.0 if case["warm_disk_cache"] else sum(b["compile_s"] for b in used)
    return {"binaries": len(need), "compile_s": seconds, "cubin_bytes": sum(b["cubin_bytes"] for b in used)}
    # END SOLUTION


# %% tags=["grader-check"]
ex.check_readiness("compile_cost", cold_start)


# %% [markdown]
# ## 8. The fallback switch and a named owner (lesson 06)
#
# An incident report: `{"kind": "wrong_results" | "crash" | "slowdown", "arch", "ratio", "band"}` (`ratio`:
# fast path / baseline time on that architecture, `band`: the noise band). Return `{"action", "switch",
# "owner"}`: `action` is `"switch"` (turn the fast path off now, with no code change), `"retune"` (a slowdown
# beyond the noise band: record a sweep and raise that architecture's row threshold) or `"none"` (within the
# noise); `switch` is how to turn it off (the kit's environment variable or function); `owner` is the person who
# answers (an `@handle` or an e-mail address; the same for every incident).

# %%
def respond(incident) -> dict:
    # BEGIN SOLUTION
    if incident["kind"] in ("wrong_results", "crash"):
        action = "switch"
    else:
        action = "retune" if outcome(incident["ratio"], incident["band"]) == "loss" else "none"
    return {"action": action, "switch": "FASTPATH_FORCE_FALLBACK=1", "owner": "@rmsnorm-fastpath-maintainer"}
    # END SOLUTION


# %% tags=["grader-check"]
ex.check_readiness("fallback_and_owner", respond)


# %% [markdown]
# ## 9. The dispatch-boundary plot (lesson 05)
#
# `results` lists cases `{"case_id", "rows", "route", "baseline_us", "candidate_us", "gpu_measurement"}` and
# `threshold` is the row threshold. Return the plot's points, `{"triton": [(rows, speedup), ...], "fallback":
# [...]}`, with `speedup = baseline_us / candidate_us`. A point goes on the side of the route the call *took*
# (a case above the threshold can still fall back), and only GPU measurements are drawn.

# %%
def plot_points(results, threshold) -> dict:
    # BEGIN SOLUTION
    sides = {"triton": [], "fallback": []}
    for r in results:
        if r["gpu_measurement"]:
            sides[r["route"]].append((r["rows"], r["baseline_us"] / r["candidate_us"]))
    return sides
    # END SOLUTION


# %% tags=["grader-check"]
ex.check_readiness("boundary_plot", plot_points)


# %% [markdown]
# ## 10. The mechanism, in bytes (lessons 02 and 05)
#
# `case` is `{"rows", "cols", "dtype", "weight", "pass", "median_us", "copy_gbps"}`. Return `{"bytes", "gbps",
# "copy_fraction"}`: the minimum bytes the call moves (each input read once, each output written once: a forward
# reads x and the weight and writes y; a backward also reads dy, x and the weight and writes dx and dw, so it moves
# the forward's bytes plus three activations and two weights), the achieved GB/s (`1e9` bytes per second), and
# that as a fraction of the measured copy bandwidth.

# %%
def mechanism(case) -> dict:
    # BEGIN SOLUTION
    size = {"float16": 2, "bfloat16": 2, "float32": 4}[case["dtype"]]
    act = case["rows"] * case["cols"] * size
    w = case["cols"] * size if case["weight"] else 0
    moved = 2 * act + w if case["pass"] == "forward" else 5 * act + 3 * w
    gbps = moved / (case["median_us"] * 1e-6) / 1e9
    return {"bytes": moved, "gbps": gbps, "copy_fraction": gbps / case["copy_gbps"]}
    # END SOLUTION


# %% tags=["grader-check"]
ex.check_readiness("mechanism", mechanism)


# %% [markdown]
# ## 11. An intentional contract change, with its migration evidence (lesson 07)
#
# A proposal changes the default `eps` (today `F.rms_norm`'s: the machine epsilon of the compute dtype, fp32's
# `2**-23` for fp16/bf16/fp32 inputs and fp64's `2**-52` for fp64) to `change["default_eps"]`. `calls` lists the
# callers: `{"id", "dtype", "eps"}` (`eps` is `None` where the caller relies on the default). Return
# `{"own_commit", "affected", "pin", "justification"}`: whether the change goes in a commit of its own (apart from
# the fast path), the ids of the callers whose output changes, for each of them the `eps` to pass to keep today's
# output, and a justification of a sentence or two that names the new default.

# %%
def migration(change, calls) -> dict:
    # BEGIN SOLUTION
    new = change["default_eps"]
    old = {c["id"]: 2.0 ** -52 if c["dtype"] == "float64" else 2.0 ** -23 for c in calls}
    pin = {c["id"]: old[c["id"]] for c in calls if c["eps"] is None and old[c["id"]] != new}
    why = (f"The default eps becomes {new!r} to match the checkpoints' training setting; this changes the output "
           f"of every listed caller that relies on the default, and passing the pinned eps keeps it unchanged.")
    return {"own_commit": True, "affected": sorted(pin), "pin": pin, "justification": why}
    # END SOLUTION


# %% tags=["grader-check"]
ex.check_readiness("contract_change", migration)


# %% [markdown]
# ## 12. Readability is part of the performance work (lesson 07)
#
# Two versions of a change, `{"a": {...}, "b": {...}}`, each `{"median_us", "spread_us", "readable"}`: one is
# readable (named constants, one job per function), the other is not. Return `"a"` or `"b"`: the less readable
# version is worth it only where it **wins** against the readable one beyond the noise band (`outcome`, with the
# larger of the two relative spreads as the band); otherwise keep the readable one.

# %%
def choose(pair) -> str:
    # BEGIN SOLUTION
    r, u = ("a", "b") if pair["a"]["readable"] else ("b", "a")
    band = max(pair[k]["spread_us"] / pair[k]["median_us"] for k in "ab")
    return u if outcome(pair[u]["median_us"] / pair[r]["median_us"], band) == "win" else r
    # END SOLUTION


# %% tags=["grader-check"]
ex.check_readiness("readability", choose)


# %% [markdown]
# ## 13. Answer a review with evidence, not a defence (lesson 07)
#
# A reviewer's `comment` on the results `results` (`[{"case_id", "baseline_us", "candidate_us", "band",
# "compiled_us"}, ...]`; `compiled_us` is `None` where `torch.compile` was not measured). Return one action:
#
# * `{"kind": "doubt_win", "case_id"}`: `"show_raw_samples"` when the data does show a win there, else
#   `"reclassify"` (the note was wrong; change it);
# * `{"kind": "missing_case", "shape"}` (`"ROWSxCOLS"`, the part of a case id after its first `_`):
#   `"point_to_case"` when a case of that shape was measured, else `"add_case"` (measure it);
# * `{"kind": "why_not_compile"}`: `"show_compiled"` when every case has `compiled_us`, else `"measure_compiled"`.

# %%
def answer_review(comment, results) -> str:
    # BEGIN SOLUTION
    if comment["kind"] == "doubt_win":
        r = next(r for r in results if r["case_id"] == comment["case_id"])
        won = outcome(r["candidate_us"] / r["baseline_us"], r["band"]) == "win"
        return "show_raw_samples" if won else "reclassify"
    if comment["kind"] == "missing_case":
        shapes = {r["case_id"].split("_", 1)[1] for r in results}
        return "point_to_case" if comment["shape"] in shapes else "add_case"
    return "show_compiled" if all(r["compiled_us"] is not None for r in results) else "measure_compiled"
    # END SOLUTION


# %% tags=["grader-check"]
ex.check_readiness("review_response", answer_review)
