"""Exercise 07 judges parts only on a note with substance, grades its structured elements, and grades concision
(issue 28 item 6, issue 27 item 7, issue 41): a skeleton of headings plus the one phrase a part looks for, a copy of
vLLM's PR template, and a note of filler sentences and keyword lines score nothing; honest notes that follow the
grammar but are written their own ways (their own prose, order, rounding, units and table layouts) score full marks; a
wordy note loses the concision point only, and the feedback names its word count. The untouched exercise's zero is
tests/grading/test_grading.py's."""

import pytest

from fastpath_lib import exercises as ex
from fastpath_lib.grading.checks.ex07_note import WORD_LIMIT, words_outside_details
from fastpath_lib.rmsnorm.predicate import MAX_COLS

pytest.importorskip("jupytext")  # tests/solved.py reads the solutions with it

from solved import solved  # noqa: E402

HEADINGS = ("Summary", "Scope", "Eligibility and fallback", "Semantic evidence", "Mechanism", "Performance",
            "Limitations")
#: every heading the check looks for, and the one phrase its no-claims part looks for
SKELETON = "\n".join(f"## {h}\n\nnot a GPU measurement\n" for h in HEADINGS)
#: vLLM's .github/PULL_REQUEST_TEMPLATE.md, filled with nothing but the phrase and the kit's headings
VLLM_TEMPLATE = """<!-- markdownlint-disable -->
PLEASE FILL IN THE PR DESCRIPTION HERE ENSURING ALL CHECKLIST ITEMS (AT THE BOTTOM) HAVE BEEN CONSIDERED.

## Purpose

## Test Plan

## Test Result

## (Optional) Documentation Update

---
<details>
<summary> Essential Elements of an Effective PR Description Checklist </summary>

- [ ] The purpose of the PR, such as "Fix some issue (link existing issues this PR will resolve)".
- [ ] The test plan, such as providing test command.
- [ ] The test results, such as pasting the results comparison before and after, or e2e results
- [ ] (Optional) The necessary documentation update, such as updating `supported_models.md` and `examples` for a new model.
- [ ] (Optional) Release notes update. If your change is user facing, please update the release notes draft.
</details>

**BEFORE SUBMITTING, PLEASE READ <https://docs.vllm.ai/en/latest/contributing>** (anything written below this line
will be removed by GitHub Actions)
""" + SKELETON


def _by_part(results):
    return {r.part: r for r in results}


def filler_note(results, env) -> str:
    """Attack round 8, B3: every section one filler sentence, the scope the sentence with the limit's keywords dropped
    in, the method keyword lines, a table from the handed-out classes, a summary of outcome words."""
    f = "Words go here and say nothing at all about this change."
    h = env["harness"]
    cls = ex.expected_classes(results)
    cpu = env["device"] != "cuda"
    rows = "\n".join(f"| {r.case_id} | {r.route} | {'' if cpu else cls[r.case_id]} | {r.baseline_median_us} | "
                     f"{r.candidate_median_us} |" for r in results.itertuples())
    return "\n".join([
        "## Summary", f, f, "synthetic win neutral loss", "not a GPU measurement" if cpu else "", "",
        "## Scope", f"{f} fp16 bf16 fp32 {MAX_COLS} fallback {f}", "",
        "## Eligibility and fallback", f, "", "## Semantic evidence", f, "", "## Mechanism", f, "",
        "## Performance", "| case | route | class | a | b |", "|---|---|---|---|---|", rows, "",
        "## Limitations", f, "",
        f"{env.get('device_name') or env['device']} {env['torch']} {env['triton']} {h['timer']} {h['raw_samples']}.",
        f"warm {h['warmup_ms']} ms. median {h['samples']}. spread 20 80. synchron.",
    ])


def _env_line(env, label="Environment:") -> str:
    said = "synthetic teaching data" if env["device"] == "cuda" else "not a GPU measurement"
    return (f"{label} {env['device_name'] or env['device']}, torch {env['torch']}, triton {env['triton']} "
            f"({said})")


