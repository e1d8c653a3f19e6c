"""Exercise 13's scenarios, drawn afresh at every check, and the grader's rule for each (the expected answers).

Each scenario is an artefact of the kit's own shape, not a table of phrases: a call with the kit's ``capture.json``
(lesson 06), a pytest JUnit report with the claims of a PR note's test section (lessons 04 and 06), a results table in
``results.csv``'s schema (lessons 02, 05 and 06), review comments on a PR note with its case table (lesson 07), the
workload replay and build-cost tables of lesson 06, and a proposed change of the default ``eps`` with its callers
(lesson 07). Every part whose answers come from a small set draws its scenarios so that each answer occurs in every
draw, by construction (part 1: a call that fails each condition alone, one that fails none): no constant answer
passes, nor one that ignores a condition.

>>> calls = draw("route_conditions", random.Random(0))
>>> all(isinstance(expected("route_conditions", c), frozenset) for c in calls)
True
"""

from __future__ import annotations

import csv
import io
import math
import random
from xml.sax.saxutils import quoteattr

from fastpath_lib.bench.schema import CSV_COLUMNS, empty_row
from fastpath_lib.grading.rules.ex13_cost import FAST_DTYPES as _FAST_DTYPES
from fastpath_lib.grading.rules.ex13_cost import build as _build
from fastpath_lib.grading.rules.ex13_cost import codeowner
from fastpath_lib.grading.rules.ex13_cost import cost_expected as _cost_expected
from fastpath_lib.grading.vocabulary import WIN, outcome
from fastpath_lib.rmsnorm.limits import INTERPRETER_MIN_ROWS, MAX_COLS, MIN_CAPABILITY

__all__ = ["draw", "expected", "ELEMENT_BYTES", "ROUTE_CONDITIONS", "VERDICTS", "ACTIONS", "SWITCHES",
           "old_default_eps", "model_bytes", "achieved_gbps", "codeowner"]

ELEMENT_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}
#: The predicate's conditions a call can fail (part 1), in ``explain()``'s order.
ROUTE_CONDITIONS = ("forced", "cuda_graph_capture", "device", "architecture", "dtype", "cols", "min_rows")
#: What a test report says of one claim (part 2).
VERDICTS = ("supported", "contradicted", "untested")
#: What a reviewer's comment is answered with (lesson 07: more evidence, not a defence of the work done).
ACTIONS = ("show_raw_samples", "reclassify", "point_to_case", "add_case", "show_compiled", "measure_compiled",
           "keep_unrolled", "keep_readable")
#: The kit's switch off the fast path (lesson 06): the environment variable, which needs no code change, or the
#: context manager.
SWITCHES = ("FASTPATH_FORCE_FALLBACK=1", "force_fallback()", "fastpath_lib.force_fallback()")


def old_default_eps(dtype: str) -> float:
    """``F.rms_norm``'s default eps: the machine epsilon of its compute dtype (fp32 for fp16/bf16/fp32)."""
    return 2.0 ** -52 if dtype == "float64" else 2.0 ** -23


def model_bytes(rows: int, cols: int, dtype: str, pass_: str) -> int:
    """The bytes model of lesson 05 with a weight (``bench.timing.bytes_moved``; a test ties the two together)."""
    act, w = rows * cols * ELEMENT_BYTES[dtype], cols * ELEMENT_BYTES[dtype]
    return 2 * act + w if pass_ == "forward" else 5 * act + 3 * w


# ---- 1. route_conditions: a call and the kit's capture.json ------------------------------------------------------

_CAPTURE_ABOUT = ("CUDA-graph capture test per CUDA architecture (passed or not), each with the results folder it came "
                  "from. Written by `python -m fastpath_lib capture RESULTS_DIR` from the evidence run's capture step; "
                  "read by the predicate at import: a captured call takes the fast path only where the test passed.")
_DEVICES = {"sm_80": "NVIDIA A100-SXM4-80GB", "sm_86": "NVIDIA RTX A6000", "sm_90": "NVIDIA H100 80GB HBM3",
            "sm_100": "NVIDIA B200"}


