"""Sentences of the docs about the kit's own rules, asserted against the code that applies them.

Each test reads the sentence from the page (or the exercise text) and the rule from the kit, so rewording one without
the other fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _flat(path: str) -> str:
    return " ".join((ROOT / path).read_text().split())


def _names(text: str) -> set[str]:
    return set(re.findall(r"`(\w+)`", text))


# --- the builtins a kernel may call: the grader's allow-list, out of what Triton's frontend provides -------------

def test_the_docs_builtin_lists_are_the_graders_and_the_rest_of_the_frontends():
    from triton.compiler.code_generator import CodeGenerator

    from fastpath_lib.grading.engine.compile_check import kernel_builtins

    accepted = set(kernel_builtins())
    refused = set(CodeGenerator.builtin_namespace) - accepted
    assert refused, "the grader accepts every builtin Triton's frontend provides: the docs say it refuses some"
    ref = re.search(r"of the Python builtins Triton's frontend provides a kernel, (.*?) \(the grader refuses the "
                    r"others it provides: (.*?)\);", _flat("docs/reference.md"))
    sandbox = re.search(r"one of the Python builtins the frontend provides a kernel that the grader accepts \((.*?); "
                        r"the frontend also provides (.*?), which the grader refuses\)",
                        _flat("docs/grading-sandbox.md"))
    assert ref and sandbox, "the sentences on a kernel's builtins moved: update this test"
    for m in (ref, sandbox):
        assert _names(m.group(1)) == accepted
        assert _names(m.group(2)) == refused


# --- the marker an absent torch operator returns in exercise 08 ------------------------------------------------------

def test_the_marker_is_exact_in_the_dtypes_the_sandbox_page_names_and_those_are_exercise_08s():
    import torch

    from fastpath_lib.grading.checks import ex08_capstone
    from fastpath_lib.grading.rules.borrowed import MARKER

    said = re.search(r"`borrowed\.MARKER` \((-?\d+), exact in (.*?), the dtypes the checks draw;",
                     _flat("docs/grading-sandbox.md"))
    assert said, "the sentence on borrowed.MARKER moved: update this test"
    assert float(said.group(1)) == MARKER
    names = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32, "fp64": torch.float64}
    named = {names[n] for n in re.findall(r"\b(?:fp|bf)\d+\b", said.group(2))}
    # the cases named, and those _drawn_case draws at random (fp32 or fp16)
    drawn = {c.dtype for c in ex08_capstone._CASES + ex08_capstone._DISPATCH_CASES} | {torch.float32, torch.float16}
    assert named == drawn
    for dtype in named:
        assert torch.tensor(MARKER).to(dtype).item() == MARKER, dtype


# --- the kernels the kit shows as templates compute row offsets as exercises 02 and 08 require --------------------

#: Kernels offered as a model for the reader's own: the practitioners' worked example (each ``python`` block of the
#: page), the op modules the kit's tests build from it, the kit's own kernels and the upstream forms.
_TEMPLATES = ("tests/absmax_op.py", "tests/bias_square_op.py", "fastpath_lib/rmsnorm/kernels.py",
              "fastpath_lib/fused/kernels.py", "fastpath_lib/selftest.py",
              "upstream/vllm/vllm/kernels/triton/layernorm.py")


def _template_sources() -> dict[str, str]:
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "practitioners.md").read_text(), re.S)
    out = {f"docs/practitioners.md block {i}": b for i, b in enumerate(blocks) if "@triton.jit" in b}
    assert out, "docs/practitioners.md shows no kernel: update this test"
    return out | {p: (ROOT / p).read_text() for p in _TEMPLATES}


def test_every_template_kernel_passes_the_graders_int64_row_offset_rule():
    from fastpath_lib.grading.rules.kernel_source import _Source
    from fastpath_lib.grading.rules.row_offsets import offset_problem

    seen = 0
    for where, text in _template_sources().items():
        src = _Source(text)
        for name, fn in src.kernels.items():
            seen += 1
            assert offset_problem(src, fn) is None, (where, name, offset_problem(src, fn))
    assert seen >= 8


def test_the_int64_rule_refuses_the_int32_form_of_the_practitioners_example():
    from fastpath_lib.grading.rules.kernel_source import _Source
    from fastpath_lib.grading.rules.row_offsets import offset_problem

    text = next(iter(_template_sources().values())).replace("tl.program_id(0).to(tl.int64)", "tl.program_id(0)")
    src = _Source(text)
    assert any(offset_problem(src, fn) for fn in src.kernels.values())


# --- the backward's counted traffic against its model --------------------------------------------------------------

def test_the_benchmarks_pages_backward_count_is_the_scratch_in_place_of_dw():
    import torch

    from fastpath_lib.bench import mechanism
    from fastpath_lib.bench.timing import bytes_moved

    m = re.search(r"\(([\d,]+) counted against ([\d,]+) modelled at (\d+)x(\d+) bf16: ([\d,]+) bytes of scratch "
                  r"instead of ([\d,]+) of `dw`\)", _flat("docs/benchmarks.md"))
    assert m, "the sentence on the backward's count moved: update this test"
    counted, model, rows, cols, scratch, dw = (int(g.replace(",", "")) for g in m.groups())
    assert model == bytes_moved(rows, cols, torch.bfloat16, "backward")
    assert dw == cols * 2 and counted - model == scratch - dw
    ok, why = mechanism.explain({"pass": "backward", "rows": rows, "cols": cols, "dtype": "bfloat16",
                                 "bytes_moved": model, "counted_bytes": counted, "scratch_bytes": scratch})
    assert ok and "in place of the dw the model writes" in why, why


# --- the memory rule exercise 02's check holds, as instructors.md states it ----------------------------------------

def test_instructors_state_exercise_02s_memory_rule_clause_by_clause():
    from fastpath_lib.grading.checks.ex02_kernel import MEMORY_RULE

    said = re.search(r"the memory rule the exercise prints \(`ex02_kernel\.MEMORY_RULE`: (.*?)\), and the feedback",
                     _flat("docs/instructors.md"))
    assert said, "instructors.md's sentence on ex02's memory rule moved: update this test"
    assert said.group(1).split("; ") == [c.split(" (")[0] for c in MEMORY_RULE]


# --- the device and architecture conditions: the predicate's table and exercise 13 say what the checks do ----------

def test_the_device_rule_the_table_and_exercise_13_state_is_the_predicates():
    from types import SimpleNamespace

    from fastpath_lib.grading.checks.ex13_review import DEVICE_RULE
    from fastpath_lib.rmsnorm.limits import Limits, check_arch
    from fastpath_lib.rmsnorm.predicate import PREDICATE, _check_device

    def ctx(dev, interpret):
        return SimpleNamespace(device_type=dev, interpret=interpret, capability=(7, 0), limits=Limits())

    holds = {(d, i): _check_device(ctx(d, i)) is None for d in ("cuda", "cpu") for i in (False, True)}
    assert holds == {("cuda", False): True, ("cpu", True): True, ("cuda", True): False, ("cpu", False): False}
    judged = {(d, i) for d in ("cuda", "cpu") for i in (False, True) if check_arch(ctx(d, i)) is not None}
    assert judged == {("cuda", False)}  # an sm_70 is refused only where the architecture is judged
    why = {c.name: c.why for c in PREDICATE.conditions}
    assert "on a CPU only the interpreter runs them, and a CUDA tensor fails while it is on" in why["device"]
    assert "judged only on CUDA with the interpreter off" in why["architecture"]
    assert "a CUDA tensor while the interpreter is on fails `device`" in DEVICE_RULE
    assert "`architecture` is judged only on CUDA with the interpreter off" in DEVICE_RULE


# --- reference.md owns the kernel rules exercises 02 and 08 state -------------------------------------------------

def test_reference_md_owns_the_kernel_rules_exercises_02_and_08_state():
    """The section both exercises link to states every rule their checks hold (``STATED``), in the checks' words."""
    from fastpath_lib.grading.checks import ex02_kernel, ex08_capstone

    page = _flat("docs/reference.md")
    section = page.split("## A kernel in the grader (exercises 02 and 08)", 1)[1].split("## ", 1)[0]
    for rule in {*ex02_kernel.STATED, *ex08_capstone.STATED}:
        assert " ".join(rule.split()) in section, rule


