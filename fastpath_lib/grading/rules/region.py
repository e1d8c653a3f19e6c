"""The extremes of the region a learner's predicate admits: where its fast path must be right, found from the predicate.

A check that calls the fast path only on shapes of its own choosing grades it where the grader looked, not where the
predicate sends inputs: a launcher that caps its block at 1024 columns is right on every shape below that and returns
garbage on the 8192-column rows its own predicate admits. :func:`extremes` asks the predicate itself, starting from a
shape it admits (the dispatch part's): the widest width it admits (doubling the width up to :data:`MAX_COLS`, then
bisecting), the narrowest, and at each of them the fewest rows it admits (its row threshold), so the fast path runs on
few rows at the widest width, a size Triton's interpreter affords. Each point is one the predicate admits when the
check builds it; a predicate that is not monotone in the width is probed at the widths bisection meets.
"""

from __future__ import annotations

from collections.abc import Callable

from fastpath_lib.cases import CaseSpec

__all__ = ["extremes", "MAX_COLS"]

#: the widest width probed: a predicate that admits wider rows is graded at this one
MAX_COLS = 65536


def _bisect(ok: Callable[[int], bool], good: int, bad: int) -> int:
    """The admitted end next to the boundary between ``good`` (admitted) and ``bad`` (refused)."""
    while abs(bad - good) > 1:
        mid = (good + bad) // 2
        good, bad = (mid, bad) if ok(mid) else (good, mid)
    return good


def extremes(admits: Callable[[CaseSpec], bool], base: CaseSpec) -> list[tuple[str, CaseSpec]]:
    """``(what, spec)`` for the widest and the narrowest width ``admits`` accepts from ``base`` (a spec it admits), each
    at the fewest rows it accepts there, ``base``'s dtype and layout."""
    def at(rows: int, cols: int) -> CaseSpec:
        return CaseSpec(rows, cols, base.dtype, weight=None, layout=base.layout, pad=base.pad)

    def wide_ok(c: int) -> bool:
        return admits(at(base.rows, c))
    widest, refused = base.cols, None
    while widest < MAX_COLS:
        nxt = min(2 * widest, MAX_COLS)
        if not wide_ok(nxt):
            refused = nxt
            break
        widest = nxt
    if refused is not None:
        widest = _bisect(wide_ok, widest, refused)
    narrowest = 1 if wide_ok(1) else _bisect(wide_ok, base.cols, 1)
    out = []
    for what, cols in (("the widest width your predicate admits", widest),
                       ("the narrowest width your predicate admits", narrowest)):
        rows = 1 if admits(at(1, cols)) else _bisect(lambda r, c=cols: admits(at(r, c)), base.rows, 1)
        out.append((what, at(rows, cols)))
    return out
