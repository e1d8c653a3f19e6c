"""Exercise 12: the in-place form's overlap condition, and its aliasing and in-place contract tests, graded by mutation.

``overlaps(a, b)`` says whether two tensors may share memory. It is asked about pairs built at grading time
(sizes, offsets and dtype drawn per call): the same tensor, overlapping and adjacent slices of one buffer, disjoint
row ranges, a row expanded with stride 0, a transposed view, a view of another dtype, strided views with gaps, two
separate buffers. Where the two share an element it must say ``True``; where their byte ranges do not even intersect
it must say ``False``; interleaved views that share no element (column halves, even and odd rows) may go either way
(the kit's own check is conservative there). It must be written with tensors' public attributes and their own state
(:data:`~fastpath_lib.grading.rules.mutation.TENSOR_STATE`: ``x._base``, as in the tests part): the kit's predicate,
torch's private overlap helpers (``torch._C._overlaps``, ``torch._debug_has_internal_overlap``), any other name under
``torch._`` or private attribute, and numpy's ``shares_memory`` score nothing.

``my_inplace_tests(op_)`` raises on the first promise of :func:`fastpath_lib.fused_add_rms_norm_` that ``op_`` breaks.
It runs against three correct ops (the kit's, the composite :func:`fastpath_lib.fused.reference.native_` and another
route within the output's tolerance; it must pass on each, on every run) and against the broken ops of
:mod:`fastpath_lib.grading.rules.fused_mutants` (each must make it raise). One part per fault category; feedback names
the categories with a survivor, never the op. In the grader the ops run in the grader's process (:class:`OpServer`):
each run hands the tests a fresh stub of the same source whose calls the grader answers, the correct ops but the
kit's twice each, in an order drawn at grading time; under ``torch.compile`` the stub is a registered op
(``fastpath_grading::op_under_test_``, its schema declaring the writes), and the grader answers its calls as the
compiled graph would run the op under test. The kernel holds no op, table or verdict.

Borrowed answers: tests that compare with the kit's op or call its kernels or predicate (compare with the contract,
:mod:`fastpath_lib.fused.reference`), that import the kit's tests or copy their lines, that inspect the op instead
of calling it, or that watch its implementation run (function or dispatch modes, ``__torch_function__`` spies, the
profiler, tracers, a ``torch.compile`` backend of their own, the traced graph) score nothing; so do tests that
never fail or fail on a correct op. Only the tests' own code is read (what they reach by name): test hygiene
(``torch._dynamo.reset()``, a private attribute of a module) is not inspecting the op, and the rest of the notebook is
not the answer. In the grader the ops run in the grader's process, so nothing the notebook changes in its kernel
reaches them; the stub's tensors cross with their autograd state (a leaf that requires grad is refused an in-place
write there as here). What is not guaranteed: a test that tells the ops apart by
a behaviour outside the contract it could observe (e.g. timing) is judged by its outcome only; and tests that fail at
random may earn a lucky point or two, as in exercise 09 (each correct op but the kit's runs twice to make that
unlikely).

Note:
    In a notebook this is advisory feedback; a learner's code can dig into the wrapper there.
"""

from __future__ import annotations

import random
import secrets
from pathlib import Path

import torch

from fastpath_lib.grading.engine import remote, sources
from fastpath_lib.grading.registry import Result, points_of
from fastpath_lib.grading.report.feedback import Fail, describe_error, graded, truth
from fastpath_lib.grading.rules import borrowed
from fastpath_lib.grading.rules import fused_mutants as M
from fastpath_lib.grading.rules.mutation import (INSPECTS, TENSOR_STATE, broken_op_results, first_errors,
                                                 inspection, inspection_stated, remote_outcomes)

__all__ = ["check_overlaps", "check_inplace_tests", "OpServer", "overlap_cases", "expected_overlap", "copied_lines",
           "CATEGORIES"]

