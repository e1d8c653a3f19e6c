"""Which dotted names under ``triton.language`` are Triton's language: the allow-list a kernel body's reads are held to.

:func:`outside_language` walks a name such as ``tl.math.rsqrt`` from ``triton.language`` one attribute at a time and
returns the first prefix that leaves the language (a module reached under another name, a function's Python
attributes); :func:`language_object` says which objects count as the language's (a ``@triton.jit`` or builtin
function, a dtype, a constexpr, a constant, a function or class defined in ``triton.language``). Past a value (a
parameter, a variable, what a call returns), :func:`published_attributes` says which attributes Triton's language
values publish, and :func:`compiled_kinds` which syntax its frontend compiles. The rules of
:mod:`fastpath_lib.grading.rules.kernel_body` use them on the learner's kernel bodies.
"""

from __future__ import annotations

import functools

__all__ = ["language_object", "outside_language", "published_attributes", "compiled_kinds"]


def language_object(obj) -> bool:
    """Whether ``obj`` is an object of Triton's language: a ``@triton.jit`` or constexpr function, a function
    ``triton.language`` marks as a builtin (or the stand-in Triton's interpreter leaves for one in a process that
    ran interpreted kernels), a dtype, a constexpr, a plain constant, or a function or class defined in
    ``triton.language`` (``libdevice``'s declarations, which the compiler maps to the target's; the compile step
    refuses a call of one that is not Triton's language,
    :func:`~fastpath_lib.grading.engine.compile_check.callee_problem`)."""
    import triton.language as tl
    from triton.runtime.jit import JITCallable

    return isinstance(obj, (JITCallable, tl.dtype, tl.constexpr, int, float, str)) or getattr(
        obj, tl.core.TRITON_BUILTIN, False) is True or callable(obj) and getattr(obj, "__module__", None) is not None \
        and (obj.__module__.startswith("triton.language") or obj.__module__ == "triton.runtime.interpreter")


def outside_language(path: str) -> str | None:
    """The first prefix of ``path`` (a dotted name under ``triton.language``) that leaves Triton's language, else
    ``None``. From a module the next name is one it publishes (in its ``__all__``: ``tl.load``,
    ``tl.PropagateNan``), one of its own submodules (reached under its own name: ``tl.math``,
    ``tl.extra.cuda.libdevice``), or a language object (:func:`language_object`) that is not a module; a module
    reached under another name is not its own (``tl.random.tl``, the ``triton.language.core`` that
    ``triton.language.random`` imports as ``tl``; ``tl.extra.pkgutil``). Past a module, the next name is an attribute
    of a dtype, a constexpr or a class ``triton.language`` publishes (``tl.float32.primitive_bitwidth``,
    ``tl.PropagateNan.ALL``) that is a language object or a member of that class; a function's attributes
    (``tl.sigmoid.fn``, ``tl.target_info.is_cuda.get_capture_scope``) are Python's, not the language's.

    >>> outside_language("triton.language.extra.cuda.libdevice.rsqrt") is None
    True
    >>> outside_language("triton.language.random.tl.builtins.eval")
    'triton.language.random.tl'
    """
    import types

    import triton.language as tl

    obj, where = tl, "triton.language"
    for part in path.split(".")[2:]:
        nxt = getattr(obj, part, None)
        if not isinstance(obj, types.ModuleType):
            cls = isinstance(obj, type)  # a class triton.language publishes (tl.PropagateNan)
            if not (cls or isinstance(obj, (tl.dtype, tl.constexpr))) or not (
                    language_object(nxt) or cls and isinstance(nxt, obj)):
                return f"{where}.{part}"
            obj, where = nxt, f"{where}.{part}"
            continue
        own = isinstance(nxt, types.ModuleType) and nxt.__name__ == f"{obj.__name__}.{part}"
        published = {part, f"{obj.__name__}.{part}"} & set(getattr(obj, "__all__", ()))
        if not (own or published or not isinstance(nxt, types.ModuleType) and language_object(nxt)):
            return f"{where}.{part}"
        obj, where = nxt, f"{where}.{part}"
    return None


#: A value's IR object (``tensor.handle``; in Triton's interpreter the NumPy array behind it): the compiler's, not the
#: language's, though its name has no underscore.
_IR = "handle"


@functools.cache
def published_attributes() -> frozenset[str]:
    """The attributes Triton's language values publish, from the classes of its values and types
    (``triton.language``'s subclasses of ``base_value`` and ``base_type``: ``tensor``, ``dtype``, ``pointer_type``,
    ``constexpr``, ``tuple``, ...): each public member of such a class or of a ``triton.language`` class it derives
    from (``to``, ``T``, ``is_fp16``, ``scalar``), and each public attribute their methods set on the value
    (``shape``, ``numel``, ``element_ty``, ``primitive_bitwidth``, ``value``), but the IR object behind a value
    (``handle``). A kernel body reads nothing else on a value: no ``_`` name, nothing of Python's objects
    (``gi_frame``, ``f_builtins``, ``__class__``)."""
    import ast
    import inspect
    import sys
    import textwrap

    import triton.language as tl

    roots = (tl.core.base_value, tl.core.base_type)
    modules = [m for n, m in list(sys.modules.items()) if n.startswith("triton.language") and m is not None]
    classes = {c for m in modules for c in vars(m).values()
               if isinstance(c, type) and issubclass(c, roots) and c.__module__.startswith("triton.language")}
    names: set[str] = set()
    for cls in {k for c in classes for k in c.__mro__ if k.__module__.startswith("triton.language")}:
        names |= {n for n in vars(cls) if not n.startswith("_")}
        for member in vars(cls).values():
            try:
                tree = ast.parse(textwrap.dedent(inspect.getsource(member))) if inspect.isfunction(member) else None
            except (OSError, TypeError, SyntaxError):
                tree = None
            names |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)
                      and isinstance(n.value, ast.Name) and n.value.id == "self" and not n.attr.startswith("_")} \
                if tree is not None else set()
    return frozenset(names - {_IR})


@functools.cache
def compiled_kinds() -> frozenset[str]:
    """The kinds of syntax (``ast`` class names) Triton's frontend compiles: those its code generator has a visitor
    for (``Call``, ``ListComp``, ``IfExp``, ``For``, ...). A generator expression, a lambda, a set or a dict, ``raise``
    or ``try`` it refuses ("unsupported AST node type"); a starred argument and an f-string's parts it reads inside
    the call and the f-string."""
    from triton.compiler.code_generator import CodeGenerator

    return frozenset(n.removeprefix("visit_") for n in dir(CodeGenerator) if n.startswith("visit_")) | {
        "Starred", "FormattedValue"}
