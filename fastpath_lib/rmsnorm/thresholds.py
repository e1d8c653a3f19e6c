"""The recorded row thresholds per CUDA architecture: ``thresholds.json`` beside this module.

Each entry says from which results folder its value came, so a reviewer can trace it::

    {"sm_90": {"min_rows": 512, "source": "results/h200-2026-12-02", "device_name": "NVIDIA H200", ...}}

``python -m fastpath_lib threshold RESULTS_DIR`` writes an entry from a recorded GPU sweep; the predicate reads the
file once, at import (:func:`load`), into ``CUDA_MIN_ROWS``. With no entry for an architecture the predicate's
conservative default applies. Standard library only (no torch): readable anywhere, cheap at import.

>>> parse_arch("sm_90"), arch_name((8, 6))
((9, 0), 'sm_86')
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

__all__ = ["THRESHOLDS_FILE", "load", "entries", "record", "parse_arch", "arch_name", "read_record",
           "write_record"]

THRESHOLDS_FILE = Path(__file__).with_name("thresholds.json")
_ABOUT = ("Row threshold (CUDA_MIN_ROWS) per CUDA architecture, each with the results folder it came from. Written by "
          "`python -m fastpath_lib threshold RESULTS_DIR` from a recorded GPU sweep; read by the predicate at import.")


def parse_arch(name: str) -> tuple[int, int]:
    """``"sm_90"`` -> ``(9, 0)``; ``ValueError`` for anything else."""
    m = re.fullmatch(r"sm_(\d+)(\d)", str(name))
    if not m:
        raise ValueError(f"architecture {name!r} is not of the form sm_XY (e.g. sm_90)")
    return int(m.group(1)), int(m.group(2))


def arch_name(cap: tuple[int, int]) -> str:
    """``(9, 0)`` -> ``"sm_90"``."""
    return f"sm_{cap[0]}{cap[1]}"


def read_record(path: str | Path, valid, need: str) -> dict[str, dict]:
    """A per-architecture record's entries by architecture name (``{}`` when the file does not exist).

    The shared reader of ``thresholds.json`` and ``capture.json``: a JSON object of ``sm_XY`` entries (keys starting
    with ``_`` are notes), each a dict that ``valid(entry)`` accepts and that names its ``source``.

    Raises:
        ValueError: the file is not JSON, an architecture name is not ``sm_XY``, or an entry is invalid (the message
            says it needs ``need`` and the source results folder).
    """
    p = Path(path)
    if not p.exists():
        return {}
    try:
        data = json.loads(p.read_text())
    except ValueError as exc:
        raise ValueError(f"{p}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{p}: expected a JSON object of architectures")
    out = {}
    for arch, entry in data.items():
        if arch.startswith("_"):
            continue
        parse_arch(arch)
        if not isinstance(entry, dict) or not valid(entry) or not entry.get("source"):
            raise ValueError(f"{p}: entry {arch!r} needs {need} and the source results folder")
        out[arch] = entry
    return out


def write_record(path: str | Path, about: str, arch: str, entry: dict, current: dict[str, dict]) -> dict:
    """Write ``current`` with ``arch``'s entry replaced by ``entry`` (``about`` as the file's note), atomically."""
    parse_arch(arch)
    p = Path(path)
    current = {**current, arch: entry}
    data = {"_about": about, **{k: current[k] for k in sorted(current)}}
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    tmp.replace(p)
    return entry


def entries(path: str | Path = THRESHOLDS_FILE) -> dict[str, dict]:
    """The file's entries by architecture name (``{}`` when the file does not exist).

    Raises:
        ValueError: the file is not JSON, or an entry lacks an integer ``min_rows`` >= 1 or a ``source``.
    """
    return read_record(path, lambda e: isinstance(e.get("min_rows"), int) and e["min_rows"] >= 1,
                       "an integer min_rows >= 1")


def load(path: str | Path = THRESHOLDS_FILE) -> dict[tuple[int, int], int]:
    """``{(major, minor): min_rows}`` for every recorded architecture (what ``CUDA_MIN_ROWS`` holds).

    >>> load("/nonexistent/thresholds.json")
    {}
    """
    return {parse_arch(a): int(e["min_rows"]) for a, e in entries(path).items()}


def record(arch: str, min_rows: int, source: str, *, path: str | Path = THRESHOLDS_FILE, **facts) -> dict:
    """Write (or replace) one architecture's entry, keeping the others; the file is replaced atomically.

    Args:
        arch: ``"sm_90"``.
        min_rows: the threshold.
        source: the results folder the sweep came from.
        path: the file (default :data:`THRESHOLDS_FILE`).
        facts: more to record beside it (device name, swept widths, per-width crossovers, commit, date).

    Returns:
        the entry written.
    """
    parse_arch(arch)
    if int(min_rows) < 1:
        raise ValueError(f"min_rows must be >= 1, got {min_rows}")
    entry = {"min_rows": int(min_rows), "source": str(source), **facts}
    return write_record(path, _ABOUT, arch, entry, entries(path))
