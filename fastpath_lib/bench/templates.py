"""The PR note in the target project's own template: vLLM's (``pr_note(..., template="vllm")``).

For an op whose spec names a vLLM IR op the kit's vLLM patch provides (the spec's ``pr_text["vllm_op"]``, one of
:func:`patch_ops`), the vLLM form describes that patch alone (:func:`patch_note`): the change to vLLM, why, how vLLM
chooses it, its tests and what is unmeasured; the kit op's tables describe another code path and stay in the kit's
form. For any other op the vLLM form is filled from the same evidence as the kit's own
(:class:`~fastpath_lib.bench.report.Evidence` and the bodies of the kit's sections); one naming a vLLM IR op the patch
does not provide says that no patch is generated for it.
Both refuse the same claims: off a GPU they carry no speed-up figure, name the
timings "not a GPU measurement" and mark the performance claim unmeasured; a checklist item the evidence does not
support stays unticked.

What each project asks for (read from the projects, 2026):

- vLLM, ``.github/PULL_REQUEST_TEMPLATE.md``: sections Purpose, Test Plan, Test Result (an earlier version also
  (Optional) Documentation Update), then a checklist "Essential Elements of an Effective PR Description" (purpose,
  test plan with the command, test results with a before/after comparison, optional documentation and release-notes
  updates) folded in a ``<details>`` block; its contributing guide asks for a category prefix in the title,
  ``[Kernel]`` for compute kernels.
- vLLM and PyTorch now ask contributors to disclose the use of AI tools: the form ends with that field, unticked.

The PyTorch form is not drawn from this evidence (:data:`DROPPED`): torch 2.13 takes Triton kernels into eager ATen
through ``torch/_native`` (``register_op_override`` with a ``cond`` and an ``impl``), and the PyTorch note describes
that patch alone (``upstream/pytorch_native_rms_norm_triton.patch``); ``tools/make_pytorch_native.py`` writes it
with the patch, in PyTorch's template (``upstream/pytorch_native_pr_note.md``).

In the second case the visible lines come from :mod:`fastpath_lib.bench.note_brief`, the full tables from the kit's
sections, folded in ``<details>`` as in the kit's own form; the evidence is read through the attributes
:class:`~fastpath_lib.bench.note_evidence.Evidence` has.
"""

from __future__ import annotations

import re

from fastpath_lib import opspec
from fastpath_lib.bench.note_brief import (baseline_check, claim, counts_line, fold, measured_on, rerun, scope,
                                           short_matrix, tolerance_text, wrong)
from fastpath_lib.bench.note_evidence import qualified
from fastpath_lib.bench.schema import NOT_GPU
from fastpath_lib.boundary import value_regimes

__all__ = ["render", "claim", "test_plan", "qualified", "synthetic_banner", "patch_note", "patch_files", "HEADINGS",
           "DROPPED", "VLLM_PATCH", "VLLM_TEST", "PATCH_TITLE", "PATCH_KERNEL", "patch_accepts", "patch_ops",
           "PATCH_BENCHMARKS", "vllm_ir_line"]

#: The change the vLLM form proposes: a diff against the pinned vLLM release (``tools/make_upstream.py`` writes it).
VLLM_PATCH = "upstream/vllm_rms_norm_triton.patch"
#: vLLM's tests of the change, in vLLM's tree (the patch adds the file).
VLLM_TEST = "tests/kernels/core/test_rms_norm_triton.py"
#: Each template's level-2 headings, in order.
HEADINGS = {
    "vllm": ("Purpose", "Test Plan", "Test Result", "(Optional) Documentation Update", "AI Assistance"),
}
#: Forms ``pr_note`` does not write, and where they are (``pr_note`` raises with this).
DROPPED = {
    "pytorch": "pr_note drafts no PyTorch form, for any op: the kit's PyTorch form is the note of its own "
               "torch/_native patch, which python tools/make_pytorch_native.py writes with the patch, as "
               "upstream/pytorch_native_pr_note.md",
}
#: The vLLM form's title, for an op the patch provides.
PATCH_TITLE = "[Kernel] Triton providers of the vLLM IR ops rms_norm and fused_add_rms_norm"
#: The file the patch adds, as the kit keeps it (``upstream/vllm/`` holds the patch's new files at their vLLM paths).
PATCH_KERNEL = "upstream/vllm/vllm/kernels/triton/layernorm.py"


