"""Where an exercise asks for a Triton kernel: the learner's source must define it, launch it, and let it do the work.

Behaviour alone cannot tell a kernel from an object that answers a launch with torch ops, or from a launcher that
starts a kernel for show and computes its result in torch. These rules read the learner's source text
(:func:`fastpath_lib.grading.engine.sources.learner_source`: in the grader, the notebook's code cells as read from the
file before it ran) with :mod:`ast`; each returns a sentence saying what is wrong, or ``None``.

* :func:`kernel_problem`: the name the check launches is bound once, by a ``def`` under a lone ``@triton.jit``
  whose ``triton`` comes from an import; every ``@triton.jit`` body of the source reads only its parameters, its
  own locals, Triton's language under ``triton.language``
  (:func:`~fastpath_lib.grading.rules.language_names.outside_language`: ``tl.load``, ``tl.math.rsqrt``; not a module
  reached under another name, ``tl.random.tl``), the source's other kernels and a few builtins (no other module, no
  helper function, nothing defined inside it), past a value only what Triton's language values publish, in syntax
  Triton compiles (:mod:`~fastpath_lib.grading.rules.kernel_body`), no program id multiplied in int32 by a value known
  only at run time (:mod:`~fastpath_lib.grading.rules.row_offsets`), and the kernel stores something. The grader's
  compile step reads the calls again, on what they resolve to
  (:func:`fastpath_lib.grading.engine.compile_check.callee_problem`).
* :func:`launcher_problem`: a host function (and the source's functions it calls) launches one of the source's
  kernels (``kernel[grid](...)``) and computes nothing itself: torch calls only allocate (``torch.empty``, ...),
  tensor methods only reshape, convert or reduce the kernel's partial results (``.contiguous()``, ``.to()``,
  ``.sum()``, ...), and no arithmetic operator touches a tensor.
* Both, in the answer's own code (the kernel or launcher and the functions it reaches by name; the rest of the
  notebook is not read, and the grader runs none of it, :func:`program`): no attribute of a module is changed
  (``triton.jit = ...``), and no code is reached without naming it (``setattr``, ``exec``, ``eval``, ``globals``,
  ``importlib``, ``sys.modules``, a computed ``getattr``, ...); ``getattr(obj, "name")`` reads as ``obj.name``.
  Defining those functions runs nothing of the learner's: a default is a literal (a number, a string, ``None``,
  ``True``, a tuple of them), an annotation a literal or a type by name (``tl.constexpr``, ``torch.Tensor | None``), and
  the only decorator is a kernel's ``@triton.jit`` (its options literals), since the program's text runs in the
  grader's child before any check.

>>> src = '''
... import triton
... import triton.language as tl
... @triton.jit
... def k(X, N, B: tl.constexpr):
...     c = tl.arange(0, B)
...     tl.store(X + c, tl.load(X + c, mask=c < N) * 2, mask=c < N)
... def launch(x):
...     k[(1,)](x, x.numel(), B=triton.next_power_of_2(x.numel()))
...     return x
... '''
>>> kernel_problem(src, "k") is None and launcher_problem(src, "launch") is None
True
>>> launcher_problem(src.replace("return x", "return x * 2"), "launch")
'launch does tensor arithmetic outside your kernel (x * 2): let the kernel compute the result'
"""

from __future__ import annotations

import ast
import builtins

from fastpath_lib.grading.engine.sources import dotted, parse_cells
from fastpath_lib.grading.rules.definitions import definition_problem, literal, type_expression
from fastpath_lib.grading.rules.kernel_body import body_problem
from fastpath_lib.grading.rules.row_offsets import offset_problem

__all__ = ["kernel_problem", "launcher_problem", "launches_kernel", "launchers_called", "program", "still_a_stub"]

#: Names that reach code without naming it, or change what a name means for everyone.
_DYNAMIC = frozenset({"setattr", "delattr", "exec", "eval", "compile", "globals", "vars", "locals", "__import__",
                      "__builtins__", "builtins", "importlib", "sys.modules", "ctypes", "gc", "inspect",
                      "get_ipython", "runpy", "types"})
