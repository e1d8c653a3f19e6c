"""The grader measures facts about a learner's Triton kernel itself (issue 28 item 4, issue 29 item 4): its source
compiled by Triton's frontend for a GPU (no Python escapes), run as data in a process of the grader's own, and
exercise 02 graded on memory: each input element read once, each output written once, nothing out of bounds."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import nbformat
import pytest
import torch
import triton.language as tl

from fastpath_lib import runtime
from fastpath_lib.grading.checks import ex02_kernel
from fastpath_lib.grading.engine import compile_check, gaps, kernel_run, remote, replay, sources
from fastpath_lib.grading.rules import kernel_source

ROOT = Path(__file__).resolve().parents[2]

KERNEL = '''
import triton
import triton.language as tl

@triton.jit
def fwd(X, R, W, H, Y, RSTD, xs, rs, hs, ys, n_cols, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(X + row * xs + cols, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(R + row * rs + cols, mask=mask, other=0.0).to(tl.float32)
    h = (x + r).to(H.dtype.element_ty)
    tl.store(H + row * hs + cols, h, mask=mask)
    hf = h.to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(hf * hf, axis=0) / n_cols + eps)
    tl.store(RSTD + row, rstd)
    w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(Y + row * ys + cols, (hf * rstd * w).to(Y.dtype.element_ty), mask=mask)
'''
#: wrong in memory only: the values stay right
READS_TWICE = KERNEL.replace("    w = tl.load(",
                             "    x = tl.load(X + row * xs + cols, mask=mask, other=0.0)\n    w = tl.load(")
READS_BACK = KERNEL.replace("    hf = h.to(tl.float32)",
                            "    hf = tl.load(H + row * hs + cols, mask=mask, other=0.0).to(tl.float32)")
PAST_THE_END = KERNEL.replace("    w = tl.load(W + cols, mask=mask", "    w = tl.load(W + cols, mask=cols <= n_cols")


def _proxy(root: str) -> remote.Proxy:
    """The grader's stand-in for the learner's kernel, with no session: the check runs the kernel from the source,
    and never asks the learner's kernel anything."""
    return remote.Proxy(None, {"__fastpath_ref__": 0, "type": "JITFunction", "repr": root}, root)


def _graded(source: str):
    with sources.using([source]):
        (result,) = ex02_kernel.check_add_rms_norm_kernel(_proxy("fwd"), show=False)
    return result


def _in_process(source: str):
    ns: dict = {}
    exec(compile(source, "<kernel>", "exec"), ns)  # noqa: S102 - the test's own kernel
    (result,) = ex02_kernel.check_add_rms_norm_kernel(ns["fwd"], show=False)
    return result


def test_grader_runs_the_kernel_from_its_source_and_counts_its_memory():
    good = _graded(KERNEL)
    assert good.passed, good.feedback
    bad = _graded(READS_TWICE)
    assert not bad.passed and "x (X): reads each input element twice" in bad.feedback, bad.feedback


#: a two-pass kernel: the mean square from a first read of x and r, then h and y from a second one (values right)
TWO_PASS = KERNEL.replace("""    h = (x + r).to(H.dtype.element_ty)
    tl.store(H + row * hs + cols, h, mask=mask)
    hf = h.to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(hf * hf, axis=0) / n_cols + eps)
""", """    s = (x + r).to(H.dtype.element_ty).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(s * s, axis=0) / n_cols + eps)
    x = tl.load(X + row * xs + cols, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(R + row * rs + cols, mask=mask, other=0.0).to(tl.float32)
    h = (x + r).to(H.dtype.element_ty)
    tl.store(H + row * hs + cols, h, mask=mask)
    hf = h.to(tl.float32)
""")
#: row offsets computed in int32: right on every case the check can allocate, wrong past 2**31 elements
INT32_ROWS = KERNEL.replace("tl.program_id(0).to(tl.int64)", "tl.program_id(0)")
#: a row offset computed in int64 and narrowed to int32 before it is added: no int32 product of a program id for the
#: source rule (rules/row_offsets.py) to see, the same wrap past 2**31 elements
NARROWED = KERNEL.replace("X + row * xs + cols", "X + (row * xs).to(tl.int32) + cols")


def test_a_two_pass_kernel_is_told_the_memory_rule_it_breaks_and_where():
    """Red-team finding: a two-pass kernel (right values, each input read twice) was told "7 of 7 cases wrong"."""
    assert TWO_PASS != KERNEL and INT32_ROWS != KERNEL
    checks = [_graded] + ([_in_process] if runtime.interpreter_enabled() else [])
    for check in checks:
        r = check(TWO_PASS)
        assert not r.passed and "every value is right, but the memory rule fails" in r.feedback, r.feedback
        assert "reads each input element twice" in r.feedback and "cases wrong" not in r.feedback, r.feedback
        assert "7x33 float32 row_slice+3" in r.feedback, r.feedback  # the inputs that decided it


def test_row_offsets_computed_in_int32_are_caught_without_allocating_2_to_the_31():
    """A kernel whose row * row_stride is int32 scored 4/4. The grader refuses it from its source before it runs,
    naming the product (rules/row_offsets.py, any layout). The overflow launch decides what the source does not show:
    the interpreter wraps int32 as a GPU does, so a launch whose row stride puts row 3 at 2**32 + 8 elements shows an
    int64 offset narrowed to int32 at element 8 of a four-row tensor, in the grader and in the notebook (where the
    launches run before the source rules, so an int32 product is told there by the launch)."""
    graded = _graded(INT32_ROWS)
    assert not graded.passed and "element 8" not in graded.feedback, graded.feedback
    assert graded.feedback.startswith("row offsets wrap in int32: your kernel fwd computes row * "), graded.feedback
    assert NARROWED != KERNEL and kernel_source.kernel_problem(NARROWED, "fwd") is None
    checks = [(_graded, NARROWED)] + ([(_in_process, INT32_ROWS)] if runtime.interpreter_enabled() else [])
    for check, source in checks:
        r = check(source)
        assert not r.passed and "row offsets wrap in int32" in r.feedback and "element 8" in r.feedback, r.feedback
    if runtime.interpreter_enabled():
        assert _in_process(KERNEL).passed  # the grader passes it: test_grader_runs_the_kernel_from_its_source_...


BACKWARD = """
import torch
import triton
import triton.language as tl

@triton.jit
def bwd(DY, H, W, RSTD, DH, DW, dys, hs, n_cols, HAS_WEIGHT: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    h = tl.load(H + row * hs + cols, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(DY + row * dys + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.load(RSTD + row)
    n = h * rstd
    g = dy
    if HAS_WEIGHT:
        g = dy * tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(DW + row * n_cols + cols, dy * n, mask=mask)
    dh = rstd * (g - n * (tl.sum(g * n, axis=0) / n_cols))
    tl.store(DH + row * n_cols + cols, dh.to(DH.dtype.element_ty), mask=mask)

def my_backward(dy2d, h2d, weight, rstd):
    n_rows, n_cols = h2d.shape
    dy2d = dy2d.contiguous()
    dh = torch.empty((n_rows, n_cols), dtype=h2d.dtype, device=h2d.device)
    partial = torch.empty((n_rows, n_cols), dtype=torch.float32, device=h2d.device)
    bwd[(n_rows,)](dy2d, h2d, weight if weight is not None else h2d, rstd, dh, partial, dy2d.stride(0),
                   h2d.stride(0), n_cols, HAS_WEIGHT=weight is not None, BLOCK_SIZE=triton.next_power_of_2(n_cols))
    return dh, (partial.sum(0).to(weight.dtype) if weight is not None else None)
"""
#: the gradient scaled in torch on a value laundered through a builtin: the source rules see no tensor arithmetic
LAUNDERED = BACKWARD.replace("    return dh, (partial", "    dh = max([dh]) * 1.0\n    return dh, (partial")


