"""Exercise 07, attack round 13 (/work/notes/attack13-results.md): the notes of an outside attacker, graded in process.

Each note is the attacker's honest base note, rewritten to the stated forms (``ex07_attack13/base.txt``: the
environment's kind, the CPU class and the scope in their forms), followed by the attacker's own tail
(``ex07_attack13/NAME.txt``, unchanged). Every attack that scored 7/7 either loses the part it should, or (where its
lie is no element in its form) earns nothing: its lie is prose, for a person to read. Every honest note that follows
the stated forms keeps full marks; the honest notes that break a stated form are refused by design, and each is
rewritten to the forms below and passes.
"""

import pathlib
import re

import pytest

from fastpath_lib import exercises as ex
from fastpath_lib.rmsnorm.predicate import MAX_COLS

HERE = pathlib.Path(__file__).parent / "ex07_attack13"
PARTS = ("sections", "concise", "environment_and_scope", "consistent_with_data", "measurement_method",
         "no_claims_from_cpu_data")


def _namespace(tail: str = "") -> dict:
    ns = {"ex": ex, "MAX_COLS": MAX_COLS, "__name__": "attack13"}
    exec(compile((HERE / "base.txt").read_text() + tail, "attack13", "exec"), ns)  # noqa: S102 (test data)
    return ns


def _graded(write) -> dict:
    return {r.part: r for r in ex.check_pr_note(write, show=False)}


def _lost(name: str) -> set[str]:
    ns = _namespace((HERE / f"{name}.txt").read_text())
    return {p for p, r in _graded(ns["write_pr_note"]).items() if not r.passed}


#: attack -> the parts it must lose (each scored 7/7 before).
LOSES = {
    "a_hidden_details": set(PARTS),  # <details hidden>: nothing inside earns, no substance
    "a_details_style": set(PARTS),  # style="display:none": the same
    "a_fold_swap": {"consistent_with_data"},  # labelled lines earn only outside a fold
    "a_label_glyph": {"consistent_with_data"},  # an Armenian O or U+02CD: disguised
    "a_loss_free": {"consistent_with_data"},  # `loss-free` is no class; the row's figures are swapped
    "a_dup_outcomes": {"consistent_with_data"},  # an Outcomes line with more on it is none
    "a_paren_outcomes": {"consistent_with_data"},
    "a_units": {"consistent_with_data"},  # ms for µs values: the unit is read
    "a_round": {"consistent_with_data"},  # `1x the time (0 % change)` is no case line
    "a_env_lie": {"environment_and_scope", "consistent_with_data", "no_claims_from_cpu_data"},
    "a_nonsynthetic": {"environment_and_scope", "consistent_with_data"},
    "a_method_lie": {"measurement_method"},
    "a_comment_lie": {"consistent_with_data"},  # a case line with a comment is none: the loss has no case line
    "a_verdict_col": {"consistent_with_data"},  # every column headed verdict/class/outcome/route is held
    "a_route_col": {"consistent_with_data"},
    "a_scope_lie": {"environment_and_scope"},
    "a_disguise": {"consistent_with_data"},  # U+02CD in a case id: disguised
    "a_blind": set(PARTS),  # `0 ms` is no figure: no substance
    "a_skeleton": {"sections", "consistent_with_data"},  # one heading is no section
    "a_one_heading": {"sections", "consistent_with_data"},
    "a_details_open": {"concise"},  # words in <details open> are seen
    "a_deny_evade": {"consistent_with_data"},
    "a_cpu_evade": {"no_claims_from_cpu_data"},  # `faster, 2.0x` in a line labelled with a case id
    "a_cpu_envclaim": {"environment_and_scope", "no_claims_from_cpu_data"},
    "a_cpu_quote": {"consistent_with_data", "no_claims_from_cpu_data"},  # a quoted row is held
    "x_cyrillic": {"consistent_with_data"},
}
#: attacks whose lie is no element in its form: prose, which earns nothing and a person reads (a table without the
#: header's form, a row naming two cases, an HTML <table>, filler sentences, and an `Outcomes: 12 win` line that does
#: not give every class, hidden or not).
PROSE_ONLY = ("a_extras_row", "a_two_ids", "a_html_table", "a_filler", "x_code", "x_div", "x_quote", "x_strike",
              "x_two_outcomes")
#: honest notes that follow the stated forms: full marks.
HONEST = ("honest", "h_alike", "h_bw", "h_cpu_need_gpu", "h_cpu_tableonly", "h_fallback_never", "h_faster_slower",
          "h_median_always", "h_rich")
#: honest notes refused by design: each breaks a stated form (rewritten below, where they pass).
#: h_env_caps, h_env_short, h_cpu_env_plural: the Environment line's kind or version not in its form;
#: h_cpu_sync: the record's synchronization in other words; h_pspread: `p80 − p20 of the samples` (more on the line);
#: h_scope_*: the scope in other words; h_outcomes_of: `... out of 12 cases` (more on the line); h_route_names: a
#: route not `triton`/`fallback`; h_compare, h_warmup_in_line: a comment on a case line; h_all_lines, h_table_open,
#: h_compact: ratios, a table and method lines in other forms.
BY_DESIGN = ("h_env_caps", "h_env_short", "h_cpu_env_plural", "h_cpu_sync", "h_pspread", "h_scope_fewer",
             "h_scope_maxcols", "h_scope_thinspace", "h_scope_torchfloat", "h_outcomes_of", "h_route_names",
             "h_compare", "h_warmup_in_line", "h_all_lines", "h_table_open", "h_compact")


