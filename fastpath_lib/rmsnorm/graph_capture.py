"""RMSNorm's and the fused op's CUDA-graph capture test, and the command that records its verdict per architecture.

Each op's spec hands its part to the evidence run's ``capture`` step (``OpSpec.capture``: :func:`capture_op`), which
captures the op by each of its paths (:data:`~fastpath_lib.
rmsnorm.capture.PATHS`: the public function, ``eager``, and the registered ``torch.ops.fastpath`` op that compile
graphs and vLLM call, ``custom_op``) in a ``torch.cuda.CUDAGraph`` at the boundary shapes (rows one below the
threshold and at it, so both routes): ``fastpath_lib.rms_norm`` forward, and forward plus backward where the
reference has gradients; ``fused_add_rms_norm`` out of place and in place. It replays the graph after copying new data
into the static inputs, and compares every replay with the reference. While it runs, the predicate is told this
architecture passed for that op and path (otherwise every captured call would take the fallback and the test would
prove nothing), and the route each capture took is checked against the route outside capture. The step writes
``capture_test.json`` into the results folder, with a verdict per op and path (:func:`run_capture` does the same for
both ops in one call).

``python -m fastpath_lib capture RESULTS_DIR [--check] [--file PATH]`` (:func:`capture_main`) reads that file and
writes the verdict into ``fastpath_lib/rmsnorm/capture.json`` (:mod:`fastpath_lib.rmsnorm.capture`), with the folder
it came from; the predicate's ``cuda_graph_capture`` condition reads it at import.

What a replay counts: Python does not run during ``g.replay()``, so ``record_routes`` counts a captured call once, at
capture, and the route taken then is the one every replay launches.
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path

import torch

from fastpath_lib.bench.capture import RESULTS_NAME, capture_file
from fastpath_lib.bench.results import record_arguments, record_source
from fastpath_lib.bench.schema import NOT_GPU
from fastpath_lib.cases import CaseSpec
from fastpath_lib.rmsnorm import capture as record_file
from fastpath_lib.rmsnorm.limits import MAX_COLS, limits_for
from fastpath_lib.rmsnorm.thresholds import parse_arch

__all__ = ["RESULTS_NAME", "capture_cases", "fused_capture_cases", "assume_verified", "capture_case",
           "capture_fused_case", "capture_op", "run_capture", "verdict", "verdicts", "NEEDED_PHASES",
           "capture_from_results", "record_capture", "capture_main"]

#: The phases a passed capture test covers, per op (each on both routes).
NEEDED_PHASES = {"rms_norm": ("forward", "forward+backward"), "fused_add_rms_norm": ("forward", "in-place")}

_REPLAYS = 2


def capture_cases(min_rows: int) -> list[tuple[CaseSpec, bool]]:
    """``(case, with_backward)`` at the boundary shapes: one row below the threshold (fallback) and at it (Triton),
    fp32 and bf16 at 4096 columns, the widest row, a width that is not a power of two, no weight, and a misaligned
    width (fallback at any row count)."""
    below, at = max(1, min_rows - 1), min_rows
    out = []
    for dtype in (torch.float32, torch.bfloat16):
        for rows in (below, at):
            out += [(CaseSpec(rows=rows, cols=4096, dtype=dtype), False), (CaseSpec(rows=rows, cols=4096, dtype=dtype),
                                                                            True)]
    out += [(CaseSpec(rows=at, cols=MAX_COLS, dtype=torch.float16), True), (CaseSpec(rows=at, cols=100), True),
            (CaseSpec(rows=at, cols=256, weight=None), True), (CaseSpec(rows=at, cols=17), True)]
    return out


def fused_capture_cases(min_rows: int) -> list[tuple[object, bool]]:
    """``(case, inplace)`` of the fused op at the boundary: one row below the threshold and at it, fp32 and bf16 at
    4096 columns, out of place and in place, and a misaligned width (fallback at any row count)."""
    from fastpath_lib.fused.cases import FusedCaseSpec

    below, at = max(1, min_rows - 1), min_rows
    out = [(FusedCaseSpec(rows=r, cols=4096, dtype=dt), inplace) for dt in (torch.float32, torch.bfloat16)
           for r in (below, at) for inplace in (False, True)]
    return out + [(FusedCaseSpec(rows=at, cols=17), False), (FusedCaseSpec(rows=at, cols=17), True)]


@contextlib.contextmanager
def assume_verified(capability: tuple[int, int], ops=("rms_norm", "fused_add_rms_norm")):
    """Let captured calls of ``ops`` take the fast path on ``capability``, by every path, inside the block (the test's
    own premise)."""
    before = record_file.VERIFIED
    record_file.VERIFIED = before | {(tuple(capability), op, p) for op in ops for p in record_file.PATHS}
    try:
        yield
    finally:
        record_file.VERIFIED = before


def _new_values(spec: CaseSpec, shape, seed: int, device) -> torch.Tensor:
    gen = torch.Generator(device="cpu").manual_seed(seed)
    return (torch.randn(tuple(shape), generator=gen, dtype=torch.float64) * spec.scale).to(spec.dtype).to(device)


def capture_case(spec: CaseSpec, backward: bool, *, seed: int = 0, device: str = "cuda", path: str = "eager") -> dict:
    """Capture one case of ``rms_norm`` by ``path`` (``eager``: ``fastpath_lib.rms_norm``; ``custom_op``:
    ``torch.ops.fastpath.rms_norm``), replay it on new data, compare with the reference; one result row (``ok`` and
    why not)."""
    import fastpath_lib
    from fastpath_lib.testing import compare, reference_grads, reference_rms_norm

    x, ns, w = spec.build(seed=seed, device=device).args()
    row = {"op": "rms_norm", "path": path, "case": spec.label(), "rows": spec.rows, "cols": spec.cols,
           "dtype": str(spec.dtype).replace("torch.", ""), "phase": "forward+backward" if backward else "forward",
           "expected_route": fastpath_lib.explain(x, ns, w).route}
    xs = x.detach().requires_grad_(backward)  # shares x's storage: new data is copied into it before each replay
    ws = None if w is None else w.detach().requires_grad_(backward)
    gs = torch.ones_like(xs)

    def run():
        if path == "custom_op":
            y = torch.ops.fastpath.rms_norm(xs, list(ns), ws, None)
        else:
            y = fastpath_lib.rms_norm(xs, ns, ws)
        if backward:
            y.backward(gs)
        return y

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up (compiles the kernels) off the capturing stream, as torch's recipe does
        for _ in range(2):
            run()
    torch.cuda.current_stream().wait_stream(side)
    for t in (xs, ws):
        if t is not None:
            t.grad = None  # the captured backward allocates the gradients in the graph's pool
    graph = torch.cuda.CUDAGraph()
    with fastpath_lib.record_routes() as fwd, fastpath_lib.record_routes("backward") as bwd, torch.cuda.graph(graph):
        ys = run()
    row["captured_route"] = "+".join(sorted(fwd)) or "none"
    row["captured_backward_route"] = "+".join(sorted(bwd)) or ("none" if backward else "n/a")
    problems = []
    for r in range(_REPLAYS):
        new_x = _new_values(spec, xs.shape, seed + 1 + r, xs.device)
        new_g = _new_values(spec, xs.shape, seed + 101 + r, xs.device)
        with torch.no_grad():
            xs.copy_(new_x)
            gs.copy_(new_g)
        graph.replay()
        torch.cuda.synchronize()
        got = [("output", ys, reference_rms_norm(new_x, ns, ws), spec.dtype, False)]
        if backward:
            dx, dw = reference_grads(new_x, ns, ws, None, new_g)
            got.append(("dx", xs.grad, dx, spec.dtype, True))
            if ws is not None:
                got.append(("dw", ws.grad, dw, ws.dtype, True))
        problems += [f"replay {r + 1} {what}: {p}" for what, t, ref, dt, grad in got
                     if (p := compare(t, ref, dt, grad=grad) if t is not None else "missing") is not None]
    if row["captured_route"] != row["expected_route"]:
        problems.append(f"captured the {row['captured_route']} route, explain() says {row['expected_route']}")
    if backward and row["captured_backward_route"] != row["expected_route"]:
        problems.append(f"captured the {row['captured_backward_route']} backward, explain() says "
                        f"{row['expected_route']}")
    row.update(ok=not problems, problems=problems)
    return row


def capture_fused_case(spec, inplace: bool, *, seed: int = 0, device: str = "cuda", path: str = "eager") -> dict:
    """Capture one ``fused_add_rms_norm`` case (out of place, or in place) by ``path`` (``eager``: the public
    function; ``custom_op``: ``torch.ops.fastpath.fused_add_rms_norm`` / ``..._``), replay it on new ``x`` and
    ``residual``, compare both outputs with the reference; one result row."""
    import fastpath_lib
    from fastpath_lib import opspec
    from fastpath_lib.bench.opbench import compare_outputs
    from fastpath_lib.fused import reference as ref

    op = opspec.get("fused_add_rms_norm")
    x, r, w = spec.build(seed=seed, device=device).args()
    xs, rs = x.detach(), r.detach()
    row = {"op": "fused_add_rms_norm", "path": path, "case": spec.label(), "rows": spec.rows, "cols": spec.cols,
           "dtype": str(spec.dtype).replace("torch.", ""), "phase": "in-place" if inplace else "forward",
           "expected_route": op.route(xs, rs, w)}

    def run():
        if path == "custom_op":
            if inplace:
                torch.ops.fastpath.fused_add_rms_norm_(xs, rs, w, None)
                return xs, rs
            return torch.ops.fastpath.fused_add_rms_norm(xs, rs, w, None)
        if inplace:
            fastpath_lib.fused_add_rms_norm_(xs, rs, w)
            return xs, rs
        return fastpath_lib.fused_add_rms_norm(xs, rs, w)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.no_grad(), torch.cuda.stream(side):
        for _ in range(2):
            run()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.no_grad(), fastpath_lib.record_routes() as fwd, torch.cuda.graph(graph):
        outs = run()
    row["captured_route"] = "+".join(sorted(fwd)) or "none"
    problems = []
    for k in range(_REPLAYS):
        new_x = _new_values(spec, xs.shape, seed + 1 + k, xs.device)
        new_r = _new_values(spec, rs.shape, seed + 101 + k, rs.device).to(rs.dtype)
        with torch.no_grad():
            xs.copy_(new_x)
            rs.copy_(new_r)
        graph.replay()
        torch.cuda.synchronize()
        bad = compare_outputs(op, tuple(outs), ref.native(new_x, new_r, w, None), spec.dtype)
        if bad:
            problems.append(f"replay {k + 1}: {bad}")
    if row["captured_route"] != row["expected_route"]:
        problems.append(f"captured the {row['captured_route']} route, outside capture it takes {row['expected_route']}")
    row.update(ok=not problems, problems=problems)
    return row


def verdict(rows: list[dict], declared: int, phases=NEEDED_PHASES["rms_norm"]) -> tuple[bool, str]:
    """``(passed, why)`` of one op and path: every declared case ran and replayed to the reference, on both routes,
    in every one of ``phases``."""
    bad = [f"{r['case']} ({r['phase']}): {'; '.join(r.get('problems') or ['failed'])}" for r in rows if not r["ok"]]
    if bad:
        return False, f"{len(bad)} of {len(rows)} captures failed: " + " | ".join(bad)[:2000]
    if len(rows) < declared:
        return False, f"incomplete: {len(rows)} of {declared} cases ran"
    seen = {(r["expected_route"], r["phase"]) for r in rows}
    need = {(route, phase) for route in ("triton", "fallback") for phase in phases}
    if not need <= seen:
        return False, f"not every route and phase was captured: missing {sorted(need - seen)}"
    return True, f"{len(rows)} captures replayed to the reference (both routes; {', '.join(phases)})"


def verdicts(rows: list[dict], declared: dict) -> dict:
    """``{op: {path: {"passed", "why", "cases"}}}`` of a capture test's rows (:func:`verdict` per op and path;
    ``declared``: ``{op: {path: n}}``). A row without ``op``/``path`` (an older file) is eager ``rms_norm``."""
    out: dict = {}
    for op, paths in declared.items():
        for path, n in paths.items():
            mine = [r for r in rows if r.get("op", "rms_norm") == op and r.get("path", "eager") == path]
            ok, why = verdict(mine, int(n), NEEDED_PHASES.get(op, ("forward",)))
            out.setdefault(op, {})[path] = {"passed": ok, "why": why, "cases": len(mine)}
    return out


def capture_op(op: str, *, deadline: float | None = None, log=print) -> dict:
    """The capture test of ``op`` (``"rms_norm"`` or ``"fused_add_rms_norm"``) on this CUDA device by every path
    (what its spec's ``capture`` runs): ``{"cases": rows, "declared": {op: {path: n}}, "verdicts": {op: {path:
    {"passed", "why", "cases"}}}}``. The deadline is checked before each capture; cases past it are not run (the
    verdict of their op and path says "incomplete")."""
    dev = torch.device("cuda", torch.cuda.current_device())
    cap = tuple(torch.cuda.get_device_capability(dev))
    min_rows = limits_for(dev).min_rows
    cases = capture_cases if op == "rms_norm" else fused_capture_cases
    plan = [(path, spec, flag) for path in record_file.PATHS for spec, flag in cases(min_rows)]
    declared: dict = {op: {}}
    for path, _, _ in plan:
        declared[op][path] = declared[op].get(path, 0) + 1
    rows = []
    with assume_verified(cap, (op,)):
        for i, (path, spec, flag) in enumerate(plan):
            if deadline is not None and time.monotonic() > deadline:
                log(f"capture: deadline reached after {i} of {len(plan)} captures of {op}")
                break
            try:
                run = capture_case if op == "rms_norm" else capture_fused_case
                rows.append(run(spec, flag, seed=i, path=path))
            except Exception as exc:  # noqa: BLE001 - a capture that raises is a failed case, recorded
                phase = ("forward+backward" if flag else "forward") if op == "rms_norm" else (
                    "in-place" if flag else "forward")
                rows.append({"op": op, "path": path, "case": spec.label(), "phase": phase, "expected_route": "?",
                             "ok": False, "problems": [f"{type(exc).__name__}: {exc}"[:500]]})
            r = rows[-1]
            log(f"capture {op} {path} {r['case']} {r['phase']}: {'ok' if r['ok'] else r['problems']}")
    return {"cases": rows, "declared": declared, "verdicts": verdicts(rows, declared)}


def run_capture(out: str | Path | None = None, *, deadline: float | None = None, log=print,
                ops=("rms_norm", "fused_add_rms_norm")) -> dict:
    """The capture test on this CUDA device, every op in ``ops`` by every path (:func:`capture_op`); writes
    :data:`RESULTS_NAME` into ``out`` when given."""
    return capture_file([capture_op(op, deadline=deadline, log=log) for op in ops], out)


def capture_from_results(results_dir: str | Path) -> dict:
    """The verdict a results folder's capture test supports: ``arch``, ``passed``, ``why`` and facts to record.

    Raises:
        FileNotFoundError: no :data:`RESULTS_NAME` in the folder.
        ValueError: not a GPU measurement, no architecture, or the file's verdict disagrees with its cases.
    """
    f = Path(results_dir) / RESULTS_NAME
    if not f.exists():
        raise FileNotFoundError(f"{f} not found: run `python -m fastpath_lib evidence` (its capture step) on a GPU")
    data = json.loads(f.read_text())
    if data.get("gpu_measurement") is not True:
        raise ValueError(f"{f}: {NOT_GPU}; only a capture test run on CUDA can be recorded")
    arch = data.get("compute_capability")
    parse_arch(arch or "")
    rows = data.get("cases") or []
    declared = data.get("declared") or {"rms_norm": {"eager": int(data.get("declared_cases") or 0)}}  # older file
    per = verdicts(rows, declared)
    passed = all(v["passed"] for paths in per.values() for v in paths.values())
    why = "; ".join(f"{op} {p}: {v['why']}" for op, paths in per.items() for p, v in paths.items())
    if passed != data.get("passed"):
        raise ValueError(f"{f}: says passed={data.get('passed')} but its cases give {passed} ({why})")
    return {"arch": arch, "passed": passed, "why": why, "device_name": data.get("device_name"), "cases": len(rows),
            "git_commit": data.get("git_commit"), "measured": data.get("timestamp"),
            "ops": {op: {p: v["passed"] for p, v in paths.items()} for op, paths in per.items()}}


def record_capture(results_dir: str | Path, *, path: str | Path | None = None, root: str | Path | None = None,
                   write: bool = True) -> dict:
    """Record a results folder's capture verdict in ``capture.json`` (``source`` relative to ``root``, default the kit's
    checkout); returns :func:`capture_from_results`'s dict with ``source`` and ``written`` (the file, or ``None``)."""
    info = capture_from_results(results_dir)
    info["source"] = record_source(results_dir, root)
    info["written"] = None
    if write:
        target = Path(path) if path is not None else record_file.CAPTURE_FILE
        facts = {k: info[k] for k in ("why", "device_name", "cases", "git_commit", "measured", "ops")}
        record_file.record(info["arch"], info["passed"], info["source"], path=target, **facts)
        info["written"] = str(target)
    return info


def capture_main(argv: list[str] | None = None) -> int:
    """Record whether the CUDA-graph capture test passed on a GPU, with the folder it came from.

    ``python -m fastpath_lib capture RESULTS_DIR [--check] [--file PATH]``: reads the folder's ``capture_test.json``
    (the evidence run's capture step) and writes its architecture's verdict into ``fastpath_lib/rmsnorm/capture.json``
    (``--check`` prints it without writing). Exit 0 when recorded as passed, 1 when recorded as failed, 2 on bad input.
    """
    args = record_arguments("capture", capture_main.__doc__, "the verdict", "fastpath_lib/rmsnorm/capture.json", argv)
    try:
        info = record_capture(args.results_dir, path=args.file, write=not args.check)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}")
        return 2
    print(f"{info['arch']}: capture test {'passed' if info['passed'] else 'FAILED'} ({info['why']}; from "
          f"{info['source']})")
    for op, paths in info["ops"].items():  # each op and path is recorded on its own: a pass is per op and path
        print(f"  {op}: " + ", ".join(f"{p} {'passed' if ok else 'FAILED'}" for p, ok in paths.items()))
    print(f"wrote {info['written']}" if info["written"] else "--check: nothing written")
    return 0 if info["passed"] else 1

