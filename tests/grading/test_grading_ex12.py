"""Exercise 12 (the in-place fused op's overlap condition and contract tests), graded by broken ops.

The solution's full marks and the untouched exercise's zero are tests/grading/test_grading.py's (it grades every
notebook); tests/grading/test_grading_checks.py runs the solution's functions in-process. Here: the overlap cases say
what they claim, the broken ops break what they claim and only that, and borrowed, trivial and attacking answers score
nothing, in process (source as the grader reads it) and in one graded notebook (the kernel's own op object).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

jupytext = pytest.importorskip("jupytext")

from fastpath_lib import exercises as ex  # noqa: E402
from fastpath_lib.fused.reference import native, native_, tolerance  # noqa: E402
from fastpath_lib.grading.checks import ex12_inplace as E  # noqa: E402
from fastpath_lib.grading.engine import sources  # noqa: E402
from fastpath_lib.grading.registry import EXERCISES  # noqa: E402
from fastpath_lib.grading.rules import fused_mutants as M  # noqa: E402
from tests.solved import earned, solved  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _kit_op():
    import fastpath_lib

    return fastpath_lib.fused_add_rms_norm_


# --- part (a): the cases and their expected answers -----------------------------------------------------------------

def test_overlap_cases_hold_every_kind_of_answer_and_the_kits_check_agrees():
    """Each draw has pairs that must overlap, pairs that must not, and interleaved pairs where either answer goes;
    the kit's conservative check (byte ranges) is right on all of them, a storage-only check is not."""
    from fastpath_lib.fused.predicate import overlaps as kit_overlaps

    for seed in range(3):
        cases = E.overlap_cases(random.Random(seed))
        want = [E.expected_overlap(*M.build_pair(r)) for _, r in cases]
        assert {True, False, None} <= set(want), want
        for (label, recipe), w in zip(cases, want):
            if w is not None:
                assert kit_overlaps(*M.build_pair(recipe)) == w, label
        same_storage = [a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
                        for a, b in (M.build_pair(r) for _, r in cases)]
        assert any(s and w is False for s, w in zip(same_storage, want)), "a storage-only answer would pass"


def test_expected_overlap_counts_bytes_not_elements():
    buf = torch.zeros(4, 8)
    assert E.expected_overlap(buf.view(torch.int16)[:, 15:16], buf[:, 7:8]) is True  # half of an fp32 element
    assert E.expected_overlap(buf[:, :4], buf[:, 4:]) is None  # interleaved, no byte shared
    assert E.expected_overlap(buf.reshape(-1)[:8], buf.reshape(-1)[8:]) is False  # adjacent


def _span_overlaps(lo_hi):
    """An overlap rule comparing the closed intervals ``lo_hi(t)`` of two views of one storage."""
    def overlaps(a, b):
        if a.untyped_storage().data_ptr() != b.untyped_storage().data_ptr() or 0 in (a.numel(), b.numel()):
            return False
        (a0, a1), (b0, b1) = lo_hi(a), lo_hi(b)
        return a0 <= b1 and b0 <= a1
    return overlaps


def _last(t):
    return sum((n - 1) * s for n, s in zip(t.shape, t.stride()))


def _byte_sets(a, b):
    """Honest and unlike the solution: the bytes of each view, enumerated (exact; interleaved views share none)."""
    def addresses(t):
        idx = torch.as_strided(torch.arange(t.untyped_storage().nbytes()), t.shape, t.stride(), t.storage_offset())
        return {t.untyped_storage().data_ptr() + int(i) * t.element_size() + k
                for i in idx.reshape(-1).tolist() for k in range(t.element_size())}
    return bool(addresses(a) & addresses(b))


_OVERLAP_RULES = {  # name -> (passes, rule): mistakes that only views of another element size show, and honest rules
    "span to the last element's first byte": (False, _span_overlaps(
        lambda t: (t.data_ptr(), t.data_ptr() + _last(t) * t.element_size()))),
    "element offsets, not bytes": (False, _span_overlaps(
        lambda t: (t.storage_offset(), t.storage_offset() + _last(t)))),
    "one byte past the last": (False, _span_overlaps(
        lambda t: (t.data_ptr(), t.data_ptr() + (_last(t) + 1) * t.element_size()))),
    "span to the last byte": (True, _span_overlaps(
        lambda t: (t.data_ptr(), t.data_ptr() + (_last(t) + 1) * t.element_size() - 1))),
    "bytes enumerated": (True, _byte_sets),
}


