"""Launch both kernels at every generated boundary point on CUDA, for compute-sanitizer.

    PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool memcheck python tools/sanitize_boundaries.py

Exits non-zero if any output disagrees with the reference; memcheck reports out-of-bounds accesses itself (with
PyTorch's caching allocator off, every tensor is its own allocation, so an access past a tensor's end is seen).
``--stop-at T`` (seconds since the epoch) stops launching new points at that time and says how many of them ran (the
evidence command time-boxes it this way; the time spent starting up under memcheck counts).
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

import fastpath_lib  # noqa: F401
from fastpath_lib.boundary import boundary_points
from fastpath_lib.rmsnorm.predicate import default_eps
from fastpath_lib.rmsnorm.spec import launcher_unsupported
from fastpath_lib.testing import compare, reference_grads, reference_rms_norm


def _launch_directly(x, ns, w) -> str | None:
    """Both launchers on the point's input, whatever the dispatch decided (below the row threshold too)."""
    from fastpath_lib.rmsnorm import kernels

    x2 = x.detach().view(-1, x.shape[-1])
    eps = default_eps(x.dtype)
    dy = torch.randn_like(x2)
    y = kernels.forward(x2, w, eps)
    dx, dw = kernels.backward(dy, x2, w, eps)
    if x.is_cuda:
        torch.cuda.synchronize()
    problems = [compare(y, reference_rms_norm(x2, ns, w, eps), x.dtype)]
    rdx, rdw = reference_grads(x2, ns, w, eps, dy)
    problems += [compare(dx, rdx, x.dtype, grad=True)] + ([compare(dw, rdw, w.dtype, grad=True)] if w is not None
                                                          else [])
    return "; ".join(p for p in problems if p) or None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Launch both kernels at every boundary point on CUDA (for memcheck).")
    ap.add_argument("--stop-at", type=float, default=None, help="stop launching new points at this epoch time")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("needs CUDA")
        return 2
    bad = ran = direct = 0
    points = [p for p in boundary_points(device="cuda") if not p.context]
    for point in points:
        if args.stop_at is not None and time.time() > args.stop_at:
            print(f"time limit: stopped after {ran} of {len(points)} boundary points")
            break
        try:
            x, ns, w = point.spec.build(seed=3, device="cuda").args()
            y = fastpath_lib.rms_norm(x, ns, w)
        except Exception as exc:  # noqa: BLE001 - invalid calls raise the reference's error by design
            print(f"{point.id}: raised {type(exc).__name__} (expected for invalid calls)")
            continue
        if x.numel():  # the backward kernel too
            xg = x.detach().clone().requires_grad_()
            fastpath_lib.rms_norm(xg, ns, w).sum().backward()
        torch.cuda.synchronize()
        ran += 1
        problem = compare(y, reference_rms_norm(x, ns, w), x.dtype)
        if x.numel() and launcher_unsupported(x, ns, w) is None:
            direct += 1
            problem = "; ".join(p for p in (problem, _launch_directly(x, ns, w)) if p) or None
        if problem:
            bad += 1
            print(f"{point.id}: {problem}")
    print(f"{ran} boundary points launched (of {len(points)}; {direct} also through both launchers directly), "
          f"{bad} mismatches")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
