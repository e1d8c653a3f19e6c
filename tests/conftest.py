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
    """Stop the whole run if the kernels compute wrong results here: the message names each failing check and
    whether the kit's kernels or the toolchain (with its versions) is at fault."""
    if not (runtime.interpreter_enabled() or runtime.cuda_available()):
        return
    res = selftest.run()
    if not res.ok:
        pytest.exit(f"{res}\n(no other test can be trusted until this passes)", returncode=3)


@pytest.fixture(scope="module", autouse=True)
def environment_restored():
    """Each test module leaves ``os.environ`` as it found it: a variable its code sets without monkeypatch (an op
    exported with ``FASTPATH_OPS``, a library's own setting) would reach every later module of its worker and the
    notebook kernels those start."""
    import os

    saved = dict(os.environ)
    yield
    if dict(os.environ) != saved:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture(scope="session")
def device() -> str:
    """CUDA when present and the interpreter is off, else the CPU (under the interpreter)."""
    return runtime.kernel_device()


def pytest_collection_modifyitems(config, items):
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device")
    if not torch.cuda.is_available():
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip_gpu)


@pytest.fixture(autouse=True)
def small_cuda_threshold(request, monkeypatch):
    """On CUDA, the semantic tests use the interpreter's row threshold (8) so their small shapes take the Triton route.

    The row threshold protects speed, not correctness: a test of 16 rows checks the same kernel code as one of 4096,
    in a fraction of the time. Tests marked ``gpu`` keep the real per-architecture threshold (one of them checks it).
    """
    if not runtime.cuda_available() or runtime.interpreter_enabled() or "gpu" in request.keywords:
        yield
        return
    from fastpath_lib.rmsnorm import limits, predicate

    monkeypatch.setitem(limits.CUDA_MIN_ROWS, tuple(torch.cuda.get_device_capability()), limits.INTERPRETER_MIN_ROWS)
    monkeypatch.setattr(predicate, "_cuda_min_rows", {})
    yield


@pytest.fixture
def traffic_checked():
    """Every kernel the test runs, under the interpreter's traffic checker: no out-of-bounds access (on a GPU the
    guard bands alone check the writes). Yields the checker's record (``None`` off the interpreter)."""
    if not runtime.interpreter_enabled():
        yield None
        return
    from fastpath_lib import traffic

    with traffic.watch() as t:
        yield t
    assert t.oob_accesses == 0, t.report()
