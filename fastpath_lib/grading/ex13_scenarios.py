"""Exercise 13's scenarios, drawn afresh at every check, and the grader's rule for each (the expected answers).

Every scenario is plain data (dicts, lists, numbers, strings), so a learner's answer is a function of the data the
check hands it: a list of answers recorded for the examples the notebook shows does not pass. The rules are the
lessons' own: the predicate's conditions (lesson 03), the preserved modes and the kind of test that catches a fault
(lessons 01 and 04), CI against scheduled GPU runs, the replay, compile cost, the fallback switch and the "why not"
question (lesson 06), the boundary plot and the mechanism in bytes (lessons 02 and 05), and three review habits
(lesson 07): a contract change of its own, readability that a speed-up must pay for, evidence rather than defence.

>>> calls = draw("route_conditions", random.Random(0))
>>> all(isinstance(expected("route_conditions", c), frozenset) for c in calls)
True
"""

from __future__ import annotations

import math
import random

from fastpath_lib.grading.vocabulary import LOSS, WIN, outcome
from fastpath_lib.rmsnorm.limits import INTERPRETER_MIN_ROWS, MAX_COLS, MIN_CAPABILITY

__all__ = ["draw", "expected", "ELEMENT_BYTES", "TEST_KINDS", "FAULTS", "ACTIONS", "SWITCHES", "old_default_eps"]

ELEMENT_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}
_FAST_DTYPES = ("float16", "bfloat16", "float32")
#: The kinds of test lesson 04 teaches, plus the scheduled GPU sweep of lesson 06.
TEST_KINDS = ("fake", "opcheck", "compile", "guard_band", "sanitizer", "non_finite", "sweep")
#: fault -> what the check shows the learner (the notebook prints this table).
FAULTS = {
    "fake_strides": "register_fake returns contiguous strides where the real op keeps the input's",
    "fake_dtype": "register_fake returns float32 for a bfloat16 input; the real op returns bfloat16",
    "undeclared_mutation": "the custom op writes into its weight argument; its schema declares no mutation",
    "compiled_guard": "results differ only under torch.compile(fullgraph=True): a guard on the row count is wrong",
    "graph_break": "torch.compile(fullgraph=True) raises: the dispatch reads an environment variable per call",
    "write_past_end": "the last program stores one row past the output's end (a mask uses <= instead of <)",
    "read_past_end": "loads of the last columns are not masked: they read past the row's end",
    "smem_race": "two warps reduce through shared memory without a barrier",
    "uninitialised": "the backward reads a scratch buffer from torch.empty before any program writes it",
    "nan_zeroed": "a NaN in the input comes out as 0 in its row (the sum of squares skips NaN)",
    "inf_row": "a row holding +inf gives finite output where F.rms_norm gives NaN",
    "slower_new_arch": "on a newly released GPU architecture the fast path is 12 % slower at 2048 rows",
    "threshold_drift": "after a driver update the row from which the kernel never loses moved from 512 to 2048",
}
#: fault -> (kinds of test that catch it when the tests run on a CPU, ... on CUDA); the grader's answer.
_CATCHES = {
    "fake_strides": ({"fake", "opcheck"}, {"fake", "opcheck"}),
    "fake_dtype": ({"fake", "opcheck"}, {"fake", "opcheck"}),
    "undeclared_mutation": ({"opcheck"}, {"opcheck"}),
    "compiled_guard": ({"compile"}, {"compile"}),
    "graph_break": ({"compile"}, {"compile"}),
    "write_past_end": ({"guard_band"}, {"guard_band", "sanitizer"}),
    "read_past_end": ({"guard_band"}, {"guard_band", "sanitizer"}),
    "smem_race": (set(), {"sanitizer"}),
    "uninitialised": (set(), {"sanitizer"}),
    "nan_zeroed": ({"non_finite"}, {"non_finite"}),
    "inf_row": ({"non_finite"}, {"non_finite"}),
    "slower_new_arch": (set(), {"sweep"}),
    "threshold_drift": (set(), {"sweep"}),
}
_PERF = ("slower_new_arch", "threshold_drift")
#: What a reviewer's comment can be answered with (lesson 07: more evidence, not a defence of the work done).
ACTIONS = ("show_raw_samples", "reclassify", "add_case", "point_to_case", "show_compiled", "measure_compiled")
#: The kit's way off the fast path, without a code change (lesson 06).
SWITCHES = ("FASTPATH_FORCE_FALLBACK=1", "force_fallback()", "fastpath_lib.force_fallback()")


