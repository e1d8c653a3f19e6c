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
from fastpath_lib.runtime import parse_source

__all__ = ["using", "learner_cells", "latest_runs", "learner_source", "names_used", "attributes_used", "closure_source",
           "jit_functions", "parse", "parse_cells", "dotted", "DYNAMIC", "star_modules"]

_STACK: list[list[str]] = []

#: Names whose use lets a statement fill a namespace or reach code without naming it (``exec(src, g, ns)``): a
#: statement that uses one with a name the answer reads is part of the answer's code (:func:`closure_source`).
DYNAMIC = frozenset({"getattr", "eval", "exec", "compile", "__import__", "importlib.import_module", "globals",
                     "vars", "locals", "__builtins__", "builtins", "sys.modules", "operator.attrgetter",
                     "operator.methodcaller", "runpy.run_path", "runpy.run_module",
                     "importlib.util.spec_from_file_location", "importlib.machinery.SourceFileLoader", "setattr",
                     "delattr", "get_ipython", "gc", "inspect", "ctypes", "pickle", "marshal", "importlib",
                     "runpy"})
#: Attributes that reach or rewrite a namespace (``json.__dict__[...] = f``).
_REFLECTIVE = frozenset({"__dict__", "__globals__", "__builtins__", "__code__", "__closure__", "__setattr__",
                         "__delattr__", "__getattribute__", "__setitem__", "f_globals", "f_locals", "f_back",
                         "user_ns", "__loader__", "__spec__"})


@contextlib.contextmanager
def using(cells):
    """Within the block, :func:`learner_source` returns ``cells`` (a list of cell sources), joined."""
    _STACK.append([str(c) for c in cells])
    try:
        yield
    finally:
        _STACK.pop()


def _is_check_cell(source: str) -> bool:
    tree = parse(source)
    if tree is None or not tree.body:
        return False
    return all(isinstance(n, ast.Expr) and isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Attribute)
               and n.value.func.attr.startswith("check_") for n in tree.body)


def learner_cells() -> list[str]:
    """The learner's code cells: set by the grader, else the kernel's input history (check cells left out, and
    each cell as last run: :func:`latest_runs`)."""
    if _STACK:
        return list(_STACK[-1])
    ipython = sys.modules.get("IPython")
    ip = ipython.get_ipython() if ipython is not None else None
    if ip is None:
        return []
    hist = getattr(getattr(ip, "history_manager", None), "input_hist_raw", None) or ip.user_ns.get("In") or []
    return latest_runs([s for s in hist if isinstance(s, str) and s.strip() and not _is_check_cell(s)])


def latest_runs(history: list[str]) -> list[str]:
    """The cells of a kernel's input history as the notebook now holds them: a history keeps every run of a cell, so
    a run whose functions and classes a later run defines again (an edited answer run anew) and a second run of the
    same text are left out. The check cell then reads the answer the grader will read from the file, not the
    versions before it.

    >>> latest_runs(["import torch", "def f(x):\\n    return torch.tanh(x)", "f(1)", "def f(x):\\n    return x",
    ...              "f(1)"])
    ['import torch', 'def f(x):\\n    return x', 'f(1)']
    """
    out, defined, seen = [], set(), set()
    for cell in reversed(history):
        tree = parse(cell)
        names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))} \
            if tree is not None else set()
        if cell in seen or (names and names <= defined):
            continue
        seen.add(cell)
        defined |= names
        out.append(cell)
    return out[::-1]


def learner_source() -> str:
    """The learner's code cells, joined with blank lines: set by the grader, else the kernel's input history.

    Outside both (a plain Python process, no :func:`using` block) it is ``""``.
    """
    return "\n\n".join(learner_cells())