def test_torch_compute_in_the_backward_launcher_is_not_a_kernel():
    """Red-team finding: gradients computed in torch on a value laundered through max([t]) were accepted."""
    def graded(source):
        with sources.using([source]):
            (r,) = ex02_kernel.check_backward_with_saved_rstd(_proxy("my_backward"), show=False)
        return r

    good = graded(BACKWARD)
    assert good.passed, good.feedback
    assert kernel_source.launcher_problem(LAUNDERED, "my_backward") is None  # what the source rules let through
    bad = graded(LAUNDERED)
    assert not bad.passed and "computes with torch outside your kernel" in bad.feedback and "mul" in bad.feedback, \
        bad.feedback
    ns: dict = {}
    exec(compile(LAUNDERED, "<backward>", "exec"), ns)  # noqa: S102 - the test's own launcher, in the check cell
    (here,) = ex02_kernel.check_backward_with_saved_rstd(ns["my_backward"], show=False)
    assert not here.passed and "computes with torch outside your kernel" in here.feedback, here.feedback


#: issue 41, attack 9 (C6): every program adds its dw share into one fp32 row with a plain load and store: the exact
#: sum in Triton's interpreter, which runs the programs one after another; lost updates on a GPU
RACY = BACKWARD.replace("        tl.store(DW + row * n_cols + cols, dy * n, mask=mask)",
                        "        tl.store(DW + cols, tl.load(DW + cols, mask=mask) + dy * n, mask=mask)").replace(
    "partial = torch.empty((n_rows, n_cols)", "partial = torch.zeros((n_cols,)").replace("partial.sum(0)", "partial")


def test_a_backward_whose_programs_race_on_dw_is_refused_in_the_grader_and_the_notebook():
    """Issue 41 (attack 9, C6): the racing backward gives right values under the interpreter and passes the source
    rules; the grader's replay (and the in-notebook check, where the interpreter runs it) names the race and both
    fixes. The honest backward (per-program partial rows) passes in the test above. One child."""
    assert RACY != BACKWARD and kernel_source.launcher_problem(RACY, "my_backward") is None
    with sources.using([RACY]):
        (graded,) = ex02_kernel.check_backward_with_saved_rstd(_proxy("my_backward"), show=False)
    ns: dict = {}
    exec(compile(RACY, "<backward>", "exec"), ns)  # noqa: S102 - the test's own launcher, in the check cell
    (here,) = ex02_kernel.check_backward_with_saved_rstd(ns["my_backward"], show=False)
    for r in (graded, here) if runtime.interpreter_enabled() else (graded,):
        assert not r.passed and "data race in bwd" in r.feedback and "element 0 of DW" in r.feedback, r.feedback
        assert "tl.atomic_add" in r.feedback and "partial" in r.feedback, r.feedback


#: module-level code (a default argument's expression) that walks up the stack to whatever frame holds the run's
#: results and rewrites them: the program's text runs again for the compile step
TAMPERS = """
import sys

def _tamper():
    f = sys._getframe()
    while f is not None:
        got = f.f_locals.get("got")
        if isinstance(got, dict):
            for call in got.get("calls", []):
                call.update(out=None, error=("Tampered", "rewritten by the compile step"))
        f = f.f_back
    return 0

def keep(x, _done=_tamper()):
    return x
"""


def test_the_child_lacks_the_operators_the_exercise_declares_absent():
    """The grader's run of the learner's source installs the kernel's preamble first: torch's operator, reached by a
    name built at run time, raises there as in the notebook's kernel. The compile step runs the program's text again
    in a process of its own: its module-level code cannot reach the run's recorded results."""
    text = "import functools\nimport torch\n\ndef peek(x):\n    op = getattr(torch, 'rms' + '_norm')\n" \
           "    return functools.partial(op, x, (x.shape[-1],))()\n" + TAMPERS
    assert kernel_source.launcher_problem(TAMPERS, "keep")  # the static rules refuse it; the process holds anyway
    x = torch.randn(2, 8)
    with kernel_run.lacking(ex02_kernel.ABSENT):
        out = kernel_run.run(text, "peek", [(None, [x], {}), (None, [x], {}, "keep")])
    call, kept = out.calls
    assert call.error and "torch's rms_norm is not available while exercise 02 is graded" in call.error[1], call
    assert kept.error is None and torch.equal(kept.out, x), kept
    assert out.compile_problem is None, out.compile_problem


def test_memory_faults_are_named_with_tensor_offsets_and_mask():
    if not runtime.interpreter_enabled():
        return  # counted only where the interpreter runs the kernel
    back = _in_process(READS_BACK)
    assert "h (H): the kernel reads back" in back.feedback, back.feedback
    oob = _in_process(PAST_THE_END)
    assert "out-of-bounds load" in oob.feedback and "W" in oob.feedback and "mask:" in oob.feedback, oob.feedback


def test_a_forward_whose_programs_race_on_the_weight_is_refused_before_its_values():
    """Issue 41 (attack 9, C6): each program stores the weight back after loading it: the values stay right under
    the interpreter, but on a GPU one program's store races the others' loads. The race is named first, with both
    fixes. In process (the notebook's check, where the interpreter runs the kernel; the grader reads the same races
    from its replay)."""
    if not runtime.interpreter_enabled():
        return  # watched only where the interpreter runs the kernel
    racy = KERNEL.replace("    w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)\n",
                          "    w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)\n"
                          "    tl.store(W + cols, w.to(W.dtype.element_ty), mask=mask)\n")
    r = _in_process(racy)
    assert racy != KERNEL and not r.passed and "data race in fwd" in r.feedback, r.feedback
    assert "element 0 of W" in r.feedback and "tl.atomic_add" in r.feedback, r.feedback


def test_a_python_escape_in_a_kernel_body_does_not_compile_for_a_gpu():
    """The static rules refuse these too; the frontend is the grader's second, Triton's own, reading."""
    helper = "def double(v):\n    return v * 2\n"
    for body, says in (("    import os\n", "unsupported AST node type: Import"),
                       ("    r = double(r)\n", "Cannot access global variable double")):
        text = kernel_source.program(KERNEL, "fwd").replace(
            "    h = (x + r)", body + "    h = (x + r)")
        x = torch.randn(2, 8)
        out = kernel_run.run(helper + text, "fwd", [((2,), [x, x.clone(), torch.ones(8), torch.empty(2, 8),
                                                             torch.empty(2, 8), torch.empty(2), 8, 8, 8, 8, 8,
                                                             1e-6], {"BLOCK_SIZE": 8})])
        assert out.compile_problem and says in out.compile_problem, out.compile_problem


#: A kernel that calls Triton in each way a kernel body does (the kit's jit helpers, a tensor method, tl.math,
#: libdevice by both its paths, the frontend's min and range, static_range, tl.max, tl.constexpr, a dtype's method,
#: tl.cumsum and tl.rand, whose own bodies call Triton's helpers), and the calls a body makes to reach Python.
CALLS = '''
from triton.language.extra import libdevice

@triton.jit
def calls(X, Y, n, B: tl.constexpr):
    c = tl.arange(0, B)
    x = to_fp32(tl.load(X + c, mask=c < n, other=0.0))
    for i in range(0, min(n, 4)):
        x = x + tl.math.rsqrt(tl.abs(x) + 1.0) + tl.extra.cuda.libdevice.exp(x * 0.0) + libdevice.exp(x * 0.0)
        x = tl.core.add(x, 1.0)
    if Y.dtype.element_ty.is_bf16() and not x.dtype.is_int():
        x = tl.cumsum(x, 0) + tl.rand(0, c)
    for i in tl.static_range(2):
        x = tl.where(x > i, x, x * 2) + tl.max(x, axis=0) + tl.sigmoid(x) * tl.constexpr(2)
    ESCAPE
    tl.store(Y + c, round_to(x, Y.dtype.element_ty).to(Y.dtype.element_ty), mask=c < n)
'''