#: Attributes that reach or rewrite code and namespaces.
_REFLECTIVE = frozenset({"__dict__", "__globals__", "__code__", "__builtins__", "__closure__", "__func__",
                         "__wrapped__", "f_globals", "f_locals", "f_back", "user_ns", "__getattribute__"})
#: Builtins a launcher may call.
_HOST_BUILTINS = frozenset({"range", "len", "int", "float", "bool", "isinstance", "tuple", "list", "dict", "max",
                            "min", "print", "zip", "enumerate", "divmod", "abs", "round", "type", "str", "repr"})
#: torch functions a launcher may call: they allocate or describe, they compute nothing.
_TORCH_ALLOWED = frozenset({"empty", "empty_like", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
                            "empty_strided", "finfo", "iinfo", "device", "dtype", "is_tensor", "Size",
                            "get_default_dtype", "is_floating_point"})
#: Tensor methods a launcher may call: layout, dtype and size, and the reduction of the kernel's partial results.
_METHODS_ALLOWED = frozenset({"contiguous", "to", "stride", "size", "numel", "dim", "element_size", "view",
                              "reshape", "sum", "float", "half", "bfloat16", "double", "is_contiguous", "data_ptr",
                              "new_empty", "new_zeros", "zero_", "flatten", "unsqueeze", "squeeze", "expand",
                              "expand_as", "view_as", "reshape_as", "detach", "clone", "t", "storage_offset",
                              "type_as", "get_device", "untyped_storage", "nbytes"})
#: Tensor attributes that are tensors themselves.
_TENSOR_ATTRS = frozenset({"T", "mT", "H", "mH", "data", "grad", "real", "imag"})
#: Modules a program the grader runs may import (what kernels and launchers need).
_PROGRAM_MODULES = ("triton", "torch", "math")
#: Host-side triton helpers.
_TRITON_HOST = frozenset({"next_power_of_2", "cdiv", "jit"})


class _NamedGetattr(ast.NodeTransformer):
    """``getattr(obj, "name")`` (a constant name, no default) read as ``obj.name``."""

    def visit_Call(self, node):
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "getattr" and len(node.args) == 2 \
                and not node.keywords and isinstance(node.args[1], ast.Constant) \
                and isinstance(node.args[1].value, str) and node.args[1].value.isidentifier():
            return ast.copy_location(ast.Attribute(value=node.args[0], attr=node.args[1].value, ctx=ast.Load()),
                                     node)
        return node


