"""What an installed vLLM has for an op outside its IR, read from vLLM's source (nothing imported, no list typed in).

vLLM keeps two kinds of op a fast path can target: the IR ops of ``vllm.ir`` (``vllm.ir.op.IrOp.registry``, asked at
run time by :mod:`fastpath_lib.bench.vllmhost`) and the layers registered with
``@CustomOp.register("NAME")`` (``vllm/model_executor/custom_op.py``: each class is kept in ``op_registry`` under its
name, and its ``forward_cuda`` and the like call vLLM's compiled kernels through ``torch.ops._C``). Importing the
module of a CustomOp layer needs vLLM's dependencies, so :func:`custom_op_layer` reads the layer from the source of
the vLLM package instead: the class decorated with that registration (vLLM's own ``CustomOp``, imported from
``vllm.model_executor.custom_op``), its file, and the ``torch.ops._C`` ops its body names.
"""

from __future__ import annotations

import ast
from pathlib import Path

__all__ = ["CUSTOM_OP_MODULE", "custom_op_layer", "layer_sentence"]

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
                c_ops = {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)
                         and ast.unparse(n.value) == "torch.ops._C"}
                native = any(isinstance(f, ast.FunctionDef) and f.name == "forward_native" for f in node.body)
                return {"layer": node.name, "file": path.relative_to(root.parent).as_posix(), "c_ops": sorted(c_ops),
                        "native": native}
    return None


def layer_sentence(op: str, root) -> str:
    """What the vLLM at ``root`` has as a CustomOp layer for ``op``, as a clause of the note's sentence."""
    found = custom_op_layer(op, root)
    if found is None:
        return f"nor a CustomOp layer registered as {op} (`@CustomOp.register`, {CUSTOM_OP_MODULE})"
    c_ops = ", ".join(f"`torch.ops._C.{c}`" for c in found["c_ops"])
    kernels = (f", which calls vLLM's compiled kernel{'s' if len(found['c_ops']) > 1 else ''} {c_ops}" if c_ops
               else ", whose class names no `torch.ops._C` kernel")
    native = " (its `forward_native` is the composite)" if found["native"] else ""
    return (f"it has {op} as the CustomOp layer `{found['layer']}` (`{found['file']}`, "
            f"`@CustomOp.register(\"{op}\")`){kernels}{native}")