_ESCAPES = (("tl.random.tl.builtins.eval('lambda v: v')(x)", "tl.random.tl.builtins.eval", "builtins.eval"),
            ("tl.extra.pkgutil.importlib.import_module('os')", "tl.extra.pkgutil.importlib.import_module",
             "importlib.import_module"),
            ("tl.core.builtin(tl.abs)", "tl.core.builtin", "triton.language.core.builtin"),
            ("x.handle.get_type()", "x.handle.get_type", "get_type"),
            ("getattr(x, 'to')(tl.float32)", "getattr", "builtins.getattr"),
            ("with tl.random.tl.builtins.open('/dev/null'):\n        pass", "tl.random.tl.builtins.open",
             "io.open"))

#: Kernels the compile step and the source rule must answer alike (``(module line, value the kernel adds)``): a module
#: constant declared each way one may be, and the builtins Triton's frontend provides or lacks (``bool``).
_AGREE = (("EPS = 1e-6", "EPS"), ("EPS: tl.constexpr = 1e-6", "EPS"), ("EPS = tl.constexpr(1e-6)", "EPS"),
          ("EPS: tl.constexpr = tl.constexpr(1e-6)", "EPS"), ("", "bool(1)"), ("", "min(len((1, 2)), int(3.0))"))
_KERNEL_ADDING = ("import triton\nimport triton.language as tl\n{}\n"
                  "@triton.jit\ndef k(X):\n    tl.store(X, tl.load(X) + {})\n")


@pytest.fixture(scope="module")
def frontend_answers(tmp_path_factory):
    """The compile step's answers (:func:`compile_check._compile_problem`) for the programs of the tests below, all
    in one fresh process (the interpreter's runs in this one leave Triton's language unfit for its frontend), no kernel
    run: the kit's kernels and :data:`CALLS`, CALLS with each of :data:`_ESCAPES`, a branch on a dtype argument, and
    the kernels of :data:`_AGREE`."""
    import json
    import subprocess
    import sys

    kit = ast.parse((ROOT / "fastpath_lib" / "rmsnorm" / "kernels.py").read_text())
    text = (ROOT / "fastpath_lib" / "triton_casts.py").read_text() + "\n".join(
        ast.unparse(d) for d in kit.body if isinstance(d, ast.FunctionDef) and d.decorator_list) + "\n" + CALLS
    ints = {"HAS_WEIGHT": ["bool", True], "ROWS_PER_PROGRAM": ["int", 2], "BLOCK_SIZE": ["int", 64],
            "VEC": ["int", 4], "eps": ["float", 1e-6]}
    seen = [["calls", {"X": ["tensor", "*fp32"], "Y": ["tensor", "*bf16"], "n": ["int", 8], "B": ["int", 8]}]]
    kernels = seen + [[k, {p: ["tensor", "*fp32" if p.startswith("DW") else "*bf16"] if p.endswith("_ptr") else
                           ints.get(p, ["int", 64]) for p in ks}] for k, ks in (
        ("rms_norm_fwd_kernel", ("X_ptr", "W_ptr", "Y_ptr", "X_row_stride", "Y_row_stride", "n_rows", "n_cols", "eps",
                                 "HAS_WEIGHT", "ROWS_PER_PROGRAM", "BLOCK_SIZE", "VEC")),
        ("rms_norm_bwd_kernel", ("DY_ptr", "X_ptr", "W_ptr", "DX_ptr", "DW_partial_ptr", "DY_row_stride",
                                 "X_row_stride", "DX_row_stride", "n_rows", "n_cols", "eps", "ROWS_PER_PROGRAM",
                                 "HAS_WEIGHT", "BLOCK_SIZE", "VEC")))]
    jobs = [(text.replace("ESCAPE", ""), kernels)] + [(text.replace("ESCAPE", e), seen) for e, _, _ in _ESCAPES]
    # attack 7, A3: a branch on a dtype argument is compiled with the dtype the replay passes, so the frontend reads it
    jobs.append((text.replace("ESCAPE", "") + "\n@triton.jit\ndef dt(X, DT: tl.constexpr):\n    if DT == tl.float32:\n"
                 "        tl.extra.pkgutil.importlib.import_module('os')\n    tl.store(X, 1.0)\n",
                 [["dt", {"X": replay.describe(torch.empty(1)), "DT": replay.describe(tl.float32)}]]))
    jobs += [(_KERNEL_ADDING.format(*a), [["k", {"X": ["tensor", "*fp32"]}]]) for a in _AGREE]
    script = ("import json, sys\nfrom fastpath_lib.grading.engine import compile_check\n"
              "print(json.dumps([compile_check._compile_problem(t, s, f'{sys.argv[1]}/{i}.py') "
              "for i, (t, s) in enumerate(json.load(sys.stdin))]))")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path_factory.mktemp("frontend"))],
                          input=json.dumps(jobs), text=True, capture_output=True, check=True,
                          env=dict(os.environ, TRITON_INTERPRET="0"))
    return json.loads(done.stdout.splitlines()[-1])


def test_the_compile_step_refuses_every_call_of_a_kernel_body_that_is_not_tritons(frontend_answers):
    """Issue 41 (attack 7, A1): Triton's frontend calls a plain Python function a kernel body reaches
    (``tl.random.tl.builtins.eval(...)``, names the static rules once let through); the compile step refuses each
    call whose callee is not Triton's language, by what it resolves to, and names the call and its line; the kit's
    own kernels and helpers compile."""
    honest, *problems, branch = frontend_answers[:len(_ESCAPES) + 2]
    assert honest is None, honest
    assert branch and "calls tl.extra.pkgutil.importlib.import_module(...) (line 3 of dt" in branch, branch
    for (escape, called, what), problem in zip(_ESCAPES, problems):
        assert problem and f"calls {called}(...) (line " in problem and what in problem and "not Triton's" in \
            problem, (escape, problem)


def test_the_source_rule_refuses_what_the_compile_step_refuses_and_only_that(frontend_answers):
    """Reader 18 F2-2: Triton's frontend reads a module constant by its value (``EPS = tl.constexpr(1e-6)``), not by
    an annotation (``EPS: tl.constexpr = 1e-6`` fails the compile step), and provides ``min``, ``len``, ``int`` but
    not ``bool``; the kernel source rule, which the notebook's check applies too, refuses and accepts the same
    kernels, so the notebook does not pass a kernel the grader refuses."""
    compiled = dict(zip(_AGREE, frontend_answers[-len(_AGREE):]))
    assert "Cannot access global variable EPS" in (compiled[_AGREE[1]] or ""), compiled
    assert "bool is not defined" in (compiled[_AGREE[4]] or ""), compiled
    assert compiled[_AGREE[2]] is None and compiled[_AGREE[5]] is None, compiled
    ruled = {a: kernel_source.kernel_problem(_KERNEL_ADDING.format(*a), "k") for a in _AGREE}
    assert {a: p is None for a, p in ruled.items()} == {a: p is None for a, p in compiled.items()}, (ruled, compiled)


def _takes(X, V, C: tl.constexpr):  # a kernel's parameters, for the compile step's signature (never run)
    pass


