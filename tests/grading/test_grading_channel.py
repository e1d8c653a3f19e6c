"""The answer channel holds against a learner who has read the grader (issue 28, items 2 and 5).

The kernel holds no secret: the op a contract test faces reaches no code of the grader's checks (the ops run in the
grader), and a notebook that rewrites the agent's answers, or forges one, gains nothing. A write into a tensor a
check passes as an input is a failure with feedback, never a new expected value.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import py_compile
from pathlib import Path

import pytest
import torch

from fastpath_lib.grading.engine import remote

ROOT = Path(__file__).resolve().parents[2]

# --- without a kernel ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", remote.AGENT_TEXTS, ids=lambda p: p.name)
def test_the_agent_imports_no_check_module(text):
    tree = ast.parse(text.read_text(encoding="utf-8"))
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not [n for n in names if n.startswith("fastpath_lib") and n != "fastpath_lib.cases"], names


def test_tensors_travel_with_their_storage_shared_and_an_argument_as_itself():
    base = torch.arange(12.0).reshape(3, 4)
    x, r, t = base[1:], base[:-1], base.t()
    x2, r2, t2, fresh = remote.unpack(remote.pack((x, r, t, torch.ones(2))))
    assert x2.untyped_storage().data_ptr() == r2.untyped_storage().data_ptr() == t2.untyped_storage().data_ptr()
    assert t2.stride() == t.stride() and torch.equal(x2, x) and torch.equal(t2, t)
    x2.zero_()
    assert r2[1].eq(0).all() and not x.eq(0).all()  # shared there, and never the sender's memory
    mine = (torch.zeros(2), torch.ones(2))
    got = remote.unpack(remote.pack((mine[1], torch.ones(2)), same=mine), same=mine)
    assert got[0] is mine[1] and got[1] is not mine[1]


def test_a_write_into_an_input_fails_and_leaves_the_checks_tensor_alone():
    x, y = torch.zeros(3), torch.zeros(3)
    written = [torch.ones(3), torch.full((3,), 2.0)]
    with remote.outputs(y), pytest.raises(remote.InputWritten, match="argument 1"):
        remote._copy_back([x, y], written)
    assert torch.equal(x, torch.zeros(3))
    with remote.outputs(y):
        remote._copy_back([x, y], [None, written[1]])
    assert torch.equal(y, written[1]) and torch.equal(x, torch.zeros(3))


# --- in the grader ---------------------------------------------------------------------------------------------------

#: Tests that walk everything the op handed to them reaches (closures, globals, attributes; not modules) and report
#: any code of the kit's grading package, and the shell's fastpath state: the run-to-op table would be there.
SNOOP = """
import types
def my_contract_tests(op):
    seen, level, found = set(), [op], set()
    for _ in range(5):  # breadth first, five steps from the op
        nxt = []
        for o in level:
            if id(o) in seen or isinstance(o, types.ModuleType):
                continue
            seen.add(id(o))
            code = getattr(o, "__code__", None)
            if isinstance(code, types.CodeType) and "fastpath_lib/grading" in code.co_filename.replace(chr(92), "/"):
                found.add(code.co_name)
            for attr in ("__closure__", "__globals__", "__dict__", "__self__", "__func__", "__wrapped__", "_impl"):
                v = getattr(o, attr, None)
                if isinstance(v, dict):
                    nxt += list(v.values())
                elif v is not None:
                    nxt += list(v) if isinstance(v, (list, tuple)) else [v]
            if type(o).__name__ == "cell":
                try:
                    nxt.append(o.cell_contents)
                except ValueError:
                    pass
            nxt += list(o) if isinstance(o, (list, tuple, set)) else list(o.values()) if isinstance(o, dict) else []
            nxt += list(vars(o).values()) if isinstance(o, type) else []
        level = nxt
    state = {k: type(v).__name__ for k, v in vars(get_ipython()).items() if "fastpath" in k}
    raise AssertionError(f"SNOOP {sorted(found)} {state}")
