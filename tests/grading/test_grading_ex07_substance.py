"""Exercise 07 judges parts only on a note with substance, grades a note by what it asserts, and grades concision
(issue 28 item 6, issue 27 item 7, issue 41 B3): a skeleton of headings plus the one phrase a part looks for, a copy of
vLLM's PR template, and a note of filler sentences and keyword lines score nothing; honest notes written their own
ways (not the solution's wording, order, rounding or units) score full marks; a wordy note loses the concision point
only, and the feedback names its word count. The untouched exercise's zero is tests/grading/test_grading.py's."""

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


def prose_note(results, env) -> str:
    """Honest, in paragraphs: counts in a sentence, one sentence per loss and per neutral case, rounded to one
    decimal, a ``Scope:`` paragraph wrapped over lines, an open table with a ratio column, the method as a list,
    versions written ``PyTorch X`` and ``Triton Y``."""
    gpu, h = env["device"] == "cuda", env["harness"]
    out = ["# RMSNorm: a Triton fast path behind a predicate", "", "## Summary", "",
           f"Measured on {env['device_name'] or env['device']} with PyTorch {env['torch']} and Triton "
           f"{env['triton']}; this table is synthetic, invented for teaching."]
    cls = ex.expected_classes(results) if gpu else {}
    if gpu:
        by = {k: [r for r in results.itertuples() if cls[r.case_id] == k] for k in ("win", "neutral", "loss",
                                                                                      "fallback")}
        out.append(f"Across its {len(results)} cases the candidate records {len(by['win'])} "
                   f"{'win' if len(by['win']) == 1 else 'wins'}, {len(by['neutral'])} neutral cases and "
                   f"{len(by['loss'])} {'loss' if len(by['loss']) == 1 else 'losses'}, while "
                   f"{len(by['fallback'])} cases fall back.")
        for r in by["loss"]:
            change = 100 * (r.candidate_median_us / r.baseline_median_us - 1)
            out.append(f"It is slower on {r.case_id}, where the median goes from {r.baseline_median_us:.1f} us to "
                       f"{r.candidate_median_us:.1f} us ({change:+.0f} %).")
        for r in by["neutral"]:
            out.append(f"{r.case_id} stays within the noise ({r.baseline_median_us:.1f} vs "
                       f"{r.candidate_median_us:.1f} us).")
        best = min(by["win"], key=lambda r: r.candidate_median_us / r.baseline_median_us)
        out.append(f"The largest gain is on {best.case_id}: {best.baseline_median_us / best.candidate_median_us:.2f}x "
                   f"({best.baseline_median_us:.0f} to {best.candidate_median_us:.0f} us).")
    else:
        out.append("These numbers come from Triton's CPU interpreter and are not a GPU measurement, so no speed-up is "
                   "claimed from them.")
        for r in list(results.itertuples())[:2]:
            out.append(f"For example, {r.case_id} took {r.baseline_median_us} us with F.rms_norm and "
                       f"{r.candidate_median_us} us on the Triton path under the interpreter.")
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
            f"- Each case was timed with {h['timer']}, after {h['warmup_ms']} ms of warm-up.",
            "- Before every reading the device is synchronized, so each timing covers the finished kernel.",
            f"- The figure per case is the {h['statistic']} over {h['samples']} timed runs; its spread is the 20th "
            "to 80th percentile range.",
            f"- All raw samples are stored in {h['raw_samples']}.", "",
            "## Limitations", "", "The numbers are synthetic stand-ins; a real GPU run must replace them."]
    return "\n".join(out)


