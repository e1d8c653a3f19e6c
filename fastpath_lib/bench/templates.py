"""The PR note in the target project's own template: vLLM's (``pr_note(..., template="vllm")``).

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
- vLLM and PyTorch now ask contributors to disclose the use of AI tools: the form ends with that field, unticked.

There is no PyTorch form (:data:`DROPPED`): PyTorch's eager ATen takes no Triton kernel, so a Triton RMSNorm has no
file to change in PyTorch; it lands in vLLM (the patch the vLLM form describes) or in a Triton kernel library.

The visible lines come from :mod:`fastpath_lib.bench.note_brief`, the full tables from the kit's sections, folded in
``<details>`` as in the kit's own form; the evidence is read through the attributes
:class:`~fastpath_lib.bench.note_evidence.Evidence` has.
"""

from __future__ import annotations

from fastpath_lib.bench.note_brief import claim, counts_line, fold, measured_on, region, rerun, scope
from fastpath_lib.bench.note_evidence import qualified
from fastpath_lib.bench.note_sections import run_limitations
from fastpath_lib import opspec
from fastpath_lib.bench.schema import NOT_GPU

__all__ = ["render", "claim", "test_plan", "qualified", "synthetic_banner", "vllm_change", "vllm_baselines",
           "patch_files", "HEADINGS", "DROPPED", "VLLM_PATCH", "VLLM_TEST", "TRITON_OP_UNDER_THE_INTERPRETER",
           "PATCH_LIMITATIONS"]

#: The change the vLLM form proposes: a diff against the pinned vLLM release (``tools/make_upstream.py`` writes it).
VLLM_PATCH = "upstream/vllm_rms_norm_triton.patch"
#: vLLM's tests of the change, in vLLM's tree (the patch adds the file).
VLLM_TEST = "tests/kernels/core/test_rms_norm_triton.py"
#: Each template's level-2 headings, in order.
HEADINGS = {
    "vllm": ("Purpose", "Test Plan", "Test Result", "(Optional) Documentation Update", "AI Assistance"),
}
#: Forms the kit no longer writes, and why (``pr_note`` raises with this).
DROPPED = {
    "pytorch": "the PyTorch form was dropped: PyTorch's eager ATen takes no Triton kernel, so a Triton RMSNorm has no "
               "file to change in PyTorch; it lands in vLLM (template='vllm': the patch in upstream/) or in a Triton "
               "kernel library such as Liger-Kernel, under that project's own template",
}
#: The vLLM form's Limitations: what is true of the patch (one patch for both ops). The kit op's own lines (the spec's
#: ``pr_text["limitations"]``, e.g. that ``fastpath_lib.rms_norm`` takes the fallback under CUDA-graph capture until
#: its capture test passed) describe its predicate, not the patch, and stay in the kit's form.
PATCH_LIMITATIONS = [
    "- The patch's Triton path refuses neither CUDA-graph capture nor small batches; other calls take `vllm_c`.",
    *fold("Its capture test, its timings", [
        "- Its CUDA-graph test (1-32 decode tokens captured and replayed) needs a CUDA GPU: no kit step runs it.",
        "- The timings are the kit's own op (the kernels the patch vendors); the patched `forward_cuda` is untimed."]),
]
#: What the kit measured of ``torch.library.triton_op`` under Triton's interpreter (the launcher the patch uses).
TRITON_OP_UNDER_THE_INTERPRETER = (
    "`torch.library.triton_op` + `wrap_triton` under Triton's interpreter (torch 2.13.0+cpu, Triton 3.8.0, CPU; "
    "measured by the kit): eager calls, `torch.ops.vllm.*` calls and the in-place op (`mutates_args`) run and match "
    "the reference; `torch.compile` over the op fails on the CPU (Dynamo's fake-tensor pass runs the interpreter's "
    "launcher, which reads data pointers: \"Cannot access data pointer of Tensor (e.g. FakeTensor\"). On a GPU "
    "Inductor traces `wrap_triton` into its graph instead; not run here.")


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
    ref = opspec.reference_of(spec)
    return L + ["", "```bash", f"python -m fastpath_lib bench --op {ref} --out results/{spec.name}-DEVICE",
                f"python -m fastpath_lib evidence --op {ref} --out results/evidence-DEVICE   # on the GPU: every step",
                "```"]


def _body(lines: list[str]) -> list[str]:
    """A kit section without its ``## `` heading."""
    i = 1 if lines and lines[0].startswith("## ") else 0
    while i < len(lines) and not lines[i]:
        i += 1
    return lines[i:]