def _capture_entry(rng: random.Random, arch: str, passed: bool) -> dict:
    why = ("24 captures replayed to the reference (both routes, forward and backward)" if passed else
           f"{rng.randint(1, 4)} of 24 captures failed: bf16 forward+backward: replay 1 dx: max abs error")
    return {"passed": passed, "source": f"results/{arch}-{rng.randint(2025, 2026)}-{rng.randint(1, 12):02d}",
            "why": why, "device_name": _DEVICES.get(arch, "NVIDIA GPU"), "cases": 24,
            "git_commit": "".join(rng.choice("0123456789abcdef") for _ in range(12)), "measured": "2026-11-02T10:14"}


def _route_call(rng: random.Random, kind: str, verified: bool | None = None) -> dict:
    cuda = kind in ("sm75", "capture", "cuda") or (kind == "any" and rng.random() < 0.6)
    call = {"device": "cuda" if cuda else "cpu", "interpreter": False if cuda else rng.random() < 0.7,
            "capability": None, "capturing": kind == "capture" or (cuda and kind == "any" and rng.random() < 0.3),
            "forced": kind == "any" and rng.random() < 0.15,
            "dtype": rng.choice(_FAST_DTYPES) if kind != "any" or rng.random() < 0.8 else "float64",
            "rows": rng.choice((1, 7, 8, 64, 512, 2048, 4096, 8192)),
            "cols": rng.choice((64, 1000, 4096, MAX_COLS, MAX_COLS + 1, 2 * MAX_COLS))}
    if cuda:
        archs = ([8, 0], [8, 6], [9, 0], [10, 0]) + (() if kind == "capture" else ([7, 0], [7, 5]))
        call["capability"] = [7, 5] if kind == "sm75" else rng.choice(archs)
        call["min_rows"] = rng.choice((256, 512, 1024))
    else:
        call["min_rows"] = INTERPRETER_MIN_ROWS
    if kind in ("sm75", "capture"):
        call["rows"], call["cols"] = rng.choice((2048, 4096, 8192)), rng.choice((1000, 4096))
    # capture.json as `python -m fastpath_lib capture` writes it: the architectures whose capture test ran
    capture = {"_about": _CAPTURE_ABOUT}
    for arch in rng.sample(tuple(_DEVICES), rng.randint(0, 3)):
        capture[arch] = _capture_entry(rng, arch, rng.random() < 0.6)
    if kind == "capture" and call["capability"]:  # this call's architecture: a recorded pass, a failed test, none
        arch = f"sm_{call['capability'][0]}{call['capability'][1]}"
        capture.pop(arch, None)
        if verified is not None:
            capture[arch] = _capture_entry(rng, arch, verified)
    return {"call": call, "capture": capture}


def _failing_only(rng: random.Random, cond: str | None) -> dict:
    """A call that fails the condition ``cond`` and no other (``None``: a call that takes the fast path)."""
    kind = {"cuda_graph_capture": "capture", "architecture": "sm75"}.get(cond, rng.choice(("cuda", "cpu")))
    sc = _route_call(rng, kind, verified=rng.choice((False, None)) if cond else True)
    c = sc["call"]
    c.update(interpreter=c["device"] == "cpu", rows=rng.choice([r for r in (8, 512, 2048, 8192) if r >= c["min_rows"]]),
             cols=rng.choice((64, 1000, 4096, MAX_COLS)))
    c["capability"] = rng.choice(([8, 0], [8, 6], [9, 0], [10, 0])) if kind == "cuda" else c["capability"]
    c.update({"forced": {"forced": True}, "device": {"interpreter": not c["interpreter"]},
              "dtype": {"dtype": "float64"}, "cols": {"cols": MAX_COLS + 1 + rng.randint(0, MAX_COLS)},
              "min_rows": {"rows": rng.choice([r for r in (1, 7, 64, 128) if r < c["min_rows"]])}}.get(cond, {}))
    return sc


def _route_expected(sc: dict) -> frozenset:
    c, capture = sc["call"], sc["capture"]
    cuda = c["device"] == "cuda"
    arch = f"sm_{c['capability'][0]}{c['capability'][1]}" if cuda and c["capability"] else None
    verified = arch is not None and capture.get(arch, {}).get("passed") is True  # rmsnorm.capture.load's rule
    failed = {"forced": c["forced"], "cuda_graph_capture": c["capturing"] and not verified,
              "device": cuda == c["interpreter"],
              "architecture": cuda and not c["interpreter"] and tuple(c["capability"]) < MIN_CAPABILITY,
              "dtype": c["dtype"] not in _FAST_DTYPES, "cols": c["cols"] > MAX_COLS,
              "min_rows": c["rows"] < c["min_rows"]}
    assert tuple(failed) == ROUTE_CONDITIONS
    return frozenset(k for k, v in failed.items() if v)


