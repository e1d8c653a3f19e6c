"""PyTorch's own fast-path form (``torch/_native``), both ways the kit offers it.

The patch (``upstream/pytorch_native_rms_norm_triton.patch``, written by ``tools/make_pytorch_native.py``): it is
current, it applies to a copy of the installed torch's ``torch/_native`` (``git apply --check``, then ``patch -p1
--dry-run`` on the same copy), its files pass ruff at PyTorch's settings and ``ruff format`` at 88 columns, and its
own tests (``test/python_native/test_rmsnorm_triton.py``, PyTorch's ``TestCase``) pass here, in this process, with
the patched ``torch._native.ops.norm`` standing in for the installed one.

The run-time registration (:mod:`fastpath_lib.rmsnorm.native_override`): importing it registers nothing; registered
for the ``CPU`` key, ``F.rms_norm`` launches the kit's kernels inside the predicate and ATen's kernel outside it, with
ATen's values; removing it restores ATen's kernel.
"""

from __future__ import annotations

import importlib.util
import io
import re
import shutil
import subprocess
import sys
import unittest
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from fastpath_lib import record_routes, runtime
from fastpath_lib.rmsnorm import kernels, native_override

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("make_pytorch_native", ROOT / "tools" / "make_pytorch_native.py")
make = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make)

pytestmark = pytest.mark.skipif(not runtime.interpreter_enabled(), reason="runs the kernels under the interpreter")
NORM = "torch._native.ops.norm"


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """A copy of the installed ``torch/_native`` with the patch applied (checked by git, then by ``patch``)."""
    root = tmp_path_factory.mktemp("torch-native")
    shutil.copytree(make.torch_site() / "torch" / "_native", root / "torch" / "_native",
                    ignore=shutil.ignore_patterns("__pycache__"))
    patch = str(make.TARGET)
    for cmd in (["git", "apply", "--check", patch], ["patch", "-p1", "--dry-run", "-s", "-i", patch],
                ["git", "apply", patch]):
        res = subprocess.run(cmd, cwd=root, capture_output=True, text=True, check=False)
        assert res.returncode == 0, f"{' '.join(cmd[:2])} failed on the installed torch's files:\n{res.stderr}"
    return root


def test_the_patch_is_what_the_generator_writes():
    assert make.TARGET.read_text() == make.render(), "python tools/make_pytorch_native.py"


def test_the_note_is_the_patchs_in_pytorchs_template(tree):
    note = make.NOTE.read_text()
    assert note == make.render_note(make.TARGET.read_text()), "python tools/make_pytorch_native.py"
    lines = note.splitlines()
    assert lines[2] == make.PR_TEMPLATE_HEAD and lines[-len(make.PR_TEMPLATE_BOXES):] == list(make.PR_TEMPLATE_BOXES)
    assert all(f"| `{rel}` |" in note for rel in make.CHANGED)
    assert "**GPU: unmeasured.**" in note and not re.search(r"\d\.\d+x|speed-ups? (over|of|range)", note)
    assert "fastpath" not in note.lower() and "fastpath" not in make.TARGET.read_text().lower()


def test_every_refusal_of_cond_says_why(tree):
    impl = (tree / make.IMPL_FILE).read_text()
    why = make.refusals(impl)
    assert len(why) == impl.count("return False") >= 15 and all(f"- {w}" in make.NOTE.read_text() for w in why)
    with pytest.raises(SystemExit, match="a refusal without a comment"):
        make.refusals("def cond(x):\n    # a reason\n    if x:\n        return False\n    if not x:\n"
                      "        return False\n")


@pytest.mark.parametrize("rel", make.CHANGED)
def test_the_patched_files_pass_pytorchs_ruff(tree, rel):
    text = (tree / rel).read_text()
    check = make.ruff(["check"], text, rel)
    assert check.returncode == 0, check.stdout + check.stderr
    fmt = make.ruff(["format", "--check"], text, rel)
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr


@pytest.fixture
def patched_norm(tree, monkeypatch):
    """``torch._native.ops.norm`` imported from the patched copy (its ``__init__`` registers nothing without CUDA);
    the installed modules come back afterwards."""
    import torch._native.ops as ops

    saved = {k: v for k, v in sys.modules.items() if k == NORM or k.startswith(NORM + ".")}
    folder = tree / "torch" / "_native" / "ops" / "norm"
    spec = importlib.util.spec_from_file_location(NORM, folder / "__init__.py",
                                                  submodule_search_locations=[str(folder)])
    module = importlib.util.module_from_spec(spec)
    for k in saved:
        del sys.modules[k]
    sys.modules[NORM] = module
    monkeypatch.setattr(ops, "__path__", [str(folder.parent), *ops.__path__])
    monkeypatch.setattr(ops, "norm", module)
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        for k in [k for k in sys.modules if k == NORM or k.startswith(NORM + ".")]:
            del sys.modules[k]
        sys.modules.update(saved)


def test_the_patchs_tests_pass_here(tree, patched_norm):
    spec = importlib.util.spec_from_file_location("test_rmsnorm_triton", tree / make.TEST_FILE)
    tests = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tests)
    result = unittest.TextTestRunner(stream=io.StringIO(), verbosity=0).run(
        unittest.defaultTestLoader.loadTestsFromModule(tests))
    problems = [f"{t.id()}:\n{tb}" for t, tb in result.failures + result.errors]
    assert not problems, "\n".join(problems)
    assert not result.skipped, result.skipped
    assert result.testsRun >= 15


# --- the run-time registration ----------------------------------------------------------------------------------------

def _kit_nodes() -> list:
    from torch._native import registry

    return [n for nodes in registry._graphs.values() for n in nodes if n.dsl_name == native_override.BACKEND]


