"""Build the lesson notebooks in notebooks/ from the cell lists below (regenerate after editing this file).

    python tools/build_lessons.py            # writes notebooks/*.ipynb without outputs
    python tools/execute_notebooks.py        # executes them in place (outputs are part of the product)

Cells tagged ``nbval-ignore-output`` hold volatile output (versions, timings, widgets, GPU-dependent numbers);
``pytest --nbval`` compares every other cell's output with the saved one.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
NB_DIR = ROOT / "notebooks"
KERNELSPEC = {"name": "python3", "display_name": "Python 3", "language": "python"}
IGNORE = "nbval-ignore-output"


def md(text: str):
    return nbformat.v4.new_markdown_cell(textwrap.dedent(text).strip("\n"))


def code(src: str, *, ignore: bool = False):
    cell = nbformat.v4.new_code_cell(textwrap.dedent(src).strip("\n"))
    if ignore:
        cell.metadata["tags"] = [IGNORE]
    return cell


def setup_cell(extra: str = ""):
    """The first code cell of every lesson: import the library, say where we run (output ignored: versions)."""
    src = '''
    import torch
    import fastpath_lib
    from fastpath_lib import runtime

    print(runtime.describe())
    DEVICE = "cuda" if runtime.cuda_available() and not runtime.interpreter_enabled() else "cpu"
    print("running on", "a GPU (CUDA): kernels are compiled and timings are real" if DEVICE == "cuda" else
          "the CPU: Triton kernels run in the interpreter (correct but slow; no timing here is a GPU measurement)")
    _ = torch.manual_seed(0)
    '''
    return code(textwrap.dedent(src) + textwrap.dedent(extra), ignore=True)


# ----------------------------------------------------------------------------------------------------------------------
def lesson_00():
    return [
        md("""
        # 00 · Setup: the kit, the two ways it runs, and a self-test

        **What you will learn**
        - how Fastpath Kit runs the same Triton kernels on a GPU *and* on a laptop CPU (Triton's interpreter);
        - how to check that Triton computes correct results on your machine (`fastpath_lib.selftest.run()`);
        - the three claims a reviewer checks in a performance PR, which the next lessons build one by one.

        The running example is a Triton RMSNorm fast path (forward and backward) behind an *eligibility predicate*,
        with `torch.nn.functional.rms_norm` as the fallback. The notebooks import everything from the library
        `fastpath_lib`; no library code is copied into them.
        """),
        md("""
        ## Where are we running?

        The first cell of every lesson imports `fastpath_lib` and prints one line naming the mode and versions. Without
        CUDA, importing `fastpath_lib` sets `TRITON_INTERPRET=1` (before any kernel is decorated), so the kernels run in
        Triton's CPU interpreter. The output of this cell changes from machine to machine, so the notebook tests
        ignore it.
        """),
        setup_cell(),
        md("""
        Either way Triton has a backend here: CUDA on a GPU, the interpreter on a CPU. The interpreter executes each
        program instance with numpy, one after another: results are exact enough to test, but a 4096×4096 call takes
        seconds, so the lessons keep shapes small on the CPU.
        """),
        code("""
        print("Triton can run here:", runtime.interpreter_enabled() or runtime.cuda_available())
        """),
        md("""
        ## The self-test

        Some Triton and numpy version pairs silently compute wrong results in interpreter mode. `selftest.run()`
        launches the kit's own kernels on small fixed inputs (odd and power-of-two widths; fp32, fp16, bf16) and
        compares forward, `dx` and `dw` with the float64 reference. The test suite runs it first and stops when it fails.
        """),
        code("""
        from fastpath_lib import selftest

        result = selftest.run()
        print("self-test ok:", result.ok)
        print("problems:", result.problems)
        assert result.ok, result
        """),
        md("The full line names the versions, so its output is ignored by the notebook tests:"),
        code("print(result)", ignore=True),
        md("""
        ## A first call

        `fastpath_lib.rms_norm` has the signature of `torch.nn.functional.rms_norm`. Whether a call takes the Triton
        route depends on the predicate; one of its limits, the row threshold, depends on the device (8 rows under the
        interpreter, a per-architecture value on CUDA). We take twice the threshold so the call is eligible anywhere.
        """),
        code("""
        from fastpath_lib.rmsnorm.predicate import limits_for

        limits = limits_for(DEVICE)
        print("row threshold here:", limits.min_rows, f"({limits.source})")
        ROWS = 2 * limits.min_rows
        """, ignore=True),
        md("""
        `explain` tells which route a call would take and why; `record_routes` counts the routes actually taken; the
        float64 reference and `compare` (tolerances per dtype) check the numbers. `compare` returns `None` on a match.
        """),
        code("""
        from fastpath_lib.testing import compare, reference_rms_norm

        x = torch.randn(ROWS, 64, device=DEVICE)
        w = torch.randn(64, device=DEVICE)
        print(fastpath_lib.explain(x, [64], w))
        with fastpath_lib.record_routes() as routes:
            y = fastpath_lib.rms_norm(x, [64], w)
        print(routes)
        print("mismatch vs reference:", compare(y, reference_rms_norm(x, [64], w), x.dtype))
        """),
        md("""
        ## The three claims

        A reviewer of a performance PR checks three claims, and each lesson produces evidence for one of them:

        | claim | question | lessons |
        |---|---|---|
        | **Semantic** | does the new path compute what the old one did, for every input it accepts? | 01, 02, 03, 04 |
        | **Mechanism** | why is it faster: bytes moved, launches, GB/s against the device's ceiling? | 02, 05 |
        | **Performance** | on a predeclared matrix of ≥ 12 cases, with raw samples, environment metadata, and the neutral and losing cases? | 05, 06, 07 |

        Besides these lessons the kit has exercises (`exercises/`, graded by `python -m fastpath_lib grade`), the
        benchmark CLI (`python -m fastpath_lib bench`) and the test suite (`./kit test`).
        """),
        md("""
        ## Recap

        - On a CPU the kernels run in Triton's interpreter: correct, slow, never a performance measurement.
        - `selftest.run()` checks that Triton computes correct results on *this* machine before you trust anything else.
        - `explain`, `record_routes`, `reference_rms_norm` and `compare` are the tools of every later lesson.

        **Questions**
        1. Why must `TRITON_INTERPRET` be set before the kernel module is imported?
        2. Why does the self-test use a width of 37 as well as 16?
        3. Which of the three claims can you fully check on a machine without a GPU?
        """),
    ]


# ----------------------------------------------------------------------------------------------------------------------
def lesson_01():
    return [
        md("""
        # 01 · The operator contract: what `F.rms_norm` promises

        **What you will learn**
        - the promises `torch.nn.functional.rms_norm` makes (dtypes, the default `eps`, output dtype and layout, no
          aliasing, exceptions, autocast, gradients, `torch.compile`), each checked live in a cell;
        - how a *semantic reference* (`fastpath_lib.testing.reference_rms_norm`, float64 from the definition) states
          the contract independently of both routes;
        - that a fast path must keep every promise, including the error it raises for a bad call.

        A fast path that is faster but breaks one promise is a regression for somebody. Writing the promises down
        before writing the kernel turns "looks right" into a checklist a reviewer can run.
        """),
        setup_cell("""
        import torch.nn.functional as F
        from fastpath_lib.rmsnorm.predicate import limits_for
        from fastpath_lib.testing import compare, reference_grads, reference_rms_norm

        ROWS = 2 * limits_for(DEVICE).min_rows  # eligible on every device
        """),
        md("""
        ## The semantic reference

        The reference computes `y = x / sqrt(mean(x**2) + eps) * w` in float64, from the definition. Both routes are
        compared with it within a per-dtype tolerance (`fastpath_lib.testing.TOLERANCES`). Its source:
        """),
        code("""
        import inspect
        from fastpath_lib import testing

        print(inspect.getsource(testing._ref_graph))
        """, ignore=True),
        md("""
        The tolerances are one unit in the last place of each dtype (relative), plus an absolute floor for outputs
        near zero:
        """),
        code("""
        for dtype, (atol, rtol) in testing.TOLERANCES.items():
            print(f"{str(dtype):15} atol={atol:<8g} rtol={rtol:<10g} {testing.TOLERANCE_NOTES[dtype]}")
        """),
        md("""
        ## Promise 1 — dtypes: the output has the input's dtype and is contiguous

        fp16, bf16 and fp32 inputs compute in fp32 internally and round once to the input dtype. The output is a new
        contiguous tensor even when the input is a strided view (here a row slice of a wider buffer).
        """),
        code("""
        base = torch.randn(ROWS, 80, device=DEVICE)
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            x = base.to(dtype)[:, :64]  # a strided view: row stride 80
            w = torch.randn(64, device=DEVICE).to(dtype)
            ours, ref = fastpath_lib.rms_norm(x, [64], w), F.rms_norm(x, [64], w)
            print(f"{str(dtype):15} out {ours.dtype}, contiguous={ours.is_contiguous()}, "
                  f"stride {ours.stride()} (F.rms_norm: {ref.stride()}), "
                  f"mismatch: {compare(ours, reference_rms_norm(x, [64], w), dtype)}")
        """),
        md("""
        ## Promise 2 — the default `eps`

        With `eps=None`, `F.rms_norm` uses the machine epsilon of the dtype it *computes* in: fp32's, also for fp16 and
        bf16 inputs (not `torch.finfo(torch.float16).eps`). We check it live on inputs so small that `eps` dominates the
        mean square: only one candidate matches.
        """),
        code("""
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            x = torch.full((ROWS, 64), 1e-4, device=DEVICE).to(dtype)
            y = F.rms_norm(x, [64])
            candidates = {"fp32 machine eps": torch.finfo(torch.float32).eps,
                          "the dtype's own machine eps": torch.finfo(dtype).eps}
            matches = [f"{name} ({eps:.3g})" for name, eps in candidates.items()
                       if compare(y, reference_rms_norm(x, [64], None, eps), dtype) is None]
            print(f"{str(dtype):15} F.rms_norm's default eps matches: {', '.join(matches)}")
        """),
        md("The library states the same rule once, in `default_eps`, and the fast path uses it:"),
        code("""
        from fastpath_lib.rmsnorm.predicate import default_eps

        x = torch.full((ROWS, 64), 1e-4, device=DEVICE).half()
        print({str(d)[6:]: default_eps(d) for d in (torch.float32, torch.float16, torch.bfloat16)})
        print("fast path, eps=None, mismatch vs F.rms_norm:", compare(fastpath_lib.rms_norm(x, [64]),
              F.rms_norm(x, [64]).double(), x.dtype))
        """),
        md("""
        ## Promise 3 — no aliasing, inputs untouched

        The output never shares memory with the input, and the call writes nothing into its inputs. `CaseSpec` builds
        inputs inside NaN-poisoned buffers and keeps a pristine copy, so "untouched" is checked bit for bit.
        """),
        code("""
        from fastpath_lib.cases import CaseSpec

        case = CaseSpec(rows=ROWS, cols=64, layout="row_slice", pad=4).build(seed=1, device=DEVICE)
        x, ns, w = case.args()
        y = fastpath_lib.rms_norm(x, ns, w)
        print("shares memory with x:", y.untyped_storage().data_ptr() == x.untyped_storage().data_ptr())
        y.add_(1.0)  # writing to the output must not change the input
        print("inputs (views and poison) untouched:", case.inputs_untouched())
        """),
        md("""
        ## Promise 4 — exceptions

        A bad call raises the same exception type, with the same message, as `F.rms_norm`: `RuntimeError` when
        `normalized_shape` does not match the input, `TypeError` when it is an `int`. The predicate sends invalid calls
        to the fallback, so the fallback raises its own error.
        """),
        code("""
        x = torch.randn(4, 8, device=DEVICE)
        bad_calls = {"shape mismatch": (x, [7]), "int normalized_shape": (x, 8),
                     "weight shape mismatch": (x, [8], torch.ones(7, device=DEVICE))}
        for name, args in bad_calls.items():
            errors = []
            for fn in (F.rms_norm, fastpath_lib.rms_norm):
                try:
                    fn(*args)
                except Exception as e:  # noqa: BLE001 - we want to see which one
                    errors.append((type(e).__name__, str(e)))
            print(f"{name:22} F: {errors[0][0]:13} fastpath: {errors[1][0]:13} same message: {errors[0] == errors[1]}")
        """),
        md("""
        ## Promise 5 — autocast

        On the CPU, autocast has no policy for `rms_norm`: the input's dtype goes through. On CUDA, from torch 2.12,
        `rms_norm` is on autocast's fp32 list, and the custom op registers the same policy there
        (`autocast_fp32_devices()` says where). Either way our output dtype must equal `F.rms_norm`'s.
        """),
        code("""
        from fastpath_lib.rmsnorm.op import autocast_fp32_devices

        print("devices with an fp32 autocast policy in this torch:", autocast_fp32_devices())
        low = torch.float16 if DEVICE == "cuda" else torch.bfloat16
        for dtype in (torch.float32, torch.float16):
            x = torch.randn(ROWS, 64, device=DEVICE).to(dtype)
            with torch.autocast(DEVICE, dtype=low):
                ref, ours = F.rms_norm(x, [64]), fastpath_lib.rms_norm(x, [64])
            print(f"input {str(dtype):14} F.rms_norm -> {ref.dtype}, fastpath -> {ours.dtype}, same: {ref.dtype == ours.dtype}")
        """),
        md("""
        ## Promise 6 — gradients

        `dx` and `dw` must match the reference's gradients (float64 autograd), within the gradient tolerances. The
        Triton route has its own backward kernel; `record_routes("backward")` shows it ran.
        """),
        code("""
        x = torch.randn(ROWS, 64, device=DEVICE, requires_grad=True)
        w = torch.randn(64, device=DEVICE, requires_grad=True)
        dy = torch.randn(ROWS, 64, device=DEVICE)
        with fastpath_lib.record_routes("backward") as routes:
            fastpath_lib.rms_norm(x, [64], w).backward(dy)
        ref_dx, ref_dw = reference_grads(x, [64], w, None, dy)
        print("backward route:", routes)
        print("dx mismatch:", compare(x.grad, ref_dx, x.dtype, grad=True))
        print("dw mismatch:", compare(w.grad, ref_dw, w.dtype, grad=True))
        """),
        md("""
        Higher-order gradients (`create_graph=True`) are part of the contract too. The Triton backward is not itself
        differentiable, so the op differentiates the reference instead — the predicate's `grad_order` condition:
        """),
        code("""
        with fastpath_lib.record_routes("backward") as routes:
            (gx,) = torch.autograd.grad(fastpath_lib.rms_norm(x, [64], w).sum(), x, create_graph=True)
        (ggx,) = torch.autograd.grad(gx.sum(), x)
        print("backward route with create_graph=True:", routes, "| second-order grad finite:", bool(ggx.isfinite().all()))
        """),
        md("""
        ## Promise 7 — `torch.compile`

        `fastpath::rms_norm` is a `torch.library.custom_op` with a fake implementation, so `torch.compile(fullgraph=True)`
        traces it without a graph break; the route is decided when the compiled graph runs, on real tensors.
        """),
        code("""
        compiled = torch.compile(lambda a, b: fastpath_lib.rms_norm(a, [64], b), fullgraph=True)
        x = torch.randn(ROWS, 64, device=DEVICE)
        with fastpath_lib.record_routes() as routes:
            y = compiled(x, w.detach())
        print("route at run time:", routes)
        print("mismatch vs reference:", compare(y, reference_rms_norm(x, [64], w), x.dtype))
        """),
        md("""
        ## The contract as a checklist

        | promise | checked by |
        |---|---|
        | fp16/bf16/fp32 in, same dtype out, contiguous | promise 1; `tests/test_contract.py` |
        | default eps = fp32 machine epsilon for fp16/bf16/fp32 | promise 2 |
        | no aliasing; inputs untouched | promise 3; guard bands (lesson 04) |
        | same exception type and message | promise 4 |
        | autocast policy = `F.rms_norm`'s | promise 5 |
        | gradients, including higher order | promise 6 |
        | `torch.compile(fullgraph=True)` | promise 7; `opcheck` (lesson 04) |

        ## Recap

        - The reference is the contract in executable form: float64, from the definition, shared by tests and lessons.
        - Every promise is checked against `F.rms_norm` itself, not against what we *think* it does (the default `eps`).
        - Invalid calls go to the fallback so users keep the errors they know.

        **Questions**
        1. Why is the reference computed in float64 rather than in the input dtype?
        2. What would break for a user if the fast path returned a view of a strided input instead of a contiguous tensor?
        3. Why must the fast path raise `TypeError` (not `RuntimeError`) for `normalized_shape=8`?
        4. What does autocast change about the tensors the kernel sees, and why does the op need its own policy?
        """),
    ]


# ----------------------------------------------------------------------------------------------------------------------
def lesson_02():
    return [
        md("""
        # 02 · The Triton kernels: forward, then backward

        **What you will learn**
        - why a fused RMSNorm is faster than the composite version: the bytes each one moves;
        - the forward kernel, line by line, and its launcher (block size, warps, one program per row);
        - the backward kernel (`dx`, and a deterministic `dw` reduction);
        - how to test a kernel on a deliberately irregular shape against the float64 reference;
        - how a benchmark turns time into GB/s from bytes moved — and why interpreter timings are not performance.
        """),
        setup_cell("""
        import inspect
        from fastpath_lib.rmsnorm import kernels  # import after fastpath_lib: TRITON_INTERPRET is set by then
        from fastpath_lib.testing import compare, reference_grads, reference_rms_norm
        """),
        md("""
        ## Motivation: the composite version and the bytes it moves

        RMSNorm is memory-bound: a handful of flops per element, so its speed is set by the bytes it moves. Written as
        separate eager operations, every intermediate is written to memory and read back. The cell below is an
        **illustration** (not the library's code) annotated with the traffic of each op, for `N = rows × cols`
        elements, `R = rows`, `C = cols`:
        """),
        code("""
        # ILLUSTRATION ONLY: RMSNorm as separate eager ops, the way a composite implementation runs it
        def composite_rms_norm(x, w, eps):
            sq = x * x                          # read N,     write N
            ms = sq.mean(-1, keepdim=True)      # read N,     write R
            rstd = torch.rsqrt(ms + eps)        # read R (x2), write R (x2)
            n = x * rstd                        # read N + R, write N
            return n * w                        # read N + C, write N

        x, w = torch.randn(37, 181), torch.randn(181)
        print("composite matches the reference:", compare(composite_rms_norm(x, w, 1e-6),
                                                          reference_rms_norm(x, [181], w, 1e-6), x.dtype) is None)
        """),
        md("""
        The fused kernel reads each row once, keeps it in registers while it computes the mean square, and writes the
        output once: read `N + C`, write `N`. A small formula makes the difference concrete (bytes, not time):
        """),
        code("""
        def bytes_composite(rows, cols, elem):
            n, r, c = rows * cols, rows, cols
            return elem * ((n + n) + (n + r) + 4 * r + (n + r + n) + (n + c + n))

        def bytes_fused(rows, cols, elem):
            return elem * (rows * cols + cols + rows * cols)

        for rows, cols, dtype in ((4096, 4096, torch.bfloat16), (8192, 8192, torch.float16), (1823, 781, torch.float32)):
            elem = torch.empty((), dtype=dtype).element_size()
            bc, bf = bytes_composite(rows, cols, elem), bytes_fused(rows, cols, elem)
            print(f"{rows}x{cols} {str(dtype)[6:]:9} composite {bc / 2**20:8.1f} MiB  fused {bf / 2**20:7.1f} MiB  "
                  f"ratio {bc / bf:.2f}")
        """),
        md("""
        The fused version moves 3.5 times fewer bytes in forward. On a memory-bound op that is the upper bound of the
        speed-up; whether a GPU gets close is a measurement (lesson 05), not something this formula can tell.
        (`F.rms_norm` itself has fused ATen kernels on recent torch versions — which is exactly why the benchmark must
        compare against the real baseline, not against the composite.)

        ## The forward kernel

        Its source (printed from the library; output ignored by the notebook tests):
        """),
        code("print(inspect.getsource(kernels.rms_norm_fwd_kernel.fn))", ignore=True),
        md("""
        Line by line:

        - `row = tl.program_id(0).to(tl.int64)` — one program per row; `int64` so `row * X_row_stride` cannot overflow
          for tensors over 2³¹ elements.
        - `cols = tl.arange(0, BLOCK_SIZE)`, `mask = cols < n_cols` — `BLOCK_SIZE` is a power of two (Triton's
          `arange` needs one) at least `n_cols`; the mask switches off the lanes past the row's end.
        - `tl.load(X_ptr + row * X_row_stride + cols, mask=mask, other=0.0).to(tl.float32)` — the row, upcast to fp32;
          masked lanes read as 0, so they add nothing to the sum. The row stride is an argument, so row slices of a
          wider buffer need no copy.
        - `mean_sq = tl.sum(x * x, axis=0) / n_cols` — divide by the true width, not by `BLOCK_SIZE`.
        - `rstd = 1.0 / tl.sqrt(mean_sq + eps)`, `y = x * rstd`, `y = y * w` — in fp32; the weight is loaded once per
          program (it is tiny and stays in cache across programs).
        - `tl.store(..., y.to(Y_ptr.dtype.element_ty), mask=mask)` — round once to the output dtype, as `F.rms_norm`
          does, and write only the valid lanes.

        ## The launcher

        The launcher allocates the output, picks `BLOCK_SIZE` and `num_warps`, and launches one program per row:
        """),
        code("""
        print(inspect.getsource(kernels.launch_settings))
        print(inspect.getsource(kernels.forward))
        """, ignore=True),
        md("Block size and warps for a few widths (wider rows get more warps so each thread holds fewer elements):"),
        code("""
        for n_cols in (1, 16, 181, 781, 4096, 16384):
            block, warps = kernels.launch_settings(n_cols)
            print(f"n_cols={n_cols:6}  BLOCK_SIZE={block:6}  num_warps={warps:2}  idle lanes {block - n_cols}")
        """),
        md("""
        ## Test on an irregular shape

        Irregular shapes catch off-by-one masks and stride bugs that 1024×1024 hides. The kernel runs on any width up to
        `MAX_COLS`; 37×181 is an odd number of rows and a width that is neither a power of two nor 16-byte aligned in
        fp32. We call the launcher directly and compare with the float64 reference in three dtypes:
        """),
        code("""
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            x = (2 * torch.randn(37, 181, device=DEVICE)).to(dtype)
            w = (1 + torch.randn(181, device=DEVICE) / 2).to(dtype)
            y = kernels.forward(x, w, 1e-6)
            print(f"{str(dtype):15} forward 37x181: mismatch = {compare(y, reference_rms_norm(x, [181], w, 1e-6), dtype)}")
        """),
        md("""
        Dispatch (`fastpath_lib.rms_norm`) would *not* send this fp32 call to Triton: its row stride of 724 bytes is not
        a multiple of 16, so vector loads cannot be used and the kernel would be slower, not wrong. The predicate
        protects speed here, not correctness (lesson 03):
        """),
        code("""
        x = torch.randn(37, 181, device=DEVICE)
        print(fastpath_lib.explain(x, [181], torch.ones(181, device=DEVICE)).failed)
        """),
        md("""
        ## The backward kernel

        With `n = x * rstd` and `g = dy * w`, the gradients are `dx = rstd * (g - n * mean(g * n))` and
        `dw = Σ_rows dy * n`. The source:
        """),
        code("print(inspect.getsource(kernels.rms_norm_bwd_kernel.fn))", ignore=True),
        md("""
        Line by line:

        - each program owns a contiguous block of `ROWS_PER_PROGRAM` rows (a constexpr power of two; the row mask
          `row < n_rows` switches off the rows past the end) and loads the weight once for all of them;
        - per row it recomputes `rstd` from `x` (cheaper than saving it from the forward: one fewer tensor to store and
          read), then `n`, `g`, and `dx` with the row mean of `g * n`;
        - it accumulates `dy * n` into `dw_acc` in fp32 registers, and writes it once into *its own* row of an fp32
          partial buffer;
        - the launcher sums the partial rows with `torch.sum` in a fixed order: no atomics, so the same input gives
          the same bits every run (deterministic-algorithms mode keeps the fast path).
        """),
        code("""
        x = (2 * torch.randn(37, 181, device=DEVICE))
        w = 1 + torch.randn(181, device=DEVICE) / 2
        dy = torch.randn(37, 181, device=DEVICE)
        dx, dw = kernels.backward(dy, x, w, 1e-6)
        ref_dx, ref_dw = reference_grads(x, [181], w, 1e-6, dy)
        print("dx mismatch:", compare(dx, ref_dx, x.dtype, grad=True))
        print("dw mismatch:", compare(dw, ref_dw, w.dtype, grad=True))
        dx2, dw2 = kernels.backward(dy, x, w, 1e-6)
        print("bitwise identical on a second run:", torch.equal(dx, dx2) and torch.equal(dw, dw2))
        """),
        md("""
        The backward's traffic: read `x`, `dy` (`2N`) and `w`, write `dx` (`N`) and the fp32 partials
        (`programs × C`, summed afterwards). The composite backward through autograd reads and writes several
        intermediates more.

        ## Benchmark: GB/s from bytes moved

        Throughput is `bytes_fused / time`, compared with the device's memory bandwidth. On a GPU the cell below measures
        with `triton.testing.do_bench` (warm-up, many repetitions, median); without a GPU it measures **nothing** —
        the interpreter runs programs one by one in numpy, and its timings say nothing about a GPU.
        """),
        code("""
        if DEVICE == "cuda":
            import triton

            rows, cols = 4096, 4096
            x = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16)
            w = torch.randn(cols, device="cuda", dtype=torch.bfloat16)
            ms = triton.testing.do_bench(lambda: kernels.forward(x, w, 1e-6))
            print(f"forward {rows}x{cols} bf16: {ms * 1e3:.1f} us, {bytes_fused(rows, cols, 2) / ms / 1e6:.0f} GB/s")
        else:
            print("No GPU here: nothing measured. Interpreter timings are not GPU measurements; see lesson 05 for "
                  "recorded GPU results.")
        """, ignore=True),
        md("""
        ## What the numbers say

        - The formula bounds the gain: fused moves 3.5× fewer bytes than the composite, but the real baseline
          (`F.rms_norm`) may already be fused, so the honest comparison is against it, measured.
        - A kernel near the device's bandwidth has no headroom left; one far below it is limited by something else
          (launch overhead on small shapes, too few rows to fill the GPU, misaligned loads).
        - Small calls are launch-bound: that is why the predicate has a row threshold.

        ## Recap

        - One program per row, fp32 accumulation, one rounding at the store; the mask handles any width.
        - The backward recomputes `rstd` and reduces `dw` deterministically through per-program partials.
        - Test on irregular shapes against the float64 reference; report GB/s from bytes moved, measured on a GPU only.

        **Questions**
        1. Why divide by `n_cols` and not by `BLOCK_SIZE` in the mean square?
        2. What goes wrong if `row` stays `int32` for a 70 000 × 32 768 input?
        3. Why does the backward write per-program partials instead of using `tl.atomic_add` on `dw`?
        4. Why can't the byte formula predict the speed-up over `F.rms_norm`?
        """),
    ]


# ----------------------------------------------------------------------------------------------------------------------
def lesson_03():
    return [
        md("""
        # 03 · The eligibility predicate: when the fast path runs, and why not

        **What you will learn**
        - each condition of the RMSNorm predicate, its category and *why* it exists;
        - how `fastpath_lib.explain()` reports every failed condition with the actual and the required value;
        - how to read the boundary of a condition (15/16/17 columns, transposed, offset, threshold − 1);
        - how to explore the predicate interactively (`route_explorer()`).

        The design follows PyTorch's SDPA selector: a list of small named checks, each able to say why it failed, in a
        module that imports no GPU code, so it is tested on any machine.
        """),
        setup_cell("""
        %matplotlib inline
        import pandas as pd
        from fastpath_lib.cases import CaseSpec
        from fastpath_lib.rmsnorm.predicate import ALLOWED_MODES, PREDICATE, limits_for

        LIMITS = limits_for(DEVICE)
        pd.set_option("display.max_colwidth", 120)
        """),
        md("""
        ## The conditions

        `PREDICATE.table()` lists every condition with its category, the rule in words, why it exists, and the boundary
        points it declares (each marked *in* or *out*). The tests and the PR note's scope section are generated from
        these same declarations.
        """),
        code("""
        conditions = pd.DataFrame(PREDICATE.table())
        conditions
        """),
        md("The categories a reviewer will ask about, and how many conditions each has:"),
        code("conditions.groupby('category', sort=False).size()"),
        md("""
        Some conditions protect **correctness** (device, dtype, arguments, normalized dims, strides, columns), some
        protect **speed** (row threshold, alignment: the kernel would be correct but slower than the baseline), and
        some are **modes** (forced fallback, CUDA graph capture, higher-order gradients). Modes that do *not* force the
        fallback are declared too, each with the reason it is safe:
        """),
        code("pd.DataFrame(ALLOWED_MODES.items(), columns=['mode', 'why the fast path stays on'])"),
        md("""
        ## `explain()` inside and outside the boundary

        `explain` takes the same arguments as `rms_norm` and returns a `Decision`: `route`, `eligible`, `reasons` (every
        failed condition, with the actual and the required value) and `failed` (the names). We build cases with
        `CaseSpec`, one change at a time from an eligible base case, at the row threshold in force here:
        """),
        code("""
        R = LIMITS.min_rows
        cases = {
            "cols=15": CaseSpec(rows=R, cols=15), "cols=16": CaseSpec(rows=R, cols=16),
            "cols=17": CaseSpec(rows=R, cols=17), "transposed": CaseSpec(rows=R, cols=64, layout="transposed"),
            "offset 4 bytes": CaseSpec(rows=R, cols=64, offset=1), "offset 16 bytes": CaseSpec(rows=R, cols=64, offset=4),
            "threshold-1 rows": CaseSpec(rows=R - 1, cols=64), "threshold rows": CaseSpec(rows=R, cols=64),
            "fp64": CaseSpec(rows=R, cols=64, dtype=torch.float64),
        }
        rows = []
        for name, spec in cases.items():
            d = fastpath_lib.explain(*spec.build(seed=0, device=DEVICE).args())
            rows.append({"case": name, "route": d.route, "failed": ", ".join(d.failed)})
        pd.DataFrame(rows)
        """),
        md("""
        Widths 15 and 17 fail only `row_stride_alignment`: in fp32 a row of 15 floats is 60 bytes, so every other row
        starts off a 16-byte boundary. The kernel would still be correct (lesson 02 ran 181 columns), but slower. A
        `Decision` renders its reasons in full; here for a case that fails several conditions at once — `explain` runs
        *every* condition, so the user sees all reasons, not only the first:
        """),
        code("""
        x = CaseSpec(rows=R - 1, cols=17, dtype=torch.float64, layout="transposed").build(seed=0, device=DEVICE).x
        fastpath_lib.explain(x, [17])
        """),
        md("""
        The same numbers through the fallback switch: `force_fallback()` adds the `forced` reason and restores the
        previous state when the block ends (also on an exception).
        """),
        code("""
        x = torch.randn(2 * R, 64, device=DEVICE)
        with fastpath_lib.force_fallback():
            print(fastpath_lib.explain(x, [64]))
        print(fastpath_lib.explain(x, [64]))
        """),
        md("""
        Under `torch.compile` the op sees fake tensors while tracing: they have no data pointer, so the alignment
        conditions answer "unknown until run time" and the real decision is taken when the graph runs:
        """),
        code("""
        from torch._subclasses.fake_tensor import FakeTensorMode

        with FakeTensorMode():
            print(fastpath_lib.explain(torch.empty(2 * R, 64, device=DEVICE), [64]))
        """),
        md("""
        ## A map of the alignment and row boundaries

        Each cell below is one `explain` call (no kernel runs): rows around the threshold × widths 1 to 48, in fp32 and
        fp16. Eligible widths are multiples of 4 elements in fp32 and of 8 in fp16 (16 bytes), from the threshold up.
        """),
        code("""
        import matplotlib.pyplot as plt

        widths, row_counts = range(1, 49), [R - 1, R, R + 1]
        fig, axes = plt.subplots(2, 1, figsize=(10, 3), sharex=True)
        for ax, dtype in zip(axes, (torch.float32, torch.float16)):
            grid = [[fastpath_lib.explain(torch.empty(r, c, device=DEVICE, dtype=dtype), [c]).eligible for c in widths]
                    for r in row_counts]
            ax.imshow(grid, cmap="Greens", aspect="auto", extent=(0.5, 48.5, len(row_counts) - 0.5, -0.5))
            ax.set_yticks(range(len(row_counts)), [f"{r} rows" for r in row_counts])
            ax.set_title(f"{str(dtype)[6:]}: green = triton route", fontsize=9)
        axes[-1].set_xlabel("cols")
        fig.tight_layout()
        """),
        md("""
        ## The explorer

        Change a case with the controls and watch the route and the reasons. It only evaluates the predicate, so it
        answers instantly on any machine. (Widget output is not compared by the notebook tests.)
        """),
        code("""
        from fastpath_lib.widgets import route_explorer

        route_explorer()
        """, ignore=True),
        md("""
        ## Recap

        - Each condition has a name, a category, a rule, a reason to exist and declared boundary points.
        - `explain` runs every condition and reports actual vs required values; invalid calls go to the fallback.
        - Some limits protect correctness, some protect speed; the row threshold comes from a GPU sweep (conservative
          until one is recorded).

        **Questions**
        1. Which conditions would you drop if the kernel were only ever called on contiguous fp16 inputs? Which must stay?
        2. An fp16 input with 12 columns falls back, an fp32 one with 12 columns does not. Why? Check with `explain`.
        3. Why does the predicate report *all* failed conditions instead of stopping at the first?
        4. What would go wrong if the fake-tensor case answered "eligible" instead of "unknown"?
        """),
    ]


# ----------------------------------------------------------------------------------------------------------------------
def lesson_04():
    return [
        md("""
        # 04 · Boundary tests: both routes, generated from the predicate

        **What you will learn**
        - how boundary tests are *generated* from the predicate's declarations (`boundary_points()`), not written by hand;
        - how to run both routes (dispatched, and `force_fallback()`) against the float64 reference and assert the route;
        - `torch.library.opcheck`, `torch.compile(fullgraph=True)`, autocast and non-finite inputs;
        - guard bands: poisoned buffers that catch out-of-bounds reads and writes on a CPU, and why a GPU still needs
          compute-sanitizer.
        """),
        setup_cell("""
        import dataclasses
        import pandas as pd
        import torch.nn.functional as F
        from fastpath_lib.boundary import boundary_points
        from fastpath_lib.rmsnorm.predicate import PREDICATE, limits_for, make_call
        from fastpath_lib.testing import compare, reference_rms_norm

        R = limits_for(DEVICE).min_rows
        """),
        md("""
        ## Boundary points from the predicate

        Every condition declares its boundary as small changes to an eligible base case (16×64 fp32 with a weight, rows
        raised to the threshold). `boundary_points()` applies each change under the limits in force. A *tensor* point
        changes the inputs; a *context* point changes the execution state (forced, capture, `create_graph`, interpreter
        off, another GPU architecture).
        """),
        code("""
        points = boundary_points(device=DEVICE)
        table = pd.DataFrame([{"id": p.id, "holds": p.holds, "kind": "context" if p.context else "tensor",
                               "case": p.spec.label()} for p in points])
        print(len(points), "points:", table.kind.value_counts().to_dict())
        table.head(12)
        """),
        md("""
        ## Context points: evaluate the predicate on a changed context

        The context points cannot all be produced on this machine (an sm_75 GPU, a CUDA graph capture), so they are
        checked on the predicate's context: the call's `RMSNormCall` with one field replaced.
        """),
        code("""
        results = []
        for p in (p for p in points if p.context):
            x, ns, w = p.spec.build(seed=0).args()
            ctx = dataclasses.replace(make_call(x, ns, w), **p.context)
            failed = PREDICATE.evaluate(ctx).failed
            results.append({"id": p.id, "holds": p.holds, "condition held": p.condition not in failed})
        ctx_df = pd.DataFrame(results)
        assert (ctx_df["holds"] == ctx_df["condition held"]).all()
        ctx_df
        """),
        md("""
        ## Tensor points: both routes against the reference

        For each tensor point: the declared outcome must match `explain`; the dispatched call must take the route
        `explain` named (`record_routes`); the forced fallback must take the fallback; both outputs must match the
        float64 reference; and the poisoned input buffers must be bit-for-bit unchanged. Invalid calls must raise
        `F.rms_norm`'s exception type. Small shapes: a few seconds under the interpreter.
        """),
        code("""
        def raises_like_reference(x, ns, w):
            \"\"\"None for a valid call; for an invalid one, whether our op raises F.rms_norm's exception type.\"\"\"
            try:
                F.rms_norm(x, ns, w)
                return None
            except Exception as exc:  # noqa: BLE001
                try:
                    fastpath_lib.rms_norm(x, ns, w)
                    return "no error!"
                except type(exc):
                    return f"raises {type(exc).__name__}"
        """),
        code("""
        def run_point(p):
            case = p.spec.build(seed=7, device=DEVICE)
            x, ns, w = case.args()
            d = fastpath_lib.explain(x, ns, w)
            row = {"id": p.id, "route": d.route, "declared ok": (p.condition not in d.failed) == p.holds}
            if (raised := raises_like_reference(x, ns, w)) is not None:
                return {**row, "dispatched": raised, "fallback": "-"}
            with fastpath_lib.record_routes() as routes:
                y = fastpath_lib.rms_norm(x, ns, w)
            with fastpath_lib.force_fallback():
                y_fb = fastpath_lib.rms_norm(x, ns, w)
            ref = reference_rms_norm(x, ns, w)
            ok = lambda out: compare(out, ref, x.dtype) or "ok"
            return {**row, "dispatched": ok(y) if routes == {d.route: 1} else f"route {routes}", "fallback": ok(y_fb),
                    "inputs untouched": case.inputs_untouched()}
        """),
        code("""
        tensor_df = pd.DataFrame([run_point(p) for p in points if not p.context])
        assert tensor_df["declared ok"].all() and tensor_df["dispatched"].isin(["ok", "raises RuntimeError"]).all()
        assert (tensor_df["fallback"].isin(["ok", "-"])).all() and tensor_df["inputs untouched"].fillna(True).all()
        print(tensor_df.route.value_counts().to_dict())
        tensor_df
        """),
        md("""
        ## `opcheck`: is the custom op registered correctly?

        `torch.library.opcheck` runs the op's schema, fake-tensor, autograd-registration and AOT-dispatch tests on
        sample inputs: the checks that make `torch.compile` and `torch.export` trust the op.
        """),
        code("""
        x = torch.randn(R, 64, device=DEVICE, requires_grad=True)
        w = torch.randn(64, device=DEVICE, requires_grad=True)
        torch.library.opcheck(torch.ops.fastpath.rms_norm.default, (x, [64], w, None))
        torch.library.opcheck(torch.ops.fastpath.rms_norm.default, (x.detach(), [64], None, 1e-5))
        print("opcheck passed")
        """),
        md("""
        ## `torch.compile(fullgraph=True)` across the row threshold

        One compiled function, two shapes on either side of the threshold: no graph break, and the route is chosen at
        run time from the real tensors.
        """),
        code("""
        compiled = torch.compile(lambda a: fastpath_lib.rms_norm(a, [64]), fullgraph=True, dynamic=False)
        for rows in (R - 1, R):
            a = torch.randn(rows, 64, device=DEVICE)
            with fastpath_lib.record_routes() as routes:
                y = compiled(a)
            print(f"{rows} rows: {dict(routes)}, mismatch: {compare(y, reference_rms_norm(a, [64]), a.dtype)}")
        """),
        md("Autocast: the output dtype of both routes equals `F.rms_norm`'s under autocast on this device."),
        code("""
        low = torch.float16 if DEVICE == "cuda" else torch.bfloat16
        a = torch.randn(R, 64, device=DEVICE)
        with torch.autocast(DEVICE, dtype=low):
            want = F.rms_norm(a, [64]).dtype
            got = fastpath_lib.rms_norm(a, [64]).dtype
            with fastpath_lib.force_fallback():
                got_fb = fastpath_lib.rms_norm(a, [64]).dtype
        print("same dtype as F.rms_norm under autocast:", want == got == got_fb)
        """),
        md("""
        ## Non-finite inputs

        An `inf` in a row makes the mean square infinite, `rstd` 0, and `inf * 0 = nan`; a `nan` spreads over its row.
        Both routes must put NaN and Inf in the same places as the reference (`compare` uses `equal_nan`).
        """),
        code("""
        a = torch.randn(R, 64, device=DEVICE)
        a[1, 3], a[2, 5], a[3, 0] = float("inf"), float("nan"), -float("inf")
        with fastpath_lib.record_routes() as routes:
            y = fastpath_lib.rms_norm(a, [64])
        with fastpath_lib.force_fallback():
            y_fb = fastpath_lib.rms_norm(a, [64])
        ref = reference_rms_norm(a, [64])
        print(dict(routes), "| dispatched:", compare(y, ref, a.dtype), "| fallback:", compare(y_fb, ref, a.dtype))
        print("row 1:", y[1, :5].tolist())
        """),
        md("""
        Overflow is different: with `x = 1e20` in fp32, `x * x` overflows to `inf` in fp32 (both routes, and
        `F.rms_norm`, compute in fp32), so the output is 0, while the float64 reference gives 1. The contract is
        parity with `F.rms_norm`, so such a test compares the routes with `F.rms_norm`, not with the float64 reference —
        and the PR note should say so.
        """),
        code("""
        a = torch.randn(R, 64, device=DEVICE)
        a[0] = 1e20
        y, base = fastpath_lib.rms_norm(a, [64]), F.rms_norm(a, [64])
        print("fast path row 0:", y[0, :3].tolist(), "| F.rms_norm row 0:", base[0, :3].tolist(),
              "| reference:", reference_rms_norm(a, [64])[0, :3].tolist())
        print("fast path equals F.rms_norm:", torch.allclose(y, base, atol=1e-5, rtol=2e-6, equal_nan=True))
        """),
        md("""
        ## Guard bands: out-of-bounds reads and writes on a CPU

        `CaseSpec.build` puts each input inside a NaN-filled buffer: a kernel that *reads* past its view picks up NaN and
        fails the comparison; `inputs_untouched()` catches any *write* into the inputs. For the output,
        `poisoned_like` makes a view inside a buffer with poison on both sides, and the launcher writes into it
        (`out=`). An odd width (17) and a row slice (stride 20) make off-by-one errors likely:
        """),
        code("""
        from fastpath_lib.cases import CaseSpec, output_guard_intact, poisoned_like
        from fastpath_lib.rmsnorm import kernels

        case = CaseSpec(rows=R + 1, cols=17, layout="row_slice", pad=3).build(seed=3, device=DEVICE)
        x, ns, w = case.args()
        view, buf, pristine = poisoned_like((R + 1, 17), x.dtype, x.device, pad=16)
        kernels.forward(x, w, 1e-6, out=view)
        print("output matches:", compare(view, reference_rms_norm(x, ns, w, 1e-6), x.dtype) is None)
        print("output guard intact:", output_guard_intact(buf, pristine, 16))
        print("inputs untouched:", case.inputs_untouched())
        """),
        md("The guard does catch a bad write — here one simulated by hand, one element past the view's end:"),
        code("""
        buf[16 + view.numel()] = 0.0  # SIMULATED off-by-one write just past the output view
        print("output guard intact after a stray write:", output_guard_intact(buf, pristine, 16))
        """),
        md("""
        ## Why sanitizers matter on a GPU

        Guard bands catch errors that land *next to* a view. On a GPU an out-of-bounds access may land anywhere — in
        another tensor, or in memory the allocator has not handed out — and often gives no error at all. Before a GPU
        PR, run the GPU tests under NVIDIA's compute-sanitizer:

        ```bash
        compute-sanitizer --tool memcheck  python -m pytest tests -m gpu -x   # out-of-bounds and misaligned accesses
        compute-sanitizer --tool racecheck python -m pytest tests -m gpu -x   # shared-memory races
        compute-sanitizer --tool initcheck python -m pytest tests -m gpu -x   # reads of uninitialised device memory
        ```

        The interpreter cannot stand in for these: it runs programs one after another, so races never happen, and its
        numpy arrays do not model GPU memory.

        ## Recap

        - Boundary points are generated from the predicate; adding a condition adds its tests.
        - Every tensor point runs both routes against the reference and asserts the route taken.
        - `opcheck`, `torch.compile(fullgraph=True)`, autocast and non-finite inputs are part of the contract.
        - Guard bands catch out-of-bounds accesses next to a view on a CPU; compute-sanitizer is still needed on a GPU.

        **Questions**
        1. Why test *threshold − 1, threshold, threshold + 1* and not just one value on each side?
        2. A point is declared *out* but dispatch took Triton. Which is wrong, the declaration or the predicate?
        3. What does the NaN poison around an input catch that comparing outputs alone would miss?
        4. Why compare an overflowing input with `F.rms_norm` instead of the float64 reference?
        """),
    ]


# ----------------------------------------------------------------------------------------------------------------------
def lesson_05():
    return [
        md("""
        # 05 · The benchmark matrix: predeclared, raw, with metadata

        **What you will learn**
        - why the benchmark cases are *declared before* anything is measured, including cases where the fast path is
          expected to be neutral or to lose;
        - how a run records raw samples and the environment (GPU, driver, versions) next to the results;
        - how to read the results as a reviewer: mechanism (GB/s against the device's ceiling) and performance
          (win / neutral / loss per case), and where the dispatch boundary sits.

        The matrix is the Performance claim's evidence. A reviewer distrusts a PR that shows only its best shape.
        """),
        setup_cell("""
        %matplotlib inline
        import dataclasses
        import tempfile
        from pathlib import Path

        import pandas as pd
        from IPython.display import display
        from fastpath_lib import bench

        pd.set_option("display.max_colwidth", 80)
        """),
        md("""
        ## 1. Predeclare

        The matrix lives in a file in the repository, written (and reviewed) before the first measurement. Each case says
        what it probes and what the author expects — including the shapes where the new path should not be faster
        (small, launch-bound calls; shapes the predicate sends to the fallback).
        """),
        code("""
        cases = bench.load_cases()
        print(len(cases), "predeclared cases; expected outcomes:", pd.Series([c.expected for c in cases]).value_counts().to_dict())
        pd.DataFrame([dataclasses.asdict(c) for c in cases])[["id", "family", "shape", "dtype", "layout", "pass_",
                                                               "expected", "rationale"]]
        """),
        md("""
        `check_coverage` is the reviewer's first question turned into code: does the matrix have at least 12 cases, and
        does it include expected neutral, losing and fallback cases, not only wins? An empty list means it does.
        """),
        code("print(bench.check_coverage(cases))"),
        md("""
        ## 2. Run — live on a GPU, recorded results otherwise

        On a GPU this lesson measures the whole matrix (a few minutes). Without one it does **not** produce GPU numbers:
        it analyses the newest results recorded on a GPU in `results/` and says so; if there are none, it runs the
        CPU quick mode on two cases so you can see the format — those timings are **NOT a GPU measurement** and say
        nothing about the fast path's speed.
        """),
        code("""
        recorded = bench.latest_gpu_results(root="../results")
        scratch = Path(tempfile.mkdtemp(prefix="fastpath-lesson05-")) / "run"
        if DEVICE == "cuda":  # a few minutes; `python -m fastpath_lib bench` records a full folder in results/
            SOURCE, RESULTS_DIR = "live GPU measurement", scratch
            df = bench.run_matrix(cases, out_dir=RESULTS_DIR, progress=False, analyses=False)
        elif recorded is not None:
            SOURCE, RESULTS_DIR = f"recorded GPU results ({recorded.name})", recorded
            df, _ = bench.load_results(recorded)
        else:  # two cases, tiny shapes: shows the format only
            SOURCE, RESULTS_DIR = "CPU quick mode on 2 cases: NOT a GPU measurement", scratch
            picked = [c for c in cases if c.id in ("decode_m1_fp16", "batch_1024_fp16")] or cases[:2]
            df = bench.run_matrix(picked, quick=True, out_dir=RESULTS_DIR, progress=False, analyses=False)
        print("source:", SOURCE)
        """, ignore=True),
        md("""
        ## 3. Metadata

        Results without the environment cannot be reproduced or compared: GPU model, driver, CUDA, torch, triton, clocks,
        the commit. The run writes them to `environment.json` next to `results.csv`.
        """),
        code("""
        _, env = bench.load_results(RESULTS_DIR)
        pd.Series(env, dtype=object).to_frame("value")
        """, ignore=True),
        md("""
        ## 4. Raw results

        One row per case, route, mode and sample: the raw samples, not only a summary, so a reviewer can recompute
        medians and spreads. (The numbers depend on the machine; the notebook tests do not compare them.)
        """),
        code("""
        print(SOURCE)
        df[["case_id", "provider", "rows", "cols", "dtype", "route", "status", "median_ms", "q20_ms", "q80_ms",
            "samples_ms", "gpu_measurement"]].head(12)
        """, ignore=True),
        md("""
        ## 5. Performance and mechanism

        `bench.classify` labels each case *win*, *neutral*, *loss* or *fallback* from the measured ratio to the baseline.
        The mechanism columns turn time into GB/s from bytes moved, which a reviewer compares with the device's memory
        bandwidth: a fast path near the ceiling has no headroom left; one far below it is limited by something else.
        """),
        md("""
        Without GPU measurements the table leaves the speed-up column out. The `observed` column still compares the
        interpreter's time with a native CPU kernel, so it reads *loss* for every Triton-route case: that says how slow
        the interpreter is, nothing about a GPU.
        """),
        code("""
        print(SOURCE)
        bench.summary_table(df)  # without GPU measurements it leaves the speed-up column out
        """, ignore=True),
        md("""
        Mechanism: the bytes a call must move (each input read once, each output written once), the GB/s that makes,
        and its share of the measured copy bandwidth. The byte count is the same formula as lesson 02's fused version:
        """),
        code("""
        from fastpath_lib.bench.harness import bytes_moved

        print("forward 4096x4096 bf16:", bytes_moved(4096, 4096, torch.bfloat16, "forward") / 2**20, "MiB")
        print("fwd+bwd 4096x4096 bf16:", bytes_moved(4096, 4096, torch.bfloat16, "backward") / 2**20, "MiB")
        """),
        code("""
        print(SOURCE)
        df[df.provider != "compiled"][["case_id", "provider", "bytes_moved", "gbps", "copy_gbps", "pct_copy_bw"]]
        """, ignore=True),
        md("""
        ## 6. The dispatch boundary

        The plot shows the speed-up over the baseline against problem size, with the row threshold drawn in: to the left
        the predicate keeps the baseline (launch overhead would outweigh the saving), to the right the fast path should
        win. If a losing case sits right of the line, the threshold is too low; if winning cases sit left of it, it is
        too conservative.
        """),
        code("""
        fig = bench.boundary_plot(df, env=df.attrs.get("environment"))
        display(fig)
        bench.boundary_table(df)
        """, ignore=True),
        md("The scratch folder of this lesson's run is removed (recorded results in `results/` are left alone):"),
        code("""
        import shutil

        shutil.rmtree(scratch.parent, ignore_errors=True)
        """),
        md("""
        ## What the numbers say

        Read the matrix in this order: is every case there that was declared (none silently dropped)? Do the losing and
        neutral cases fall where the author predicted, and does the predicate send them to the fallback? Are the wins
        near the bandwidth ceiling (mechanism) or suspiciously above it (a measurement error: caching, a missing
        synchronisation)? Only then: how large are the wins.

        ## Recap

        - Declare the cases first, including the ones you expect to lose; record raw samples and the environment.
        - Interpreter or CPU timings are never performance evidence; without a GPU, analyse recorded GPU results.
        - The boundary plot is how a reviewer checks the row threshold.

        **Questions**
        1. Why must the case list be committed *before* the first GPU run?
        2. A case reaches 5 TB/s on a GPU with 4.8 TB/s of bandwidth. What do you suspect?
        3. Which columns of `environment.json` would you need to reproduce a run a year later?
        """),
    ]


# ----------------------------------------------------------------------------------------------------------------------
def lesson_06():
    return [
        md("""
        # 06 · Workload replay and maintenance cost

        **What you will learn**
        - how to replay a real workload's calls (shapes, dtypes, layouts and their frequencies) instead of a synthetic
          sweep, and what share of calls the fast path actually takes;
        - what the change costs to keep: compile time, the fallback switch, and an owner.

        A reviewer asks two questions a shape sweep cannot answer: *does this help a real model?* and *who pays for it
        later?*
        """),
        setup_cell("""
        import pandas as pd
        from fastpath_lib import bench
        from fastpath_lib.rmsnorm.predicate import limits_for

        R = limits_for(DEVICE).min_rows
        """),
        md("""
        ## Workload replay

        `bench.replay` runs a small decoder forward twice with the same weights: once with `torch.nn.RMSNorm`, once with
        `fastpath_lib.RMSNorm`. It checks that the logits agree, counts the routes the fast model's norms take, and
        times the whole forward and the norms alone, so the result says what share of a step RMSNorm is and what the
        fast path changes end to end (on a GPU: 8 × 512 tokens, dim 4096, bf16; on a CPU: tiny sizes).
        """),
        code("""
        replay = bench.replay(quick=True)
        print(replay["label"])
        print("logits agree:", replay["logits_close"], "| fast model routes:", replay["fast_model_routes"])
        """, ignore=True),
        md("""
        The timings (on a CPU, interpreter times: **not a GPU measurement**). Read `norm_share_baseline` first: if the
        norms are 3 % of a step, even an infinitely fast norm saves at most 3 %.
        """),
        code("pd.Series(replay, dtype=object).to_frame('value')", ignore=True),
        md("""
        ## Maintenance cost: compile time

        The Triton kernels are compiled on first use for each specialization (dtype, block size, constexprs). On a GPU
        that is a one-off cost per process that users see as a slower first step; under the interpreter there is no
        compilation, so the number below is not comparable.
        """),
        code("""
        cost = bench.compile_cost()  # the full matrix; without CUDA it only lists, nothing compiles
        print("specializations the matrix compiles:", cost["specializations"])
        pd.DataFrame(cost["list"])
        """),
        md("On a GPU the probe measures first-call minus second-call time per specialization in a fresh process; here:"),
        code("""
        print({k: v for k, v in cost.items() if k != "list"})
        """, ignore=True),
        md("""
        ## Maintenance cost: the fallback switch and an owner

        Every fast path needs a way off that does not require a code change, and somebody who answers when it breaks.
        Here the switch is `force_fallback()` (tests, debugging) and `FASTPATH_FORCE_FALLBACK=1` (production):
        """),
        code("""
        x = torch.randn(2 * R, 64, device=DEVICE)
        with fastpath_lib.record_routes() as routes, fastpath_lib.force_fallback():
            fastpath_lib.rms_norm(x, [64])
        print("with force_fallback():", dict(routes))
        """),
        md("""
        The cost to list in the PR, so a reviewer can weigh it against the measured gain:

        | cost | this change |
        |---|---|
        | code | two Triton kernels, their launchers, a predicate of 17 named conditions, a custom op |
        | tests | generated boundary tests (both routes), contract parity, opcheck, compile, GPU-only tests under compute-sanitizer |
        | compile time | Triton JIT on first use per specialization (see above, measured on a GPU) |
        | way off | `force_fallback()`, `FASTPATH_FORCE_FALLBACK=1` |
        | re-tuning | the row threshold per GPU architecture (`CUDA_MIN_ROWS`), from a recorded sweep |
        | owner | named in the PR; answers for regressions and for new architectures |

        ## Recap

        - A workload replay measures what share of real calls the fast path takes, not only how fast it is.
        - Compile time, the off switch, re-tuning and an owner are part of the change's price.

        **Questions**
        1. A fast path wins 2× on the sweep but takes 5 % of the workload's calls. Is it worth merging?
        2. Why is a switch that needs no code change important for production users?
        3. What should happen to `CUDA_MIN_ROWS` when a new GPU architecture ships?
        """),
    ]


# ----------------------------------------------------------------------------------------------------------------------
def lesson_07():
    return [
        md("""
        # 07 · The PR note, reviewable commits, and the reviewer's knowledge check

        **What you will learn**
        - how to draft the PR note from recorded results (`bench.pr_note`), so every number in it has a source;
        - how to split the change into commits a reviewer can read one at a time;
        - the questions a reviewer will ask, with answer guides to open *after* you have answered.
        """),
        setup_cell("""
        import tempfile
        from pathlib import Path

        from IPython.display import Markdown, display
        from fastpath_lib import bench
        """),
        md("""
        ## Drafting the note from the results

        The note is generated from a results folder: the predeclared matrix, the environment, the raw samples and the
        classification. Nothing in it is typed by hand, so nothing can drift from what was measured. Without recorded
        GPU results the note says that it has no GPU evidence, rather than inventing any.
        """),
        code("""
        source = bench.latest_gpu_results(root="../results")
        if source is None:  # no GPU evidence recorded: draft from a 2-case CPU quick run, which the note labels as such
            source = Path(tempfile.mkdtemp(prefix="fastpath-lesson07-")) / "run"
            picked = [c for c in bench.load_cases() if c.id in ("decode_m1_fp16", "batch_1024_fp16")]
            bench.run_matrix(picked, quick=True, out_dir=source, progress=False, analyses=False)
            print("no recorded GPU results: drafting from a CPU quick run (NOT a GPU measurement)")
        note = bench.pr_note(source)
        print(note.splitlines()[0])
        """, ignore=True),
        md("""
        The draft, rendered. Check that it names the hardware, that every predeclared case appears, and — without GPU
        results — that it says the Performance claim is *unmeasured* instead of quoting interpreter timings:
        """),
        code("Markdown(note)", ignore=True),
        code("""
        import shutil

        if "fastpath-lesson07-" in str(source):  # remove only the scratch run made above
            shutil.rmtree(source.parent, ignore_errors=True)
        """),
        md("""
        ## Splitting the change into reviewable commits

        One PR, several commits, each of which builds and passes the tests on its own:

        1. **Semantic change** — the custom op, the predicate and the kernels, behind the fallback; the contract tests
           (`F.rms_norm` parity, exceptions, autocast, gradients, compile).
        2. **Mechanical refactor** — moves and renames with no behaviour change (for example routing call sites
           through the new op); a reviewer can skim it, because the tests did not change.
        3. **Tests** — the generated boundary tests, guard bands, `opcheck`, GPU tests for compute-sanitizer.
        4. **Benchmark** — the predeclared matrix, the harness, the recorded results and environment, the note.

        Mixing a refactor into the semantic commit hides the one line that changes behaviour among hundreds that do not.

        ## The reviewer's knowledge check

        Answer each question in your own words first, then open the guide.

        **1. Why should a performance PR include shapes where the new path is not faster?**
        """),
        md("""
        <details><summary>Answer guide</summary>

        They show the boundary is where the predicate says it is: the neutral and losing shapes are exactly the ones the
        fast path must *not* take, and measuring them proves the threshold protects the baseline. They also show the
        author did not pick the matrix after seeing the results (predeclared), and they give users on those shapes an
        honest answer ("no change for you"). A PR with only wins hides its regressions and invites the reviewer to go
        looking for them.
        </details>
        """),
        md("**2. The benchmark shows 1.8× on 4096×4096 bf16. What else do you need before believing it?**"),
        md("""
        <details><summary>Answer guide</summary>

        The baseline it was compared with (the real `F.rms_norm`, same inputs), the environment (GPU, clocks, driver,
        versions), the raw samples and their spread, the bytes moved and the resulting GB/s against the device's
        bandwidth (is 1.8× even possible?), and the rest of the predeclared matrix.
        </details>
        """),
        md("**3. How do you know the fast path computes the same thing as the fallback for inputs nobody tested by hand?**"),
        md("""
        <details><summary>Answer guide</summary>

        The boundary tests are generated from the predicate's declarations, so every condition is tested on both sides
        of its limit, through both routes, against a float64 reference with per-dtype tolerances; the guard bands catch
        out-of-bounds access; hypothesis cases cover the space in between; `opcheck` checks the op's registration.
        </details>
        """),
        md("**4. Why does the fast path send invalid calls to the fallback instead of raising its own error?**"),
        md("""
        <details><summary>Answer guide</summary>

        So users keep `F.rms_norm`'s exception types and messages: code that catches `RuntimeError` for a shape mismatch,
        or tests that match the message, keep working. The fast path adds speed, never a new error.
        </details>
        """),
        md("**5. A user reports wrong results on a new GPU. What do they do today, and what do you do?**"),
        md("""
        <details><summary>Answer guide</summary>

        Today: `FASTPATH_FORCE_FALLBACK=1` (no code change), and `fastpath_lib.explain(...)` to report the route. You:
        reproduce with the self-test and the GPU tests under compute-sanitizer on that architecture, and, until fixed,
        exclude it in the predicate's `architecture` condition.
        </details>
        """),
        md("""
        ## Recap

        - Generate the PR note from recorded results; never type a number into it.
        - Split the change: semantic, mechanical, tests, benchmark.
        - Include the neutral and losing shapes: they are the evidence that the boundary is right.

        **Questions**
        1. Which commit of the four would you review most carefully, and why?
        2. What does the PR note say when there are no GPU results at all?
        """),
    ]


LESSONS = {
    "00_setup": lesson_00,
    "01_operator_contract": lesson_01,
    "02_triton_kernel": lesson_02,
    "03_eligibility_predicate": lesson_03,
    "04_boundary_tests": lesson_04,
    "05_benchmark_matrix": lesson_05,
    "06_workload_and_maintenance": lesson_06,
    "07_pr_note": lesson_07,
}


def build(names=None) -> list[Path]:
    NB_DIR.mkdir(exist_ok=True)
    out = []
    for name, make in LESSONS.items():
        if names and name not in names:
            continue
        nb = nbformat.v4.new_notebook()
        nb.cells = make()
        nb.metadata["kernelspec"] = dict(KERNELSPEC)
        nb.metadata["language_info"] = {"name": "python"}
        path = NB_DIR / f"{name}.ipynb"
        nbformat.validate(nb)
        nbformat.write(nb, path)
        out.append(path)
    return out


if __name__ == "__main__":
    for p in build(sys.argv[1:]):
        print("wrote", p.relative_to(ROOT))
