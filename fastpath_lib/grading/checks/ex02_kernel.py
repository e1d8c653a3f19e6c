"""Exercise 02: a fused residual-add RMSNorm kernel, and (stretch) its backward from the saved ``rstd``. Lesson 02 shows
the kit's forward kernel; this exercise asks for a kernel the kit does not contain, the fused ``h = x + residual; y =
rms_norm(h) * w`` of transformer blocks (vLLM's ``fused_add_rms_norm``), which also stores ``h`` (the next residual
stream) and each row's ``rstd`` for the backward. The check launches it on irregular shapes and compares all three
outputs with a plain-torch spec; handing back the kit's kernels fails. From the learner's source
(:mod:`fastpath_lib.grading.rules.kernel_source`), the kernel must be their own ``@triton.jit`` function doing the work,
and the stretch backward must launch one and compute nothing in torch; an object that only answers a launch, or a launch
for show, scores nothing. The kernel is graded on memory too, as GPU-Puzzles does (:func:`memory_problem`): under
Triton's interpreter every load and store is counted (:mod:`fastpath_lib.traffic`) against :data:`MEMORY_RULE`: each
element of x and of the residual read once and of the weight at most once per program, no input written, each output
element written once and never read back, nothing outside the tensors; and one more launch, whose row stride puts
row 3 at ``2**32 + 8`` elements on tensors that hold row 0 only, shows a row offset computed in int32 (it wraps
back inside them; :func:`overflow_problem`); the stretch backward's launcher gets the same probe through its own launch
(:mod:`~fastpath_lib.grading.engine.far_rows`); both probes move one program per row on axis 0, and the source rule
:mod:`~fastpath_lib.grading.rules.row_offsets` refuses an int32 product of a program id in any grid. Feedback says which
rule failed: wrong values, or right values and the memory rule, or int32 offsets. The stretch backward's launcher may
run no torch operator but those that allocate, view, copy and sum the partial ``dw`` rows
(:mod:`~fastpath_lib.grading.engine.host_ops` with :data:`_LAUNCHER_SUMS`: recorded as it runs in the notebook, refused
at torch's dispatcher in the grader). In the grader the kernel runs as data
(:mod:`fastpath_lib.grading.engine.kernel_run`): its source from the notebook, compiled by Triton's frontend for a GPU,
run in the grader's own process on the grader's inputs.

The spec, per row, in plain torch (``eps`` is the default eps of the input dtype)::

    h = x + r                                   # in the input dtype: stored to H
    hf = h.float(); rstd = 1 / torch.sqrt((hf * hf).mean() + eps)   # stored to RSTD (fp32)
    y = (hf * rstd * w.float()).to(x.dtype)     # stored to Y

The stretch backward gets ``rstd`` instead of ``eps`` (a training step saves it), computed here with an eps the kit
never uses, so recomputing it with the default eps gives the wrong gradients.
"""

from __future__ import annotations

import random

import torch

from fastpath_lib import interpreted
from fastpath_lib.cases import CaseSpec, output_guard_intact, poisoned_like
from fastpath_lib.grading.engine import far_rows, host_ops, kernel_run, remote, sources
from fastpath_lib.grading.materials import device
from fastpath_lib.grading.registry import Result
from fastpath_lib.grading.report.feedback import Fail, case_label, graded, passed, table
from fastpath_lib.grading.rules import borrowed, kernel_body, kernel_source, row_offsets
from fastpath_lib.grading.rules.kernel_source import kernel_problem, launcher_problem
from fastpath_lib.rmsnorm import predicate as rms
from fastpath_lib.testing import compare, reference_grads

__all__ = ["check_add_rms_norm_kernel", "check_backward_with_saved_rstd", "add_rms_norm_spec", "memory_problem",
           "overflow_problem", "ABSENT", "MEMORY_RULE", "STATED"]

_FORBIDDEN = borrowed.KIT_KERNELS + borrowed.KIT_OP + borrowed.KIT_REFERENCE + borrowed.TORCH_RMS_NORM
#: torch's operators the grader's kernel and its runs of the learner's kernel lack while this exercise is graded
ABSENT = borrowed.absent("ex02", _FORBIDDEN)
#: the rules beyond forbidden calls this check applies, in the exercise's words
STATED = (kernel_body.PUBLISHED_RULE, kernel_run.RACE_RULE, row_offsets.INT64_RULE, kernel_body.DECORATOR_RULE)


