"""Interpreter self-test: does Triton, on this machine, compute what it should?

Some Triton and numpy version pairs silently compute wrong results in interpreter mode. :func:`run` launches the
kit's own kernels on small fixed inputs and compares them with the float64 reference; the test suite runs it first
and stops with the versions named when it fails.

>>> run().ok
True
"""

from __future__ import annotations

import dataclasses

import torch

from fastpath_lib import runtime

__all__ = ["SelfTestResult", "run", "check"]


@dataclasses.dataclass
class SelfTestResult:
    ok: bool
    mode: str
    versions: dict[str, str]
    problems: list[str]

    def __str__(self) -> str:
        head = f"self-test {'passed' if self.ok else 'FAILED'} ({self.mode}; " + ", ".join(
            f"{k} {v}" for k, v in self.versions.items()) + ")"
        return head + "".join(f"\n  - {p}" for p in self.problems)


def run() -> SelfTestResult:
    """Run the kernels on fixed inputs (odd and power-of-two widths, three dtypes) against the reference."""
    from fastpath_lib.testing import compare, reference_grads, reference_rms_norm

    vers = runtime.versions()
    dev = "cuda" if (runtime.cuda_available() and not runtime.interpreter_enabled()) else "cpu"
    mode = "interpreter" if runtime.interpreter_enabled() else ("cuda" if dev == "cuda" else "no triton backend")
    problems: list[str] = []
    if mode == "no triton backend":
        return SelfTestResult(False, mode, vers, ["neither CUDA nor TRITON_INTERPRET=1: Triton cannot run here"])
    try:
        from fastpath_lib.rmsnorm import kernels
    except Exception as e:  # noqa: BLE001 - report any import failure with versions
        return SelfTestResult(False, mode, vers, [f"importing the kernels failed: {type(e).__name__}: {e}"])
    gen = torch.Generator().manual_seed(1234)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        for rows, cols in ((3, 16), (5, 37)):
            x = (torch.randn(rows, cols, generator=gen) * 2).to(dtype).to(dev)
            w = (1 + torch.randn(cols, generator=gen) / 2).to(dtype).to(dev)
            dy = torch.randn(rows, cols, generator=gen).to(dtype).to(dev)
            eps = 1e-6
            try:
                y = kernels.forward(x, w, eps)
                dx, dw = kernels.backward(dy, x, w, eps)
            except Exception as e:  # noqa: BLE001
                problems.append(f"{dtype} {rows}x{cols}: kernel raised {type(e).__name__}: {e}")
                continue
            name = f"{str(dtype).replace('torch.', '')} {rows}x{cols}"
            for what, got, want, grad in (("forward", y, reference_rms_norm(x, [cols], w, eps), False),
                                          *zip(("dx", "dw"), (dx, dw), reference_grads(x, [cols], w, eps, dy),
                                               (True, True))):
                bad = compare(got, want, dtype, grad=grad)
                if bad:
                    problems.append(f"{name} {what}: {bad}")
    return SelfTestResult(not problems, mode, vers, problems)


def check() -> SelfTestResult:
    """:func:`run`, raising ``RuntimeError`` naming the versions when it fails."""
    res = run()
    if not res.ok:
        raise RuntimeError(f"{res}\nTriton is computing wrong results on this machine; try the versions pinned in "
                           f"constraints.txt.")
    return res