def _ipython(source: str) -> str | None:
    """The Python IPython runs for a cell that is not Python itself (magics, ``!shell``, ``obj?``, ``/f x``), or
    ``None`` when IPython cannot read it either. Without IPython, magic and shell lines read as ``get_ipython()``."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:  # pragma: no cover - the grader runs with IPython
        return "\n".join(re.sub(r"^(\s*)(?:[%!].*)$", r"\1get_ipython()", re.sub(
            r"^(\s*[\w.]+\s*=\s*)[%!].*$", r"\1get_ipython()", line)) for line in source.splitlines())
    try:
        return TransformerManager().transform_cell(source)
    except Exception:  # noqa: BLE001 - IPython gives up on it too
        return None


def parse(source: str) -> ast.Module | None:
    """The cell's syntax tree, or ``None`` when it does not parse. A cell that only IPython reads (magics, shell and
    help lines) parses as the code IPython runs for it: ``get_ipython().run_line_magic(...)``, a :data:`DYNAMIC`
    use."""
    try:
        return parse_source(source)
    except SyntaxError:
        pass
    transformed = _ipython(source)
    try:
        return parse_source(transformed) if transformed is not None else None
    except SyntaxError:
        return None


def parse_cells(source: str) -> list[ast.Module]:
    """The whole text's tree when it parses at once (IPython's line magics read as the calls IPython runs), else the
    tree of each blank-line-joined chunk that parses on its own, its line numbers those of the whole text (so
    ``ast.get_source_segment(source, node)`` is the node's own text): a cell that does not parse (a learner's
    unfinished scratch cell), or a cell magic that IPython would read as taking the whole text, costs the reading of
    that chunk only.

    >>> src = "import torch\\n\\nfor i in range(3)\\n    print(i)\\n\\ndef f(x):\\n    return torch.tanh(x)"
    >>> [ast.get_source_segment(src, n).splitlines()[0] for t in parse_cells(src) for n in t.body]
    ['import torch', 'def f(x):']
    """
    whole = parse(source)
    if whole is not None and not _swallowed(source, whole):
        return [whole]
    out, start = [], 0
    for m in [*re.finditer(r"\n\s*\n(?=\S)", source), None]:
        end = m.start() if m is not None else len(source)
        tree = parse(source[start:end])
        if tree is not None:
            out.append(ast.increment_lineno(tree, source.count("\n", 0, start)))
        start = m.end() if m is not None else len(source)
    return out


def _swallowed(source: str, tree: ast.Module) -> bool:
    """Whether IPython reads the whole text as one cell magic (``%%time`` heading the first chunk) though it holds
    further chunks."""
    try:
        parse_source(source)
        return False
    except SyntaxError:
        pass
    call = tree.body[0].value if len(tree.body) == 1 and isinstance(tree.body[0], ast.Expr) else None
    return isinstance(call, ast.Call) and (dotted(call.func, partial=True) or "").endswith("run_cell_magic") \
        and re.search(r"\n\s*\n(?=\S)", source) is not None


def dotted(node, *, partial: bool = False) -> str | None:
    """``a.b.c`` for a name or attribute chain rooted at a name, else ``None``; with ``partial``, the attributes of a
    chain rooted at anything else (``get_ipython().events.register`` -> ``events.register``; ``""`` for none)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    elif not partial:
        return None
    return ".".join(reversed(parts))


def _aliases(trees, *, assigned: bool = False) -> dict[str, str]:
    """Name bound by an import -> what it stands for (``F`` -> ``torch.nn.functional``, ``rp`` ->
    ``runpy.run_path``); with ``assigned``, also names a plain assignment binds to one of them (``R = T``,
    ``R: object = T.sub``, ``(R := T)``)."""
    aliases: dict[str, str] = {}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom) and node.module:
                for a in node.names:
                    if a.name != "*":
                        aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    if not assigned:
        return aliases
    pairs = []
    for tree in trees:
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, (ast.AnnAssign, ast.NamedExpr)) else []
            value = getattr(node, "value", None)
            pairs += [(t.id, value) for t in targets if isinstance(t, ast.Name) and value is not None]
    for _ in range(4):  # chains of assignments, in any order
        for name, value in pairs:
            got = _resolved(dotted(value), aliases)
            if got and got.split(".")[0] in {v.split(".")[0] for v in aliases.values()} and name not in aliases:
                aliases[name] = got
    return aliases