def add_rms_norm_spec(x: torch.Tensor, r: torch.Tensor, w: torch.Tensor, eps: float | None = None):
    """The spec in plain torch: ``(h, y, rstd)`` with ``h`` in the input dtype, ``y`` and ``rstd`` in float64.

    >>> h, y, rstd = add_rms_norm_spec(torch.ones(2, 4), torch.ones(2, 4), torch.ones(4))
    >>> h[0, 0].item(), round(y[0, 0].item(), 6), round(rstd[0].item(), 6)
    (2.0, 1.0, 0.5)
    """
    eps = rms.default_eps(x.dtype) if eps is None else eps
    h = x + r
    h64 = h.detach().to(torch.float64)
    rstd = torch.rsqrt(h64.pow(2).mean(-1) + eps)
    return h, h64 * rstd[:, None] * w.detach().to(torch.float64), rstd


def _name(obj, default: str) -> str:
    """The name the check cell passed ``obj`` as: the grader's record of the cell for an object held in the
    learner's kernel, else the function's own name, else ``default``."""
    if remote.is_proxy(obj):
        root = remote.root(obj)
        return root if isinstance(root, str) and root.isidentifier() else default
    name = getattr(getattr(obj, "fn", obj), "__name__", None)
    return name if isinstance(name, str) and name.isidentifier() else default


def _source_rule(rule, obj, default: str) -> None:
    """Apply a :mod:`~fastpath_lib.grading.rules.kernel_source` rule to the learner's source (when there is one to
    read); in the grader, a stub still in place is said first."""
    source = sources.learner_source()
    if remote.is_proxy(obj) and kernel_source.still_a_stub(source, _name(obj, default)):
        raise NotImplementedError("the stub is still in place")
    problem = rule(source, _name(obj, default)) if source.strip() else None
    if problem:
        raise Fail(problem)


def _cases():
    rng = random.SystemRandom()
    drawn = CaseSpec(rng.randint(2, 7), rng.randint(20, 300), rng.choice((torch.float16, torch.bfloat16)),
                     scale=rng.choice((1.0, 0.1, 3.0)))
    return (
        (CaseSpec(7, 33, torch.float32, layout="row_slice", pad=3), "contiguous"),
        (CaseSpec(5, 100, torch.float16), "row_slice"),
        (CaseSpec(3, 781, torch.bfloat16), "contiguous"),
        (CaseSpec(1, 1, torch.float32), "contiguous"),
        (CaseSpec(6, 64, torch.float32, layout="step"), "step"),
        (CaseSpec(4, 17, torch.float32, scale=1e-2), "contiguous"),
        (_ROUNDS_DOWN, "contiguous"),
        (drawn, rng.choice(("contiguous", "row_slice"))),
    )


#: A case whose every h = x + r rounds to x in bf16 (x = 1, r below half an ulp): the mean square of the stored h is 1,
#: of the unrounded sum about 1 + 2**-7.7: an rstd from the unrounded sum is off on every run, not by chance.
_ROUNDS_DOWN = CaseSpec(2, 40, torch.bfloat16)
_ROUNDS_DOWN_FILL = (1.0, 2 ** -9 + 2 ** -11)


def _launch_args(x, r, w, h, y, rstd, eps) -> tuple:
    """``(grid, args, kwargs)`` of one launch of the learner's forward kernel (the signature in the exercise)."""
    import triton

    n_rows, n_cols = x.shape
    return ((n_rows,), [x, r, w, h, y, rstd, x.stride(0), r.stride(0), h.stride(0), y.stride(0), n_cols, eps],
            {"BLOCK_SIZE": triton.next_power_of_2(max(n_cols, 1))})


#: The forward kernel's tensor arguments, in order: read, read, read, written, written, written.
_ROLES = ("x", "residual", "weight", "h", "y", "rstd")
#: The memory rule :func:`memory_problem` holds the forward kernel to, one clause per limit it checks; exercise 02
#: prints it, and the feedback quotes it.
MEMORY_RULE = (
    "one launch per call",
    "each element of x and of the residual read once, each element of the weight at most once per program",
    "no input written",
    "each element of h, y and rstd written once and never read back (normalize the h kept in registers, not a load "
    "of H)",
    "nothing outside the tensors read or written",
)


