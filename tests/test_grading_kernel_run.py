"""The grader measures facts about a learner's Triton kernel itself (issue 28 item 4, issue 29 item 4): its source
compiled by Triton's frontend for a GPU (no Python escapes), run as data in a process of the grader's own, and
exercise 02 graded on memory: each input element read once, each output written once, nothing out of bounds."""

from __future__ import annotations

import torch

from fastpath_lib import runtime
from fastpath_lib.grading.checks import ex02_kernel
from fastpath_lib.grading.engine import kernel_run, remote, sources
from fastpath_lib.grading.rules import kernel_source

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
    assert not bad.passed and "x (X): some bytes read 2 times" in bad.feedback, bad.feedback


def test_memory_faults_are_named_with_tensor_offsets_and_mask():
    if not runtime.interpreter_enabled():
        return  # counted only where the interpreter runs the kernel
    back = _in_process(READS_BACK)
    assert "h (H): the kernel reads back" in back.feedback, back.feedback
    oob = _in_process(PAST_THE_END)
    assert "out-of-bounds load" in oob.feedback and "W" in oob.feedback and "mask:" in oob.feedback, oob.feedback


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
    assert "setprofile" not in (remote.AGENT.read_text())  # the agent watches nothing for the grader