#: The fault categories of the tests part, one graded part each (after ``passes_correct_ops``).
CATEGORIES = tuple(M.BROKEN)
_PARTS = ("passes_correct_ops",) + CATEGORIES
_WHAT = {
    "writes": "an op that writes the wrong result into x or residual, or leaves one of them alone: after an ordinary "
              "call, compare what x and residual hold with what the composite leaves",
    "returns": "an op that does not return the caller's own x and residual: check the returned tensors with `is`",
    "aliasing": "an op that is right on separate buffers but not when x and residual share memory: call it with x "
                "and residual one tensor, and with views of one buffer whose rows are shifted by one (x = b[1:], "
                "residual = b[:-1]; an op that writes each row before reading the next is wrong only there), and "
                "compare the buffer with what the composite leaves in a copy of it",
    "declared_mutation": "an op whose declared schema does not say it writes its inputs: run it under "
                         "torch.compile(..., backend=\"aot_eager\", fullgraph=True) and check what it wrote",
    "residual_rounding": "an op whose new residual is not the fp32 sum rounded once to x's dtype, by one unit in the "
                         "last place or less than the output's tolerance (any tolerance lets it through: allclose, "
                         "assert_close with the output's atol/rtol): compare the new residual bit for bit "
                         "(torch.equal, or assert_close(..., rtol=0, atol=0)), for fp32, fp16 and bf16 inputs, with a "
                         "weight of another dtype than x's too",
    "variance": "an op whose mean square is not taken from the fp32 sum, by less than the output's tolerance on "
                "random inputs: choose an input whose exact output you know, where the rounded and the fp32 sum "
                "give different answers, and compare bit for bit",
    "raises_cleanly": "an op that has written something by the time it raises: after a call that must raise, check "
                      "that x and residual still hold what they held",
}
_ROOT = Path(__file__).resolve().parents[3]
_KIT_TESTS = ("tests/fused/test_fused_contract.py", "tests/fused/test_fused_ops.py",
              "tests/upstream/test_vllm_providers.py")

_PRIVATE_OVERLAP = borrowed.Forbidden(builtins=(
    ("_overlaps", "torch's own overlap check is the answer"),
    ("_debug_has_internal_overlap", "torch's own overlap check is the answer")))
#: numpy's overlap answers, and the wording of part (a)'s private-name rule (the exercise states both).
_NUMPY_OVERLAP = ("shares_memory", "may_share_memory")
_PRIVATE_STATED = "anything under `torch._`, or a `_`-attribute other than a tensor's own state"
_OVERLAP_FORBIDDEN = (borrowed.kit("fused/predicate.py", why="that is the kit's own overlap check")
                      + borrowed.kit("fused/op.py", why="the kit's op and its explain() run the kit's overlap check")
                      + borrowed.kit("rmsnorm/predicate.py", why="that is the kit's own predicate")
                      + borrowed.kit("grading", why="that is the grader's own machinery") + _PRIVATE_OVERLAP)
_TESTS_FORBIDDEN = (borrowed.kit("grading", why="that is the grader's own machinery")
                    + borrowed.kit("fused/op.py", why="compare with the contract (fastpath_lib.fused.reference), "
                                                      "not with the kit's op")
                    + borrowed.kit("fused/kernels.py", why="those are the kit's own kernels")
                    + borrowed.kit("fused/predicate.py", why="that is the kit's own predicate"))
#: The op under test and the functions it runs (a correct op may be the kit's own).
_GIVEN = borrowed.given("grading/rules/fused_mutants.py", why="the op under test")


# --- part (a): the overlap condition ----------------------------------------------------------------------------------

