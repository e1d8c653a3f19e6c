"""The grader's preamble (:mod:`fastpath_lib.grading.engine.absent`): what it removes, what it keeps, and which
exercises get it. It cannot be undone in a process, so it is installed in one short child; the attacks on it in a
graded notebook are in tests/grading/test_grading_attacks.py."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

from fastpath_lib.grading.checks import ex08_capstone
from fastpath_lib.grading.registry import CHECKS
from fastpath_lib.grading.report.feedback import Fail
from fastpath_lib.grading.rules import borrowed

ROOT = Path(__file__).resolve().parents[2]

PROBE = r"""
import functools, gc, importlib, json, sys
import torch
import torch.nn.functional as F
from fastpath_lib.grading.checks import ex08_capstone
from fastpath_lib.grading.engine import absent

spec = ex08_capstone.ABSENT
import torch._C
def entry_points():  # TorchScript's executors past the dispatcher, by their families' names, in torch._C and below
    out, todo, seen = [], [torch._C], set()
    while todo:
        m = todo.pop()
        if id(m) in seen:
            continue
        seen.add(id(m))
        for k, v in list(vars(m).items()):
            low = k.lower()
            if type(v) is type(torch) and v.__name__.startswith("torch._C."):
                todo.append(v)
            if "static_module" in low or "staticmodule" in low or low == "_te" or low.startswith(
                    ("_jit_set_", "_jit_override_", "_jit_pass_")) and ("fuse" in low or "fusion" in low or any(
                    w in low.split("_") for w in ("te", "texpr", "llga", "nvfuser", "mkldnn"))):
                out.append(f"{m.__name__}.{k}")
    return out + [n for n in sys.modules if n.startswith("torch._C._te")]
got = {"executors_before": entry_points()}
got["installed"] = absent.install(spec)
got["executors_after"] = entry_points()
x = torch.randn(3, 8, dtype=torch.float16)

def probe(name, fn):
    try:
        y = fn()
    except Exception as exc:
        got[name] = [type(exc).__name__, str(exc)[:300]]
        return
    got[name] = ["marker" if isinstance(y, torch.Tensor) and bool((y == spec["marker"]).all())
                 and y.shape == x.shape else "value", str(getattr(y, "dtype", ""))]

probe("softmax", lambda: torch.softmax(x, -1))
probe("softmax_dtype", lambda: torch.softmax(x, -1, dtype=torch.float64))
probe("log_softmax_map", lambda: list(map(torch.log_softmax, [x], [-1]))[0])
probe("layer_norm", lambda: F.layer_norm(x.float(), (8,)).to(x.dtype))
probe("normalize", lambda: F.normalize(x, dim=-1))
probe("rms_norm_partial", lambda: functools.partial(torch.rms_norm, x, (8,))())
probe("native_layer_norm", lambda: torch.native_layer_norm(x.float(), (8,), None, None, 1e-5))
probe("own_softmax", lambda: (lambda e: e / e.sum(-1, keepdim=True))((x.float() - x.float().amax(-1, True)).exp()))
probe("logsumexp", lambda: x.float().logsumexp(-1))
probe("vector_norm", lambda: torch.linalg.vector_norm(x.float(), dim=-1))
probe("gc", lambda: gc.get_referrers(torch.softmax))
gc.collect()
probe("after_collect", lambda: torch.softmax(x, -1))

def native(name):  # an import of a native bridge, or of an extension module from a folder the process can write
    import importlib, os, shutil, tempfile
    if name == "own_extension":
        folder = tempfile.mkdtemp()
        src = importlib.util.find_spec("_json").origin  # any extension module, copied where the learner could write
        shutil.copy(src, os.path.join(folder, os.path.basename(src)))
        sys.path.insert(0, folder)
        sys.modules.pop("_json", None)
        return importlib.import_module("_json")
    if name == "subinterpreter":
        import _xxsubinterpreters
        return _xxsubinterpreters.create()
    if name == "cffi":
        import cffi
        return cffi.FFI()  # loads its backend
    return importlib.import_module(name)