def patch_accepts(root=None) -> str:
    """What the patch's ``supports_args`` accept, its width limit read from :data:`PATCH_KERNEL` itself."""
    import re

    from fastpath_lib import runtime

    path = (root or runtime.ROOT) / PATCH_KERNEL
    found = re.search(r"^_MAX_HIDDEN_SIZE = (\d+)$", path.read_text(), re.M) if path.is_file() else None
    widest = found.group(1) if found else "(the patch's limit: its file is not in this checkout)"
    return (f"a contiguous fp16, bf16 or fp32 `x` on the platform's device with a last dimension of 1 to {widest}; "
            "the weight absent or a contiguous `[hidden_size]` of any of those dtypes; for the fused op a "
            "residual of `x`'s shape and dtype, contiguous; no `variance_size`")


#: The GPU data a vLLM reviewer asks for before any priority names the provider.
PATCH_BENCHMARKS = [
    "- `benchmarks/kernels`-style timings in bf16 at hidden sizes 2048-8192: `triton` against `vllm_c` (custom ops "
    "on, eager and under CUDA graphs, decode batches 1-256) and against Inductor's compiled `native` under vLLM's "
    "default compile, with the pass config pinned;",
    "- an accuracy run of one model with `triton` first in the priority and without it.",
]


def synthetic_banner(ev) -> list[str]:
    """The warning a note drafted from a constructed table opens with (nothing otherwise)."""
    if not ev.synthetic:
        return []
    return ["> **SYNTHETIC DATA** -- this note was drafted from a constructed table to show the format; no number in "
            "it was measured.", ""]


def test_plan(ev) -> list[str]:
    """What was tested and how to rerun it, from the spec: the contract, the boundary points, the matrix."""
    spec = ev.spec
    tol = [f"- {tolerance_text(d, t)}" for d, t in spec.tolerances.items()]
    L = [f"- Contract: `{qualified(spec.function)}` against its reference `{qualified(spec.reference)}` within the "
         f"op's tolerances{'' if tol else ' (none declared)'}."] + fold("The op's tolerances, per dtype", tol)
    if spec.predicate is not None:
        conds = spec.predicate.conditions
        regimes = len(value_regimes(spec)) if spec.boundary_base is not None and spec.limits is not None else 0
        L.append(f"- Eligibility: {sum(len(c.boundaries) for c in conds)} boundary points from the predicate's "
                 f"{len(conds)} conditions" + (f" and {regimes} value regimes" if regimes else "")
                 + " (`fastpath_lib.boundary.boundary_tests`), each checked for route and value.")
    L.append("- Performance: the predeclared matrix (each expected outcome written before the run), timed against "
             f"{', '.join(f'`{b}`' for b in spec.baselines)}.")
    L += baseline_check(spec)
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


def patch_ops(root=None) -> tuple[str, ...]:
    """The vLLM IR ops the patch provides, read from :data:`PATCH_KERNEL` itself (each
    ``@ir.ops.NAME.register_impl(``); empty without the file."""
    import re

    from fastpath_lib import runtime

    path = (root or runtime.ROOT) / PATCH_KERNEL
    text = path.read_text() if path.is_file() else ""
    return tuple(dict.fromkeys(re.findall(r"^@ir\.ops\.(\w+)\.register_impl\(", text, re.M)))


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