def test_the_compile_step_binds_each_argument_to_the_value_the_replay_passes():
    """Issue 41 (attack 7, A3): a ``tl.float32`` argument reached the compile step as its repr text and the replay as
    the dtype, so ``if DT == tl.float32:`` was a branch the frontend never read. For each kind of argument a launcher
    may pass, the value the compile step binds (:func:`compile_check._signature` on the record's description) equals,
    with its type, the one the replay passes (the record's encoding, decoded); any other value is refused while the
    launcher is recorded, before anything compiles. In process."""
    import math

    from triton.runtime.jit import JITFunction

    jit = JITFunction(_takes)
    for v in (True, False, 0, -3, 2 ** 40, 1.5, -0.0, math.inf, math.nan, "relu", "", None, tl.float32,
              tl.bfloat16, tl.float16, tl.int64, tl.int1):
        replayed = replay.Replay([], "cpu", {}).decode(replay.Recorder().encode(v))
        _, const = compile_check._signature(jit, {"X": ["tensor", "*fp32"], "C": replay.describe(v)})
        compiled = const[(2,)]
        assert type(compiled) is type(replayed) is type(v), (v, compiled, replayed)
        assert compiled == replayed or compiled != compiled and replayed != replayed, (v, compiled, replayed)
        if type(v) in (int, float):  # a runtime parameter: typed by the value
            sig, _ = compile_check._signature(jit, {"X": ["tensor", "*fp32"], "V": replay.describe(v)})
            assert sig["V"] in ("i1", "i32", "i64", "fp32"), sig
    for v in (torch.float32, (1, 2), [1], torch.device("cpu"), tl.pointer_type(tl.float32), 1j, tl.constexpr(4)):
        try:
            said = replay.describe(v)
        except replay.Refused as exc:
            assert "compile step and its replay both take as themselves" in str(exc), exc
        else:
            raise AssertionError(f"{v!r} described as {said}")
    recorder = replay.Recorder()
    t = torch.empty(4, device="meta")
    recorder.number(t)
    try:
        recorder.launch("k", jit, (1,), (t, 1), {"C": torch.float32})
    except replay.Refused as exc:
        assert "torch.float32" in str(exc), exc
    else:
        raise AssertionError("a torch dtype argument was recorded")


OP = '''
import torch
import triton
import triton.language as tl

@triton.jit
def k(X, Y, n, B: tl.constexpr):
    c = tl.arange(0, B)
    tl.store(Y + c, tl.load(X + c, mask=c < n), mask=c < n)

def launch(x):
    y = torch.empty_like(x)
    k[(1,)](x, y, x.numel(), B=triton.next_power_of_2(x.numel()))
    return y

def op(x):
    return launch(x), "triton"

def op_for_show(x):
    return torch.softmax(x, dim=-1), "triton"
'''


def test_what_a_kernel_launches_is_read_from_the_source_never_reported_by_the_kernel():
    import inspect

    from fastpath_lib.grading.engine import remote

    assert kernel_source.launches_kernel(OP, "op") and not kernel_source.launches_kernel(OP, "op_for_show")
    assert "launches" not in inspect.signature(remote.Session.call).parameters
    # the agent reports no fact the grader credits: its one watch (_watched) can only refuse a call, never grant one
    agent = ast.parse(remote.AGENT.read_text())
    watching = [f.name for f in agent.body if isinstance(f, ast.FunctionDef) and "setprofile" in ast.unparse(f)]
    assert watching == ["_watched"], watching


#: A copy kernel and launchers of exercise 08's kind: two compute the answer with torch after launching it (the
#: attacks that scored, torch reached through an alias the launcher rule does not track and with the dispatch modes
#: switched off), one allocates, views, copies and launches as an honest launcher does.
HOST = '''
import torch
import triton
import triton.language as tl

@triton.jit
def copy_kernel(X, Y, xs, ys, n, B: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, B)
    tl.store(Y + row * ys + c, tl.load(X + row * xs + c, mask=c < n), mask=c < n)

def launcher(x2d, how):
    y = torch.empty(x2d.shape, dtype=x2d.dtype, device=x2d.device)
    b = triton.next_power_of_2(x2d.shape[1])
    copy_kernel[(x2d.shape[0],)](x2d, y, x2d.stride(0), y.stride(0), x2d.shape[1], B=b)
    m = [torch][0]
    if how == "alias":
        xf = m.Tensor.float(x2d)
        e = m.exp(m.sub(xf, m.amax(xf, -1, True)))
        return m.div(e, m.sum(e, -1, True)).to(x2d.dtype)
    if how == "modes off":
        with m.utils._python_dispatch._disable_current_modes():
            e = m.exp(x2d.float())
            return (e / e.sum(-1, keepdim=True)).to(x2d.dtype)
    flat = x2d.t().contiguous().t().reshape(-1).view(x2d.shape).to(torch.float16).float()
    z = torch.zeros_like(flat).new_empty(flat.shape).fill_(0.0)
    z.copy_(flat.expand(x2d.shape).unsqueeze(0).squeeze(0).clone())
    out = torch.empty_like(y)
    copy_kernel[(x2d.shape[0],)](y, out, y.stride(0), out.stride(0), x2d.shape[1], B=b)
    return out
'''


def test_a_launcher_computes_nothing_with_torch_in_the_grader_by_any_path():
    """Red-team finding: a copy kernel whose launcher computed softmax with torch's other operators scored exercise
    08's kernel part (``m = [torch][0]; m.exp(...)``) and exercise 02's backward (the dispatch modes switched off).
    In the grader's child every operator outside the allow-list refuses at the dispatcher; an honest launcher's
    allocations, views, copies and launches still run."""
    from fastpath_lib.grading.checks import ex08_capstone

    x = torch.randn(3, 40)
    text = HOST + "\ndef plain(x2d):\n    return launcher(x2d, 'honest')\n"
    with kernel_run.lacking(ex08_capstone.ABSENT):  # as the grader runs exercise 08
        alias, off, honest, plain = kernel_run.run(text, "launcher", [(None, [x, how], {}) for how in (
            "alias", "modes off", "honest")] + [(None, [x], {}, "plain")]).calls  # a call may name its own entry
    for call, op in ((alias, "amax"), (off, "exp")):
        assert call.error and call.error[0] == "RuntimeError", call
        assert f"computes with torch outside your kernel (it runs torch's {op})" in call.error[1], call.error
    for call in (honest, plain):
        assert call.error is None and torch.equal(call.out, x), call
        assert call.launches == ["copy_kernel", "copy_kernel"]


def test_the_allow_list_is_what_the_registry_says_computes_nothing():
    from fastpath_lib.grading.engine import host_ops

    kinds = host_ops.operators(("sum",))
    kind = {name: kinds[name][0] for name in kinds}
    for name in ("aten::empty.memory_format", "aten::new_empty", "aten::empty_like", "aten::zeros"):
        assert kind[name] == "factory", name
    for name in ("aten::view", "aten::as_strided", "aten::set_.source_Storage_storage_offset", "aten::transpose.int"):
        assert kind[name] == "view", name
    for name in ("aten::copy_", "aten::_to_copy", "aten::clone", "aten::_unsafe_view"):
        assert kind[name] == "copy", name
    assert kind["aten::sum.dim_IntList"] == "asked for"
    assert kind["aten::reshape"] == kind["aten::rms_norm"] == "decomposition"  # each operator it runs is judged
    assert kind["aten::sym_size.int"] == kind["aten::numel"] == "decomposition"
    assert kind["aten::_nnz"] == "integers"
    # a value read back or a random draw is refused whatever its kernels, a decomposition's included
    for name in ("aten::item", "aten::dropout", "aten::rrelu", "aten::scaled_dot_product_attention"):
        assert kind[name] is None and "CompositeImplicitAutograd" in kinds[name][1], (name, kinds[name])
    assert "item" not in host_ops.allowed_names() and "dropout" not in host_ops.allowed_names()
    for name in ("aten::exp", "aten::mul.Tensor", "aten::_softmax", "aten::amax", "aten::_local_scalar_dense",
                 "aten::equal", "aten::randn", "prims::exp"):
        assert kind[name] is None, name
    assert host_ops.operators()["aten::sum.dim_IntList"][0] is None  # asked for by exercise 02's backward only
    assert {"copy_", "new_empty", "set_", "empty"} <= host_ops.allowed_names()  # what the interpreter runs to launch