def terse_note(results, env) -> str:
    """Honest, in lists: outcome-labelled lines in the summary (no counts), times in ms to three significant digits,
    a Scope section with a ``cols <=`` bound, versions as ``torch==X``, the table folded with a change column, the
    method in one paragraph."""
    gpu, h = env["device"] == "cuda", env["harness"]
    cls = ex.expected_classes(results) if gpu else {}

    def case(r):
        return f"{r.case_id} ({r.baseline_median_us / 1000:.3g} ms → {r.candidate_median_us / 1000:.3g} ms)"

    out = ["## Summary", ""]
    if gpu:
        for label, kind in (("Faster", "win"), ("Within noise", "neutral"), ("Slower", "loss"),
                            ("Falls back", "fallback")):
            named = [case(r) for r in results.itertuples() if cls[r.case_id] == kind]
            if named:
                out.append(f"- {label}: {', '.join(named)}.")
        out.append("- Synthetic data: invented numbers, not a measurement.")
    else:
        out.append("Not a GPU measurement: interpreter timings only, and no speed-up is claimed.")
        out += [f"- {case(r)} under the interpreter." for r in results.itertuples()]
    out += ["", "## Environment", "",
            f"Device {env['device_name'] or env['device']}; torch=={env['torch']}; triton=={env['triton']}.", "",
            "## Scope", "", f"Fast path: fp16, bf16 and fp32 rows, cols <= {MAX_COLS}, contiguous and aligned.",
            "Everything else runs the unchanged fallback (F.rms_norm).", "",
            "## Eligibility / fallback", "", "Ineligible calls are routed to F.rms_norm before any kernel runs.", "",
            "## Semantic evidence", "", "Values, dtypes and gradients match F.rms_norm within the tolerance table.",
            "", "## Mechanism", "", "Rows are loaded once into registers, reduced, scaled and stored in one kernel.",
            "", "## Performance", "", "Every case of the table, with its route and outcome:", "",
            "<details><summary>All cases</summary>", "", "| case | route | base us | new us | change % | outcome |",
            "|---|---|---|---|---|---|"]
    for r in results.itertuples():
        change = 100 * (r.candidate_median_us / r.baseline_median_us - 1)
        out.append(f"| {r.case_id} | {r.route} | {r.baseline_median_us:.3g} | {r.candidate_median_us:.3g} | "
                   f"{change:+.1f} | {cls.get(r.case_id, 'not measured')} |")
    out += ["", "</details>", "", "## Method", "",
            f"Timings were taken with {h['timer']}: a warm-up of {h['warmup_ms']} ms, then {h['samples']} samples "
            f"per case, of which we report the {h['statistic']} and the q80 - q20 spread. The device is synchronized "
            f"with CUDA events before a timing is read. Raw samples are in {h['raw_samples']}.", "",
            "## Limitations", "", "Synthetic teaching data; the numbers must come from a GPU before review."]
    return "\n".join(out)


def reviewer_note(results, env) -> str:
    """Honest, as a reviewer's summary: counts after their verbs (``wins on 3 cases``), wins and losses in one
    sentence (read in parts), neutral cases in one list cut at ``;``, times to two decimals, a spread written
    ``q20–q80``, "medians of N samples", dtypes as half/bfloat16/float32, ``up to N columns``."""
    gpu, h = env["device"] == "cuda", env["harness"]
    cls = ex.expected_classes(results) if gpu else {}
    rs = list(results.itertuples())
    out = ["## Summary", "", f"This change adds a Triton RMSNorm behind an eligibility check (PyTorch {env['torch']}, "
           f"Triton {env['triton']}, device: {env['device_name'] or env['device']}). The numbers below are synthetic."]
    if gpu:
        wins, neut, losses = ([r for r in rs if cls[r.case_id] == k] for k in ("win", "neutral", "loss"))
        out.append(f"It wins on {len(wins)} cases, ties on {len(neut)} and loses on {len(losses)}.")
        out.append("Wins on " + ", ".join(f"{r.case_id} ({r.baseline_median_us / r.candidate_median_us:.2f}x)"
                                          for r in wins)
                   + ", while " + " and ".join(f"{r.case_id} ({r.candidate_median_us:.1f} us vs "
                                               f"{r.baseline_median_us:.1f} us)" for r in losses) + " lose.")
        out.append("Neutral, inside the noise band: " + "; ".join(
            f"{r.case_id} at {r.candidate_median_us:.2f} us against {r.baseline_median_us:.2f} us" for r in neut) + ".")
    else:
        out.append("Interpreter data: not a GPU measurement, no performance claim.")
        out += [f"* `{r.case_id}`: {r.baseline_median_us:.1f} us (F.rms_norm), {r.candidate_median_us:.1f} us "
                "(Triton, interpreted)" for r in rs]
    out += ["", "## Scope", "", f"Eligible: half, bfloat16 and float32 tensors with up to {MAX_COLS} columns and "
            "contiguous, aligned rows. Ineligible inputs fall back to F.rms_norm.", "",
            "## Eligibility and fallback", "",
            "Each rejected call records the failing condition and uses the fallback.",
            "", "## Semantic evidence", "",
            "Tests compare against a float64 reference for outputs and gradients in every dtype.", "",
            "## Mechanism", "", "The kernel keeps one row per program and reads the weight once per row block.", "",
            "## Performance", "", "The full table is folded below for reviewers who want every case.", "",
            "<details><summary>Table</summary>", "", "| case | route | class | baseline | candidate |",
            "|---|---|---|---|---|"]
    out += [f"| `{r.case_id}` | {r.route} | {cls.get(r.case_id, 'n/a')} | {r.baseline_median_us} us | "
            f"{r.candidate_median_us} us |" for r in rs]
    out += ["", "</details>", "", "## Methodology", "",
            f"We used {h['timer']} to time each case with {h['warmup_ms']} ms warmup, synchronizing the GPU before "
            "every measurement.",
            f"Reported values are medians of {h['samples']} samples with the q20–q80 range as spread; raw data: "
            f"{h['raw_samples']}.", "", "## Limitations", "", "Only synthetic numbers so far; the real run may change "
            "the picture."]
    return "\n".join(out)


