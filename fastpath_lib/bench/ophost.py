"""The host-overhead family of any registered operator: what its dispatch costs per call where it takes the fallback.

RMSNorm's family (:mod:`fastpath_lib.bench.host`) holds ``fastpath_lib.rms_norm`` to :data:`~fastpath_lib.bench.host.
TARGET_RATIO` times ``F.rms_norm`` on decode-sized fallback calls. :func:`measure_host_op` does the same for an
:class:`~fastpath_lib.opspec.OpSpec`: on each predeclared case expected to fall back at a decode size (at most
:data:`MAX_HOST_ROWS` rows, its declared shape), the public function against the spec's first baseline, and each of the
spec's ``host_forms`` (e.g. an in-place form against the in-place composite), interleaved block by block with
:func:`~fastpath_lib.bench.host.fastest_blocks`. An in-place pair mutates its inputs on every call: each side gets its
own copy, so both drift alike (a fallback's host time does not depend on the values).

Host time is a real measurement on a CPU too; rows carry ``family="host-overhead"``, so
:func:`~fastpath_lib.bench.host.host_table` reads them (its ``ratio_to`` column names RMSNorm's baseline; here the
baseline is the spec's, named in each row's ``note``). Times in microseconds.
"""

from __future__ import annotations

import torch

from fastpath_lib import runtime
from fastpath_lib.bench.host import fastest_blocks, host_blocks, timing_fields, warnings_of
from fastpath_lib.bench.schema import FALLBACK, HOST_FAMILY, empty_row
from fastpath_lib.bench.timing import gpu_measurement
from fastpath_lib.cases import CaseSpec
from fastpath_lib.opspec import OpCase, OpSpec

__all__ = ["MAX_HOST_ROWS", "host_cases", "measure_host_op"]

#: The largest fallback case the family times: decode batches, where the device work is microseconds.
MAX_HOST_ROWS = 16


def host_cases(spec: OpSpec) -> list[OpCase]:
    """The spec's predeclared cases expected to fall back with at most :data:`MAX_HOST_ROWS` rows."""
    return [c for c in spec.matrix() if c.expected == FALLBACK and c.rows <= MAX_HOST_ROWS]


def _copy(args: tuple) -> tuple:
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


def measure_host_op(spec: OpSpec, *, quick: bool = False, rounds: int | None = None, log=None) -> list[dict]:
    """Measure ``spec``'s host-overhead family on this machine.

    Returns:
        rows of the results schema, per case and form a ``baseline`` and a ``dispatched`` row (case id
        ``host_<case>`` for the public function, ``host_<case>_<form>`` for each ``host_forms`` entry), with the route
        the public function took; a case whose call takes the fast route on this machine (the interpreter's lower
        row threshold) gets ``status="not measured"`` rows.
    """
    blocks, number = host_blocks(quick, rounds)
    gpu = gpu_measurement()
    device = "cuda" if runtime.cuda_available() else "cpu"
    make = spec.case_spec or CaseSpec
    base_name, base = spec.baseline
    out = []
    for case in host_cases(spec):
        dtype = getattr(torch, case.dtype)
        args = spec.args(make(rows=case.rows, cols=case.cols, dtype=dtype, device=device).build(seed=7))
        route = spec.route(*args)
        forms = {"": (base_name, base, spec.function), **{f"_{k}": (f"{k} composite", b, f)
                                                          for k, (b, f) in spec.host_forms.items()}}
        for suffix, (bname, bfn, fn) in forms.items():
            if route != "fallback":  # e.g. the interpreter's lower row threshold: not a fallback call here
                out += [empty_row(case_id=f"host_{case.id}{suffix}", family=HOST_FAMILY, provider=p, rows=case.rows,
                                  cols=case.cols, dtype=case.dtype, layout="contiguous", pad=0, offset=0,
                                  declared_shape=f"{case.rows}x{case.cols}", rationale=case.rationale,
                                  gpu_measurement=gpu, expected=FALLBACK, route=route, status="not measured",
                                  note=f"not measured: the call takes the {route} route here, the family times "
                                       "fallback calls", **{"pass": "forward"}) for p in ("baseline", "dispatched")]
                continue
            own = {"baseline": _copy(args), "dispatched": _copy(args)}
            fns = {p: (lambda a=own[p], f=f: f(*a)) for p, f in (("baseline", bfn), ("dispatched", fn))}
            with torch.no_grad():
                warned = {p: warnings_of(f) for p, f in fns.items()}
                res = fastest_blocks(fns, blocks=blocks, number=number,
                                     sync=torch.cuda.synchronize if device == "cuda" else None)
            for p in ("baseline", "dispatched"):
                timing = timing_fields(res[p])
                timing["note"] += f"; baseline: {bname}"
                out.append(empty_row(
                    case_id=f"host_{case.id}{suffix}", family=HOST_FAMILY, provider=p, rows=case.rows, cols=case.cols,
                    dtype=case.dtype, layout="contiguous", pad=0, offset=0, declared_shape=f"{case.rows}x{case.cols}",
                    rationale=case.rationale, gpu_measurement=gpu, expected=FALLBACK, route=route, status="ok",
                    warnings=warned[p], **timing, **{"pass": "forward"}))
            if log:
                ratio = res["dispatched"]["best_us"] / res["baseline"]["best_us"]
                log(f"  host_{case.id}{suffix}: {bname} {res['baseline']['best_us']:.2f} us, dispatched "
                    f"{res['dispatched']['best_us']:.2f} us, ratio {ratio:.2f}")
    return out
