"""What the exercise notebooks show and hand to the learner's code: inputs, tables and texts, never an answer.

The learner's kernel may import this module (in the grader's sandbox the façade's materials are handed to every
exercise, :func:`fastpath_lib.grading.engine.sandbox.handouts`), so it holds material only and imports the outcome
words, never the outcome rule: exercise 03's changed spec, the operators exercise 08 knows (names only), the synthetic
results of exercises 06 and 07, exercise 10's sweep and exercise 11's hunk texts. The rules that grade them (the
expected classes, thresholds, the hunks' kinds) stay in the check modules; what one exercise is given as the answer of
another lives in :mod:`fastpath_lib.grading.given`.

>>> [h["id"] for h in change_hunks(0)] == [h["id"] for h in change_hunks(0)]
True
>>> sweep_table(0).attrs["source"] == SWEEP_LABEL
True
"""

from __future__ import annotations

import random

import torch

from fastpath_lib.bench.schema import LOSS, NEUTRAL, NOT_GPU, WIN  # the words only: never the outcome rule

__all__ = ["V2_MAX_COLS", "V2_ALIGN_BYTES", "V2_DTYPES", "KNOWN_OPS", "SYNTHETIC_LABEL", "RESULT_COLUMNS",
           "results_frame", "synthetic_results", "synthetic_environment", "harness", "interpreter_results",
           "interpreter_environment", "SWEEP_LABEL", "SWEEP_COLUMNS", "sweep_table", "KINDS", "HUNKS", "drawn_hunks",
           "change_hunks", "device"]

# --- exercise 03: the changed spec (v2: fp16/bf16 only, at most 8192 columns, 32-byte alignment) ---------------------
V2_MAX_COLS = 8192
V2_ALIGN_BYTES = 32
V2_DTYPES = (torch.float16, torch.bfloat16)

# --- exercise 08: the operators the capstone checks know (``OP_NAME`` is one of them): names only --------------------
KNOWN_OPS = ("softmax", "log_softmax", "l2_normalize", "layer_norm")

# --- exercises 06 and 07: the synthetic results table -----------------------------------------------------------------
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
RESULT_COLUMNS = ["case_id", "route", "baseline_median_us", "baseline_spread_us", "candidate_median_us",
                  "candidate_spread_us"]

SYNTHETIC_LABEL = "SYNTHETIC teaching dataset: invented numbers, not a measurement"


def results_frame(rows, source: str):
    """A results table (pandas DataFrame with :data:`RESULT_COLUMNS`) whose ``attrs["source"]`` says what it is."""
    import pandas as pd

    df = pd.DataFrame(rows, columns=RESULT_COLUMNS)
    df.attrs["source"] = source
    return df


def synthetic_results():
    """The fixed results table of exercises 06 and 07 (a pandas DataFrame, synthetic: see :data:`SYNTHETIC_LABEL`)."""
    return results_frame(_SYNTHETIC, SYNTHETIC_LABEL)


def synthetic_environment() -> dict:
    """The environment record that goes with :func:`synthetic_results` (it names itself synthetic), with the keys of
    the kit's record (:func:`fastpath_lib.bench.metadata.environment`): ``device`` (``"cuda"``: GPU-shaped data),
    ``device_name``, and ``gpu_measurement`` false (invented numbers are no measurement)."""
    from fastpath_lib import runtime

    v = runtime.versions()
    return {"device": "cuda", "device_name": "synthetic GPU (teaching data)", "gpu_measurement": False,
            "torch": v["torch"], "triton": v["triton"], "synthetic": True, "note": SYNTHETIC_LABEL,
            "harness": harness()}


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
    env.update(device="cpu", device_name=None, note=NOT_GPU,
               harness=dict(harness(warmup_ms=5, samples=9, raw="interpreter_raw.csv"), timer="time.perf_counter",
                            sync="none: CPU calls return when done"))
    return env


# --- exercise 10: the synthetic sweep ---------------------------------------------------------------------------------
SWEEP_LABEL = "SYNTHETIC sweep drawn from a seed by fastpath_lib (teaching data): invented numbers, not a measurement"
SWEEP_COLUMNS = ["arch", "cols", "rows", "baseline_us", "baseline_q20_us", "baseline_q80_us", "fastpath_us",
                 "fastpath_q20_us", "fastpath_q80_us"]
#: Architectures a sweep may set a row threshold for: those the predicate admits by default (``MIN_CAPABILITY`` on),
#: where it reads ``CUDA_MIN_ROWS``. sm_75 is not one: inside ``allow_sm75()`` it always takes the default.
_ARCHS = ("sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120")
_ROWS = tuple(2 ** k for k in range(3, 15))  # 8 .. 16384


def _ratio(rng, want: str, band: float) -> float:
    if want == LOSS:
        return 1 + band + rng.uniform(0.05, 0.5)
    if want == WIN:
        return 1 - band - rng.uniform(0.05, 0.35)
    return 1 + rng.uniform(-0.5, 0.5) * band  # neutral: inside the band


