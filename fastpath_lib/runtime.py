"""Where the kit is running: CUDA or Triton's CPU interpreter, and the versions that matter.

Importing :mod:`fastpath_lib` calls :func:`configure` once. On a machine without CUDA it sets ``TRITON_INTERPRET=1``
unless the user already chose a value, so the Triton kernels run on the CPU through Triton's interpreter. Triton reads
that variable when a kernel is *decorated* (``triton.jit``), so it must be set before :mod:`fastpath_lib.rmsnorm.kernels`
is imported; that module is only imported lazily, on the first Triton-route call.

Nothing here needs a GPU driver: no ``do_bench``, no ``autotune``, no active-device queries.
"""

from __future__ import annotations

import os
import platform
import sys

import torch

__all__ = ["configure", "interpreter_enabled", "cuda_available", "describe", "versions"]

_AUTO_SET = False


def cuda_available() -> bool:
    """Whether torch sees a CUDA device (never raises)."""
    try:
        return bool(torch.cuda.is_available())
    except Exception:  # broken driver installs raise here
        return False


def configure() -> None:
    """Turn on Triton's interpreter when there is no CUDA device and the user has not chosen."""
    global _AUTO_SET
    if "TRITON_INTERPRET" not in os.environ and not cuda_available():
        os.environ["TRITON_INTERPRET"] = "1"
        _AUTO_SET = True


def interpreter_enabled() -> bool:
    """Whether Triton kernels run in the CPU interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "yes", "on")


def versions() -> dict[str, str]:
    """torch, triton, numpy and python versions as strings (``"missing"`` when not installed)."""
    out = {"python": platform.python_version(), "torch": torch.__version__}
    for mod in ("triton", "numpy"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception:
            out[mod] = "missing"
    return out


def describe() -> str:
    """One line naming the mode and versions, printed by the lessons' first cell."""
    v = versions()
    if interpreter_enabled():
        how = "Triton CPU interpreter (TRITON_INTERPRET=1" + (", set by fastpath_lib" if _AUTO_SET else "") + ")"
        mode = f"mode: {how}; timings here are not GPU measurements"
    elif cuda_available():
        cap = torch.cuda.get_device_capability()
        mode = f"mode: CUDA on {torch.cuda.get_device_name()} (sm_{cap[0]}{cap[1]})"
    else:
        mode = "mode: CPU without the Triton interpreter; every call takes the fallback"
    return f"{mode} | torch {v['torch']}, triton {v['triton']}, numpy {v['numpy']}, python {v['python']} " \
           f"({sys.platform})"
