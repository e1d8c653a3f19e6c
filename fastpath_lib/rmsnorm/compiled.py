"""The kernels compiled ahead of time for real GPUs, on any machine, and the facts read from the compiled code.

Triton compiles for a GPU target without a driver: ``triton.compile(ASTSource(...), target=GPUTarget("cuda", 90,
32))`` produces PTX and a cubin on a CPU-only laptop, and the wheel ships ``ptxas`` (and ``ptxas-blackwell``, for
sm_100 and newer). The interpreter that runs the kernels on a CPU compiles nothing, so this module is what shows that
every kernel specialization the kit launches also compiles for a GPU (:data:`TARGETS`), and what it compiles to:

* the width of the global loads and stores, read from the PTX (``ld.global.v4.b32`` moves 16 bytes,
  ``ld.global.b16`` 2 bytes): a 16-byte-aligned launch can use vector accesses, a misaligned one cannot;
* registers, spill bytes and stack, from ``ptxas -v`` on the PTX; the register count is checked against Triton's own
  cubin (``cuobjdump --dump-resource-usage``) where ``cuobjdump`` is present;
* shared memory, from the compiled kernel's metadata.

A specialization is one compiled binary: kernel x dtype x ``BLOCK_SIZE`` x ``num_warps`` x ``ROWS_PER_PROGRAM`` x
``HAS_WEIGHT`` x ``VEC`` x Triton's marks on the arguments (on ``n_rows``, strides, ``n_cols``: a multiple of 16, 1,
or neither; the list from the launchers' own rule, :mod:`fastpath_lib.rmsnorm.launch`, fixes one set) x the target.

*Aligned* is a launch the predicate admits: every data pointer a multiple of 16 bytes (``tt.divisibility = 16``, as
``triton.jit`` derives it), the row strides and the width whole 16-byte vectors, so the launcher passes ``VEC`` = the
elements of one 16-byte vector and the kernels hint the strides and the width as multiples of it. Triton itself marks
an integer only when it is a multiple of 16 *elements*, which an eligible fp32 width of 100 or fp16 width of 24 is
not, so an aligned specialization is compiled without that mark: the weakest aligned launch, which every eligible
width of its block shares (with the hints, Triton's own mark on the integers changes nothing in the code; a test
compares the PTX). *Misaligned* is a launch with none of it: no divisibility attribute at all and ``VEC = 1``.

Compiles run in subprocesses with ``TRITON_INTERPRET`` unset (here the kernels may be interpreter functions, which
cannot be compiled); results are kept per process. Nothing here needs a GPU or is a GPU measurement.

>>> spec = Specialization("forward", "bfloat16", "bfloat16", 8192, 16, 1, True, 90)
>>> spec.label()
'forward bf16 w=bf16 block=8192 warps=16 rows=1 aligned sm_90'
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from fastpath_lib.rmsnorm import launch
from fastpath_lib.rmsnorm.predicate import ALIGN_BYTES, MAX_COLS

__all__ = ["ARCHS", "TARGETS", "BACKWARD_ROW_BLOCKS", "DTYPES", "Specialization", "code_sha256", "eligible_widths",
           "facts", "facts_markdown", "facts_table", "missing_tools", "specializations", "tool_path",
           "vector_bytes_expected"]

#: Compute capabilities compiled for by default (Ampere, Hopper): every specialization is compiled for these.
ARCHS = (80, 90)
#: Every target the compiled-facts test covers (at a wide and a mid width): Turing (T4, admitted only by the learners'
#: opt-in), Ampere (A100, A10/RTX 30), Ada (L4/RTX 40), Hopper and consumer Blackwell (RTX 50).
TARGETS = (75, 80, 86, 89, 90, 120)
#: Input dtypes the kernels take (torch names).
DTYPES = ("float16", "bfloat16", "float32")
#: Backward rows per program compiled: 1 (no loop), 2 (the loop unrolled) and 4 (a loop, the same code as any larger
#: power of two the launcher picks on a GPU). It depends on the row count, the SM count and launch.backward_max_rows.
BACKWARD_ROW_BLOCKS = (1, 2, 4)

_TRITON_TYPES = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}
_ELEMENT_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4}
_SHORT = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}


@dataclasses.dataclass(frozen=True)
class Specialization:
    """One compiled binary of a kit kernel.

    ``VEC`` (:attr:`vec`) follows from ``aligned`` and the dtype: the elements of a 16-byte vector, or 1.

    Args:
        kernel: ``"forward"`` or ``"backward"``.
        dtype: input (and output) dtype, a torch name (``"bfloat16"``).
        weight_dtype: the weight's dtype, or ``None`` for no weight (``HAS_WEIGHT=False``).
        block: ``BLOCK_SIZE``.
        warps: ``num_warps``.
        rows_per_program: ``ROWS_PER_PROGRAM`` (the forward's tile rows, the backward's row block).
        aligned: a 16-byte-aligned launch: pointers, row strides and width (see the module doc).
        arch: compute capability as an integer (80, 90).
        int_div16: also Triton's own ``tt.divisibility = 16`` on the row strides and ``n_cols`` (what it derives when
            they are multiples of 16 elements, e.g. at power-of-two widths); only with ``aligned``.
    """

    kernel: str
    dtype: str
    weight_dtype: str | None
    block: int
    warps: int
    rows_per_program: int
    aligned: bool
    arch: int
    int_div16: bool = False

    @property
    def vec(self) -> int:
        """The ``VEC`` constexpr the launcher passes: elements per 16-byte vector when aligned, else 1."""
        return ALIGN_BYTES // _ELEMENT_BYTES[self.dtype] if self.aligned else 1

    def label(self) -> str:
        """A short readable id."""
        w = "none" if self.weight_dtype is None else _SHORT[self.weight_dtype]
        return (f"{self.kernel} {_SHORT[self.dtype]} w={w} block={self.block} warps={self.warps} "
                f"rows={self.rows_per_program} {'aligned' if self.aligned else 'misaligned'}"
                f"{' int-div16' if self.int_div16 else ''} sm_{self.arch}")


def tool_path(name: str) -> str | None:
    """Path of a CUDA binary Triton ships (``ptxas``, ``cuobjdump``), or ``None``: Triton's own override
    (``TRITON_PTXAS_PATH``, ...), then the wheel's ``bin`` folder, then ``PATH`` (Triton imported only here)."""
    override = os.environ.get(f"TRITON_{name.upper().replace('-', '_')}_PATH")
    if override and os.path.isfile(override) and os.access(override, os.X_OK):
        return override
    try:
        import triton
    except ImportError:
        return None
    path = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", name)
    if os.path.isfile(path) and os.access(path, os.X_OK):
        return path
    return shutil.which(name)