class _Source:
    """What the rules need to know about one source text."""

    def __init__(self, source: str):
        self.text = source
        self.trees = [_NamedGetattr().visit(t) for t in parse_cells(source)]
        self.nodes = [n for t in self.trees for n in ast.walk(t)]
        self.imports: dict[str, str] = {}  # alias -> dotted target
        for n in self.nodes:
            if isinstance(n, ast.Import):
                for a in n.names:
                    self.imports[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(n, ast.ImportFrom) and n.module:
                for a in n.names:
                    self.imports[a.asname or a.name] = f"{n.module}.{a.name}"
        self.defs = [n for n in self.nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        self.kernels = {d.name: d for d in self.defs if any(self.is_jit(x) for x in d.decorator_list)}

    def resolve(self, dotted: str | None) -> str:
        """``dotted`` with its first name replaced by what it was imported as (``tl.x`` -> ``triton.language.x``)."""
        if not dotted:
            return ""
        head, _, rest = dotted.partition(".")
        target = self.imports.get(head)
        return (target + ("." + rest if rest else "")) if target else dotted

    def is_jit(self, dec) -> bool:
        return self.resolve(dotted(dec.func if isinstance(dec, ast.Call) else dec)) in ("triton.jit",
                                                                                         "triton.runtime.jit.jit")

    def bindings(self, name: str) -> list[ast.AST]:
        out = []
        for n in self.nodes:
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == name:
                out.append(n)
            elif isinstance(n, (ast.Import, ast.ImportFrom)) and any(
                    (a.asname or a.name.split(".")[0]) == name for a in n.names):
                out.append(n)
            elif isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, (ast.Store, ast.Del)):
                out.append(n)
            elif isinstance(n, (ast.Global, ast.Nonlocal)) and name in n.names:
                out.append(n)
        return out

    def global_problem(self, reached: list) -> str | None:
        """What in the functions ``reached`` (the answer's own code) changes a module or reaches code without
        naming it."""
        for n in (m for f in reached for m in ast.walk(f)):
            name = dotted(n) if isinstance(n, (ast.Name, ast.Attribute)) else None
            if name in _DYNAMIC or (name and self.resolve(name) in _DYNAMIC) or (
                    name and self.resolve(name).split(".")[0] in _DYNAMIC):
                return f"your code uses {name}, which reaches or changes code without naming it: call what you use"
            if isinstance(n, ast.Attribute) and (n.attr in _REFLECTIVE or n.attr.startswith("_") and isinstance(
                    n.value, ast.Name) and n.value.id in self.imports):
                return f"your code reads {n.attr}, which reaches or changes code without naming it"
            if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
                targets = n.targets if isinstance(n, (ast.Assign, ast.Delete)) else [n.target]
                for t in targets:
                    for sub in ast.walk(t):
                        if isinstance(sub, (ast.Attribute, ast.Subscript)):
                            root = sub
                            while isinstance(root, (ast.Attribute, ast.Subscript)):
                                root = root.value
                            if isinstance(root, ast.Name) and root.id in self.imports:
                                return (f"your code assigns to {ast.unparse(sub)}, an attribute of the module "
                                        f"{self.imports[root.id]}: leave the libraries as they are")
        return None


def _reached(src: _Source, name: str) -> list:
    """The source's top-level functions (host or ``@triton.jit``) that ``name`` reaches by name, itself first."""
    own = {d.name: d for t in src.trees for d in t.body if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef))}
    reach, todo = [], [own[name]] if name in own else []
    while todo:
        f = todo.pop(0)
        if f not in reach:
            reach.append(f)
            todo += [own[n.id] for n in ast.walk(f) if isinstance(n, ast.Name) and n.id in own]
    return reach