def prose_note(results, env) -> str:
    """Honest, in paragraphs: bold labels, a counts line in plural words joined by ``and``, case lines with one
    decimal and the change in words beside them (prose, not scored), a ``Scope:`` paragraph wrapped over lines, an open
    table with a ratio column, the method as bold labelled lines, versions written ``PyTorch X`` in the prose too."""
    gpu, h = env["device"] == "cuda", env["harness"]
    out = ["# RMSNorm: a Triton fast path behind a predicate", "", "## Summary", "",
           f"We measured on {env['device_name'] or env['device']} with PyTorch {env['torch']}; this table is "
           "synthetic, invented for teaching.", "", "**" + _env_line(env).replace(":", ":**", 1), ""]
    cls = ex.expected_classes(results) if gpu else {}
    if gpu:
        by = {k: [r for r in results.itertuples() if cls[r.case_id] == k] for k in ("win", "neutral", "loss",
                                                                                      "fallback")}
        out += [f"**Outcomes:** {len(by['win'])} wins, {len(by['neutral'])} neutrals, {len(by['loss'])} losses and "
                f"{len(by['fallback'])} fallbacks", ""]
        for r in by["loss"] + by["neutral"]:
            change = 100 * (r.candidate_median_us / r.baseline_median_us - 1)
            out += [f"**{r.case_id}:** {cls[r.case_id]}, {r.baseline_median_us:.1f} us to {r.candidate_median_us:.1f} "
                    f"us ({change:+.0f} %)", "",
                    f"It takes {abs(change):.0f} % {'longer' if change > 0 else 'less time'} there, which the noise "
                    "band decides is " + ("a real slowdown." if cls[r.case_id] == "loss" else "no difference."), ""]
    else:
        out.append("These numbers come from Triton's CPU interpreter, so no speed-up is claimed from them.")
        out += ["", *(f"- **{r.case_id}:** {r.baseline_median_us} us with F.rms_norm, {r.candidate_median_us} us on "
                      "the Triton path" for r in results.itertuples())]
    out += ["", "Scope: calls whose input is float16, bfloat16 or float32, with a last dimension of at most",
            f"{MAX_COLS} columns, contiguous rows and 16-byte alignment, take the Triton kernel. Any other call",
            "goes to F.rms_norm, the fallback, as before.", "",
            "## Eligibility and fallback", "",
            "A predicate checks dtype, width, layout and alignment and returns the first reason a call is refused.",
            "", "## Correctness (semantic evidence)", "",
            "Forward and backward outputs agree with a float64 reference on both routes, within each dtype's "
            "tolerance.", "", "## Mechanism", "",
            "A single program normalizes each row in one pass over memory, so one call is one kernel launch.", "",
            "## Performance", "", "Each case appears below with its route, its class and both medians.", "",
            "| case | route | class | F.rms_norm (us) | Triton (us) | ratio |", "|---|---|---|---|---|---|"]
    for r in results.itertuples():
        out.append(f"| {r.case_id} | {r.route} | {cls.get(r.case_id, 'unmeasured')} | {r.baseline_median_us:.2f} | "
                   f"{r.candidate_median_us:.2f} | {r.candidate_median_us / r.baseline_median_us:.3f} |")
    out += ["", "## Measurement method", "",
            f"**Timer:** {h['timer']}", "", f"**Warm-up:** {h['warmup_ms']} ms before the first timed call", "",
            "**Synchronization:** the device is synchronized before every reading, so each timing covers the "
            "finished kernel", "",
            f"**Statistic:** the {h['statistic']} of {h['samples']} timed runs", "",
            "**Spread:** the 20th to 80th percentile range", "", f"**Raw samples:** {h['raw_samples']}", "",
            "## Limitations", "", "The numbers are synthetic stand-ins; a real GPU run must replace them."]
    return "\n".join(out)