@pytest.mark.parametrize("name", sorted(_OVERLAP_RULES))
def test_an_overlap_rule_wrong_only_across_element_sizes_loses_the_part_on_every_draw(name):
    """The pairs include views of narrower and wider element sizes, two by two differing in one byte (a byte inside
    an element or just past it): a span ending at the last element's first byte, element offsets compared across
    dtypes, or a span one byte too long answer one of a pair wrongly on every draw; right rules pass every draw."""
    passes, rule = _OVERLAP_RULES[name]
    for _ in range(3):
        (r,) = ex.check_overlaps(rule, show=False)
        assert r.passed == passes, r.feedback


# --- part (b): the ops under test -------------------------------------------------------------------------------------

_G = torch.Generator().manual_seed(0)
_X0, _R0 = torch.randn(2, 16, 64, generator=_G)
_W = 1 + 0.1 * torch.randn(64, generator=_G)
_DTYPES = ((torch.float32, torch.float32), (torch.float32, torch.bfloat16), (torch.float16, torch.float16),
           (torch.float16, torch.bfloat16), (torch.bfloat16, torch.bfloat16), (torch.bfloat16, torch.float32))


def _calls(impl):
    """(x, residual, returned, want_out, want_residual, dtype) of one ordinary call per input/weight dtype pair."""
    for dt, wdt in _DTYPES:
        x, r, w = _X0.to(dt), _R0.to(dt), _W.to(wdt)
        want = native(x, r, w)
        ret = M.Op(impl)(x, r, w)
        yield x, r, ret, want[0], want[1], dt


def _within(got, want, dtype):
    atol, rtol = tolerance(dtype)
    return torch.allclose(got.double(), want.double(), atol=atol, rtol=rtol)


def _invalid_calls():
    """Calls the contract refuses, each made afresh: (x, residual, weight)."""
    return [lambda: (torch.randn(4, 8), torch.randn(4, 8), torch.ones(7)),
            lambda: (torch.randn(1, 8), torch.randn(2, 8), None),
            lambda: (torch.randn(4, 8, requires_grad=True), torch.randn(4, 8), None),
            lambda: (torch.randn(4, 8), torch.randn(4, 8, requires_grad=True), None),
            lambda: (torch.randn(4, 8), torch.zeros(4, 8, dtype=torch.int32), None),
            lambda: (torch.randn(1, 8).expand(4, 8), torch.randn(4, 8), None)]


def _raised(impl, make):
    x, r, w = make()
    x0, r0 = x.detach().clone(), r.detach().clone()
    try:
        M.Op(impl)(x, r, w)
    except RuntimeError as exc:
        return (type(exc), str(exc)), torch.equal(x.detach(), x0) and torch.equal(r.detach(), r0)
    return None, True


#: One kind of call each: what a test made of only that kind of call sees of an op (True: the op looks correct).
PROBES = {
    "values within tolerance": lambda impl: all(
        _within(x, wo, dt) and _within(r, wr, dt) for x, r, _, wo, wr, dt in _calls(impl)),
    "returns the caller's tensors": lambda impl: all(
        ret[0] is x and ret[1] is r for x, r, ret, *_ in _calls(impl)),
    "residual bit for bit": lambda impl: all(torch.equal(r, wr) for _, r, _, _, wr, _ in _calls(impl)),
    "x is residual": lambda impl: _alias_agrees(impl, lambda b: (b, b, b)),
    "rows shifted by one": lambda impl: all(_alias_agrees(impl, make)  # x a row ahead of residual, or behind it
                                            for make in (lambda b: (b, b[1:], b[:-1]), lambda b: (b, b[:-1], b[1:]))),
    "an exact answer bit for bit": lambda impl: torch.equal(_constant_rows(impl),
                                                            torch.ones(16, 64, dtype=torch.float16)),
    "invalid calls: type and message": lambda impl: all(
        _raised(impl, make)[0] == _raised(native_, make)[0] for make in _invalid_calls()),
    "invalid calls: nothing written": lambda impl: all(_raised(impl, make)[1] for make in _invalid_calls()),
}
#: category -> the probes its broken ops may fail, and nothing else (``writes`` ops are wrong on every call); each
#: probe of a category is the only one some op of it fails (the category's credit needs every kind of call it names).
OWN = {"returns": {"returns the caller's tensors"},
       "aliasing": {"x is residual", "rows shifted by one"},
       "declared_mutation": set(),  # the composite in eager mode; it fails under torch.compile (test_grading_checks)
       "residual_rounding": {"residual bit for bit"}, "variance": {"an exact answer bit for bit"},
       "raises_cleanly": {"invalid calls: nothing written"}}


