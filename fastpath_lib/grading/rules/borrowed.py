"""Catch a borrowed answer: learner code that hands back, or calls, the kit's own solution or the grader's helpers.

A check passes the learner's callable to :func:`run` with the functions the exercise asks the learner to write
themselves (the kit's float64 reference for exercise 01, the grader's expected-class rule for exercise 06, ...),
named by the file they live in and their qualified name. :func:`run` fails the part when the callable *is* one of
them, and, while it runs, watches every call (``sys.setprofile``): a call into a forbidden function, however deeply
wrapped, fails the part too. Names are resolved by file, so a function is caught even when the learner imported it
under another name before the check ran. In a notebook :func:`run` also reports the Triton kernels launched during
the call, so a check can require that the learner's own kernel really ran.

In the grader (``python -m fastpath_lib grade``) the learner's callable is a
:class:`~fastpath_lib.grading.engine.remote.Proxy` for a function in the learner's kernel, which no watch in the
grader's process can see into, and which the learner's code could blind. There the verdict comes from the learner's
*source* (:mod:`fastpath_lib.grading.engine.sources`), as read from the notebook file: the code the answer can reach by
name (its definition, and transitively the top-level statements that bind, fill or store into the names it reads) must
name no forbidden function, resolved through its imports in the grader's own process, no forbidden torch method, and
import no module the grader cannot find as installed. Only that code is read: the rest of the notebook (magics,
plots, scratch cells) is not the answer. This is a rule about what the answer is (the reference must not call the
operator it checks), not a defence: no list of names stops code that hides a call in Python (a string built at run
time, a copy of the kit's source); against that the grader has its sandbox (the kernel reaches no solution, answer
key or check), behaviour on inputs drawn at grading time, and for torch's operators an exercise forbids, their absence
from the processes that run the learner's code (:func:`absent`, :mod:`fastpath_lib.grading.engine.absent`). The
kernel reports no launches: where a check needs them, the grader runs the learner's kernel itself
(:mod:`fastpath_lib.grading.engine.kernel_run`).

Note:
    In a notebook this is advisory feedback, not a sandbox: code the learner runs in other threads is not watched,
    and code in the notebook can switch the watch off. The checks also compare behaviour on cases drawn at each call
    and on specs the library does not implement.

>>> import torch.nn.functional as F
>>> try:
...     run(lambda x: F.rms_norm(x, [2]), (torch.ones(1, 2),), TORCH_RMS_NORM)
... except Fail as exc:
...     print(exc)
your code calls torch.nn.functional.rms_norm (the graded code must not call the operator it computes): write it yourself
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib
import importlib.util
import sys
import types
from pathlib import Path

import torch

from fastpath_lib.grading.engine import remote, sources
from fastpath_lib.grading.report.feedback import Fail
from fastpath_lib.grading.rules import torch_families
from fastpath_lib.runtime import parse_source

__all__ = ["Forbidden", "Given", "given", "run", "reject_handed_back", "source_problem", "stray_import", "kit",
           "torch_op", "TORCH_RMS_NORM", "KIT_REFERENCE", "KIT_OP", "KIT_KERNELS", "code_of", "absent", "MARKER",
           "is_marker"]

_KIT = Path(__file__).resolve().parents[2]
_TORCH = Path(torch.__file__).resolve().parent
_TORCH_OPS = torch._ops.__file__


@dataclasses.dataclass(frozen=True)
class Forbidden:
    """Functions a learner must not use for one answer.

    Args:
        targets: ``(file or folder, qualified name or "*", why)`` entries.
        builtins: ``(name, why)`` of torch's C functions and Tensor methods (``torch.softmax``, ``x.softmax``).
        families: ``(family, why)`` of :mod:`~fastpath_lib.grading.rules.torch_families`: a builtin is forbidden
            when its name is of the family as the registry stands at the call, so an operator registered after this
            was built (``torch.onnx``'s, Inductor's, a ``torch/_native`` override's) is refused too.
    """

    targets: tuple[tuple[str, str, str], ...] = ()
    builtins: tuple[tuple[str, str], ...] = ()
    families: tuple[tuple[str, str], ...] = ()

    def __add__(self, other: Forbidden) -> Forbidden:
        return Forbidden(self.targets + other.targets, self.builtins + other.builtins, self.families + other.families)

    def _family_why(self, name: str) -> str | None:
        if not self.families:
            return None
        family = torch_families.family_of(name)
        return next((why for f, why in self.families if f == family), None) if family else None

    @functools.cached_property
    def _index(self) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        for file, name, why in self.targets:
            out.setdefault(str(Path(file).resolve()), {}).setdefault(name, why)
        return out

    @functools.cached_property
    def _builtin_index(self) -> dict[str, str]:  # looked up at every C call a watched answer makes
        return dict(self.builtins)

    @functools.cached_property
    def _folders(self) -> tuple[str, ...]:
        return tuple(p + "/" for p in self._index if Path(p).is_dir())

    def names(self, code) -> str | None:
        """``"<name> (<why>)"`` when ``code`` belongs to a forbidden function, else ``None``."""
        file = code.co_filename
        names = self._index.get(file)
        if names is None:
            folder = next((f for f in self._folders if file.startswith(f)), None)
            names = self._index[folder[:-1]] if folder else None
        if not names:
            return None
        qual = getattr(code, "co_qualname", code.co_name)
        why = names.get(qual) or names.get(qual.split(".<locals>")[0]) or names.get("*")
        return f"{_module_of(file)}.{qual} ({why})" if why else None

    def builtin(self, fn) -> str | None:
        """``"torch <name> (<why>)"`` when ``fn`` is a forbidden torch builtin, else ``None``."""
        name = getattr(fn, "__name__", None)
        if isinstance(fn, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):  # torch.ops.aten.<op>[.overload]
            name = fn._qualified_op_name.split("::")[-1] if isinstance(fn, torch._ops.OpOverloadPacket) else fn._opname
            why = self._builtin_index.get(name) or self._family_why(name)
            return f"torch.ops {fn.__name__} ({why})" if why else None
        why = (self._builtin_index.get(name) or self._family_why(name)) if name else None
        if why is None:
            return None
        owner = getattr(fn, "__self__", None)
        if isinstance(owner, torch.Tensor) or getattr(fn, "__module__", None) in ("torch", "torch._C._nn") \
                or str(getattr(owner, "__name__", "")).startswith("torch"):
            return f"torch {name} ({why})"
        return None


def _module_of(filename: str) -> str:
    p = Path(filename)
    for root, prefix in ((_KIT, "fastpath_lib"), (_TORCH, "torch")):
        try:
            rel = p.resolve().relative_to(root).with_suffix("")
        except ValueError:
            continue
        return ".".join((prefix, *rel.parts))
    return p.stem


@dataclasses.dataclass(frozen=True)
class Given:
    """Functions a check hands the learner's code (the op under test, a helper the exercise gives out): calls made
    from inside them are not watched. An exception to a refusal, not one: it is no :class:`Forbidden`."""

    functions: Forbidden

    def __add__(self, other: Given) -> Given:
        return Given(self.functions + other.functions)

    @property
    def targets(self) -> tuple[tuple[str, str, str], ...]:
        return self.functions.targets

    def names(self, code) -> str | None:
        """``"<name> (<what it is>)"`` when ``code`` belongs to a given function, else ``None``."""
        return self.functions.names(code)


def given(rel: str, *names: str, why: str) -> Given:
    """Functions of the kit's file ``rel`` (relative to ``fastpath_lib/``; no names means all of them) that a check
    hands the learner's code; ``why`` says what they are."""
    return Given(kit(rel, *names, why=why))


def kit(rel: str, *names: str, why: str) -> Forbidden:
    """Functions of the kit's file (or folder) ``rel``, relative to ``fastpath_lib/``; no names means all of them."""
    return Forbidden(tuple((str(_KIT / rel), n, why) for n in (names or ("*",))))


def torch_op(*names: str, why: str) -> Forbidden:
    """torch's own functions and Tensor methods called ``names``. A name of a family of
    :mod:`~fastpath_lib.grading.rules.torch_families` (``rms_norm``, ``softmax``) stands for its whole family as the
    installed torch's registry has it: every operator that computes the same kind of thing, under every name
    (``torch._fused_rms_norm``, ``torch.ops.aten._safe_softmax``, ``torch.nn.LayerNorm``). Any other name stands for
    itself, its private alias (``_name``), its Python wrapper in ``torch.nn.functional`` and the ``forward`` of the
    ``torch.nn`` module class of the same name.

    >>> forbidden = torch_op("softmax", why="")
    >>> {"_safe_softmax", "log_softmax", "softmin"} <= dict(forbidden.builtins).keys()
    True
    >>> sorted(t[1] for t in torch_op("normalize", why="").targets) == sorted(
    ...     q for _, q in torch_families.python_functions("normalization"))
    True
    >>> sorted(t[1] for t in torch_op("hardtanh", why="").targets)
    ['Hardtanh.forward', '_hardtanh', 'hardtanh']
    """
    import torch.nn.modules as modules

    families = tuple(dict.fromkeys(f for n in names if (f := torch_families.family_of(n))))
    alone = [n for n in names if not torch_families.family_of(n)]
    aliases = tuple(dict.fromkeys(a for n in alone for a in (n, f"_{n}")))
    classes = {c.__name__.lower(): c for c in vars(torch.nn).values()
               if isinstance(c, type) and issubclass(c, torch.nn.Module) and c.__module__.startswith(modules.__name__)}
    forwards = tuple((sys.modules[c.__module__].__file__, f"{c.__name__}.forward", why)
                     for n in alone if (c := classes.get(n.replace("_", ""))) is not None)
    in_family = tuple((file, qual, why) for f in families for file, qual in torch_families.python_functions(f))
    family_names = tuple(sorted({n for f in families for n in torch_families.names(f)}))
    return Forbidden(tuple((str(_TORCH / "nn" / "functional.py"), n, why) for n in aliases) + forwards + in_family,
                     tuple((n, why) for n in aliases + family_names), tuple((f, why) for f in families))


TORCH_RMS_NORM = torch_op("rms_norm", why="the graded code must not call the operator it computes")
KIT_REFERENCE = kit("testing.py", "reference_rms_norm", "reference_grads", "_ref_graph",
                    why="that is the kit's own reference")
KIT_OP = kit("rmsnorm/op.py", why="that is the kit's own operator") + kit("rmsnorm/module.py",
                                                                         why="that is the kit's own operator")
KIT_KERNELS = kit("rmsnorm/kernels.py", why="those are the kit's own kernels")


#: What an absent torch operator returns in the grader's kernel of an exercise whose checks accept it where the
#: learner's code may call torch's operator (exercise 08's fallback route): every element this value, exact in each
#: dtype exercise 08's cases draw (fp16, bf16, fp32, fp64: a power of two inside float16's range; not in the float8
#: dtypes, whose range stops short of it), and the result of none of the exercises' operators (a
#: softmax lies in [0, 1], a log-softmax row holds a value >= -log(n), a normalized or layer-normed row of equal
#: values is +-1/sqrt(n) or 0).
MARKER = -1024.0


def is_marker(y) -> bool:
    """Whether ``y`` is what an absent torch operator returned (:data:`MARKER` in every element)."""
    return isinstance(y, torch.Tensor) and y.is_floating_point() and y.numel() > 0 and bool((y == MARKER).all())


def absent(exercise: str, *forbidden: Forbidden, marker: bool = False, why: str | None = None) -> dict:
    """What the grader's preamble (:mod:`fastpath_lib.grading.engine.absent`) removes from a process that runs the
    learner's code for ``exercise`` (``"ex01"``): every operator of the torch families ``forbidden`` names, as the
    installed registry has them, and torch's Python functions of those families. A check module declares it as
    ``ABSENT``; with ``marker`` the absent operators return :data:`MARKER` (a check that accepts torch's operator on
    some cases recognises it there), else they raise. ``why`` (default: each family's own) is what the refusal says.

    >>> spec = absent("ex01", TORCH_RMS_NORM)
    >>> {"rms_norm", "_fused_rms_norm", "native_layer_norm"} <= spec["ops"].keys(), "softmax" in spec["ops"]
    (True, False)
    """
    whys: dict[str, str] = {}
    for f in forbidden:
        for family, own in f.families:
            whys.setdefault(family, why or own)
    ops = {n: why for fam, why in whys.items() for n in sorted(torch_families.operators(fam))}
    past = sorted({n for fam in whys for n in torch_families.jit_only(fam)})  # no dispatcher refusal reaches them
    for n in sorted(torch_families.layout_entries(past)):
        ops.setdefault(n, f"the tensors TorchScript's {', '.join(past)} compute on, past the dispatcher")
    python = sorted({p for fam in whys for p in torch_families.python_functions(fam)})
    return {"ops": ops, "python": [list(p) for p in python], "exercise": f"exercise {exercise.removeprefix('ex')}",
            "marker": MARKER if marker else None}


def _code_of(fn):
    if remote.is_proxy(fn):
        where = remote.code(fn)
        if isinstance(where, list) and len(where) == 2 and all(isinstance(w, str) for w in where):
            return types.SimpleNamespace(co_filename=where[0], co_qualname=where[1], co_name=where[1].split(".")[-1])
        return None
    for attr in ("__func__", "func", "fn"):  # bound methods, functools.partial, triton.JITFunction
        inner = getattr(fn, attr, None)
        if inner is not None and inner is not fn:
            got = _code_of(inner)
            if got is not None:
                return got
    code = getattr(fn, "__code__", None)  # not every object's __code__ is code (torch.ops namespaces answer anything)
    return code if isinstance(code, types.CodeType) else None


def code_of(fn):
    """The code object of a function, method, ``functools.partial``, Triton kernel or a
    :class:`~fastpath_lib.grading.engine.remote.Proxy` (its file and qualified name as the kernel reported them)."""
    return _code_of(fn)


def reject_handed_back(fn, forbidden: Forbidden, given: Given | None = None) -> None:
    """Fail when ``fn`` (a function, method, ``functools.partial`` or Triton kernel) is a forbidden function; in the
    grader, also when the learner's source for ``fn`` names one (:func:`source_problem`)."""
    code = _code_of(fn)
    name = forbidden.names(code) if code is not None else forbidden.builtin(fn)
    if name:
        raise Fail(f"you handed back {name}: write it yourself")
    if remote.is_proxy(fn):
        problem = source_problem(remote.root(fn), forbidden, given)
        if problem:
            raise Fail(problem)


def _resolve(dotted: str):
    """The object a dotted name stands for in the grader's own process (or ``None``): a module already imported
    here (the kit's are imported on demand) and its attributes."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        mod_name = ".".join(parts[:i])
        mod = sys.modules.get(mod_name)
        if mod is None and parts[0] == "fastpath_lib":
            try:
                mod = importlib.import_module(mod_name)
            except Exception:  # noqa: BLE001 - not a module of the kit
                mod = None
        if mod is not None:
            obj = mod
            for attr in parts[i:]:
                obj = getattr(obj, attr, None)
                if obj is None:
                    return None
            return obj
    return None


def _held(obj, depth: int = 0):
    """``obj`` and, for a dict, list, tuple or set, the objects it holds (three levels deep): a table of the
    grader's functions (``KNOWN_OPS[name][0]``) is the functions it holds; a class (``torch.nn.Softmax``) is what
    calling an instance runs, its ``forward``."""
    yield obj
    if isinstance(obj, type) and callable(getattr(obj, "forward", None)):
        yield obj.forward
    if depth < 3 and type(obj) in (dict, list, tuple, set, frozenset):
        for v in (obj.values() if isinstance(obj, dict) else obj):
            yield from _held(v, depth + 1)


def _root_names(root: str) -> set[str]:
    try:
        tree = parse_source(root.strip(), mode="eval")
    except SyntaxError:
        return set()
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def source_problem(root: str, forbidden: Forbidden, given: Given | None = None) -> str | None:
    """Why the learner's source borrows the answer called ``root`` (an argument of the check cell), or ``None``.

    Reads only the code ``root`` can reach by name in :func:`fastpath_lib.grading.engine.sources.learner_source` (its
    definition and what it reads, :func:`~fastpath_lib.grading.engine.sources.closure_source`): the rest of the notebook
    (plots, ``%timeit``, scratch cells) is not the answer and costs nothing.
    """
    src = "\n".join([root] + [sources.closure_source(n) for n in sorted(_root_names(root))])
    stray = stray_import(src)
    if stray:
        return (f"your code imports {stray}, which is not an installed module (a file put on the import path, or a "
                f"copy of the kit's own): import what is installed by its name, and write the answer yourself")
    names = sources.names_used(src)
    attrs = sources.attributes_used(src)
    resolved = [(name, obj) for name in sorted(names) if (obj := _resolve(name)) is not None]
    # an attribute read on any name that may stand for a module the source reaches (``R = T; R.f``)
    resolved += [(f"{name}.{a}", getattr(m, a)) for name, m in resolved if isinstance(m, types.ModuleType)
                 for a in sorted(attrs)
                 if isinstance(getattr(m, a, None), (types.FunctionType, types.BuiltinFunctionType))]
    for name, top in resolved:
        for obj in _held(top):
            code = _code_of(obj)
            if code is not None and given is not None and given.names(code):
                continue
            hit = (forbidden.names(code) if code is not None else None) or forbidden.builtin(obj)
            if hit and obj is not top and type(top) in (dict, list, tuple, set, frozenset):
                # a table (``F.__dict__``, a decomposition table): the table is what the code reads
                return f"your code reads {name}, which holds {hit}: write it yourself"
            if hit:
                return f"your code calls {hit}: write it yourself"
    for n, why in forbidden.builtins:
        if n in attrs:
            return f"your code calls torch {n} ({why}): write it yourself"
    return None


def _remote_run(fn, args: tuple, allow_none: bool, forbidden: Forbidden, given: Given | None):
    # the kernel's agent watches the call as run() does here: a name built at run time is the same call there
    watched = (tuple((file, qual) for file, qual, _why in forbidden.targets),
               tuple(n for n, _why in forbidden.builtins),
               tuple((file, qual) for file, qual, _why in (given.targets if given is not None else ())))
    out = remote.session(fn).call(fn, args, {}, forbidden=watched)
    if out is None and not allow_none:
        raise Fail("your function returned None (is the stub still in place?)")
    return out


def _is_launch(code) -> bool:
    qual = getattr(code, "co_qualname", code.co_name)
    return qual in ("JITFunction.run", "InterpretedFunction.run") and "triton" in code.co_filename


def run(fn, args: tuple, forbidden: Forbidden, *, allow_none: bool = False, given: Given | None = None,
        launches: list | None = None):
    """``fn(*args)`` as :func:`~fastpath_lib.grading.report.feedback.call` does (``None`` fails unless ``allow_none``),
    failing with :class:`Fail` when ``fn`` is, or calls, a forbidden function.

    Args:
        given: helpers the exercise hands out; calls made from inside them are not watched.
        launches: when a list, the Python functions of the Triton kernels launched during the call are appended (in
            this process only: for a Proxy the grader runs the kernel itself,
            :mod:`~fastpath_lib.grading.engine.kernel_run`).
    """
    if not callable(fn):
        raise Fail(f"expected a function, got {type(fn).__name__}: {fn!r:.80}")
    reject_handed_back(fn, forbidden, given)
    if remote.is_proxy(fn):
        if launches is not None:  # the learner's kernel reports nothing but return values
            raise TypeError("launches of a function in the learner's kernel are measured by the grader "
                            "(fastpath_lib.grading.engine.kernel_run), never reported by the kernel")
        return _remote_run(fn, args, allow_none, forbidden, given)
    seen: list[str] = []
    inside = [0]

    def watch(frame, event, arg):
        if event == "c_call":
            if not seen and not inside[0] and (name := forbidden.builtin(arg)):
                seen.append(name)
            return
        if event not in ("call", "return"):
            return
        code = frame.f_code
        if given is not None and given.names(code):
            inside[0] += 1 if event == "call" else -1
        elif event == "call" and launches is not None and _is_launch(code):
            launches.append(getattr(frame.f_locals.get("self"), "fn", None))
        elif event == "call" and not seen and not inside[0] and (name := forbidden.names(code)):
            seen.append(name)
        elif event == "call" and not seen and not inside[0] and code.co_name == "__call__" \
                and code.co_filename == _TORCH_OPS and (name := forbidden.builtin(frame.f_locals.get("self"))):
            seen.append(name)  # torch.ops.aten.<op>(...): a Python __call__ around the operator

    previous = sys.getprofile()
    sys.setprofile(watch)
    try:
        out = fn(*args)
    finally:
        sys.setprofile(previous)
    if seen:
        raise Fail(f"your code calls {seen[0]}: write it yourself")
    if out is None and not allow_none:
        raise Fail("your function returned None (is the stub still in place?)")
    return out


_CHECKOUT = _KIT.parent  # the kit's checkout: fastpath_lib/, its tools and tests


def stray_import(source: str | None = None) -> str | None:
    """The first module the source (the code an answer reaches; default: the whole of
    :func:`~fastpath_lib.grading.engine.sources.learner_source`) imports that is not an installed module as the grader
    finds it, or ``None``: a name the grader cannot find (a file the
    learner's code put on ``sys.path``, a folder it changed into, one it wrote), a relative import, or a module found
    inside the kit's checkout other than ``fastpath_lib`` itself. Such a module is a second copy of something (the
    kit's own ``bench/analysis.py`` imported as ``analysis``) that names resolved in the grader's process miss.

    >>> stray_import("import math, torch\\nfrom fastpath_lib.bench.analysis import noise_band") is None
    True
    >>> stray_import("import sys\\nsys.path.insert(0, 'fastpath_lib/bench')\\nimport analysis as a")
    'analysis'
    """
    return _stray(sources.learner_source() if source is None else source)


@functools.lru_cache(maxsize=16)
def _stray(source: str) -> str | None:  # a check asks once per scenario: read each source once
    venv = Path(sys.prefix).resolve()
    for tree in sources.parse_cells(source):
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level:
                return "." * node.level + (node.module or "")
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
            for top in (n.split(".")[0] for n in names if n.split(".")[0] != "fastpath_lib"):
                try:
                    spec = importlib.util.find_spec(top)
                except (ImportError, ValueError):
                    spec = None
                places = [] if spec is None else [spec.origin, *(spec.submodule_search_locations or [])]
                files = [Path(p).resolve() for p in places if p and Path(p).is_absolute()]  # not "built-in"
                inside = [p for p in files if p.is_relative_to(_CHECKOUT) and not p.is_relative_to(venv)]
                if spec is None or inside:
                    return top
    return None
