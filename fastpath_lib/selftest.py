"""Interpreter self-test: does Triton, on this machine, compute what it should, and are the kit's kernels right?

:func:`run` launches the kit's kernels on small fixed inputs (odd and power-of-two widths, three dtypes; forward,
``dx`` and ``dw``) and compares them with the float64 reference. When a check fails, two suspects remain: the kit's
kernels (a wrong mean, a wrong weight-gradient reduction) or the toolchain (some Triton and numpy version pairs
silently compute wrong results in interpreter mode). A *toolchain probe* tells them apart: a separate, minimal Triton
kernel written here with the same primitives (masked loads, fp32 casts, row reductions, a constexpr loop over a block
of rows, casting stores) is checked against torch. If the probe is right, the kit's kernels are at fault; if it is
wrong too, the toolchain is. The test suite runs :func:`run` first and stops with the failing checks, the verdict and
the versions.

:func:`allow_sm75` is a learner's opt-in on a T4 (sm_75): it runs :func:`run` on the device and, when it passes,
admits sm_75 to both ops' fast paths for fp16 and fp32 inside its block.

>>> run().ok
True
"""

from __future__ import annotations

import contextlib
import dataclasses

import torch

from fastpath_lib import runtime
from fastpath_lib.rmsnorm import limits

__all__ = ["SelfTestResult", "run", "check", "toolchain_probe", "allow_sm75", "default_dtypes"]

_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_passed_on: set[tuple[int, int]] = set()  # capabilities whose self-test (fp16, fp32) passed in this process

KERNEL, TOOLCHAIN = "kernel", "toolchain"


@dataclasses.dataclass
class SelfTestResult:
    """What the self-test found.

    Attributes:
        ok: every check passed.
        mode: ``interpreter``, ``cuda`` or ``no triton backend``.
        versions: torch, triton, numpy and python versions.
        problems: one line per failed check (dtype, shape, which output, and how it differs).
        culprit: ``""`` when ok, else ``"kernel"`` (the toolchain probe is right) or ``"toolchain"`` (it is not).
        probe_problems: what the toolchain probe got wrong.
    """

    ok: bool
    mode: str
    versions: dict[str, str]
    problems: list[str]
    culprit: str = ""
    probe_problems: list[str] = dataclasses.field(default_factory=list)

    def verdict(self) -> str:
        """Who is at fault, in a sentence, naming the versions."""
        vers = ", ".join(f"{k} {v}" for k, v in self.versions.items())
        if self.ok:
            return f"the kit's kernels and the toolchain ({vers}) compute correctly here"
        if self.culprit == KERNEL:
            return (f"the kit's kernels are at fault, not the toolchain: a minimal Triton probe with the same "
                    f"primitives computes correctly here ({vers}); fix the kernels (fastpath_lib/rmsnorm/kernels.py, "
                    f"fastpath_lib/fused/kernels.py: the failing checks above name the op, output and dtype)")
        return (f"the toolchain is at fault (or both): a minimal Triton probe computes wrong results too "
                f"({'; '.join(self.probe_problems[:3]) or 'see above'}); install the versions pinned in "
                f"constraints.txt (here: {vers}) before trusting the kernels")

    def __str__(self) -> str:
        head = f"self-test {'passed' if self.ok else 'FAILED'} ({self.mode}; " + ", ".join(
            f"{k} {v}" for k, v in self.versions.items()) + ")"
        body = "".join(f"\n  - {p}" for p in self.problems)
        return head + body + ("" if self.ok else f"\n  verdict: {self.verdict()}")


_probe_kernel = None


def _get_probe():
    global _probe_kernel
    if _probe_kernel is None:
        import triton
        import triton.language as tl

        @triton.jit
        def probe_kernel(
            X_ptr,  # input rows [n_rows, n_cols], contiguous
            MS_ptr,  # out: fp32 [n_rows], mean of squares per row
            Y_ptr,  # out: x * 2 in x's dtype
            COL_ptr,  # out: fp32 [programs, n_cols], column sums over this program's block of rows
            n_rows,  # number of rows
            n_cols,  # row width
            ROWS: tl.constexpr,  # rows per program
            BLOCK: tl.constexpr,  # power of two >= n_cols
        ):
            """Masked loads, fp32 casts, a row reduction, a constexpr loop, casting stores: the kernels' toolkit."""
            pid = tl.program_id(0).to(tl.int64)
            cols = tl.arange(0, BLOCK)
            acc = tl.zeros((BLOCK,), dtype=tl.float32)
            for i in range(ROWS):
                row = pid * ROWS + i
                m = (cols < n_cols) & (row < n_rows)
                x = tl.load(X_ptr + row * n_cols + cols, mask=m, other=0.0).to(tl.float32)
                tl.store(MS_ptr + row, tl.sum(x * x, axis=0) / n_cols, mask=row < n_rows)
                tl.store(Y_ptr + row * n_cols + cols, (x * 2.0).to(Y_ptr.dtype.element_ty), mask=m)
                acc += x
            tl.store(COL_ptr + pid * n_cols + cols, acc, mask=cols < n_cols)

        _probe_kernel = probe_kernel
    return _probe_kernel


