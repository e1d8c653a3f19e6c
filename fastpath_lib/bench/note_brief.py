"""What a reviewer reads first, and what is folded: the note's visible lines (the region in a few lines, the outcome
counts with the scope restriction the losses call for, the command that reruns the evidence, the environment) and
:func:`fold`, which puts a full table in a ``<details>`` block.

A note is concise when at most :data:`WORD_LIMIT` words stand outside ``<details>`` blocks
(:func:`words_outside_details`); the full tables (conditions and their boundary points, every case, the environment,
the mechanism) stay in the note, folded, so no fact is dropped to fit.
"""

from __future__ import annotations

import re

from fastpath_lib import opspec
from fastpath_lib.reading import words_outside_details
from fastpath_lib.bench.analysis import coverage_line, outcome_counts, wrong_cases
from fastpath_lib.bench.note_evidence import Evidence
from fastpath_lib.bench.schema import (
    FALLBACK,
    LOSS,
    NOT_GPU,
    OUTCOMES,
    UNMEASURED,
    WIN,
    cpu_mode,
    host_rows,
    shape_text,
)

__all__ = ["WORD_LIMIT", "SHOWN", "words_outside_details", "fold", "first", "region", "scope", "rerun",
           "bench_command", "environment_table", "claim", "measured_on", "counts_line", "short_matrix", "wrong",
           "tolerance_text", "baseline_check"]

#: The most words a PR note may show outside ``<details>`` blocks.
WORD_LIMIT = 600

#: How many ids a visible list names before it says how many more the folded tables hold.
SHOWN = 4


def fold(summary: str, lines: list[str]) -> list[str]:
    """``lines`` in a ``<details>`` block titled ``summary`` (blank lines around, so GitHub renders the Markdown)."""
    if not lines:
        return []
    return ["", "<details>", f"<summary>{summary}</summary>", "", *lines, "", "</details>", ""]


def _dtype(d) -> str:
    return str(d).replace("torch.", "")


def tolerance_text(dtype, tol) -> str:
    """One dtype's tolerance: one ``(atol, rtol)`` pair, or one pair per output of an op returning a tuple.

    >>> tolerance_text("torch.float16", ((1e-3, 2e-3), (0.0, 0.0)))
    'float16 output 0 atol 0.001, rtol 0.002, output 1 bitwise'
    """
    def pair(a, r):
        return "bitwise" if a == r == 0 else f"atol {a:.3g}, rtol {r:.3g}"

    if tol and isinstance(tol[0], (tuple, list)):
        return f"{_dtype(dtype)} " + ", ".join(f"output {i} {pair(*p)}" for i, p in enumerate(tol))
    return f"{_dtype(dtype)} {pair(*tol)}"


def baseline_check(spec) -> list[str]:
    """The tolerances the op's baselines were checked at before they were timed: the op's own, or the looser ones the
    spec declares (``OpSpec.baseline_tolerances``), folded with their reason."""
    line = ("- Baselines: each checked against the reference before it is timed (one that differs computes another "
            "function and is not timed), at the op's tolerances")
    looser = spec.baseline_tolerances
    if looser is None:
        return [line + "."]
    named = ", ".join(_dtype(d) for d in looser.tolerances)
    return [line + f" or, for {named}, at looser ones (below)."] + fold(
        "The baselines' tolerances, and why", [f"- {tolerance_text(d, t)}" for d, t in looser.tolerances.items()]
        + ["", f"Why: {looser.reason}."])


def first(items: list[str], n: int = SHOWN) -> str:
    """``items`` joined, the first ``n`` named and the rest counted (the folded tables list them all).

    >>> first(["a", "b", "c"], 2), first([])
    ('a, b and 1 more (below)', 'none')
    """
    if not items:
        return "none"
    return ", ".join(items[:n]) + (f" and {len(items) - n} more (below)" if len(items) > n else "")


