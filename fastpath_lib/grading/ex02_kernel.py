"""Exercise 02: a fused residual-add RMSNorm kernel, and (stretch) its backward from the saved ``rstd``.

Lesson 02 shows the kit's forward kernel; this exercise asks for a kernel the kit does not contain, the fused
``h = x + residual; y = rms_norm(h) * w`` of transformer blocks (vLLM's ``fused_add_rms_norm``), which also stores
``h`` (the next residual stream) and each row's ``rstd`` for the backward. The check launches it on irregular
shapes and compares all three outputs with a plain-torch spec; handing back the kit's kernels fails. From the learner's
source (:mod:`fastpath_lib.grading.kernel_source`), the kernel must be their own ``@triton.jit`` function doing the
work, and the stretch backward must launch one and compute nothing in torch; an object that only answers a launch,
or a launch for show, scores nothing.

The spec, per row, in plain torch (``eps`` is the default eps of the input dtype)::

    h = x + r                                   # in the input dtype: stored to H
    hf = h.float(); rstd = 1 / torch.sqrt((hf * hf).mean() + eps)   # stored to RSTD (fp32)
    y = (hf * rstd * w.float()).to(x.dtype)     # stored to Y

The stretch backward gets ``rstd`` instead of ``eps`` (a training step saves it), computed here with an eps the kit
never uses, so recomputing it with the default eps gives the wrong gradients.
"""

from __future__ import annotations

import random

import torch

from fastpath_lib.cases import CaseSpec, output_guard_intact, poisoned_like
from fastpath_lib.grading import borrowed, sources
from fastpath_lib.grading.kernel_source import kernel_problem, launcher_problem
from fastpath_lib.grading.feedback import Fail, case_label, device, emit, part, table
from fastpath_lib.rmsnorm import predicate as rms
from fastpath_lib.testing import compare, reference_grads

__all__ = ["check_add_rms_norm_kernel", "check_backward_with_saved_rstd", "add_rms_norm_spec"]

_FORBIDDEN = borrowed.KIT_KERNELS + borrowed.KIT_OP + borrowed.KIT_REFERENCE + borrowed.TORCH_RMS_NORM


def add_rms_norm_spec(x: torch.Tensor, r: torch.Tensor, w: torch.Tensor, eps: float | None = None):
    """The spec in plain torch: ``(h, y, rstd)`` with ``h`` in the input dtype, ``y`` and ``rstd`` in float64.

    >>> h, y, rstd = add_rms_norm_spec(torch.ones(2, 4), torch.ones(2, 4), torch.ones(4))
    >>> h[0, 0].item(), round(y[0, 0].item(), 6), round(rstd[0].item(), 6)
    (2.0, 1.0, 0.5)
    """
    eps = rms.default_eps(x.dtype) if eps is None else eps
    h = x + r
    h64 = h.detach().to(torch.float64)
    rstd = torch.rsqrt(h64.pow(2).mean(-1) + eps)
    return h, h64 * rstd[:, None] * w.detach().to(torch.float64), rstd


def _name(obj, default: str) -> str:
    """The name the check cell passed ``obj`` as: the grader's record of the cell for an object held in the
    learner's kernel, else the function's own name, else ``default``."""
    if type(obj).__name__ == "Proxy":
        root = getattr(obj, "_root", None)
        return root if isinstance(root, str) and root.isidentifier() else default
    name = getattr(getattr(obj, "fn", obj), "__name__", None)
    return name if isinstance(name, str) and name.isidentifier() else default


def _source_rule(rule, obj, default: str) -> None:
    """Apply a :mod:`~fastpath_lib.grading.kernel_source` rule to the learner's source (when there is one to read)."""
    source = sources.learner_source()
    problem = rule(source, _name(obj, default)) if source.strip() else None
    if problem:
        raise Fail(problem)


def _cases():
    rng = random.SystemRandom()
    drawn = CaseSpec(rng.randint(2, 7), rng.randint(20, 300), rng.choice((torch.float16, torch.bfloat16)),
                     scale=rng.choice((1.0, 0.1, 3.0)))
    return (
        (CaseSpec(7, 33, torch.float32, layout="row_slice", pad=3), "contiguous"),
        (CaseSpec(5, 100, torch.float16), "row_slice"),
        (CaseSpec(3, 781, torch.bfloat16), "contiguous"),
        (CaseSpec(1, 1, torch.float32), "contiguous"),
        (CaseSpec(6, 64, torch.float32, layout="step"), "step"),
        (CaseSpec(4, 17, torch.float32, scale=1e-2), "contiguous"),
        (drawn, rng.choice(("contiguous", "row_slice"))),
    )


def _launch(kernel, x, r, w, h, y, rstd, eps):
    import numpy as np
    import triton

    n_rows, n_cols = x.shape
    with np.errstate(all="ignore"):
        kernel[(n_rows,)](x, r, w, h, y, rstd, x.stride(0), r.stride(0), h.stride(0), y.stride(0), n_cols, eps,
                          BLOCK_SIZE=triton.next_power_of_2(max(n_cols, 1)))