@pytest.mark.parametrize("note", [prose_note, terse_note, reviewer_note, "solution"])
def test_honest_notes_written_their_own_ways_score_full_marks(note):
    note = solved("ex07")["write_pr_note"] if note == "solution" else note
    results = ex.check_pr_note(note, show=False)
    assert all(r.passed for r in results), {r.part: r.feedback for r in results if not r.passed}


def test_a_note_of_filler_and_keyword_lines_scores_nothing():
    """Attack round 8, B3 (7/7 before): it names cases only in its table and asserts nothing about them."""
    results = ex.check_pr_note(filler_note, show=False)
    assert sum(r.earned for r in results) == 0, [(r.part, r.passed) for r in results]
    assert all("names 0 of this table's" in r.feedback for r in results), results[0].feedback


def test_filler_with_two_true_sentences_fails_every_part_it_fakes():
    """Two sentences that state two cases' medians give the filler substance; every part whose content the filler
    fakes still fails, each telling the rule it breaks."""
    def write(results, env):
        r = list(results.itertuples())
        true = " ".join(f"{x.case_id} took {x.candidate_median_us} us." for x in r[:2])
        return filler_note(results, env).replace("## Summary\n", f"## Summary\n{true}\n", 1)

    r = _by_part(ex.check_pr_note(write, show=False))
    assert "no substance" not in r["sections"].feedback
    faked = {"sections": "says nothing of its own", "environment_and_scope": "each version after its name",
             "consistent_with_data": "the summary does not say where", "measurement_method": "a warm-up of"}
    for name, told in faked.items():
        assert not r[name].passed and told in r[name].feedback, (name, r[name].feedback)
    assert "gives no column limit" in r["environment_and_scope"].feedback


@pytest.mark.parametrize("note", [SKELETON, VLLM_TEMPLATE], ids=["skeleton plus a phrase", "vLLM's template"])
def test_a_note_without_substance_scores_nothing(note):
    results = ex.check_pr_note(lambda df, env: note, show=False)
    assert sum(r.earned for r in results) == 0, [(r.part, r.passed) for r in results]
    for r in results:
        assert "not judged: the note has no substance" in r.feedback, (r.part, r.feedback)
        assert "names 0 of this table's" in r.feedback and "with a figure of their own" in r.feedback


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
    assert r["concise"].passed and "at most 600 words outside <details> blocks" in r["concise"].feedback


def test_substance_is_judged_on_each_table():
    """The solution's note for the fixed table, handed back for every table: the drawn table's cases are missing."""
    fixed = solved("ex07")["write_pr_note"](ex.synthetic_results(), ex.synthetic_environment())
    results = ex.check_pr_note(lambda df, env: fixed, show=False)
    assert sum(r.earned for r in results) == 0
    assert "a GPU-shaped table drawn now: it names 0 of this table's" in results[0].feedback
