"""The semantic reference, the tolerance table, and comparison helpers: imported by tests, lessons and graders.

The reference computes RMSNorm in float64 from the definition, independent of both routes::

    y = x / sqrt(mean(x**2, over normalized dims) + eps) * w

Tolerances (``atol``, ``rtol``) for comparing a route's output, in its own dtype, with the float64 reference. Both
routes round the result to the input dtype once, after computing in fp32, so the error budget is half a unit in the
last place of the output dtype (relative ``2**-11`` for fp16, ``2**-8`` for bf16, ``2**-24`` for fp32) plus the fp32
accumulation error of the mean square over at most ``MAX_COLS`` terms (relative about ``1e-6`` in practice, well below
``1e-5``). ``rtol`` is one unit in the last place for fp16 and bf16 (twice the rounding budget) and, for fp32, twice
the accumulation error (about 17 fp32 units); ``atol`` covers outputs near zero where rtol gives no room.
Gradients sum ``cols`` products (and ``dw`` sums over ``rows``), so their tolerances allow four times more.

Note:
    The reference squares in float64, the routes (and ``F.rms_norm``) in fp32: for fp32 inputs beyond about 1e19 the
    fp32 square overflows and the routes return 0 where the reference does not. Compare such inputs with
    ``F.rms_norm`` itself (lesson 04 shows the case).
"""

from __future__ import annotations

import math

import torch

from fastpath_lib.rmsnorm.limits import MAX_COLS

__all__ = ["TOLERANCES", "GRAD_TOLERANCES", "TOLERANCE_NOTES", "tolerance", "reference_rms_norm",
           "reference_grads", "compare", "assert_matches_reference", "EXTREMES", "extreme_values", "extreme_rows",
           "compare_extremes", "overflowing_rows"]

#: dtype -> (atol, rtol) for outputs.
TOLERANCES = {
    torch.float32: (1e-5, 2e-6),
    torch.float16: (1e-3, 2 ** -10),
    torch.bfloat16: (8e-3, 2 ** -7),
}
#: dtype -> (atol, rtol) for gradients.
GRAD_TOLERANCES = {d: (4 * a, 4 * r) for d, (a, r) in TOLERANCES.items()}
TOLERANCE_NOTES = {
    torch.float32: f"fp32 rounding 2^-24 plus fp32 accumulation error over <= {MAX_COLS} terms (~1e-6)",
    torch.float16: "one fp16 ulp (2^-10) relative; atol for outputs near zero",
    torch.bfloat16: "one bf16 ulp (2^-7) relative; atol for outputs near zero",
}


def tolerance(dtype: torch.dtype, *, grad: bool = False) -> tuple[float, float]:
    """``(atol, rtol)`` for ``dtype`` (float64 and others: tight fp64 tolerances)."""
    table = GRAD_TOLERANCES if grad else TOLERANCES
    return table.get(dtype, (1e-10, 1e-10))


def _eps_for(x: torch.Tensor, eps: float | None) -> float:
    from fastpath_lib.rmsnorm.predicate import default_eps

    return default_eps(x.dtype) if eps is None else float(eps)


def reference_rms_norm(x: torch.Tensor, normalized_shape, weight: torch.Tensor | None = None,
                       eps: float | None = None) -> torch.Tensor:
    """RMSNorm in float64 from the definition (returns float64; the routes return the input dtype)."""
    w64 = None if weight is None else weight.detach().to(torch.float64)
    return _ref_graph(x.detach().to(torch.float64), normalized_shape, w64, _eps_for(x, eps))


def reference_grads(x, normalized_shape, weight, eps, grad_out):
    """``(dx, dw)`` of :func:`reference_rms_norm` in float64 by autograd (``dw`` is ``None`` without a weight)."""
    x64 = x.detach().to(torch.float64).requires_grad_(True)
    w64 = None if weight is None else weight.detach().to(torch.float64).requires_grad_(True)
    y = _ref_graph(x64, normalized_shape, w64, _eps_for(x, eps))
    grads = torch.autograd.grad(y, [t for t in (x64, w64) if t is not None], grad_out.to(torch.float64))
    return grads[0], (grads[1] if w64 is not None else None)


def _ref_graph(x64, normalized_shape, w64, eps):
    dims = tuple(range(-len(normalized_shape), 0))
    y = x64 * torch.rsqrt(x64.pow(2).mean(dims, keepdim=True) + eps)
    return y * w64 if w64 is not None else y


def compare(actual: torch.Tensor, expected64: torch.Tensor, dtype: torch.dtype, *, grad: bool = False) -> str | None:
    """``None`` if ``actual`` matches the float64 ``expected64`` within ``dtype``'s tolerance, else a short report.

    NaN and Inf must appear in the same places (``equal_nan``).
    """
    atol, rtol = tolerance(dtype, grad=grad)
    a = actual.detach().to(torch.float64).cpu()
    e = expected64.detach().to(torch.float64).cpu()
    if a.shape != e.shape:
        return f"shape {tuple(a.shape)} vs expected {tuple(e.shape)}"
    if torch.allclose(a, e, atol=atol, rtol=rtol, equal_nan=True):
        return None
    bad = ~torch.isclose(a, e, atol=atol, rtol=rtol, equal_nan=True)
    idx = tuple(int(i) for i in bad.nonzero()[0])
    diff = (a - e).abs()
    worst = float(diff[torch.isfinite(diff)].max()) if torch.isfinite(diff).any() else math.nan
    return (f"{int(bad.sum())}/{a.numel()} elements outside atol={atol:g}, rtol={rtol:g}; first at {idx}: "
            f"got {a[idx].item():.6g}, expected {e[idx].item():.6g}; max abs diff {worst:.3g}")


