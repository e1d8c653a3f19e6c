"""The CUDA-graph capture test, and the command that records its verdict per architecture.

The evidence run's ``capture`` step (:func:`step`) captures ``fastpath_lib.rms_norm`` in a ``torch.cuda.CUDAGraph`` at
the boundary shapes (rows one below the threshold and at it, so both routes; forward, and forward plus backward where
the reference has gradients), replays the graph after copying new data into the static inputs, and compares every
replay with the float64 reference. While it runs, the predicate is told this architecture passed (otherwise every
captured call would take the fallback and the test would prove nothing), and the route each capture took is checked
against :func:`fastpath_lib.explain`'s route outside capture. It writes ``capture_test.json`` into the results folder.

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

from fastpath_lib.bench.results import record_arguments, record_source
from fastpath_lib.bench.schema import NOT_GPU
from fastpath_lib.cases import CaseSpec
from fastpath_lib.rmsnorm import capture as record_file
from fastpath_lib.rmsnorm.limits import MAX_COLS, limits_for
from fastpath_lib.rmsnorm.thresholds import arch_name, parse_arch

__all__ = ["RESULTS_NAME", "capture_cases", "assume_verified", "capture_case", "run_capture", "verdict",
           "capture_from_results", "record_capture", "capture_main", "step"]

#: The file the capture step writes into the results folder.
RESULTS_NAME = "capture_test.json"
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


@contextlib.contextmanager
def assume_verified(capability: tuple[int, int]):
    """Let captured calls take the fast path on ``capability`` inside the block (the test's own premise)."""
    before = record_file.VERIFIED
    record_file.VERIFIED = before | {tuple(capability)}
    try:
        yield
    finally:
        record_file.VERIFIED = before


def _new_values(spec: CaseSpec, shape, seed: int, device) -> torch.Tensor:
    gen = torch.Generator(device="cpu").manual_seed(seed)
    return (torch.randn(tuple(shape), generator=gen, dtype=torch.float64) * spec.scale).to(spec.dtype).to(device)


def capture_case(spec: CaseSpec, backward: bool, *, seed: int = 0, device: str = "cuda") -> dict:
    """Capture one case, replay it on new data, compare with the reference; one result row (``ok`` and why not)."""
    import fastpath_lib
    from fastpath_lib.testing import compare, reference_grads, reference_rms_norm

    x, ns, w = spec.build(seed=seed, device=device).args()
    row = {"case": spec.label(), "rows": spec.rows, "cols": spec.cols, "dtype": str(spec.dtype).replace("torch.", ""),
           "phase": "forward+backward" if backward else "forward",
           "expected_route": fastpath_lib.explain(x, ns, w).route}
    xs = x.detach().requires_grad_(backward)  # shares x's storage: new data is copied into it before each replay
    ws = None if w is None else w.detach().requires_grad_(backward)
    gs = torch.ones_like(xs)

    def run():
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


def verdict(rows: list[dict], declared: int) -> tuple[bool, str]:
    """``(passed, why)``: every declared case ran and replayed to the reference, on both routes, both phases."""
    bad = [f"{r['case']} ({r['phase']}): {'; '.join(r.get('problems') or ['failed'])}" for r in rows if not r["ok"]]
    if bad:
        return False, f"{len(bad)} of {len(rows)} captures failed: " + " | ".join(bad)[:2000]
    if len(rows) < declared:
        return False, f"incomplete: {len(rows)} of {declared} cases ran"
    seen = {(r["expected_route"], r["phase"]) for r in rows}
    need = {(route, phase) for route in ("triton", "fallback") for phase in ("forward", "forward+backward")}
    if not need <= seen:
        return False, f"not every route and phase was captured: missing {sorted(need - seen)}"
    return True, f"{len(rows)} captures replayed to the reference (both routes, forward and backward)"


def run_capture(out: str | Path | None = None, *, deadline: float | None = None, log=print) -> dict:
    """The capture test on this CUDA device; writes :data:`RESULTS_NAME` into ``out`` when given."""
    from fastpath_lib.bench.metadata import environment

    dev = torch.device("cuda", torch.cuda.current_device())
    cap = tuple(torch.cuda.get_device_capability(dev))
    cases = capture_cases(limits_for(dev).min_rows)
    rows = []
    with assume_verified(cap):
        for i, (spec, backward) in enumerate(cases):
            if deadline is not None and time.monotonic() > deadline:
                log(f"capture: deadline reached after {i} of {len(cases)} cases")
                break
            try:
                rows.append(capture_case(spec, backward, seed=i))
            except Exception as exc:  # noqa: BLE001 - a capture that raises is a failed case, recorded
                rows.append({"case": spec.label(), "phase": "forward+backward" if backward else "forward",
                             "expected_route": "?", "ok": False, "problems": [f"{type(exc).__name__}: {exc}"[:500]]})
            log(f"capture {rows[-1]['case']} {rows[-1]['phase']}: {'ok' if rows[-1]['ok'] else rows[-1]['problems']}")
    passed, why = verdict(rows, len(cases))
    env = environment()
    res = {"compute_capability": arch_name(cap), "device_name": torch.cuda.get_device_name(dev), "passed": passed,
           "why": why, "declared_cases": len(cases), "cases": rows,
           **{k: env.get(k) for k in ("gpu_measurement", "git_commit", "timestamp", "torch", "triton")}}
    if out is not None:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / RESULTS_NAME).write_text(json.dumps(res, indent=2, default=str) + "\n")
    return res


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
    passed, why = verdict(rows, int(data.get("declared_cases") or 0))
    if passed != data.get("passed"):
        raise ValueError(f"{f}: says passed={data.get('passed')} but its cases give {passed} ({why})")
    return {"arch": arch, "passed": passed, "why": why, "device_name": data.get("device_name"), "cases": len(rows),
            "git_commit": data.get("git_commit"), "measured": data.get("timestamp")}


def record_capture(results_dir: str | Path, *, path: str | Path | None = None, root: str | Path | None = None,
                   write: bool = True) -> dict:
    """Record a results folder's capture verdict in ``capture.json`` (``source`` relative to ``root``, default the kit's
    checkout); returns :func:`capture_from_results`'s dict with ``source`` and ``written`` (the file, or ``None``)."""
    info = capture_from_results(results_dir)
    info["source"] = record_source(results_dir, root)
    info["written"] = None
    if write:
        target = Path(path) if path is not None else record_file.CAPTURE_FILE
        facts = {k: info[k] for k in ("why", "device_name", "cases", "git_commit", "measured")}
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
    print(f"wrote {info['written']}" if info["written"] else "--check: nothing written")
    return 0 if info["passed"] else 1


def step(ctx) -> dict:
    """The evidence run's ``capture`` step: :func:`run_capture` into the results folder, within the step's deadline."""
    res = run_capture(ctx.out, deadline=ctx.deadline, log=ctx.log)
    return {"status": "ran" if res["passed"] else "failed", "why": res["why"],
            "details": {"compute_capability": res["compute_capability"], "cases": len(res["cases"])}}
