"""Environment metadata recorded next to every result (``environment.json``)."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
from pathlib import Path

import torch

from fastpath_lib import runtime
from fastpath_lib.bench.schema import measurement_label
from fastpath_lib.bench.timing import gpu_measurement

__all__ = ["environment", "REQUIRED_KEYS", "gpu_state", "SMI_FIELDS"]

#: What :func:`gpu_state` asks ``nvidia-smi --query-gpu`` for: the device, its clocks against their maxima, power,
#: temperature, the active throttle reasons (a bitmask: 0x0 none, 0x1 idle, 0x4 power cap, 0x20 SW thermal, 0x40
#: HW thermal, ...), MIG and ECC modes, utilisation and memory (a borrowed GPU may be shared).
SMI_FIELDS = ("name", "pci.bus_id", "pstate", "clocks.sm", "clocks.max.sm", "clocks.mem", "clocks.max.mem",
              "power.draw", "power.limit", "temperature.gpu", "clocks_throttle_reasons.active", "mig.mode.current",
              "ecc.mode.current", "utilization.gpu", "memory.used", "memory.total")

#: Keys every ``environment.json`` carries (tests check them).
REQUIRED_KEYS = ("gpu_measurement", "device", "device_name", "compute_capability", "driver_version", "cuda_version",
                 "torch", "triton", "python", "os", "cpu_model", "interpreter", "git_commit", "git_dirty", "timestamp",
                 "harness")


def _git(*args: str) -> str | None:
    root = Path(__file__).resolve().parents[2]
    try:
        out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10)
    except Exception:
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _driver_version() -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except Exception:
        return None


def _smi(fields, run) -> tuple[int, str, str]:
    res = run(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader"], capture_output=True,
              text=True, timeout=15)
    return res.returncode, res.stdout, res.stderr


def gpu_state(run=subprocess.run) -> dict:
    """The GPU's state now, as ``nvidia-smi --query-gpu`` reports it (:data:`SMI_FIELDS`, one dict per GPU), with the
    time it was read; ``{"available": False, "why": ...}`` when nvidia-smi is absent or fails (recorded, not raised).
    A field this driver does not know is asked alone and recorded as ``"unsupported"`` (a whole query fails on one).

    Args:
        run: ``subprocess.run`` (tests pass a fake).
    """
    when = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    try:
        rc, out, err = _smi(SMI_FIELDS, run)
        if rc == 0:
            rows = [[v.strip() for v in line.split(",")] for line in out.strip().splitlines() if line.strip()]
            return {"available": True, "read_at": when, "gpus": [dict(zip(SMI_FIELDS, r)) for r in rows]}
        per = {}
        for f in SMI_FIELDS:  # find the field this driver refuses
            rc, out, err1 = _smi((f,), run)
            per[f] = [v.strip() for v in out.strip().splitlines()] if rc == 0 else None
        n = max((len(v) for v in per.values() if v), default=0)
        if not n:
            return {"available": False, "read_at": when, "why": f"nvidia-smi exited {rc}: {(err or out).strip()[:300]}"}
        gpus = [{f: (v[i] if v and i < len(v) else "unsupported") for f, v in per.items()} for i in range(n)]
        return {"available": True, "read_at": when, "gpus": gpus}
    except FileNotFoundError:
        return {"available": False, "read_at": when, "why": "nvidia-smi not found on PATH"}
    except Exception as exc:  # noqa: BLE001 - a state that cannot be read is recorded as such
        return {"available": False, "read_at": when, "why": f"nvidia-smi failed: {type(exc).__name__}: {exc}"[:300]}


def environment(harness: dict | None = None) -> dict:
    """Describe where a benchmark runs: device, versions, commit, time and harness settings.

    Args:
        harness: the harness settings to record (timer, warm-up, repetitions, input sets, quick flag).

    Returns:
        a JSON-serialisable dict with at least :data:`REQUIRED_KEYS`. ``gpu_measurement`` is true only when a CUDA
        device runs the kernels natively (not under ``TRITON_INTERPRET=1``).

    Note:
        Off CUDA the device fields are ``None`` and ``gpu_measurement`` is false; nothing here needs a driver.

    >>> environment()["gpu_measurement"] in (True, False)
    True
    """
    cuda = runtime.cuda_available()
    interp = runtime.interpreter_enabled()
    v = runtime.versions()
    env = {
        "gpu_measurement": gpu_measurement(),
        "device": "cuda" if cuda else "cpu",
        "device_name": torch.cuda.get_device_name() if cuda else None,
        "compute_capability": ("sm_%d%d" % torch.cuda.get_device_capability()) if cuda else None,
        "device_count": torch.cuda.device_count() if cuda else 0,
        "driver_version": _driver_version() if cuda else None,
        "cuda_version": torch.version.cuda,
        "torch": v["torch"],
        "triton": v["triton"],
        "numpy": v["numpy"],
        "python": v["python"],
        "os": platform.platform(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "interpreter": interp,
        "git_commit": _git("rev-parse", "HEAD"),
        "git_dirty": None,
        "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "harness": dict(harness or {}),
    }
    status = _git("status", "--porcelain", "--untracked-files=no")
    env["git_dirty"] = None if status is None else bool(status)
    if cuda:
        props = torch.cuda.get_device_properties(0)
        env["device_memory_gib"] = round(props.total_memory / 2**30, 1)
        env["sm_count"] = props.multi_processor_count
        env["gpu_state"] = gpu_state()
    env["measurement_label"] = measurement_label(env)
    return env


def region(limits) -> dict | None:
    """What ``environment.json`` records as ``region``: the size limits the dispatch applied in this run (rows at least
    ``min_rows``, at most ``max_cols`` columns) and where the row threshold came from; the boundary plot draws it.
    ``limits`` is what an op's ``OpSpec.limits(device)`` returns: read for ``max_cols`` (``None`` without one: nothing
    recorded), ``min_rows`` (1 without one) and ``source``.

    >>> from types import SimpleNamespace
    >>> region(SimpleNamespace(min_rows=8, max_cols=16384, source="interpreter"))
    {'min_rows': 8, 'max_cols': 16384, 'source': 'interpreter'}
    """
    max_cols = getattr(limits, "max_cols", None)
    if max_cols is None:
        return None
    return {"min_rows": int(getattr(limits, "min_rows", 1)), "max_cols": int(max_cols),
            "source": str(getattr(limits, "source", ""))}