def _aliased(impl, make):
    buf = torch.randn(17, 64, generator=torch.Generator().manual_seed(1))
    _, x, r = make(buf)
    M.Op(impl)(x, r, _W, 1.0)
    return buf


def _alias_agrees(impl, make):
    return _within(_aliased(impl, make), _aliased(native_, make), torch.float32)


def _constant_rows(impl):
    ones = torch.ones(16, 64, dtype=torch.float16)  # 1 + 0.6 ulp: the residual rounds up, the fp32 sum does not
    x = ones.clone()
    M.Op(impl)(x, torch.full_like(ones, 0.6 * 2 ** -10), None, 0.0)
    return x


def test_each_broken_op_is_caught_only_by_calls_of_its_own_kind_and_correct_ops_by_none():
    """A category is credited only through a broken op that differs from the composite in that category alone: six
    invalid calls, random values within tolerance, a residual within tolerance, calls on separate buffers catch no op
    of another category; each op of a category fails its own kind of call; the correct routes fail none."""
    assert set(OWN) | {"writes"} == set(M.BROKEN) == set(E.CATEGORIES)
    for name, impl in M.CORRECT.items():
        assert all(probe(impl) for probe in PROBES.values()), name
    for category, fns in M.BROKEN.items():
        alone = set()
        for fn in fns:
            caught = {p for p, probe in PROBES.items() if not probe(fn)}
            if category == "writes":
                assert "values within tolerance" in caught, (fn.__name__, caught)
                continue
            assert caught <= OWN[category] and (caught or not OWN[category]), (fn.__name__, caught)
            alone |= caught if len(caught) == 1 else set()
        assert category == "writes" or alone == OWN[category], (category, alone)


def test_the_undeclared_op_drops_its_write_under_torch_compile_and_raises_nothing():
    """The declared-mutation op, as the check hands it out, compiles and loses its write: a test earns the category by
    checking what was written, not because compiling the op raises (it would if the op were first registered while
    traced, and a test that compiles and checks nothing would catch it)."""
    impl = M.impls()["declared_mutation:0"]
    x, r = _X0.clone(), _R0.clone()
    torch._dynamo.reset()
    torch.compile(lambda a, b: M.Op(impl)(a, b, _W), backend="aot_eager", fullgraph=True)(x, r)
    assert torch.equal(x, _X0) and torch.equal(r, _R0)


def test_the_rounding_and_variance_faults_hide_within_the_outputs_tolerance_on_random_inputs():
    """Only a bit-for-bit comparison sees the toward-zero residuals, only an exact answer the variance fault: on many
    random draws of every dtype pair they stay within the contract's tolerance; the one-ulp residual also within an
    ad hoc ``allclose(atol=1e-3, rtol=1e-3)`` and torch.testing's defaults (its output exact), yet not bit for bit."""
    rounding, hidden = M.BROKEN["residual_rounding"][1:]
    variance = M.BROKEN["variance"][0]
    g = torch.Generator().manual_seed(5)
    seen = set()
    for _ in range(20):
        for dt, wdt in _DTYPES:
            x0, r0 = (torch.randn(2, 8, 64, generator=g) * 4).to(dt)
            w = (1 + 0.3 * torch.randn(64, generator=g)).to(wdt)
            want_out, want_res = native(x0, r0, w)
            for fn in (rounding, variance, hidden):
                x, r = x0.clone(), r0.clone()
                M.Op(fn)(x, r, w)
                assert _within(x, want_out, dt) and _within(r, want_res, dt), (fn.__name__, dt, wdt)
                if fn is hidden:
                    assert torch.equal(x, want_out)
                    assert torch.allclose(r.float(), want_res.float(), atol=1e-3, rtol=1e-3), (dt, wdt)
                    torch.testing.assert_close(r, want_res)
                    seen |= {dt} if not torch.equal(r, want_res) else set()
    assert seen == {torch.float32, torch.float16}, seen