def old_default_eps(dtype: str) -> float:
    """``F.rms_norm``'s default eps: the machine epsilon of its compute dtype (fp32 for fp16/bf16/fp32)."""
    return 2.0 ** -52 if dtype == "float64" else 2.0 ** -23


def _route_call(rng: random.Random, kind: str, verified: bool | None = None) -> dict:
    cuda = kind in ("sm75", "capture", "cuda") or (kind == "any" and rng.random() < 0.6)
    call = {"device": "cuda" if cuda else "cpu", "interpreter": False if cuda else rng.random() < 0.7,
            "capability": None, "capturing": kind == "capture" or (cuda and kind == "any" and rng.random() < 0.2),
            "forced": kind == "any" and rng.random() < 0.15,
            "dtype": rng.choice(_FAST_DTYPES) if kind != "any" or rng.random() < 0.8 else "float64",
            "rows": rng.choice((1, 7, 8, 64, 512, 2048, 4096, 8192)),
            "cols": rng.choice((64, 1000, 4096, MAX_COLS, MAX_COLS + 1, 2 * MAX_COLS))}
    if cuda:
        call["capability"] = [7, 5] if kind == "sm75" else rng.choice(([7, 0], [7, 5], [8, 0], [8, 6], [9, 0], [10, 0]))
        call["min_rows"] = rng.choice((256, 512, 1024))
    else:
        call["min_rows"] = INTERPRETER_MIN_ROWS
    if kind in ("sm75", "capture"):
        call["rows"], call["cols"] = rng.choice((2048, 4096, 8192)), rng.choice((1000, 4096))
    # capture.json as the evidence run's capture step writes it: the architectures whose capture test ran
    tested = rng.sample(("sm_80", "sm_86", "sm_90", "sm_100"), rng.randint(0, 3))
    call["capture"] = {a: {"passed": rng.random() < 0.6, "source": f"results/{a}-run"} for a in tested}
    if verified is not None and call["capability"]:  # this call's architecture: a recorded pass, or a failed test
        arch = f"sm_{call['capability'][0]}{call['capability'][1]}"
        call["capture"][arch] = {"passed": verified, "source": f"results/{arch}-run"}
    return call


def _route_expected(c: dict) -> frozenset:
    cuda = c["device"] == "cuda"
    arch = f"sm_{c['capability'][0]}{c['capability'][1]}" if cuda and c["capability"] else None
    verified = arch is not None and c["capture"].get(arch, {}).get("passed") is True  # lesson 06: capture.json
    failed = {"forced": c["forced"], "cuda_graph_capture": c["capturing"] and not verified,
              "device": cuda == c["interpreter"],
              "architecture": cuda and not c["interpreter"] and tuple(c["capability"]) < MIN_CAPABILITY,
              "dtype": c["dtype"] not in _FAST_DTYPES, "cols": c["cols"] > MAX_COLS,
              "min_rows": c["rows"] < c["min_rows"]}
    return frozenset(k for k, v in failed.items() if v)


def _values(rng, n=6):
    return [round(rng.uniform(-3, 3), 6) for _ in range(n)]


def _mode_record(rng: random.Random, mode: str, keep: bool, trap: str) -> dict:
    if mode == "deterministic":
        a = _values(rng)
        b = list(a)
        if not keep:
            i = rng.randrange(len(b))
            b[i] = b[i] + (1e-7 if trap == "tiny" else 1e-3)
        return {"mode": mode, "run_a": a, "run_b": b}
    if mode == "autocast":
        ref = rng.choice(("float32", "bfloat16"))
        fast = ref if keep else ({"float32": "bfloat16", "bfloat16": "float32"}[ref])
        return {"mode": mode, "input_dtype": rng.choice(("float32", "bfloat16")), "autocast_dtype": "bfloat16",
                "reference_dtype": ref, "fast_path_dtype": fast}
    atol, rtol = 1e-5, 1.3e-6
    eager = _values(rng)
    comp = [e + rng.uniform(-0.5, 0.5) * atol for e in eager]
    breaks = 0
    if not keep and trap == "break":
        breaks = rng.randint(1, 3)
    elif not keep:
        i = rng.randrange(len(comp))
        comp[i] = eager[i] + 50 * atol
    return {"mode": "compile", "eager": eager, "compiled": comp, "atol": atol, "rtol": rtol, "graph_breaks": breaks}


