"""The host cost of the kit's vLLM providers: ``supports_args`` and vLLM's ``dispatch``, per call, in a child process.

vLLM calls ``ir_op.dispatch(*args)`` on its hot path (every eager call of an IR op, and again on FakeTensors when its
lowering pass lowers a compiled graph); with the kit's provider first in the priority list, every such call runs the
provider's ``supports_args`` (:mod:`fastpath_lib.vllm_plugin`) before it picks an implementation. For each registered
op whose spec names the vLLM IR op it provides (:func:`vllm_op`: its ``pr_text["vllm_op"]``) and each input of
:data:`INPUTS` (a decode token the check rejects, the smallest batch it accepts), this module times, with the kit's
one host-timing method (:func:`~fastpath_lib.bench.hostmethod.fastest_blocks`: interleaved fixed blocks, the fastest
block of each side):

* ``supports_args``: the provider's check alone;
* ``vllm_dispatch``: ``op.dispatch(*args)`` with the priority ``[PROVIDER, "native"]``;
* ``vllm_native``: ``op.dispatch(*args)`` with the priority ``["native"]`` (vLLM's native path: no check runs).

Only the choice is timed, never the chosen implementation (a kernel under the interpreter would time the
interpreter). The difference between the two dispatches is what the kit's provider adds to every call vLLM makes.
Importing vLLM sets environment variables and patches Inductor (``vllm/env_override.py``), so the timing runs in a
child process (:func:`measure_vllm_host` starts one running :func:`child_main`); where vLLM cannot be
imported (or the child fails) the rows are ``status="skipped"`` with the reason, never an error; so are an op's rows
where vLLM's registry (``vllm.ir.op.IrOp.registry``) has no IR op of that name (the reason then says what vLLM has
for it instead, read from its source: :func:`fastpath_lib.bench.vllm_source.layer_sentence`), or the kit's provider
module (:func:`fastpath_lib.vllm_plugin.providers`) provides none for it.

These are host times: no kernel runs, and on a CPU they are **CPU host time, not a GPU measurement**. Rows carry
``family="host-overhead"`` beside the op's host-overhead family; :func:`vllm_table` reads them. Times in microseconds.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd

from fastpath_lib import runtime
from fastpath_lib.bench.hostmethod import fastest_blocks, host_blocks, silenced, timing_fields
from fastpath_lib.bench.schema import HOST_FAMILY, NOT_GPU, empty_row, host_rows, shape_text
from fastpath_lib.bench.timing import gpu_measurement

__all__ = ["vllm_op", "vllm_ops", "INPUTS", "PROVIDERS", "LABEL", "TIMEOUT_S", "case_ids", "measure_vllm_host",
           "vllm_table", "child_main"]



def vllm_op(spec) -> str | None:
    """The vLLM IR op (``vllm.ir.ops.NAME``) ``spec``'s op provides: its ``pr_text["vllm_op"]`` (a name, or a callable
    returning one); ``None`` where the spec names none.

    >>> from fastpath_lib import opspec
    >>> vllm_op(opspec.OpSpec("t", abs, abs, tuple, str, baselines={"b": abs}, pr_text={"vllm_op": "t_ir"}))
    't_ir'
    """
    name = spec.pr_text.get("vllm_op")
    name = name() if callable(name) else name
    if isinstance(name, (list, tuple)):  # pr_text's lines form
        name = name[0] if name else None
    return name or None


def vllm_ops(names=None) -> dict[str, str]:
    """Kit op name -> the vLLM IR op it provides, for ``names`` (default: every registered op,
    :func:`fastpath_lib.opspec.names`); an op whose spec names none is left out."""
    from fastpath_lib import opspec

    found = {n: vllm_op(opspec.get(n)) for n in (opspec.names() if names is None else names)}
    return {n: v for n, v in found.items() if v}
#: The inputs: kind -> (tokens, hidden size, dtype, rationale); ``tokens=None`` is the smallest batch the kit's check
#: accepts on the device (its row threshold). Built by vLLM's own input generator (``op.generate_inputs``).
INPUTS = {
    "reject": (1, 4096, "bfloat16", "M=1 decode token: below the row threshold, supports_args rejects it and vLLM "
                                    "takes its native implementation"),
    "accept": (None, 4096, "bfloat16", "the smallest batch at the row threshold: supports_args accepts it and vLLM "
                                       "picks the kit's provider"),
}
#: The timed sides, in row order.
PROVIDERS = ("supports_args", "vllm_dispatch", "vllm_native")
#: What every row and table says these times are.
LABEL = f"CPU host time of vLLM's dispatch (no kernel runs; {NOT_GPU})"
#: Seconds the child may take (importing vLLM, then the timing).
TIMEOUT_S = 600.0


#: The child's program (``-c``: ``-m`` would run this module a second time, beside the copy ``fastpath_lib.bench``
#: imports).
_CHILD = "import sys; from fastpath_lib.bench.vllmhost import child_main; sys.exit(child_main(sys.argv[1:]))"


def _case_id(op: str, kind: str) -> str:
    return f"vllm_{op}_{kind}"


def case_ids(op: str) -> set[str]:
    """The case ids of the rows :func:`measure_vllm_host` gives the vLLM IR op ``op``, one per input (:data:`INPUTS`).

    >>> sorted(case_ids("rms_norm"))
    ['vllm_rms_norm_accept', 'vllm_rms_norm_reject']
    """
    return {_case_id(op, kind) for kind in INPUTS}


def _row(op: str, kind: str, provider: str, rows: int | None, **kw) -> dict:
    # the flag every row of a run carries alike (a GPU run's folder counts only when all agree); LABEL says what it is
    tokens, hidden, dtype, why = INPUTS[kind]
    rows = rows if rows is not None else tokens
    return empty_row(case_id=_case_id(op, kind), family=HOST_FAMILY, provider=provider, rows=rows, cols=hidden,
                     dtype=dtype, layout="contiguous", pad=0, offset=0,
                     declared_shape=f"{'N' if tokens is None else tokens}x{hidden}",
                     rationale=f"vllm.ir.ops.{op}: {why}",
                     expected="n/a", gpu_measurement=gpu_measurement(), **{"pass": "forward"}, **kw)


def _skipped(ops, why: str) -> list[dict]:
    return [_row(op, kind, p, None, status="skipped", note=f"skipped: {why}") for op in ops for kind in INPUTS
            for p in PROVIDERS]


def measure_vllm_host(ops=None, *, quick: bool = False, rounds: int | None = None, log=None,
                      timeout: float = TIMEOUT_S) -> list[dict]:
    """Time ``supports_args`` and vLLM's ``dispatch`` for ``ops`` in a child process.

    Args:
        ops: registered op names (default: every registered op); those whose spec names a vLLM IR op
            (:func:`vllm_ops`) are timed, under that IR op's name.
        quick: fewer calls per block; rounds: override the number of blocks
            (:func:`~fastpath_lib.bench.hostmethod.host_blocks`).
        log: ``callable(str)`` for progress lines.
        timeout: seconds for the child.

    Returns:
        per op, input and side (:data:`PROVIDERS`) one row (``case_id="vllm_<IR op>_<reject|accept>"``); ``route`` is
        the implementation the dispatch picked (``supports_args``' row: ``accepted`` or ``rejected``). Where vLLM
        cannot be imported, or the child fails or overruns, every row has ``status="skipped"`` and says why in
        ``note``; so has every row of an op vLLM's registry or the kit's provider module lacks.
    """
    pairs = vllm_ops(ops)
    ops = list(pairs.values())
    if not ops:
        return []
    blocks, number = host_blocks(quick, rounds)
    request = json.dumps({"ops": pairs, "blocks": blocks, "number": number})
    env = runtime.child_env(TRITON_INTERPRET="1" if runtime.interpreter_enabled() else "0")
    try:
        res = subprocess.run([sys.executable, "-c", _CHILD, request], env=env, cwd=runtime.ROOT, capture_output=True,
                             text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return _skipped(ops, f"the vLLM timing process overran {timeout:.0f} s")
    lines = [ln for ln in res.stdout.strip().splitlines() if ln.startswith("{")]
    try:
        answer = json.loads(lines[-1])
    except (IndexError, ValueError):
        last = (res.stderr.strip().splitlines() or [f"exit status {res.returncode}"])[-1]
        return _skipped(ops, f"the vLLM timing process failed: {last[:300]}")
    if answer.get("skipped"):
        return _skipped(ops, answer["skipped"])
    out = [r for op, why in answer.get("skipped_ops", {}).items() for r in _skipped([op], why)]
    for r in answer["rows"]:
        rows = _row(r["op"], r["kind"], r["provider"], r["rows"], status="ok", route=r["route"],
                    **timing_fields(r["timing"]))
        rows["note"] += f"; {answer['vllm']}; {LABEL}"
        out.append(rows)
    if log:
        for t in vllm_table(pd.DataFrame(out)).itertuples():
            log(f"  {t.Index}: supports_args {t.supports_args_us:.2f} us ({t.verdict}), dispatch {t.dispatch_us:.2f} "
                f"us vs native {t.native_us:.2f} us")
    return out


def vllm_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per vLLM case of ``df``'s host-overhead rows: the check and the two dispatches side by side.

    Returns:
        columns ``op, input, shape, dtype, verdict`` (what ``supports_args`` said), ``picked`` (the implementation the
        dispatch chose), ``supports_args_us``, ``dispatch_us`` (the kit's provider first), ``native_us`` (native only),
        ``added_us`` (``dispatch_us - native_us``) and ``status`` (``ok``, or the reason the case was skipped); empty
        when ``df`` has no vLLM rows.
    """
    cols = ["op", "input", "shape", "dtype", "verdict", "picked", "supports_args_us", "dispatch_us", "native_us",
            "added_us", "status"]
    h = host_rows(df)
    h = h[h["provider"].isin(PROVIDERS)] if len(h) else h
    out = []
    for cid, g in h.groupby("case_id", sort=False):
        by = {r.provider: r for r in g.itertuples()}
        first = next(iter(by.values()))
        ok = all(str(getattr(by.get(p), "status", "")) == "ok" for p in PROVIDERS)

        def t(p, by=by, ok=ok):  # this case's rows
            return float(by[p].min_us) if ok else float("nan")

        op, kind = str(cid)[len("vllm_"):].rsplit("_", 1)
        shape = shape_text(first.rows, first.cols, getattr(first, "declared_shape", None))
        out.append({"case": cid, "op": op, "input": kind, "shape": shape, "dtype": first.dtype,
                    "verdict": str(by["supports_args"].route) if ok else "—",
                    "picked": str(by["vllm_dispatch"].route) if ok else "—", "supports_args_us": t("supports_args"),
                    "dispatch_us": t("vllm_dispatch"), "native_us": t("vllm_native"),
                    "added_us": t("vllm_dispatch") - t("vllm_native"), "status": "ok" if ok else str(first.note)})
    return pd.DataFrame(out, columns=["case", *cols]).set_index("case")


# --- the child process ---------------------------------------------------------------------------------------------

def _measure(request: dict) -> dict:
    """In the child: import vLLM, register the kit's providers, time each side; a JSON-able answer."""
    import warnings

    from pathlib import Path

    import torch

    from fastpath_lib import vllm_plugin as vp
    from fastpath_lib.bench.vllm_source import layer_sentence

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            vp.load_vllm_ir()
    except ModuleNotFoundError as e:
        return {"skipped": f"vllm.ir cannot be imported ({e})"}
    import vllm

    device = "cuda" if runtime.cuda_available() else "cpu"
    from fastpath_lib import opspec

    from vllm.ir.op import IrOp

    provided = vp.providers()
    rows, skipped = [], {}
    for kit_op, name in request["ops"].items():
        op = IrOp.registry.get(name)  # what this vLLM has: its own registry of IR ops
        if op is None:  # what it has instead, read from its source: a CustomOp layer, or nothing
            skipped[name] = (f"vLLM {vllm.__version__} has no IR op {name} (vllm.ir.op.IrOp.registry); "
                             + layer_sentence(name, Path(vllm.__file__).parent))
            continue
        if name not in provided:
            skipped[name] = f"the kit's vLLM provider module (fastpath_lib.vllm_plugin) provides no {name}"
            continue
        check = provided[name][1]  # the provider's supports_args
        for kind, (tokens, hidden, dtype, _) in INPUTS.items():
            tokens = tokens if tokens is not None else opspec.get(kit_op).limits(device).min_rows
            args = op.generate_inputs(num_tokens=tokens, hidden_size=hidden, dtype=getattr(torch, dtype),
                                      device=device)
            fns = {"supports_args": lambda a=args, c=check: c(*a), "vllm_dispatch": lambda a=args, o=op: o.dispatch(*a),
                   "vllm_native": lambda a=args, o=op: o.dispatch(*a)}
            around = {"vllm_dispatch": lambda o=op: o.set_priority([vp.PROVIDER, "native"]),
                      "vllm_native": lambda o=op: o.set_priority(["native"])}
            with around["vllm_dispatch"]():
                picked = op.dispatch(*args).provider
            route = {"supports_args": "accepted" if check(*args) else "rejected", "vllm_dispatch": picked,
                     "vllm_native": "native"}
            with silenced():
                res = fastest_blocks(fns, blocks=request["blocks"], number=request["number"], around=around)
            rows += [{"op": name, "kind": kind, "provider": p, "rows": tokens, "route": route[p], "timing": res[p]}
                     for p in PROVIDERS]
    return {"rows": rows, "skipped_ops": skipped, "vllm": f"vLLM {vllm.__version__}, provider {vp.PROVIDER}"}


def child_main(argv: list[str]) -> int:
    """The child's entry point: ``argv == [REQUEST_JSON]``; prints the answer as one JSON line."""
    print(json.dumps(_measure(json.loads(argv[0]))))
    return 0
