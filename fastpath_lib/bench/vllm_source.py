"""What an installed vLLM has for an op outside its IR, read from vLLM's source (nothing imported, no list typed in).

vLLM keeps two kinds of op a fast path can target: the IR ops of ``vllm.ir`` (``vllm.ir.op.IrOp.registry``, asked at
run time by :mod:`fastpath_lib.bench.vllmhost`) and the layers registered with
``@CustomOp.register("NAME")`` (``vllm/model_executor/custom_op.py``: each class is kept in ``op_registry`` under its
name, and its ``forward_cuda`` and the like call vLLM's compiled kernels through ``torch.ops._C``). Importing the
module of a CustomOp layer needs vLLM's dependencies, so :func:`custom_op_layer` reads the layer from the source of
the vLLM package instead: the class decorated with that registration (vLLM's own ``CustomOp``, imported from
``vllm.model_executor.custom_op``), its file, and the ``torch.ops._C`` ops its body names. Many kernels (most of the
quantization ones) have neither an IR op nor a layer, only a Python binding in ``vllm/_custom_ops.py``:
:func:`custom_ops_function` reads that.
"""

from __future__ import annotations

import ast
from pathlib import Path

__all__ = ["CUSTOM_OP_MODULE", "custom_op_layer", "custom_ops_function", "layer_sentence"]

#: Where vLLM's ``CustomOp`` (and its ``register``) is defined: a layer registered with another class of that name
#: (vLLM's hardware-agnostic copy, say) is not in the registry vLLM's model code reads.
CUSTOM_OP_MODULE = "vllm.model_executor.custom_op"


def _custom_op_names(tree: ast.Module) -> set[str]:
    return {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == CUSTOM_OP_MODULE
            for a in n.names if a.name == "CustomOp"}


def _registers(dec: ast.expr, names: set[str], op: str) -> bool:
    return (isinstance(dec, ast.Call) and isinstance(dec.func, ast.Attribute) and dec.func.attr == "register"
            and isinstance(dec.func.value, ast.Name) and dec.func.value.id in names and len(dec.args) >= 1
            and isinstance(dec.args[0], ast.Constant) and dec.args[0].value == op)


def custom_op_layer(op: str, root) -> dict | None:
    """vLLM's CustomOp layer registered as ``op``, read from the vLLM package folder ``root``; ``None``: none is.

    Returns:
        ``{"layer": class name, "file": path from the package's parent (``vllm/...``), "c_ops": the names ``NAME``
        of every ``torch.ops._C.NAME`` in the class body, sorted, "native": whether it defines ``forward_native``}``.
    """
    root = Path(root)
    needle = f'register("{op}")'
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        if needle not in text:
            continue
        tree = ast.parse(text)
        names = _custom_op_names(tree)
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and any(_registers(d, names, op) for d in node.decorator_list):
                native = any(isinstance(f, ast.FunctionDef) and f.name == "forward_native" for f in node.body)
                return {"layer": node.name, "file": path.relative_to(root.parent).as_posix(), "c_ops": _c_ops(node),
                        "native": native}
    return None


def _c_ops(node: ast.AST) -> list[str]:
    """The names ``NAME`` of every ``torch.ops._C.NAME`` in ``node``, sorted."""
    return sorted({n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)
                   and ast.unparse(n.value) == "torch.ops._C"})


def custom_ops_function(op: str, root) -> dict | None:
    """vLLM's Python binding ``op`` in ``_custom_ops.py`` (``vllm._custom_ops.NAME``, where most of vLLM's
    quantization and activation kernels are called from; no CustomOp layer, no IR op), read from the vLLM package
    folder ``root``; ``None``: it has none.

    Returns:
        ``{"function": op, "file": "vllm/_custom_ops.py", "line": its line, "c_ops": the ``torch.ops._C`` kernels its
        body names}``.
    """
    path = Path(root) / "_custom_ops.py"
    if not path.is_file():
        return None
    tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == op:
            return {"function": op, "file": path.relative_to(Path(root).parent).as_posix(), "line": node.lineno,
                    "c_ops": _c_ops(node)}
    return None


def _kernels(c_ops: list[str], owner: str) -> str:
    named = ", ".join(f"`torch.ops._C.{c}`" for c in c_ops)
    return (f", which calls vLLM's compiled kernel{'s' if len(c_ops) > 1 else ''} {named}" if c_ops
            else f", whose {owner} names no `torch.ops._C` kernel")


def layer_sentence(op: str, root) -> str:
    """What the vLLM at ``root`` has for ``op`` outside its IR, as a clause of the note's sentence: its CustomOp layer,
    else its binding in ``_custom_ops.py`` (:func:`custom_ops_function`), else that it has neither."""
    found = custom_op_layer(op, root)
    if found is None:
        none = f"nor a CustomOp layer registered as {op} (`@CustomOp.register`, {CUSTOM_OP_MODULE})"
        binding = custom_ops_function(op, root)
        if binding is None:
            return none
        return (f"{none}; it has {op} as the function `vllm._custom_ops.{op}` (`{binding['file']}`, line "
                f"{binding['line']}){_kernels(binding['c_ops'], 'body')}: what a comparison would be against")
    kernels = _kernels(found["c_ops"], "class")
    native = " (its `forward_native` is the composite)" if found["native"] else ""
    return (f"it has {op} as the CustomOp layer `{found['layer']}` (`{found['file']}`, "
            f"`@CustomOp.register(\"{op}\")`){kernels}{native}")