# ---- 2. test_report: a pytest JUnit report and the claims of a PR note's test section ----------------------------

#: (module, test name prefix, the claim it backs, GPU only)
_CLAIMS = (
    ("tests.test_boundaries", "test_boundary_point", "both routes match the float64 reference at every declared "
     "boundary point", False),
    ("tests.rmsnorm.test_contract", "test_fake_impl", "register_fake gives the real op's dtype, shape and strides",
     False),
    ("tests.rmsnorm.test_contract", "test_opcheck", "the custom op passes torch.library.opcheck", False),
    ("tests.rmsnorm.test_dispatch", "test_compiled_fullgraph", "torch.compile(fullgraph=True) matches eager across "
     "the row threshold, with no graph break", False),
    ("tests.test_boundaries", "test_non_finite", "NaN and inf inputs give F.rms_norm's NaN and inf", False),
    ("tests.test_traffic", "test_guard_band", "no read or write outside the tensors (guard bands, interpreter)", False),
    ("tests.rmsnorm.test_contract_modes", "test_deterministic", "two runs of the same call are bitwise equal", False),
    ("tests.rmsnorm.test_contract_modes", "test_autocast", "under autocast the output dtype is F.rms_norm's", False),
    ("tests.test_gpu", "test_sanitizer", "compute-sanitizer finds no out-of-bounds access, race or uninitialised "
     "read", True),
    ("tests.test_gpu", "test_cuda_graph_capture", "captured calls replay to the reference", True),
)
_PARAMS = ("float16-1x4096", "bfloat16-8x4096", "float32-1024x1000", f"bfloat16-4096x{MAX_COLS}", "float32-7x64",
           "float16-2048x4096", "cpu", "cuda", "fwd", "bwd")


def _case_xml(module: str, name: str, result: str, rng: random.Random) -> str:
    head = f'<testcase classname="{module}" name={quoteattr(name)} time="{rng.uniform(0.001, 2.5):.3f}"'
    file = module.replace(".", "/") + ".py"
    line = rng.randint(20, 400)
    body = {
        "passed": "",
        "failed": f'<failure message="AssertionError: max abs error {rng.uniform(0.01, 3):.3g} above tolerance">'
                  f'{file}:{line}: AssertionError</failure>',
        "error": f'<error message="failed on setup with &quot;RuntimeError: CUDA error: an illegal memory access was '
                 f'encountered&quot;">{file}:{line}: RuntimeError</error>',
        "skipped": f'<skipped type="pytest.skip" message="needs a CUDA device">{file}:{line}: needs a CUDA device'
                   f'</skipped>',
        "xfail": f'<skipped type="pytest.xfail" message="known: fp16 rounding differs at {MAX_COLS} columns" />',
    }[result]
    return f"{head} />" if not body else f"{head}>{body}</testcase>"


