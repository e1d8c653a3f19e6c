"""Learners' real mistakes, one class each, lose points with feedback that names the fix; an honest answer unlike the
solution keeps its marks. In-process: the check functions called on answer objects, no notebook or kernel."""

from __future__ import annotations

import linecache
from pathlib import Path

import pytest

jupytext = pytest.importorskip("jupytext")

from fastpath_lib import exercises as ex  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _solution_cells(exercise: str) -> list[str]:
    (path,) = (ROOT / "solutions").glob(f"{exercise}_*.py")
    return [c.source for c in jupytext.read(path).cells
            if c.cell_type == "code" and "grader-check" not in c.metadata.get("tags", [])]


def _run_cells(cells: list[str], tag: str) -> dict:
    """The cells in one namespace, each readable back through linecache (Triton's interpreter reads a kernel's
    source there)."""
    ns: dict = {}
    for i, cell in enumerate(cells):
        name = f"<{tag} cell {i}>"
        linecache.cache[name] = (len(cell), None, cell.splitlines(True), name)
        exec(compile(cell, name, "exec"), ns)
    return ns


# --- exercise 08: a softmax without the max shift ---------------------------------------------------------------------

_SHIFTED = "e = tl.exp(x - tl.max(x, axis=0))"
_SHIFTED_REF = "e = torch.exp(x64 - x64.amax(-1, keepdim=True))"


def _softmax_answer(kernel_line: str = _SHIFTED, reference_line: str = _SHIFTED_REF) -> dict:
    cells = _solution_cells("ex08")
    assert any(_SHIFTED in c for c in cells) and any(_SHIFTED_REF in c for c in cells)
    return _run_cells([c.replace(_SHIFTED, kernel_line).replace(_SHIFTED_REF, reference_line) for c in cells],
                      f"ex08 {kernel_line} {reference_line}")


def test_a_softmax_without_the_max_shift_loses_the_kernel_and_the_reference_and_feedback_names_the_shift():
    """Small random inputs never reach exp's overflow; the check draws one logit of 100 per row and rows around
    +-1000, where the unshifted softmax gives NaN (inf / inf) or 0 / 0."""
    ns = _softmax_answer("e = tl.exp(x)", "e = torch.exp(x64)")
    (kernel,) = ex.check_capstone_kernel("softmax", ns["launch"], show=False)
    (reference,) = ex.check_capstone_reference("softmax", ns["reference"], show=False)
    for r in (kernel, reference):
        assert not r.passed and "one logit of 100 per row" in r.feedback, r.feedback
        assert "subtract each row's max before exp" in r.feedback, r.feedback


def test_an_honest_softmax_unlike_the_solution_passes_the_large_logit_cases():
    """Shifted by the row's mean instead of its max would overflow; shifted by the max written another way (the
    exp2 form, the reference by logsumexp) keeps full marks."""
    ns = _softmax_answer("e = tl.exp2((x - tl.max(x, axis=0)) * 1.4426950408889634)",
                         "e = torch.exp(x64 - torch.logsumexp(x64, -1, keepdim=True))")
    assert all(r.passed for r in ex.check_capstone_kernel("softmax", ns["launch"], show=False))
    assert all(r.passed for r in ex.check_capstone_reference("softmax", ns["reference"], show=False))


_KERNEL_HEAD = "    x = tl.load(X_ptr + row * X_row_stride + cols, mask=mask, other=OTHER).to(tl.float32)\n"
#: op -> (the honest kernel's lines after the load, its float64 reference, the mistaken lines after the load)
_OPS = {
    "log_softmax": ("-float('inf')",
                    "    z = x - tl.max(x, axis=0)\n    y = z - tl.log(tl.sum(tl.exp(z), axis=0))\n",
                    "    y = x - tl.log(tl.sum(tl.exp(x), axis=0))\n"),
    "l2_normalize": ("0.0",
                     "    y = x / tl.maximum(tl.sqrt(tl.sum(x * x, axis=0)), 1e-12)\n",
                     "    y = x / tl.sqrt(tl.sum(x * x, axis=0))\n"),
    "layer_norm": ("0.0",
                   "    mean = tl.sum(x, axis=0) / n_cols\n    d = tl.where(mask, x - mean, 0.0)\n"
                   "    y = d / tl.sqrt(tl.sum(d * d, axis=0) / n_cols + 1e-5)\n",
                   "    mean = tl.sum(x, axis=0) / n_cols\n"
                   "    y = (x - mean) / tl.sqrt(tl.sum(x * x, axis=0) / n_cols - mean * mean + 1e-5)\n"),
}


def _kernel_answer(op: str, body: str) -> dict:
    other, _, _ = _OPS[op]
    cells = _solution_cells("ex08")
    (i,) = [i for i, c in enumerate(cells) if "def softmax_kernel" in c]
    src = cells[i]
    start = src.index("    x = tl.load(")
    end = src.index("    tl.store(")
    store = src[end:].replace("(e / tl.sum(e, axis=0))", "y")
    cells[i] = src[:start] + _KERNEL_HEAD.replace("OTHER", other) + body + store
    return _run_cells(cells, f"ex08 {op} {hash(body)}")


@pytest.mark.parametrize("op", sorted(_OPS))
def test_each_operators_known_mistake_loses_the_kernel_with_its_fix_and_an_honest_kernel_passes(op):
    """log_softmax without the max shift (rows around +-1000), l2_normalize without the eps clamp (a zero row),
    layer_norm by E[x^2] - E[x]^2 (fp16 rows with a mean of 1000): each fails its regime's rows, the honest kernel
    passes every case."""
    _, honest, mistaken = _OPS[op]
    assert all(r.passed for r in ex.check_capstone_kernel(op, _kernel_answer(op, honest)["launch"], show=False))
    (r,) = ex.check_capstone_kernel(op, _kernel_answer(op, mistaken)["launch"], show=False)
    from fastpath_lib.grading.checks.ex08_capstone import _REGIMES

    assert not r.passed and any(fix in r.feedback for *_, fix in _REGIMES[op]), r.feedback
