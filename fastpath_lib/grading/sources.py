"""The learner's own source text, for checks that judge *how* an answer was written, and an AST reader for it.

In the grader (``python -m fastpath_lib grade``) the source is what the grader read from the notebook file *before*
executing it: the learner's code cells, without the distributed check cells, set with :func:`using` around the
checks. Nothing the learner's code does at run time changes it. In a notebook (the advisory in-notebook check) it
falls back to IPython's input history of the kernel, which the learner's code can rewrite: advisory only.

>>> with using(["import torch.nn.functional as F", "def f(x):\\n    return F.rms_norm(x, [2])"]):
...     "torch.nn.functional.rms_norm" in names_used(learner_source())
True
>>> sorted(jit_functions("@triton.jit\\ndef k(X):\\n    pass\\ndef launch(x):\\n    k[(1,)](x)"))
['k']
"""

from __future__ import annotations

import ast
import contextlib
import re
import sys

__all__ = ["using", "learner_source", "names_used", "jit_functions", "DYNAMIC"]

_STACK: list[str] = []

#: Names whose use lets code reach a function without naming it (``getattr(torch, "rms" + "_norm")``).
DYNAMIC = frozenset({"getattr", "eval", "exec", "compile", "__import__", "importlib.import_module", "globals",
                     "vars", "locals", "__builtins__", "builtins", "sys.modules", "operator.attrgetter",
                     "operator.methodcaller"})


@contextlib.contextmanager
def using(cells):
    """Within the block, :func:`learner_source` returns ``cells`` (a list of cell sources), joined."""
    _STACK.append("\n\n".join(str(c) for c in cells))
    try:
        yield
    finally:
        _STACK.pop()


def _is_check_cell(source: str) -> bool:
    tree = _parse(source)
    if tree is None or not tree.body:
        return False
    return all(isinstance(n, ast.Expr) and isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Attribute)
               and n.value.func.attr.startswith("check_") for n in tree.body)


def learner_source() -> str:
    """The learner's code cells, joined with blank lines: set by the grader, else the kernel's input history.

    Outside both (a plain Python process, no :func:`using` block) it is ``""``.
    """
    if _STACK:
        return _STACK[-1]
    ipython = sys.modules.get("IPython")
    ip = ipython.get_ipython() if ipython is not None else None
    if ip is None:
        return ""
    hist = getattr(getattr(ip, "history_manager", None), "input_hist_raw", None) or ip.user_ns.get("In") or []
    return "\n\n".join(s for s in hist if isinstance(s, str) and s.strip() and not _is_check_cell(s))


def _parse(source: str) -> ast.Module | None:
    lines = [("pass  # " + line) if re.match(r"\s*[%!]", line) else line for line in source.splitlines()]
    try:
        return ast.parse("\n".join(lines))
    except SyntaxError:
        return None


def _parse_cells(source: str) -> list[ast.Module]:
    """Each blank-line-joined chunk that parses on its own; the whole text when it parses at once."""
    whole = _parse(source)
    if whole is not None:
        return [whole]
    return [t for t in map(_parse, re.split(r"\n\s*\n(?=\S)", source)) if t is not None]


def _dotted(node) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def names_used(source: str) -> set[str]:
    """Every name the source reads, as written and resolved through its imports.

    For ``import torch.nn.functional as F`` and ``F.rms_norm(x)`` the set holds ``F.rms_norm``,
    ``torch.nn.functional.rms_norm``, the module ``torch.nn.functional`` and the bare attribute ``rms_norm``; a
    string constant given to ``getattr``, ``importlib.import_module`` or ``__import__`` counts as a name too. Uses of
    :data:`DYNAMIC` names appear as themselves, so a check can refuse an answer that reaches code it does not name.
    """
    aliases: dict[str, str] = {}
    trees = _parse_cells(source)
    out: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
                    out.add(a.name)
            elif isinstance(node, ast.ImportFrom) and node.module:
                for a in node.names:
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
                    out.update((node.module, f"{node.module}.{a.name}", a.name))
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, (ast.Attribute, ast.Name)):
                name = _dotted(node)
                if name is None:
                    if isinstance(node, ast.Attribute):
                        out.add(node.attr)
                    continue
                out.add(name)
                head, _, rest = name.partition(".")
                if head in aliases:
                    out.add(aliases[head] + ("." + rest if rest else ""))
                if isinstance(node, ast.Attribute):
                    out.add(node.attr)
            elif isinstance(node, ast.Call):
                fn = _dotted(node.func) or ""
                fn = aliases.get(fn.split(".")[0], fn.split(".")[0]) + fn[len(fn.split(".")[0]):] if fn else fn
                strings = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
                if fn in ("getattr", "hasattr", "setattr") and len(node.args) >= 2 and strings:
                    out.update(s for s in strings if s.isidentifier())
                elif fn in ("importlib.import_module", "__import__") and strings:
                    out.update(strings)
    return out


def jit_functions(source: str) -> set[str]:
    """Names of the functions the source defines under a ``triton.jit`` (or ``tl.jit``, ``jit``) decorator."""
    out = set()
    for tree in _parse_cells(source):
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                for dec in node.decorator_list:
                    name = _dotted(dec.func if isinstance(dec, ast.Call) else dec) or ""
                    if name == "jit" or name.endswith(".jit"):
                        out.add(node.name)
    return out