def test_the_solutions_tests_catch_the_one_ulp_residual_that_any_tolerance_passes():
    """The solution's bit-for-bit residual comparison catches the residual one ulp off (its output exact)."""
    hidden = M.impls()["residual_rounding:2"]
    with pytest.raises(AssertionError, match="residual"):
        solved("ex12")["my_inplace_tests"](M.Op(hidden))


def test_the_graded_parts_are_the_registered_ones():
    assert E.CATEGORIES == tuple(p for p, _ in EXERCISES["ex12"][2:])
    assert [p for p, _ in EXERCISES["ex12"][:2]] == ["overlaps", "passes_correct_ops"]


# --- borrowed, trivial and copied answers, in process -----------------------------------------------------------------

def _defined(cells: list[str], name: str):
    ns: dict = {}
    for cell in cells:
        exec(compile(cell, "<learner>", "exec"), ns)
    return ns[name]


@pytest.mark.parametrize("cells, said", [
    (["from fastpath_lib.fused.predicate import overlaps as o\ndef overlaps(a, b):\n    return o(a, b)"],
     "fastpath_lib.fused.predicate"),
    (["import fastpath_lib.fused.op as F\ndef overlaps(a, b):\n    return 'no_overlap' in F.explain(a, b, "
      "inplace=True).failed"], "fastpath_lib.fused.op"),
    (["import torch\ndef overlaps(a, b):\n    return bool(torch._C._overlaps(a, b))"], "torch._C"),
    (["import torch\ndef overlaps(a, b):\n    return bool(torch._debug_has_internal_overlap(torch.cat([a, b])))"],
     "torch._debug_has_internal_overlap"),
    (["import numpy as np\ndef overlaps(a, b):\n    return bool(np.shares_memory(a.numpy(), b.numpy()))"],
     "shares_memory"),
    (["def overlaps(a, b):\n    return True"], "expected False"),
    (["def overlaps(a, b):\n    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()"],
     "expected False"),
    (["def overlaps(a, b):\n    return a.data_ptr() == b.data_ptr()"], "expected True"),
    (["def overlaps(a, b):\n    return (a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr() and\n"
      "            a.data_ptr() <= b.data_ptr() + b.numel() * b.element_size() and\n"
      "            b.data_ptr() <= a.data_ptr() + a.numel() * a.element_size())"], "expected False"),
])
def test_borrowed_and_trivial_overlaps_score_nothing(cells, said):
    with sources.using(cells):
        (r,) = ex.check_overlaps(_defined(cells, "overlaps"), show=False)
    assert r.earned == 0 and said in r.feedback, r.feedback
    if said.startswith("expected"):  # a wrong rule is told the byte rule, not only which pairs it got wrong
        assert "True where the two share a byte" in r.feedback and "stride()" in r.feedback, r.feedback


@pytest.mark.parametrize("read", ["a._base", "b._version", "a.untyped_storage()._cdata"])
def test_overlaps_may_read_a_tensors_own_state(read):
    """A tensor's own state (``x._base``), which part (b) lets tests read, is no borrowed answer in part (a) either
    (reader 16b F2); a private name that is not a tensor's state still is."""
    cell = jupytext.reads((ROOT / "solutions/ex12_fused_inplace_contract.py").read_text(),
                          fmt="py:percent").cells[4].source
    cell = cell.replace('    """Return whether', f'    _ = {read}\n    """Return whether', 1)
    with sources.using([cell]):
        (r,) = ex.check_overlaps(_defined([cell], "overlaps"), show=False)
    assert r.passed, r.feedback
    cell = cell.replace(f"_ = {read}", "_ = a._is_view()")
    with sources.using([cell]):
        (r,) = ex.check_overlaps(_defined([cell], "overlaps"), show=False)
    assert not r.passed and "_is_view" in r.feedback, r.feedback