def terse_note(results, env) -> str:
    """Honest, in lists: times in ms to three significant digits with a unicode arrow, counts parted by ``;``, a Scope
    section with a ``cols <=`` bound, versions as ``torch==X``, the table folded with a change column, the method in
    one paragraph of labelled lines (each line its own label), the case lines after the table."""
    gpu, h = env["device"] == "cuda", env["harness"]
    cls = ex.expected_classes(results) if gpu else {}

    def ms(r):
        return f"{r.baseline_median_us / 1000:.3g} ms → {r.candidate_median_us / 1000:.3g} ms"

    out = ["## Summary", ""]
    if gpu:
        n = {k: sum(v == k for v in cls.values()) for k in ("win", "neutral", "loss", "fallback")}
        out += [f"Outcomes: {n['fallback']} fallback; {n['loss']} loss; {n['neutral']} neutral; {n['win']} win", ""]
    else:
        out += ["Interpreter timings only, and no speed-up is claimed.", ""]
        out += [f"- {r.case_id}: {ms(r)} (interpreted)" for r in results.itertuples()] + [""]
    device = env["device_name"] or env["device"]
    out += [f"Environment: {device}; torch=={env['torch']}; triton=={env['triton']}; "
            + ("synthetic data" if gpu else "not a GPU measurement"), "",
            "## Scope", "", f"Fast path: fp16, bf16 and fp32 rows, cols <= {MAX_COLS}, contiguous and aligned.",
            "Everything else runs the unchanged fallback (F.rms_norm).", "",
            "## Eligibility / fallback", "", "Ineligible calls are routed to F.rms_norm before any kernel runs.", "",
            "## Semantic evidence", "", "Values, dtypes and gradients match F.rms_norm within the tolerance table.",
            "", "## Mechanism", "", "Rows are loaded once into registers, reduced, scaled and stored in one kernel.",
            "", "## Performance", "", "<details><summary>All cases</summary>", "",
            "| case | route | base us | new us | change % | outcome |", "|---|---|---|---|---|---|"]
    for r in results.itertuples():
        change = 100 * (r.candidate_median_us / r.baseline_median_us - 1)
        out.append(f"| {r.case_id} | {r.route} | {r.baseline_median_us:.3g} | {r.candidate_median_us:.3g} | "
                   f"{change:+.1f} | {cls.get(r.case_id, 'not measured')} |")
    out += ["", "</details>", ""]
    out += [f"- {r.case_id}: {cls[r.case_id]} ({ms(r)})" for r in results.itertuples()
            if cls.get(r.case_id) in ("loss", "neutral")]
    out += ["", "## Method", "", f"Timer: {h['timer']}", f"Warm-up: {h['warmup_ms']} ms",
            "Synchronization: CUDA events, read after the device is synchronized",
            f"Statistic: {h['statistic']} of {h['samples']} samples", f"Spread: {h['spread']}",
            f"Raw samples: {h['raw_samples']}", "",
            "## Limitations", "", "Synthetic teaching data; the numbers must come from a GPU before review."]
    return "\n".join(out)