def _report_case(rng: random.Random, how: list) -> dict:
    """A report and its claims; ``how`` says how each claim's tests came out (``missing``: none ran at all)."""
    claims, cases = [], []
    for i, ((module, prefix, text, gpu), shape) in enumerate(zip(rng.sample(_CLAIMS, len(how)), how)):
        n = rng.randint(2, 4)
        results = {"supported": ["passed"] * n, "failed": ["passed"] * (n - 1) + ["failed"],
                   "error": ["passed"] * (n - 1) + ["error"], "all_skipped": ["skipped"] * n,
                   "partly_skipped": ["passed"] * (n - 1) + ["skipped"],
                   "xfail": ["passed"] * (n - 1) + ["xfail"], "missing": []}[shape]
        for k, res in enumerate(results):
            cases.append((module, f"{prefix}_{rng.choice(('matches', 'holds', 'ok', 'case'))}{k}"
                                  f"[{rng.choice(_PARAMS)}]", res))
        if shape == "supported":  # the same name in another module, failing: not this claim's test
            cases.append(("tests.upstream.test_vllm_providers", f"{prefix}_provider[{rng.choice(_PARAMS)}]", "failed"))
        claims.append({"id": f"T{i + 1}", "claim": text, "module": module, "tests": prefix,
                       "gpu_only": gpu})
    rng.shuffle(cases)
    counts = {k: sum(r == k for _, _, r in cases) for k in ("failed", "error")}
    skipped = sum(r in ("skipped", "xfail") for _, _, r in cases)
    xml = ['<?xml version="1.0" encoding="utf-8"?>', '<testsuites name="pytest tests">',
           f'<testsuite name="pytest" errors="{counts["error"]}" failures="{counts["failed"]}" skipped="{skipped}" '
           f'tests="{len(cases)}" time="{rng.uniform(30, 400):.3f}" timestamp="2026-11-02T10:{rng.randint(10, 59)}:00"'
           f' hostname="{rng.choice(("ci-cpu-runner", "gpu-runner-h100"))}">']
    xml += [_case_xml(m, n, r, rng) for m, n, r in cases]
    xml += ["</testsuite>", "</testsuites>"]
    rng.shuffle(claims)
    return {"report": "\n".join(xml) + "\n", "claims": claims}


def _report_expected(sc: dict) -> dict:
    import xml.etree.ElementTree as ET

    out = {}
    cases = ET.fromstring(sc["report"]).iter("testcase")
    cases = [(c.get("classname"), c.get("name"), {ch.tag for ch in c}) for c in cases]
    for claim in sc["claims"]:
        mine = [tags for mod, name, tags in cases if mod == claim["module"] and name.startswith(claim["tests"])]
        if any(tags & {"failure", "error"} for tags in mine):
            out[claim["id"]] = "contradicted"
        elif not mine or any("skipped" in tags for tags in mine):
            out[claim["id"]] = "untested"
        else:
            out[claim["id"]] = "supported"
    return out


# ---- 3. results_table: a results table in results.csv's schema -----------------------------------------------------

def _timed(median: float, spread: float) -> dict:
    return {"median_us": round(median, 3), "q20_us": round(median * (1 - spread / 2), 3),
            "q80_us": round(median * (1 + spread / 2), 3), "mean_us": round(median * (1 + spread / 8), 3),
            "min_us": round(median * (1 - spread), 3)}


def _results_case(rng: random.Random, i: int, role: str, gpu: bool, copy_gbps: float) -> list[dict]:
    """One case's three rows. ``role``: ``beats`` (wins against both), ``baseline_only`` (neutral against compiled),
    ``fallback`` (took the fallback, timed as a win), ``wrong_bytes`` / ``too_fast`` (a row a reviewer cannot trust,
    timed as a win against both), ``no_compiled`` (compiled skipped), ``slower`` (the fast path slower than both)."""
    pass_ = rng.choice(("forward", "backward"))
    dtype = rng.choice(_FAST_DTYPES)
    rows, cols = rng.choice((1024, 2048, 4096, 8192)), rng.choice((1000, 2048, 4096, 8192))
    nbytes = model_bytes(rows, cols, dtype, pass_)
    floor = nbytes / (copy_gbps * 1e9) * 1e6  # us at the copy bandwidth
    band = rng.uniform(0.02, 0.06)
    fast = floor * rng.uniform(1.15, 1.6)
    base = fast * rng.uniform(1.25, 1.8)
    comp = {"beats": fast * rng.uniform(1.2, 1.5), "baseline_only": fast * rng.uniform(1 - band / 3, 1 + band / 3),
            "slower": fast * rng.uniform(0.6, 0.8)}.get(role, fast * rng.uniform(1.2, 1.5))
    if role == "slower":
        base = fast * rng.uniform(0.5, 0.8)
    if role == "too_fast":  # a missing synchronisation: the timer saw the launch, not the kernel
        fast = floor * rng.uniform(0.2, 0.6)
    if role == "wrong_bytes":  # the bytes of another pass or another element size
        nbytes = model_bytes(rows, cols, dtype, "forward" if pass_ == "backward" else "backward") \
            if rng.random() < 0.5 else model_bytes(rows, cols, "float32" if dtype != "float32" else "float16", pass_)
    cid = f"{rng.choice(('prefill', 'batch', 'train'))}_{rows}x{cols}_{dtype[:4]}_{pass_[:3]}_{i}"
    route = "fallback" if role == "fallback" else "triton"
    out = []
    for provider, med in (("baseline", base), ("dispatched", fast), ("compiled", comp)):
        row = empty_row(case_id=cid, family="matrix", provider=provider, rows=rows, cols=cols, dtype=dtype,
                        layout="contiguous", pad=0, offset=0, declared_shape=f"{rows}x{cols}",
                        expected=route.replace("triton", WIN),
                        route=route, status="ok", timer="cuda_event" if gpu else "perf_counter", warmup=25, reps=100,
                        number=1, input_sets=8, bytes_moved=nbytes, copy_gbps=copy_gbps, gpu_measurement=gpu,
                        quick=False, **{"pass": pass_})
        if provider == "compiled" and role == "no_compiled":
            row.update(status="skipped", note="torch.compile failed: inductor raised on this shape")
        else:
            s = band * rng.uniform(0.6, 1.0)
            row.update(_timed(med, s))
            row["gbps"] = round(nbytes / (row["median_us"] * 1e-6) / 1e9, 2)
            row["pct_copy_bw"] = round(100 * row["gbps"] / copy_gbps, 2)
        out.append(row)
    return out