def _times(n: int) -> str:
    return {2: "twice", 3: "three times"}.get(n, f"{n} times")


def memory_problem(launches: list[dict], oob: list[str], programs: int) -> str | None:
    """Why one call's counted traffic breaks :data:`MEMORY_RULE`, or ``None``. The budget is the bytes model's: the
    bytes of the three inputs plus the three outputs, each once.

    Args:
        launches: per launch, argument name -> byte counts
        (:attr:`fastpath_lib.grading.engine.kernel_run.Call.traffic`). oob: the out-of-bounds accesses, as
        :mod:`fastpath_lib.traffic` words them (program id, offsets, mask). programs: the launch's programs (rows).
    """
    if oob:
        more = f" (and {len(oob) - 1} more)" if len(oob) > 1 else ""
        return f"{oob[0]}{more}"
    if len(launches) != 1:
        return f"{len(launches)} launches for one call: the fused kernel is one launch"
    tensors = [(n, t) for n, t in launches[0].items() if not n.startswith("<")]
    if len(launches[0]) != len(tensors):
        return "the kernel reaches memory through a pointer that belongs to none of its tensor arguments"
    for role, (name, t) in zip(_ROLES, tensors):
        label = f"{role} ({name})"
        if role in _ROLES[:3]:
            limit = programs if role == "weight" else 1
            if t["stored_distinct"]:
                return f"{label}: the kernel writes {t['stored_distinct']} bytes into an input"
            if t["loaded_distinct"] != t["nbytes"]:
                return f"{label}: read {t['loaded_distinct']} of its {t['nbytes']} bytes (read every element)"
            if t["max_loads_per_byte"] > limit:
                if role == "weight":
                    return (f"{label}: some bytes read {t['max_loads_per_byte']} times by {programs} programs (at "
                            f"most once per program: read each element once)")
                return f"{label}: reads each input element {_times(t['max_loads_per_byte'])} (read each once)"
        else:
            if t["loaded_distinct"]:
                return (f"{label}: the kernel reads back {t['loaded_distinct']} bytes of an output (keep the value in "
                        f"registers: each output element is written once and never read)")
            if t["stored_distinct"] != t["nbytes"]:
                return f"{label}: wrote {t['stored_distinct']} of its {t['nbytes']} bytes"
            if t["max_stores_per_byte"] > 1:
                return f"{label}: writes each output element {_times(t['max_stores_per_byte'])} (write each once)"
    return None


def _forward_cases(seed: int):
    """Per case: its label and the tensors of one launch (with their guard bands and the built inputs)."""
    out = []
    for spec, r_layout in _cases():
        built = spec.build(seed=seed, device=device())
        x, _, w = built.args()
        rb = CaseSpec(spec.rows, spec.cols, spec.dtype, weight=None, layout=r_layout, pad=5, scale=spec.scale).build(
            seed=seed + 1, device=device())  # scaled as x: h small where x is (mean(h^2) near eps shows eps's place)
        label = f"{case_label(spec)}, residual {r_layout}"
        if spec is _ROUNDS_DOWN:
            for b, v in zip((built, rb), _ROUNDS_DOWN_FILL):
                b.x.fill_(v)
                b.x_pristine = b.x_buffer.clone()
            label += ", x = 1, r = 2**-9 + 2**-11 (h = x + r rounds to 1)"
        h, hbuf, hp = poisoned_like(x.shape, x.dtype, x.device)
        y, ybuf, yp = poisoned_like(x.shape, x.dtype, x.device)
        rstd, sbuf, sp = poisoned_like((x.shape[0],), torch.float32, x.device)
        out.append({"label": label, "built": (built, rb), "x": x, "r": rb.x,
                    "w": w, "h": h, "y": y, "rstd": rstd, "eps": rms.default_eps(x.dtype),
                    "guards": ((hbuf, hp), (ybuf, yp), (sbuf, sp))})
    return out