def _width_outcomes(rng, n: int, still_loses: bool) -> list[str]:
    """Outcomes along the swept rows: losses, then (after a crossover) never a loss; with traps on both sides."""
    k = rng.randint(2, n - 3)  # index of the crossover
    outs = [LOSS] * k + [rng.choice((WIN, WIN, NEUTRAL)) for _ in range(n - k)]
    outs[rng.randrange(0, k - 1)] = rng.choice((WIN, NEUTRAL))  # an early non-loss before the last loss
    outs[k + rng.randrange(0, n - k)] = NEUTRAL  # a slower median inside the noise band: not a loss
    if still_loses:
        outs[-1] = LOSS
    return outs


def sweep_table(seed: int | None = None):
    """A synthetic sweep (pandas DataFrame, ``attrs["source"]`` says so): per architecture two row widths, the
    baseline (``F.rms_norm``) and the fast path timed across row counts 8..16384, medians with 20/80 % quantiles in
    microseconds. ``seed=None`` draws a fresh one; one architecture's fast path still loses at the largest size."""
    import pandas as pd

    rng = random.Random(seed) if seed is not None else random.SystemRandom()
    archs = sorted(rng.sample(_ARCHS, 4), key=_ARCHS.index)
    losing = rng.choice(archs)
    rows = []
    for arch in archs:
        widths = sorted(rng.sample((512, 1024, 2048, 4096, 8192), 2))
        lose_width = rng.choice(widths) if arch == losing else None
        for cols in widths:
            for r, want in zip(_ROWS, _width_outcomes(rng, len(_ROWS), cols == lose_width)):
                b = round(2.0 + r * cols * 4 / 2.5e6 * rng.uniform(0.9, 1.1), 3)  # ~2.5 TB/s plus launch time
                fb, ff = rng.uniform(0.01, 0.12), rng.uniform(0.01, 0.12)
                f = round(b * _ratio(rng, want, max(fb, ff)), 3)
                rows.append((arch, cols, r, b, round(b * (1 - fb / 2), 4), round(b * (1 + fb / 2), 4), f,
                             round(f * (1 - ff / 2), 4), round(f * (1 + ff / 2), 4)))
    df = pd.DataFrame(rows, columns=SWEEP_COLUMNS)
    df.attrs["source"] = SWEEP_LABEL
    return df