def missing_tools() -> str | None:
    """Why nothing can be compiled here (Triton without its NVIDIA backend, or no ``ptxas``), else ``None``."""
    try:
        from triton.backends.compiler import GPUTarget  # noqa: F401
        from triton.compiler import ASTSource  # noqa: F401
    except ImportError as exc:
        return f"triton's ahead-of-time compiler is not importable ({exc})"
    if tool_path("ptxas") is None:
        return "ptxas not found (neither in triton's wheel, nor TRITON_PTXAS_PATH, nor PATH)"
    return None


def eligible_widths() -> list[int]:
    """One width per ``BLOCK_SIZE`` the launchers can pick: the powers of two from 1 to ``MAX_COLS``.

    Every width ``n`` (``1 <= n <= MAX_COLS``) makes the same launcher choices as the power of two at or above it
    (Triton's marks aside: see the module doc): an aligned launch tells the kernel no more about ``n`` than that it
    is a whole number of 16-byte vectors. :func:`specializations` keeps aligned ones at widths of whole vectors.
    """
    out, n = [], 1
    while n <= MAX_COLS:
        out.append(n)
        n *= 2
    return out


def specializations(widths=None, *, archs=ARCHS, dtypes=DTYPES, kernels=("forward", "backward"),
                    aligned=(True,), weights=("same", None)) -> list[Specialization]:
    """The specializations the launchers pick for ``widths``, in a fixed order, without duplicates.

    Args:
        widths: row widths (default: :func:`eligible_widths`, which covers every eligible width). An aligned
            specialization is listed only for a width whose rows are whole 16-byte vectors of the dtype (the
            launcher's :func:`~fastpath_lib.rmsnorm.launch.vector_elements`); other widths have no aligned launch.
        archs: compute capabilities.
        dtypes: input dtypes (torch names).
        kernels: ``"forward"`` and/or ``"backward"``.
        aligned: ``True`` and/or ``False``.
        weights: ``"same"`` (a weight of the input's dtype), ``None`` (no weight) or a dtype name.

    Returns:
        a list of :class:`Specialization`; ``BLOCK_SIZE``, ``num_warps``, the forward's rows per program and the
        backward's row limit come from :mod:`fastpath_lib.rmsnorm.launch`, the backward's rows from
        :data:`BACKWARD_ROW_BLOCKS` (up to that limit: fp32 at 16384 columns launches 1 row per program only).

    >>> for s in specializations([128], archs=(90,), dtypes=("float16",), kernels=("forward",)):
    ...     print(s.label())
    forward fp16 w=fp16 block=128 warps=4 rows=8 aligned sm_90
    forward fp16 w=none block=128 warps=4 rows=8 aligned sm_90
    """
    widths = eligible_widths() if widths is None else widths
    seen: dict[Specialization, None] = {}
    for arch in archs:
        for kernel in kernels:
            for n_cols in widths:
                block, warps = launch.launch_settings(n_cols, kernel)
                for dtype in dtypes:
                    most = launch.backward_max_rows(n_cols, _ELEMENT_BYTES[dtype]) or BACKWARD_ROW_BLOCKS[-1]
                    rows = ((launch.forward_rows_per_program(n_cols),) if kernel == "forward"
                            else tuple(r for r in BACKWARD_ROW_BLOCKS if r <= most))
                    whole = launch.vector_elements(_ELEMENT_BYTES[dtype], n_cols, (n_cols,), (0,)) > 1
                    for weight in weights:
                        wdt = dtype if weight == "same" else weight
                        for r in rows:
                            for al in aligned:
                                if al and not whole:
                                    continue
                                seen.setdefault(Specialization(kernel, dtype, wdt, block, warps, r, al, arch), None)
    return list(seen)


