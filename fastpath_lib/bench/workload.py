"""Workload replay (a tiny Llama-style decoder with the norms swapped) and the maintenance cost of the kernels.

Both take an operator (:class:`~fastpath_lib.opspec.OpSpec`; without one, the default op) and read it only through
its spec: the decoder does every norm as the op's ``decoder_step``, and the compile cost launches the op's ``fast``
route (a backward binary: its ``fast_backward``) once per ``specialization`` of its matrix.
A spec that leaves out the field a part needs gets a result saying so (:data:`~fastpath_lib.opspec.NOT_DECLARED`).
"""

from __future__ import annotations

import collections
import functools
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from fastpath_lib import opspec, runtime
from fastpath_lib.bench.schema import FALLBACK, GPU_LABEL, NOT_GPU
from fastpath_lib.bench.timing import gpu_measurement, settings_for, time_callable

__all__ = ["TinyDecoder", "replay", "compile_cost", "specializations", "op_specializations", "compiled_facts"]


class _Block(nn.Module):
    def __init__(self, dim: int, heads: int, hidden: int, norm_cls):
        super().__init__()
        self.heads = heads
        self.attn_norm, self.mlp_norm = norm_cls(dim), norm_cls(dim)
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.o = nn.Linear(dim, dim, bias=False)
        self.gate_up = nn.Linear(dim, 2 * hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def _attend(self, n):
        b, s, d = n.shape
        q, k, v = self.qkv(n).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        return self.o(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, d))

    def _mlp(self, n):
        g, u = self.gate_up(n).chunk(2, dim=-1)
        return self.down(F.silu(g) * u)

    def forward(self, h):
        h = h + self._attend(self.attn_norm(h))
        return h + self._mlp(self.mlp_norm(h))

    def forward_step(self, delta, residual, step):
        """vLLM's form of the block: the residual add and the norm in one ``step``; returns ``(delta, residual)``."""
        n, residual = step(delta, residual, self.attn_norm.weight, self.attn_norm.eps)
        n, residual = step(self._attend(n), residual, self.mlp_norm.weight, self.mlp_norm.eps)
        return self._mlp(n), residual


class TinyDecoder(nn.Module):
    """Embedding, ``layers`` pre-norm attention/SwiGLU blocks with RMSNorm, a final norm and the LM head.

    Args:
        vocab, dim, layers, heads, hidden: sizes.
        norm_cls: ``torch.nn.RMSNorm`` (baseline) or ``fastpath_lib.RMSNorm``.

    ``model(tokens, step=STEP)`` runs the blocks in vLLM's form instead: every norm is ``STEP(delta, residual, weight,
    eps) -> (normed, residual + delta)`` with the norm module's weight and eps (the residual starts at zero), which is
    where an op like ``fused_add_rms_norm`` sits (an :class:`~fastpath_lib.opspec.OpSpec`'s ``decoder_step``).
    """

    def __init__(self, vocab=256, dim=64, layers=2, heads=4, hidden=128, norm_cls=nn.RMSNorm):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(_Block(dim, heads, hidden, norm_cls) for _ in range(layers))
        self.norm = norm_cls(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens, step=None):
        h = self.embed(tokens)
        if step is None:
            for blk in self.blocks:
                h = blk(h)
            return self.head(self.norm(h))
        delta, residual = h, torch.zeros_like(h)
        for blk in self.blocks:
            delta, residual = blk.forward_step(delta, residual, step)
        return self.head(step(delta, residual, self.norm.weight, self.norm.eps)[0])


