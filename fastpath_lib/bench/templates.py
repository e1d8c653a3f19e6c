"""The PR note in the target project's own template: vLLM's and PyTorch's (``pr_note(..., template=...)``).

Both forms are filled from the same evidence as the kit's own (:class:`~fastpath_lib.bench.report.Evidence` and the
bodies of the kit's sections), so they refuse the same claims: off a GPU they carry no speed-up figure, name the
timings "not a GPU measurement" and mark the performance claim unmeasured; a checklist item the evidence does not
support stays unticked.

What each project asks for (read from the projects, 2026):

- vLLM, ``.github/PULL_REQUEST_TEMPLATE.md``: sections Purpose, Test Plan, Test Result (an earlier version also
  (Optional) Documentation Update), then a checklist "Essential Elements of an Effective PR Description" (purpose,
  test plan with the command, test results with a before/after comparison, optional documentation and release-notes
  updates) folded in a ``<details>`` block; its contributing guide asks for a category prefix in the title,
  ``[Kernel]`` for compute kernels.
- PyTorch, ``.github/PULL_REQUEST_TEMPLATE.md``: the issue the PR fixes and a checklist (CONTRIBUTING.md read,
  ``lintrunner -a`` run); its PR bodies carry a Summary and a Test Plan.

The visible lines come from :mod:`fastpath_lib.bench.note_brief`, the full tables from the kit's sections, folded in
``<details>`` as in the kit's own form; the evidence is read through the attributes
:class:`~fastpath_lib.bench.note_evidence.Evidence` has.
"""

from __future__ import annotations

from fastpath_lib.bench.note_brief import claim, counts_line, fold, measured_on, scope
from fastpath_lib.bench.note_evidence import qualified
from fastpath_lib.bench.schema import NOT_GPU

__all__ = ["render", "claim", "test_plan", "qualified", "synthetic_banner", "vllm_provider", "HEADINGS",
           "VLLM_PROVIDER"]

#: The provider name the kit registers for its ``vllm.ir`` ops.
VLLM_PROVIDER = "fastpath_triton"
#: Each template's level-2 headings, in order.
HEADINGS = {
    "vllm": ("Purpose", "Test Plan", "Test Result", "(Optional) Documentation Update"),
    "pytorch": ("Summary", "Test Plan"),
}


def synthetic_banner(ev) -> list[str]:
    """The warning a note drafted from a constructed table opens with (nothing otherwise)."""
    if not ev.synthetic:
        return []
    return ["> **SYNTHETIC DATA** -- this note was drafted from a constructed table to show the format; no number in "
            "it was measured.", ""]


def _dtype(d) -> str:
    return str(d).replace("torch.", "")


def _tolerance(dtype, tol) -> str:
    """One dtype's tolerance: one ``(atol, rtol)`` pair, or one pair per output of an op returning a tuple."""
    def pair(a, r):
        return "bitwise" if a == r == 0 else f"atol {a:.3g}, rtol {r:.3g}"

    if tol and isinstance(tol[0], (tuple, list)):
        return f"{_dtype(dtype)} " + ", ".join(f"output {i} {pair(*p)}" for i, p in enumerate(tol))
    return f"{_dtype(dtype)} {pair(*tol)}"


def test_plan(ev) -> list[str]:
    """What was tested and how to rerun it, from the spec: the contract, the boundary points, the matrix."""
    spec = ev.spec
    tol = [f"- {_tolerance(d, t)}" for d, t in spec.tolerances.items()]
    L = [f"- Contract: `{qualified(spec.function)}` against its reference `{qualified(spec.reference)}` within the "
         f"op's tolerances{'' if tol else ' (none declared)'}."] + fold("The op's tolerances, per dtype", tol)
    if spec.predicate is not None:
        conds = spec.predicate.conditions
        L.append(f"- Eligibility: {sum(len(c.boundaries) for c in conds)} boundary points from the predicate's "
                 f"{len(conds)} conditions (`fastpath_lib.boundary.boundary_points`), each checked for route and "
                 "value.")
    L.append("- Performance: the predeclared matrix (each expected outcome written before the run), timed against "
             f"{', '.join(f'`{b}`' for b in spec.baselines)}.")
    return L + ["", "```bash", f"python -m fastpath_lib bench --op {spec.name} --out results/{spec.name}-DEVICE",
                "python -m fastpath_lib evidence --out results/evidence-DEVICE   # on the GPU: every step, one folder",
                "```"]


def _body(lines: list[str]) -> list[str]:
    """A kit section without its ``## `` heading."""
    i = 1 if lines and lines[0].startswith("## ") else 0
    while i < len(lines) and not lines[i]:
        i += 1
    return lines[i:]