def _definition(source: str, name: str, missing: str) -> tuple[_Source, ast.FunctionDef, list] | str:
    """The learner's source, its function ``name`` and every binding of ``name``; or the problem: a rule the whole
    source breaks, else ``missing`` where the source defines no function ``name``."""
    src = _Source(source)
    reached = _reached(src, name)
    problem = src.global_problem(reached) or next(
        (p for p in map(lambda f: definition_problem(f, src.is_jit), reached) if p), None)
    if problem:
        return problem
    binds = src.bindings(name)
    fn = next((b for b in binds if isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    return missing if fn is None else (src, fn, binds)


def kernel_problem(source: str, name: str) -> str | None:
    """Why ``name`` in ``source`` is not a ``@triton.jit`` kernel that the learner wrote and that does the work.

    Args:
        source: the learner's code cells, joined.
        name: the name the check launches (the argument of the check cell).
    """
    found = _definition(source, name, f"your code defines no function {name}: write it as a @triton.jit kernel")
    if isinstance(found, str):
        return found
    src, fn, binds = found
    if len(binds) != 1:
        return (f"{name} is bound {len(binds)} times in your code: the kernel the check launches must be your "
                f"@triton.jit function itself, defined once")
    if len(fn.decorator_list) != 1 or not src.is_jit(fn.decorator_list[0]):
        return f"{name} must be defined under @triton.jit, and under nothing else"
    reached = [k for k in _reached(src, name) if k.name in src.kernels]  # it and the jit functions it calls
    for kernel in reached:
        problem = body_problem(src, kernel) or offset_problem(src, kernel)
        if problem:
            return problem
    if not any(isinstance(n, ast.Call) and src.resolve(dotted(n.func)) == "triton.language.store"
               for k in reached for n in ast.walk(k)):
        return f"your kernel {name} stores nothing (tl.store): it must write its outputs"
    return None


class _Tensors:
    """Which expressions of a host function are tensors: its parameters and what torch calls and tensor methods
    give (a simple forward reading, enough for a launcher)."""

    def __init__(self, src: _Source, fn: ast.FunctionDef):
        self.src = src
        a = fn.args
        self.names = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg] if x is not None}
        self.locals = self.names | {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)
                                    and isinstance(n.ctx, ast.Store)}
        self.aliases: dict[str, str] = {}  # local name -> the module attribute it stands for
        for n in ast.walk(fn):
            if isinstance(n, ast.Assign) and isinstance(n.value, (ast.Name, ast.Attribute)):
                target = src.resolve(dotted(n.value))
                if target.split(".")[0] in {v.split(".")[0] for v in src.imports.values()}:
                    self.aliases |= {t.id: target for t in n.targets if isinstance(t, ast.Name)}
        for _ in range(4):  # assignments may come in any order of the walk: settle
            for n in ast.walk(fn):
                if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and n.value is not None \
                        and self.of(n.value):
                    targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                    self.names |= {m.id for t in targets for m in ast.walk(t) if isinstance(m, ast.Name)}
                elif isinstance(n, ast.NamedExpr) and self.of(n.value):
                    self.names.add(n.target.id)
                elif isinstance(n, (ast.For, ast.comprehension)) and self.of(n.iter):
                    self.names |= {m.id for m in ast.walk(n.target) if isinstance(m, ast.Name)}

    def of(self, e) -> bool:
        if isinstance(e, ast.Name):
            return e.id in self.names
        if isinstance(e, ast.Subscript):
            return self.of(e.value)
        if isinstance(e, ast.Attribute):
            return e.attr in _TENSOR_ATTRS and self.of(e.value)
        if isinstance(e, ast.Call):
            if isinstance(e.func, ast.Name) and e.func.id in ("zip", "enumerate", "list", "tuple", "reversed", "iter",
                                                             "next"):
                return any(self.of(a) for a in e.args)
            if isinstance(e.func, ast.Attribute) and self.of(e.func.value):
                return e.func.attr not in ("stride", "size", "numel", "dim", "element_size", "is_contiguous",
                                           "data_ptr", "item", "storage_offset", "get_device", "nbytes")
            return self.src.resolve(dotted(e.func)).startswith("torch.")
        if isinstance(e, ast.IfExp):
            return self.of(e.body) or self.of(e.orelse)
        if isinstance(e, ast.BinOp):
            return self.of(e.left) or self.of(e.right)
        if isinstance(e, ast.UnaryOp):
            return self.of(e.operand)
        if isinstance(e, (ast.Tuple, ast.List)):
            return any(self.of(x) for x in e.elts)
        return False