def patch_note(ev) -> list[str]:
    """vLLM's form for an op the patch provides: the change to vLLM, why, how it is chosen, its tests and what is
    unmeasured; nothing of the kit's own op or tooling (its tables, predicate or timings describe another code
    path). Every statement about vLLM is checked against the pinned wheel (``config/kernel.py``,
    ``platforms/cuda.py``, ``config/vllm.py``)."""
    files = [f"- `{f}` (+{a} -{r})" for f, a, r in patch_files()] or [f"- `{VLLM_PATCH}` is not in this checkout."]
    claim = ("- Performance claim: unmeasured" + ("" if ev.gpu else f" ({NOT_GPU})") + ": no GPU has timed this "
             "provider; no speed-up over `vllm_c` or Inductor's `native` is claimed.")
    return ([f"# {PATCH_TITLE}", ""] + synthetic_banner(ev) + ["## Purpose", "",
            "This PR adds `\"triton\"` providers of `vllm.ir.ops.rms_norm` and `vllm.ir.ops.fused_add_rms_norm` in a "
            "new `vllm/kernels/triton/layernorm.py`, registered the way `vllm/kernels/triton/activation.py` registers "
            "`gelu_and_mul_sparse`: `register_impl(\"triton\", supported=HAS_TRITON and current_platform.is_cuda(), "
            "supports_args=...)`, one `@triton.jit` kernel launched through `torch.library.triton_op` and "
            "`wrap_triton`. It adds no config field and changes no layer and no platform default.", "",
            "Why: on CUDA the platform's default priority is `[\"native\"]` under Inductor (Inductor compiles the "
            "native function) and `[\"vllm_c\", \"native\"]` without it; with `VLLM_USE_OINK_OPS` set, `\"oink\"` "
            "comes first for both norm ops (`CudaPlatform.get_default_ir_op_priority`). A Triton provider is a "
            "third choice that keeps native's rounding points (the normalized row rounded to the weight's dtype, "
            "then the product); only the fp32 sum and `1 / tl.sqrt` (native: `torch.rsqrt`) can move a last bit. "
            "Whether it is faster than `vllm_c` or Inductor's `native` anywhere is unmeasured: the benchmarks "
            "below decide its motivation. Under Inductor the IR op stays in the graph for vLLM's fusion passes.", "",
            f"- It takes a call with {patch_accepts()}; any other call goes to the next provider in the priority.",
            "- Decode under CUDA graphs: no token-count threshold and nothing refused under capture.",
            "- To try it: `--kernel-config '{\"ir_op_priority\": {\"rms_norm\": [\"triton\"], "
            "\"fused_add_rms_norm\": [\"triton\"]}}'` (vLLM appends the platform's default). "
            "`KernelConfig.ir_op_priority` says: \"Deprecated: vLLM IR is being removed, and this option will be "
            "removed in v0.34.0. Kernels will be selected by the platform, as for other custom ops.\" Whether "
            "new IR providers land in this window is the IR maintainers' call.",
            "- Side effect: `enable_norm_fusion` (`vllm/config/vllm.py`) holds when `ir_op_priority.rms_norm[0] != "
            "\"native\"`, so `triton` first under Inductor also turns on `fuse_norm_quant` at O1-O3.",
            claim, ""] + fold("The files the patch changes", files)
            + ["## Test Plan", "", "On a CUDA GPU, in vLLM's checkout at the release the patch is for:", "", "```bash",
               f"git apply {VLLM_PATCH.rsplit('/', 1)[1]}", f"pytest {VLLM_TEST} -v",
               "pytest tests/compile/passes/ir/test_lowering.py -v   # vLLM's: each of supported_providers()",
               "```"] + fold("What the new tests check", [
                "The new tests launch the kernel where `supports_args` accepts (a spy on the launch), check that "
                "nothing is launched where it defers (strided rows, `variance_size`, 16385 wide), cover zero "
                "tokens, 3-D input, no weight and an fp32 weight, follow the layer through the priority, and trace "
                "the layer with Dynamo to find the IR op in the graph. They pin native's numbers: in fp16 and bf16, "
                "mixed weight dtypes included, every output whose rounding does not depend on rstd's last bits "
                "equals native's bit for bit, the fused op's residual output everywhere; rows of zeros and tiny rows "
                "with a large epsilon match native. The fused provider is registered `inplace=True`, as `vllm_c` "
                "is: `maybe_inplace` writes into `x` and `x_residual`, the functional overload leaves them."])
            + ["Before a priority names the provider:",
               ""] + PATCH_BENCHMARKS + [""]
            + ["## Test Result", "",
               "- Under Triton's interpreter on a CPU (values, no timing), the test harness converting fp32 to bf16 "
               "as a GPU does (round to nearest even; Triton 3.8's interpreter truncates): the patch applies to "
               "vLLM 0.33.0's files, passes ruff and mypy at vLLM's settings, and its tests pass, none skipped. "
               "There, at 4x4096, fp16 and bf16 outputs equal native's (eager, CPU) bit for bit, with and without "
               "weight and residual; fp32 is within vLLM's tolerance. On a GPU `tl.sqrt` is Triton's fast square "
               "root and `/` is not `tl.div_rn`: more elements may differ there, unmeasured.",
               "- On a GPU: not yet run; the benchmarks in the Test Plan are the data this PR waits for.", "",
               "## (Optional) Documentation Update", "",
               "None: no option is added and nothing changes by default.", ""]
            + _ai_and_checklist(f"The test results' before/after comparison: unmeasured ({NOT_GPU}); no GPU has "
                                "timed the provider, the interpreter results are above.", " "))