def _results_table(rng: random.Random, kind: str) -> dict:
    """``kind``: ``fast path`` (some case beats both), ``compile it`` (none does), ``no claim`` (a CPU run)."""
    copy_gbps = round(rng.choice((1550.0, 2030.0, 2900.0, 3350.0)) * rng.uniform(0.85, 0.95), 1)
    roles = ["baseline_only", "fallback", rng.choice(("wrong_bytes", "too_fast")),
             rng.choice(("no_compiled", "slower"))]
    roles += ["beats"] if kind != "compile it" else ["baseline_only"]
    roles += rng.sample(("beats", "baseline_only", "wrong_bytes", "too_fast", "slower"), 1)
    if kind == "compile it":
        roles = ["baseline_only" if r == "beats" else r for r in roles]
    rng.shuffle(roles)
    rows = [r for i, role in enumerate(roles) for r in _results_case(rng, i + 1, role, kind != "no claim", copy_gbps)]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return {"csv": buf.getvalue()}


def _num(v):
    return float(v) if v not in ("", None) else math.nan


def achieved_gbps(row: dict) -> float:
    """A results row's achieved bandwidth in GB/s: its ``bytes_moved`` per second of its ``median_us``, over ``1e9``
    (exercise 13 part 3 gives this formula; a test evaluates the exercise's text against it)."""
    return int(row["bytes_moved"]) / (_num(row["median_us"]) * 1e-6) / 1e9


def _results_expected(sc: dict) -> dict:
    rows = list(csv.DictReader(io.StringIO(sc["csv"])))
    by = {}
    for r in rows:
        by.setdefault(r["case_id"], {})[r["provider"]] = r
    gpu = all(r["gpu_measurement"] == "True" for r in rows)
    suspect, beats = set(), set()
    for cid, p in by.items():
        d = p["dispatched"]
        nbytes = int(d["bytes_moved"])
        if nbytes != model_bytes(int(d["rows"]), int(d["cols"]), d["dtype"], d["pass"]) or \
                achieved_gbps(d) > _num(d["copy_gbps"]):
            suspect.add(cid)
            continue
        if not gpu or d["route"] != "triton" or any(p[k]["status"] != "ok" for k in p):
            continue
        if all(outcome(_num(d["median_us"]) / _num(p[k]["median_us"]), _band(d, p[k])) == WIN
               for k in ("baseline", "compiled")):
            beats.add(cid)
    verdict = "no claim" if not gpu else "fast path" if beats else "compile it"
    return {"suspect": frozenset(suspect), "beats_compiled": frozenset(beats), "verdict": verdict}


def _band(a: dict, b: dict) -> float:
    return max((_num(r["q80_us"]) - _num(r["q20_us"])) / _num(r["median_us"]) for r in (a, b))


# ---- 4. review_comments: comments on a PR note, with the note's case table ----------------------------------------