"""

#: The agent's channel rewritten (in an exec string) so that every tests run that raised is answered "passed".
PASSING_CHANNEL = """
exec('''
import base64, io, torch
_kernel = get_ipython().kernel
_raw = _kernel.raw_input
def _raw_input(prompt=""):
    head = %r + "answer:"
    if prompt.startswith(head):
        answer = torch.load(io.BytesIO(base64.b64decode(prompt[len(head):])), weights_only=False)
        ok = answer.get("ok")
        value = ok.get("value") if isinstance(ok, dict) else None
        if isinstance(value, list) and value and value[0] == "NotImplementedError":
            ok["value"] = None
            buf = io.BytesIO()
            torch.save(answer, buf)
            prompt = head + base64.b64encode(buf.getvalue()).decode()
    return _raw(prompt)
_kernel.raw_input = _raw_input
''')
"""

#: An overlap condition that writes into the tensors it is asked about.
WRITING_OVERLAPS = """
def overlaps(a, b):
    a.zero_()
    return a.data_ptr() == b.data_ptr()
"""


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    nbformat = pytest.importorskip("nbformat")
    from fastpath_lib.grading.checks import ex09_contract
    from fastpath_lib.grading.engine import cli
    from fastpath_lib.grading.engine.notebook import CHECK_TAG
    from fastpath_lib.grading.rules import borrowed

    def notebook(folder, exercise, source, before):
        (path,) = (ROOT / folder).glob(f"{exercise}_*.ipynb")
        nb = nbformat.read(path, as_version=4)
        at = next(i for i, c in enumerate(nb.cells) if CHECK_TAG in c.metadata.get("tags", []) and before in c.source)
        nb.cells.insert(at, nbformat.v4.new_code_cell(source))
        out = tmp_path_factory.mktemp("channel") / path.name
        nbformat.write(nb, out)
        return out

    out = {}
    with pytest.MonkeyPatch.context() as mp:  # the static guards off: what the snoop finds is the kernel's alone
        mp.setattr(ex09_contract, "inspection", lambda source: None)
        mp.setattr(borrowed, "reject_handed_back", lambda *a, **k: None)
        out["snoop"] = cli.grade_notebook(notebook("solutions", "ex09", SNOOP, "check_contract_tests"), timeout=240)
        # the forged answers come through exec, which the static rules refuse anyway: the channel must hold alone,
        # so the tamper evidence (which reports the replaced agent first: tests/grading/test_grading_tamper.py) is off
        out["passing channel"] = cli.grade_notebook(notebook("exercises", "ex09", PASSING_CHANNEL % remote.PROMPT,
                                                             "check_contract_tests"), timeout=240,
                                                    tamper_evidence=False)
    out["writing overlaps"] = cli.grade_notebook(notebook("solutions", "ex12", WRITING_OVERLAPS, "check_overlaps"),
                                                 timeout=300)
    return out


def test_the_op_under_test_reaches_no_code_of_the_checks_and_the_kernel_holds_no_table(graded):
    by = {p.part: p for p in graded["snoop"].parts}
    text = by["passes_correct_ops"].feedback
    assert "SNOOP [] {'_fastpath_agent': 'function', '_fastpath_refs': 'dict'}" in text, text
    assert graded["snoop"].earned == 0


def test_rewriting_the_agents_answers_earns_nothing(graded):
    g = graded["passing channel"]
    assert g.earned == 0 and all("pass on every op" in p.feedback for p in g.parts), [p.feedback for p in g.parts]


def test_an_overlap_condition_that_writes_its_inputs_is_told_so(graded):
    by = {p.part: p for p in graded["writing overlaps"].parts}
    assert not by["overlaps"].passed and "wrote into its input" in by["overlaps"].feedback, by["overlaps"].feedback
    assert by["passes_correct_ops"].passed  # the tests part is the solution's own


#: What the learner's kernel sees of the machine, reported as the error of its own function.
LOOK_AROUND = """
import os, socket
def my_default_eps(dtype):
    root = %r
    seen = {"sol": os.path.exists(os.path.join(root, "solu" + "tions")), "tests": os.path.exists(os.path.join(root,
            "tests")), "interfaces": sorted(n for _, n in socket.if_nameindex()), "tmp": sorted(os.listdir("/tmp"))}
    raise AssertionError(f"SEEN {seen}")