#: Exercise 08's op, its launcher and a softmax kernel, as a notebook has them; the op hands the Triton route to
#: ``launch``.
SOFTMAX_OP = '''
import torch
import triton
import triton.language as tl

@triton.jit
def softmax_kernel(X, Y, xs, ys, n, B: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, B)
    x = tl.load(X + row * xs + c, mask=c < n, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(Y + row * ys + c, (e / tl.sum(e, axis=0)).to(Y.dtype.element_ty), mask=c < n)

def launch(x2d):
    y = torch.empty(x2d.shape, dtype=x2d.dtype, device=x2d.device)
    softmax_kernel[(x2d.shape[0],)](x2d, y, x2d.stride(0), y.stride(0), x2d.shape[1],
                                    B=triton.next_power_of_2(x2d.shape[1]))
    return y

def softmax(x):
    if x.is_contiguous() and x.dtype in (torch.float32, torch.float16):
        return launch(x), "triton"
    return torch.softmax(x, dim=-1), "torch"
'''
#: the same notebook whose kernel only copies: the attacks' kernel, whose op got its values some other way
COPY_OP = SOFTMAX_OP.replace("(e / tl.sum(e, axis=0))", "x")


class _Kernel:
    """The learner's kernel as the grader's session sees it, for an op that answers softmax's values on both routes,
    whatever the source's kernel computes (an ``exec`` rebinding ``launch``, or cffi, in the notebook)."""

    def call(self, fn, args, kwargs, forbidden=None):
        (x,) = args
        route = "triton" if x.is_contiguous() and x.dtype in (torch.float32, torch.float16) else "torch"
        return torch.softmax(x.double(), dim=-1).to(x.dtype), route


class _Predicate:
    """The predicate the op above follows."""

    def evaluate(self, x):
        import types

        fast = x.is_contiguous() and x.dtype in (torch.float32, torch.float16)
        return types.SimpleNamespace(route="triton" if fast else "torch", eligible=fast, reasons=[])


def test_ex08_dispatch_credits_the_triton_route_with_the_values_its_launcher_computes_in_the_grader():
    """Red-team finding: an op whose Triton route computed its values some other way (``launch`` rebound by ``exec``
    to torch's CPU softmax through cffi, with or without a launch) scored the dispatch part, credited from the source
    and the values. In the grader the Triton route's values are compared with what the op's launcher and kernel
    compute in the grader's own child on the same input."""
    from fastpath_lib.grading.checks import ex08_capstone

    op = remote.Proxy(_Kernel(), {"__fastpath_ref__": 0, "type": "function", "repr": "softmax"}, "softmax")
    assert kernel_source.launchers_called(SOFTMAX_OP, "softmax") == ["launch"]
    results = {}
    for name, source in (("honest", SOFTMAX_OP), ("copy", COPY_OP)):
        with sources.using([source]), kernel_run.lacking(ex08_capstone.ABSENT):
            (results[name],) = ex08_capstone.check_capstone_dispatch("softmax", op, _Predicate, lambda x: x,
                                                                     show=False)
    assert results["honest"].passed, results["honest"].feedback
    copied = results["copy"]
    # the four fixed cases on the fast path and the two extremes of the region the predicate admits (widest, narrowest)
    assert not copied.passed and copied.feedback.count("values your kernel does not compute in the grader") == 6, \
        copied.feedback
    assert "launch(x) there:" in copied.feedback, copied.feedback


#: Launchers that read the input's values on the host and compute exercise 08's softmax in Python, then let a copy
#: kernel write the answer (the attacks that scored the kernel part): by ``tolist()`` (reached through a name the
#: source rules do not follow as a tensor, so they pass), and by NumPy's array interface over ``data_ptr()``, at
#: offset 0 and past it. Each ``answer`` element is written with ``select`` and ``fill_`` (a view and a copy:
#: allowed operators).
READS_VALUES = '''
import torch
import triton
import triton.language as tl

@triton.jit
def copy_kernel(X, Y, xs, ys, n, B: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, B)
    tl.store(Y + row * ys + c, tl.load(X + row * xs + c, mask=c < n), mask=c < n)

def softmax_rows(rows):
    out = []
    for row in rows:
        top = max(row)
        e = [2.718281828459045 ** (v - top) for v in row]
        total = 0.0
        for v in e:
            total = total + v
        out.append([v / total for v in e])
    return out

def written(x2d, rows):
    answer = torch.empty(x2d.shape, dtype=torch.float32, device=x2d.device)
    slot = min([answer])
    for i, row in enumerate(rows):
        line = slot.select(0, i)
        for j, v in enumerate(row):
            cell = line.select(0, j)
            cell.fill_(v)
    y = torch.empty(x2d.shape, dtype=x2d.dtype, device=x2d.device)
    copy_kernel[(x2d.shape[0],)](answer, y, answer.stride(0), y.stride(0), x2d.shape[1],
                                 B=triton.next_power_of_2(x2d.shape[1]))
    return y

def launch(x2d):
    held = min([x2d])
    out = []
    for row in held.tolist():
        top = max(row)
        e = [2.718281828459045 ** (v - top) for v in row]
        total = 0.0
        for v in e:
            total = total + v
        out.append([v / total for v in e])
    return written(x2d, out)
'''
BY_POINTER = READS_VALUES + '''
import numpy

class Interface:
    def __init__(self, t):
        self.__array_interface__ = {"shape": tuple(t.shape), "typestr": "<f4", "data": (t.data_ptr(), True),
                                    "strides": tuple(4 * s for s in t.stride()), "version": 3}

def by_numpy(x2d):
    return written(x2d, softmax_rows(numpy.asarray(Interface(x2d)).tolist()))

def by_offset(x2d):
    rest = numpy.asarray(Interface(x2d[1:])).tolist()
    return written(x2d, softmax_rows(numpy.asarray(Interface(x2d[:1])).tolist() + rest))
'''
#: What an honest launcher does with shapes alone: a grid function, scalars and strides from shapes, a helper,
#: ``empty_like``, a view (a column-major tensor's row) and a tuple returned, a write into its input, and a kernel
#: launched twice; a launcher that leaves a process behind and lists the child's folder; one that launches with a
#: tensor made from Python values.
SHAPES = '''
import torch
import triton
import triton.language as tl

@triton.jit
def scale(X, Y, xs, ys, xc, yc, n, f, B: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, B)
    tl.store(Y + row * ys + c * yc, tl.load(X + row * xs + c * xc, mask=c < n) * f, mask=c < n)

def block(x):
    return triton.next_power_of_2(x.shape[-1])

def pair(x2d):
    y = torch.empty_like(x2d)
    grid = lambda meta: (triton.cdiv(x2d.shape[0] * meta["B"], meta["B"]),)
    scale[grid](x2d, y, x2d.stride(0), y.stride(0), x2d.stride(1), y.stride(1), x2d.shape[-1], 2.0, B=block(x2d))
    z = y.t().contiguous().t()
    scale[(x2d.shape[0],)](y, z, y.stride(0), z.stride(0), y.stride(1), z.stride(1), x2d.shape[-1], 3.0, B=block(x2d))
    return z[0], (y, z.t())

def in_place(x2d):
    scale[(x2d.shape[0],)](x2d, x2d, x2d.stride(0), x2d.stride(0), x2d.stride(1), x2d.stride(1), x2d.shape[-1], 2.0,
                           B=block(x2d))

def lingers(x2d, where):
    import os
    import time

    if os.fork() == 0:  # a process of its own, left behind to read what comes after the record
        with open(where + ".part", "w") as fh:
            fh.write(str(os.getpid()))
        os.replace(where + ".part", where)
        time.sleep(600)
    while not os.path.exists(where):
        time.sleep(0.01)
    folder = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    raise LookupError(repr(sorted(os.listdir(folder))))

def made(x2d):
    src = torch.tensor([[1.0, 2.0]])
    scale[(1,)](src, x2d, 2, x2d.stride(0), 1, 1, 2, 1.0, B=2)
    return x2d
'''