def test_importing_the_kit_registers_nothing():
    assert "fastpath_lib.rmsnorm.native_override" in sys.modules
    assert _kit_nodes() == [] and native_override.registered_overrides() == {}


@pytest.fixture
def launches(monkeypatch):
    """The kit's forward and backward launches, counted."""
    counts = {"forward": 0, "backward": 0}
    for name in counts:
        real = getattr(kernels, name)

        def counted(*a, _real=real, _name=name, **k):
            counts[_name] += 1
            return _real(*a, **k)

        monkeypatch.setattr(kernels, name, counted)
    return counts


def _run(x, shape, w):
    """``F.rms_norm`` and its gradients (input, and weight when given)."""
    x = x.detach().requires_grad_()
    w = None if w is None else w.detach().requires_grad_()
    y = F.rms_norm(x, shape, w, 1e-5)
    return (y.detach(), *torch.autograd.grad(y, [t for t in (x, w) if t is not None], torch.ones_like(y)))


CASES = {  # name: (input, normalized_shape, weight, inside the predicate)
    "16 rows": (lambda: torch.randn(16, 64), [64], lambda: torch.randn(64), True),
    "3-d, no weight": (lambda: torch.randn(2, 8, 32), [32], lambda: None, True),
    "a row of zeros (eps alone sets its rstd)": (lambda: torch.cat([torch.randn(15, 64), torch.zeros(1, 64)]), [64],
                                                 lambda: torch.randn(64), True),
    "4 rows (below the row threshold)": (lambda: torch.randn(4, 64), [64], lambda: torch.randn(64), False),
    "width 30 (rows not 16-byte aligned)": (lambda: torch.randn(16, 30), [30], lambda: torch.randn(30), False),
    "transposed": (lambda: torch.randn(64, 16).t(), [64], lambda: torch.randn(64), False),
    "float64": (lambda: torch.randn(16, 64, dtype=torch.float64), [64], lambda: None, False),
}


@pytest.mark.parametrize("case", list(CASES))
def test_registered_f_rms_norm_takes_the_kit_inside_the_predicate_and_aten_outside(case, launches):
    make_x, shape, make_w, inside = CASES[case]
    torch.manual_seed(0)
    x, w = make_x(), make_w()
    expected = _run(x, shape, w)
    before = torch.library.get_kernel("aten::_fused_rms_norm", "CPU")
    with native_override.register("CPU"), record_routes() as fwd, record_routes("backward") as bwd:
        assert native_override.registered_overrides() == {"CPU": [native_override.BACKEND]}
        actual = _run(x, shape, w)
    assert launches == ({"forward": 1, "backward": 1} if inside else {"forward": 0, "backward": 0})
    assert (fwd["triton"], bwd["triton"]) == ((1, 1) if inside else (0, 0))
    for a, e in zip(actual, expected, strict=True):
        torch.testing.assert_close(a, e)
    assert _kit_nodes() == [] and native_override.registered_overrides() == {}
    assert str(torch.library.get_kernel("aten::_fused_rms_norm", "CPU")) == str(before)


def test_the_pinned_torch_has_no_cpu_backward_and_a_composite_forward():
    """Why the patch's tests register for ``CPU``, the backward's formula the fallthrough (upstream/README.md)."""
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    assert not has("aten::_fused_rms_norm_backward", "CPU")
    assert has("aten::_fused_rms_norm", "CompositeImplicitAutograd") and not has("aten::_fused_rms_norm", "CPU")


def test_a_key_torch_refuses_leaves_nothing_behind():
    with pytest.raises(ValueError, match="dispatch_key='Meta'"):
        native_override.register("Meta")
    assert _kit_nodes() == []


def test_the_declared_overrides_are_read_from_the_installed_sources(tmp_path, monkeypatch):
    declared = native_override.declared_overrides()
    assert {"file": "torch/_native/ops/norm/rmsnorm_impl.py", "dsl": "cutedsl", "op": "_fused_rms_norm",
            "dispatch_key": "CUDA"} in declared
    assert {d["dsl"] for d in declared} >= {"triton", "cutedsl", "native"}
    fake = tmp_path / "torch"  # a tree with one Triton override, registered through the registry itself
    (fake / "_native" / "ops" / "x").mkdir(parents=True)
    (fake / "_native" / "ops" / "x" / "impl.py").write_text(
        "from ... import registry\nregistry.register_op_override('triton', 'aten', 'mm', 'XPU', c, i)\n")
    monkeypatch.setattr(torch, "__file__", str(fake / "__init__.py"))
    assert native_override.declared_overrides() == [
        {"file": "torch/_native/ops/x/impl.py", "dsl": "triton", "op": "mm", "dispatch_key": "XPU"}]


def test_the_patchs_cond_is_the_kits_predicate_on_every_boundary_point(patched_norm, monkeypatch):
    """Every tensor boundary point the kit's predicate declares (its context changes aside: forced fallback, capture,
    transforms and subclasses do not reach a backend key) gets the same answer from the patch's ``cond``."""
    from fastpath_lib.boundary import boundary_points
    from fastpath_lib.rmsnorm import limits, predicate

    impl = importlib.import_module(f"{NORM}.triton_impl")
    monkeypatch.setattr(impl, "_MIN_ROWS", limits.INTERPRETER_MIN_ROWS)
    points = [p for p in boundary_points(device="cpu") if not p.context]
    assert len(points) > 40
    for p in points:
        x, shape, w = p.spec.build(seed=1, device="cpu").args()
        kit = predicate.eligible(x, shape, w, False) and predicate.runtime_eligible(x, w)
        assert impl._fused_rms_norm_cond(x, list(shape), w, None) == kit == p.holds, p.id