def test_the_solutions_overlaps_is_yours_not_borrowed():
    with sources.using([jupytext.reads((ROOT / "solutions/ex12_fused_inplace_contract.py").read_text(),
                                       fmt="py:percent").cells[4].source]):
        (r,) = ex.check_overlaps(solved("ex12")["overlaps"], show=False)
    assert r.passed, r.feedback


_HEAD = "import torch\nimport fastpath_lib\nfrom fastpath_lib.fused.reference import native_\n"


@pytest.mark.parametrize("body, said", [
    ("def t(op_):\n    x, r = torch.randn(16, 64), torch.randn(16, 64)\n"
     "    want = fastpath_lib.fused_add_rms_norm(x, r)\n    op_(x, r)\n    assert torch.equal(r, want[1])",
     "not with the kit's op"),
    ("from tests.fused.test_fused_contract import test_variance_is_of_the_unrounded_sum as v\n"
     "def t(op_):\n    v(torch.float16, 'cpu')", "kit's own tests"),
    ("def t(op_):\n    assert op_._impl is not None", "inspect"),
    ("def t(op_):\n    x, r = torch.randn(16, 64), torch.randn(16, 64)\n"
     "    want = torch.ops.fastpath.fused_add_rms_norm(x, r, None, None)\n    op_(x, r)\n"
     "    assert torch.equal(r, want[1])", "torch.ops.fastpath"),
    ("from torch.overrides import TorchFunctionMode\nclass Spy(TorchFunctionMode):\n    seen = []\n"
     "    def __torch_function__(self, func, types, args=(), kwargs=None):\n        Spy.seen.append(str(func))\n"
     "        return func(*args, **(kwargs or {}))\n"
     "def t(op_):\n    with Spy():\n        op_(torch.randn(16, 64), torch.randn(16, 64))\n"
     "    assert 'copy_' in ' '.join(Spy.seen)", "TorchFunctionMode"),
    ("def backend(gm, inputs):\n    assert 'fastpath_grading' not in str(gm)\n    return gm\n"
     "def t(op_):\n    torch.compile(op_, backend=backend)(torch.randn(16, 64), torch.randn(16, 64))", "backend"),
    ("def t(op_):\n    raise AssertionError('always')", "fail on a correct op"),
    # seeded: the kit's op agrees with native_ bit for bit on these values (not on every draw), so the test fails on
    # the other correct route, whatever the random state earlier tests left
    ("def t(op_):\n    g = torch.Generator().manual_seed(0)\n"
     "    x, r = torch.randn(16, 64, generator=g), torch.randn(16, 64, generator=g)\n"
     "    x2, r2 = x.clone(), r.clone()\n"
     "    op_(x, r)\n    native_(x2, r2)\n    assert torch.equal(x, x2), 'the output bit for bit'",
     "on another correct route"),
    ("def t(op_):\n    op_(torch.randn(16, 64), torch.randn(16, 64))", "check nothing"),
    ("def t(op_):\n    raise NotImplementedError", "not implemented"),
])
def test_borrowed_and_trivial_tests_score_nothing(body, said):
    cells = [_HEAD, body]
    with sources.using(cells):
        results = ex.check_inplace_tests(_defined(cells, "t"), _kit_op(), show=False)
    assert earned(results) == 0 and said in results[0].feedback, [r.feedback for r in results]


def test_tests_reading_the_version_counters_lesson_08_reads_are_graded_not_refused():
    """``x._version`` is how lesson 08 sees an in-place write: tests built on it are contract tests (reader 13b F1),
    graded by what they catch; the op's own private attributes stay refused (the case above)."""
    body = ("def t(op_):\n    x, r = torch.randn(16, 64), torch.randn(16, 64)\n    x0, r0 = x.clone(), r.clone()\n"
            "    v = (x._version, r._version)\n    op_(x, r)\n"
            "    assert x._version > v[0] and r._version > v[1], 'the op writes x and residual'\n"
            "    torch.testing.assert_close(r, x0 + r0)")
    cells = [_HEAD, body]
    with sources.using(cells):
        results = {r.part: r for r in ex.check_inplace_tests(_defined(cells, "t"), _kit_op(), show=False)}
    assert results["passes_correct_ops"].passed and results["writes"].passed, [r.feedback for r in results.values()]