def toolchain_probe(dev: str, dtypes=_DTYPES) -> list[str]:
    """Run the minimal probe kernel on ``dev``; one line per output that differs from torch (``[]``: correct)."""
    import numpy as np
    import triton

    problems = []
    gen = torch.Generator().manual_seed(99)
    for dtype in dtypes:
        for rows, cols in ((3, 16), (5, 37)):
            x = (torch.randn(rows, cols, generator=gen) * 2).to(dtype).to(dev)
            ms = torch.empty(rows, dtype=torch.float32, device=dev)
            y = torch.empty_like(x)
            rows_per = 2
            programs = triton.cdiv(rows, rows_per)
            col = torch.empty((programs, cols), dtype=torch.float32, device=dev)
            name = f"probe {str(dtype).replace('torch.', '')} {rows}x{cols}"
            try:
                with np.errstate(all="ignore"):
                    _get_probe()[(programs,)](x, ms, y, col, rows, cols, ROWS=rows_per,
                                              BLOCK=triton.next_power_of_2(cols))
            except Exception as e:  # noqa: BLE001 - a toolchain that cannot run the probe is reported
                problems.append(f"{name}: raised {type(e).__name__}: {e}")
                continue
            xf = x.float().cpu()
            for what, got, want in (("row reduction", ms.cpu(), (xf * xf).mean(-1)), ("casting store", y.cpu(),
                                    (xf * 2).to(dtype)), ("row-block loop", col.sum(0).cpu(), xf.sum(0))):
                if not torch.allclose(got.float(), want.float(), rtol=1e-5, atol=1e-5):
                    diff = float((got.float() - want.float()).abs().max())
                    problems.append(f"{name} {what}: max abs diff {diff:.3g}")
    return problems


def default_dtypes() -> tuple[torch.dtype, ...]:
    """fp32, fp16 and bf16; fp32 and fp16 on a CUDA device older than sm_80 (a T4: no bf16 fast path there)."""
    old = runtime.kernel_device() == "cuda" and limits.device_capability(torch.device("cuda")) < limits.MIN_CAPABILITY
    return limits.SM75_DTYPES if old else _DTYPES


def run(dtypes=None) -> SelfTestResult:
    """Run both ops' kernels on fixed inputs (odd and power-of-two widths; ``dtypes``, default fp32, fp16 and bf16,
    without bf16 on a CUDA device older than sm_80) against the reference; on a failure, run the toolchain probe to
    say whether the kernels or the toolchain are at fault."""
    from fastpath_lib.testing import compare, reference_grads, reference_rms_norm

    vers = runtime.versions()
    dev = runtime.kernel_device()
    dtypes = default_dtypes() if dtypes is None else dtypes
    mode = "interpreter" if runtime.interpreter_enabled() else ("cuda" if dev == "cuda" else "no triton backend")
    problems: list[str] = []
    if mode == "no triton backend":
        why = "neither CUDA nor the Triton interpreter (use_interpreter()): Triton cannot run here"
        return SelfTestResult(False, mode, vers, [why], TOOLCHAIN)
    try:
        from fastpath_lib.fused import kernels as fused
        from fastpath_lib.rmsnorm import kernels
    except Exception as e:  # noqa: BLE001 - report any import failure with versions
        return SelfTestResult(False, mode, vers, [f"importing the kernels failed: {type(e).__name__}: {e}"],
                              TOOLCHAIN)
    gen = torch.Generator().manual_seed(1234)
    for dtype in dtypes:
        for rows, cols in ((3, 16), (5, 37)):
            x = (torch.randn(rows, cols, generator=gen) * 2).to(dtype).to(dev)
            w = (1 + torch.randn(cols, generator=gen) / 2).to(dtype).to(dev)
            dy = torch.randn(rows, cols, generator=gen).to(dtype).to(dev)
            eps = 1e-6
            name = f"{str(dtype).replace('torch.', '')} {rows}x{cols}"
            try:
                y = kernels.forward(x, w, eps)
                dx, dw = kernels.backward(dy, x, w, eps)
            except Exception as e:  # noqa: BLE001
                problems.append(f"{name}: kernel raised {type(e).__name__}: {e}")
                continue
            for what, got, want, grad in (("forward", y, reference_rms_norm(x, [cols], w, eps), False),
                                          *zip(("dx", "dw"), (dx, dw), reference_grads(x, [cols], w, eps, dy),
                                               (True, True))):
                bad = compare(got, want, dtype, grad=grad)
                if bad:
                    problems.append(f"{name} {what}: {bad}")
            problems += _fused_problems(fused, x, w, dy, eps, name)
    if not problems:
        return SelfTestResult(True, mode, vers, [])
    probe = toolchain_probe(dev, dtypes)
    return SelfTestResult(False, mode, vers, problems, TOOLCHAIN if probe else KERNEL, probe)