def _in_process(kernel, c: dict) -> tuple[list[dict], list[str], list[str]]:
    """Launch the learner's kernel object here (the in-notebook check); its traffic, out-of-bounds accesses and data
    races where the interpreter runs it."""
    import numpy as np

    from fastpath_lib import runtime, traffic
    from fastpath_lib.grading.engine.kernel_run import launch_traffic

    grid, args, kwargs = _launch_args(c["x"], c["r"], c["w"], c["h"], c["y"], c["rstd"], c["eps"])
    with np.errstate(all="ignore"):
        if not (runtime.interpreter_enabled() and c["x"].device.type == "cpu"):
            kernel[grid](*args, **kwargs)
            return [], [], []  # compiled for a GPU: no traffic to count here
        with traffic.watch(races=True) as t:
            kernel[grid](*args, **kwargs)
    return [launch_traffic(launch) for launch in t.launches], [str(o) for o in t.oob], [str(r) for r in t.races]


def _probe_in_process(kernel, probe) -> list[dict] | None:
    """The overflow probe's traffic where the interpreter runs the kernel here (``None`` on a GPU: a compiled kernel
    would really reach rows 1-3)."""
    import numpy as np

    from fastpath_lib import runtime, traffic
    from fastpath_lib.grading.engine.kernel_run import launch_traffic

    if not runtime.interpreter_enabled():
        return None
    grid, args, kwargs = probe
    with np.errstate(all="ignore"), traffic.watch() as t:
        kernel[grid](*args, **kwargs)
    return [launch_traffic(launch) for launch in t.launches]


def _judge(c: dict, launches, oob, counted: bool, races=()) -> tuple[str, str] | None:
    """``("race" | "values" | "memory", what is wrong)``, or ``None`` when the case is right: a data race first, as
    the values a racing kernel gives on a GPU are not the interpreter's."""
    if races:
        return "race", races[0]
    x, r, w, h, y, rstd, eps = (c[k] for k in ("x", "r", "w", "h", "y", "rstd", "eps"))
    eh, _, _ = add_rms_norm_spec(x, r, w, eps)
    problem = compare(h, eh.to(torch.float64), x.dtype)
    problem = problem and f"h = x + r: {problem}"
    # y and rstd from the h you stored: rounding h to the dtype (to nearest or toward zero) is not graded
    _, ey, erstd = add_rms_norm_spec(h, torch.zeros_like(h), w, eps)
    problem = problem or (f"y: {p}" if (p := compare(y, ey, x.dtype)) else None)
    problem = problem or (f"rstd: {p}" if (p := compare(rstd, erstd, torch.float32, grad=True)) else None)
    if problem and not problem.startswith("h =") and x.dtype != torch.float32:  # what this rstd is, if not the spec's
        s = x.detach().double() + r.detach().double()  # the unrounded sum (of two fp16/bf16 values: exact in fp64)
        if compare(rstd, torch.rsqrt(s.pow(2).mean(-1) + eps), torch.float32, grad=True) is None:
            problem += (" (your rstd is that of the unrounded fp32 sum x + r: the spec normalizes h as stored, "
                        "rounded to the input dtype: hf = h.float() of the h you store)")
    if problem is None and not all(output_guard_intact(b, p, 16) for b, p in c["guards"]):
        problem = "wrote outside the outputs (mask the tail: cols < n_cols)"
    if problem is None and not all(b.inputs_untouched() for b in c["built"]):
        problem = "modified the input, the residual or the weight"
    if problem is None and counted:
        memory = memory_problem(launches, oob, x.shape[0])
        return ("memory", memory) if memory else None
    return None if problem is None else ("values", problem)


def _precision_hint(cases, verdicts) -> str:
    """A line naming the fix where the wrong values are those of a reduction in the input's precision: h right in
    every case, every float32 case right, and y or rstd wrong only in fp16/bf16 cases (not for the unrounded sum,
    which :func:`_judge` names itself)."""
    low = [c["x"].dtype != torch.float32 for c in cases]
    bad = [v is not None and v[0] == "values" for v in verdicts]
    said = [v[1] for v in verdicts if v is not None and v[0] == "values"]
    if (any(b and not lo for b, lo in zip(bad, low)) or not any(bad)
            or any(p.startswith("h =") or "unrounded" in p or not p.startswith(("y:", "rstd:")) for p in said)):
        return ""
    return ("\nonly your float16/bfloat16 cases are wrong, and h is right in each: compute the mean of squares in "
            "float32 (hf = h.to(tl.float32) before squaring and summing); squares summed in float16/bfloat16 lose "
            "digits, and overflow past 65504 in float16")