def _flat(lines: list[str]) -> list[str]:
    """``lines`` without their ``<details>`` markers, to fold them whole (the kit's folds are never nested)."""
    return [ln for ln in lines if not ln.startswith(("<details>", "</details>", "<summary>"))]


def _sub(title: str, lines: list[str]) -> list[str]:
    return [f"### {title}", ""] + _body(lines) + [""]


def patch_files(root=None) -> list[tuple[str, int, int]]:
    """``(path, lines added, lines removed)`` of each file :data:`VLLM_PATCH` changes (empty without the patch)."""
    from fastpath_lib import runtime

    path = (root or runtime.ROOT) / VLLM_PATCH
    if not path.is_file():
        return []
    out = []
    for chunk in path.read_text().split("diff --git a/")[1:]:
        lines = chunk.splitlines()
        out.append((chunk.split(" ", 1)[0], sum(ln.startswith("+") and not ln.startswith("+++") for ln in lines),
                    sum(ln.startswith("-") and not ln.startswith("---") for ln in lines)))
    return out


def _max_cols(spec) -> str:
    """The widest row the op's limits admit (``?`` when its spec gives no limits)."""
    return str(getattr(spec.limits(None), "max_cols", "?")) if spec.limits else "?"


def vllm_change(ev) -> list[str]:
    """What the PR changes in vLLM, when the new path runs, how a user turns it on and off with vLLM's current
    settings, and decode under CUDA graphs (vLLM 0.33's ``RMSNorm``, ``CustomOp`` and ``KernelConfig``)."""
    op = ev.text("vllm_op")[0] if ev.text("vllm_op") else ""
    if not op:
        return [f"- vLLM: no vLLM op is named for `{ev.spec.name}` (the spec's `pr_text[\"vllm_op\"]`), so no change "
                "to vLLM is proposed here."]
    files = [f"- `{f}` (+{a} -{r})" for f, a, r in patch_files()]
    return (["- The change: `" + VLLM_PATCH + "`, a diff against vLLM's release generated from the kit's kernels."]
            + fold("The files the patch changes", files or [f"- `{VLLM_PATCH}` is not in this checkout."])
            + ["- When it runs: `RMSNorm.forward_cuda` on CUDA with `rms_norm_backend=\"triton\"`, where the call's "
               f"metadata allow (contiguous fp16/bf16/fp32 rows up to {_max_cols(ev.spec)} wide, the weight "
               "in x's dtype); "
               "otherwise, and by default (`\"auto\"`), vLLM's current path (`vllm_c`).",
               "- On/off: `--kernel-config '{\"rms_norm_backend\": \"triton\"}'` (off: `\"auto\"`). Under Inductor, "
               "vLLM's default, custom ops are off (Inductor compiles the native code): add "
               "`--compilation-config '{\"custom_ops\": [\"+rms_norm\"]}'`.",
               "- Decode under CUDA graphs: no row threshold and no refusal of capture (the test captures 1-32 "
               "tokens)."])


def _baseline_status(ev, name: str) -> str:
    rows = ev.matrix[ev.matrix.provider == name] if len(ev.matrix) else ev.matrix
    ok = rows[rows.status == "ok"] if len(rows) else rows
    if len(ok):
        return f"timed on {len(ok)} cases" + ("" if ev.gpu else " (off a GPU: no comparison drawn)")
    if len(rows):
        notes = sorted(set(rows.note.dropna().astype(str)))
        return "not run" + (f" ({notes[0][:160]})" if notes else "")
    return "not in this run"


def vllm_baselines(ev) -> list[str]:
    """The baselines a vLLM reviewer asks for, and whether this evidence has them."""
    from fastpath_lib.opspec import COMPILED

    return [f"- Baselines: `vllm_c` (custom ops on): {_baseline_status(ev, 'vllm_c')}; Inductor's native (custom "
            f"ops off, `{COMPILED}`): {_baseline_status(ev, COMPILED)}; Liger-Kernel's RMSNorm (where installed): "
            f"{_baseline_status(ev, 'liger')}; decode under CUDA graphs: "
            + ("the capture step below." if ev.gpu else "unmeasured.")]


def _vllm_checked(ev) -> list[str]:
    """What the kit's own test of the patch checks, labelled, with its counts where the evidence carries them."""
    tests = ev.tests if isinstance(ev.tests, dict) else {}
    counts = next((c for k, c in tests.items() if "vllm" in str(k) and isinstance(c, dict)), None)
    got = (", ".join(f"{k} {v}" for k, v in counts.items()) if counts else
           "not attached to this evidence")
    return ["- The patch, checked by the kit's `pytest tests/test_vllm_upstream.py` (Triton interpreter on a CPU: "
            "values, no timing): it applies, passes ruff and mypy at vLLM's settings, and its `forward_cuda` matches "
            f"vLLM's native at 0-83 tokens. Result: {got}."]