def _host_problem(src: _Source, fn: ast.FunctionDef, own: set[str]) -> str | None:
    t = _Tensors(src, fn)
    for n in ast.walk(fn):
        if isinstance(n, ast.BinOp) and (t.of(n.left) or t.of(n.right)) or isinstance(n, ast.UnaryOp) and not \
                isinstance(n.op, ast.Not) and t.of(n.operand) or isinstance(n, ast.AugAssign) and t.of(n.target):
            return (f"{fn.name} does tensor arithmetic outside your kernel ({ast.unparse(n)}): let the kernel compute "
                    f"the result")
        if isinstance(n, ast.Attribute) and n.attr.startswith("__"):
            return f"{fn.name} reads the special attribute {n.attr}"
        targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, ast.AugAssign) else []
        if any(isinstance(x, ast.Subscript) and t.of(x.value) for x in targets):
            return f"{fn.name} writes tensor elements outside your kernel ({ast.unparse(n)}): let the kernel store them"
        if not isinstance(n, ast.Call):
            continue
        if isinstance(n.func, ast.Subscript):
            if not (isinstance(n.func.value, ast.Name) and n.func.value.id in src.kernels):
                return f"{fn.name} launches {ast.unparse(n.func.value)}, which is not a @triton.jit function of yours"
            continue
        called = dotted(n.func)
        if called and called.split(".")[0] in t.aliases:
            head, _, rest = called.partition(".")
            called = t.aliases[head] + ("." + rest if rest else "")
        target = src.resolve(called)
        if isinstance(n.func, ast.Attribute) and t.of(n.func.value):
            if n.func.attr not in _METHODS_ALLOWED:
                return (f"{fn.name} calls the tensor method {n.func.attr} outside your kernel: a launcher allocates, "
                        f"launches and reduces the kernel's partial results, the kernel computes")
        elif target.startswith("torch."):
            if target.split(".", 1)[1] not in _TORCH_ALLOWED:
                return f"{fn.name} calls {target} outside your kernel: let the kernel compute the result"
        elif target.startswith("triton."):
            if target.split(".", 1)[1] not in _TRITON_HOST:
                return f"{fn.name} calls {target}: a launcher needs triton.next_power_of_2 and triton.cdiv at most"
        elif isinstance(n.func, ast.Name) and n.func.id not in src.imports:
            if n.func.id not in own and n.func.id not in src.kernels and not (
                    n.func.id in _HOST_BUILTINS and hasattr(builtins, n.func.id)):
                return f"{fn.name} calls {n.func.id}, which is not a function of yours nor a builtin it needs"
        elif called and called.split(".")[0] in src.imports:
            return f"{fn.name} calls {target} outside your kernel: let the kernel compute the result"
        elif isinstance(n.func, ast.Attribute) and (called is None or called.split(".")[0] not in t.locals):
            return (f"{fn.name} calls {ast.unparse(n.func)}, a function it does not define or import by name: let "
                    f"the kernel compute the result")
    return None


def launcher_problem(source: str, name: str) -> str | None:
    """Why the host function ``name`` (the argument of the check cell) in ``source`` (the learner's code cells,
    joined) does not leave the work to a kernel of the source."""
    found = _definition(source, name, f"your code defines no function {name}")
    if isinstance(found, str):
        return found
    src, fn, binds = found
    if len(binds) != 1 or fn.decorator_list:
        return f"{name} is bound {len(binds)} times or decorated: the check calls your function {name} itself"
    own = {d.name: d for d in src.defs if d.name not in src.kernels}
    reach, todo = [], [fn]
    while todo:  # the source's host functions reachable from the launcher by name
        f = todo.pop()
        if f in reach:
            continue
        reach.append(f)
        todo += [own[n.id] for n in ast.walk(f) if isinstance(n, ast.Name) and n.id in own]
    for f in reach:
        problem = _host_problem(src, f, set(own))
        if problem:
            return problem
    launched = {n.func.value.id for f in reach for n in ast.walk(f) if isinstance(n, ast.Call)
                and isinstance(n.func, ast.Subscript) and isinstance(n.func.value, ast.Name)
                and n.func.value.id in src.kernels}
    if not launched:
        return f"{name} launches no @triton.jit kernel of yours (kernel[grid](...))"
    for k in sorted(launched):
        problem = kernel_problem(source, k)
        if problem:
            return problem
    return None


