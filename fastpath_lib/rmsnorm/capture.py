"""The recorded CUDA-graph capture tests per architecture: ``capture.json`` beside this module.

The fast path's ``cuda_graph_capture`` condition keeps captured calls on ``F.rms_norm`` on every architecture whose
capture test has not passed. The evidence run's ``capture`` step captures the op in a ``torch.cuda.CUDAGraph`` at the
boundary shapes (both routes; forward, and backward where the reference supports it), replays it on new data, and
compares with the reference; ``python -m fastpath_lib capture RESULTS_DIR`` then writes the verdict here, with the
results folder it came from, the way ``threshold`` writes ``thresholds.json``::

    {"sm_90": {"passed": true, "source": "results/h200-2026-12-03", "device_name": "NVIDIA H200", "cases": 48,
               "ops": {"rms_norm": {"eager": true, "custom_op": true},
                       "fused_add_rms_norm": {"eager": true, "custom_op": false}}, ...}}

A verdict is per op and per path (:data:`PATHS`): ``eager`` is the public function called directly, ``custom_op`` the
registered ``torch.ops.fastpath`` op that ``torch.compile`` graphs and vLLM call; each one's forward only takes the
fast path under capture where its own test passed (an op never inherits another op's record). A backward, shared by
both paths, needs either. An entry without ``ops`` (written before the test was per path) vouches for eager
``rms_norm`` only, which is all it captured.

The predicate reads the file once, at import (:data:`VERIFIED`). Until a GPU run records a pass for an architecture,
a captured call there takes the fallback, as before. Torch only, no Triton.

>>> load("/nonexistent/capture.json")
frozenset()
"""

from __future__ import annotations

from pathlib import Path

import torch

from fastpath_lib.rmsnorm.thresholds import parse_arch, read_record, write_record

__all__ = ["CAPTURE_FILE", "RESULTS_FILE", "VERIFIED", "PATHS", "entries", "load", "record", "verified", "capturing"]

#: The ways a captured call reaches an op: its public function (``eager``), or its registered custom op
#: (``custom_op``: what torch.compile graphs and vLLM call).
PATHS = ("eager", "custom_op")

CAPTURE_FILE = Path(__file__).with_name("capture.json")
#: The file the evidence run's capture step writes into its results folder (one row per captured case).
RESULTS_FILE = "capture.json"
_ABOUT = ("CUDA-graph capture test per CUDA architecture (passed or not), each with the results folder it came from. "
          "Written by `python -m fastpath_lib capture RESULTS_DIR` from the evidence run's capture step; read by the "
          "predicate at import: a captured call takes the fast path only where the test passed.")


def entries(path: str | Path = CAPTURE_FILE) -> dict[str, dict]:
    """The file's entries by architecture name (``{}`` when the file does not exist).

    Raises:
        ValueError: the file is not JSON, or an entry lacks a boolean ``passed`` or a ``source``.
    """
    return read_record(path, lambda e: isinstance(e.get("passed"), bool), "a boolean passed")


def load(path: str | Path = CAPTURE_FILE) -> frozenset[tuple[tuple[int, int], str, str]]:
    """``((major, minor), op, path)`` of every recorded capture test that passed (an entry without ``ops``: eager
    ``rms_norm`` only)."""
    out = set()
    for arch, e in entries(path).items():
        cap = parse_arch(arch)
        ops = e.get("ops")
        if not isinstance(ops, dict):
            if e["passed"]:
                out.add((cap, "rms_norm", "eager"))
            continue
        out |= {(cap, op, p) for op, paths in ops.items() if isinstance(paths, dict)
                for p, ok in paths.items() if ok is True}
    return frozenset(out)


#: What passed, read once at import (what the predicates' capture conditions read): ``(capability, op, path)``.
VERIFIED: frozenset[tuple[tuple[int, int], str, str]] = load()


def verified(capability, op: str = "rms_norm", path: str | None = "eager") -> bool:
    """Whether a captured call of ``op`` by ``path`` may take the fast path on this ``(major, minor)`` (``None``: not
    a CUDA device); ``path=None``: by either path (a backward, which both paths share).

    >>> verified(None), verified((7, 5)), verified((7, 5), "fused_add_rms_norm", None)
    (False, False, False)
    """
    if capability is None:
        return False
    cap = tuple(capability)
    return any(c == cap and o == op and (path is None or p == path) for c, o, p in VERIFIED)


def capturing(device) -> bool:
    """Whether a CUDA graph is being captured on the current stream, for a tensor on ``device`` (never raises)."""
    if getattr(device, "type", None) != "cuda":
        return False
    try:
        return bool(torch.cuda.is_current_stream_capturing())
    except Exception:  # noqa: BLE001 - a fake CUDA tensor on a machine without a driver
        return False


def record(arch: str, passed: bool, source: str, *, path: str | Path = CAPTURE_FILE, **facts) -> dict:
    """Write (or replace) one architecture's entry, keeping the others; the file is replaced atomically.

    Args:
        arch: ``"sm_90"``.
        passed: whether every captured case replayed to the reference's values.
        source: the results folder the capture test came from.
        path: the file (default :data:`CAPTURE_FILE`).
        facts: more to record beside it (device name, cases, failures, commit, date).

    Returns:
        the entry written.
    """
    if not isinstance(passed, bool):
        raise ValueError(f"passed must be a bool, got {passed!r}")
    entry = {"passed": passed, "source": str(source), **facts}
    return write_record(path, _ABOUT, arch, entry, entries(path))