@pytest.mark.parametrize("name", sorted(LOSES))
def test_round_13s_attacks_lose_the_parts_they_should(name):
    assert LOSES[name] <= _lost(name)


@pytest.mark.parametrize("name", PROSE_ONLY + HONEST)
def test_round_13s_prose_lies_earn_nothing_and_honest_notes_in_the_forms_keep_full_marks(name):
    assert _lost(name) == set()


@pytest.mark.parametrize("name", BY_DESIGN)
def test_round_13s_honest_notes_that_break_a_stated_form_are_refused(name):
    assert _lost(name)


def _kind(env):
    return "not a GPU measurement" if env.get("device") != "cuda" else "synthetic"


def _env_caps(results, env):
    dev = (env.get("device_name") or env.get("device")).capitalize()
    return _namespace()["_honest"](results, env, envline=f"Environment: {dev}, torch {env['torch']}, "
                                   f"triton {env['triton']}, {_kind(env).upper()}")


def _replaced(old, new):
    def write(results, env):
        return _namespace()["_honest"](results, env).replace(old, new)
    return write


def _scope(text):
    def write(results, env):
        return _namespace()["_honest"](results, env, scope=f"Scope: {text}; every other call runs F.rms_norm.")
    return write


def _comment_after_case_lines(results, env):
    """h_compare / h_warmup_in_line: the comment in a paragraph of its own after the case lines."""
    note = _namespace()["_honest"](results, env)
    return note.replace("\n\n## Scope", "\n\nCompare the losses with the 50 ms warm-up in mind.\n\n## Scope", 1)


def _all_lines(results, env):
    """h_all_lines: a case line for every case, in the form, each ratio in prose below."""
    note = _namespace()["_honest"](results, env)
    if env.get("device") != "cuda":
        return note
    cls = ex.expected_classes(results)
    lines = []
    for _, r in results.iterrows():
        b, c = r["baseline_median_us"], r["candidate_median_us"]
        lines.append(f"- {r['case_id']}: {cls[r['case_id']]}, {b:.1f} -> {c:.1f} us ({100 * (c / b - 1):+.1f} %)")
    note = re.sub(r"(?m)^- \S+: (loss|neutral), .*\n", "", note)
    return note.replace("\n## Scope", "\n".join(lines) + "\n\nEach ratio is the candidate's time over the baseline's."
                        "\n\n## Scope", 1)


def _table_open(results, env):
    """h_table_open's forms: bold labels, µs, arrows, plural classes with `and`, capitalised routes and classes, an
    extra change column after the five."""
    note = _namespace()["_honest"](results, env)
    note = note.replace("| case | route | baseline us | candidate us | class |\n|---|---|---|---|---|",
                        "| Case | Route | Baseline µs | Candidate µs | Class | Change |\n|:--|:--|--:|--:|:--|--:|")
    note = re.sub(r"(?m)^(\| \S+ \| )(\w+)( \| [\d.]+ \| [\d.]+ \| )(\w+) \|$",
                  lambda m: f"{m[1]}{m[2].capitalize()}{m[3]}{m[4].capitalize()} | n/a |", note)
    note = re.sub(r"(?m)^(Environment|Outcomes):", r"**\1:**", note).replace(" -> ", " → ")
    return re.sub(r"(?m)^(\*\*Outcomes:\*\* \d+ win), (\d+ neutral), (\d+) loss, (\d+) fallback$",
                  r"\1s, \2, \3 losses and \4 fallbacks", note)


REWRITTEN = {
    "h_env_caps": _env_caps,
    "h_pspread": _replaced("- Spread: q80 - q20", "- Spread: p80 − p20"),
    "h_scope_maxcols": _scope(f"fp16, bf16 and fp32 inputs of at most MAX_COLS = {MAX_COLS} columns"),
    "h_scope_commas": _scope(f"fp16, bf16 and fp32 inputs of at most {MAX_COLS:,} columns"),
    "h_scope_thinspace": _scope("fp16, bf16 and fp32 inputs of at most " + f"{MAX_COLS:,}".replace(",", " ")
                                + " columns"),
    "h_scope_torchfloat": _scope(f"torch.half, torch.bfloat16 and torch.float inputs of at most {MAX_COLS} columns"),
    "h_compare": _comment_after_case_lines,
    "h_all_lines": _all_lines,
    "h_table_open": _table_open,
}


@pytest.mark.parametrize("name", sorted(REWRITTEN))
def test_round_13s_refused_honest_notes_rewritten_to_the_forms_keep_full_marks(name):
    assert {p for p, r in _graded(REWRITTEN[name]).items() if not r.passed} == set()
