"""The host-overhead family of any registered operator: what its dispatch costs per call.

Outside its region the public op must cost little more than its baseline (at most :data:`TARGET_RATIO` times its host
time): on a GPU a decode step's norm runs in a few microseconds, so tens of microseconds of Python dispatch per call
would be the very regression the predicate exists to prevent. :func:`measure_host_op` times, for an
:class:`~fastpath_lib.opspec.OpSpec`, each of its host cases (:func:`host_cases`: the spec's ``host_cases``, else
its predeclared cases expected to fall back whose calls fall back on this machine, at most :data:`MAX_HOST_ROWS`
rows, each built as the matrix declares it: shape, dtype, layout, pad and offset):

* a fallback call: the public function against the spec's first baseline, and each of the spec's ``host_forms``
  (e.g. an in-place form against the in-place composite); the ratio is held to :data:`TARGET_RATIO`. An in-place pair
  mutates its inputs on every call: each side gets its own copy, so both drift alike (a fallback's host time does not
  depend on the values). A call that takes the fast route on this machine (the interpreter's lower row threshold)
  gets ``status="not measured"`` rows;
* an eligible call (``HostCase.eligible``), on CUDA only: the public function against the fast route called directly
  (the spec's ``fast``), so the difference is the host time the route adds before its launch. Off CUDA the eligible
  route runs in Triton's interpreter, whose own cost hides the dispatch: those rows say :data:`NOT_MEASURED`;
* for an op whose spec names the vLLM IR op it provides (``pr_text["vllm_op"]``,
  :func:`fastpath_lib.bench.vllmhost.vllm_op`), vLLM's ``dispatch`` with the kit's provider first against vLLM's
  native path, and the provider's ``supports_args`` alone, measured in a child process
  (:mod:`fastpath_lib.bench.vllmhost`; rows skipped with the reason where vLLM cannot be imported).

Every side is timed by the kit's one host-timing method (:mod:`fastpath_lib.bench.hostmethod`: interleaved fixed
blocks, the fastest block of each side). Host time is a real measurement on a CPU too; rows carry
``family="host-overhead"`` and are classified on any machine. Times in microseconds.
"""

from __future__ import annotations

import dataclasses

import torch

from fastpath_lib import runtime
from fastpath_lib.bench.hostmethod import fastest_blocks, host_blocks, silenced, timing_fields, warnings_of
from fastpath_lib.bench.schema import FALLBACK, HOST_FAMILY, empty_row
from fastpath_lib.bench.timing import gpu_measurement
from fastpath_lib.cases import CaseSpec
from fastpath_lib.opspec import NOT_DECLARED, HostCase, OpCase, OpSpec

__all__ = ["MAX_HOST_ROWS", "TARGET_RATIO", "NOT_MEASURED", "host_cases", "no_host_case_reason", "case_input",
           "measure_host_op", "ratio_text"]

#: The largest matrix case a spec without ``host_cases`` has timed: decode batches, where the device work is
#: microseconds.
MAX_HOST_ROWS = 16
#: The dispatched op may cost at most this multiple of its baseline per call on the fallback route.
TARGET_RATIO = 1.15


def ratio_text(ratio: float, target: float = TARGET_RATIO, decimals: int = 2) -> str:
    """``ratio`` with enough decimals (``decimals`` at least, 6 at most) that its side of ``target`` shows: a ratio
    over the target never prints as the target, nor one under it (``—`` when not measured).

    >>> ratio_text(1.154), ratio_text(1.147), ratio_text(1.15), ratio_text(1.1504), ratio_text(1.3), ratio_text(None)
    ('1.154', '1.147', '1.15', '1.1504', '1.30', '—')
    """
    try:
        r = float(ratio)
    except (TypeError, ValueError):
        return "—"
    if r != r:
        return "—"
    d = decimals
    while d < 6 and r != target and f"{r:.{d}f}" == f"{target:.{d}f}":
        d += 1
    return f"{r:.{d}f}"


#: What the eligible rows say off CUDA.
NOT_MEASURED = "not measured: the interpreter's cost hides it"


