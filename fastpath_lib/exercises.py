"""The checks learners call from the exercise notebooks (``exercises/exNN_*.ipynb``).

Each ``check_*`` function runs the learner's code on a fixed set of cases and shows, per graded part, ``passed`` or a
"yours vs expected" report. It never raises: a stub that still raises ``NotImplementedError`` (or returns ``None``)
scores 0 with feedback. Next to the text, each result carries a machine-readable copy (MIME type
:data:`fastpath_lib.grading.registry.MIME`) that ``python -m fastpath_lib grade`` reads from the executed notebook.

Pass ``show=False`` to get the :class:`~fastpath_lib.grading.registry.Result` list back instead of displaying it.

>>> import torch
>>> from fastpath_lib import exercises
>>> [r.passed for r in exercises.check_default_eps(lambda dtype: 1e-6, show=False)]
[False]
"""

from __future__ import annotations

import dataclasses
import re
import traceback
from collections.abc import Callable

import torch

from fastpath_lib.cases import CaseSpec, guard_intact, output_guard_intact, poisoned_like
from fastpath_lib.grading.registry import EXERCISES, Result, points_of
from fastpath_lib.rmsnorm import layout
from fastpath_lib.rmsnorm import predicate as rms
from fastpath_lib.testing import compare, reference_grads, reference_rms_norm

__all__ = [
    "check_default_eps", "check_reference", "check_forward_kernel", "check_backward_kernel",
    "check_dtype_condition", "check_cols_condition", "check_alignment_condition", "check_v2_predicate",
    "check_boundary_cases", "check_case_matrix", "check_classification", "check_pr_note",
    "check_capstone_reference", "check_capstone_kernel", "check_capstone_predicate", "check_capstone_dispatch",
    "synthetic_results", "synthetic_environment", "interpreter_results", "interpreter_environment",
    "expected_classes", "row_stride", "device", "SYNTHETIC_LABEL",
    "V2_MAX_COLS", "V2_ALIGN_BYTES", "V2_DTYPES",
]


# --- reporting ---------------------------------------------------------------------------------------------------

class _Fail(Exception):
    """Raised inside a check to fail the part with a message."""


def _emit(results: list[Result], show: bool):
    if not show:
        return results
    try:
        from IPython import get_ipython
        from IPython.display import display

        if get_ipython() is not None:
            for r in results:
                display(r.bundle(), raw=True)
            return None
    except ImportError:
        pass
    for r in results:
        print(r.text())
    return None


def _describe_error(exc: BaseException) -> str:
    if isinstance(exc, NotImplementedError):
        return "not implemented yet: your code still raises NotImplementedError"
    if isinstance(exc, _Fail):
        return str(exc)
    name = type(exc).__name__
    msg = str(exc).strip().splitlines()
    where = ""
    tb = traceback.extract_tb(exc.__traceback__)
    for frame in reversed(tb):
        if "fastpath_lib" not in frame.filename.replace("\\", "/"):
            where = f" (line {frame.lineno}: {frame.line})" if frame.line else f" (line {frame.lineno})"
            break
    first = msg[0][:300] if msg else ""
    chain = f"{name} {exc} {exc.__cause__!r} {exc.__context__!r}"  # Triton's CompilationError wraps the raise
    if "NotImplementedError" in chain:
        return "not implemented yet: your code still raises NotImplementedError"
    return f"your code raised {name}: {first}{where}"


def _part(exercise: str, part: str, fn: Callable[[], str | None]) -> Result:
    """Run ``fn``; it returns ``None`` (or a note) when the part passes and raises :class:`_Fail` when not."""
    pts = points_of(exercise, part)
    try:
        note = fn()
        return Result(exercise, part, pts, True, note or "")
    except Exception as exc:  # noqa: BLE001 - a learner's bug must become feedback, never a crash
        return Result(exercise, part, pts, False, _describe_error(exc))


def _call(fn, *args):
    """Call learner code; a ``None`` result is a failure (the stub returned nothing)."""
    out = fn(*args)
    if out is None:
        raise _Fail("your function returned None (is the stub still in place?)")
    return out


def device() -> str:
    """Where checks build their inputs: CUDA when present and the interpreter is off, else the CPU."""
    from fastpath_lib import runtime

    return "cuda" if runtime.cuda_available() and not runtime.interpreter_enabled() else "cpu"