def vector_bytes_expected(spec: Specialization) -> int:
    """The width of a row access the launch allows: one 16-byte vector when aligned, one element when not.

    >>> vector_bytes_expected(Specialization("forward", "float32", None, 128, 4, 8, True, 90))
    16
    >>> vector_bytes_expected(Specialization("forward", "float16", None, 128, 4, 8, False, 90))
    2
    """
    return ALIGN_BYTES if spec.aligned else _ELEMENT_BYTES[spec.dtype]


_cache: dict[Specialization, dict] = {}


def facts(specs, *, timeout: float = 900, workers: int | None = None) -> list[dict]:
    """Compile ``specs`` for their targets and return one plain row (a dict) per specialization, in order.

    Each row: ``kernel``, ``arch`` (``"sm_90"``), ``dtype``, ``weight`` (dtype or ``"none"``), ``block``, ``warps``,
    ``rows_per_program``, ``aligned``, ``vec`` (the ``VEC`` constexpr), ``int_div16``, ``load_bytes`` / ``store_bytes``
    (the narrowest global load / store in the PTX, in bytes: 16 for ``ld.global.v4.b32``, 2 for ``ld.global.b16``),
    ``load_bytes_max``, ``store_bytes_max``, ``load_ops`` / ``store_ops`` (global load / store instructions in the PTX),
    ``registers``, ``spill_stores`` and ``spill_loads`` (bytes), ``spills`` (their sum), ``stack`` (bytes), ``shared``
    (bytes, Triton's metadata), ``ptxas_log`` (where the resource facts come from: ``"triton"``, the log of Triton's
    own ptxas run when it built the binary; ``"rerun"``, ``ptxas -v`` run again on the PTX, when Triton's cache had
    the binary and no facts beside it; either is kept beside the binary and read back by later runs),
    ``from_cache`` (Triton served the binary from its cache: no ptxas ran for it in this call), ``cubin_registers``
    (on a rerun, the count in Triton's own cubin from ``cuobjdump``, else ``None``), ``compile_s``, ``ptx_sha256`` (of
    the PTX's code, :func:`code_sha256`: equal hashes are the same code, wherever the kit sits).

    Results are kept for the life of the process; only the missing ones are compiled, with ``TRITON_INTERPRET`` unset,
    in ``workers`` subprocesses (default: one per 8 specs, at most 2, one per core: each imports torch, ~3 CPU-s).

    Raises:
        RuntimeError: the compiler is missing (:func:`missing_tools`) or a specialization failed to compile; the
            message names it and carries the compiler's error.

    Note:
        These are compile-time facts for the target, not GPU measurements.
    """
    specs = list(specs)
    todo = list(dict.fromkeys(s for s in specs if s not in _cache))
    if todo:
        why = missing_tools()
        if why:
            raise RuntimeError(f"cannot compile for a GPU target here: {why}")
        workers = max(1, min(workers or min(2, os.cpu_count() or 1, -(-len(todo) // 8)), len(todo)))
        for spec, row in zip(todo, _run_workers(todo, workers, timeout)):
            _cache[spec] = row
    return [dict(_cache[s]) for s in specs]


def _run_workers(specs: list[Specialization], workers: int, timeout: float) -> list[dict]:
    """Compile in ``workers`` fresh processes (every ``workers``-th spec each); rows come back in ``specs`` order."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    shares = [specs[i::workers] for i in range(workers)]
    with tempfile.TemporaryDirectory() as tmp:
        procs = []
        for i, share in enumerate(shares):
            out_path = os.path.join(tmp, f"facts{i}.json")
            proc = subprocess.Popen([sys.executable, "-m", "fastpath_lib.rmsnorm.compiled", out_path], env=env,
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            procs.append((proc, out_path, json.dumps([dataclasses.asdict(s) for s in share])))
        results, errors = [], []
        deadline = time.monotonic() + timeout
        for proc, out_path, payload in procs:
            try:
                _, err = proc.communicate(payload, timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
                errors.append(f"timed out after {timeout:.0f} s")
                continue
            if proc.returncode != 0 or not os.path.exists(out_path):
                errors.append(f"exit {proc.returncode}:\n{err[-4000:]}")
                continue
            with open(out_path) as f:
                results.append(json.load(f))
        if errors:
            raise RuntimeError("compiling for a GPU target failed: " + "\n".join(errors))
    rows: list[dict] = [None] * len(specs)  # type: ignore[list-item]
    for i, share_rows in enumerate(results):
        rows[i::workers] = share_rows
    return rows


# --- the worker: runs in a fresh process where the kernels are compiled Triton functions -----------------------------

_ACCESS = re.compile(r"\b(ld|st)\.global((?:\.[A-Za-z0-9_:]+)*)")


def _access_bytes(ptx: str) -> dict:
    """Narrowest and widest global load and store in ``ptx``, in bytes, and how many of each."""
    widths: dict[str, list[int]] = {"ld": [], "st": []}
    for op, quals in _ACCESS.findall(ptx):
        parts = quals.split(".")[1:]
        vec = next((int(p[1:]) for p in parts if re.fullmatch(r"v\d+", p)), 1)
        bits = next((int(p[1:]) for p in reversed(parts) if re.fullmatch(r"[bfsu]\d+", p)), None)
        if bits is not None:
            widths[op].append(vec * bits // 8)
    return {"load_bytes": min(widths["ld"], default=None), "load_bytes_max": max(widths["ld"], default=None),
            "store_bytes": min(widths["st"], default=None), "store_bytes_max": max(widths["st"], default=None),
            "load_ops": len(widths["ld"]), "store_ops": len(widths["st"])}


def _parse_ptxas_log(log: str) -> dict | None:
    """Registers, spill bytes and stack frame from a ``ptxas -v`` log (``None`` when it has no such lines)."""
    found = {}
    for key, pattern in (("registers", r"Used (\d+) registers"), ("spill_stores", r"(\d+) bytes spill stores"),
                         ("spill_loads", r"(\d+) bytes spill loads"), ("stack", r"(\d+) bytes stack frame")):
        m = re.search(pattern, log)
        if m is None:
            return None
        found[key] = int(m.group(1))
    found["spills"] = found["spill_stores"] + found["spill_loads"]
    return found


def _ptxas_rerun(ptx: str, arch: int, workdir: str) -> dict:
    gpu_name = f"sm_{arch}" + ("a" if arch >= 90 else "")  # as Triton names the target
    src = os.path.join(workdir, "k.ptx")
    with open(src, "w") as f:
        f.write(ptx)
    ptxas = tool_path("ptxas-blackwell" if arch >= 100 else "ptxas")  # as Triton picks it
    proc = subprocess.run([ptxas, "-lineinfo", "-v", f"--gpu-name={gpu_name}", src, "-o", src + ".o"],
                          capture_output=True, text=True, check=False)
    found = _parse_ptxas_log(proc.stderr + proc.stdout) if proc.returncode == 0 else None
    if found is None:
        raise RuntimeError(f"ptxas -v failed or printed no resource usage:\n{(proc.stderr + proc.stdout)[-2000:]}")
    return found


def code_sha256(ptx: str) -> str:
    r"""SHA-256 of the code in ``ptx``: without comments, ``.loc``/``.file`` lines and debug sections, which name the
    source file's path (Triton's cache key does not, so a binary cached from another checkout differs by its paths).

    >>> code_sha256('\tret;\n\t.file\t1 "/a/k.py"\n') == code_sha256('\tret; // k.py:3\n\t.file\t1 "/b/k.py"\n')
    True
    """
    code = re.sub(r"\.section\s+\.debug\w*\s*(\{[^{}]*\})?", "", re.sub(r"//[^\n]*", "", ptx)).splitlines()
    code = [ln.strip() for ln in code if ln.strip() and not re.match(r"\s*\.(loc|file)\b", ln)]
    return hashlib.sha256("\n".join(code).encode()).hexdigest()


def _cubin_registers(cubin: bytes, workdir: str) -> int | None:
    tool = tool_path("cuobjdump")
    if tool is None:
        return None
    path = os.path.join(workdir, "k.cubin")
    with open(path, "wb") as f:
        f.write(cubin)
    proc = subprocess.run([tool, "--dump-resource-usage", path], capture_output=True, text=True, check=False)
    m = re.search(r"REG:(\d+)", proc.stdout)
    return int(m.group(1)) if proc.returncode == 0 and m else None


def _signature(spec: dict) -> tuple[dict, dict, list[str]]:
    """``(signature, constexprs, names of the arguments that get tt.divisibility=16)`` of a specialization."""
    t = "*" + _TRITON_TYPES[spec["dtype"]]
    tw = "*" + _TRITON_TYPES[spec["weight_dtype"] or spec["dtype"]]  # without a weight the launcher passes x
    has_w = spec["weight_dtype"] is not None
    vec = Specialization(**spec).vec
    if spec["kernel"] == "forward":
        sig = {"X_ptr": t, "W_ptr": tw, "Y_ptr": t, "X_row_stride": "i32", "Y_row_stride": "i32", "n_rows": "i32",
               "n_cols": "i32", "eps": "fp32", "HAS_WEIGHT": "constexpr", "ROWS_PER_PROGRAM": "constexpr",
               "BLOCK_SIZE": "constexpr", "VEC": "constexpr"}
        const = {"HAS_WEIGHT": has_w, "ROWS_PER_PROGRAM": spec["rows_per_program"], "BLOCK_SIZE": spec["block"],
                 "VEC": vec}
        pointers, integers = ["X_ptr", "W_ptr", "Y_ptr"], ["X_row_stride", "Y_row_stride", "n_cols"]
    else:
        sig = {"DY_ptr": t, "X_ptr": t, "W_ptr": tw, "DX_ptr": t, "DW_partial_ptr": "*fp32", "DY_row_stride": "i32",
               "X_row_stride": "i32", "DX_row_stride": "i32", "n_rows": "i32", "n_cols": "i32", "eps": "fp32",
               "ROWS_PER_PROGRAM": "constexpr", "HAS_WEIGHT": "constexpr", "BLOCK_SIZE": "constexpr",
               "VEC": "constexpr"}
        const = {"ROWS_PER_PROGRAM": spec["rows_per_program"], "HAS_WEIGHT": has_w, "BLOCK_SIZE": spec["block"],
                 "VEC": vec}
        pointers = ["DY_ptr", "X_ptr", "W_ptr", "DX_ptr", "DW_partial_ptr"]
        integers = ["DY_row_stride", "X_row_stride", "DX_row_stride", "n_cols"]
    div = (pointers if spec["aligned"] else []) + (integers if spec["aligned"] and spec["int_div16"] else [])
    return sig, const, div


def _kept(key: str, compute) -> dict:
    """``compute()``'s resource facts of the binary Triton cached under ``key``, kept beside it in Triton's cache.

    A cached binary comes with no ptxas log, and running ``ptxas -v`` again is most of a warm run's time. Triton's key
    covers the source, options, target and ptxas version, so the facts kept under it are that binary's. A cache this
    cannot read or write (remote, read-only) costs a rerun, nothing else.
    """
    try:
        from triton.runtime.cache import get_cache_manager

        manager = get_cache_manager(key)
        path = manager.get_file("fastpath_ptxas_facts.json")
        if path is not None:
            with open(path) as f:
                return json.load(f)
    except (OSError, ValueError, ImportError, AttributeError):
        manager = None
    found = compute()
    with contextlib.suppress(OSError, AttributeError, TypeError):
        manager.put(json.dumps(found), "fastpath_ptxas_facts.json", binary=False)
    return found


def _compile_one(spec: dict, workdir: str) -> dict:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    if spec.get("source"):  # any op's kernel (fastpath_lib.opspec.KernelBuild): function and signature come with it
        fn = getattr(__import__(spec["source"].split(":")[0], fromlist=["_"]), spec["source"].split(":")[1])
        sig, const, div = dict(spec["signature"]), dict(spec["constexprs"]), list(spec["divisible"])
    else:
        from fastpath_lib.rmsnorm import kernels
        fn = kernels.rms_norm_fwd_kernel if spec["kernel"] == "forward" else kernels.rms_norm_bwd_kernel
        sig, const, div = _signature(spec)
    if list(sig) != list(fn.arg_names):
        raise RuntimeError(f"{spec['kernel']} kernel arguments {fn.arg_names} differ from the signature compiled here "
                           f"{list(sig)}: update fastpath_lib.rmsnorm.compiled._signature")
    attrs = {(fn.arg_names.index(k),): [["tt.divisibility", 16]] for k in div}
    log = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(log):  # Triton prints its own ptxas log here when asked to (and not cached)
        compiled = triton.compile(ASTSource(fn, sig, const, attrs), target=GPUTarget("cuda", spec["arch"], 32),
                                  options={"num_warps": spec["warps"]})
    seconds = time.perf_counter() - t0
    ptx = compiled.asm["ptx"]
    row = {"kernel": spec["kernel"], "arch": f"sm_{spec['arch']}", "dtype": spec["dtype"],
           "weight": spec["weight_dtype"] or "none", "block": spec["block"], "warps": spec["warps"],
           "rows_per_program": spec["rows_per_program"], "aligned": spec["aligned"], "vec": const.get("VEC", 1),
           "int_div16": spec["int_div16"]}
    row.update(_access_bytes(ptx))
    own = _parse_ptxas_log(log.getvalue())
    if own is not None:
        row.update(_kept(compiled.hash, lambda: dict(own, ptxas_log="triton", cubin_registers=None)))
    else:
        row.update(_kept(compiled.hash, lambda: dict(_ptxas_rerun(ptx, spec["arch"], workdir), ptxas_log="rerun",
                                                     cubin_registers=_cubin_registers(compiled.asm["cubin"],
                                                                                      workdir))))
    row["from_cache"] = own is None  # Triton prints its ptxas log only when it runs ptxas, i.e. builds the binary
    row["shared"] = int(compiled.metadata.shared)
    row["ptx_sha256"] = code_sha256(ptx)
    row["compile_s"] = round(seconds, 4)
    return row


def _worker(out_path: str) -> int:
    os.environ.pop("TRITON_INTERPRET", None)
    import triton

    nvidia_knobs = getattr(getattr(triton, "knobs", None), "nvidia", None)
    if nvidia_knobs is not None and hasattr(nvidia_knobs, "dump_ptxas_log"):
        nvidia_knobs.dump_ptxas_log = True  # Triton prints its ptxas -v log: the facts of the very binary it built
    specs = json.loads(sys.stdin.read())
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for spec in specs:
            try:
                rows.append(_compile_one(spec, workdir))
            except Exception as exc:  # noqa: BLE001 -- any compiler error: name the specialization, fail the run
                label = spec.get("label") or Specialization(**spec).label()
                print(f"{label}: {type(exc).__name__}: {exc}", file=sys.stderr)
                return 1
    with open(out_path, "w") as f:
        json.dump(rows, f)
    return 0


# --- presentation ---------------------------------------------------------------------------------------------------

_COLUMNS = ["kernel", "arch", "dtype", "weight", "block", "warps", "rows_per_program", "aligned", "vec",
            "load_bytes", "store_bytes", "registers", "spills", "stack", "shared"]


def facts_table(rows=None):
    """The facts (rows from :func:`facts`; default ``facts(specializations())``) as a pandas DataFrame, one row per
    specialization, with the columns kernel, arch, dtype, weight, block, warps, rows_per_program, aligned, vec,
    load_bytes, store_bytes, registers, spills, stack, shared (bytes where a size)."""
    import pandas as pd

    rows = facts(specializations()) if rows is None else rows
    return pd.DataFrame([{k: r[k] for k in _COLUMNS} for r in rows], columns=_COLUMNS)


def facts_markdown(rows=None) -> str:
    """:func:`facts_table` as a GitHub markdown table, headed by the compiler it came from."""
    import triton

    table = facts_table(rows)
    head = ("| " + " | ".join(table.columns) + " |\n" + "|" + "---|" * len(table.columns) + "\n")
    body = "".join("| " + " | ".join(str(v) for v in rec) + " |\n" for rec in table.itertuples(index=False))
    note = (f"Compiled ahead of time with Triton {triton.__version__} (ptxas from its wheel); compile-time facts, "
            f"not GPU measurements. Bytes: load/store = narrowest global access; spills = spill stores + loads.\n\n")
    return note + head + body


if __name__ == "__main__":
    sys.exit(_worker(sys.argv[1]))