#: The row stride of the overflow probe: ``3 * stride`` is ``2**32 + 8``, so a row offset computed in int32 wraps to
#: element 8 at program 3, inside the probe's small tensors; in int64 it is far past them (an access the interpreter's
#: checker drops). The stride itself fits int32, as a real stride below 2**31 does.
_WRAPPING_STRIDE = (2 ** 32 + 8) // 3


def _overflow_probe(dtype):
    """``(launch, row bytes)``: a launch of 4 rows of 16 columns whose row strides say ``_WRAPPING_STRIDE``, on
    tensors that hold only those 4 rows, so row 0 alone is inside them (rows 1-3 lie past 2**31 elements)."""
    import triton

    x, r = torch.randn(4, 16).to(dtype), torch.randn(4, 16).to(dtype)
    w = torch.ones(16, dtype=dtype)
    h, y, rstd = torch.zeros(4, 16, dtype=dtype), torch.zeros(4, 16, dtype=dtype), torch.zeros(4)
    s = _WRAPPING_STRIDE
    return ((4,), [x, r, w, h, y, rstd, s, s, s, s, 16, 1e-6], {"BLOCK_SIZE": triton.next_power_of_2(16)}), \
        16 * x.element_size()


def overflow_problem(launches: list[dict], row_bytes: int) -> str | None:
    """Why the overflow probe's traffic shows a row offset computed in int32, or ``None``: with the probe's row stride
    only row 0 lies inside x, the residual, h and y; a kernel whose ``row * row_stride`` wraps in int32 reaches them
    again from program 3 (element 8)."""
    if len(launches) != 1:
        return None  # judged by the memory rule
    tensors = [(n, t) for n, t in launches[0].items() if not n.startswith("<")]
    for role, (name, t) in zip(_ROLES, tensors):
        if role in ("x", "residual", "h", "y") and max(t["loaded_distinct"], t["stored_distinct"]) > row_bytes:
            return (f"row offsets wrap in int32: with a row stride of {_WRAPPING_STRIDE} elements (rows past 2**31 "
                    f"elements, as in a large KV cache or a long prefill), program 3 reached {role} ({name}) at "
                    f"element 8 instead of element {3 * _WRAPPING_STRIDE}; compute the row offset in int64 "
                    f"(tl.program_id(0).to(tl.int64))")
    return None


@interpreted.as_on_gpu()  # the interpreter's bf16 arithmetic is not the learner's
def _grade_kernel(my_kernel) -> list[Result]:
    borrowed.reject_handed_back(my_kernel, _FORBIDDEN)
    in_grader = remote.is_proxy(my_kernel)
    source = sources.learner_source()
    if in_grader:
        _source_rule(kernel_problem, my_kernel, "my_add_rms_norm_fwd")  # before anything of it runs
    else:
        from triton.runtime.jit import KernelInterface

        if not isinstance(my_kernel, KernelInterface):
            raise Fail(f"expected a @triton.jit kernel, got {type(my_kernel).__name__}")
    cases = _forward_cases(random.SystemRandom().randrange(1 << 20))  # inputs drawn at each check
    probe, row_bytes = _overflow_probe(cases[1]["x"].dtype)
    if in_grader:
        name = _name(my_kernel, "my_add_rms_norm_fwd")
        launches = [_launch_args(*(c[k] for k in ("x", "r", "w", "h", "y", "rstd", "eps"))) for c in cases]
        outcome = kernel_run.run(kernel_source.program(source, name), name, launches + [probe])
        if outcome.compile_problem:
            raise Fail(outcome.compile_problem)
        measured = []
        for launch, call in zip(launches, outcome.calls):
            if call.error:
                raise Fail(f"your kernel raised {call.error[0]}: {call.error[1]}")
            kernel_run.copy_back(launch[1], call.args)
            measured.append((call.traffic, call.oob, True, call.races))
        probed = outcome.calls[-1].traffic if len(outcome.calls) > len(launches) else None
    else:
        measured = []
        for c in cases:
            counted, oob, races = _in_process(my_kernel, c)
            measured.append((counted, oob, bool(counted) or bool(oob), races))
        probed = _probe_in_process(my_kernel, probe)
    verdicts = [_judge(c, *m) for c, m in zip(cases, measured)]
    rows = [(c["label"], v[1] if v else "ok") for c, v in zip(cases, verdicts)]
    raced = [v[1] for v in verdicts if v is not None and v[0] == "race"]
    if raced:
        raise Fail(raced[0])
    wrong = sum(v is not None and v[0] == "values" for v in verdicts)
    if wrong:
        raise Fail(f"{wrong} of {len(rows)} cases give wrong values\n" + table(rows, ("case", "yours vs expected"))
                   + _precision_hint(cases, verdicts))
    memory = [v[1] for v in verdicts if v is not None]
    if memory:
        raise Fail(f"every value is right, but the memory rule fails ({'; '.join(MEMORY_RULE)}) on {len(memory)} "
                   f"of {len(rows)} cases: {memory[0]}\n" + table(rows, ("case", "yours vs the memory rule")))
    problem = overflow_problem(probed, row_bytes) if probed else None
    if problem:
        raise Fail(f"every value and every access is right on the cases, but {problem}")
    if not in_grader:
        _source_rule(kernel_problem, my_kernel, "my_add_rms_norm_fwd")  # after a stub's NotImplementedError
    return [passed("ex02", "add_rms_norm_kernel")]