def _mode_expected(r: dict) -> bool:
    if r["mode"] == "deterministic":
        return r["run_a"] == r["run_b"]
    if r["mode"] == "autocast":
        return r["reference_dtype"] == r["fast_path_dtype"]
    close = all(abs(c - e) <= r["atol"] + r["rtol"] * abs(e) for c, e in zip(r["compiled"], r["eager"]))
    return close and r["graph_breaks"] == 0


def _fault_item(rng: random.Random, fault: str, i: int) -> dict:
    device = "cuda" if not _CATCHES[fault][0] else rng.choice(("cpu", "cuda"))
    return {"id": f"f{i:02d}", "fault": fault, "description": FAULTS[fault], "device": device}


def _fault_expected(item: dict) -> tuple[frozenset, frozenset]:
    cpu, cuda = _CATCHES[item["fault"]]
    kinds = frozenset(cpu if item["device"] == "cpu" else cuda)
    when = {"scheduled"} if item["fault"] in _PERF else {"ci"}
    if kinds == {"sanitizer"}:
        when = {"ci", "scheduled"}  # a GPU runner: gating, or on the GPU schedule
    return kinds, frozenset(when)


def _baseline_table(rng: random.Random, gpu: bool, wins: int) -> dict:
    rows = []
    for i in range(rng.randint(5, 7)):
        band = round(rng.uniform(0.02, 0.08), 3)
        base = round(rng.uniform(10, 400), 2)
        comp = round(base * rng.uniform(0.6, 1.0), 2)
        ratio = rng.uniform(0.5, 1 - band - 0.05) if i < wins else rng.uniform(1 - band / 2, 1.3)
        rows.append({"case_id": f"b{i + 1:02d}_{rng.choice((512, 2048, 8192))}x{rng.choice((1024, 4096))}",
                     "baseline_us": base, "compiled_us": comp, "fast_us": round(comp * ratio, 3), "band": band})
    rng.shuffle(rows)
    return {"gpu_measurement": gpu, "cases": rows}


def _baseline_expected(t: dict) -> dict:
    if not t["gpu_measurement"]:
        return {"beats_compiled": frozenset(), "verdict": "no claim"}
    beats = frozenset(r["case_id"] for r in t["cases"]
                      if outcome(r["fast_us"] / r["compiled_us"], r["band"]) == WIN
                      and outcome(r["fast_us"] / r["baseline_us"], r["band"]) == WIN)
    return {"beats_compiled": beats, "verdict": "fast path" if beats else "compile it"}


def _trace(rng: random.Random) -> list:
    out = []
    for phase, rows, count in (("prefill", rng.choice((256, 512, 2048)), 2 * rng.randint(16, 40) + 1),
                               ("decode", 1, (2 * rng.randint(16, 40) + 1) * rng.randint(32, 200)),
                               ("prefill", rng.choice((4096, 8192)), rng.randint(3, 80))):
        base = round(rows * rng.uniform(0.002, 0.01) + 4, 3)
        measured = rng.random() < 0.75
        route = "fallback" if rows < 1024 else "triton"
        fast = round(base + rng.uniform(0.3, 1.5) if route == "fallback" else base * rng.uniform(0.5, 0.9), 3)
        out.append({"phase": phase, "rows": rows, "count": count, "route": route, "baseline_us": base,
                    "fast_us": fast if measured else None})
    out[1]["fast_us"] = out[1]["fast_us"] or round(out[1]["baseline_us"] + 0.7, 3)  # decode is always measured
    return out


