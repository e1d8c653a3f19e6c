"""RMSNorm's :class:`~fastpath_lib.opspec.OpSpec`: the first registered operator (``--op rms_norm``).

Every piece is the one the rest of the kit already uses (nothing is written again here): the public op and
``F.rms_norm`` as the contract, the predicate with its base case and limits, the Triton launcher as the fast route,
the tolerances of :mod:`fastpath_lib.testing`, the bytes model of :mod:`fastpath_lib.bench.timing`, the contiguous
cases of the predeclared matrix (``bench/cases.json``), and the specializations :mod:`fastpath_lib.rmsnorm.compiled`
compiles for GPU targets.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch.nn.functional as F

from fastpath_lib.bench.timing import bytes_moved
from fastpath_lib.opspec import OpCase, OpSpec
from fastpath_lib.rmsnorm import predicate as rms
from fastpath_lib.rmsnorm.op import explain, rms_norm
from fastpath_lib.testing import TOLERANCES

__all__ = ["SPEC", "matrix_cases"]

_CASES_FILE = Path(__file__).resolve().parents[1] / "bench" / "cases.json"


def matrix_cases() -> list[OpCase]:
    """The forward, contiguous, unpadded cases of the predeclared matrix, as :class:`OpCase` rows."""
    out = []
    for c in json.loads(_CASES_FILE.read_text())["cases"]:
        if c.get("pass", "forward") == "forward" and c.get("layout", "contiguous") == "contiguous" \
                and not c.get("pad") and not c.get("offset"):
            quick = (c.get("quick") or {}).get("shape")
            out.append(OpCase(c["id"], *c["shape"], c["dtype"], c["expected"], c["rationale"],
                              tuple(quick) if quick else None))
    return out


def _fast(x, normalized_shape, weight=None, eps=None):
    from fastpath_lib.rmsnorm import kernels  # on first use: the interpreter opt-in comes first

    eps = rms.default_eps(x.dtype) if eps is None else eps
    return kernels.forward(x.reshape(-1, x.shape[-1]), weight, eps).view(x.shape)


def _kernels() -> list:
    from fastpath_lib.rmsnorm import compiled

    return compiled.specializations()


SPEC = OpSpec(
    name="rms_norm",
    function=rms_norm,
    reference=F.rms_norm,
    args=lambda built: built.args(),
    route=lambda x, normalized_shape, weight=None, eps=None: explain(x, normalized_shape, weight, eps).route,
    fast=_fast,
    predicate=rms.PREDICATE,
    boundary_base=rms.BASE_CASE,
    limits=rms.limits_for,
    context=rms.make_call,
    tolerances=TOLERANCES,
    cases=matrix_cases,
    bytes_moved=bytes_moved,
    baselines={"F.rms_norm": F.rms_norm},
    kernels=_kernels,
    title="RMSNorm: Triton fast path behind an eligibility predicate",
)
