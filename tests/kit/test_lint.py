"""The kit runs its own linter, at the settings in ``pyproject.toml``, over the library, its tools and its tests.

The lessons ask learners to run a target's linters with the target's settings before review; the kit does the same
for itself on every test run. The rules and the one rule left out, with why, are in ``pyproject.toml``.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PATHS = ("fastpath_lib", "tools", "tests")


def _has_ruff() -> bool:
    try:  # on the GPU machine's bare package set the finder refuses hidden modules by raising
        return importlib.util.find_spec("ruff") is not None
    except ImportError:
        return False


pytestmark = pytest.mark.skipif(not _has_ruff(), reason="ruff is not installed (the dev extra pins it)")


def _ruff(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=120)


def test_ruff_passes_on_the_library_tools_and_tests():
    res = _ruff(*PATHS)
    assert res.returncode == 0, f"ruff check {' '.join(PATHS)}:\n{res.stdout[-4000:]}{res.stderr[-2000:]}"


def test_the_kit_settings_find_what_they_select(tmp_path: Path):
    """The configuration is read and selects more than ruff's defaults: a planted file fails on each family."""
    bad = tmp_path / "bad.py"
    bad.write_text("import sys\nfrom typing import Optional\n\n\n"
                   "def f(x: Optional[int], acc=[]):\n    return x  # " + "long " * 30 + "\n")
    res = _ruff("--config", str(ROOT / "pyproject.toml"), str(bad), cwd=tmp_path)
    assert res.returncode == 1, res.stdout
    for code in ("F401", "E501", "UP045", "B006"):
        assert code in res.stdout, f"{code} not reported:\n{res.stdout}"