def replay(*, spec: opspec.OpSpec | None = None, quick: bool = False, settings: dict | None = None,
           batch: int | None = None, seq: int | None = None, dim: int | None = None, layers: int | None = None,
           dtype: torch.dtype | None = None) -> dict:
    """Run a small decoder forward with the baseline's norms and with the fast path's (same weights).

    Args:
        spec: the operator (default: the default op): every norm of the decoder is its ``decoder_step``
            (:class:`TinyDecoder`'s ``step``), once with its first baseline and once with its ``function``.
        quick: tiny sizes.
        settings: harness settings.
        batch, seq, dim, layers, dtype: override the defaults (CUDA: 8 x 512 tokens, dim 4096, 4 layers, bf16;
            CPU: 2 x 8 tokens, dim 64, 2 layers, fp32).

    Returns:
        a dict: the op, sizes, end-to-end median us for both models, the norms' median us (all norm calls of one
        forward, timed alone on the model's hidden shape, so the share is an estimate from isolated calls), the norms'
        share of the baseline forward, the end-to-end ratio, whether both models' logits agree, the routes the fast
        model's norms took, ``gpu_measurement`` and a ``label``. A spec without a ``decoder_step`` gets
        ``declared=False`` and a ``note`` saying so, and nothing runs.

    Note:
        Off CUDA the fast-path model runs its norms in Triton's interpreter, so it is not timed at all
        (``e2e_fastpath_us`` and ``norms_fastpath_us`` are ``None``); the baseline's times are real CPU times, "not a
        GPU measurement".
    """
    cuda = runtime.cuda_available()
    gpu = gpu_measurement()
    dev = "cuda" if cuda else "cpu"
    spec = spec or opspec.default()
    out = {"op": spec.name, "gpu_measurement": gpu,
           "label": GPU_LABEL if gpu else f"{NOT_GPU} (CPU / Triton interpreter)",
           "device_name": torch.cuda.get_device_name() if cuda else "cpu"}
    if spec.decoder_step is None:
        return dict(out, declared=False, note=f"OpSpec.decoder_step (where the op sits in a decoder) is "
                                              f"{opspec.NOT_DECLARED}: no workload replay")
    batch = batch or (8 if gpu else 2)
    seq = seq or ((128 if quick else 512) if gpu else 8)
    dim = dim or (4096 if gpu else 64)
    layers = layers or ((2 if quick else 4) if gpu else 2)
    dtype = dtype or (torch.bfloat16 if gpu else torch.float32)
    settings = settings or settings_for(quick)
    torch.manual_seed(0)
    sizes = dict(dim=dim, layers=layers, heads=max(1, dim // 128) if gpu else 4, hidden=dim * 2)
    with torch.device(dev):  # built where it runs: initialising 670M parameters on the host would eat the budget
        base = TinyDecoder(**sizes, norm_cls=nn.RMSNorm).to(dtype).eval()
    tokens = [torch.randint(0, 256, (batch, seq), device=dev, generator=None) for _ in range(settings["input_sets"])]
    n_norms = 2 * layers + 1
    hidden = [torch.randn(batch * seq, dim, device=dev, dtype=dtype) for _ in range(settings["input_sets"])]
    w = torch.randn(dim, device=dev, dtype=dtype)
    residual = torch.randn(batch * seq, dim, device=dev, dtype=dtype)
    steps = {"baseline": functools.partial(spec.decoder_step, spec.baseline[1]),
             "fastpath": functools.partial(spec.decoder_step, spec.function)}
    models = {k: functools.partial(base, step=st) for k, st in steps.items()}
    norms = {k: (lambda h, st=st: st(h, residual, w, None)) for k, st in steps.items()}
    routes = collections.Counter()

    def counted(*args):
        routes[spec.route(*args)] += 1
        return spec.function(*args)

    checked = functools.partial(base, step=functools.partial(spec.decoder_step, counted))

    def rot(items):
        state = {"i": 0}

        def nxt():
            state["i"] += 1
            return items[state["i"] % len(items)]
        return nxt

    out.update({"baseline": spec.baseline[0], "batch": batch, "seq": seq, "dim": dim,
                "layers": layers, "dtype": str(dtype).replace("torch.", ""), "norm_calls_per_forward": n_norms})
    with torch.no_grad():
        out["logits_close"] = bool(torch.allclose(models["baseline"](tokens[0]).float(),
                                                  checked(tokens[0]).float(), atol=5e-2, rtol=5e-2))
    out["fast_model_routes"] = dict(routes)
    # Off a GPU the fast-path model's norms run in Triton's interpreter: timing them would only say how slow the
    # interpreter is (its norms alone would take longer than the baseline's whole forward), so they are not timed.
    with torch.no_grad():
        for name in ("baseline", "fastpath") if gpu else ("baseline",):
            nt, nh, model, norm = rot(tokens), rot(hidden), models[name], norms[name]
            res = time_callable(lambda m=model, nt=nt: m(nt()), settings)
            out[f"e2e_{name}_us"] = float(torch.tensor(res["samples_us"]).median())
            res = time_callable(lambda fn=norm, nh=nh: [fn(nh()) for _ in range(n_norms)], settings)
            out[f"norms_{name}_us"] = float(torch.tensor(res["samples_us"]).median())
    if not gpu:
        out["e2e_fastpath_us"] = out["norms_fastpath_us"] = None
        out["fastpath_not_timed"] = "its norms run in Triton's interpreter here: not measured"
    out["norm_share_baseline"] = out["norms_baseline_us"] / out["e2e_baseline_us"]
    out["e2e_ratio_fast_over_base"] = out["e2e_fastpath_us"] / out["e2e_baseline_us"] if gpu else None
    out["timer"] = settings["timer"]
    return out


def specializations(cases, quick: bool = False, spec: opspec.OpSpec | None = None) -> list[dict]:
    """The distinct binaries the eligible cases of a case file trigger (the default op's case file:
    :func:`~fastpath_lib.bench.matrix.load_cases`), read by ``spec``'s ``specialization`` (default: the default op):
    :func:`op_specializations` of those cases.
    """
    return op_specializations(spec or opspec.default(), quick, _op_cases(cases))


def _op_cases(cases):
    """Cases as :class:`~fastpath_lib.opspec.OpCase` rows (a case file's :class:`~fastpath_lib.bench.matrix.BenchCase`
    through its JSON entry); ``None`` stays ``None`` (the op's own matrix)."""
    if cases is None:
        return None
    return [c if isinstance(c, opspec.OpCase) else opspec.OpCase.from_entry(c.to_json()) for c in cases]


def op_specializations(spec: opspec.OpSpec, quick: bool = False, cases=None) -> list[dict] | None:
    """The distinct binaries an op's matrix (or ``cases``) compiles: its ``specialization`` of every case expected to
    take the fast route (``None`` when the spec declares none), each with the case ids that use it, the shape, dtype
    and layout of the first (a contiguous case first where one has the binary) and ``launch``, the route the
    compile-cost probe calls on that case (``"fast"``, or ``"fast_backward"``). A backward case adds the backward's
    binaries where the spec declares ``fast_backward`` and its ``specialization`` takes a ``kernel`` argument
    (``kernel="bwd"``, and ``sms=`` the GPU's multiprocessor count where it takes one: ``None`` off a GPU).
    """
    if spec.specialization is None:
        return None
    backward = spec.fast_backward is not None and _accepts(spec.specialization, "kernel")
    sms = torch.cuda.get_device_properties(0).multi_processor_count if runtime.cuda_available() else None
    found: dict[str, dict] = {}
    cases = spec.matrix() if cases is None else cases
    for c in sorted(cases, key=lambda c: not c.plain):  # stable: a binary's first case is a contiguous one if any
        if c.expected == FALLBACK:
            continue
        rows, cols = c.dims(quick)
        dtype = getattr(torch, c.dtype)
        for kern in ("fwd", "bwd") if backward and c.pass_ == "backward" else ("fwd",):
            extra = {"kernel": kern, **({"sms": sms} if _accepts(spec.specialization, "sms") else {})} \
                if backward else {}
            key = spec.specialization(rows, cols, dtype, **extra)
            if key is None:
                break
            launch = "fast" if kern == "fwd" else "fast_backward"
            found.setdefault(json.dumps(key, sort_keys=True, default=str),
                             dict(key, rows=rows, cols=cols, dtype=c.dtype, layout=c.layout, pad=c.pad_for(quick),
                                  launch=launch, cases=[]))["cases"].append(c.id)
    return list(found.values())


_PROBE = r"""
import importlib, json, sys, time, torch
specs, where = json.loads(sys.argv[1]), sys.argv[2]
module, attr = where.split(":")
spec = getattr(importlib.import_module(module), attr)


def op_call(s):
    from fastpath_lib.bench.trace import call_args
    from fastpath_lib.cases import CaseSpec
    dt = getattr(torch, s["dtype"])
    if s.get("layout", "contiguous") == "contiguous":
        args = call_args(spec, s["rows"], s["cols"], dt, "cuda")
    else:
        case = (spec.case_spec or CaseSpec)(rows=s["rows"], cols=s["cols"], dtype=dt, layout=s["layout"],
                                            pad=s.get("pad", 0), device="cuda")
        args = spec.args(case.build())
    if s["launch"] == "fast":
        return lambda: spec.fast(*args)
    dy = torch.randn_like(args[0])
    return lambda: spec.fast_backward(dy, *args)


out = []
for s in specs:
    call = op_call(s)
    times = []
    for _ in range(2):
        torch.cuda.synchronize(); t = time.perf_counter()
        call()
        torch.cuda.synchronize(); times.append(time.perf_counter() - t)
    out.append(dict(s, first_call_s=times[0], second_call_s=times[1], compile_s=times[0] - times[1]))
    del call
print(json.dumps(out))
"""


def compile_cost(cases=None, *, spec: opspec.OpSpec | None = None, quick: bool = False, timeout: float = 600) -> dict:
    """Triton JIT compile time per specialization, how many the matrix triggers, and the kernel cache on disk.

    Args:
        cases: the cases to read (default: the op's matrix; a case file's
            :class:`~fastpath_lib.bench.matrix.BenchCase` rows are read through their JSON entries).
        spec: the operator (default: the default op): its ``specialization`` dicts of the cases expected to take the
            fast route (:func:`op_specializations`), each launched through its ``fast`` route, a backward binary
            through its ``fast_backward``.
        quick: use quick shapes.
        timeout: seconds for the probe subprocess.

    Returns:
        a dict with the ``op``, ``specializations`` (count and list), and on CUDA ``per_specialization`` compile
        seconds (first call minus second call, in a fresh process with an empty ``TRITON_CACHE_DIR``) and
        ``cache_bytes``. A spec without a ``specialization`` gets ``specializations=None``, ``declared=False`` and a
        ``note`` saying so.

    Note:
        Under the interpreter (or without CUDA) no compile happens: the result says so and records no times.
    """
    spec = spec or opspec.default()
    specs = op_specializations(spec, quick, _op_cases(cases))
    if specs is None:
        return {"op": spec.name, "specializations": None, "list": [], "compiles": False, "declared": False,
                "note": f"OpSpec.specialization (the binaries its fast route compiles) is {opspec.NOT_DECLARED}"}
    probe = [{k: s[k] for k in ("launch", "dtype", "rows", "cols", "layout", "pad")} for s in specs]
    where = [opspec.source(spec)]
    out = {"op": spec.name, "specializations": len(specs), "list": specs,
           "device_name": torch.cuda.get_device_name() if runtime.cuda_available() else "cpu"}
    if not gpu_measurement():
        out.update(compiles=False, note="Triton interpreter / no CUDA: kernels are not compiled, so there is no "
                   "compile time or cache to measure; the count above is what a GPU run would compile")
        return out
    if where == [None]:
        out.update(compiles=True, error=f"no imported module holds the spec of {out['op']} at module level: a fresh "
                                        "process cannot find it to launch its kernels")
        return out
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, TRITON_CACHE_DIR=cache)
        # the probe imports the spec's module from where this process did (a practitioner's or a test's folder)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        try:
            res = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(probe), *where], env=env,
                                 capture_output=True, text=True, timeout=timeout, cwd=runtime.ROOT)
        except subprocess.TimeoutExpired:  # recorded, not raised: the step says the probe ran out of time
            out.update(compiles=True, error=f"the compile probe did not finish within {timeout:.0f} s")
            return out
        if res.returncode != 0:
            out.update(compiles=True, error=res.stderr[-2000:])
            return out
        per = json.loads(res.stdout.strip().splitlines()[-1])
        size = sum(p.stat().st_size for p in Path(cache).rglob("*") if p.is_file())
    out.update(compiles=True, per_specialization=per, cache_bytes=size,
               total_compile_s=sum(p["compile_s"] for p in per),
               max_compile_s=max((p["compile_s"] for p in per), default=math.nan))
    return out


