"""Draft the PR note of any registered operator from a results folder (or a DataFrame): concise Markdown a reviewer
can check claim by claim, in the kit's own form or in the target project's template (:data:`TEMPLATES`).

One function per section (:data:`SECTIONS`, in :mod:`~fastpath_lib.bench.note_sections`), each taking the same
:class:`Evidence` (:mod:`~fastpath_lib.bench.note_evidence`) and returning its lines; the tables are drawn in
:mod:`~fastpath_lib.bench.note_tables`, the workload lines in :mod:`~fastpath_lib.bench.note_workload`. Every
op-specific sentence comes from the operator's :class:`~fastpath_lib.opspec.OpSpec` (its title, baseline, predicate,
and the ``pr_text`` sentences keyed by :data:`PR_TEXT_KEYS`; a key the spec leaves out gets a sentence built from
its other fields), so the note of one op says nothing about another. The note never states a speed-up from CPU or
interpreter timings: such runs are labelled "not a GPU measurement", their outcomes read *unmeasured* and the
performance claim is marked *unmeasured*, in every template. Times in microseconds.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from fastpath_lib.bench import templates
from fastpath_lib.bench.analysis import classify
from fastpath_lib.bench.note_evidence import PR_TEXT_KEYS, Evidence, fmt, junit_counts, read_json, spec_of
from fastpath_lib.bench.note_sections import SECTIONS
from fastpath_lib.bench.note_tables import compiled_section, host_mechanism, mechanism_table
from fastpath_lib.bench.results import load_results
from fastpath_lib.bench.schema import is_gpu_measurement, measurement_label
from fastpath_lib.opspec import OpSpec

__all__ = ["pr_note", "junit_counts", "Evidence", "SECTIONS", "PR_TEXT_KEYS", "TEMPLATES", "NOTE_FILES", "fmt",
           "host_mechanism", "compiled_section", "mechanism_table"]

#: The note's forms: the kit's own sections, vLLM's PR template (the PyTorch form: ``templates.DROPPED`` says where).
TEMPLATES = ("kit", "vllm")
#: template -> the file ``bench --op`` writes its note to, beside the results.
NOTE_FILES = {"kit": "pr_note.md", "vllm": "pr_note_vllm.md"}


def pr_note(results_dir: str | Path | None = None, *, df: pd.DataFrame | None = None, env: dict | None = None,
            tests: dict | str | Path | None = None, replay: dict | None = None, compile_cost: dict | None = None,
            threshold: dict | None = None, compiled: list | None = None, manifest: dict | None = None,
            owner: str = "the PR author", allow_incomplete: bool = False, spec: OpSpec | str | None = None,
            template: str = "kit") -> str:
    """Draft the PR note of one operator, in the kit's form or in the target project's template.

    Args:
        results_dir: a results folder (reads ``results.csv``, ``environment.json``, and ``replay.json``,
            ``compile_cost.json``, ``threshold.csv``, ``threshold_proposal.json``, ``compiled.json``,
            ``manifest.json`` and ``tests/*.xml`` when present).
        df, env: results and environment instead of a folder (e.g. synthetic data in a test or a lesson; set
            ``env["synthetic"] = True`` and the note says so).
        tests: semantic evidence: a JUnit XML path or a counts dict (``{"suite": {"tests": n, "failures": 0}}`` or
            a flat counts dict); ``None`` reads the folder's ``tests/*.xml`` or says "not attached".
        replay, compile_cost, threshold, compiled, manifest: analyses (default: read from the folder).
        owner: who maintains the kernel when new architectures arrive.
        allow_incomplete: read a folder still being written (the evidence command's last step).
        spec: the operator (an :class:`~fastpath_lib.opspec.OpSpec` or a registered name; default: the op the
            results name in ``environment.json``'s ``op``, else the default op): the title, the baseline and every
            op-specific sentence come from it.
        template: ``"kit"`` (the kit's sections, :data:`SECTIONS`) or ``"vllm"`` (vLLM's PR template: Purpose,
            Test Plan, Test Result, (Optional) Documentation Update, AI Assistance, its checklist; for an op vLLM
            has, the patch in ``upstream/``); see :data:`TEMPLATES`. The PyTorch form is written with its patch (the
            error says where).

    Returns:
        Markdown text.

    Raises:
        ValueError: an unknown or dropped template (the message lists the choices, or says why), an unregistered op
            name, or a spec whose
            ``pr_text`` has unknown keys.

    Note:
        When ``gpu_measurement`` is false the note carries no speed-up, in every template: it says "not a GPU
        measurement" and marks the performance claim unmeasured, listing routes and expectations only.
    """
    if template in templates.DROPPED:
        raise ValueError(f"PR note template {template!r}: {templates.DROPPED[template]}")
    if template not in TEMPLATES:
        raise ValueError(f"unknown PR note template {template!r}; choose one of: {', '.join(TEMPLATES)}")
    folder = Path(results_dir) if results_dir is not None else None
    if df is None:
        df, env = load_results(folder, allow_incomplete=allow_incomplete)
    elif "observed" not in df.columns:
        df = classify(df)
    env = dict(env or df.attrs.get("environment") or {})
    gpu = is_gpu_measurement(df, env)
    if threshold is None and folder is not None and (folder / "threshold.csv").exists():
        threshold = {"table": pd.read_csv(folder / "threshold.csv"),
                     "proposal": read_json(folder, "threshold_proposal.json")}
    if tests is None and folder is not None and (folder / "tests").is_dir():
        tests = {p.stem: junit_counts(p) for p in sorted((folder / "tests").glob("*.xml"))} or None
    def given_or_read(value, name):
        return value if value is not None else read_json(folder, name)

    ev = Evidence(df=df, env=env, gpu=gpu, synthetic=bool(env.get("synthetic")), label=measurement_label(env, df),
                  tests=tests, replay=given_or_read(replay, "replay.json"),
                  compile_cost=given_or_read(compile_cost, "compile_cost.json"), threshold=threshold,
                  compiled=given_or_read(compiled, "compiled.json"), manifest=given_or_read(manifest, "manifest.json"),
                  owner=owner, spec=spec_of(spec, env))
    if template != "kit":
        note = templates.render(template, ev, {f.__name__: f(ev) for f in SECTIONS})
    else:
        note = "\n".join([f"# {ev.title}", ""] + templates.synthetic_banner(ev)
                         + [line for section in SECTIONS for line in section(ev) + [""]])
    return re.sub(r"\n{3,}", "\n\n", note)  # one blank line between blocks, however the folds meet