def _sub(title: str, lines: list[str]) -> list[str]:
    return [f"### {title}", ""] + _body(lines) + [""]


def vllm_provider(ev) -> list[str]:
    """What the PR adds to vLLM: the ``vllm.ir`` op, the provider, the plugin that registers it, and the priority
    without which it never runs (vLLM 0.33's ``vllm/ir/op.py`` and ``KernelConfig.ir_op_priority``)."""
    op = ev.text("vllm_op")[0] if ev.text("vllm_op") else ""
    if not op:
        return [f"- vLLM: no `vllm.ir` op is named for `{ev.spec.name}` (the spec's `pr_text[\"vllm_op\"]`), so no "
                "provider is proposed here."]
    return [f"- vLLM: adds the provider `{VLLM_PROVIDER}` to `vllm.ir.ops.{op}`, registered by the kit's "
            "`vllm.general_plugins` entry point (`pip install` the kit into vLLM's environment).",
            "- Enable it (else vLLM runs `native`): "
            f"`vllm.ir.ops.{op}.set_priority([\"{VLLM_PROVIDER}\", \"native\"])` (a context manager), or vLLM's config "
            f"`--ir-op-priority '{{\"{op}\": [\"{VLLM_PROVIDER}\"]}}'` "
            "(`KernelConfig.ir_op_priority`, platform defaults appended; deprecated in vLLM 0.33, to go in v0.34.0)."]


def _results(ev, sections: dict) -> list[str]:
    """The evidence, section by section: where it was measured, tests, every case, mechanism, workload, limits (the
    kit's sections, whose full tables are folded)."""
    summary = _body(sections["summary"])
    env = summary[summary.index("<details>"):summary.index("</details>") + 1] if "<details>" in summary else []
    return ([measured_on(ev)] + env + [counts_line(ev), ""] + _sub("Semantic evidence", sections["semantic"])
            + _sub("Every predeclared case", sections["performance"]) + _sub("Mechanism", sections["mechanism"])
            + _sub("Workload replay", sections["workload"])
            + _sub("Why not an existing primitive or torch.compile", sections["alternatives"])
            + _sub("Limitations (not covered, or unmeasured)", sections["limitations"]))


def _vllm(ev, sections: dict) -> list[str]:
    done = "x" if ev.gpu and not ev.synthetic else " "  # a constructed table shows the format, it proves nothing
    result = (f"The test results, before and after: every case against {ev.baseline} above ({ev.label})." if ev.gpu
              else f"The test results' before/after comparison: unmeasured ({NOT_GPU}); the semantic results above.")
    return ([f"# [Kernel] {ev.title}", ""] + synthetic_banner(ev)
            + ["## Purpose", ""] + ev.text("summary") + [""] + vllm_provider(ev) + claim(ev) + scope(ev) + [""]
            + _sub("Eligibility region and fallback", sections["eligibility"])
            + ["## Test Plan", ""] + test_plan(ev) + [""]
            + ["## Test Result", ""] + _results(ev, sections)
            + ["## (Optional) Documentation Update", "",
               f"None proposed by this draft: the fast path keeps the contract of `{qualified(ev.spec.reference)}` "
               "and adds no user-facing option.", ""]
            + fold("What a maintainer needs to know", _body(sections["maintenance"]))
            + ["---", "<details>", "<summary> Essential Elements of an Effective PR Description Checklist </summary>",
               "", "- [x] The purpose of the PR: Purpose above.",
               "- [x] The test plan, with the commands: Test Plan above.",
               f"- [{done}] {result}",
               "- [ ] (Optional) The necessary documentation update: none proposed (see above).",
               "- [ ] (Optional) Release notes update: left to the author.", "</details>"])


def _pytorch(ev, sections: dict) -> list[str]:
    return ([f"# {ev.title}", ""] + synthetic_banner(ev)
            + ["Fixes #ISSUE_NUMBER <!-- the issue this PR resolves: the kit does not know it -->", ""]
            + ["## Summary", ""] + ev.text("summary") + [""] + claim(ev) + scope(ev) + [""]
            + _sub("Eligibility region and fallback", sections["eligibility"])
            + ["### Maintenance", ""] + fold("What a maintainer needs to know", _body(sections["maintenance"]))
            + ["## Test Plan", ""] + test_plan(ev) + [""] + _results(ev, sections)
            + ["- [ ] I am familiar with CONTRIBUTING.md.",
               "- [ ] I ran `lintrunner -a` and fixed the errors relevant to this change."])


_RENDER = {"vllm": _vllm, "pytorch": _pytorch}


def render(template: str, ev, sections: dict) -> str:
    """The note in ``template`` (a key of :data:`HEADINGS`), from the evidence and the kit's sections by name."""
    return "\n".join(_RENDER[template](ev, sections)) + "\n"