def _accepts(fn, name: str) -> bool:
    import inspect

    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _element_bytes(dtype: str) -> int:
    return torch.empty((), dtype=getattr(torch, str(dtype).replace("torch.", ""))).element_size()


def compiled_facts(cases=None, *, spec: opspec.OpSpec | None = None, archs=None, timeout: float = 900,
                   workers: int | None = None) -> dict:
    """Compile-time facts (vector width, registers, spills) of an op's kernel specializations, compiled for GPU
    targets by its ``compiler`` (no GPU needed).

    Args:
        cases: the matrix whose widths to compile (default: the op's own choice, ``kernels()``'s default): every
            width that fits a row (the op's ``limits``), passed to ``kernels(widths=...)`` where it takes them.
        spec: the operator (default: :func:`fastpath_lib.opspec.default`): its ``kernels`` and ``compiler``.
        archs: compute capabilities as integers (default: 80 and 90, plus this GPU's), passed to
            ``kernels(archs=...)`` where it takes them.
        timeout: seconds for the compiles.
        workers: compile processes (default: the compiler's choice).

    Returns:
        ``{"rows": [...], "archs": [...]}``, one dict per specialization (the compiler's ``facts_table`` columns where
        it has one, else its rows, with the build's ``label``); ``vec`` is the measured vector width, the widest
        global access in the PTX in elements (``vector_bytes`` in bytes), never a constant of the launcher; or
        ``{"rows": [], "skipped": reason}`` when nothing can be compiled here or the spec leaves out what it needs.

    Note:
        Compiled ahead of time for the targets, with or without a GPU: compile-time facts, not measurements.
    """
    spec = spec or opspec.default()
    for field in ("kernels", "compiler"):
        if getattr(spec, field) is None:
            return {"rows": [], "skipped": f"{field} (OpSpec.{field}) is {opspec.NOT_DECLARED}: nothing to compile"}
    why = spec.compiler.missing_tools()
    if why:
        return {"rows": [], "skipped": why}
    if archs is None:
        archs = {80, 90}
        if runtime.cuda_available():
            major, minor = torch.cuda.get_device_capability()
            archs.add(10 * major + minor)
    kwargs = {"archs": tuple(sorted(archs))} if _accepts(spec.kernels, "archs") else {}
    if cases is not None and _accepts(spec.kernels, "widths"):
        max_cols = getattr(spec.limits(None), "max_cols", None) if spec.limits else None
        kwargs["widths"] = sorted({c.shape[1] for c in cases if max_cols is None or c.shape[1] <= max_cols})
    builds = list(spec.kernels(**kwargs))
    raw = spec.compiler.facts(builds, timeout=timeout, workers=workers)
    table = getattr(spec.compiler, "facts_table", None)
    rows = table(raw).to_dict("records") if table is not None else [dict(r) for r in raw]
    for build, r, row in zip(builds, raw, rows):
        label = build.label
        row["label"] = label() if callable(label) else label
        row["vector_bytes"] = max(r.get("load_bytes_max") or 0, r.get("store_bytes_max") or 0)
        row["vec"] = row["vector_bytes"] // _element_bytes(r["dtype"]) if row["vector_bytes"] else None
    return {"rows": rows, "archs": sorted({r["arch"] for r in raw}) or [f"sm_{a}" for a in sorted(archs)]}