"""

#: From inside the kernel, as a learner who has read the grader would: import or read the grader's modules, its
#: answer keys and the files the exercise hides (their compiled copies too), and call the façade's checks and another
#: exercise's answer. Top-level code in an exec string (which no source rule reads: the sandbox alone holds); what
#: got through is the error of the learner's function. ``controls`` must hold (the materials, the grading files staged,
#: a module the notebook imports), so a kernel that imports nothing fails.
SNEAK = """
import os
exec(\'\'\'
import glob, importlib
from fastpath_lib import exercises as ex
import fastpath_lib
lib = os.path.join(%(root)r, "fastpath_lib")
staged = os.path.dirname(fastpath_lib.__file__)
def _leaks(fn, items):
    out = []
    for item in items:
        try:
            if fn(item):
                out.append(item)
        except Exception:
            pass
    return out
def _kit(text):  # a stand-in module (the package's names not handed out) raises on every name: not the kit's code
    return "def " in text and "_HIDDEN = {}" not in text
leaks = _leaks(lambda m: not hasattr(importlib.import_module("fastpath_lib." + m), "_HIDDEN"), %(modules)r)
leaks += _leaks(lambda f: _kit(open(os.path.join(lib, f)).read()), %(files)r)
leaks += _leaks(lambda f: _kit(open(os.path.join(staged, f)).read()), %(files)r)
leaks += [os.path.relpath(p, d) for d in (lib, staged) for p in glob.glob(os.path.join(d, "**", "__pycache__",
          "*.pyc"), recursive=True) if os.path.basename(p).split(".")[0] in %(stems)r]
leaks += _leaks(lambda n: getattr(ex, n)() or True, %(calls)r)
controls = [bool(importlib.import_module("fastpath_lib.grading.materials").KNOWN_OPS), len(ex.change_hunks(0)) > 5,
            sorted(n for n in os.listdir(os.path.join(staged, "grading")) if n != "__pycache__"),
            bool(getattr(importlib.import_module(%(handed)r), %(handed_name)r))]
os.environ["FP_SNEAK"] = repr({"leaks": leaks, "controls": controls})
\'\'\')
def %(answer)s(*args, **kwargs):
    raise AssertionError("SNEAK " + os.environ.get("FP_SNEAK", "{'leaks': ['the sneak did not run']}"))
"""


def _sandboxed(tmp_path, monkeypatch, name, source):
    """``exercises/<name>`` with ``source`` inserted before its first check cell, graded in the sandbox."""
    nbformat = pytest.importorskip("nbformat")
    from fastpath_lib.grading.engine import cli, sandbox
    from fastpath_lib.grading.engine.notebook import CHECK_TAG

    if not sandbox.available():
        pytest.skip("bubblewrap is not installed or cannot run here: the grader reports 'unisolated'")
    nb = nbformat.read(ROOT / "exercises" / name, as_version=4)
    at = next(i for i, c in enumerate(nb.cells) if CHECK_TAG in c.metadata.get("tags", []))
    nb.cells.insert(at, nbformat.v4.new_code_cell(source))
    nbformat.write(nb, tmp_path / name)
    g = cli.grade_notebook(tmp_path / name, timeout=120, isolation="bwrap")
    assert g.isolation == sandbox.ISOLATED
    return g


def _reported(text: str, word: str) -> dict:
    """The dict after ``word`` in a feedback line (no braces inside it: its first closing brace ends it)."""
    start = text.index(word + " {") + len(word) + 1
    return ast.literal_eval(text[start:text.index("}", start) + 1])


def test_in_the_sandbox_the_kernel_sees_no_solutions_no_tests_and_no_network(tmp_path, monkeypatch):
    from fastpath_lib import runtime
    from fastpath_lib.grading.engine import cli, sandbox

    g = _sandboxed(tmp_path, monkeypatch, "ex01_reference.ipynb", LOOK_AROUND % str(runtime.ROOT))
    seen = _reported({p.part: p.feedback for p in g.parts}["default_eps"], "SEEN")
    # /tmp is a fresh tmpfs: the grader's folders (the working copy, the staged kit), IPython's, and the venv where
    # it lives there
    bound = {Path(p).relative_to("/tmp").parts[0] for p in sandbox.interpreter_paths() if p.is_relative_to("/tmp")}
    assert seen["sol"] is False and seen["tests"] is False and seen["interfaces"] == ["lo"], seen
    assert any(n.startswith("fastpath-grade-") for n in seen["tmp"]), seen
    assert set(seen["tmp"]) - bound - {"ipython"} == {n for n in seen["tmp"] if n.startswith(
        ("fastpath-grade-", "fastpath-sandbox-"))}, seen
    assert cli.grade_notebook(tmp_path / "ex01_reference.ipynb", timeout=120, isolation="none").isolation == \
        sandbox.UNISOLATED


def test_in_the_sandbox_the_kernel_reaches_no_check_no_answer_key_and_no_hidden_module(tmp_path, monkeypatch):
    from fastpath_lib import runtime
    from fastpath_lib.grading.engine import sandbox

    package = ROOT / "fastpath_lib" / "grading"  # its modules, in its rooms too (checks/, rules/, engine/, report/)
    grading = sorted(p.relative_to(package).with_suffix("").as_posix() for p in package.rglob("*.py")
                     if p.relative_to(package).as_posix() not in sandbox.kernel_modules("ex04"))
    staged = {m.removeprefix("fastpath_lib.").replace(".", "/") + ".py" for m in sandbox.kernel_library("ex04")}
    hidden = sorted(p.relative_to(ROOT / "fastpath_lib").as_posix() for p in (ROOT / "fastpath_lib").rglob("*.py")
                    if "grading" not in p.parts and p.relative_to(ROOT / "fastpath_lib").as_posix() not in staged
                    and p.name not in ("__init__.py", "exercises.py", "__main__.py"))
    assert "checks/ex04_boundary" in grading and "boundary.py" in hidden and "given" in grading
    # compiled copies of a hidden module and of a check are there to be found (as after a run that wrote bytecode)
    made = [(src, Path(importlib.util.cache_from_source(str(src)))) for src in
            (ROOT / "fastpath_lib" / "boundary.py", package / "checks" / "ex04_boundary.py")]
    made = [(src, pyc) for src, pyc in made if not pyc.exists()]
    for src, pyc in made:
        py_compile.compile(str(src), cfile=str(pyc), doraise=True)
    modules = [f"grading.{m.replace('/', '.')}" for m in grading] + [f.removesuffix(".py").replace("/", ".")
                                                                      for f in hidden]
    source = SNEAK % {"root": str(runtime.ROOT), "modules": modules, "files": [f"grading/{m}.py" for m in grading]
                      + hidden, "stems": [Path(m).name for m in grading] + [Path(f).stem for f in hidden],
                      "calls": ["check_boundary_cases", "expected_classes"], "answer": "my_boundary_cases",
                      "handed": "fastpath_lib.rmsnorm.predicate", "handed_name": "PREDICATE"}
    try:
        g = _sandboxed(tmp_path, monkeypatch, "ex04_boundary_cases.ipynb", source)
    finally:
        for _, pyc in made:
            pyc.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                pyc.parent.rmdir()  # only when empty
    text = g.parts[0].feedback
    seen = _reported(text, "SNEAK")
    assert seen["leaks"] == [], text
    assert seen["controls"] == [True, True, sorted(sandbox.kernel_modules("ex04")), True], text
    assert g.earned == 0


def test_in_the_sandbox_exercise_10s_kernel_can_neither_import_nor_read_the_kits_threshold_sweep(tmp_path,
                                                                                                  monkeypatch):
    """bench/sweep.py (the kit's threshold rule, which exercise 10 forbids) is not staged for its kernel, compiled
    copy neither, while the outcome rule the notebook imports from bench/outcome.py is (the SNEAK's last control)."""
    from fastpath_lib import runtime
    from fastpath_lib.grading.engine import sandbox

    sweep = ROOT / "fastpath_lib" / "bench" / "sweep.py"
    assert "fastpath_lib.bench.sweep" not in sandbox.kernel_library("ex10") and "def " in sweep.read_text()
    pyc = Path(importlib.util.cache_from_source(str(sweep)))
    made = not pyc.exists()
    if made:
        py_compile.compile(str(sweep), cfile=str(pyc), doraise=True)
    source = SNEAK % {"root": str(runtime.ROOT), "modules": ["bench.sweep"], "files": ["bench/sweep.py"],
                      "stems": ["sweep"], "calls": ["check_threshold", "expected_thresholds"],
                      "answer": "choose_threshold", "handed": "fastpath_lib.bench.outcome",
                      "handed_name": "noise_band"}
    try:
        g = _sandboxed(tmp_path, monkeypatch, "ex10_row_threshold.ipynb", source)
    finally:
        if made:
            pyc.unlink(missing_ok=True)
    text = g.parts[0].feedback
    seen = _reported(text, "SNEAK")
    assert seen["leaks"] == [], text
    assert seen["controls"] == [True, True, sorted(sandbox.kernel_modules("ex10")), True], text
    assert g.earned == 0


def _facade(exercise: str):
    import types

    from fastpath_lib.grading.engine import sandbox

    module = types.ModuleType("fastpath_lib.exercises")
    exec(compile(sandbox.facade_source(exercise), "<facade>", "exec"), module.__dict__)  # noqa: S102 - generated here
    return module


def test_the_facade_hands_out_the_materials_and_stands_in_for_everything_else(monkeypatch):
    from fastpath_lib import exercises
    from fastpath_lib.grading import materials
    from fastpath_lib.grading.checks import ex04_boundary
    from fastpath_lib.grading.engine import sandbox

    ex04 = _facade("ex04")
    assert ex04.__all__ == exercises.__all__
    imported = {line.split()[1] for line in sandbox.facade_source("ex04").splitlines() if line.startswith("from ")}
    assert "fastpath_lib.grading.materials" in imported and "fastpath_lib.exercises" not in imported
    assert all(m.rsplit(".", 1)[-1] + ".py" in sandbox.kernel_modules("ex04") for m in imported
               if m.startswith("fastpath_lib.grading")), imported  # only what the kernel sees
    assert ex04.KNOWN_OPS == exercises.KNOWN_OPS and ex04.V2_DTYPES == exercises.V2_DTYPES
    assert ex04.change_hunks(3) == exercises.change_hunks(3) and ex04.synthetic_results().equals(
        exercises.synthetic_results())
    for name in ("check_boundary_cases", "check_reference", "expected_classes"):
        with pytest.raises(RuntimeError, match="grader"):
            getattr(ex04, name)()
    assert _facade("ex07").expected_classes(materials.synthetic_results()) == exercises.expected_classes(
        materials.synthetic_results())  # exercise 07 is given exercise 06's classes
    # generic: whatever exercises.py exports (a name added or removed), plain constants as literals, the rest stand-ins
    monkeypatch.setattr(exercises, "__all__", [n for n in exercises.__all__ if n != "EX13_FAULTS"] + ["FORM", "PARTS"])
    monkeypatch.setattr(exercises, "FORM", {"a": (1, "b")}, raising=False)
    monkeypatch.setattr(exercises, "PARTS", ex04_boundary.check_boundary_cases.__code__, raising=False)
    source = sandbox.facade_source("ex04")
    assert "EX13_FAULTS" not in source and "FORM = {'a': (1, 'b')}" in source
    with pytest.raises(RuntimeError, match="not available"):
        _ = _facade("ex04").PARTS


def _forbidden_files() -> dict[str, set[str]]:
    """file or folder of fastpath_lib a check forbids whole -> the exercises whose checks forbid it (read from the
    checks' borrowed.kit calls that name no function, and the kit's kernels and operator they add)."""
    whole = {"KIT_KERNELS": ("rmsnorm/kernels.py",), "KIT_OP": ("rmsnorm/op.py", "rmsnorm/module.py")}
    out: dict[str, set[str]] = {}
    for path in (ROOT / "fastpath_lib" / "grading" / "checks").glob("ex[0-9][0-9]_*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            files = ()
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "kit" and len(node.args) == 1:
                files = (node.args[0].value,)
            elif isinstance(node, ast.Attribute) and node.attr in whole:
                files = whole[node.attr]
            for f in files:
                out.setdefault(f, set()).add(path.name[:4])
    return out


#: (exercise, file of fastpath_lib it forbids whole) -> why its kernel is handed the file all the same: each is
#: imported by what the exercise hands out, and the static rules and the checks' behaviour tests still catch its use.
HANDED_THOUGH_FORBIDDEN = {
    ("ex05", "bench/__init__.py"): "a package of bench/schema.py, whose outcome words the materials import",
    ("ex05", "bench/schema.py"): "the outcome words the materials (and the façade's OUTCOMES) import",
    ("ex06", "bench/__init__.py"): "a package of bench/schema.py", ("ex06", "bench/schema.py"): "the outcome words",
    ("ex07", "bench/__init__.py"): "a package of bench/schema.py", ("ex07", "bench/schema.py"): "the outcome words",
    ("ex07", "bench/outcome.py"): "exercise 06's rule, which given.py (exercise 07's handout) applies",
}


def test_every_file_an_exercise_forbids_is_absent_from_its_kernel_or_said_why_not():
    from fastpath_lib.grading.engine import sandbox

    forbidden = _forbidden_files()
    assert {"boundary.py", "rmsnorm/kernels.py", "fused/kernels.py", "grading"} <= set(forbidden), forbidden
    lib = ROOT / "fastpath_lib"
    seen = set()
    for rel, exercises in forbidden.items():
        for ex in sorted(exercises):
            staged = {m.removeprefix("fastpath_lib.").replace(".", "/") for m in sandbox.kernel_library(ex)}
            if rel == "grading" or rel.startswith("grading/"):  # the floor's materials only, never a grader's room
                assert {m for m in staged if m.startswith("grading/")} <= {"grading/materials", "grading/given",
                                                                           "grading/vocabulary"}, (ex, staged)
                continue
            files = [rel] if not (lib / rel).is_dir() else [  # a folder forbidden whole: each file in it
                p.relative_to(lib).as_posix() for p in (lib / rel).iterdir() if p.suffix == ".py"]
            for f in files:
                if f.removesuffix(".py").removesuffix("/__init__") in staged:
                    assert (ex, f) in HANDED_THOUGH_FORBIDDEN, f"{ex} forbids {f}, and its kernel is handed it"
                    seen.add((ex, f))
    assert seen == set(HANDED_THOUGH_FORBIDDEN), set(HANDED_THOUGH_FORBIDDEN) - seen  # no stale reason


def test_the_registry_dispatches_every_check_of_the_notebooks():
    from fastpath_lib import exercises
    from fastpath_lib.grading import registry

    facade = {n for n in exercises.__all__ if n.startswith("check_")}
    assert facade == set(registry.CHECKS)
    assert all(registry.check(n) is getattr(exercises, n) for n in facade)
    with pytest.raises(KeyError):
        registry.check("check_everything")


def test_a_sandbox_that_cannot_start_the_kernel_is_said_and_grading_goes_on_unisolated(monkeypatch):
    pytest.importorskip("nbformat")
    from fastpath_lib.grading.engine import cli, sandbox

    monkeypatch.setattr(sandbox, "available", lambda: True)
    monkeypatch.setattr(sandbox, "command", lambda *a, **k: ["false"])  # the kernel's command exits at once
    g = cli.grade_notebook(ROOT / "solutions/ex01_reference.ipynb", timeout=120)
    assert g.isolation == sandbox.UNISOLATED and g.earned == g.points, (g.status, g.reason)
    said = [n for n in g.notes if "sandbox" in n]  # one sentence: that, why, and that the grade was not isolated
    assert len(said) == 1 and said[0].startswith("the sandbox could not start because ") and said[0].endswith(
        "so this grade was computed without isolation") and "RuntimeError" not in said[0], g.notes


def test_the_op_channel_keeps_autograd_state_and_grad_mode():
    """Issue 35: a learner's ex12 test that hands the op a leaf requiring grad saw it refused in the check cell and
    accepted in the grader, where the flag was lost. The op's tensors now cross with their autograd state (a leaf, a
    view of a leaf, the result of an op) and the op runs in the caller's grad mode."""
    from fastpath_lib.fused.reference import native_

    base = torch.randn(5, 8, requires_grad=True)
    made = remote.unpack(remote.pack((torch.randn(4, 8, requires_grad=True), base[1:], base * 2, torch.ones(2))),
                         autograd=True)
    assert [(t.requires_grad, t.is_leaf, t._is_view()) for t in made] == [
        (True, True, False), (True, False, True), (True, False, False), (False, True, False)]
    assert made[1]._base.is_leaf and made[1]._base.requires_grad and torch.equal(made[1], base[1:])

    def run(kind, args, message):
        return native_(args[0], args[1])

    for x, grad, refused in ((torch.randn(4, 8, requires_grad=True), True, "a leaf Variable"),
                             (base[1:], True, "a view of a leaf"), (base * 2, True, None),
                             (torch.randn(4, 8, requires_grad=True), False, None)):
        r = torch.randn(*x.shape)
        answer = remote.serve_op({"kind": "call", "args": remote.pack((x, r)), "grad": grad}, run)
        assert (answer["error"] is None) if refused is None else refused in answer["error"][1], answer["error"]


def test_through_the_stub_a_write_moves_the_callers_version_counter_and_a_read_does_not():
    """Lesson 08 reads ``x._version`` to see an op's writes: in the grader the op writes the grader's copies, and the
    stub (the agent's own ``_op``, its channel answered here by :func:`remote.serve_op`) moves the counters of the
    kernel's tensors the op wrote, and only theirs (reader 13b F1)."""
    from fastpath_lib.fused.reference import native_

    agent = remote._agent_functions("_op", "_tensors", "_pack", "_unpack", "_dumps", "_loads", "_no_object",
                                    "_error", "_op_result")
    op = agent["_op"]

    def stub(run):
        op.__globals__["_ask"] = lambda kind, data: remote._dumps(remote.serve_op(remote._loads(data), run))
        return lambda *args: op("call", args)[0]

    x, r = torch.randn(4, 8), torch.randn(4, 8)
    want = [t.clone() for t in native_(x.clone(), r.clone())]
    versions = (x._version, r._version)
    stub(lambda kind, args, message: native_(*args))(x, r)
    assert x._version > versions[0] and r._version > versions[1]
    assert torch.equal(x, want[0]) and torch.equal(r, want[1])
    versions = (x._version, r._version)
    stub(lambda kind, args, message: args[0] + args[1])(x, r)  # reads both, writes neither
    assert (x._version, r._version) == versions


def test_the_kernels_watch_refuses_a_call_into_a_forbidden_folder_as_the_grader_does(tmp_path):
    """A folder target (``kit("bench")``) forbids every file under it in the grader (``Forbidden.names``); the
    kernel's watch (the agent's own ``_watched``) applies the same rule to a name built at run time (attack11 F2)."""
    from fastpath_lib.grading.rules import borrowed

    folder = tmp_path / "kitpart"
    folder.mkdir()
    (folder / "helper.py").write_text("def helper(x):\n    return x + 1\n", encoding="utf-8")
    spec = importlib.util.spec_from_file_location("kitpart_helper", folder / "helper.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rule = borrowed.Forbidden(((str(folder), "*", "write it yourself"),))
    assert rule.names(module.helper.__code__)  # the grader's rule: the folder holds the file
    watched = remote._agent_functions("_watched")["_watched"]
    sealed: list = []  # the tamper evidence's hook, which the agent's text defines beside it in the kernel
    watched.__globals__["_audit"] = lambda event, *args: sealed.append((event, args[0]))

    def answer(x):
        return getattr(module, "hel" + "per")(x)

    targets = tuple((file, qual) for file, qual, _why in rule.targets)
    with pytest.raises(PermissionError, match="helper"):
        watched(answer, (1,), {}, (targets, (), ()))
    assert ("fastpath.forbidden", "helper") in sealed  # and the evidence seals what it saw
    assert watched(answer, (1,), {}, (((str(folder / "other.py"), "*"),), (), ())) == 2  # a sibling file is not it
    given = ((str(folder), "*"),)  # a handed-out folder's own calls are not the answer's
    assert watched(answer, (1,), {}, (targets, (), given)) == 2
