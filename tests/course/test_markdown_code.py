"""The Python a learner reads in a lesson's or an exercise's markdown and may type: every fenced ``python`` block
compiles, and every keyword it passes to torch is one torch takes (reader 12b F1: ``x.pow(2).mean(dims=...)``, a
``TypeError``; issue 44). In-process, no kernel: the blocks are parsed, never run.

Which keywords torch takes comes from torch itself: a Python function's signature, else the type stubs torch ships
(``torch/_C/*.pyi``, generated from the same declarations as its argument parser), every overload together. A call is
checked when its callee is known: ``torch.<name>`` and ``F.<name>`` (``torch.nn.functional``) by what the name is,
``<expr>.<name>`` when ``<name>`` is a method of ``torch.Tensor``. A callee torch has no stub or signature for is not
judged (no false alarm where the source of truth is missing)."""

from __future__ import annotations

import ast
import inspect
import re
from functools import cache
from pathlib import Path

import nbformat
import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
_TORCH = Path(torch.__file__).resolve().parent
_FENCE = re.compile(r"```python\n(.*?)```", re.S)
#: The names a block may call torch through without importing it (the notebooks' own imports).
_MODULES = {"torch": torch, "F": torch.nn.functional}
#: The stub that declares the builtins of a module (``torch.sqrt`` is ``torch._C._VariableFunctions.sqrt``).
_STUB_OF_MODULE = {"torch": "_C/_VariableFunctions.pyi", "torch._C._VariableFunctions": "_C/_VariableFunctions.pyi",
                   "torch._C._nn": "_C/_nn.pyi", "torch.nn.functional": "nn/functional.pyi"}
#: The other names torch's argument parser takes for a parameter (``numpy_compatibility_arg_names`` in
#: torch/csrc/utils/python_arg_parser.cpp): ``x.sum(axis=0)`` is ``x.sum(dim=0)``.
_NUMPY_NAMES = {"dim": ("axis",), "keepdim": ("keepdims",), "input": ("x", "a", "x1"), "other": ("x2",)}


def _blocks() -> list[tuple[str, str]]:
    out = []
    for folder in ("notebooks", "exercises"):
        for path in sorted((ROOT / folder).glob("*.ipynb")):
            for n, cell in enumerate(nbformat.read(path, as_version=4).cells):
                if cell.cell_type == "markdown":
                    out += [(f"{folder}/{path.name} cell {n} block {k}", b)
                            for k, b in enumerate(_FENCE.findall(cell.source), 1)]
    return out


BLOCKS = _blocks()


def _params(fn_args: ast.arguments, skip_self: bool) -> set[str]:
    args = [*fn_args.posonlyargs, *fn_args.args][1 if skip_self else 0:]
    return {a.arg for a in (*args, *fn_args.kwonlyargs)}


@cache
def _stub(rel: str) -> dict[str, set[str] | None]:
    """``{name: parameter names over every overload}`` of a stub's functions and ``TensorBase``'s methods (keyed
    ``Tensor.<name>``); ``None`` where an overload takes ``**kwargs``."""
    tree = ast.parse((_TORCH / rel).read_text(encoding="utf-8"))
    out: dict[str, set[str] | None] = {}

    def add(key: str, fn: ast.FunctionDef, skip_self: bool):
        if out.get(key, set()) is None:
            return
        out[key] = None if fn.args.kwarg else out.get(key, set()) | _params(fn.args, skip_self)

    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            add(node.name, node, False)
        elif isinstance(node, ast.ClassDef) and node.name == "TensorBase":
            for fn in node.body:
                if isinstance(fn, ast.FunctionDef):
                    add(f"Tensor.{fn.name}", fn, True)
    return out