def test_thin_tests_earn_only_the_categories_they_test_and_feedback_names_the_rest():
    """Values on one ordinary fp32 call (output within tolerance, residual bit for bit) catch the gross faults only;
    every other category is named as having a survivor, without naming the op."""
    body = ("def t(op_):\n    x, r = torch.randn(16, 64), torch.randn(16, 64)\n    x2, r2 = x.clone(), r.clone()\n"
            "    op_(x, r)\n    native_(x2, r2)\n    torch.testing.assert_close(x, x2)\n    assert torch.equal(r, r2)")
    with sources.using([_HEAD, body]):
        results = ex.check_inplace_tests(_defined([_HEAD, body], "t"), _kit_op(), show=False)
    by = {r.part: r for r in results}
    assert by["passes_correct_ops"].passed and by["writes"].passed, [(r.part, r.feedback) for r in results]
    missed = [c for c in E.CATEGORIES if c != "writes"]
    assert not any(by[c].passed for c in missed)
    names = [fn.__name__.strip("_") for fns in M.BROKEN.values() for fn in fns]
    assert all(by[c].feedback.startswith("survivors: ") and not any(n in by[c].feedback for n in names)
               for c in missed), by


#: A learner's tests, one promise per piece (no torch.compile: the declared-mutation category is left out).
_PIECES = {
    "helper": """
def t(op_):
    g = torch.Generator().manual_seed(3)
    def run(x, r, w=None, eps=None):
        mine, ref = (x.clone(), r.clone()), (x.clone(), r.clone())
        got = op_(*mine, w, eps)
        native_(*ref, w, eps)
        return mine, ref, got
    def near(a, b):
        atol, rtol = tolerance(b.dtype)
        torch.testing.assert_close(a, b, atol=atol, rtol=rtol)
""",
    "values": """
    for dt in (torch.float32, torch.float16, torch.bfloat16):
        for wdt in (dt, torch.bfloat16, torch.float32):
            x, r = torch.randn(2, 16, 64, generator=g).to(dt)
            mine, ref, got = run(x, r, (1 + 0.1 * torch.randn(64, generator=g)).to(wdt))
            near(mine[0], ref[0])
            RESIDUAL
            assert got[0] is mine[0] and got[1] is mine[1], "returns"
""",
    "exact": """
    ones = torch.ones(16, 64, dtype=torch.float16)
    mine, _, _ = run(ones, torch.full_like(ones, 0.6 * 2 ** -10), None, 0.0)
    assert torch.equal(mine[0], ones), "variance"
""",
    "raises": """
    x, r = torch.randn(4, 64), torch.randn(4, 64)
    x0, r0 = x.clone(), r.clone()
    try:
        op_(x, r, torch.ones(63))
    except RuntimeError:
        pass
    else:
        raise AssertionError("must raise")
    assert torch.equal(x, x0) and torch.equal(r, r0), "wrote before raising"
""",
    "aliased": """
    for make in (lambda b: (b, b), lambda b: (b[1:], b[:-1])):
        b1, b2 = torch.randn(17, 64, generator=g), None
        b2 = b1.clone()
        op_(*make(b1), None, 1.0)
        native_(*make(b2), None, 1.0)
        near(b1, b2)
""",
    "x is residual": """
    b1 = torch.randn(16, 64, generator=g)
    b2 = b1.clone()
    op_(b1, b1, None, 1.0)
    native_(b2, b2, None, 1.0)
    near(b1, b2)
""",
    "overlapping views": """
    for make in (lambda b: (b[1:], b[:-1]), lambda b: (b[:, 1:], b[:, :-1])):
        b1, b2 = torch.randn(17, 64, generator=g), None
        b2 = b1.clone()
        op_(*make(b1), None, 1.0)
        native_(*make(b2), None, 1.0)
        near(b1, b2)
""",
}
_BIT_FOR_BIT = "assert torch.equal(mine[1], ref[1]), 'residual'"
_WITHIN = "near(mine[1], ref[1])"
_ADHOC = "assert torch.allclose(mine[1].float(), ref[1].float(), atol=0, rtol=1e-3), 'residual'"  # tight, not exact