# --- exercise 11: the hunks of one change (their texts; the kinds, the answer, stay with the check) ------------------
#: The kinds of commit a plan may hold.
KINDS = ("refactor", "test", "behaviour", "docs")
#: What a draw of exercise 11's hunks names, each from its choices: the helper renamed and its new name, the function
#: moved, the new condition, the row slice its test uses, the model class and file routed through the op, its width,
#: the test module of the predicate. The first choice of each is the text of :data:`HUNKS`.
_NAMES = {
    "old": ("_stride_ok", "_stride_fits", "_rows_ok", "_check_stride"),
    "new": ("_row_stride_aligned", "_stride_is_aligned", "_rows_aligned"),
    "moved": ("row_bytes", "row_nbytes", "bytes_per_row"),
    "cond": ("row_width_aligned", "width_aligned", "row_bytes_aligned"),
    "width": (62, 58, 54, 46, 30),
    "stride": (64, 128),
    "block": ("Block", "DecoderLayer", "TransformerBlock", "Layer"),
    "stem": ("model", "tiny_llm", "decoder"),
    "dim": (64, 128, 256),
    "pred_tests": ("tests/test_predicate.py", "tests/test_eligibility.py"),
}
#: ``(file, (description, ...), diff)`` of each hunk, in the order the check's answer key lists them: templates over
#: :data:`_NAMES`, with a wording drawn among the descriptions.
_TEMPLATES = (
    ("fastpath_lib/rmsnorm/predicate.py",
     ("Rename the helper {old} to {new} (the name says what it checks); every caller updated",
      "{old} becomes {new}: a clearer name, callers follow"),
     "-def {old}(t, align=16):\n+def {new}(t, align=16):\n"
     "@@ def _alignment(c):\n-    if not {old}(c.input):\n+    if not {new}(c.input):"),
    ("{pred_tests}",
     ("Update the test module's import of the renamed helper", "Tests import the helper under its new name"),
     "-from fastpath_lib.rmsnorm.predicate import {old}\n"
     "+from fastpath_lib.rmsnorm.predicate import {new}"),
    ("fastpath_lib/rmsnorm/predicate.py",
     ("Move {moved}(t) out of predicate.py (unchanged); predicate.py imports it from layout.py",
      "predicate.py stops defining {moved} and imports it from layout.py instead"),
     "-def {moved}(t):\n-    return t.shape[-1] * t.element_size()\n"
     "+from fastpath_lib.rmsnorm.layout import {moved}"),
    ("fastpath_lib/rmsnorm/layout.py",
     ("Add {moved}(t) to layout.py, the same function moved from predicate.py",
      "layout.py gains {moved}, as it was in predicate.py"),
     "+def {moved}(t):\n+    return t.shape[-1] * t.element_size()"),
    ("fastpath_lib/rmsnorm/predicate.py",
     ("New condition {cond}: the row width in bytes must be a multiple of 16 (a width-{width} row slice "
      "in stride {stride} now falls back)",
      "Add the {cond} condition: rows whose width in bytes is not a multiple of 16 go to the fallback"),
     "+def _{cond}(c):\n+    if {moved}(c.input) % 16:\n"
     "+        return f\"row width {{{moved}(c.input)}} bytes is not a multiple of 16\"\n"
     "@@ PREDICATE = Predicate(\"rms_norm\", [\n+    Condition(\"{cond}\", _{cond}),"),
    ("{pred_tests}",
     ("Test: a width-{width} row slice in stride {stride} falls back, width {stride} stays eligible",
      "Test: {cond} sends a width-{width} slice to the fallback and keeps width {stride}"),
     "+def test_{cond}():\n"
     "+    assert explain(row_slice({width}, stride={stride})).route == \"fallback\"\n"
     "+    assert explain(row_slice({stride}, stride={stride})).route == \"triton\""),
    ("fastpath_lib/rmsnorm/predicate.py",
     ("Simplify {new}: drop the early return for 1-D inputs", "Tidy {new}: one return instead of two"),
     " def {new}(t, align=16):\n-    if t.dim() < 2:\n-        return True\n"
     "     return row_stride(t) * t.element_size() % align == 0"),
    ("examples/{stem}.py",
     ("Route {block}.norm through fastpath_lib.rms_norm instead of F.rms_norm",
      "{block}.norm calls fastpath_lib.rms_norm (was F.rms_norm)"),
     "-        return F.rms_norm(x, (self.dim,), self.weight, self.eps)\n"
     "+        return fastpath_lib.rms_norm(x, (self.dim,), self.weight, self.eps)"),
    ("tests/test_{stem}.py",
     ("Test: {block}.norm takes the fast path for an eligible input and matches F.rms_norm",
      "Test: an eligible input through {block}.norm is served by the Triton route"),
     "+def test_{stem}_norm_takes_the_fast_path():\n+    with record_routes() as routes:\n"
     "+        y = {block}({dim}).norm(x)\n+    assert routes == {{\"triton\": 1}}"),
    ("tests/test_{stem}.py",
     ("Test: {block}.norm agrees with F.rms_norm for fp32, fp16 and bf16 inputs",
      "Test: {block}.norm matches F.rms_norm in every supported dtype"),
     "+@pytest.mark.parametrize(\"dtype\", [torch.float32, torch.float16, torch.bfloat16])\n"
     "+def test_{stem}_norm_agrees_with_f_rms_norm(dtype):\n"
     "+    block, x = {block}({dim}).to(dtype), torch.randn(16, {dim}, dtype=dtype)\n"
     "+    assert_close(block.norm(x), F.rms_norm(x, ({dim},), block.weight, block.eps))"),
    ("README.md",
     ("README: the predicate's table of conditions gains {cond}", "README: {cond} joins the table of conditions"),
     "@@ <!-- predicate-table:start (PREDICATE.markdown_table(); tests/test_docs.py checks this copy) -->\n"
     " | input_alignment | alignment | input data pointer a multiple of 16 bytes | ...\n"
     "+| {cond} | alignment | the row width in bytes is a multiple of 16 | ..."),
    ("CHANGELOG.md",
     ("CHANGELOG: calls whose row width is not a multiple of 16 bytes now take the fallback",
      "CHANGELOG: a note on the new row-width condition"),
     "+- Calls whose row width is not a multiple of 16 bytes now take the fallback."),
)


def _rendered(names: dict, wording) -> tuple[tuple[str, str, str], ...]:
    return tuple((file.format(**names), descriptions[wording(len(descriptions))].format(**names), diff.format(**names))
                 for file, descriptions, diff in _TEMPLATES)


#: ``(file, description, diff)`` of each hunk, in the order the check's answer key lists them (the first choice of
#: every name and wording; each draw renders its own, :func:`drawn_hunks`).
HUNKS = _rendered({k: v[0] for k, v in _NAMES.items()}, lambda n: 0)


def drawn_hunks(seed: int | None = None) -> list[tuple[int, dict]]:
    """The hunks with their texts (names, numbers, wording), ids and order drawn from ``seed`` (``None``: afresh),
    each as ``(index into HUNKS, hunk)``."""
    rng = random.Random(seed) if seed is not None else random.SystemRandom()
    names = {k: rng.choice(v) for k, v in _NAMES.items()}
    texts = _rendered(names, rng.randrange)
    ids = rng.sample(range(0x1000, 0x10000), len(texts))
    out = [(n, {"id": f"h{i:04x}", "file": file, "description": description, "diff": diff})
           for n, (i, (file, description, diff)) in enumerate(zip(ids, texts))]
    rng.shuffle(out)
    return out


def change_hunks(seed: int | None = None) -> list[dict]:
    """The hunks of the change, as dicts ``{"id", "file", "description", "diff"}``, with their texts (names,
    numbers, wording), ids and order drawn from ``seed`` (``None``: afresh)."""
    return [h for _, h in drawn_hunks(seed)]


def device() -> str:
    """Where checks build their inputs: CUDA when present and the interpreter is off, else the CPU."""
    from fastpath_lib import runtime

    return runtime.kernel_device()