def test_a_launcher_runs_on_tensors_that_hold_no_values_and_its_record_is_replayed(tmp_path):
    """Red-team finding: a launcher that read the input's values on the host (``tolist()``, NumPy's array interface
    over ``data_ptr()``) and let a copy kernel write the answer scored exercise 08's kernel part. In the
    grader a launcher runs on tensors that hold no values, and what it allocated, viewed, copied and launched is
    replayed on the inputs by a process that runs none of its host code. Honest launchers replay exactly."""
    from fastpath_lib.grading.checks import ex08_capstone

    x = torch.randn(3, 40)
    left = tmp_path / "left.pid"
    text = BY_POINTER + SHAPES.split("import triton.language as tl", 1)[1]
    before = x.clone()
    wrote = torch.randn(4, 40)[1:]  # a view: the replay writes into the grader's storage at its offset
    was = wrote.clone()
    with kernel_run.lacking(ex08_capstone.ABSENT):
        outcome = kernel_run.run(text, "pair", [(None, [x], {}), (None, [wrote], {}, "in_place"),
                                                (None, [x], {}, "made"), (None, [x, str(left)], {}, "lingers")]
                                 + [(None, [x], {}, name) for name in ("launch", "by_numpy", "by_offset")])
    assert outcome.compile_problem is None, outcome.compile_problem
    pair, in_place, made, lingers, *reads = outcome.calls
    assert pair.error is None and pair.launches == ["scale", "scale"], pair
    flat, (y, zt) = pair.out
    assert torch.equal(y, before * 2) and torch.equal(zt, (before * 6).t()) and torch.equal(flat, before[0] * 6)
    assert flat.stride() == (3,)
    assert zt.stride() == (3, 1)  # the layout the launcher made: a column-major z, transposed back
    assert in_place.error is None and in_place.out is None and torch.equal(in_place.args[0], was * 2), in_place
    assert made.error and "made from Python values" in made.error[1], made
    # the record's process sees the request, never the values' file; what it leaves ends with the record step
    assert lingers.error and "request.pt" in lingers.error[1] and "values" not in lingers.error[1], lingers.error
    try:
        os.kill(int(left.read_text()), 0)
    except ProcessLookupError:
        pass
    else:
        raise AssertionError("a process the launcher left outlived the record step")
    for call, why in zip(reads, ("Cannot copy out of meta tensor", "data is NULL", "its process ended")):
        assert call.error and call.error[0] == "Refused" and call.out is None, call
        assert "your launcher read a tensor's values" in call.error[1] and why in call.error[1], call.error
        assert "a launcher only shapes, allocates and launches" in call.error[1], call.error
    assert torch.equal(x, before)


def test_ex08_kernel_part_gives_no_credit_to_values_read_on_the_host():
    """The ``tolist()`` launcher passes the source rules; the grader runs it on tensors that hold no values."""
    from fastpath_lib.grading.checks import ex08_capstone

    assert kernel_source.launcher_problem(READS_VALUES, "launch") is None  # what the source rules let through
    with sources.using([READS_VALUES]), kernel_run.lacking(ex08_capstone.ABSENT):
        (result,) = ex08_capstone.check_capstone_kernel("softmax", _proxy("launch"), show=False)
    assert not result.passed, result.feedback
    assert "your launcher read a tensor's values" in result.feedback, result.feedback


#: issue 41, attack 9 (C6) in exercise 08: one scratch row shared by every program (the row's exponentials stored,
#: then loaded back): the exact softmax in Triton's interpreter, a race on a GPU
SHARED_SCRATCH = """
import torch
import triton
import triton.language as tl

@triton.jit
def softmax_kernel(X_ptr, Y_ptr, S_ptr, X_row_stride, Y_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(X_ptr + row * X_row_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    tl.store(S_ptr + cols, tl.exp(x - tl.max(x, axis=0)), mask=mask)
    e = tl.load(S_ptr + cols, mask=mask, other=0.0)
    tl.store(Y_ptr + row * Y_row_stride + cols, (e / tl.sum(e, axis=0)).to(Y_ptr.dtype.element_ty), mask=mask)

def launch(x2d):
    y = torch.empty(x2d.shape, dtype=x2d.dtype, device=x2d.device)
    scratch = torch.empty((x2d.shape[1],), dtype=torch.float32, device=x2d.device)
    softmax_kernel[(x2d.shape[0],)](x2d, y, scratch, x2d.stride(0), y.stride(0), x2d.shape[1],
                                    BLOCK_SIZE=triton.next_power_of_2(x2d.shape[1]))
    return y
"""


def test_ex08_kernel_part_refuses_a_kernel_whose_programs_share_a_scratch_row():
    """Issue 41 (attack 9, C6): exercise 08's kernel check refuses a launch in which one program loads bytes another
    stored (the in-notebook check, where Triton's interpreter runs it; the grader reads the same races from its
    replay, as exercise 02's backward shows). In process, no child."""
    from fastpath_lib.grading.checks import ex08_capstone

    if not runtime.interpreter_enabled():
        return  # watched only where the interpreter runs the kernel
    assert kernel_source.launcher_problem(SHARED_SCRATCH, "launch") is None
    ns: dict = {}
    exec(compile(SHARED_SCRATCH, "<ex08>", "exec"), ns)  # noqa: S102 - the test's own launcher, in the check cell
    (result,) = ex08_capstone.check_capstone_kernel("softmax", ns["launch"], show=False)
    assert not result.passed and "data race in softmax_kernel" in result.feedback, result.feedback
    assert "element 0 of S_ptr" in result.feedback and "tl.atomic_add" in result.feedback, result.feedback


def test_a_record_names_only_operators_and_the_replay_defines_only_kernels():
    """What the replay's process runs of a record (written by a process that runs the learner's code): torch
    operator overloads, by name, and nothing else reachable from ``torch.ops``; of the program's text, its imports,
    literal constants and kernels."""
    assert replay.operator("aten::_to_copy", "default") is torch.ops.aten._to_copy.default
    assert replay.operator("aten::empty", "memory_format") is torch.ops.aten.empty.memory_format
    for full, overload in (("load_library::x", "y"), ("aten::__class__", "default"), ("aten::empty", "__call__"),
                           ("import_module::os", "system"), ("aten::empty", "memory_format.x")):
        try:
            replay.operator(full, overload)
        except (ValueError, AttributeError, RuntimeError):
            continue
        raise AssertionError(f"{full}.{overload} was resolved")
    kept = replay.definitions(KERNEL + "LIMIT = 4\nDONE = _tamper()\n" + TAMPERS)
    assert "@triton.jit" in kept and "def fwd(" in kept and "LIMIT = 4" in kept, kept
    assert "_tamper" not in kept and "def keep" not in kept and "import sys" in kept, kept