def _pieces_test(*names, residual=_BIT_FOR_BIT):
    body = "".join(_PIECES[n] for n in ("helper", *names)).replace("RESIDUAL", residual)
    cells = [_HEAD + "from fastpath_lib.fused.reference import tolerance\n", body]
    with sources.using(cells):
        results = ex.check_inplace_tests(_defined(cells, "t"), _kit_op(), show=False)
    return {r.part: r for r in results}


@pytest.mark.parametrize("pieces, residual, missing, fix", [
    # in-place tests that never call the op with x and residual sharing memory: no aliasing credit
    (("values", "exact", "raises"), _BIT_FOR_BIT, {"aliasing"}, "share memory"),
    # one memory only, or overlapping views only (columns shifted, rows shifted): no aliasing credit without both
    (("values", "exact", "raises", "x is residual"), _BIT_FOR_BIT, {"aliasing"}, "rows are shifted by one"),
    (("values", "exact", "raises", "overlapping views"), _BIT_FOR_BIT, {"aliasing"}, "one tensor"),
    # the new residual compared within tolerance: no rounding credit
    (("values", "exact", "raises", "aliased"), _WITHIN, {"residual_rounding"}, "bit for bit"),
    (("values", "exact", "raises", "aliased"), _ADHOC, {"residual_rounding"}, "rtol=0, atol=0"),
    # random inputs compared within tolerance, no exact answer: no variance credit
    (("values", "raises", "aliased"), _BIT_FOR_BIT, {"variance"}, "exact output"),
    # calls that must raise and nothing else: raises_cleanly only
    (("raises",), _BIT_FOR_BIT, {"writes", "returns", "aliasing", "residual_rounding", "variance"},
     "compare what x and residual hold"),
])
def test_each_category_is_credited_only_by_calls_of_its_kind_and_feedback_names_the_fix(pieces, residual, missing,
                                                                                        fix):
    """The same tests with one kind of call left out, or a residual compared within tolerance, lose exactly that
    category; the feedback says what call or comparison catches it. (torch.compile is left out here: the
    declared-mutation category is never earned; the solution's tests earn it in test_grading_checks.py.)"""
    by = _pieces_test(*pieces, residual=residual)
    lost = {c for c in E.CATEGORIES if not by[c].passed} - {"declared_mutation"}
    assert by["passes_correct_ops"].passed and lost == missing, [(r.part, r.feedback[:90]) for r in by.values()]
    named = "writes" if "writes" in missing else next(iter(missing))
    assert fix in by[named].feedback, by[named].feedback


def test_tests_copied_from_the_kits_tests_score_nothing():
    kit = (ROOT / "tests/fused/test_fused_contract.py").read_text()
    start = kit.index("def test_variance_is_of_the_unrounded_sum")
    body = kit[kit.index("\n", kit.index('"""', kit.index('"""', start) + 3)) + 1:kit.index("\n\n\n", start)]
    copied = "def t(op_):\n    device, dtype = 'cpu', torch.float16\n" + body.replace(
        "fastpath_lib.fused_add_rms_norm(", "op_(")
    with sources.using([_HEAD, copied]):
        results = ex.check_inplace_tests(_defined([_HEAD, copied], "t"), _kit_op(), show=False)
    assert earned(results) == 0 and "kit's own tests' lines" in results[0].feedback, results[0].feedback
    assert len(E.copied_lines(copied)) >= 3 and not E.copied_lines(
        (ROOT / "solutions/ex12_fused_inplace_contract.py").read_text())


def test_the_second_argument_must_be_the_kits_in_place_op():
    import fastpath_lib

    results = ex.check_inplace_tests(lambda op_: None, fastpath_lib.fused_add_rms_norm, show=False)
    assert earned(results) == 0 and "fastpath_lib.fused_add_rms_norm_" in results[0].feedback


# --- in the grader: one notebook, the kernel's own op object ----------------------------------------------------------