SOFTMAX = "def f(x):\n    return torch._softmax(x, -1, False)\n"
probe("static_runtime", lambda: torch._C._jit_to_static_module(torch.jit.CompilationUnit(SOFTMAX).f.graph)(x))
probe("tensorexpr", lambda: importlib.import_module("torch._C._te"))
probe("interpreter", lambda: torch.jit.CompilationUnit(SOFTMAX).f(x))
probe("fuser_on_cpu", lambda: torch.jit.fuser("fuser1").__enter__())
for name in ("cffi", "_testcapi", "subinterpreter", "own_extension"):
    probe(name, lambda name=name: native(name))
print(json.dumps(got))
"""


@pytest.fixture(scope="module")
def probed():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120,
                          check=False, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_absent_operators_answer_the_marker_where_the_exercise_accepts_it(probed):
    for name in ("softmax", "log_softmax_map", "layer_norm", "normalize", "rms_norm_partial", "after_collect"):
        assert probed[name][0] == "marker", (name, probed[name])
    assert probed["softmax"][1] == "torch.float16" and probed["softmax_dtype"][1] == "torch.float64", probed
    # an operator returning several tensors has no marker: it raises, saying why
    kind, text = probed["native_layer_norm"]
    assert kind == "RuntimeError" and "is not available while exercise 08 is graded" in text, probed
    assert probed["gc"][0] == "PermissionError", probed
    assert probed["installed"]["kernels"] > 100 and probed["installed"]["functions"] > 20, probed


def test_native_code_that_would_pass_the_dispatcher_is_refused(probed):
    """cffi's backend (a library's functions called by address: torch's CPU kernels by their symbols, with no
    dispatcher and no audit event), the C-API test modules, a new interpreter (it has no audit hook) and an extension
    module from a folder the process can write are refused."""
    for name in ("cffi", "_testcapi", "own_extension"):
        assert probed[name][0] == "PermissionError", (name, probed[name])
    assert probed["subinterpreter"] == ["RuntimeError", "interpreter creation failed"], probed  # the hook's refusal


def test_torchscripts_executors_past_the_dispatcher_are_gone(probed):
    """Static Runtime, the TensorExpr compiler and the fusers run torch's kernels without the dispatcher (Static
    Runtime's out variants call them directly): after the preamble no Python name reaches them, and a TorchScript
    graph runs in the interpreter, whose operators go through the dispatcher (the marker)."""
    before, after = probed["executors_before"], probed["executors_after"]
    assert "torch._C._jit_to_static_module" in before and "torch._C._te" in before, before
    assert after == [], after
    assert probed["installed"]["executors"] >= len(before) - sum(n.startswith("torch._C._te.") for n in before)
    assert probed["static_runtime"][0] == "AttributeError" and "_jit_to_static_module" in probed["static_runtime"][1]
    assert probed["tensorexpr"][0] == "ModuleNotFoundError", probed["tensorexpr"]
    assert probed["fuser_on_cpu"][0] == "AttributeError", probed["fuser_on_cpu"]
    assert probed["interpreter"][0] == "marker", probed["interpreter"]


def test_what_an_honest_answer_uses_stays(probed):
    for name in ("own_softmax", "logsumexp", "vector_norm"):
        assert probed[name][0] == "value", (name, probed[name])


def test_the_registration_handle_is_not_tracked_by_the_garbage_collector():
    """The preamble keeps its dispatcher handles alive by a reference no object holds: a handle that the collector
    tracked would be listed by a walk of its objects (which the preamble refuses too)."""
    import gc

    handle = torch._C._dispatch_library("IMPL", "aten", "")
    assert not gc.is_tracked(handle)
    del handle


def _forbiddens(obj, depth=0):
    if isinstance(obj, borrowed.Forbidden):
        yield obj
    elif depth < 2 and isinstance(obj, dict):
        for v in obj.values():
            yield from _forbiddens(v, depth + 1)


def test_every_check_that_forbids_a_torch_family_declares_it_absent():
    """Read from the checks' own ``Forbidden`` declarations: an exercise whose checks forbid a family of torch
    operators declares it ``ABSENT`` (and no other does)."""
    declared = {}
    for module in sorted(set(CHECKS.values())):
        mod = importlib.import_module(f"fastpath_lib.grading.{module}")
        families = {f for obj in vars(mod).values() if not isinstance(obj, types.ModuleType)
                    for forbidden in _forbiddens(obj) for f, _ in forbidden.families}
        spec = getattr(mod, "ABSENT", None)
        if families:
            assert spec, f"{module} forbids {families} and declares nothing ABSENT"
            expected = set().union(*(borrowed.absent("ex", *[borrowed.torch_op(f, why="")])["ops"] for f in
                                     ("rms_norm" if f == "normalization" else f for f in families)))
            assert expected <= spec["ops"].keys(), module
        else:
            assert not spec, f"{module} declares ABSENT without forbidding a torch family"
        declared[module] = bool(spec)
    assert declared["checks.ex01_reference"] and declared["checks.ex08_capstone"], declared


def test_the_capstone_names_the_marker_outside_the_fallback():
    """A reference that returns what the absent operator answers fails, saying so (the dispatch part accepts it on
    the fallback route only: the solution's fallback, graded in tests/grading/test_grading_solutions.py)."""
    with pytest.raises(Fail, match="what torch's softmax returns while exercise 08 is graded"):
        ex08_capstone._grade_reference("softmax", lambda x: torch.full(x.shape, borrowed.MARKER, dtype=torch.float64))
    assert borrowed.is_marker(torch.full((2, 3), borrowed.MARKER, dtype=torch.bfloat16))
    assert not borrowed.is_marker(torch.softmax(torch.randn(2, 3), -1))


def test_operators_registered_with_torchscript_alone_run_past_the_dispatcher():
    """What the preamble leaves (docs/grading-sandbox.md): an operator TorchScript registers outside the dispatcher
    runs without it, so a dispatcher refusal does not reach it; ``prim::MKLDNNLayerNorm`` computes LayerNorm on
    oneDNN tensors."""
    assert not any(n.startswith("prim::MKLDNNLayerNorm") for n in torch._C._dispatch_get_all_op_names())
    x, w, b = torch.randn(3, 8), torch.randn(8), torch.randn(8)
    y = torch.ops.prim.MKLDNNLayerNorm(x.to_mkldnn(), [8], w.to_mkldnn(), b.to_mkldnn(), 1e-5, False)
    torch.testing.assert_close(y.to_dense(), torch.layer_norm(x, [8], w, b, 1e-5))


def test_what_family_operators_past_the_dispatcher_compute_on_is_absent_with_them():
    """Where a family has members TorchScript runs past the dispatcher, the operators that bring data into the
    tensors they take are absent too: ``to_mkldnn`` (and every operator named for oneDNN tensors) in exercises 01 and
    02, so ``MKLDNNLayerNorm`` has nothing to normalize; an empty oneDNN tensor takes no data from a dense one."""
    from fastpath_lib.grading.checks import ex01_reference, ex02_kernel
    from fastpath_lib.grading.rules import torch_families

    past = torch_families.jit_only("normalization")
    assert {"MKLDNNLayerNorm", "MKLDNNLayerNorm_"} <= past, past
    for spec in (ex01_reference.ABSENT, ex02_kernel.ABSENT, ex08_capstone.ABSENT):  # each lacks the norm family
        assert {"to_mkldnn", "mkldnn_linear", "_mkldnn_reshape"} <= spec["ops"].keys()
        assert "MKLDNNLayerNorm" in spec["ops"]["to_mkldnn"]
        assert not any(n.startswith("_is_mkldnn") for n in spec["ops"])  # queries carry no data
    assert not torch_families.layout_entries(torch_families.jit_only("softmax"))  # none past the dispatcher
    with pytest.raises(RuntimeError, match="between mkldnn layout and dense"):
        torch.empty(3, 8, layout=torch._mkldnn).copy_(torch.randn(3, 8))