def _ai_and_checklist(result: str, done: str) -> list[str]:
    return (["## AI Assistance", "",
             "For the author to tick:", "",
             "- [ ] No AI tools were used for this change.",
             "- [ ] AI tools were used: which, for what, and the author reviewed every line.", ""]
            + ["---", "<details>", "<summary> Essential Elements of an Effective PR Description Checklist </summary>",
               "", "- [x] The purpose of the PR: Purpose above.",
               "- [x] The test plan, with the commands: Test Plan above.",
               f"- [{done}] {result}",
               "- [ ] (Optional) The necessary documentation update: see above.",
               "- [ ] (Optional) Release notes update: left to the author.", "</details>"])


def _results(ev, sections: dict) -> list[str]:
    """The evidence, section by section: where it was measured, tests, every case, mechanism, workload, limits (the
    kit's sections, whose full tables are folded)."""
    summary = _body(sections["summary"])
    env = summary[summary.index("<details>"):summary.index("</details>") + 1] if "<details>" in summary else []
    return ([measured_on(ev)] + env + [counts_line(ev)] + short_matrix(ev) + [""]
            + _sub("Semantic evidence", sections["semantic"])
            + _sub("Every predeclared case", sections["performance"]) + _sub("Mechanism", sections["mechanism"])
            + ["### Workload replay"] + fold("End to end: the kit's decoder replay and serving trace", _flat(
                _body(sections["workload"])))
            + ["### Why not an existing primitive or torch.compile"]
            + fold("torch.compile and the further baselines", _body(sections["alternatives"]))
            + _sub("Limitations (not covered, or unmeasured)", sections["limitations"]))


def vllm_ir_line(ev, ir_op: str) -> str:
    """What the run found of the vLLM IR op the spec names (``pr_text["vllm_op"]``), read off its vLLM dispatch rows
    (vLLM's own registry, ``vllm.ir.op.IrOp.registry``, asked in the timing process): provided, absent from this
    vLLM's IR (with what that vLLM has for it instead, its CustomOp layer and the ``torch.ops._C`` kernel it calls,
    :mod:`fastpath_lib.bench.vllm_source`), or not checked; and that the kit generates no vLLM patch for it."""
    rows = ev.df[ev.df["case_id"].astype(str).str.startswith(f"vllm_{ir_op}_")] if "case_id" in ev.df else ev.df[:0]
    notes = [n for n in rows.get("note", []) if isinstance(n, str) and n]
    absent = [n for n in notes if "has no IR op" in n]
    if absent:
        what = absent[0].removeprefix("skipped: ")
        found = f"The spec names the vLLM op `{ir_op}`: {what}; the op provides no vLLM IR op"
    elif any("provides no" in n for n in notes):
        found = (f"vLLM has `vllm.ir.ops.{ir_op}`, but the kit's vLLM provider module (fastpath_lib.vllm_plugin) "
                 "registers no implementation of it")
    elif len(rows) and (rows["status"] == "ok").any():
        found = f"The op provides `vllm.ir.ops.{ir_op}` (vLLM's registry has it)"
    else:
        why = notes[0] if notes else "no vLLM dispatch was timed"
        found = f"The spec names the vLLM op `{ir_op}`; whether vLLM has it was not checked ({why})"
    return f"{found}; no vLLM patch is generated for it (the kit's vLLM patch does not provide that IR op)."