def _signature_names(fn) -> set[str] | None:
    """Parameter names of a Python callable (``None``: it takes ``**kwargs``); ``KeyError`` when it has none."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        raise KeyError(fn) from None
    if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        return None
    return set(sig.parameters)


def accepted(owner: str, name: str) -> set[str] | None:
    """The keywords torch takes for ``torch.<name>``, ``F.<name>`` or ``Tensor.<name>`` (``owner``); ``None``: any,
    or torch does not declare them. ``AttributeError`` when torch has no such callable."""
    fn = getattr(torch.Tensor if owner == "Tensor" else _MODULES[owner], name)
    try:
        names = _signature_names(fn)
    except KeyError:
        if owner == "Tensor":
            names = _stub("_C/__init__.pyi").get(f"Tensor.{name}")
        else:
            stub = _STUB_OF_MODULE.get(getattr(fn, "__module__", None) or "")
            names = _stub(stub).get(name) if stub else None
    if names is None:
        return None
    return names | {alias for n in names for alias in _NUMPY_NAMES.get(n, ())}


def _callee(func: ast.expr) -> tuple[str, str] | None:
    """``(owner, name)`` of a call's callee where the owner is torch, ``F`` or (by its method's name) a tensor."""
    if not isinstance(func, ast.Attribute):
        return None
    if isinstance(func.value, ast.Name) and func.value.id in _MODULES:
        return func.value.id, func.attr
    if isinstance(func.value, (ast.Constant, ast.List, ast.Dict, ast.Tuple, ast.Set, ast.JoinedStr)):
        return None  # a method of a literal (``", ".join``) is not a tensor's
    return ("Tensor", func.attr) if hasattr(torch.Tensor, func.attr) else None


def keyword_problems(source: str) -> list[str]:
    """What the code ``source`` passes to torch that torch does not take (an empty list: nothing)."""
    problems = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or (callee := _callee(node.func)) is None:
            continue
        owner, name = callee
        try:
            names = accepted(owner, name)
        except AttributeError:
            problems.append(f"{owner}.{name} is not in torch {torch.__version__}")
            continue
        if names is None:
            continue
        problems += [f"{owner}.{name}() takes no keyword {kw.arg!r} (it takes {', '.join(sorted(names))})"
                     for kw in node.keywords if kw.arg is not None and kw.arg not in names]
    return problems


def test_there_are_blocks_to_check():
    assert len(BLOCKS) >= 3, BLOCKS


@pytest.mark.parametrize("where, block", BLOCKS, ids=[w for w, _ in BLOCKS])
def test_each_python_block_compiles_and_passes_torch_only_keywords_it_takes(where, block):
    compile(block, where, "exec")
    assert keyword_problems(block) == [], where


def test_the_keyword_check_refuses_what_torch_refuses_and_takes_what_it_takes():
    """Each verdict agrees with torch's own parser on a small tensor."""
    x = torch.ones(2, 3)
    cases = {"x.pow(2).mean(dims=(-1,), keepdim=True)": False,  # reader 12b F1's line
             "x.pow(2).mean(dim=(-1,), keepdim=True)": True,
             "x.sum(axis=0, keepdims=True)": True,  # the numpy names torch's parser takes
             "torch.sqrt(x, outt=None)": False,
             "torch.randn(2, 3, dtype=torch.float64, requires_grad=True)": True,  # factory keywords
             "F.rms_norm(x, [3], eps=1e-6)": True,
             "F.rms_norm(x, [3], epsilon=1e-6)": False,
             "x.to(torch.float16, non_blocking=False)": True,
             "x.split(1, dims=0)": False}  # a Tensor method written in Python
    for code, ok in cases.items():
        try:
            eval(code, {"x": x, **_MODULES})
            runs = True
        except TypeError:
            runs = False
        assert runs is ok, code
        assert (keyword_problems(code) == []) is ok, (code, keyword_problems(code))
    assert keyword_problems("torch.sqrtt(x)"), "a name torch does not have"
    assert keyword_problems('", ".join(["a"], x=1)') == [], "a literal's method is not judged"