def reviewer_note(results, env) -> str:
    """Honest, as a reviewer's summary: the counts in another order, case lines in backticks with the change in
    percent only, a table with the class first and units in its cells, a spread written ``q20–q80``, dtypes as
    half/bfloat16/float32, ``up to N columns``, the prose commentary in natural words ("is within measurement error",
    "no faster and no slower")."""
    gpu, h = env["device"] == "cuda", env["harness"]
    cls = ex.expected_classes(results) if gpu else {}
    rs = list(results.itertuples())
    out = ["## Summary", "", "This change adds a Triton RMSNorm behind an eligibility check. The numbers below are "
           "synthetic.", "", "- " + _env_line(env)]
    if gpu:
        n = {k: sum(v == k for v in cls.values()) for k in ("win", "neutral", "loss", "fallback")}
        out.append(f"- Outcomes: {n['loss']} loss, {n['fallback']} fallback, {n['win']} win and {n['neutral']} neutral")
        for r in rs:
            if cls[r.case_id] in ("loss", "neutral"):
                out.append(f"- `{r.case_id}`: {cls[r.case_id]}, "
                           f"{100 * (r.candidate_median_us / r.baseline_median_us - 1):+.2f} %")
        out += ["", "The neutral ones are within measurement error: no faster and no slower than before, as far as "
                "these timings can tell. Nothing here is a 1.5x win."]
    else:
        out += [f"- `{r.case_id}`: unmeasured, {r.baseline_median_us:.1f} us and {r.candidate_median_us:.1f} us"
                for r in rs]
        out += ["", "Interpreter data: no performance claim."]
    out += ["", "## Scope", "", f"Eligible: half, bfloat16 and float32 tensors with up to {MAX_COLS} columns and "
            "contiguous, aligned rows. Ineligible inputs fall back to F.rms_norm.", "",
            "## Eligibility and fallback", "", "Each rejected call records the failing condition and uses the "
            "fallback.", "", "## Semantic evidence", "",
            "Tests compare against a float64 reference for outputs and gradients in every dtype.", "",
            "## Mechanism", "", "The kernel keeps one row per program and reads the weight once per row block.", "",
            "## Performance", "", "The full table is folded below for reviewers who want every case.", "",
            "<details><summary>Table</summary>", "", "| case | class | route | baseline | candidate |",
            "|---|---|---|---|---|"]
    out += [f"| `{r.case_id}` | {cls.get(r.case_id, 'n/a')} | {r.route} | {r.baseline_median_us} us | "
            f"{r.candidate_median_us} us |" for r in rs]
    out += ["", "</details>", "", "## Methodology", "",
            f"* Timer: {h['timer']}",
            f"* Warm-up: {h['warmup_ms']} ms", "* Sync: the GPU is synchronized before every measurement",
            f"* Statistic: medians of {h['samples']} samples", "* Spread: q20–q80",
            f"* Raw samples: {h['raw_samples']} (every sample, per case)", "", "## Limitations", "",
            "Only synthetic numbers so far; the real run may change the picture."]
    return "\n".join(out)


def open_note(results, env) -> str:
    """Honest, with a case line for every case (wins and fallbacks too) in µs with the ratio either way, an open table
    of only case, route and class (no numbers), the summary's prose before and after the labelled lines."""
    gpu, h = env["device"] == "cuda", env["harness"]
    cls = ex.expected_classes(results) if gpu else {}
    out = ["## Summary", "", "Routes eligible RMSNorm calls to a Triton kernel; the rest are untouched.", ""]
    if gpu:
        n = {k: sum(v == k for v in cls.values()) for k in ("win", "neutral", "loss", "fallback")}
        out += ["Outcomes: " + ", ".join(f"{v} {k}" for k, v in n.items() if v), ""]
        for r in results.itertuples():
            ratio = r.baseline_median_us / r.candidate_median_us
            out.append(f"- {r.case_id}: {cls[r.case_id]}, {r.baseline_median_us:g} µs → {r.candidate_median_us:g} µs, "
                       f"{ratio:.3f}x")
        out += ["", "Read the losses before merging: the small rows pay for the launch."]
    else:
        out += ["No speed-up is claimed from interpreter timings.", ""]
        out += [f"- {r.case_id}: {r.baseline_median_us:g} µs and {r.candidate_median_us:g} µs (interpreted)"
                for r in results.itertuples()]
    out += ["", _env_line(env), "", "## Scope", "", f"Scope: fp16, bf16 and fp32, at most {MAX_COLS} columns; the "
            "rest falls back to F.rms_norm.", "", "## Eligibility and fallback", "",
            "The predicate refuses a call with the first condition it fails.", "", "## Semantic evidence", "",
            "Both routes agree with the float64 reference within tolerance.", "", "## Mechanism", "",
            "One program per row: one read, one write, one launch per call.", "", "## Performance", "",
            "| case | route | class |", "|---|---|---|"]
    out += [f"| {r.case_id} | {r.route} | {cls.get(r.case_id, 'unmeasured')} |" for r in results.itertuples()]
    out += ["", "## Method", "", f"- Timer: {h['timer']}", f"- Warm-up: {h['warmup_ms']}ms",
            f"- Synchronization: {h['sync']}", f"- Statistic: median of {h['samples']} runs",
            f"- Spread: {h['spread']}", f"- Raw samples: {h['raw_samples']}", "", "## Limitations", "",
            "Synthetic numbers; a GPU run replaces them before review."]
    return "\n".join(out)