def _results(ev, sections: dict) -> list[str]:
    """The evidence, section by section: where it was measured, tests, every case, mechanism, workload, limits (the
    kit's sections, whose full tables are folded)."""
    summary = _body(sections["summary"])
    env = summary[summary.index("<details>"):summary.index("</details>") + 1] if "<details>" in summary else []
    return ([measured_on(ev)] + env + [counts_line(ev), ""] + _sub("Semantic evidence", sections["semantic"])
            + _sub("Every predeclared case", sections["performance"]) + _sub("Mechanism", sections["mechanism"])
            + ["### Workload replay"] + fold("End to end: the kit's decoder replay and serving trace", _flat(
                _body(sections["workload"])))
            + ["### Why not an existing primitive or torch.compile"]
            + fold("torch.compile and the further baselines", _body(sections["alternatives"]))
            + _sub("Limitations (not covered, or unmeasured)", sections["limitations"]))


def _vllm(ev, sections: dict) -> list[str]:
    done = "x" if ev.gpu and not ev.synthetic else " "  # a constructed table shows the format, it proves nothing
    result = (f"The test results, before and after: every case against {ev.baseline} above ({ev.label})." if ev.gpu
              else f"The test results' before/after comparison: unmeasured ({NOT_GPU}); the semantic results above.")
    in_vllm = bool(ev.text("vllm_op"))
    plan = (["On a CUDA GPU, in vLLM's checkout at the release the patch is for:", "", "```bash",
             f"git apply {VLLM_PATCH.rsplit('/', 1)[1]}", f"pytest {VLLM_TEST} -v",
             "pytest tests/kernels/core/test_layernorm.py -v   # the default path", "```", ""]
            if in_vllm else [])
    kit_plan = test_plan(ev)
    kit_plan = kit_plan[:kit_plan.index("```bash") - 1] if "```bash" in kit_plan else kit_plan
    kit_plan = fold("The kit's tests behind it: contract and tolerances, boundary points, matrix", _flat(kit_plan))
    maintain = _body(sections["maintenance"]) + (["", f"- {TRITON_OP_UNDER_THE_INTERPRETER}"] if in_vllm else [])
    eligibility = ((["### Eligibility region and fallback"]
                    + fold("The kit's own op's region (the patch's is under Purpose)", region(ev) + [""]
                           + ev.text("eligibility")))
                   if in_vllm else _sub("Eligibility region and fallback", sections["eligibility"]))
    if in_vllm:  # the Limitations describe the patch, not the kit op's predicate
        sections = dict(sections, limitations=run_limitations(ev) + PATCH_LIMITATIONS)
    return ([f"# [Kernel] {ev.title}", ""] + synthetic_banner(ev)
            + ["## Purpose", ""] + ev.text("summary") + [""] + vllm_change(ev) + claim(ev) + scope(ev) + [""]
            + eligibility
            + ["## Test Plan", ""] + plan + kit_plan + [rerun(ev), ""]
            + ["## Test Result", ""] + (_vllm_checked(ev) + vllm_baselines(ev) if in_vllm else [])
            + _results(ev, sections)
            + ["## (Optional) Documentation Update", "",
               ("The option's docstring (`KernelConfig.rms_norm_backend`) documents it."
                if in_vllm else f"None proposed by this draft: the fast path keeps the contract of "
                f"`{qualified(ev.spec.reference)}` and adds no user-facing option."), ""]
            + fold("What a maintainer needs to know", maintain)
            + ["## AI Assistance", "",
               "For the author to tick (the kit cannot know how the code was written):", "",
               "- [ ] No AI tools were used for this change.",
               "- [ ] AI tools were used: which, for what, and the author reviewed every line.", ""]
            + ["---", "<details>", "<summary> Essential Elements of an Effective PR Description Checklist </summary>",
               "", "- [x] The purpose of the PR: Purpose above.",
               "- [x] The test plan, with the commands: Test Plan above.",
               f"- [{done}] {result}",
               "- [ ] (Optional) The necessary documentation update: see above.",
               "- [ ] (Optional) Release notes update: left to the author.", "</details>"])


_RENDER = {"vllm": _vllm}


def render(template: str, ev, sections: dict) -> str:
    """The note in ``template`` (a key of :data:`HEADINGS`), from the evidence and the kit's sections by name."""
    return "\n".join(_RENDER[template](ev, sections)) + "\n"