def _trace_expected(trace: list) -> dict:
    meas = [r for r in trace if r["fast_us"] is not None]
    b = sum(r["count"] * r["baseline_us"] for r in meas)
    f = sum(r["count"] * r["fast_us"] for r in meas)
    return {"baseline_total_us": b, "fast_total_us": f, "saved_share": (b - f) / b,
            "unmeasured_calls": sum(r["count"] for r in trace if r["fast_us"] is None)}


def _block(cols: int) -> int:
    return 1 << max(0, math.ceil(math.log2(cols)))


def _compile_case(rng: random.Random) -> dict:
    dtypes = rng.sample(_FAST_DTYPES, 2)
    calls = [{"pass": rng.choice(("forward", "backward")), "dtype": rng.choice(dtypes),
              "cols": rng.choice((768, 1000, 1024, 3000, 4096, 5120))} for _ in range(rng.randint(4, 7))]
    table = [{"pass": p, "dtype": d, "block": b, "compile_s": round(rng.uniform(0.05, 0.9), 3),
              "cubin_bytes": rng.randint(20, 90) * 1024}
             for p in ("forward", "backward") for d in _FAST_DTYPES for b in (1024, 2048, 4096, 8192)]
    return {"calls": calls, "binaries": table, "warm_disk_cache": rng.random() < 0.35}


def _compile_expected(case: dict) -> dict:
    need = set()
    for c in case["calls"]:
        need.add(("forward", c["dtype"], _block(c["cols"])))
        if c["pass"] == "backward":
            need.add(("backward", c["dtype"], _block(c["cols"])))
    rows = [r for r in case["binaries"] if (r["pass"], r["dtype"], r["block"]) in need]
    return {"binaries": len(need), "compile_s": 0.0 if case["warm_disk_cache"] else sum(r["compile_s"] for r in rows),
            "cubin_bytes": sum(r["cubin_bytes"] for r in rows)}


def _incident(rng: random.Random, kind: str) -> dict:
    band = round(rng.uniform(0.02, 0.08), 3)
    ratio = {LOSS: rng.uniform(1 + band + 0.05, 1.6), "noise": rng.uniform(1, 1 + band * 0.6)}.get(kind, 1.0)
    return {"kind": "slowdown" if kind in (LOSS, "noise") else kind,
            "arch": rng.choice(("sm_80", "sm_90", "sm_100")), "ratio": round(ratio, 4), "band": band}


def _incident_expected(inc: dict) -> str:
    if inc["kind"] in ("wrong_results", "crash"):
        return "switch"
    return "retune" if outcome(inc["ratio"], inc["band"]) == LOSS else "none"


