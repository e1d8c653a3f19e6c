"""Launch both kernels at every generated boundary point on CUDA, for compute-sanitizer.

    compute-sanitizer --tool memcheck python tools/sanitize_boundaries.py

Exits non-zero if any output disagrees with the reference; memcheck reports out-of-bounds accesses itself.
"""

from __future__ import annotations

import sys

import torch

import fastpath_lib  # noqa: F401
from fastpath_lib.boundary import boundary_points
from fastpath_lib.testing import compare, reference_rms_norm


def main() -> int:
    if not torch.cuda.is_available():
        print("needs CUDA")
        return 2
    bad = ran = 0
    for point in boundary_points(device="cuda"):
        if point.context:
            continue
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
        if problem:
            bad += 1
            print(f"{point.id}: {problem}")
    print(f"{ran} boundary points launched, {bad} mismatches")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