def _table(rows: list[tuple], header: tuple) -> str:
    cells = [tuple(str(c) for c in header)] + [tuple(str(c) for c in r) for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _dname(d) -> str:
    return str(d).replace("torch.", "")


# --- ex01: the reference ------------------------------------------------------------------------------------------

def check_default_eps(my_default_eps, *, show: bool = True):
    """ex01: ``my_default_eps(dtype)`` must equal ``F.rms_norm``'s default eps for each floating dtype."""
    def run():
        rows, bad = [], 0
        for d in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
            yours = my_default_eps(d)
            exp = rms.default_eps(d)
            ok = yours is not None and float(yours) == exp
            bad += not ok
            rows.append((_dname(d), yours, exp, "ok" if ok else "WRONG"))
        if bad:
            raise _Fail(f"{bad} of 4 dtypes wrong (hint: F.rms_norm computes fp16/bf16 in fp32)\n"
                        + _table(rows, ("dtype", "yours", "expected", "")))
    return _emit([_part("ex01", "default_eps", run)], show)


_EX01_CASES = (
    ("7x33 fp32, eps=None", CaseSpec(7, 33), None),
    ("7x33 fp16 tiny values, eps=None", CaseSpec(7, 33, torch.float16, scale=1e-3), None),
    ("5x20 bf16 no weight, eps=1e-5", CaseSpec(5, 20, torch.bfloat16, weight=None), 1e-5),
    ("6x16 fp32 values ~1e-4, eps=None", CaseSpec(6, 16, scale=1e-4), None),
    ("6x16 fp32 values ~1e-4, eps=0.0", CaseSpec(6, 16, scale=1e-4), 0.0),
    ("2x3x10 fp32, normalized over 2 dims", CaseSpec(6, 10, norm_dims=2), None),
    ("4x9 fp32 row slice", CaseSpec(4, 9, layout="row_slice", pad=3), 1e-6),
)


def check_reference(my_reference, *, show: bool = True):
    """ex01: ``my_reference(x, normalized_shape, weight=None, eps=None)`` vs the kit's float64 reference."""
    def run():
        rows, bad = [], []
        for label, spec, eps in _EX01_CASES:
            built = spec.build(seed=1, device="cpu")
            x, ns, w = built.args()
            yours = _call(my_reference, x, ns, w, eps) if w is not None else _call(my_reference, x, ns, None, eps)
            exp = reference_rms_norm(x, ns, w, eps)
            if not isinstance(yours, torch.Tensor):
                problem = f"returned {type(yours).__name__}, expected a tensor"
            elif yours.dtype != torch.float64:
                problem = f"dtype {_dname(yours.dtype)}, expected float64"
            else:
                problem = compare(yours, exp, torch.float64)
            if problem is None and not built.inputs_untouched():
                problem = "your reference modified its input"
            rows.append((label, "ok" if problem is None else problem))
            if problem:
                bad.append(label)
        if bad:
            raise _Fail(f"{len(bad)} of {len(rows)} cases differ from the expected float64 result\n"
                        + _table(rows, ("case", "yours vs expected")))
    return _emit([_part("ex01", "reference", run)], show)


# --- ex02: the forward (and backward) kernel ----------------------------------------------------------------------

def _ex02_cases():
    return (
        CaseSpec(7, 33, torch.float32, layout="row_slice", pad=3),
        CaseSpec(5, 100, torch.float16, weight=None),
        CaseSpec(3, 781, torch.bfloat16),
        CaseSpec(1, 1, torch.float32),
        CaseSpec(6, 64, torch.float32, layout="step"),
        CaseSpec(4, 17, torch.float32, scale=1e-2),
    )


def _launch_fwd(kernel, x2d, w, eps, out):
    import numpy as np
    import triton

    n_rows, n_cols = x2d.shape
    block = triton.next_power_of_2(max(n_cols, 1))
    with np.errstate(all="ignore"):
        kernel[(n_rows,)](x2d, w if w is not None else x2d, out, x2d.stride(0), out.stride(0), n_cols, eps,
                          HAS_WEIGHT=w is not None, BLOCK_SIZE=block)


def check_forward_kernel(my_kernel, *, show: bool = True):
    """ex02: launch ``my_kernel`` (the forward kernel's signature) on irregular shapes; compare with the reference."""
    def run():
        rows, bad = [], 0
        for spec in _ex02_cases():
            built = spec.build(seed=2, device=device())
            x, ns, w = built.args()
            eps = rms.default_eps(x.dtype)
            y, buf, pristine = poisoned_like(x.shape, x.dtype, x.device)
            _launch_fwd(my_kernel, x, w, eps, y)
            problem = compare(y, reference_rms_norm(x, ns, w, eps), x.dtype)
            if problem is None and not output_guard_intact(buf, pristine, 16):
                problem = "wrote outside the output rows (mask the tail: cols < n_cols)"
            if problem is None and not built.inputs_untouched():
                problem = "modified the input or weight"
            bad += problem is not None
            rows.append((_probe_label(spec), "ok" if problem is None else problem))
        if bad:
            raise _Fail(f"{bad} of {len(rows)} cases wrong\n" + _table(rows, ("case", "yours vs expected")))
    return _emit([_part("ex02", "forward_kernel", run)], show)


def check_backward_kernel(my_backward, *, show: bool = True):
    """ex02 stretch: ``my_backward(dy2d, x2d, weight, eps) -> (dx, dw)`` vs float64 autograd of the reference."""
    def run():
        rows, bad = [], 0
        for spec in (CaseSpec(5, 33), CaseSpec(4, 100, torch.float16, weight=None),
                     CaseSpec(6, 24, layout="row_slice", pad=8)):
            built = spec.build(seed=3, device=device())
            x, ns, w = built.args()
            eps = rms.default_eps(x.dtype)
            g = torch.Generator().manual_seed(4)
            dy = torch.randn(x.shape, generator=g, dtype=torch.float64).to(x.dtype).to(x.device)
            out = _call(my_backward, dy, x, w, eps)
            dx, dw = out
            edx, edw = reference_grads(x, ns, w, eps, dy)
            problem = compare(dx, edx, x.dtype, grad=True)
            problem = problem and f"dx: {problem}"
            if problem is None and w is not None:
                problem = "dw is None, expected a tensor" if dw is None else compare(dw, edw, w.dtype, grad=True)
                problem = problem and f"dw: {problem}"
            bad += problem is not None
            rows.append((_probe_label(spec), "ok" if problem is None else problem))
        if bad:
            raise _Fail(f"{bad} of {len(rows)} cases wrong\n" + _table(rows, ("case", "yours vs expected")))
    return _emit([_part("ex02", "backward_kernel (stretch)", run)], show)


# --- ex03: conditions for a changed spec --------------------------------------------------------------------------

#: the changed spec of exercise 03
V2_MAX_COLS = 8192
V2_ALIGN_BYTES = 32
V2_DTYPES = (torch.float16, torch.bfloat16)


def row_stride(t: torch.Tensor) -> int | None:
    """Elements between consecutive rows when ``t``'s leading dims collapse to one row stride, else ``None``."""
    return layout.row_stride(t)


def _v2_expected(name: str, c) -> bool:
    x = c.input
    if name == "dtype":
        return x.dtype in V2_DTYPES
    if name == "cols":
        return (x.shape[-1] if x.dim() else 1) <= V2_MAX_COLS
    if name == "alignment":
        if x.data_ptr() % V2_ALIGN_BYTES:
            return False
        rows = x.numel() // max(x.shape[-1], 1)
        st = row_stride(x)
        return rows <= 1 or st is None or (st * x.element_size()) % V2_ALIGN_BYTES == 0
    raise KeyError(name)


def _probe(spec: CaseSpec, seed: int = 0):
    b = spec.build(seed=seed, device=device())
    x, ns, w = b.args()
    return rms.make_call(x, ns, w)


_F16, _B16, _F32 = torch.float16, torch.bfloat16, torch.float32
_V2_PROBES = {
    "dtype": (CaseSpec(8, 16, _F16), CaseSpec(8, 16, _B16), CaseSpec(8, 16, _F32), CaseSpec(8, 16, torch.float64),
              CaseSpec(8, 16, _F16, weight=_F32)),
    "cols": (CaseSpec(1, 8192, _F16), CaseSpec(1, 8193, _F16), CaseSpec(1, 8208, _B16), CaseSpec(8, 16, _F16),
             CaseSpec(1, 16384, _F16)),
    "alignment": (CaseSpec(8, 16, _F16), CaseSpec(8, 8, _F16), CaseSpec(8, 24, _F16), CaseSpec(8, 32, _B16),
                  CaseSpec(8, 16, _F16, offset=8), CaseSpec(8, 16, _F16, offset=16), CaseSpec(8, 16, _B16, offset=2),
                  CaseSpec(8, 16, _F16, layout="row_slice", pad=8), CaseSpec(8, 20, _F16, layout="row_slice", pad=12),
                  CaseSpec(8, 16, _F16, layout="step"), CaseSpec(1, 24, _F16), CaseSpec(8, 8, _F32)),
}


def _check_condition(part: str, name: str, fn, show: bool):
    def run():
        rows, bad = [], 0
        for spec in _V2_PROBES[name]:
            c = _probe(spec)
            why = fn(c)
            if why is not None and not isinstance(why, str):
                raise _Fail(f"on {spec.label()} your check returned {why!r}; return None (holds) or a reason string")
            yours, exp = why is None, _v2_expected(name, c)
            bad += yours != exp
            rows.append((_probe_label(spec), _hold(yours), _hold(exp), "" if yours == exp else "<-- differs",
                         why or ""))
        if bad:
            raise _Fail(f"{bad} of {len(rows)} probe cases decided differently\n"
                        + _table(rows, ("case", "yours", "expected", "", "your reason")))
    return _emit([_part("ex03", part, run)], show)


def _hold(b: bool) -> str:
    return "holds" if b else "fails"


def _probe_label(spec: CaseSpec) -> str:
    """``spec.label()`` plus the fields it leaves out (weight offset, scale)."""
    lab = spec.label()
    lab += f" woff{spec.weight_offset}" if spec.weight_offset else ""
    return lab + (f" scale={spec.scale:g}" if spec.scale != 1.0 else "")


def check_dtype_condition(fn, *, show: bool = True):
    """ex03: ``fn(call) -> None | str`` holds exactly for fp16 and bf16 inputs."""
    return _check_condition("dtype_condition", "dtype", fn, show)


def check_cols_condition(fn, *, show: bool = True):
    """ex03: ``fn(call) -> None | str`` holds exactly for rows of at most 8192 columns."""
    return _check_condition("cols_condition", "cols", fn, show)


def check_alignment_condition(fn, *, show: bool = True):
    """ex03: ``fn(call) -> None | str`` holds when the input pointer and (for >1 row) the row stride in bytes are
    multiples of 32."""
    return _check_condition("alignment_condition", "alignment", fn, show)


_V2_MIXED = (CaseSpec(16, 64, _F16), CaseSpec(16, 64, _F32), CaseSpec(16, 8200, _B16), CaseSpec(16, 64, _F16,
             layout="transposed"), CaseSpec(16, 8, _F16), CaseSpec(16, 64, _B16, offset=4),
             CaseSpec(16, 64, _B16, layout="row_slice", pad=16), CaseSpec(0, 64, _F16), CaseSpec(16, 64, _F16,
             layout="permuted"))


def check_v2_predicate(make_predicate, *, show: bool = True):
    """ex03: ``make_predicate() -> Predicate``: its routes on mixed probes vs the changed spec (plus contiguity,
    row stride and non-empty)."""
    def run():
        pred = _call(make_predicate) if callable(make_predicate) else make_predicate
        if pred is None or not hasattr(pred, "evaluate"):
            raise _Fail(f"expected a Predicate, got {type(pred).__name__}")
        rows, bad = [], 0
        for spec in _V2_MIXED:
            c = _probe(spec)
            d = pred.evaluate(c)
            x = c.input
            exp_ok = (x.numel() > 0 and all(_v2_expected(n, c) for n in ("dtype", "cols", "alignment"))
                      and (x.shape[-1] <= 1 or x.stride(-1) == 1) and row_stride(x) is not None)
            exp = "triton" if exp_ok else "fallback"
            bad += d.route != exp
            rows.append((spec.label(), d.route, exp, "" if d.route == exp else "<-- differs"))
        if bad:
            raise _Fail(f"{bad} of {len(rows)} routes differ\n" + _table(rows, ("case", "yours", "expected", "")))
    return _emit([_part("ex03", "predicate", run)], show)


# --- ex04: boundary cases graded by mutation ------------------------------------------------------------------------

MAX_EX04_CASES = 24
MAX_EX04_ELEMENTS = 8 * 16384 * 2


def _exercise_call(x, ns, w):
    """The predicate context with the interpreter's limits (min_rows 8, max_cols 16384) on any machine."""
    return dataclasses.replace(rms.make_call(x, ns, w), limits=rms.Limits(source="exercise limits"))


def check_boundary_cases(my_cases, *, show: bool = True):
    """ex04: ``my_cases() -> list[CaseSpec]`` must catch every seeded mutant (one part per mutant)."""
    from fastpath_lib.grading import mutants as M
    from fastpath_lib.grading.registry import MUTANTS

    parts = [p for p, _ in EXERCISES["ex04"]]
    try:
        specs = list(_call(my_cases))
        if not specs:
            raise _Fail("your function returned no cases")
        if len(specs) > MAX_EX04_CASES:
            raise _Fail(f"{len(specs)} cases; at most {MAX_EX04_CASES}, please: boundary cases are chosen, not swept")
        for s in specs:
            if not isinstance(s, CaseSpec):
                raise _Fail(f"every case must be a CaseSpec, got {type(s).__name__}: {s!r}")
            if s.rows * s.cols > MAX_EX04_ELEMENTS:
                raise _Fail(f"{_probe_label(s)} is too large for a unit test (> {MAX_EX04_ELEMENTS} elements)")
        caught = {m: None for m in MUTANTS}
        errors = []
        for s in specs:
            try:
                built = s.build(seed=5, device=device())
            except Exception as exc:  # noqa: BLE001
                errors.append(f"{_probe_label(s)}: cannot build ({type(exc).__name__}: {exc})")
                continue
            x, ns, w = built.args()
            call = _exercise_call(x, ns, w)
            route = rms.PREDICATE.evaluate(call).route
            for m in M.PREDICATE_MUTANTS:
                if caught[m] is None and M.mutant_predicate(m).evaluate(call).route != route:
                    caught[m] = f"caught by {_probe_label(s)} (route {route}, mutant says otherwise)"
            if route != "triton":
                continue
            eps = rms.default_eps(x.dtype)
            expected = reference_rms_norm(x, ns, w, eps)
            x2d = x.reshape(-1, x.shape[-1]) if x.is_contiguous() else x
            if x2d.dim() != 2:
                continue
            for m, k in [("correct", 0)] + list(M.KERNEL_MUTANTS.items()):
                if m != "correct" and caught[m] is not None:
                    continue
                y, buf, pristine = poisoned_like(x2d.shape, x.dtype, x.device)
                M.run_kernel(k, x2d, w, eps, y)
                bad = compare(y.view(x.shape), expected, x.dtype)
                if bad is None and not output_guard_intact(buf, pristine, 16):
                    bad = "wrote outside the output"
                if bad is None and not built.inputs_untouched():
                    bad = "changed the input"
                if m == "correct":
                    if bad:
                        errors.append(f"{_probe_label(s)}: the correct kernel fails here ({bad}); not a usable case")
                        break
                elif bad:
                    what = bad if bad.startswith(("wrote", "changed")) else "wrong result"
                    caught[m] = f"caught by {_probe_label(s)}: {what}"
        results = []
        for m, part in zip(MUTANTS, parts):
            note = caught[m]
            if note:
                results.append(Result("ex04", part, points_of("ex04", part), True, note))
            else:
                fb = f"survived: {M.HINTS[m]}" + (("\n" + "\n".join(errors)) if errors else "")
                results.append(Result("ex04", part, points_of("ex04", part), False, fb))
    except Exception as exc:  # noqa: BLE001
        fb = _describe_error(exc)
        results = [Result("ex04", p, points_of("ex04", p), False, fb) for p in parts]
    return _emit(results, show)


# --- ex05: the benchmark case matrix --------------------------------------------------------------------------------

SMALL_ELEMENTS = 65536
LARGE_ELEMENTS = 4 * 1024 * 1024
STRIDED = ("row_slice", "step", "transposed", "permuted")
EXPECTATIONS = ("improve", "neutral", "loss", "fallback")


def _gpu_route(spec: CaseSpec) -> str:
    """The route the predicate takes for ``spec`` on a CUDA sm_90 device with the conservative row threshold.

    Rows only matter through the threshold (and, for 3-d layouts, their parity), so the case is built with at most
    9 rows and a threshold that gives the same answer: a 4096-row case costs no more than an 8-row one.
    """
    rows = spec.rows if spec.rows < 8 else 8 + spec.rows % 2
    min_rows = 8 if spec.rows >= rms.DEFAULT_CUDA_MIN_ROWS else rms.DEFAULT_CUDA_MIN_ROWS
    b = dataclasses.replace(spec, rows=rows).build(seed=0, device="cpu")
    x, ns, w = b.args()
    c = rms.make_call(x, ns, w)
    c = dataclasses.replace(c, limits=rms.Limits(min_rows=min_rows, source="CUDA default"),
                            interpret=False, device_type="cuda", capability=(9, 0))
    return rms.PREDICATE.evaluate(c).route


def _aligned(spec: CaseSpec) -> bool:
    el = torch.empty((), dtype=spec.dtype).element_size()
    stride = spec.cols + (spec.pad if spec.layout == "row_slice" else 0)
    return spec.offset * el % 16 == 0 and stride * el % 16 == 0 and spec.layout not in ("transposed", "permuted")


def check_case_matrix(my_matrix, *, show: bool = True):
    """ex05: ``my_matrix() -> list[(case_id, CaseSpec, expectation)]`` meets the coverage rules (three parts)."""
    parts = ("size_coverage", "layout_coverage", "expectations")
    try:
        entries = list(_call(my_matrix))
        rows = []
        for e in entries:
            if not (isinstance(e, tuple) and len(e) == 3 and isinstance(e[1], CaseSpec)):
                raise _Fail(f"each entry must be (case_id, CaseSpec, expectation), got {e!r}")
            cid, spec, exp = e
            if exp not in EXPECTATIONS:
                raise _Fail(f"{cid}: expectation {exp!r}, need one of {EXPECTATIONS}")
            if spec.rows * spec.cols > 64 * 1024 * 1024:
                raise _Fail(f"{cid}: {spec.rows}x{spec.cols} is beyond this kit's largest case (64M elements)")
            rows.append((cid, spec, exp))
        ids = [r[0] for r in rows]
        n = len(rows)
        small = sum(s.rows * s.cols <= SMALL_ELEMENTS for _, s, _ in rows)
        large = sum(s.rows * s.cols >= LARGE_ELEMENTS for _, s, _ in rows)
        aligned = sum(_aligned(s) for _, s, _ in rows)
        strided = sum(s.layout in STRIDED for _, s, _ in rows)

        def rule(ok, text):
            return ("ok  " if ok else "MISSING  ") + text

        size = [rule(n >= 12, f">= 12 cases: {n}"), rule(len(set(ids)) == n, "unique case ids"),
                rule(small >= 2, f">= 2 small cases (<= {SMALL_ELEMENTS} elements): {small}"),
                rule(large >= 2, f">= 2 large cases (>= {LARGE_ELEMENTS} elements): {large}")]
        layout = [rule(aligned >= 2, f">= 2 aligned cases (16-byte pointer and row stride): {aligned}"),
                  rule(n - aligned >= 2, f">= 2 odd cases (misaligned width, pointer or stride): {n - aligned}"),
                  rule(n - strided >= 2, f">= 2 contiguous cases: {n - strided}"),
                  rule(strided >= 2, f">= 2 strided cases ({', '.join(STRIDED)}): {strided}")]
        routes = {cid: _gpu_route(s) for cid, s, _ in rows}
        not_improve = sum(e in ("neutral", "loss") for _, _, e in rows)
        fb = sum(e == "fallback" and routes[c] == "fallback" for c, _, e in rows)
        wrong = [f"{c}: expected {e} but the predicate routes it to {routes[c]}" for c, _, e in rows
                 if (e == "fallback") != (routes[c] == "fallback")]
        expect = [rule(not_improve >= 2, f">= 2 cases expected not to improve (neutral/loss): {not_improve}"),
                  rule(fb >= 2, f">= 2 fallback cases (the predicate rejects them on a GPU): {fb}"),
                  rule(not wrong, "expectations agree with the predicate's routes" + "".join(
                      "\n      " + w for w in wrong))]
        results = []
        for part, lines in zip(parts, (size, layout, expect)):
            ok = all(line.startswith("ok") for line in lines)
            results.append(Result("ex05", part, points_of("ex05", part), ok, "\n".join(lines)))
    except Exception as exc:  # noqa: BLE001
        results = [Result("ex05", p, points_of("ex05", p), False, _describe_error(exc)) for p in parts]
    return _emit(results, show)


# --- ex06: classifying results --------------------------------------------------------------------------------------

#: SYNTHETIC TEACHING DATA, NOT A MEASUREMENT. Invented numbers with the shape of a results table (medians and
#: 20-80 % spreads, q80 - q20, in microseconds), built so that each classification rule is exercised. No GPU ran them.
_SYNTHETIC = (
    # case_id, route, baseline_median_us, baseline_spread_us, candidate_median_us, candidate_spread_us
    ("c01_4096x4096_bf16", "triton", 210.0, 2.0, 140.0, 1.5),
    ("c02_8192x1024_fp16", "triton", 95.0, 1.0, 71.0, 1.0),
    ("c03_1024x8192_fp32", "triton", 180.0, 3.0, 178.0, 3.0),
    ("c04_2048x4096_bf16_slice", "triton", 60.0, 0.6, 56.0, 0.5),
    ("c05_1024x128_fp16", "triton", 9.0, 0.2, 9.8, 0.2),
    ("c06_1024x64_fp32", "triton", 8.0, 0.1, 7.95, 0.1),
    ("c07_4096x4096_bf16_noisy", "triton", 200.0, 45.0, 160.0, 40.0),
    ("c08_1024x1000_fp16_nonpow2", "triton", 14.0, 0.4, 14.3, 0.4),
    ("c09_512x4096_fp16_small", "fallback", 11.0, 0.2, 11.1, 0.2),
    ("c10_4096x4096_fp16_transposed", "fallback", 300.0, 4.0, 240.0, 4.0),
    ("c11_4096x32768_bf16_wide", "fallback", 900.0, 9.0, 905.0, 9.0),
    ("c12_2048x2048_fp32_step", "triton", 40.0, 0.4, 47.0, 0.5),
)

SYNTHETIC_LABEL = "SYNTHETIC teaching dataset: invented numbers, not a measurement"


def synthetic_results():
    """The fixed results table of exercises 06 and 07 (a pandas DataFrame, synthetic: see :data:`SYNTHETIC_LABEL`)."""
    import pandas as pd

    df = pd.DataFrame(_SYNTHETIC, columns=["case_id", "route", "baseline_median_us", "baseline_spread_us",
                                            "candidate_median_us", "candidate_spread_us"])
    df.attrs["source"] = SYNTHETIC_LABEL
    return df


def synthetic_environment() -> dict:
    """The environment record that goes with :func:`synthetic_results` (it names itself synthetic)."""
    return {"device_kind": "cuda", "device": "synthetic GPU (teaching data)", "synthetic": True,
            "note": SYNTHETIC_LABEL}


def interpreter_results():
    """A results table shaped like a run under Triton's CPU interpreter: synthetic too, and not GPU data."""
    df = synthetic_results().head(4).copy()
    df["candidate_median_us"] = df["baseline_median_us"] * 0.5
    df.attrs["source"] = "SYNTHETIC interpreter-shaped data, not a GPU measurement"
    return df


def interpreter_environment() -> dict:
    return {"device_kind": "cpu", "device": "Triton CPU interpreter", "synthetic": True,
            "note": "not a GPU measurement"}


def _expected_class(row) -> str:
    """The rule of :func:`fastpath_lib.bench.analysis.classify`, on one row of the synthetic table."""
    if row["route"] == "fallback":
        return "fallback"
    b, c = row["baseline_median_us"], row["candidate_median_us"]
    band = max(row["baseline_spread_us"] / b, row["candidate_spread_us"] / c)
    from fastpath_lib.bench.analysis import outcome

    return outcome(c / b, band)


def expected_classes(df) -> dict[str, str]:
    """The grader's classification of each case (the rule of exercise 06)."""
    return {r["case_id"]: _expected_class(r) for _, r in df.iterrows()}


def check_classification(my_classify, *, show: bool = True):
    """ex06: ``my_classify(row) -> "win" | "neutral" | "loss" | "fallback"`` on each row of the synthetic table."""
    df = synthetic_results()
    exp = expected_classes(df)

    def classify_all():
        return {r["case_id"]: _call(my_classify, r) for _, r in df.iterrows()}

    def run():
        yours = classify_all()
        rows = [(c, yours[c], exp[c], "" if yours[c] == exp[c] else "<-- differs") for c in exp]
        bad = sum(yours[c] != exp[c] for c in exp)
        if bad:
            raise _Fail(f"{bad} of {len(exp)} cases classified differently\n"
                        + _table(rows, ("case", "yours", "expected", "")))

    def counts():
        from collections import Counter

        yours, want = Counter(classify_all().values()), Counter(exp.values())
        if yours != want:
            raise _Fail(f"counts yours {dict(sorted(yours.items()))} vs expected {dict(sorted(want.items()))}")
        return "counts: " + ", ".join(f"{k}={want[k]}" for k in ("win", "neutral", "loss", "fallback"))

    return _emit([_part("ex06", "classification", run), _part("ex06", "summary_counts", counts)], show)


# --- ex07: the PR note ------------------------------------------------------------------------------------------------

SECTIONS = {
    "summary": r"summary",
    "eligibility/fallback": r"eligib|fallback",
    "semantic evidence": r"semantic|correctness",
    "mechanism": r"mechanism",
    "performance": r"performance",
    "limitations": r"limitation",
}
_SPEEDUP = re.compile(r"(\b\d+(\.\d+)?\s*(x|×)\s*(faster|speed)|\bfaster\b|\bspeed-?ups?\b(?!\s*(is\s+)?claimed))",
                      re.IGNORECASE)


def _headings(note: str) -> list[str]:
    return [m.group(1).strip().lower() for m in re.finditer(r"^#{1,6}\s+(.+)$", note, re.MULTILINE)]


def _table_rows(note: str) -> dict[str, list[str]]:
    """Markdown table rows keyed by the first cell that is a known case id."""
    out = {}
    for line in note.splitlines():
        if line.strip().startswith("|"):
            cells = [c.strip().strip("`*") for c in line.strip().strip("|").split("|")]
            if cells:
                out.setdefault(cells[0], cells)
    return out


def _note_of(fn, df, env) -> str:
    note = _call(fn, df, env)
    if not isinstance(note, str) or not note.strip():
        raise _Fail(f"write_pr_note must return the note as a non-empty str, got {type(note).__name__}")
    return note


def check_pr_note(write_pr_note, *, show: bool = True):
    """ex07: ``write_pr_note(results_df, env) -> str`` on the synthetic GPU-shaped data and on CPU-shaped data."""
    gpu_df, gpu_env = synthetic_results(), synthetic_environment()
    cpu_df, cpu_env = interpreter_results(), interpreter_environment()

    def sections():
        missing = []
        for which, df, env in (("GPU-shaped data", gpu_df, gpu_env), ("CPU-shaped data", cpu_df, cpu_env)):
            heads = _headings(_note_of(write_pr_note, df, env))
            for name, pat in SECTIONS.items():
                if not any(re.search(pat, h) for h in heads):
                    missing.append(f"{which}: no '## ...' heading for {name}")
        if missing:
            raise _Fail("missing sections (headings found must match each required section)\n" + "\n".join(missing))

    def consistent():
        note = _note_of(write_pr_note, gpu_df, gpu_env)
        exp = expected_classes(gpu_df)
        table = _table_rows(note)
        problems = []
        for cid, cls in exp.items():
            if cid not in table:
                problems.append(f"{cid}: not in the performance table")
                continue
            cells = [c.lower() for c in table[cid]]
            claimed = [k for k in ("win", "neutral", "loss", "fallback") if k in cells]
            if claimed != [cls]:
                problems.append(f"{cid}: table says {claimed or 'no class'}, the data says {cls}")
        for cls in ("win", "neutral", "loss"):
            if cls in exp.values() and not re.search(rf"\b{cls}", note, re.IGNORECASE):
                problems.append(f"the note never names its {cls} cases")
        if "synthetic" not in note.lower():
            problems.append("the data is labelled synthetic; the note must say so")
        if problems:
            raise _Fail(f"{len(problems)} inconsistencies with the data\n" + "\n".join(problems))

    def no_cpu_claims():
        note = _note_of(write_pr_note, cpu_df, cpu_env)
        problems = []
        if "not a gpu measurement" not in note.lower():
            problems.append("on CPU data the note must say 'not a GPU measurement'")
        for m in _SPEEDUP.finditer(note):
            line = note[:m.start()].count("\n") + 1
            problems.append(f"line {line} claims a speed-up from non-GPU data: {m.group(0)!r}")
        table = _table_rows(note)
        wins = [c for c, cells in table.items() if "win" in [x.lower() for x in cells]]
        if wins:
            problems.append(f"the table marks {wins} as wins from non-GPU data")
        if problems:
            raise _Fail("\n".join(problems))

    return _emit([_part("ex07", "sections", sections), _part("ex07", "consistent_with_data", consistent),
                  _part("ex07", "no_claims_from_cpu_data", no_cpu_claims)], show)


# --- ex08: capstone, a second operator ------------------------------------------------------------------------------

KNOWN_OPS = {
    "softmax": lambda x: torch.softmax(x.detach().to(torch.float64), dim=-1),
    "log_softmax": lambda x: torch.log_softmax(x.detach().to(torch.float64), dim=-1),
}
_CAPSTONE_CASES = (CaseSpec(7, 33, weight=None), CaseSpec(5, 100, torch.float16, weight=None),
                   CaseSpec(3, 781, torch.bfloat16, weight=None, scale=4.0),
                   CaseSpec(6, 48, weight=None, layout="row_slice", pad=5), CaseSpec(1, 1, weight=None))


def check_capstone_reference(op_name: str, reference, *, show: bool = True):
    """ex08: ``reference(x)`` returns float64 and, for a known op (softmax, log_softmax), matches torch."""
    def run():
        rows, bad = [], 0
        for spec in _CAPSTONE_CASES:
            x = spec.build(seed=8, device="cpu").x
            y = _call(reference, x)
            if not isinstance(y, torch.Tensor) or y.dtype != torch.float64 or y.shape != x.shape:
                problem = "must return a float64 tensor of the input's shape"
            elif op_name in KNOWN_OPS:
                problem = compare(y, KNOWN_OPS[op_name](x), torch.float64)
            else:
                problem = None
            bad += problem is not None
            rows.append((_probe_label(spec), "ok" if problem is None else problem))
        if bad:
            raise _Fail(f"{bad} of {len(rows)} cases wrong\n" + _table(rows, ("case", "yours vs expected")))
        if op_name not in KNOWN_OPS:
            return f"'{op_name}' is not in {sorted(KNOWN_OPS)}: only dtype and shape were checked; review by hand"
    return _emit([_part("ex08", "reference", run)], show)


def check_capstone_kernel(launch, reference, *, show: bool = True):
    """ex08: ``launch(x2d) -> y`` (your Triton kernel) vs ``reference`` on irregular shapes, within dtype tolerance."""
    def run():
        rows, bad = [], 0
        for spec in _CAPSTONE_CASES:
            built = spec.build(seed=9, device=device())
            x = built.x
            y = _call(launch, x)
            problem = compare(y, reference(x.cpu()), x.dtype)
            if problem is None and y.dtype != x.dtype:
                problem = f"output dtype {_dname(y.dtype)}, expected the input's {_dname(x.dtype)}"
            if problem is None and not built.inputs_untouched():
                problem = "modified the input"
            bad += problem is not None
            rows.append((_probe_label(spec), "ok" if problem is None else problem))
        if bad:
            raise _Fail(f"{bad} of {len(rows)} cases wrong\n" + _table(rows, ("case", "yours vs expected")))
    return _emit([_part("ex08", "kernel", run)], show)


def check_capstone_predicate(make_predicate, make_ctx, base: dict, *, show: bool = True):
    """ex08: the predicate's declared boundaries hold as declared, and cover >= 3 categories with in and out points.

    Args:
        make_predicate: ``() -> Predicate`` whose conditions declare :class:`~fastpath_lib.eligibility.Boundary`
            changes to ``base`` (CaseSpec fields, e.g. ``{"cols": 8193}``).
        make_ctx: ``(x) -> ctx`` the object the conditions check.
        base: an eligible base case as CaseSpec fields.
    """
    def run():
        pred = _call(make_predicate)
        conds = list(pred.conditions)
        problems = []
        x0 = CaseSpec(**base).build(seed=10, device=device()).x
        d0 = pred.evaluate(make_ctx(x0))
        if not d0.eligible:
            problems.append(f"the base case is not eligible: {d0.reasons}")
        cats = {c.category for c in conds}
        if len(cats) < 3:
            problems.append(f"conditions cover {len(cats)} categories {sorted(cats)}, need >= 3")
        rows = []
        for c in conds:
            if not any(not b.holds for b in c.boundaries):
                problems.append(f"{c.name}: declares no boundary where it fails")
            if not any(b.holds for b in c.boundaries):
                problems.append(f"{c.name}: declares no boundary where it holds")
            for b in c.boundaries:
                spec = CaseSpec(**{**base, **b.overrides(None)})
                holds = c.check(make_ctx(spec.build(seed=10, device=device()).x)) is None
                rows.append((f"{c.name}[{b.label}]", _hold(b.holds), _hold(holds)))
                if holds != b.holds:
                    problems.append(f"{c.name}[{b.label}]: declared {_hold(b.holds)}, the check says {_hold(holds)}")
        if problems:
            raise _Fail("\n".join(problems) + "\n" + _table(rows, ("boundary", "declared", "check")))
        return f"{len(rows)} declared boundary points hold as declared; categories: {', '.join(sorted(cats))}"
    return _emit([_part("ex08", "predicate_declarations", run)], show)


def check_capstone_dispatch(op, make_predicate, make_ctx, reference, *, show: bool = True):
    """ex08: ``op(x) -> (y, route)`` takes the predicate's route and is correct on both routes."""
    cases = _CAPSTONE_CASES[:2] + (CaseSpec(8, 16, weight=None, layout="transposed"),
                                   CaseSpec(8, 16, torch.float64, weight=None))

    def run():
        pred = _call(make_predicate)
        rows, bad, routes = [], 0, set()
        for spec in cases:
            x = spec.build(seed=11, device=device()).x
            exp_route = pred.evaluate(make_ctx(x)).route
            y, route = _call(op, x)
            routes.add(route)
            problem = None if route == exp_route else f"route {route}, the predicate says {exp_route}"
            problem = problem or compare(y, reference(x.cpu()), x.dtype)
            bad += problem is not None
            rows.append((spec.label(), route, "ok" if problem is None else problem))
        if bad:
            raise _Fail(f"{bad} of {len(rows)} cases wrong\n" + _table(rows, ("case", "route", "yours vs expected")))
        if len(routes) < 2:
            raise _Fail(f"every case took route {routes}: the checks need both the fast path and the fallback")
    return _emit([_part("ex08", "dispatch", run)], show)