def check_add_rms_norm_kernel(my_kernel, *, show: bool = True):
    """Launch ``my_kernel`` (the signature in the exercise) on irregular shapes; compare h, y and rstd with the spec,
    and count its memory traffic (:func:`memory_problem`) where it runs in Triton's interpreter.

    In the grader the kernel runs as data (:mod:`~fastpath_lib.grading.engine.kernel_run`): its source, read from the
    notebook, compiled by Triton's frontend for a GPU and run by the grader's own process on the grader's inputs."""
    return graded("ex02", ("add_rms_norm_kernel",), _grade_kernel, my_kernel, show=show)


def _backward_cases():
    rng = random.SystemRandom()
    seed = rng.randrange(1 << 20)  # inputs drawn at each check
    out = []
    for spec, eps in ((CaseSpec(5, 33, scale=0.3), 0.1), (CaseSpec(4, 100, torch.float16, weight=None), 1e-6),
                      (CaseSpec(6, 24, layout="row_slice", pad=8, scale=0.2), 0.05),
                      (CaseSpec(rng.randint(2, 6), rng.randint(20, 200), torch.bfloat16, scale=0.3),
                       rng.choice((0.02, 0.2)))):
        built = spec.build(seed=seed, device=device())
        h, ns, w = built.args()
        rstd = torch.rsqrt(h.detach().to(torch.float64).pow(2).mean(-1) + eps).to(torch.float32).to(h.device)
        g = torch.Generator().manual_seed(seed + 1)
        dy = torch.randn(h.shape, generator=g, dtype=torch.float64).to(h.dtype).to(h.device)
        out.append((spec, eps, (dy, h, w, rstd), ns))
    return out


#: What exercise 02's backward launcher computes with torch beyond allocating, viewing and copying
#: (:mod:`~fastpath_lib.grading.engine.host_ops`): the sum of the kernel's partial dw rows. Anything else it runs is
#: torch computing the answer, whatever the source looks like (a value laundered through a builtin, ``max([t]) * 2``,
#: is still ``aten.mul``).
_LAUNCHER_SUMS = ("sum",)


def _torch_compute(ops) -> str | None:
    computed = sorted(set(ops) - host_ops.allowed_names(_LAUNCHER_SUMS))
    if not computed:
        return None
    return (f"my_backward computes with torch outside your kernel (it ran torch's {', '.join(computed[:4])}): the "
            f"launcher allocates, launches and sums the partial dw rows; the gradients come from your kernel")