def check_add_rms_norm_kernel(my_kernel, *, show: bool = True):
    """Launch ``my_kernel`` (the signature in the exercise) on irregular shapes; compare h, y and rstd with the spec."""
    def run():
        borrowed.reject_handed_back(my_kernel, _FORBIDDEN)
        if type(my_kernel).__name__ != "Proxy":
            from triton.runtime.jit import KernelInterface

            if not isinstance(my_kernel, KernelInterface):
                raise Fail(f"expected a @triton.jit kernel, got {type(my_kernel).__name__}")
        rows, bad = [], 0
        seed = random.SystemRandom().randrange(1 << 20)  # inputs drawn at each check
        for spec, r_layout in _cases():
            built = spec.build(seed=seed, device=device())
            x, _, w = built.args()
            rb = CaseSpec(spec.rows, spec.cols, spec.dtype, weight=None, layout=r_layout, pad=5).build(
                seed=seed + 1, device=device())
            r = rb.x
            eps = rms.default_eps(x.dtype)
            h, hbuf, hp = poisoned_like(x.shape, x.dtype, x.device)
            y, ybuf, yp = poisoned_like(x.shape, x.dtype, x.device)
            rstd, sbuf, sp = poisoned_like((x.shape[0],), torch.float32, x.device)
            _launch(my_kernel, x, r, w, h, y, rstd, eps)
            eh, _, _ = add_rms_norm_spec(x, r, w, eps)
            problem = compare(h, eh.to(torch.float64), x.dtype)
            problem = problem and f"h = x + r: {problem}"
            # y and rstd from the h you stored: rounding h to the dtype (to nearest or toward zero) is not graded
            _, ey, erstd = add_rms_norm_spec(h, torch.zeros_like(h), w, eps)
            problem = problem or (f"y: {p}" if (p := compare(y, ey, x.dtype)) else None)
            problem = problem or (f"rstd: {p}" if (p := compare(rstd, erstd, torch.float32, grad=True)) else None)
            if problem is None and not all(output_guard_intact(b, p, 16) for b, p in ((hbuf, hp), (ybuf, yp),
                                                                                      (sbuf, sp))):
                problem = "wrote outside the outputs (mask the tail: cols < n_cols)"
            if problem is None and not (built.inputs_untouched() and rb.inputs_untouched()):
                problem = "modified the input, the residual or the weight"
            bad += problem is not None
            rows.append((f"{case_label(spec)}, residual {r_layout}", "ok" if problem is None else problem))
        if bad:
            raise Fail(f"{bad} of {len(rows)} cases wrong\n" + table(rows, ("case", "yours vs expected")))
        _source_rule(kernel_problem, my_kernel, "my_add_rms_norm_fwd")  # after a stub's NotImplementedError
    return emit([part("ex02", "add_rms_norm_kernel", run)], show)


def check_backward_with_saved_rstd(my_backward, *, show: bool = True):
    """``my_backward(dy2d, h2d, weight, rstd) -> (dh, dw)`` vs float64 autograd of the spec (``rstd`` saved by the
    forward, fp32 ``[rows]``; no eps is passed)."""
    def run():
        rows, bad = [], 0
        rng = random.SystemRandom()
        seed = rng.randrange(1 << 20)  # inputs drawn at each check
        for spec, eps in ((CaseSpec(5, 33, scale=0.3), 0.1), (CaseSpec(4, 100, torch.float16, weight=None), 1e-6),
                          (CaseSpec(6, 24, layout="row_slice", pad=8, scale=0.2), 0.05),
                          (CaseSpec(rng.randint(2, 6), rng.randint(20, 200), torch.bfloat16, scale=0.3),
                           rng.choice((0.02, 0.2)))):
            built = spec.build(seed=seed, device=device())
            h, ns, w = built.args()
            h64 = h.detach().to(torch.float64)
            rstd = torch.rsqrt(h64.pow(2).mean(-1) + eps).to(torch.float32).to(h.device)
            g = torch.Generator().manual_seed(seed + 1)
            dy = torch.randn(h.shape, generator=g, dtype=torch.float64).to(h.dtype).to(h.device)
            launched: list = []
            out = borrowed.run(my_backward, (dy, h, w, rstd), _FORBIDDEN, launches=launched)
            if not any(f is not None for f in launched):
                raise Fail("my_backward launched no Triton kernel: the backward is a kernel of yours")
            if not (isinstance(out, tuple) and len(out) == 2):
                raise Fail(f"my_backward must return (dh, dw), got {type(out).__name__}")
            dh, dw = out
            edh, edw = reference_grads(h, ns, w, eps, dy)
            problem = compare(dh, edh, h.dtype, grad=True)
            problem = problem and f"dh: {problem}"
            if problem is None and w is not None:
                problem = "dw is None, expected a tensor" if dw is None else compare(dw, edw, w.dtype, grad=True)
                problem = problem and f"dw: {problem}"
            bad += problem is not None
            rows.append((case_label(spec), "ok" if problem is None else problem))
        if bad:
            raise Fail(f"{bad} of {len(rows)} cases wrong\n" + table(rows, ("case", "yours vs expected")))
        _source_rule(launcher_problem, my_backward, "my_backward")
    return emit([part("ex02", "backward_with_saved_rstd (stretch)", run)], show)