def vllm_layer_lines(ev, ir_op: str) -> tuple[list[str], list[str]]:
    """For an op vLLM has as a CustomOp layer, not an IR op (read off the run's vLLM rows, :func:`vllm_ir_line`):
    the Purpose's lines (vLLM's own kernel, the baseline a reviewer compares with, and whether this run timed it;
    where a Triton kernel enters vLLM) and the Test Plan's line (the vLLM tests the spec names,
    ``pr_text["vllm_tests"]``, or that it names none); ``([], [])`` where the run found no such layer."""
    rows = ev.df[ev.df["case_id"].astype(str).str.startswith(f"vllm_{ir_op}_")] if "case_id" in ev.df else ev.df[:0]
    notes = [n for n in rows.get("note", []) if isinstance(n, str) and "has no IR op" in n]
    layer = re.search(r"CustomOp layer `(\w+)` \(`([^`]+)`", notes[0]) if notes else None
    if layer is None:
        return [], []
    cls, path = layer.groups()
    kernels = sorted(set(re.findall(r"`torch\.ops\._C\.(\w+)`", notes[0])))
    names = list(ev.spec.baselines)
    kernel = " / ".join(f"`torch.ops._C.{k}`" for k in kernels) or "vLLM's compiled kernel"
    timed = ("off a GPU it cannot run" if not ev.gpu else
             f"the run times the spec's baselines ({', '.join(f'`{n}`' for n in names)}), declare one that calls it")
    purpose = [f"- vLLM's own kernel for it, {kernel} (which `{cls}` calls), is the baseline a vLLM reviewer compares "
               f"a Triton {ir_op} with; this run did not time it ({timed}).",
               f"- Where a Triton {ir_op} enters vLLM: not as an IR provider (vLLM has no IR op {ir_op}) but through "
               f"the layer: a branch in `{cls}.forward_cuda` (`{path}`) in a vLLM PR, or, out of tree, a subclass "
               f"registered with `@{cls}.register_oot` (vLLM's `CustomOp.register_oot`: vLLM then builds it "
               f"wherever a model builds `{cls}`).", ""]
    tests = list(ev.text("vllm_tests"))
    plan = [("- vLLM's own tests for it (named by the spec, `pr_text[\"vllm_tests\"]`): "
             + ", ".join(f"`{t}`" for t in tests) + "; a vLLM PR runs them beside the kit's.") if tests else
            f"- vLLM's own tests for `{cls}`: none named by the spec (`pr_text[\"vllm_tests\"]`); a vLLM PR names "
            "the vLLM tests that cover the layer and runs them beside the kit's.", ""]
    return purpose, plan


def _vllm(ev, sections: dict) -> list[str]:
    ir_op = next(iter(ev.text("vllm_op")), None)  # the vLLM IR op the spec says the op provides
    if ir_op in patch_ops():  # an op the patch provides: the note describes the patch alone
        return patch_note(ev)
    no_patch = [vllm_ir_line(ev, ir_op), ""] if ir_op else []
    layer, layer_tests = vllm_layer_lines(ev, ir_op) if ir_op else ([], [])
    done = "x" if ev.gpu and not ev.synthetic else " "  # a constructed table shows the format, it proves nothing
    result = (f"The test results, before and after: every case against {ev.baseline} above ({ev.label})." if ev.gpu
              else f"The test results' before/after comparison: unmeasured ({NOT_GPU}); the semantic results above.")
    kit_plan = test_plan(ev)
    kit_plan = kit_plan[:kit_plan.index("```bash") - 1] if "```bash" in kit_plan else kit_plan
    kit_plan = fold("The kit's tests behind it: contract and tolerances, boundary points, matrix", _flat(kit_plan))
    return ([f"# [Kernel] {ev.title}", ""] + synthetic_banner(ev)
            + ["## Purpose", ""] + wrong(ev) + ev.text("summary") + [""] + no_patch + layer + claim(ev) + scope(ev)
            + [""]
            + _sub("Eligibility region and fallback", sections["eligibility"])
            + ["## Test Plan", ""] + kit_plan + [rerun(ev), ""] + layer_tests
            + ["## Test Result", ""] + _results(ev, sections)
            + ["## (Optional) Documentation Update", "",
               f"None proposed by this draft: the fast path keeps the contract of `{qualified(ev.spec.reference)}` "
               "and adds no user-facing option.", ""]
            + fold("What a maintainer needs to know", _body(sections["maintenance"]))
            + _ai_and_checklist(result, done))


_RENDER = {"vllm": _vllm}


def render(template: str, ev, sections: dict) -> str:
    """The note in ``template`` (a key of :data:`HEADINGS`), from the evidence and the kit's sections by name."""
    return "\n".join(_RENDER[template](ev, sections)) + "\n"