def program(source: str, entry: str, *more: str) -> str:
    """The Python text the grader runs for the learner's ``entry`` (and ``more`` entries)
    (:mod:`~fastpath_lib.grading.engine.kernel_run`): the source's imports of triton, torch and math, its top-level
    constants written as literals (``BLOCK = 1024``, ``N: tl.constexpr = 64``), and each entry with the functions it
    reaches by name (``@triton.jit`` functions first). Nothing else of the notebook runs there, and nothing of the
    learner's runs while the program's text defines its functions
    (:func:`~fastpath_lib.grading.rules.definitions.definition_problem`: literal defaults, annotations that name
    types, a kernel's lone ``@triton.jit``). Raises ``ValueError`` where a definition breaks that (the rules refuse it
    first). Call it after :func:`kernel_problem` or :func:`launcher_problem` passed.

    >>> print(program("import triton\\nimport os\\nN = 4\\n@triton.jit\\ndef k(X):\\n    pass", "k"))
    import triton
    N = 4
    @triton.jit
    def k(X):
        pass
    """
    src = _Source(source)
    lines = []
    for alias, target in src.imports.items():
        if target.split(".")[0] not in _PROGRAM_MODULES:
            continue
        module, _, member = target.rpartition(".")
        imported = next(n for n in src.nodes if isinstance(n, (ast.Import, ast.ImportFrom)) and any(
            (a.asname or a.name.split(".")[0]) == alias for a in n.names))
        if isinstance(imported, ast.ImportFrom):
            lines.append(f"from {module} import {member}" + (f" as {alias}" if alias != member else ""))
        else:
            lines.append(f"import {target}" + (f" as {alias}" if alias != target else ""))
    for tree in src.trees:
        for node in tree.body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None and all(
                    isinstance(t, ast.Name) for t in (node.targets if isinstance(node, ast.Assign) else [node.target])):
                value = node.value
                if isinstance(value, ast.Call) and src.resolve(dotted(value.func)) == "triton.language.constexpr" \
                        and len(value.args) == 1:
                    value = value.args[0]
                note = getattr(node, "annotation", None)
                if literal(value) and (note is None or type_expression(note)):
                    lines.append(ast.unparse(node))
    # each entry (a kernel or a launcher) and what it reaches: the jit functions first
    defs = list({id(d): d for e in (entry, *more) for d in _reached(src, e)}.values())
    for d in defs:  # the rules passed: this holds; checked again, as nothing else keeps the learner's code out
        problem = definition_problem(d, src.is_jit)
        if problem:
            raise ValueError(problem)
    lines += [ast.unparse(d) for d in sorted(defs, key=lambda d: d.name not in src.kernels)]
    return "\n".join(dict.fromkeys(lines))


def launches_kernel(source: str, name: str) -> bool:
    """Whether the host function ``name`` of ``source``, or a function of the source it reaches by name, launches
    one of the source's ``@triton.jit`` kernels (``kernel[grid](...)``)."""
    src = _Source(source)
    reach = [f for f in _reached(src, name) if f.name not in src.kernels]
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript) and isinstance(n.func.value, ast.Name)
               and n.func.value.id in src.kernels for f in reach for n in ast.walk(f))


def launchers_called(source: str, name: str) -> list[str]:
    """The source's host functions that the function ``name`` calls by name and that launch one of the source's
    ``@triton.jit`` kernels (:func:`launches_kernel`): the launchers whose result a dispatching op's Triton route
    returns.

    >>> src = "import triton\\n@triton.jit\\ndef k(X):\\n    pass\\n" \\
    ...       "def launch(x):\\n    k[(1,)](x)\\n    return x\\ndef pick(x):\\n    return True\\n" \\
    ...       "def op(x):\\n    return (launch(x), 'triton') if pick(x) else (x, 'torch')\\n"
    >>> launchers_called(src, "op")
    ['launch']
    """
    src = _Source(source)
    own = {d.name: d for t in src.trees for d in t.body if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef))}
    if name not in own:
        return []
    called = dict.fromkeys(n.func.id for n in ast.walk(own[name]) if isinstance(n, ast.Call)
                           and isinstance(n.func, ast.Name) and n.func.id in own and n.func.id != name)
    return [f for f in called if f not in src.kernels and launches_kernel(source, f)]


def still_a_stub(source: str, name: str) -> bool:
    """Whether the function ``name`` of ``source`` (a kernel or a launcher), or a function of the source it reaches
    by name, still raises ``NotImplementedError`` (the exercise's stub)."""
    return any(isinstance(n, ast.Raise) and n.exc is not None and "NotImplementedError" in ast.unparse(n.exc)
               for f in _reached(_Source(source), name) for n in ast.walk(f))