def table_only_note(results, env) -> str:
    """Round 12b's h_tableonly, in the grammar: a short summary (counts, one case line per loss and neutral case), and a
    performance section that is the per-case table only (case | route | before (us) | after (us) | verdict)."""
    gpu, h = env["device"] == "cuda", env["harness"]
    cls = ex.expected_classes(results) if gpu else {}
    out = ["## Summary", "", _env_line(env), ""]
    if gpu:
        n = {k: sum(v == k for v in cls.values()) for k in ("win", "neutral", "loss", "fallback")}
        out += [f"Outcomes: {n['win']} win, {n['neutral']} neutral, {n['loss']} loss, {n['fallback']} fallback", ""]
        out += [f"- {r.case_id}: {cls[r.case_id]}, {r.candidate_median_us / r.baseline_median_us:.2f}x" for r in
                results.itertuples() if cls[r.case_id] in ("loss", "neutral")]
        out += ["", "Per-case numbers are in the Performance table."]
    else:
        out += ["No speed-up is claimed from these interpreter timings.", ""]
        out += [f"- {r.case_id}: {r.candidate_median_us} us" for r in results.itertuples()]
    out += ["", "## Scope", "", f"Scope: fp16/bf16/fp32 inputs, at most {MAX_COLS} columns; everything else falls back.",
            "", "## Eligibility and fallback", "", "Ineligible calls run F.rms_norm exactly as before this change.", "",
            "## Semantic evidence", "", "Outputs match the float64 reference within each dtype's tolerance.", "",
            "## Mechanism", "", "A single kernel launch normalizes every row in one pass.", "", "## Performance", "",
            "| case | route | before (us) | after (us) | verdict |", "|---|---|---|---|---|"]
    out += [f"| {r.case_id} | {r.route} | {r.baseline_median_us} | {r.candidate_median_us} | "
            f"{cls.get(r.case_id, 'unmeasured')} |" for r in results.itertuples()]
    out += ["", "## Method", "", f"Timer: {h['timer']}", "", f"Warm-up: {h['warmup_ms']} ms", "",
            f"Synchronization: {h['sync']}", "", f"Statistic: {h['statistic']} of {h['samples']} samples", "",
            "Spread: 20th-80th percentile", "", f"Raw samples: {h['raw_samples']}", "", "## Limitations", "",
            "Synthetic data until a GPU run replaces it."]
    return "\n".join(out)


def test_the_solution_scores_full_marks():
    results = ex.check_pr_note(solved("ex07")["write_pr_note"], show=False)
    assert all(r.passed for r in results), {r.part: r.feedback for r in results if not r.passed}


@pytest.mark.parametrize("note", [prose_note, terse_note, reviewer_note, open_note, table_only_note])
def test_honest_notes_in_other_forms_are_told_which_lines_are_read_as_prose_and_their_form(note):
    """Honest notes written before the forms were stated in full (a scope in other words, a case line with a comment,
    an environment without its kind, a table under another header): refused by design, and the feedback names each
    line it reads as prose with the form that line must take."""
    results = ex.check_pr_note(note, show=False)
    assert not all(r.passed for r in results)
    told = "\n".join(r.feedback for r in results if not r.passed)
    assert "is read as prose: the form is" in told or "in its form" in told, told