def _fused_problems(fused, x, w, dy, eps, name) -> list[str]:
    """Fused add + RMSNorm's kernels on the same rows (the residual: ``dy``) against its composite in float64."""
    from fastpath_lib.fused.reference import native
    from fastpath_lib.testing import compare

    try:
        out, s = fused.forward(x, dy, w, eps)
        dx, dw = fused.backward(dy, None, x, dy, w, eps)
    except Exception as e:  # noqa: BLE001
        return [f"{name} fused: kernel raised {type(e).__name__}: {e}"]
    x64, r64, w64 = (t.detach().double().requires_grad_() for t in (x, dy, w))
    want_out, want_s = native(x64, r64, w64, eps)
    want_dx, want_dw = torch.autograd.grad(want_out, (x64, w64), dy.double())
    bad = [(what, compare(got, want.detach(), x.dtype, grad=grad)) for what, got, want, grad in (
        ("fused out", out, want_out, False), ("fused residual", s, want_s, False), ("fused dx", dx, want_dx, True),
        ("fused dw", dw, want_dw, True))]
    return [f"{name} {what}: {b}" for what, b in bad if b]


@contextlib.contextmanager
def allow_sm75():
    """Inside the block, a T4 (sm_75) takes both ops' fast paths for fp16 and fp32, once :func:`run` passed on it.

    Yields a line saying what the block admits (``with allow_sm75() as note: print(note)``).

    The default predicate refuses sm_75: Triton's supported hardware starts at compute capability 8.0. The kernels do
    compile for sm_75, so a learner on a hosted T4 may opt in, scoped to the block: on entry the self-test runs both
    ops' kernels on the device in fp16 and fp32 (once per process) and the block admits nothing unless it passed.
    bf16 stays on the fallback. Admitted calls are outside Triton's support matrix and unmeasured (no sweep: the
    conservative row threshold). On any other device the block changes nothing.

    Raises:
        RuntimeError: the self-test failed on the sm_75 device (its checks and verdict in the message).
    """
    cap = limits.device_capability(torch.device("cuda")) if runtime.kernel_device() == "cuda" else None
    if cap != limits.SM75:
        where = f"sm_{cap[0]}{cap[1]}" if cap else "no CUDA device"
        yield f"allow_sm75(): nothing to admit here ({where}); the default predicate applies"
        return
    if cap not in _passed_on:
        res = run(dtypes=limits.SM75_DTYPES)
        if not res.ok:
            raise RuntimeError(f"allow_sm75(): the self-test failed on this sm_75 device, so it stays on the "
                               f"fallback:\n{res}")
        _passed_on.add(cap)
    with limits.sm75_scope(cap):
        yield ("allow_sm75(): sm_75 takes the fast path for fp16 and fp32 inside this block (the self-test passed "
               "here); outside Triton's support matrix (8.0+) and unmeasured; bf16 takes the fallback")


def check() -> SelfTestResult:
    """:func:`run`, raising ``RuntimeError`` with the failing checks and the verdict when it fails."""
    res = run()
    if not res.ok:
        raise RuntimeError(str(res))
    return res