def _note_cases(rng: random.Random, with_compiled: bool) -> list[dict]:
    cases = []
    for i, (rows, cols) in enumerate(rng.sample([(r, c) for r in (1024, 2048, 4096, 8192) for c in (2048, 4096)], 5)):
        b = round(rng.uniform(20, 300), 2)
        band = round(rng.uniform(0.02, 0.06), 3)
        ratio = rng.choice((rng.uniform(0.5, 1 - band - 0.05), rng.uniform(1 - band / 2, 1 + band / 2)))
        cases.append({"case_id": f"case{i + 1:02d}_{rows}x{cols}", "shape": f"{rows}x{cols}", "route": "triton",
                      "baseline_us": b, "dispatched_us": round(b * ratio, 3), "band": band,
                      "compiled_us": round(b * rng.uniform(0.7, 1.1), 3)})
    if not with_compiled:
        rng.choice(cases)["compiled_us"] = None
    return cases


def _comment(rng: random.Random, kind: str, first: bool, cases: list) -> dict:
    c = {"id": "", "author": rng.choice(("@ada", "@grace-h", "@linus-t")), "path": "PR_NOTE.md",
         "line": rng.randint(5, 80), "kind": kind}
    if kind == "doubt_win":
        doubted = rng.choice([r for r in cases if "doubted" not in r])
        doubted["doubted"] = True
        b, band = doubted["baseline_us"], doubted["band"]
        doubted["dispatched_us"] = round(b * (rng.uniform(0.5, 1 - band - 0.05) if first else
                                              rng.uniform(1 - band / 2, 1 + band / 2)), 3)
        c.update(case_id=doubted["case_id"], body=f"Is the speed-up at {doubted['case_id']} real? The spread looks "
                                                  "as large as the gain.")
    elif kind == "missing_case":
        shape = rng.choice(cases)["shape"] if first else rng.choice((f"8x{MAX_COLS}", "1x4096", "512x1000"))
        c.update(shape=shape, body=f"What happens at {shape}? I don't see it in the table.")
    elif kind == "why_not_compile":
        c["body"] = "Why not just torch.compile the reference?"
    else:
        band = rng.uniform(0.02, 0.06)
        med = round(rng.uniform(20, 300), 2)
        ratio = rng.uniform(0.5, 1 - band - 0.04) if first else rng.uniform(1 - band * 0.6, 0.999)
        c.update(variants={"readable": {"median_us": med, "spread_us": round(med * band, 3)},
                           "unrolled": {"median_us": round(med * ratio, 3),
                                        "spread_us": round(med * ratio * band * 0.8, 3)}},
                 body="The unrolled loop is hard to follow. Is it worth it against the plain version?")
    return c


def _review_case(rng: random.Random, flags: dict) -> dict:
    """One PR note's cases and comments; ``flags[kind]`` picks which of the kind's two answers each comment has."""
    cases = _note_cases(rng, flags["why_not_compile"][0])
    comments = [_comment(rng, k, f, cases) for k, fs in flags.items() for f in fs]
    for r in cases:
        r.pop("doubted", None)
    rng.shuffle(comments)
    for n, c in enumerate(comments):
        c["id"] = f"r{n + 1}"
    return {"comments": comments, "cases": cases}


def _comment_expected(c: dict, cases: list) -> str:
    if c["kind"] == "doubt_win":
        r = next(r for r in cases if r["case_id"] == c["case_id"])
        won = outcome(r["dispatched_us"] / r["baseline_us"], r["band"]) == WIN
        return "show_raw_samples" if won else "reclassify"
    if c["kind"] == "missing_case":
        return "point_to_case" if any(r["shape"] == c["shape"] for r in cases) else "add_case"
    if c["kind"] == "why_not_compile":
        return "show_compiled" if all(r["compiled_us"] is not None for r in cases) else "measure_compiled"
    v = c["variants"]
    band = max(x["spread_us"] / x["median_us"] for x in v.values())
    won = outcome(v["unrolled"]["median_us"] / v["readable"]["median_us"], band) == WIN
    return "keep_unrolled" if won else "keep_readable"


def _review_expected(sc: dict) -> dict:
    return {c["id"]: _comment_expected(c, sc["cases"]) for c in sc["comments"]}