def star_modules(source: str) -> set[str]:
    """The modules the source imports everything from (``from fastpath_lib.testing import *``)."""
    return {n.module for t in parse_cells(source) for n in ast.walk(t) if isinstance(n, ast.ImportFrom)
            and n.module and any(a.name == "*" for a in n.names)}


def _resolved(name: str | None, aliases: dict[str, str]) -> str | None:
    """``name`` with its first part replaced by what an import bound it to (``builtins.`` dropped)."""
    if name is None:
        return None
    head, _, rest = name.partition(".")
    full = aliases.get(head, head) + ("." + rest if rest else "")
    return full.removeprefix("builtins.")


def names_used(source: str) -> set[str]:
    """Every name the source reads, as written and resolved through its imports.

    For ``import torch.nn.functional as F`` and ``F.rms_norm(x)`` the set holds ``F.rms_norm``,
    ``torch.nn.functional.rms_norm``, the module ``torch.nn.functional`` and the bare attribute ``rms_norm``; a
    string constant given to ``getattr``, ``importlib.import_module`` or ``__import__`` counts as a name too. Uses of
    :data:`DYNAMIC` names appear as themselves, so a check can refuse an answer that reaches code it does not name.
    """
    trees = parse_cells(source)
    aliases = _aliases(trees, assigned=True)
    stars = star_modules(source)
    out: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id not in aliases:
                out.update(f"{m}.{node.id}" for m in stars)
            if isinstance(node, ast.Import):
                out.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                out.update(x for a in node.names for x in (node.module, f"{node.module}.{a.name}", a.name))
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, (ast.Attribute, ast.Name)):
                name = dotted(node)
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
                fn = dotted(node.func) or ""
                fn = aliases.get(fn.split(".")[0], fn.split(".")[0]) + fn[len(fn.split(".")[0]):] if fn else fn
                strings = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
                if fn in ("getattr", "hasattr", "setattr") and len(node.args) >= 2 and strings:
                    out.update(s for s in strings if s.isidentifier())
                    owner = _resolved(dotted(node.args[0]), aliases)
                    out.update(f"{owner}.{s}" for s in strings if owner and s.isidentifier())
                elif fn in ("importlib.import_module", "__import__") and strings:
                    out.update(strings)
    return out


def jit_functions(source: str) -> set[str]:
    """Names of the functions the source defines under a ``triton.jit`` (or ``tl.jit``, ``jit``) decorator."""
    out = set()
    for tree in parse_cells(source):
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                for dec in node.decorator_list:
                    name = dotted(dec.func if isinstance(dec, ast.Call) else dec) or ""
                    if name == "jit" or name.endswith(".jit"):
                        out.add(node.name)
    return out


