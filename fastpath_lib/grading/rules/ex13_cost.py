"""Exercise 13's part 5 (maintenance_cost): the build record a scenario draws (calls, compiled binaries, the
kernel's file and a CODEOWNERS file), the owner GitHub reads from CODEOWNERS for a path, and the expected answer."""

from __future__ import annotations

import math
import random

__all__ = ["FAST_DTYPES", "KERNEL_FILES", "build", "codeowners_file", "codeowner", "cost_expected"]

FAST_DTYPES = ("float16", "bfloat16", "float32")


def _block(cols: int) -> int:
    return 1 << max(0, math.ceil(math.log2(cols)))


def build(rng: random.Random, warm: bool, last: str) -> dict:
    dtypes = rng.sample(FAST_DTYPES, 2)
    calls = [{"pass": rng.choice(("forward", "backward")), "dtype": rng.choice(dtypes),
              "cols": rng.choice((768, 1000, 1024, 3000, 4096, 5120))} for _ in range(rng.randint(4, 7))]
    table = [{"kernel": p, "dtype": d, "block": b, "compile_s": round(rng.uniform(0.05, 0.9), 3),
              "cubin_bytes": rng.randint(20, 90) * 1024}
             for p in ("forward", "backward") for d in FAST_DTYPES for b in (1024, 2048, 4096, 8192)]
    path = rng.choice(KERNEL_FILES)
    return {"calls": calls, "binaries": table, "warm_disk_cache": warm, "kernel_file": path,
            "codeowners": codeowners_file(rng, path, last)}


def cost_expected(sc: dict) -> dict:
    ok = [r for r in sc["replay"] if r["status"] == "ok"]
    b = sum(r["baseline_total_us"] for r in ok)
    need = set()
    for c in sc["build"]["calls"]:
        need.add(("forward", c["dtype"], _block(c["cols"])))
        if c["pass"] == "backward":
            need.add(("backward", c["dtype"], _block(c["cols"])))
    used = [r for r in sc["build"]["binaries"] if (r["kernel"], r["dtype"], r["block"]) in need]
    return {"saved_share": (b - sum(r["dispatched_total_us"] for r in ok)) / b,
            "unmeasured_calls": sum(r["calls"] for r in sc["replay"] if r["status"] != "ok"),
            "binaries": len(need), "cold_start_s": 0.0 if sc["build"]["warm_disk_cache"] else
            sum(r["compile_s"] for r in used), "cubin_bytes": sum(r["cubin_bytes"] for r in used),
            "owner": codeowner(sc["build"]["codeowners"], sc["build"]["kernel_file"])}


#: The kernel files of the kit's fast path and of its upstream patches (``upstream/*.patch``).
KERNEL_FILES = ("fastpath_lib/rmsnorm/kernels.py", "vllm/kernels/triton/layernorm.py",
                 "torch/_native/ops/norm/triton_kernels.py")
_HANDLES = ("@ada-l", "@grace-h", "@kwame-n", "@mei-w", "@ravi-s", "@sofia-m", "@tomas-k", "@yuki-t", "@amara-o",
            "@lars-b", "@noor-a", "@chen-j", "@ines-p", "@omar-f")


def codeowners_file(rng: random.Random, path: str, last: str) -> str:
    """A CODEOWNERS file in which the line that owns ``path`` (the last that matches it) is, by ``last``: its
    directory's line, after the top directory's (``"dir"``); a ``*.py`` line after both (``"ext"``); or the top
    directory's line, after its own directory's (``"top"``). Lines that match other files sit anywhere."""
    dirs = path.split("/")[:-1]
    h = rng.sample(_HANDLES, 7)
    every, top, own = f"* {h[0]}", f"/{dirs[0]}/ {h[1]}", f"/{'/'.join(dirs)}/ {h[2]}"
    lines = {"dir": [every, top, own], "ext": [every, top, own, f"*.py {h[3]}"], "top": [every, own, top]}[last]
    for other in (f"/{dirs[0]}/benchmarks/ {h[4]}", f"*.md {h[5]}", f"/docs/ {h[6]}"):
        lines.insert(rng.randint(1, len(lines)), other)
    return "# Each line: a pattern and the person who owns the files it matches.\n" + "\n".join(lines) + "\n"


def codeowner(codeowners: str, path: str) -> str | None:
    """The owner GitHub reads from ``codeowners`` for ``path``: the last line whose pattern matches it (``*`` every
    file, ``*.EXT`` a file ending in ``.EXT``, ``/DIR/`` every file under ``DIR``).

    >>> codeowner("* @a\\n/vllm/ @b\\n*.md @c\\n", "vllm/kernels/triton/layernorm.py")
    '@b'
    """
    owner = None
    for line in codeowners.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        pattern, handle = line.split()[:2]
        if (pattern == "*" or (pattern.startswith("*.") and path.endswith(pattern[1:]))
                or (pattern.startswith("/") and pattern.endswith("/") and path.startswith(pattern[1:]))):
            owner = handle
    return owner