def host_cases(spec: OpSpec, device: str | None = None) -> list[HostCase]:
    """The calls ``spec``'s host-overhead family times: its ``host_cases``, or else (a spec that declares none) its
    predeclared ``fallback`` cases whose call takes the fallback on ``device`` (default: this run's, CUDA where there
    is one), at their declared shape, those of more than :data:`MAX_HOST_ROWS` rows cut to that many (a decode
    batch). A case that falls back on CUDA only (a row threshold) is no host case off a GPU: there its call takes the
    fast route, which the family does not time; :func:`no_host_case_reason` says why none is left."""
    if spec.host_cases:
        return list(spec.host_cases)
    device = device or ("cuda" if runtime.cuda_available() else "cpu")
    out = []
    for c in spec.matrix():
        if c.expected != FALLBACK:
            continue
        built = case_input(spec, c)
        cut = c.rows > MAX_HOST_ROWS
        built = dataclasses.replace(built, rows=MAX_HOST_ROWS) if cut else built
        if _route_here(spec, built, device) != FALLBACK:
            continue
        why = f"{c.rationale} (cut to {MAX_HOST_ROWS} of its {c.rows} rows: a decode batch)" if cut else c.rationale
        out.append((cut, HostCase(f"host_{c.id}", built, why)))
    return [h for cut, h in sorted(out, key=lambda p: p[0])]  # the decode-sized cases first, as declared


def _route_here(spec: OpSpec, built, device: str) -> str | None:
    """The route ``built``'s call takes on ``device`` (``None``: it cannot be built or routed there)."""
    try:
        return spec.route(*spec.args(built.build(seed=7, device=device)))
    except Exception:  # noqa: BLE001 - a case this machine cannot build is no host case here
        return None


def no_host_case_reason(spec: OpSpec, device: str | None = None) -> str:
    """Why ``spec``'s host-overhead family has no call to time on ``device`` (``""``: it has some)."""
    device = device or ("cuda" if runtime.cuda_available() else "cpu")
    if host_cases(spec, device):
        return ""
    fallback = [c.id for c in spec.matrix() if c.expected == FALLBACK]
    if not fallback:
        return "the spec declares no host_cases and no predeclared case expected to fall back"
    return (f"the spec declares no host_cases, and none of its predeclared fallback cases ({', '.join(fallback)}) "
            f"takes the fallback on {device} (a condition that holds only on CUDA, such as a row threshold, routes "
            "them to the fast route here); declare host_cases whose calls fall back on every device")


def case_input(spec: OpSpec, case: OpCase, *, quick: bool = False, device=None):
    """What builds ``case``'s inputs: an instance of ``spec``'s case class (``case_spec``, else
    :class:`~fastpath_lib.cases.CaseSpec`) with the case's shape (``quick``: its ``--quick`` shape and pad), dtype,
    layout, pad and offset, as declared."""
    rows, cols = case.dims(quick)
    make = spec.case_spec or CaseSpec
    return make(rows=rows, cols=cols, dtype=getattr(torch, case.dtype), layout=case.layout, pad=case.pad_for(quick),
                offset=case.offset, **({"device": device} if device is not None else {}))


def _reasons(spec: OpSpec, args: tuple) -> str:
    if spec.predicate is None or spec.context is None:
        return ""
    return "; ".join(spec.predicate.evaluate(spec.context(*args)).reasons)


def _row(spec_case, case_id: str, rationale: str, provider: str, gpu: bool, **kw) -> dict:
    c = spec_case
    weight = getattr(c, "weight", "same")
    wd = f" ({str(weight).replace('torch.', '')} weight)" if weight not in ("same", None) else ""
    return empty_row(case_id=case_id, family=HOST_FAMILY, provider=provider, rows=c.rows, cols=c.cols,
                     dtype=str(c.dtype).replace("torch.", ""), layout=getattr(c, "layout", "contiguous") + wd,
                     pad=getattr(c, "pad", 0), offset=getattr(c, "offset", 0), declared_shape=f"{c.rows}x{c.cols}",
                     rationale=rationale, gpu_measurement=gpu, **{"pass": "forward"}, **kw)


def _time(fns: dict, blocks: int, number: int, device: str) -> tuple[dict, dict]:
    """What each side warns (one call), then their fastest interleaved blocks, warnings silenced."""
    with torch.no_grad():
        warned = {p: warnings_of(f) for p, f in fns.items()}
        with silenced():
            res = fastest_blocks(fns, blocks=blocks, number=number,
                                 sync=torch.cuda.synchronize if device == "cuda" else None)
    return warned, res


