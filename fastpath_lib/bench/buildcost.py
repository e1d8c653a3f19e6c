"""Compile time and binary size of the kernels, measured ahead of time for a GPU target on any machine.

Every specialization (kernel x dtype x block x warps x rows per program x weight x alignment x target) is its own
binary, compiled by Triton's JIT on first use in every process with an empty cache: a one-off cost users see as a
slower first step, and bytes in the kernel cache. On a GPU :func:`fastpath_lib.bench.compile_cost` measures that in a
fresh process. This module measures the part that needs no GPU: :func:`aot_build_cost` compiles some specializations
for a real target (``sm_90`` by default) into an empty Triton cache with the op's compiler (``OpSpec.compiler``), and
reports the compile seconds per specialization on *this* machine's CPU and the bytes the cache holds afterwards
(cubin, PTX, the IRs and metadata). These are compile-time facts, not GPU measurements.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from fastpath_lib import opspec
from fastpath_lib.bench.schema import NOT_GPU

__all__ = ["aot_build_cost", "region_specializations"]


def _compiler(spec):
    spec = spec or opspec.default()
    if spec.compiler is None:
        raise RuntimeError(f"{spec.name}: compiler (OpSpec.compiler) is {opspec.NOT_DECLARED}")
    return spec.compiler


def region_specializations(archs=(80, 90), *, spec: opspec.OpSpec | None = None) -> int:
    """How many launcher choices the whole eligible region of ``spec`` (default: the default op) can make (every
    width, dtype, weight, kernel): its compiler's ``specializations(archs=...)``. Not the binaries a run compiles:
    Triton's JIT compiles each choice once per combination of its own marks on the integer arguments (a multiple of
    16, the value 1) that the calls bring."""
    return len(_compiler(spec).specializations(archs=archs))


def aot_build_cost(specs, *, timeout: float = 600, spec: opspec.OpSpec | None = None) -> dict:
    """Compile ``specs`` for their GPU targets into an empty Triton cache; time it and weigh the cache.

    Args:
        specs: builds the op's compiler takes (its ``kernels()``' items).
        timeout: seconds for the compile subprocesses.
        spec: the operator whose compiler builds them (default: the default op).

    Returns:
        ``{"per_specialization": [{"label", "compile_s", "registers", "spills", "load_bytes"}...],
        "total_compile_s", "cache_bytes", "cubin_bytes", "files", "note"}``; sizes in bytes.

    Raises:
        RuntimeError: the compiler is missing here (the message says what is missing).

    Note:
        ``TRITON_CACHE_DIR`` points at a temporary folder for the duration of the call only, so the compile is cold
        and the bytes are this call's; the previous value is restored.
    """
    compiled = _compiler(spec)
    specs = list(specs)
    why = compiled.missing_tools()
    if why:
        raise RuntimeError(f"cannot compile for a GPU target here: {why}")
    old = os.environ.get("TRITON_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="fastpath-aot-cache-") as cache:
        os.environ["TRITON_CACHE_DIR"] = cache
        try:
            rows = compiled.facts(specs, timeout=timeout, workers=1)
        finally:
            if old is None:
                os.environ.pop("TRITON_CACHE_DIR", None)
            else:
                os.environ["TRITON_CACHE_DIR"] = old
        files = [p for p in Path(cache).rglob("*") if p.is_file()]
        size = sum(p.stat().st_size for p in files)
        cubin = sum(p.stat().st_size for p in files if p.suffix == ".cubin")
    if not files:  # compiled.facts had these in its per-process cache: nothing was compiled by this call
        return {"per_specialization": [], "total_compile_s": None, "cache_bytes": None, "cubin_bytes": None,
                "files": 0, "note": "already compiled earlier in this process: not measured again (use a fresh "
                                    "process)"}
    per = [{"label": s.label() if callable(s.label) else s.label, "compile_s": r["compile_s"],
            "registers": r["registers"], "spills": r["spills"],
            "load_bytes": r["load_bytes"]} for s, r in zip(specs, rows)]
    return {"per_specialization": per, "total_compile_s": round(sum(p["compile_s"] for p in per), 4),
            "cache_bytes": size, "cubin_bytes": cubin, "files": len(files),
            "note": f"compiled ahead of time on this machine's CPU for the GPU target; compile-time facts, {NOT_GPU}"}