#: Honest launchers written unlike the solutions' (each doubles its input into a new tensor), and what a launcher
#: reads of the device in the record step.
HONEST = '''
import torch
import triton
import triton.language as tl

@triton.jit
def twice(X, Y, xs, ys, n, B: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, B)
    tl.store(Y + row * ys + c, tl.load(X + row * xs + c, mask=c < n) * 2, mask=c < n)

def into(x2d, y):
    twice[(x2d.shape[0],)](x2d, y, x2d.stride(0), y.stride(0), x2d.shape[1], B=triton.next_power_of_2(x2d.shape[1]))
    return y

def empty_like(x):
    return into(x, torch.empty_like(x))

def empty_as(x):
    return into(x, torch.empty(x.shape, dtype=x.dtype, device=x.device))

def reshaped(x):
    x2 = x.reshape(-1, x.shape[-1])
    return into(x2, torch.empty_like(x2)).reshape(x.shape)

def viewed(x):
    x2 = x.contiguous().view(-1, x.size(-1))
    return into(x2, x2.new_empty(x2.shape)).view(x.shape)

def grid_of_meta(x):
    y = torch.zeros_like(x)
    n = x.shape[-1]
    twice[lambda meta: (triton.cdiv(x.numel(), n),)](x, y, x.stride(0), y.stride(0), n,
                                                     B=max(16, triton.next_power_of_2(n)))
    return y

def strided(x):
    assert x.dim() == 2 and x.stride(-1) == 1
    y = torch.empty_strided(tuple(x.shape), (x.shape[1], 1), dtype=x.dtype, device=str(x.device))
    return into(x, y)

def in_fp32(x):
    xf = x.to(torch.float32)
    return into(xf, torch.empty_like(xf)).to(x.dtype)

def aligned(x):
    if x.data_ptr() % 16:
        x = x.contiguous()
    return into(x, torch.empty_like(x))

def device(x):
    return x.is_cuda, str(x.device), x[1:].data_ptr()

def item(x):
    return x[0, 0].item()

def tolist(x):
    return x.tolist()
'''


def test_honest_launchers_unlike_the_solution_replay_to_their_values_and_the_exercises_state_the_rule():
    """Issue 41 ("no honest answer refused", "no unstated rule zeroes an exercise"): launchers written unlike the
    solutions' (``empty_like``, ``torch.empty(..., device=x.device)``, ``reshape``, ``new_empty``, a grid of
    ``meta``, ``empty_strided``, a dtype round trip, an alignment test on ``data_ptr()``) replay to their values, in
    one child. What a launcher reads of the device there (``is_cuda``, ``device``, ``data_ptr()``) and what it must
    not read (values) is what exercises 02 and 08 tell the learner."""
    from fastpath_lib.grading.checks import ex08_capstone

    x = torch.randn(5, 33)
    rows = torch.randn(10, 33)[::2]  # every other row: row stride 66
    deep = torch.randn(2, 3, 33, dtype=torch.float16)
    honest = [("empty_like", x), ("empty_as", rows), ("reshaped", deep), ("viewed", deep), ("grid_of_meta", x),
              ("strided", rows), ("in_fp32", deep[0]), ("aligned", x[:, 1:])]
    with kernel_run.lacking(ex08_capstone.ABSENT):
        *calls, device, item, tolist = kernel_run.run(HONEST, "into", [(None, [t], {}, name) for name, t in honest]
                                                      + [(None, [x], {}, name) for name in ("device", "item",
                                                                                             "tolist")]).calls
    for (name, t), call in zip(honest, calls):
        assert call.error is None and call.launches == ["twice"], (name, call)
        assert call.out.shape == t.shape and torch.equal(call.out, t * 2), (name, call.out)
    is_cuda, where, offset = device.out
    assert device.error is None and offset == x.stride(0) * x.element_size(), device
    for call in (item, tolist):  # each told it read values, whichever step refused it
        assert call.error and call.out is None and "read a tensor's values" in call.error[1], call
    for exercise in ("ex02", "ex08"):
        (path,) = (ROOT / "exercises").glob(f"{exercise}_*.ipynb")
        text = " ".join(" ".join(c.source.split()) for c in nbformat.read(path, as_version=4).cells
                        if c.cell_type == "markdown")
        for said in ('device="meta"', f"`.device` is `{where}`", f"`.is_cuda` is `{is_cuda}`",
                     "`.data_ptr()` is the view's byte offset from address 0", "`.item()`", "`.tolist()`",
                     "`.contiguous()`", "`.to(dtype)`"):  # the copies in_fp32 and aligned replay
            assert said in text, (exercise, said)


#: issue 41, attack 8: B1, a block Triton's GPU frontend never visits (a zero-trip static loop's ``else:``), which the
#: interpreter runs on every launch; B2, a second ``def`` line in a docstring, from which the interpreter would run
#: another function than the one compiled. Each real kernel copies the row; each hidden part writes 7s.
UNCOMPILED = '''
import torch
import triton
import triton.language as tl

@triton.jit
def copy_else(X, Y, n, B: tl.constexpr):
    c = tl.arange(0, B)
    x = tl.load(X + c, mask=c < n, other=0.0)
    for i in tl.static_range(0):
        pass
    else:
        x = x * 0.0 + 7.0
    tl.store(Y + c, x, mask=c < n)

@triton.jit
def copy_doc(X, Y, n, B: tl.constexpr):
    """Copies a row.
def copy_doc(X, Y, n, B: tl.constexpr):
    tl.store(Y + tl.arange(0, B), tl.full((B,), 7.0, tl.float32))
    return 0 if 1 else """
    c = tl.arange(0, B)
    tl.store(Y + c, tl.load(X + c, mask=c < n, other=0.0), mask=c < n)

def by_else(x):
    y = torch.empty_like(x)
    copy_else[(1,)](x, y, x.numel(), B=8)
    return y

def by_doc(x):
    y = torch.empty_like(x)
    copy_doc[(1,)](x, y, x.numel(), B=8)
    return y
'''


def test_the_replay_runs_only_what_the_compile_step_compiled():
    """Issue 41 (attack 8, B1/B2): the replay's kernels are the compiled ones: a statement the GPU frontend never
    visited fails the launch (and the part, with its line), and a docstring's ``def`` line is not in the replay's
    program, so the interpreter runs the function that compiled. Both pass the source rules. One child."""
    for name in ("copy_else", "copy_doc"):
        assert kernel_source.kernel_problem(UNCOMPILED, name) is None, name
    x = torch.arange(8, dtype=torch.float32)
    outcome = kernel_run.run(UNCOMPILED, "by_doc", [(None, [x], {}), (None, [x], {}, "by_else")])
    doc, forelse = outcome.calls
    assert doc.error is None and torch.equal(doc.out, x), doc  # the real body: a copy, not the docstring's 7s
    assert forelse.out is None and forelse.error, forelse
    assert outcome.compile_problem and "Triton's GPU compiler never compiled (line 7 of copy_else" in \
        outcome.compile_problem, outcome.compile_problem