# --- the practitioners' guide: every kit name it gives exists, and the two questions prac14 asked are answered ------

#: Placeholders the guide writes in a name's place (``OpSpec.NAME``: any field), not names.
PLACEHOLDERS = {"OpSpec.NAME"}


def _kit_name_missing(name: str) -> bool:
    """Whether a dotted name the guide gives (``fastpath_lib.X.Y``, ``opspec.X``, ``OpSpec.field``) resolves to
    nothing in the kit: the longest importable module prefix, then attributes; ``OpSpec.X`` a field or attribute."""
    import dataclasses
    import importlib

    from fastpath_lib import opspec

    parts = name.split(".")
    if parts[0] == "OpSpec":
        return not (parts[1] in {f.name for f in dataclasses.fields(opspec.OpSpec)} or hasattr(opspec.OpSpec, parts[1]))
    if name == opspec.ENTRY_POINTS:  # the entry-point group the guide names, not a module
        return False
    parts = ["fastpath_lib", "opspec", *parts[1:]] if parts[0] == "opspec" else parts
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return True
            obj = getattr(obj, attr)
        return False
    return True


def test_every_kit_name_the_practitioners_guide_gives_exists():
    """prac14 asked whether the ``compiled`` baseline is built by the practitioner or the kit, and found
    ``opspec.compiled`` undocumented: every ``fastpath_lib.…``, ``opspec.…`` and ``OpSpec.…`` name the guide gives in
    code resolves in the kit, so a documented field cannot be a missing one (nor a renamed one left in the text)."""
    text = (ROOT / "docs" / "practitioners.md").read_text()
    names = set(re.findall(r"`((?:fastpath_lib|opspec|OpSpec)\.[A-Za-z_][\w.]*\w)", text)) - PLACEHOLDERS
    assert {"fastpath_lib.opspec.compiled", "OpSpec.case_spec", "opspec.HostCase"} <= names, sorted(names)
    missing = sorted(n for n in names if _kit_name_missing(n))
    assert not missing, f"docs/practitioners.md names what the kit lacks: {missing}"
    assert _kit_name_missing("opspec.compiled_baseline") and _kit_name_missing("OpSpec.weight")  # the check can fail


def test_the_practitioners_guide_says_what_cols_is_and_who_builds_the_compiled_baseline():
    """prac14: the guide said neither what ``cols`` means for an op whose output is narrower than its input nor
    whether the ``compiled`` baseline is the practitioner's to build. It says both: ``cols`` is the input rows' width
    (``silu_and_mul``'s ``2d``), and the practitioner names the baseline built by the kit's helper, which the kit
    times; the helper is the one the guide names (``torch.compile`` of the composite, built on its first call)."""
    import inspect

    from fastpath_lib import opspec

    text = _flat("docs/practitioners.md")
    assert ("the width of the op's input rows as its case class builds them, also for an op whose output is narrower"
            in text and "has `cols = 2d`" in text)
    assert ('named `compiled` is `torch.compile` of the composite, which you build with the kit\'s helper: '
            '`baselines={"eager": composite, "compiled": opspec.compiled(composite)}`') in text
    assert opspec.COMPILED == "compiled" and "torch.compile" in inspect.getsource(opspec.compiled)