def _plot_case(rng: random.Random) -> dict:
    thr = rng.choice((256, 512, 1024))
    rows = []
    for i in range(rng.randint(8, 11)):
        r = rng.choice((1, 16, 128, thr // 2, thr, 2 * thr, 4096, 8192))
        route = "triton" if r >= thr else "fallback"
        if route == "triton" and rng.random() < 0.25:
            route = "fallback"  # eligible by rows, out by another condition (a transposed input)
        base = round(r * 0.01 + rng.uniform(4, 8), 3)
        rows.append({"case_id": f"p{i + 1:02d}_{r}x4096", "rows": r, "route": route, "baseline_us": base,
                     "candidate_us": round(base * rng.uniform(0.6, 1.2), 3),
                     "gpu_measurement": rng.random() < 0.8})
    return {"results": rows, "threshold": thr}


def _plot_expected(case: dict) -> dict:
    out: dict = {"triton": set(), "fallback": set()}
    for r in case["results"]:
        if r["gpu_measurement"]:
            out[r["route"]].add((r["rows"], round(r["baseline_us"] / r["candidate_us"], 3)))
    return out


def _mechanism_case(rng: random.Random) -> dict:
    return {"rows": rng.choice((1000, 2048, 4096, 8192)), "cols": rng.choice((1024, 1000, 4096, 5120)),
            "dtype": rng.choice(_FAST_DTYPES), "weight": rng.random() < 0.7,
            "pass": rng.choice(("forward", "backward")), "median_us": round(rng.uniform(8, 400), 3),
            "copy_gbps": rng.choice((1500.0, 2039.0, 3350.0))}


def _mechanism_expected(c: dict) -> dict:
    es = ELEMENT_BYTES[c["dtype"]]
    act, w = c["rows"] * c["cols"] * es, c["cols"] * es if c["weight"] else 0
    total = 2 * act + w if c["pass"] == "forward" else 5 * act + 3 * w
    gbps = total / (c["median_us"] * 1e-6) / 1e9
    return {"bytes": total, "gbps": gbps, "copy_fraction": gbps / c["copy_gbps"]}


def _contract_case(rng: random.Random, new: float) -> dict:
    calls = [{"id": f"call{i + 1}", "dtype": rng.choice(_FAST_DTYPES + ("float64",)),
              "eps": None if rng.random() < 0.6 else rng.choice((1e-6, 1e-5))} for i in range(rng.randint(6, 9))]
    calls[0].update(dtype="float64", eps=None)  # one caller whose default differs from fp32's,
    calls[1].update(dtype=rng.choice(_FAST_DTYPES), eps=None)  # one whose default is fp32's
    rng.shuffle(calls)
    return {"change": {"default_eps": new}, "calls": calls}


def _contract_expected(case: dict) -> dict:
    new = case["change"]["default_eps"]
    aff = {c["id"]: old_default_eps(c["dtype"]) for c in case["calls"]
           if c["eps"] is None and old_default_eps(c["dtype"]) != new}
    return {"affected": frozenset(aff), "pin": aff}


def _pair(rng: random.Random, wins: bool, answer: str) -> dict:
    """A readable and an unreadable variant; ``answer`` (``"a"`` or ``"b"``) is where the expected one sits."""
    band = rng.uniform(0.02, 0.06)
    med = round(rng.uniform(20, 300), 2)
    # not a win: the unreadable one is faster, but within the noise
    ratio = rng.uniform(0.5, 1 - band - 0.04) if wins else rng.uniform(1 - band * 0.6, 0.999)
    readable = {"median_us": med, "spread_us": round(med * band, 3), "readable": True}
    other = {"median_us": round(med * ratio, 3), "spread_us": round(med * ratio * band * 0.8, 3), "readable": False}
    chosen, rest = (other, readable) if wins else (readable, other)
    return {"a": chosen, "b": rest} if answer == "a" else {"a": rest, "b": chosen}


def _pair_expected(p: dict) -> str:
    r, u = ("a", "b") if p["a"]["readable"] else ("b", "a")
    band = max(p[k]["spread_us"] / p[k]["median_us"] for k in "ab")
    return u if outcome(p[u]["median_us"] / p[r]["median_us"], band) == WIN else r


def _review_case(rng: random.Random, kind: str, first: bool) -> dict:
    """One comment on five results; ``first`` picks which of the kind's two answers is right (a real win or not,
    a case the matrix has or not, compiled timings there or not)."""
    res, shapes = [], rng.sample([(r, c) for r in (1024, 4096) for c in (2048, 4096)], 4)
    for i in range(5):
        b = round(rng.uniform(20, 300), 2)
        band = round(rng.uniform(0.02, 0.06), 3)
        ratio = rng.choice((rng.uniform(0.5, 1 - band - 0.05), rng.uniform(1 - band / 2, 1 + band / 2)))
        rows, cols = shapes[i % 4]
        res.append({"case_id": f"r{i + 1:02d}_{rows}x{cols}", "baseline_us": b, "candidate_us": round(b * ratio, 3),
                    "band": band, "compiled_us": round(b * rng.uniform(0.7, 1.1), 3)})
    comment = {"kind": kind}
    if kind == "doubt_win":
        doubted = rng.choice(res)
        doubted["candidate_us"] = round(doubted["baseline_us"] * (
            rng.uniform(0.5, 1 - doubted["band"] - 0.05) if first else rng.uniform(
                1 - doubted["band"] / 2, 1 + doubted["band"] / 2)), 3)
        comment["case_id"] = doubted["case_id"]
    elif kind == "missing_case":
        comment["shape"] = rng.choice([r["case_id"].split("_")[1] for r in res]) if first else rng.choice(
            (f"8x{MAX_COLS}", "1x4096"))
    elif first:
        for r in res:
            r["compiled_us"] = None
    return {"comment": comment, "results": res}


def _review_expected(case: dict) -> str:
    com, res = case["comment"], case["results"]
    if com["kind"] == "doubt_win":
        r = next(r for r in res if r["case_id"] == com["case_id"])
        return "show_raw_samples" if outcome(r["candidate_us"] / r["baseline_us"], r["band"]) == WIN \
            else "reclassify"
    if com["kind"] == "missing_case":
        return "point_to_case" if any(r["case_id"].endswith("_" + com["shape"]) for r in res) else "add_case"
    return "measure_compiled" if any(r["compiled_us"] is None for r in res) else "show_compiled"


def draw(part: str, rng: random.Random) -> list:
    """The scenarios the check hands the learner's function for ``part``, drawn with ``rng``."""
    if part == "route_conditions":  # captured calls on an architecture whose capture test passed, and failed
        kinds = [("sm75", None)] * 3 + [("capture", True), ("capture", False), ("capture", rng.random() < 0.5)]
        kinds += [("cuda", None)] * 2 + [("any", None)] * 8
        return [_route_call(rng, *k) for k in rng.sample(kinds, len(kinds))]
    if part == "modes_preserved":
        spec = [(m, keep, trap) for m in ("deterministic", "autocast", "compile") for keep, trap in
                ((True, ""), (False, "tiny"), (False, "break"), (True, ""))]
        return [_mode_record(rng, *s) for s in rng.sample(spec, len(spec))]
    if part in ("test_kinds", "ci_or_schedule"):
        faults = list(FAULTS) + rng.sample(list(FAULTS), 4)
        return [_fault_item(rng, f, i) for i, f in enumerate(rng.sample(faults, len(faults)))]
    if part == "why_not_baseline":
        return [_baseline_table(rng, g, w) for g, w in rng.sample([(True, 0), (True, 2), (True, 3), (False, 3)], 4)]
    if part == "workload_replay":
        return [_trace(rng) for _ in range(3)]
    if part == "compile_cost":
        cases = [_compile_case(rng) for _ in range(4)]
        cases[0]["warm_disk_cache"], cases[1]["warm_disk_cache"] = True, False
        return cases
    if part == "fallback_and_owner":
        kinds = ["wrong_results", "crash", LOSS, LOSS, "noise", "noise"]
        return [_incident(rng, k) for k in rng.sample(kinds, len(kinds))]
    if part == "boundary_plot":
        return [_plot_case(rng) for _ in range(3)]
    if part == "mechanism":
        return [_mechanism_case(rng) for _ in range(6)]
    if part == "contract_change":
        news = [rng.choice((1e-6, 1e-5)), 2.0 ** -23, rng.choice((1e-6, 1e-5, 2.0 ** -23))]
        return [_contract_case(rng, n) for n in rng.sample(news, 3)]
    if part == "readability":  # each answer, "a" and "b", for a real win and for one within the noise
        pairs = [(wins, answer) for wins in (True, False) for answer in ("a", "b", rng.choice("ab"))]
        return [_pair(rng, *p) for p in rng.sample(pairs, len(pairs))]
    if part == "review_response":  # each of the six answers occurs
        kinds = [(k, first) for k in ("doubt_win", "missing_case") for first in (True, False, rng.random() < 0.5)]
        kinds += [("why_not_compile", True), ("why_not_compile", False)]
        return [_review_case(rng, *k) for k in rng.sample(kinds, len(kinds))]
    raise KeyError(f"exercise 13 has no part {part!r}")


_EXPECTED = {"route_conditions": _route_expected, "modes_preserved": _mode_expected, "test_kinds": _fault_expected,
             "ci_or_schedule": _fault_expected, "why_not_baseline": _baseline_expected,
             "workload_replay": _trace_expected, "compile_cost": _compile_expected,
             "fallback_and_owner": _incident_expected, "boundary_plot": _plot_expected,
             "mechanism": _mechanism_expected, "contract_change": _contract_expected, "readability": _pair_expected,
             "review_response": _review_expected}


def expected(part: str, scenario):
    """The grader's answer for one scenario of ``part``."""
    return _EXPECTED[part](scenario)