#: issue 41, attack 9 (C1): code below statement level that Triton's GPU frontend never evaluates: a comprehension's
#: ``if`` (its visit_ListComp never visits ``ifs``) and a ``tl.static_assert`` message (visited only when the
#: assertion fails). Each kernel copies the row on a GPU; each hidden part writes the row plus 7. The honest kernel
#: holds what honest kernels write there: messages (a constant, an f-string of constexprs), a comprehension over a
#: constexpr tuple, conditional expressions and ``and``/``or`` a constexpr decides, loops, a jit helper.
BELOW_STATEMENTS = '''
import torch
import triton
import triton.language as tl

@triton.jit
def scale(v, K: tl.constexpr):
    return v * K

@triton.jit
def honest(X, Y, n, B: tl.constexpr, K: tl.constexpr):
    """Triples a row."""
    tl.static_assert(B >= 8, "B holds a row")
    tl.static_assert(B % 4 == 0, f"B={B} is a multiple of {4:d}")
    c = tl.arange(0, B)
    x = tl.load(X + c, mask=c < n, other=0.0)
    parts = [x * s for s in (1.0, 2.0)]
    x = parts[0] + parts[1] if K > 1 else parts[0]
    y = x if K > 1 and B > 4 else x * 0.0
    y = y if (K < 1 or B > 4) else y * 0.0
    for i in tl.static_range(2):
        y = y + 0.0
    for i in range(0, n // n):
        y = scale(y, 1)
    tl.store(Y + c, -(-y), mask=c < n)

@triton.jit
def by_if(X, Y, n, B: tl.constexpr):
    c = tl.arange(0, B)
    x = tl.load(X + c, mask=c < n, other=0.0)
    tl.store(Y + c, x, mask=c < n)
    seen = [x for s in (1,) if tl.store(Y + c, x + 7.0, mask=c < n) is None]

@triton.jit
def by_message(X, Y, n, B: tl.constexpr):
    c = tl.arange(0, B)
    x = tl.load(X + c, mask=c < n, other=0.0)
    tl.store(Y + c, x, mask=c < n)
    tl.static_assert(B > 0, tl.store(Y + c, x + 7.0, mask=c < n))

def triple(x):
    y = torch.empty_like(x)
    honest[(1,)](x, y, x.numel(), B=8, K=2)
    return y

def copy_if(x):
    y = torch.empty_like(x)
    by_if[(1,)](x, y, x.numel(), B=8)
    return y

def copy_message(x):
    y = torch.empty_like(x)
    by_message[(1,)](x, y, x.numel(), B=8)
    return y
'''


def test_the_replay_runs_only_what_the_frontend_compiled_below_statement_level():
    """Issue 41 (attack 9, C1): the replay gates expressions, not statements only: a comprehension's ``if`` the GPU
    frontend never visited fails the launch with its line; a ``tl.static_assert`` message, never evaluated by the
    frontend, is its text in the replay (the row is copied, as on a GPU); an honest kernel's messages,
    comprehensions and constexpr-decided expressions run as compiled. All three pass the source rules. One child."""
    for name in ("honest", "by_if", "by_message"):
        assert kernel_source.kernel_problem(BELOW_STATEMENTS, name) is None, name
    x = torch.arange(8, dtype=torch.float32)
    outcome = kernel_run.run(BELOW_STATEMENTS, "triple", [(None, [x], {}), (None, [x], {}, "copy_message"),
                                                          (None, [x], {}, "copy_if")])
    honest, message, comprehension = outcome.calls
    assert honest.error is None and torch.equal(honest.out, 3 * x), honest
    assert message.error is None and torch.equal(message.out, x), message
    assert comprehension.out is None and comprehension.error, comprehension
    assert outcome.compile_problem and "Triton's GPU compiler never compiled (line 5 of by_if" in \
        outcome.compile_problem, outcome.compile_problem


#: attack 10 (D3): kernels Triton's GPU compiler compiles and its interpreter cannot run (a libdevice function, a
#: stub the interpreter leaves in place and that returns nothing; an fp32 tl.atomic_xchg, a type the interpreter's
#: atomics lack), and one whose own line raises (as the replay's code the compile step never compiled does).
GAPS = '''
import triton
import triton.language as tl
from triton.language.extra import libdevice

@triton.jit
def by_libdevice(X, Y, N: tl.constexpr):
    c = tl.arange(0, N)
    e = libdevice.exp(tl.load(X + c))
    tl.store(Y + c, e / tl.sum(e, axis=0))

@triton.jit
def by_xchg(X, Y, N: tl.constexpr):
    c = tl.arange(0, N)
    tl.atomic_xchg(Y + c, tl.load(X + c))

@triton.jit
def by_own_raise(X, Y, N: tl.constexpr):
    c = tl.arange(0, N)
    tl.store(Y + c, tl.load(X + c))
    raise RuntimeError("raised by the kernel's own line")
'''


def test_an_operation_the_interpreter_cannot_run_is_named_as_the_interpreters_gap(tmp_path, monkeypatch):
    """Attack 10 (D3): where Triton's interpreter fails inside its own code on a kernel the compile step compiled,
    the replay says the grader could not run it there (the part fails with that sentence, not as wrong values), with
    the line, and what to write instead where the kernel calls a function of a module of Triton's language the
    interpreter does not run (read from the interpreter's own patching); an exception the kernel's own line raises is
    the kernel's. In process, three launches."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # read at each triton.jit
    where = str(tmp_path / "your_kernels.py")
    ns = compile_check.exec_program(GAPS, where)
    said = {}
    for name in ("by_libdevice", "by_xchg", "by_own_raise"):
        try:
            ns[name][(1,)](torch.arange(8.0), torch.zeros(8), N=8)
        except Exception as exc:  # noqa: BLE001
            said[name] = gaps.interpreter_gap(exc, where, ns)
    assert said.keys() == {"by_libdevice", "by_xchg", "by_own_raise"}, said
    lib, xchg = said["by_libdevice"], said["by_xchg"]
    assert lib and lib.startswith("the grader could not run your kernel under Triton's interpreter: line 4 of "
                                  "by_libdevice") and "libdevice.exp (line 3)" in lib and "use tl.exp" in lib, lib
    assert xchg and "line 3 of by_xchg" in xchg and "Unsupported data type" in xchg and \
        "triton.language's own operations" in xchg, xchg
    assert said["by_own_raise"] is None


class _RaisesLikeAutotune:
    """The learner's kernel where the op's kernel is under ``@triton.autotune``: Triton's autotuner asks for a GPU
    driver and raises (what the op raised in the notebook's kernel, attack 10's D6)."""

    def call(self, fn, args, kwargs, forbidden=None):
        raise RuntimeError("0 active drivers ([]). There should only be one.")


def test_ex08_dispatch_refuses_a_kernel_the_rules_refuse_in_their_words_before_the_op_runs():
    """Attack 10 (D6): a kernel under ``@triton.autotune`` fails the dispatch part with the kernel rule's sentence
    (the op's launchers are held to the rules before the op runs), not with the error Triton's autotuner raises off a
    GPU. In process: no child, the op never runs."""
    from fastpath_lib.grading.checks import ex08_capstone

    op = remote.Proxy(_RaisesLikeAutotune(), {"__fastpath_ref__": 0, "type": "function", "repr": "softmax"}, "softmax")
    autotuned = SOFTMAX_OP.replace("@triton.jit\ndef softmax_kernel", "@triton.autotune(configs=[triton.Config({}, "
                                   "num_warps=4)], key=['n'])\n@triton.jit\ndef softmax_kernel")
    assert autotuned != SOFTMAX_OP
    with sources.using([autotuned]):
        (result,) = ex08_capstone.check_capstone_dispatch("softmax", op, _Predicate, lambda x: x, show=False)
    assert not result.passed and result.feedback.startswith(
        "your op's Triton route calls launch: softmax_kernel is decorated with triton.autotune") and \
        "active drivers" not in result.feedback, result.feedback