def test_a_note_of_filler_and_keyword_lines_scores_nothing():
    """Attack round 8, B3 (7/7 before): it names cases only in its table and asserts nothing about them."""
    results = ex.check_pr_note(filler_note, show=False)
    assert sum(r.earned for r in results) == 0, [(r.part, r.passed) for r in results]
    assert all("gives 0 of this table's" in r.feedback for r in results), results[0].feedback


def test_filler_with_two_true_case_lines_fails_every_part_it_fakes():
    """Two case lines that state two cases' medians give the filler substance; every part whose content the filler
    fakes still fails, each naming the element it misses and its form."""
    def write(results, env):
        r = list(results.itertuples())
        true = "\n".join(f"- {x.case_id}: {ex.expected_classes(results)[x.case_id] if env['device'] == 'cuda' else 'unmeasured'}, "
                         f"{x.baseline_median_us:.2f} -> {x.candidate_median_us:.2f} us" for x in r[:2])
        return filler_note(results, env).replace("## Summary\n", f"## Summary\n{true}\n\n", 1)

    r = _by_part(ex.check_pr_note(write, show=False))
    assert "no substance" not in r["sections"].feedback
    faked = {"environment_and_scope": "no `Environment:` line",
             "consistent_with_data": "no `Outcomes:` line in its form under the Summary heading",
             "measurement_method": "no `Warm-up: "}
    for name, told in faked.items():
        assert not r[name].passed and told in r[name].feedback, (name, r[name].feedback)
    assert "no `Scope:` line in its form" in r["environment_and_scope"].feedback


@pytest.mark.parametrize("note", [SKELETON, VLLM_TEMPLATE], ids=["skeleton plus a phrase", "vLLM's template"])
def test_a_note_without_substance_scores_nothing(note):
    results = ex.check_pr_note(lambda df, env: note, show=False)
    assert sum(r.earned for r in results) == 0, [(r.part, r.passed) for r in results]
    for r in results:
        assert "not judged: the note has no substance" in r.feedback, (r.part, r.feedback)
        assert "gives 0 of this table's" in r.feedback and "figures that match the data" in r.feedback


def test_a_wordy_note_loses_concision_only_and_is_told_its_word_count():
    base = solved("ex07")["write_pr_note"]
    padding = " ".join(["The kernel reads every row once and writes it once, as the table shows."] * 60)

    def wordy(df, env):
        return base(df, env) + "\n\n## Discussion\n\n" + padding + "\n"

    r = _by_part(ex.check_pr_note(wordy, show=False))
    assert not r["concise"].passed and f"at most {WORD_LIMIT}" in r["concise"].feedback
    n = words_outside_details(wordy(ex.synthetic_results(), ex.synthetic_environment()))
    assert n > WORD_LIMIT and f"GPU-shaped data: {n}" in r["concise"].feedback
    assert all(x.passed for k, x in r.items() if k != "concise"), {k: x.feedback for k, x in r.items()}

    def folded(df, env):  # the same words in a <details> block: concise again
        return base(df, env) + "\n\n<details><summary>Discussion</summary>\n\n" + padding + "\n\n</details>\n"

    r = _by_part(ex.check_pr_note(folded, show=False))
    assert r["concise"].passed and "at most 600 words outside closed <details> blocks" in r["concise"].feedback

    def opened(df, env):  # in <details open>: a reader sees them
        return base(df, env) + "\n\n<details open><summary>Discussion</summary>\n\n" + padding + "\n\n</details>\n"

    assert not _by_part(ex.check_pr_note(opened, show=False))["concise"].passed


def test_substance_is_judged_on_each_table():
    """The solution's note for the fixed table, handed back for every table: the drawn table's cases are missing."""
    fixed = solved("ex07")["write_pr_note"](ex.synthetic_results(), ex.synthetic_environment())
    results = ex.check_pr_note(lambda df, env: fixed, show=False)
    assert sum(r.earned for r in results) == 0
    assert "a GPU-shaped table drawn now: it gives 0 of this table's" in results[0].feedback
