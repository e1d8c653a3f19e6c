"""Shared fixtures: the interpreter self-test runs before any test, and the device tests run on."""

from __future__ import annotations

import pytest
import torch

import fastpath_lib
from fastpath_lib import runtime, selftest

# opt in before any kernel is imported: on a machine without CUDA the kernels run in Triton's interpreter
fastpath_lib.use_interpreter()


@pytest.fixture(scope="session", autouse=True)
def interpreter_selftest():
    """Stop the whole run, naming the versions, if Triton computes wrong results on this machine."""
    if not (runtime.interpreter_enabled() or runtime.cuda_available()):
        return
    res = selftest.run()
    if not res.ok:
        pytest.exit(f"{res}\n(fix the Triton/numpy versions before trusting any other test)", returncode=3)


@pytest.fixture(scope="session")
def device() -> str:
    """CUDA when present and the interpreter is off, else the CPU (under the interpreter)."""
    return "cuda" if runtime.cuda_available() and not runtime.interpreter_enabled() else "cpu"


def pytest_collection_modifyitems(config, items):
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device")
    if not torch.cuda.is_available():
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip_gpu)