@interpreted.as_on_gpu()
def _grade_backward(my_backward) -> list[Result]:
    cases = _backward_cases()
    in_grader = remote.is_proxy(my_backward)
    if in_grader:
        borrowed.reject_handed_back(my_backward, _FORBIDDEN)
        _source_rule(launcher_problem, my_backward, "my_backward")  # before anything of it runs
        name = _name(my_backward, "my_backward")
        probes, programs = far_rows.calls(_far_args(), len(cases))
        outcome = kernel_run.run(kernel_source.program(sources.learner_source(), name), name,
                                 [(None, list(args), {}) for _, _, args, _ in cases] + probes, allow=_LAUNCHER_SUMS,
                                 programs=programs)
        if outcome.compile_problem:
            raise Fail(outcome.compile_problem)
        far = far_rows.verdict(outcome.calls[len(cases):])
        answers = []
        for call in outcome.calls[:len(cases)]:
            if call.error:
                raise Fail(f"my_backward raised {call.error[0]}: {call.error[1]}")
            out = tuple(v.to(device()) if isinstance(v, torch.Tensor) else v for v in call.out) \
                if isinstance(call.out, tuple) else call.out
            answers.append((out, call.launches, call.oob, (), call.races))  # there torch's other operators raise
    else:
        answers = []
        for _, _, args, _ in cases:
            launched: list = []
            ops: set = set()
            raced: list = []
            with kernel_run.torch_ops(ops), kernel_run.races(raced):
                out = borrowed.run(my_backward, args, _FORBIDDEN, launches=launched)
            answers.append((out, [f for f in launched if f is not None], [], ops, raced))
        far = None  # judged after the cases, on what they showed
    rows, bad = [], 0
    raced = [r for *_, races in answers for r in races]
    if raced:  # the values a racing kernel gives on a GPU are not the interpreter's
        raise Fail(raced[0])
    for (spec, eps, (dy, h, w, _rstd), ns), (out, launched, oob, ops, _) in zip(cases, answers):
        if not launched:
            raise Fail("my_backward launched no Triton kernel: the backward is a kernel of yours")
        problem = _torch_compute(ops)
        if problem:
            raise Fail(f"on {case_label(spec)}: {problem}")
        if not (isinstance(out, tuple) and len(out) == 2):
            raise Fail(f"my_backward must return (dh, dw), got {type(out).__name__}")
        dh, dw = out
        edh, edw = reference_grads(h, ns, w, eps, dy)
        problem = oob[0] if oob else None
        problem = problem or ((p := compare(dh, edh, h.dtype, grad=True)) and f"dh: {p}")
        if problem is None and w is not None:
            problem = "dw is None, expected a tensor" if dw is None else compare(dw, edw, w.dtype, grad=True)
            problem = problem and f"dw: {problem}"
        bad += problem is not None
        rows.append((case_label(spec), "ok" if problem is None else problem))
    if bad:
        raise Fail(f"{bad} of {len(rows)} cases wrong\n" + table(rows, ("case", "yours vs expected")))
    far = far if in_grader else far_rows.in_process(my_backward, _far_args())
    if far:
        raise Fail(f"every case is right, but {far}")
    if not in_grader:
        _source_rule(launcher_problem, my_backward, "my_backward")
    return [passed("ex02", "backward_with_saved_rstd (stretch)")]


def _far_args() -> list:
    """The backward's arguments for the int32 row-offset probe (:mod:`~fastpath_lib.grading.engine.far_rows`):
    fp32 ``dy``, ``h``, a weight and ``rstd`` of :data:`~fastpath_lib.grading.engine.far_rows.ROWS` rows."""
    g = torch.Generator().manual_seed(random.SystemRandom().randrange(1 << 20))
    h = far_rows.inputs(generator=g)
    rstd = torch.rsqrt(h.pow(2).mean(-1) + 0.1)
    return [far_rows.inputs(generator=g).to(device()), h.to(device()), torch.ones(far_rows.COLS, device=device()),
            rstd.to(device())]


def check_backward_with_saved_rstd(my_backward, *, show: bool = True):
    """``my_backward(dy2d, h2d, weight, rstd) -> (dh, dw)`` vs float64 autograd of the spec (``rstd`` saved by the
    forward, fp32 ``[rows]``; no eps is passed). It must launch a kernel of yours, with no out-of-bounds access; in
    the grader it runs as data (:mod:`~fastpath_lib.grading.engine.kernel_run`), as the forward does."""
    return graded("ex02", ("backward_with_saved_rstd (stretch)",), _grade_backward, my_backward, show=show)