def assert_matches_reference(actual, x, normalized_shape, weight=None, eps=None, *, what="output"):
    """Assert a route's output equals the float64 reference within the tolerance of ``x``'s dtype."""
    problem = compare(actual, reference_rms_norm(x, normalized_shape, weight, eps), x.dtype)
    assert problem is None, f"{what}: {problem}"


# --- the numerical extremes ------------------------------------------------------------------------------------------

#: The values at the edges of a floating dtype, by name: NaNs other than the canonical one (negative; the mantissa all
#: ones, what a buffer filled with ``0xFF`` holds; signalling; with a payload), signed zeros and infinities,
#: subnormals, the smallest normal and the largest finite values. A rounding done on the bits that forgets one of
#: them turns a NaN into a zero or an infinity; only these values show it.
EXTREMES = ("nan", "-nan", "nan_all_ones", "-nan_all_ones", "nan_signalling", "nan_payload", "inf", "-inf", "0", "-0",
            "subnormal_min", "-subnormal_min", "subnormal_max", "normal_min", "max", "-max")
_MANTISSA = {torch.float32: 23, torch.float16: 10, torch.bfloat16: 7, torch.float64: 52}
_INT = {8: torch.int64, 4: torch.int32, 2: torch.int16}


def _extreme_bits(dtype: torch.dtype, name: str) -> int:
    bits, mbits = torch.finfo(dtype).bits, _MANTISSA[dtype]
    sign, mantissa = 1 << (bits - 1), (1 << mbits) - 1
    exponent, quiet = ((1 << (bits - 1 - mbits)) - 1) << mbits, 1 << (mbits - 1)
    neg = sign if name.startswith("-") else 0
    magnitude = {"nan": exponent | quiet, "nan_all_ones": exponent | mantissa, "nan_signalling": exponent | 1,
                 "nan_payload": exponent | quiet | (0x2AAAAAAAAAAAA & mantissa), "inf": exponent, "0": 0,
                 "subnormal_min": 1, "subnormal_max": mantissa, "normal_min": 1 << mbits,
                 "max": (exponent - (1 << mbits)) | mantissa}[name.lstrip("-")]
    return neg | magnitude


def extreme_values(dtype: torch.dtype, names=EXTREMES) -> torch.Tensor:
    """The named extremes of ``dtype`` (fp16, bf16, fp32 or fp64), bit for bit, as a 1-d tensor.

    >>> extreme_values(torch.float32, ("nan_all_ones", "-0", "max")).view(torch.int32).tolist()
    [2147483647, -2147483648, 2139095039]
    """
    size = torch.finfo(dtype).bits
    signed = [b - (1 << size) if b >> (size - 1) else b for b in (_extreme_bits(dtype, n) for n in names)]
    return torch.tensor(signed, dtype=torch.int64).to(_INT[size // 8]).view(dtype)


def extreme_rows(dtype: torch.dtype, cols: int, names=EXTREMES, *, seed: int = 0,
                 device: str | torch.device = "cpu") -> torch.Tensor:
    """``[rows, cols]`` of ``dtype``: for each named extreme a row of seeded normal values holding it at column
    ``i % 8``, then for each finite one a row holding nothing else (zeros, subnormals and the largest values make the
    mean square vanish or overflow).

    >>> x = extreme_rows(torch.bfloat16, 16, ("nan", "-0"))
    >>> tuple(x.shape), bool(x[0].isnan().sum() == 1), bool((x[2] == 0).all() and x[2].signbit().all())
    ((3, 16), True, True)
    """
    values = extreme_values(dtype, names)
    gen = torch.Generator().manual_seed(seed)
    rows = torch.randn(len(names), cols, generator=gen, dtype=torch.float64).to(dtype)
    for i, v in enumerate(values):
        rows[i, i % 8] = v
    finite = values[torch.isfinite(values)]
    return torch.cat([rows, finite[:, None].expand(len(finite), cols)]).to(device)


def overflowing_rows(*tensors: torch.Tensor) -> torch.Tensor:
    """Rows whose elements (the sum of ``tensors``, in fp32) are all finite but whose fp32 sum of squares is not.

    There the contract, computed in fp32 as ``F.rms_norm`` computes, is out of its range: its ``rstd`` is 0 and its
    output zeros where the definition gives values near 1, and gradients have no fp32 reference (torch's own
    backward of ``F.rms_norm`` returns NaN in such rows where the definition's gradient is finite).
    """
    s = sum(t.detach().float() for t in tensors)
    return s.isfinite().all(-1) & ~s.pow(2).sum(-1).isfinite()


def compare_extremes(actual: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> str | None:
    """``None`` when ``actual`` is NaN exactly where ``expected`` is, has its sign everywhere else (``-0.0`` and
    ``-inf`` included), and its values within ``atol``/``rtol``; else what differs first.

    >>> z = torch.zeros(3)
    >>> compare_extremes(-z, z, 1e-5, 0.0)
    'sign: 3/3 elements differ, first at (0,): got -0, expected 0'
    """
    a, e = actual.detach().to(torch.float64).cpu(), expected.detach().to(torch.float64).cpu()
    if a.shape != e.shape:
        return f"shape {tuple(a.shape)} vs expected {tuple(e.shape)}"
    both = ~a.isnan() & ~e.isnan()
    for what, bad in (("NaN", a.isnan() != e.isnan()), ("sign", both & (a.signbit() != e.signbit())),
                      ("value", both & ~torch.isclose(a, e, atol=atol, rtol=rtol))):
        if bad.any():
            idx = tuple(int(i) for i in bad.nonzero()[0])
            return (f"{what}: {int(bad.sum())}/{a.numel()} elements differ, first at {idx}: got {a[idx].item():g}, "
                    f"expected {e[idx].item():g}")
    return None