RUN_ORDER = """
_runs = []
def my_inplace_tests(op_):
    _runs.append(1)
    op_(torch.randn(16, 64), torch.randn(16, 64))
    if len(_runs) > 3:
        raise AssertionError("a late run: with broken ops in the majority, probably a broken one")
"""
PATCHED_AGENT = """
def overlaps(a, b):
    return True
m = __import__("fastpath_lib.grading.rules.fused_mutants", fromlist=["Op"])  # the sandbox: not found, raises
r = __import__("fastpath_lib.fused.reference", fromlist=["native_"])
exec("m.Op.__call__ = lambda self, x, residual, weight=None, eps=None: r.native_(x, residual, weight, eps)")
"""


def test_in_the_grader_a_patched_overlap_agent_and_tests_that_learn_the_run_order_score_zero(tmp_path):
    """The kernel's copy of the ops under test is patched (in an exec string, which no source scan reads) so that
    every op is the composite: the ops run in the grader, so nothing changes. The tests fail from their fourth run
    on: some correct op runs after that."""
    nbformat = pytest.importorskip("nbformat")
    from fastpath_lib.grading.engine import cli
    from fastpath_lib.grading.engine.notebook import CHECK_TAG

    nb = nbformat.read(ROOT / "solutions/ex12_fused_inplace_contract.ipynb", as_version=4)
    for src, check in ((PATCHED_AGENT, "check_overlaps"), (RUN_ORDER, "check_inplace_tests")):
        at = next(i for i, c in enumerate(nb.cells) if CHECK_TAG in c.metadata.get("tags", []) and check in c.source)
        nb.cells.insert(at, nbformat.v4.new_code_cell(src))
    path = tmp_path / "ex12_fused_inplace_contract.ipynb"
    nbformat.write(nb, path)
    g = cli.grade_notebook(path, timeout=240)
    by = {p.part: p for p in g.parts}
    assert [p.part for p in g.parts] == [p for p, _ in EXERCISES["ex12"]]
    assert g.earned == 0, [(p.part, p.earned, p.feedback[:80]) for p in g.parts]
    assert "pairs answered wrong" in by["overlaps"].feedback, by["overlaps"]  # the patch changed nothing
    assert "fail on a correct op" in by["passes_correct_ops"].feedback, by["passes_correct_ops"].feedback


def test_the_exercises_inductor_reproduction_still_says_what_torch_does():
    """The exercise asks for ``aot_eager`` because Inductor fails on the in-place composite on a CPU (torch 2.13); its
    minimal reproduction, run from the exercise's own text: when a torch release fixes it, this says to update the
    text."""
    if torch.cuda.is_available() or not torch.__version__.startswith("2.13"):
        pytest.skip("the reproduction is stated for torch 2.13 on a CPU")
    text = (ROOT / "solutions/ex12_fused_inplace_contract.py").read_text(encoding="utf-8")
    block = text.split("# ```python\n", 1)[1].split("# ```\n", 1)[0]
    code = "\n".join(line[2:] for line in block.splitlines())
    torch._dynamo.reset()
    with pytest.raises(Exception, match="KeyError: 'buf1'") as err:
        exec(compile(code, "ex12 reproduction", "exec"), {"torch": torch})  # noqa: S102 - the exercise's own text
    assert type(err.value).__name__ == "InductorError"
    torch._dynamo.reset()
    exec(compile(code.replace("s.sum(-1, keepdim=True) * s", "s * 2"), "without the reduction", "exec"),
         {"torch": torch})  # it compiles without the reduction, as the text says


def test_a_learners_own_names_like_the_kits_tests_are_not_an_import_of_them():
    """The kit's tests are refused when imported (reader 14 F3): a local ``tests`` list and a helper named
    ``test_fused_alias`` are the learner's own and are graded by what they catch."""
    body = ("def test_fused_alias(op_):\n    x, r = torch.randn(16, 64), torch.randn(16, 64)\n"
            "    x0, r0 = x.clone(), r.clone()\n    op_(x, r)\n    torch.testing.assert_close(r, x0 + r0)\n"
            "def t(op_):\n    tests = [test_fused_alias]\n    for one in tests:\n        one(op_)")
    cells = [_HEAD, body]
    with sources.using(cells):
        results = {r.part: r for r in ex.check_inplace_tests(_defined(cells, "t"), _kit_op(), show=False)}
    assert results["passes_correct_ops"].passed, [r.feedback for r in results.values()]
    assert not any("kit's own tests" in r.feedback for r in results.values()), [r.feedback for r in results.values()]