# ---- 5. maintenance_cost: lesson 06's replay table and build costs -------------------------------------------------

def _replay(rng: random.Random, unmeasured: bool) -> list[dict]:
    """Lesson 06's replay table for one request; ``unmeasured``: its long prefill was not timed (the interpreter)."""
    out = []
    for phase, rows, count in (("prefill", rng.choice((256, 512, 2048)), 2 * rng.randint(16, 40) + 1),
                               ("decode", 1, (2 * rng.randint(16, 40) + 1) * rng.randint(32, 200)),
                               ("prefill", rng.choice((4096, 8192)), rng.randint(3, 80))):
        route = "fallback" if rows < 1024 else "triton"
        row = {"phase": phase, "shape": [rows, 4096], "dtype": "bfloat16", "calls": count, "route": route,
               "status": "ok", "baseline_us": None, "dispatched_us": None, "baseline_total_us": None,
               "dispatched_total_us": None, "dispatch_extra_total_us": None}
        if unmeasured and route == "triton":
            row["status"] = "not measured: the Triton route runs in the interpreter here"
        else:
            b = round(rows * rng.uniform(0.002, 0.01) + 4, 3)
            d = round(b + rng.uniform(0.3, 1.5) if route == "fallback" else b * rng.uniform(0.5, 0.9), 3)
            row.update(baseline_us=b, dispatched_us=d, baseline_total_us=b * count, dispatched_total_us=d * count,
                       dispatch_extra_total_us=(d - b) * count)
        out.append(row)
    return out


# ---- 6. contract_change: a new default eps and its callers ---------------------------------------------------------

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


def draw(part: str, rng: random.Random) -> list:
    """The scenarios the check hands the learner's function for ``part``, drawn with ``rng``."""
    if part == "route_conditions":  # captured calls with a passed, a failed and no capture test; each fail alone
        kinds = [("sm75", None)] * 3 + [("capture", True), ("capture", False), ("capture", None)]
        kinds += [("capture", rng.choice((True, False, None))), ("cuda", None), ("cuda", None)] + [("any", None)] * 6
        calls = [_route_call(rng, *k) for k in kinds] + [_failing_only(rng, c) for c in ROUTE_CONDITIONS + (None,)]
        return rng.sample(calls, len(calls))
    if part == "test_report":  # every verdict, each way a claim goes untested, in every draw
        hows = [["supported", "supported", "failed", "error", "all_skipped", "partly_skipped"],
                ["supported", "error", "xfail", "missing", "failed", "all_skipped"]]
        return [_report_case(rng, rng.sample(h, len(h))) for h in hows]
    if part == "results_table":  # each verdict, and in every table a row that cannot be right
        kinds = ["fast path", "compile it", "no claim", rng.choice(("fast path", "compile it"))]
        return [_results_table(rng, k) for k in rng.sample(kinds, len(kinds))]
    if part == "review_comments":  # each of the eight answers in every draw
        scs = []
        for first in (True, False):
            flags = {"doubt_win": (first, not first), "missing_case": (not first, first),
                     "why_not_compile": (first,), "readability": (first, rng.random() < 0.5)}
            scs.append(_review_case(rng, flags))
        return scs
    if part == "maintenance_cost":
        flags = rng.sample([(True, False), (False, True), (False, rng.random() < 0.5)], 3)
        lasts = rng.sample(("dir", "ext", "top"), 3)  # each way the last matching line falls, in every draw
        return [{"replay": _replay(rng, unmeasured), "build": _build(rng, warm, last)}
                for (warm, unmeasured), last in zip(flags, lasts)]
    if part == "contract_change":
        news = [rng.choice((1e-6, 1e-5)), 2.0 ** -23, rng.choice((1e-6, 1e-5, 2.0 ** -23))]
        return [_contract_case(rng, n) for n in rng.sample(news, 3)]
    raise KeyError(f"exercise 13 has no part {part!r}")


_EXPECTED = {"route_conditions": _route_expected, "test_report": _report_expected,
             "results_table": _results_expected, "review_comments": _review_expected,
             "maintenance_cost": _cost_expected, "contract_change": _contract_expected}


def expected(part: str, scenario):
    """The grader's answer for one scenario of ``part``."""
    return _EXPECTED[part](scenario)