def _fallback(spec: OpSpec, case: HostCase, device: str, gpu: bool, blocks: int, number: int, log) -> list[dict]:
    args = spec.args(case.build(device, seed=7))
    route, reasons = spec.route(*args), _reasons(spec, args)
    base_name, base = spec.baseline
    forms = {"": (base_name, base, spec.function),
             **{f"_{k}": (f"{k} composite", b, f) for k, (b, f) in spec.host_forms.items()}}
    out = []
    for suffix, (bname, bfn, fn) in forms.items():
        cid = f"{case.id}{suffix}"
        # each side its own inputs, built as declared (a clone would drop an offset or a padded row stride, and the
        # dispatched call would take the fast route: under the interpreter, minutes of kernel calls)
        own = {"baseline": spec.args(case.build(device, seed=7)), "dispatched": spec.args(case.build(device, seed=7))}
        route = route if route != FALLBACK else spec.route(*own["dispatched"])
        if route != FALLBACK:  # e.g. the interpreter's lower row threshold: not a fallback call here
            out += [_row(case.case, cid, case.rationale, p, gpu, expected=FALLBACK, route=route, status="not measured",
                         note=f"not measured: the call takes the {route} route here, the family times fallback calls")
                    for p in ("baseline", "dispatched")]
            continue
        fns = {p: (lambda a=own[p], f=f: f(*a)) for p, f in (("baseline", bfn), ("dispatched", fn))}
        warned, res = _time(fns, blocks, number, device)
        for p in ("baseline", "dispatched"):
            timing = timing_fields(res[p])
            timing["note"] += f"; baseline: {bname}"
            out.append(_row(case.case, cid, case.rationale, p, gpu, expected=FALLBACK, route=route, reasons=reasons,
                            status="ok", warnings=warned[p], **timing))
        if log:
            ratio = res["dispatched"]["best_us"] / res["baseline"]["best_us"]
            log(f"  {cid}: {bname} {res['baseline']['best_us']:.2f} us, dispatched {res['dispatched']['best_us']:.2f} "
                f"us, ratio {ratio_text(ratio)} (target <= {TARGET_RATIO})")
    return out


def _eligible(spec: OpSpec, case: HostCase, device: str, gpu: bool, blocks: int, number: int, log) -> list[dict]:
    rows = getattr(spec.limits(device), "min_rows", case.case.rows) if spec.limits is not None else case.case.rows
    sized = dataclasses.replace(case.case, rows=rows)
    providers = ("baseline", "triton", "dispatched")
    if not gpu or spec.fast is None:
        why = NOT_MEASURED if not gpu else f"not measured: the fast route is {NOT_DECLARED}"
        return [_row(sized, case.id, case.rationale, p, gpu, status="not measured", note=why, expected="n/a")
                for p in providers]
    args = spec.args(sized.build(seed=7, device=device))
    base_name, base = spec.baseline
    fns = {"baseline": lambda: base(*args), "triton": lambda: spec.fast(*args),
           "dispatched": lambda: spec.function(*args)}
    warned, res = _time(fns, blocks, number, device)
    try:
        import triton.testing

        kernel_us = float(triton.testing.do_bench(fns["triton"], warmup=10, rep=50)) * 1e3
        knote = f"; the kernel itself runs {kernel_us:.2f} us on the device (do_bench)"
    except Exception as exc:  # noqa: BLE001 - a note, not a result
        knote = f"; device time not measured ({type(exc).__name__})"
    out = []
    for p in providers:
        timing = timing_fields(res[p])
        timing["note"] += f"; baseline: {base_name}{knote}"
        out.append(_row(sized, case.id, case.rationale, p, gpu, expected="n/a", route=spec.route(*args),
                        reasons=_reasons(spec, args), status="ok", warnings=warned[p], **timing))
    if log:
        log(f"  {case.id}: fast route {res['triton']['best_us']:.2f} us, "
            f"dispatched {res['dispatched']['best_us']:.2f} us")
    return out


def measure_host_op(spec: OpSpec, *, quick: bool = False, rounds: int | None = None, log=None,
                    vllm: bool = True) -> list[dict]:
    """Measure ``spec``'s host-overhead family on this machine.

    Args:
        spec: the operator.
        quick: fewer calls per block (:func:`~fastpath_lib.bench.hostmethod.host_blocks`).
        rounds: override the number of blocks.
        log: ``callable(str)`` for progress lines.
        vllm: also time vLLM's dispatch where the op is a vLLM IR op (:mod:`fastpath_lib.bench.vllmhost`, in a child
            process).

    Returns:
        rows of the results schema (``family="host-overhead"``): per fallback case and form a ``baseline`` and a
        ``dispatched`` row (case id the host case's, ``_<form>`` appended for each ``host_forms`` entry) with the
        route the public function takes and the predicate's reasons; per eligible case ``baseline``, ``triton`` (the
        fast route) and ``dispatched`` rows, measured on CUDA only (elsewhere ``status="not measured"``); then vLLM's
        rows (:func:`fastpath_lib.bench.vllmhost.measure_vllm_host`).
    """
    blocks, number = host_blocks(quick, rounds)
    gpu = gpu_measurement()
    device = "cuda" if runtime.cuda_available() else "cpu"
    out = []
    for case in host_cases(spec, device):
        out += (_eligible if case.eligible else _fallback)(spec, case, device, gpu, blocks, number, log)
    if vllm:
        from fastpath_lib.bench import vllmhost

        if vllmhost.vllm_op(spec):
            out += vllmhost.measure_vllm_host([spec.name], quick=quick, rounds=rounds, log=log)
    return out