def _first_paragraph(lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        if not line.strip() or line.lstrip().startswith("|"):
            break
        out.append(line)
    return out


def region(ev: Evidence) -> list[str]:
    """The region in a few lines: the spec's opening sentence, the dtypes, the limits on the shape (the shape
    conditions with a number or a threshold in them), and how many conditions the full table below holds."""
    L = _first_paragraph(ev.text("eligibility"))
    pred = ev.spec.predicate
    if pred is None:
        return L
    dtypes = [c for c in pred.conditions if c.category == "dtype"]
    limits = [c for c in pred.conditions if c.category == "shape" and re.search(r"\d|threshold", c.requirement)]
    L += [f"- {name}: " + "; ".join(c.requirement for c in conds) + "."
          for name, conds in (("dtype", dtypes), ("size", limits)) if conds]
    rest = [c.category for c in pred.conditions if c not in dtypes + limits]
    points = sum(len(c.boundaries) for c in pred.conditions)
    L.append(f"- {len(rest)} more conditions ({', '.join(dict.fromkeys(rest))}) and {points} boundary points in "
             "all: the table below.")
    return L


def scope(ev: Evidence) -> list[str]:
    """The losses and the scope restriction they call for: on a GPU, each loss on the fast route (the region admits
    it) and whether it was predeclared, and the row-threshold proposal when the sweep ran; off a GPU, none drawn."""
    d = ev.dispatched
    if not ev.gpu:
        fast = int((d.route != FALLBACK).sum()) if len(d) else 0
        return [f"- Wins, neutral cases and losses: unmeasured ({fast} cases took the fast route, {len(d) - fast} the "
                "fallback); no scope restriction is drawn from these timings."]
    losses = d[(d.observed == LOSS) & (d.route != FALLBACK)]
    if not len(losses):
        L = ["- Scope: no loss inside the region, so the data calls for no restriction of it."]
    else:
        named = first([f"{r.case_id} ({shape_text(r.rows, r.cols)} {r.dtype}"
                       + (", predeclared)" if r.expected == LOSS else ", **not predeclared**)")
                       for r in losses.itertuples()])
        L = [f"- Scope: {len(losses)} loss{'es' if len(losses) != 1 else ''} inside the region: {named}; the "
             "predicate admits them: narrow it or keep them as known losses."]
    prop = (ev.threshold or {}).get("proposal") or {}
    if prop.get("line") or prop.get("reason"):
        L.append(f"- Row threshold from the sweep: {prop.get('line') or prop.get('reason')}.")
    return L


def rerun(ev: Evidence) -> str:
    """The commands that rerun this evidence: :func:`bench_command`, the generated boundary tests, the GPU run."""
    ref = opspec.reference_of(ev.spec)
    line = f"`test_{ev.spec.name}_boundaries = boundary_tests(opspec.load(\"{ref}\"))` (`fastpath_lib.boundary`)"
    line = (f"{line} (off CUDA, `fastpath_lib.use_interpreter()` before it)" if ev.gpu else
            "`import fastpath_lib; fastpath_lib.use_interpreter()` (before the op is loaded: off CUDA its kernels then "
            f"run in Triton's interpreter{', as in this run' if ev.env.get('interpreter') else ''}; on CUDA it does "
            f"nothing), then {line}")
    return (f"- Test: `{bench_command(ev)}` (this run); the boundary tests: `python -m pytest FILE`, FILE holding "
            f"{line}; on a GPU, `python -m fastpath_lib evidence --op {ref} --out DIR` (every step).")


def bench_command(ev: Evidence) -> str:
    """The ``bench`` command that reruns the run ``ev`` holds: its op, and ``--quick`` (``environment.json``'s
    recorded harness), ``--only`` (the matrix cases it ran, where fewer than the declared ones) and ``--family`` (the
    families its rows hold), as that run was given them."""
    args = [f"python -m fastpath_lib bench --op {opspec.reference_of(ev.spec)} --out DIR"]
    if (ev.env.get("harness") or {}).get("quick"):
        args.append("--quick")
    ran = list(dict.fromkeys(ev.matrix.case_id.astype(str))) if "case_id" in ev.matrix.columns else []
    declared = ev.env.get("declared_cases") or ran
    if ran and set(ran) < set(declared):
        args.append(f"--only {','.join(ran)}")
    hosts = len(host_rows(ev.df)) > 0
    if ran and not hosts:
        args.append("--family matrix")
    elif hosts and not ran:
        args.append("--family host")
    return " ".join(args)


def _cell(v) -> str:
    if isinstance(v, (list, tuple)):
        v = ", ".join(map(str, v))
    return str(v).replace("|", "\\|").replace("\n", " ")


def environment_table(ev: Evidence) -> list[str]:
    """Every scalar the environment record holds (``environment.json``; nested records as ``key.field``)."""
    rows = []
    for k, v in ev.env.items():
        items = v.items() if isinstance(v, dict) else [(None, v)]
        for sub, x in items:
            if not isinstance(x, dict):
                rows.append(f"| {k if sub is None else f'{k}.{sub}'} | {_cell(x)} |")
    return ["| key | value |", "|---|---|", *rows] if rows else []


def claim(ev) -> list[str]:
    """The performance claim: the range of speed-ups on the winning cases of a GPU run, *unmeasured* otherwise."""
    if not ev.gpu:
        return [f"- **Performance claim: unmeasured.** The attached timings are {NOT_GPU} ({cpu_mode(ev.env)}): "
                "they show the routes and the harness, not GPU speed, and no speed-up is claimed."]
    wins = ev.dispatched[ev.dispatched.observed == WIN]
    if not len(wins):
        return [f"- Performance ({ev.label}): no predeclared case beats {ev.baseline}; every case is listed below."]
    return [f"- Performance ({ev.label}): speed-ups over {ev.baseline} on {len(wins)} winning "
            f"case{'s' if len(wins) != 1 else ''} range "
            f"{wins.speedup.min():.2f}x to {wins.speedup.max():.2f}x (median time ratio; per case, with its noise "
            "band, below)."]


def measured_on(ev: Evidence) -> str:
    """Where and when: device, versions, commit, time, and the measurement label (left to the claim line when it is
    "not a GPU measurement", so the visible note says that once)."""
    env = ev.env
    where = env.get("device_name") or f"CPU ({env.get('cpu_model', 'unknown')})"
    return (f"- Measured on: {where}, torch {env.get('torch')}, triton {env.get('triton')}, commit "
            f"`{str(env.get('git_commit'))[:12]}`{' (dirty)' if env.get('git_dirty') else ''}, {env.get('timestamp')}"
            + ("." if ev.label == NOT_GPU else f" -- **{ev.label}**."))


def counts_line(ev: Evidence) -> str:
    """How many predeclared cases ran, and the dispatched outcomes (off a GPU: unmeasured and fallback only), with
    the cases the op got wrong where there are any (:func:`~fastpath_lib.bench.analysis.wrong_cases`)."""
    counts = outcome_counts(ev.df)
    shown = OUTCOMES if ev.gpu else (UNMEASURED, FALLBACK)
    return (f"- {coverage_line(ev.df, ev.env)}; dispatched outcomes against {ev.baseline}: "
            + ", ".join(f"{k} {counts[k]}" for k in shown)
            + (f", **wrong {len(wrong_cases(ev.df))}**." if wrong_cases(ev.df) else "."))


def short_matrix(ev: Evidence) -> list[str]:
    """A warning line when the op's predeclared matrix has fewer cases than the kit asks for (:data:`~fastpath_lib.
    opspec.MIN_CASES`); empty otherwise."""
    n = len(ev.spec.matrix())
    return [f"- **Warning: {n} cases (the kit asks for at least {opspec.MIN_CASES})**: the matrix may miss where "
            "the fast path loses or is neutral."] if n < opspec.MIN_CASES else []


def wrong(ev: Evidence) -> list[str]:
    """The note's first lines when the op's own routes gave errors: how many cases are wrong, which, and why (the
    first); empty when none is."""
    bad = wrong_cases(ev.df)
    if not bad:
        return []
    n = len(ev.matrix.drop_duplicates("case_id")) if len(ev.matrix) else len(bad)
    case, why = next(iter(bad.items()))
    return [f"**{len(bad)} of {n} cases wrong: not ready for review.** The op's own route gives an error on "
            f"{first(list(bad))} ({case}: {why}).", ""]