def overlap_cases(rng: random.Random) -> list[tuple[str, dict]]:
    """``(label, recipe)`` pairs for :func:`fastpath_lib.grading.rules.fused_mutants.build_pair`, sizes drawn from
    ``rng``.

    The pairs span what ``overlaps`` is asked about: views of one storage in any element size (bytes, the buffer's
    own, wider ones), shapes, strides and offsets, and separate storages. Sharing is decided on bytes, and the pairs
    come two by two differing in one quantity only (one byte inside an element, or the byte just past it; an element
    of a wider view holding the buffer's element, or ending just before it), so a rule on elements instead of bytes,
    or on an element's first byte instead of its last, answers one of the two wrongly.
    """
    rows, cols = rng.randrange(6, 12), rng.choice((8, 16, 24))
    dtype = rng.choice((torch.float32, torch.float16))
    k = rng.randrange(2, rows - 3)
    n = rows * cols
    cut = rng.randrange(cols, n - cols)
    half = rng.randrange(2, cols - 2)
    other = rng.choice((torch.uint8, torch.int64))  # another element size than the buffer's, narrower or wider
    size = dtype.itemsize
    j = rng.randrange(n - 1)  # an element of the buffer, and a byte inside it past its first
    inside = j * size + rng.randrange(1, size)
    per = 8 // size  # the buffer's elements in one int64 element, the last of which is the buffer's element last
    m = rng.randrange(n // per - 1)
    last = (m + 1) * per - 1

    def case(label, a, b, buffers=(0, 0)):
        return label, {"rows": rows, "cols": cols, "dtype": dtype, "a": (buffers[0], a), "b": (buffers[1], b)}

    return [
        case("the same tensor twice", [], []),
        case("two separate buffers of one shape", [], [], (0, 1)),
        case("row ranges that share a row", [("rows", 0, k + 1, 1)], [("rows", k, rows, 1)]),
        case("disjoint row ranges of one buffer", [("rows", 0, k, 1)], [("rows", k, rows, 1)]),
        case("adjacent flat ranges (one ends where the other starts)", [("flat", 0, cut)], [("flat", cut, n)]),
        case("flat ranges that share one element", [("flat", 0, cut + 1)], [("flat", cut, n)]),
        case("a row expanded with stride 0, and the rows that contain it", [("expand_row", k, 4)],
             [("rows", k, k + 2, 1)]),
        case("a row expanded with stride 0, and the rows after it", [("expand_row", k, 4)],
             [("rows", k + 1, rows, 1)]),
        case("a transposed view and one of its rows", [("t",)], [("rows", k, k + 1, 1)]),
        case("a view of another dtype and a slice", [("view", other), ("rows", k, k + 2, 1)],
             [("rows", k + 1, rows, 1)]),
        case("strided rows with gaps that share a row", [("rows", 0, rows, 2)], [("rows", 0, rows, 3)]),
        case("even rows and odd rows", [("rows", 0, rows, 2)], [("rows", 1, rows, 2)]),
        case("left and right column halves", [("cols", 0, half, 1)], [("cols", half, cols, 1)]),
        case("a slice of a separate buffer at the same offsets", [("rows", 0, k, 1)], [("rows", 0, k, 1)], (0, 1)),
        case("one element and a byte inside it (a uint8 view)", [("flat", j, j + 1)],
             [("view", torch.uint8), ("flat", inside, inside + 1)]),
        case("one element and the byte just past it (a uint8 view)", [("flat", j, j + 1)],
             [("view", torch.uint8), ("flat", (j + 1) * size, (j + 1) * size + 1)]),
        case("an element of an int64 view and the last element it holds", [("view", torch.int64), ("flat", m, m + 1)],
             [("flat", last, last + 1)]),
        case("an element of an int64 view and the element just past it", [("view", torch.int64), ("flat", m, m + 1)],
             [("flat", last + 1, last + 2)]),
    ]


def _bytes(t: torch.Tensor) -> set[int]:
    base = t.untyped_storage().data_ptr()
    size = t.element_size()
    idx = torch.as_strided(torch.arange(t.untyped_storage().nbytes() // size), t.shape, t.stride(), t.storage_offset())
    start = t.data_ptr() - base - t.storage_offset() * size
    return {start + int(i) * size + j for i in idx.reshape(-1).unique() for j in range(size)}


def expected_overlap(a: torch.Tensor, b: torch.Tensor) -> bool | None:
    """``True`` when ``a`` and ``b`` share a byte, ``False`` when their byte ranges do not intersect, ``None`` (either
    answer) when the ranges intersect but no byte is shared."""
    if a.untyped_storage().data_ptr() != b.untyped_storage().data_ptr():
        return False
    ba, bb = _bytes(a), _bytes(b)
    if ba & bb:
        return True
    return None if min(ba) <= max(bb) and min(bb) <= max(ba) else False


def _private_names(fn) -> str | None:
    root = remote.root(fn) if remote.is_proxy(fn) else getattr(fn, "__name__", "")
    src = sources.closure_source(root) if root else ""
    names = sources.names_used(src)
    hit = sorted(n for n in names if n.startswith("torch._") or n.split(".")[-1] in _NUMPY_OVERLAP)
    attrs = sorted(a for a in sources.attributes_used(src) if a.startswith("_") and not a.startswith("__")
                   and a not in TENSOR_STATE)  # a tensor's own state (x._base) is the tensor's, as in part (b)
    if hit or attrs:
        return (f"your overlaps uses {(hit + attrs)[0]}: write it yourself, with tensors' public attributes "
                f"(data_ptr, untyped_storage, stride, storage_offset, element_size, shape) and their own state "
                f"(x._base)")
    return None


def _as_bool(got):
    """The learner's answer as a bool (numpy's ``bool_`` and a 0-d bool tensor count), its exception, or a
    ``TypeError`` saying what came back instead."""
    if isinstance(got, Exception):
        return got
    b = truth(got)
    return b if b is not None else TypeError(f"returned {type(got).__name__}, not a bool")


def _overlap_answers(fn, recipes):
    if remote.is_proxy(fn):  # each pair built here and sent with its shared storage; the pair stays read only
        borrowed.reject_handed_back(fn, _OVERLAP_FORBIDDEN)
        out = []
        for recipe in recipes:
            try:
                with remote.outputs():
                    got = fn(*M.build_pair(recipe))
            except Exception as exc:  # noqa: BLE001 - one failing case is feedback
                got = exc
            out.append(_as_bool(got))
        return out
    out = []
    for recipe in recipes:
        a, b = M.build_pair(recipe)
        try:
            got = borrowed.run(fn, (a, b), _OVERLAP_FORBIDDEN, allow_none=True)
        except Fail:
            raise
        except Exception as exc:  # noqa: BLE001 - one failing case is feedback
            got = exc
        out.append(_as_bool(got))
    return out


def _grade_overlaps(fn) -> list[Result]:
    if not callable(fn):
        raise Fail(f"expected a function, got {type(fn).__name__}")
    problem = _private_names(fn) or (borrowed.source_problem(getattr(fn, "__name__", ""), _OVERLAP_FORBIDDEN)
                                     if not remote.is_proxy(fn) and getattr(fn, "__name__", "") else None)
    if problem:
        raise Fail(problem)
    cases = overlap_cases(random.Random(secrets.randbits(32)))
    answers = _overlap_answers(fn, [r for _, r in cases])
    wrong = []
    for (label, recipe), got in zip(cases, answers):
        if isinstance(got, Exception):
            if "not implemented" in describe_error(got):
                raise got
            wrong.append(f"{label}: {describe_error(got)}")
            continue
        want = expected_overlap(*M.build_pair(recipe))
        if want is not None and got != want:
            wrong.append(f"{label}: yours {got}, expected {want}")
    if wrong:
        raise Fail(f"{len(wrong)} of {len(cases)} pairs answered wrong (True where the two share a byte; False "
                   f"where their byte ranges are apart: a view's bytes run from its data_ptr() over its shape and "
                   f"stride(), element_size() bytes an element, in bytes, not elements)\n" + "\n".join(wrong))
    return [Result("ex12", "overlaps", points_of("ex12", "overlaps"), True,
                   f"right on all {len(cases)} pairs (drawn now)")]


def check_overlaps(overlaps, *, show: bool = True):
    """``overlaps(a, b)`` says ``True`` for tensors that share memory, ``False`` for tensors whose bytes are apart."""
    return graded("ex12", ("overlaps",), _grade_overlaps, overlaps, show=show)


# --- part (b): the contract tests -------------------------------------------------------------------------------------

def _normalized_lines(text: str) -> set[str]:
    out = set()
    for line in text.splitlines():
        line = "".join(line.split("#", 1)[0].split())
        if len(line) >= 28:
            out.add(line)
    return out


def copied_lines(source: str) -> list[str]:
    """The lines of ``source`` (whitespace and comments left out, 28 characters or more) that the kit's fused-op
    tests contain too."""
    kit: set[str] = set()
    for rel in _KIT_TESTS:
        path = _ROOT / rel
        if path.exists():
            kit |= _normalized_lines(path.read_text(encoding="utf-8"))
    return sorted(_normalized_lines(source) & kit)


#: Tools that watch an op's implementation run (the torch functions it calls, the graph it traces) rather than what
#: it returns, writes or raises: a test built on them fingerprints the op instead of testing its contract.
_WATCHERS = ("TorchFunctionMode", "TorchDispatchMode", "__torch_function__", "__torch_dispatch__", "torch.profiler",
             "torch.autograd.profiler", "torch.fx", "make_fx", "torch.export", "torch.jit", "setprofile", "settrace",
             "traceback", "torch.ops.fastpath")
_GRAPH_ATTRS = frozenset({"graph", "code", "print_readable", "nodes", "graph_module", "tb_frame", "f_code"})
#: A ``torch.compile`` backend that is not a literal: a function of the learner's sees the traced graph.
_BACKEND_STATED = "a `torch.compile` backend that is not a literal string"
#: Names of the kit's own tests (modules, and the fused-op tests' functions by prefix).
_KIT_TEST_MODULES, _KIT_TEST_PREFIX = ("tests", "conftest", "runpy"), "test_fused"
#: The wording of the rules this check refuses tests by (besides forbidden calls): the exercise states each
#: (``tests/course/test_exercise_instructions.py``).
STATED = (*inspection_stated(), *(f"`{w}`" for w in _WATCHERS), *(f"`.{a}`" for a in sorted(_GRAPH_ATTRS)),
          _BACKEND_STATED, *(f"`{m}`" for m in _KIT_TEST_MODULES), f"`{_KIT_TEST_PREFIX}*`", _PRIVATE_STATED,
          *(f"`{n}`" for n in _NUMPY_OVERLAP))


def _watching(src: str) -> str | None:
    """What in ``src`` watches the op's implementation run (or reaches the kit's op through ``torch.ops``)."""
    import ast

    names = sources.names_used(src)
    hit = sorted(n for n in names if any(w in n for w in _WATCHERS))
    hit += sorted(sources.attributes_used(src) & _GRAPH_ATTRS)
    for tree in sources.parse_cells(src):
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and (sources.dotted(node.func) or "").endswith("compile"):
                hit += [f"backend={ast.unparse(k.value)}" for k in node.keywords
                        if k.arg == "backend" and not isinstance(k.value, ast.Constant)]
    return hit[0] if hit else None


def _imported(src: str) -> set[str]:
    """The modules ``src`` imports and the names it imports from them (``a.b``, ``a.b.name``): a learner's own
    variable or function of the same name is not an import of the kit's tests."""
    import ast

    out = set()
    for tree in sources.parse_cells(src):
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                out |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                out |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return out


def _source_problem(tests) -> str | None:
    root = remote.root(tests) if remote.is_proxy(tests) else getattr(tests, "__name__", "")
    src = sources.closure_source(root) if root else ""
    kit_tests = sorted(n for n in _imported(src) if n.split(".")[0] in _KIT_TEST_MODULES
                       or n.split(".")[-1].startswith(_KIT_TEST_PREFIX))
    if kit_tests:  # before the general rules, which refuse the import of a checkout's folder without naming it
        return f"your tests use {kit_tests[0]}: the kit's own tests are not yours to hand in; write your own"
    problem = borrowed.source_problem(root, _TESTS_FORBIDDEN, _GIVEN) if root else None
    if problem:
        return problem
    seen = inspection(src) or _watching(src)
    if seen:
        return f"your tests read {seen}: {INSPECTS}"
    copied = copied_lines(src)
    if len(copied) >= 3:
        return f"{len(copied)} lines of your tests are the kit's own tests' lines (e.g. {copied[0]!r}): write your own"
    return None


def _kit_op_given(kit_op):
    code = borrowed.code_of(kit_op)
    name = getattr(code, "co_qualname", getattr(code, "co_name", "")) if code is not None else ""
    if code is None or not str(code.co_filename).replace("\\", "/").endswith("fastpath_lib/fused/op.py") \
            or name != "fused_add_rms_norm_":
        raise Fail("the check's second argument must be the kit's op, fastpath_lib.fused_add_rms_norm_ (as in the "
                   "check cell)")
    return kit_op


def _local_run(tests, impl) -> BaseException | None:
    """What the tests raised on the op built from ``impl``. No call watch here (``sys.setprofile`` makes
    ``torch.compile`` several times slower, and under it the kit's op runs from torch's frames): borrowed answers are
    judged from the source (:func:`_grade_tests`)."""
    torch._dynamo.reset()
    try:
        tests(M.Op(impl))
    except Exception as exc:  # noqa: BLE001 - a failing test is what we look for
        return exc
    return None


class OpServer:
    """One run's op under test, in the grader: each call of the kernel's stub answered by ``impl`` on the grader's own
    tensors. A call from a compiled graph (the stub's registered op, whose schema declares the writes) runs the op as
    that graph would (:func:`fastpath_lib.grading.rules.fused_mutants.compiled`): an op whose own schema declares no
    write is dropped there, as functionalization drops it."""

    def __init__(self, impl):
        graph = M.compiled(impl)
        self.op, self.graph = M.Op(impl), (M.Op(graph) if graph is not None else None)

    def __call__(self, message: dict) -> dict:
        return remote.serve_op(message, self._run)

    def _run(self, kind, args, message):
        if message.get("compiled"):
            if self.graph is not None:
                self.graph(*args)
            return None
        return self.op(*args)


def _grade_tests(tests, kit_op) -> list[Result]:
    if not callable(tests):
        raise Fail(f"expected a function, got {type(tests).__name__}")
    kit_op = _kit_op_given(kit_op)
    borrowed.reject_handed_back(tests, _TESTS_FORBIDDEN, _GIVEN)
    problem = _source_problem(tests)
    if problem:
        raise Fail(problem)
    if remote.is_proxy(tests):
        known = M.impls() | {"kit": remote.session(tests).kit_op("fused_add_rms_norm_")}
        servers = {v: (lambda v=v: OpServer(known[v])) for v in known}
        runs = M.variants() + list(M.CORRECT)  # the kit's op once: it is the slowest to compile
        first = first_errors(remote_outcomes(tests, "fused_add_rms_norm_", servers, runs))
    else:
        known = M.impls() | {"kit": kit_op}

        def first(variant):
            return _local_run(tests, known[variant])
    controls = (("the kit's op", "kit"), ("the composite", "composite"), ("another correct route", "other_route"))
    return broken_op_results("ex12", first, controls, {c: len(M.BROKEN[c]) for c in CATEGORIES}, _WHAT,
                             "passes on the three correct ops, and fails on broken ones")


def check_inplace_tests(my_inplace_tests, kit_op, *, show: bool = True):
    """``my_inplace_tests(op_)`` passes on correct in-place fused ops and raises on each broken one."""
    return graded("ex12", _PARTS, _grade_tests, my_inplace_tests, kit_op, show=show)