def attributes_used(source: str) -> set[str]:
    """The attribute names the source reads (``rms_norm`` for ``x.rms_norm`` or ``F.rms_norm``), not plain names."""
    return {n.attr for tree in parse_cells(source) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _binds(node) -> set[str]:
    """The names a top-level statement binds in the notebook's namespace, in every binding form, wherever it stands
    in the statement (under ``if``, ``try``, ``with``, in a comprehension): assignment of any kind, ``for`` and
    ``with`` targets, walrus, ``del``, imports (under any name), ``except ... as``, ``match`` captures, definitions,
    and names a function or class declares ``global``."""
    out: set[str] = {"*"} if _writes_namespace(node) else set()
    todo = [node]
    while todo:
        n = todo.pop()
        if isinstance(n, _SCOPES):
            if not isinstance(n, ast.Lambda):
                out.add(n.name)
            # a nested scope binds only what it declares global (its decorators and defaults run here: walk them)
            out |= {g for m in ast.walk(n) if isinstance(m, ast.Global) for g in m.names}
            outer = list(getattr(n, "decorator_list", [])) + list(getattr(n, "bases", []))
            args = getattr(n, "args", None)
            if isinstance(args, ast.arguments):
                outer += [d for d in args.defaults + args.kw_defaults if d is not None]
            todo += outer
            continue
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            out.add(n.id)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            out |= {(a.asname or a.name.split(".")[0]) for a in n.names}  # "*": any name
        elif isinstance(n, ast.ExceptHandler) and n.name:
            out.add(n.name)
        elif isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name:
            out.add(n.name)
        elif isinstance(n, ast.MatchMapping) and n.rest:
            out.add(n.rest)
        todo += list(ast.iter_child_nodes(n))
    return out


def _free_names(node) -> set[str]:
    """Names a top-level statement reads from the notebook's namespace: in a function or class, the names it
    loads less its parameters and the names it assigns itself."""
    loaded = {m.id for m in ast.walk(node) if isinstance(m, ast.Name) and isinstance(m.ctx, ast.Load)}
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
        return loaded
    local = {m.id for m in ast.walk(node) if isinstance(m, ast.Name) and isinstance(m.ctx, (ast.Store, ast.Del))}
    local |= {a.arg for m in ast.walk(node) if isinstance(m, ast.arguments)
              for a in m.posonlyargs + m.args + m.kwonlyargs + [m.vararg, m.kwarg] if a is not None}
    local |= {m.name for m in ast.walk(node) if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
              and m is not node}
    local |= {(a.asname or a.name.split(".")[0]) for m in ast.walk(node) if isinstance(m, (ast.Import, ast.ImportFrom))
              for a in m.names}
    return loaded - local


def closure_source(name: str, source: str | None = None) -> str:
    """The top-level statements that bind ``name`` (a def, class, assignment or import) and, transitively, those
    binding the names they read: the code an answer called ``name`` can reach by name.

    >>> src = "import torch\\nh = torch.tanh\\ndef f(x):\\n    return h(x)\\ndef g(x):\\n    return x"
    >>> print(closure_source("f", src))
    import torch
    h = torch.tanh
    def f(x):
        return h(x)
    """
    source = learner_source() if source is None else source
    trees = parse_cells(source)
    stmts = [(node, ast.get_source_segment(source, node) or "") for tree in trees for node in tree.body]
    if not stmts:
        return ""
    aliases = _aliases(trees)  # what the notebook's imports bound, wherever they stand
    modules = _aliases(trees, assigned=True)  # ... and the names assignments bound to them (``m = json``)
    wanted, todo, taken = set(), [name.split(".")[0]], []
    while todo:
        n = todo.pop()
        if n in wanted:
            continue
        wanted.add(n)
        for i, (node, _text) in enumerate(stmts):
            # a statement binding the name, one changing its object in place (``ns.update(...)``, ``box[0] = f``),
            # or one reaching code dynamically with it (``exec(src, g, ns)`` fills ns)
            binds = _binds(node)  # "*": a star import or a write into globals(), which may bind any name
            if i not in taken and (n in binds or "*" in binds or (n not in aliases and _changes(node, n)) or (
                    n in aliases and _stores_into(node, modules.get(n, n), modules)) or (
                    n in _free_names(node) and _fills(node, aliases))):
                taken.append(i)
                todo += sorted(_free_names(node))
    return "\n".join(stmts[i][1] for i in sorted(taken))


def _base(node) -> str | None:
    """The name at the bottom of ``a.b[c].d`` (``a``), ``None`` when it is not a plain name."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _fills(node, aliases: dict[str, str]) -> bool:
    """Whether a top-level statement that runs (not a definition) reaches code without naming it, and so may fill
    the objects it is handed (``exec(src, globals(), ns)``, ``ns.update(runpy.run_path(...))``); reading an attribute
    by a computed name (``getattr``) fills nothing."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return False
    return bool(_dynamic(node, aliases) - {"getattr"})


def _stores_into(node, module: str, aliases: dict[str, str]) -> bool:
    """Whether a top-level statement stores into, or deletes, an attribute or item of ``module`` (under any name
    ``aliases`` binds to it) in any binding form (``json.f = g``, ``for json.f in ...``, ``json.__dict__["f"] = g``,
    ``setattr(json, "f", g)``): an answer that reads ``json.f`` reads what the statement put there."""
    def of_module(e) -> bool:
        base = _base(e)
        return base is not None and aliases.get(base, base) == module
    for m in ast.walk(node):
        if any(isinstance(t, (ast.Attribute, ast.Subscript)) and of_module(t) for t in _store_targets(m)):
            return True
        if isinstance(m, ast.Call) and isinstance(m.func, ast.Name) and m.func.id in ("setattr", "delattr") \
                and m.args and of_module(m.args[0]):
            return True
    return False


def _writes_namespace(node) -> bool:
    """Whether a statement writes the notebook's namespace through ``globals()``, ``vars()`` or ``locals()``
    (``globals()["f"] = g``, ``globals().update(...)``): it may bind any name."""
    def namespace(e):
        return isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id in ("globals", "vars", "locals")
    for m in ast.walk(node):
        if any(isinstance(t, ast.Subscript) and namespace(t.value) for t in _store_targets(m)):
            return True
        if isinstance(m, ast.Call) and isinstance(m.func, ast.Attribute) and namespace(m.func.value) \
                and m.func.attr in ("update", "setdefault", "__setitem__"):
            return True
    return False


def _changes(node, name: str) -> bool:
    """Whether a top-level statement that runs (not a definition) changes the object ``name`` is bound to in place:
    stores into an item or attribute of it (``name[k] = v``, ``name.x += v``) or calls one of its methods
    (``name.update(...)``, ``name.append(...)``). A name an import bound (a module) is not asked about."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return False
    for m in ast.walk(node):
        targets = m.targets if isinstance(m, ast.Assign) else \
            [m.target] if isinstance(m, (ast.AugAssign, ast.AnnAssign)) else []
        if any(isinstance(t, (ast.Subscript, ast.Attribute)) and _base(t) == name for t in targets):
            return True
        if isinstance(m, ast.Call) and isinstance(m.func, ast.Attribute) and _base(m.func.value) == name:
            return True
    return False


def _is_dynamic(name: str | None) -> bool:
    return bool(name) and (name in DYNAMIC or name.split(".")[0] in _DYNAMIC_MODULES)


#: Modules every function of which reaches objects or code without naming them.
_DYNAMIC_MODULES = frozenset({"gc", "inspect", "ctypes", "pickle", "marshal", "importlib", "runpy"})


def _dynamic(tree, aliases: dict[str, str]) -> set[str]:
    """The :data:`DYNAMIC` names one tree uses to reach code without naming it (``getattr`` only with a computed name),
    resolved through ``aliases`` (the imports of the whole source)."""
    out = set()
    named = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call) and len(n.args) >= 2
             and isinstance(n.args[1], ast.Constant)}  # getattr(obj, "name"): a name after all
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:  # bound here, used under any name (``*`` included)
            members = {d.rsplit(".", 1)[-1] for d in DYNAMIC} if any(a.name == "*" for a in node.names) else \
                {a.name for a in node.names}
            out |= {f"{node.module}.{m}".removeprefix("builtins.") for m in members if _is_dynamic(
                f"{node.module}.{m}".removeprefix("builtins."))}
        name = _resolved(dotted(node), aliases) if isinstance(node, (ast.Name, ast.Attribute)) else None
        if name in ("getattr", "hasattr"):
            if id(node) not in named:  # a computed name, or getattr handed on as a value
                out.add("getattr")
        elif _is_dynamic(name):
            out.add(name)
        elif isinstance(node, ast.Attribute) and node.attr in _REFLECTIVE:
            out.add(node.attr)
    return out


def _store_targets(node) -> list:
    """The expressions a node stores into or deletes, in every binding form."""
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor, ast.comprehension)):
        targets = [node.target]
    elif isinstance(node, ast.Delete):
        targets = node.targets
    elif isinstance(node, (ast.With, ast.AsyncWith)):
        targets = [i.optional_vars for i in node.items if i.optional_vars is not None]
    else:
        return []
    return [m for t in targets for m in ast.walk(t) if isinstance(m, (ast.Attribute, ast.Subscript, ast.Name))
            and isinstance(m.ctx, (ast.Store, ast.Del))]
