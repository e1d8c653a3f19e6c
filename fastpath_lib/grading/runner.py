"""The grader's side inside the learner's kernel: look for tampering, then run one check itself.

:mod:`fastpath_lib.grading.cli` never imports this module into the kernel. It reads this file from disk and
executes its text in a fresh namespace, silently (``silent=True``: no ``pre_run_cell``/``post_run_cell`` hooks
fire, nothing is displayed), at the place of each distributed check cell, with these globals set:

* ``MODE``: ``"baseline"`` (run once before the learner's first cell) or ``"check"``;
* ``OUT``: the file to write the JSON answer to (read and deleted by the grader right after the call);
* ``KIT``: the folder holding ``fastpath_lib``; ``BASELINE``: what ``"baseline"`` recorded;
* ``CHECK`` and ``CALL``: the façade check's name and a function returning its ``(args, kwargs)``, evaluated in the
  learner's namespace (the arguments of the original check cell, e.g. ``my_reference``).

In ``"check"`` mode it records *evidence* of tampering: IPython event callbacks, import hooks or builtins that were
not there before the learner's first cell, kit modules in ``sys.modules`` that are not the kit's files, and kit
functions whose code differs from the code on disk (a replaced check, ``emit``, ``compare``, ...). Then it imports
the checks afresh from disk (``fastpath_lib.exercises``, ``fastpath_lib.grading.*`` and ``fastpath_lib.testing``
leave ``sys.modules`` for the call and are put back after it) and calls ``CHECK(*args, **kwargs, show=False)``; the
results never pass through the notebook's display.

Note:
    A grader that shares a process with the code it grades detects tampering; it cannot rule it out (otter-grader
    and nbgrader share this limit). What it defends against is listed above and tested in
    ``tests/test_grading_integrity.py``.
"""

import builtins
import json
import os
import sys
import types

#: Modules whose code the checks rely on: verified against the files on disk before every grader-run check.
VERIFIED = ("fastpath_lib.exercises", "fastpath_lib.testing", "fastpath_lib.cases", "fastpath_lib.eligibility",
            "fastpath_lib.runtime", "fastpath_lib.rmsnorm.predicate", "fastpath_lib.rmsnorm.layout",
            "fastpath_lib.bench.analysis", "fastpath_lib.bench.matrix")
#: Modules imported afresh for each grader-run check.
FRESH_PREFIXES = ("fastpath_lib.exercises", "fastpath_lib.grading", "fastpath_lib.testing")
#: Builtins whose identity must not change.
BUILTINS = ("exec", "eval", "compile", "__import__", "open", "print", "getattr", "setattr", "hasattr", "isinstance",
            "issubclass", "type", "len", "repr", "str", "dict", "list", "tuple", "set", "callable", "sorted", "sum",
            "any", "all", "min", "max", "abs", "round", "iter", "next", "zip", "map", "range", "super", "id", "hash")
#: Event callbacks the kernel's own libraries register (matplotlib's inline backend flushes figures after a cell).
ALLOWED_CALLBACK_MODULES = ("matplotlib_inline.", "ipykernel.", "IPython.", "ipywidgets.")


def _ipython():
    mod = sys.modules.get("IPython")
    return mod.get_ipython() if mod is not None else None


def _callbacks():
    ip = _ipython()
    if ip is None:
        return {}
    return {ev: [id(cb) for cb in cbs] for ev, cbs in ip.events.callbacks.items()}


#: Names the grader's own cell looks up in the notebook's namespace (IPython puts its own ``open`` there).
SHADOWABLE = ("exec", "compile", "__import__", "open", "__builtins__")


def _user_names():
    ip = _ipython()
    user = getattr(ip, "user_ns", None) or {}
    return {n: id(user.get(n)) for n in SHADOWABLE}


def _snapshot():
    return {"callbacks": _callbacks(), "meta_path": [id(f) for f in sys.meta_path],
            "path_hooks": [id(h) for h in sys.path_hooks],
            "builtins": {n: id(builtins.__dict__.get(n)) for n in BUILTINS}, "user": _user_names()}


def _callback_ok(cb) -> bool:
    fn = getattr(cb, "__func__", cb)
    mod = getattr(fn, "__module__", "") or ""
    code = getattr(fn, "__code__", None)
    home = sys.modules.get(mod.split(".")[0]) if mod else None
    home_dir = os.path.dirname(getattr(home, "__file__", "") or "")
    return (mod.startswith(ALLOWED_CALLBACK_MODULES) and code is not None and bool(home_dir)
            and os.path.realpath(code.co_filename).startswith(os.path.realpath(home_dir)))


def _hook_evidence(base):
    out = []
    ip = _ipython()
    if ip is not None:
        for ev, cbs in ip.events.callbacks.items():
            known = set(base["callbacks"].get(ev, []))
            for cb in cbs:
                if id(cb) not in known and not _callback_ok(cb):
                    name = getattr(cb, "__qualname__", None) or type(cb).__name__
                    out.append(f"registered an IPython '{ev}' event hook ({name})")
    if [id(f) for f in sys.meta_path] != base["meta_path"] or [id(h) for h in sys.path_hooks] != base["path_hooks"]:
        out.append("changed the import system (sys.meta_path or sys.path_hooks)")
    for n in BUILTINS:
        if id(builtins.__dict__.get(n)) != base["builtins"].get(n):
            out.append(f"replaced the builtin {n}()")
    now = _user_names()
    out += [f"rebinds {n} in the notebook's namespace" for n in SHADOWABLE if now[n] != base["user"].get(n)]
    return out


def _module_file(name):
    return os.path.join(KIT, *name.split(".")) + ".py"  # noqa: F821 - KIT is set by the grader


_DISK = {}


def _disk_code(path):
    """qualified name -> code object of every function and method defined in the file (by compiling it)."""
    if path not in _DISK:
        with open(path, encoding="utf-8") as fh:
            top = compile(fh.read(), path, "exec", dont_inherit=True)
        found = {}

        def walk(code):
            for const in code.co_consts:
                if isinstance(const, types.CodeType):
                    found.setdefault(getattr(const, "co_qualname", const.co_name), const)
                    walk(const)
        walk(top)
        _DISK[path] = found
    return _DISK[path]


def _functions(mod, name):
    """``(label, function, owning class or None)`` for the module's functions and the methods of its classes."""
    for attr, value in list(vars(mod).items()):
        if isinstance(value, types.FunctionType):
            yield attr, value, None
        elif isinstance(value, type) and getattr(value, "__module__", None) == name:
            for k, v in list(vars(value).items()):
                v = v.fget if isinstance(v, property) else getattr(v, "__func__", v)
                if isinstance(v, types.FunctionType):
                    yield f"{attr}.{k}", v, value


_GENERATED = ("__init__", "__repr__", "__eq__", "__setattr__", "__delattr__", "__hash__", "__lt__", "__le__",
              "__gt__", "__ge__")


def _pristine(fn, owner=None) -> bool:
    code = fn.__code__
    if code.co_filename == "<string>" and owner is not None and "__dataclass_fields__" in vars(owner) \
            and fn.__name__ in _GENERATED and fn.__qualname__ == f"{owner.__qualname__}.{fn.__name__}":
        return True  # written by @dataclass
    file = os.path.realpath(code.co_filename)
    if file.startswith(os.path.realpath(KIT) + os.sep):  # noqa: F821 - KIT is set by the grader
        disk = _disk_code(file).get(getattr(code, "co_qualname", code.co_name))
        return disk is not None and disk == code
    return fn.__module__ not in (None, "__main__") and os.path.isfile(file) and "ipykernel_" not in file


def _module_evidence(name, mod):
    """Functions of ``mod`` (a kit module) whose code is not the code on disk."""
    path = _module_file(name)
    if not os.path.exists(path):
        path = os.path.join(path[:-3], "__init__.py")
    if type(mod) is not types.ModuleType or os.path.realpath(getattr(mod, "__file__", "") or "") != \
            os.path.realpath(path):
        return [f"sys.modules[{name!r}] is not the kit's module"]
    out = [f"replaced {name}.{label}" for label, fn, owner in _functions(mod, name) if not _pristine(fn, owner)]
    expected = [q for q, c in _disk_code(path).items() if "." not in q and not q.startswith("<")
                and c.co_flags & 0x1]  # CO_OPTIMIZED: a function, not a class body
    expected += [n for n in getattr(mod, "__all__", ()) if n.startswith("check_")]
    for attr in dict.fromkeys(expected):
        value = vars(mod).get(attr)
        if not isinstance(value, types.FunctionType):
            out.append(f"replaced {name}.{attr} (now {type(value).__name__})")
        elif attr.startswith("check_") and value.__code__.co_name != attr:
            out.append(f"replaced {name}.{attr} (now {value.__code__.co_name})")
    return list(dict.fromkeys(out))


def _kit_modules():
    names = set(VERIFIED)
    names.update(n for n in list(sys.modules) if n.startswith("fastpath_lib.grading."))
    return sorted(n for n in names if n in sys.modules)


def _evidence(base):
    out = _hook_evidence(base)
    for name in _kit_modules():
        out += _module_evidence(name, sys.modules[name])
    pkg = sys.modules.get("fastpath_lib")
    if pkg is not None and getattr(pkg, "exercises", None) not in (None, sys.modules.get("fastpath_lib.exercises")):
        out.append("fastpath_lib.exercises is not the module in sys.modules")
    return out


def _run_check():
    saved = {n: m for n, m in sys.modules.items() if n.startswith(FRESH_PREFIXES)}
    for n in saved:
        del sys.modules[n]
    try:
        import importlib

        fresh = importlib.import_module("fastpath_lib.exercises")
        args, kwargs = CALL()  # noqa: F821 - set by the grader
        results = getattr(fresh, CHECK)(*args, **kwargs, show=False)  # noqa: F821
        return [r.to_dict() for r in results or []], None
    except Exception as exc:  # noqa: BLE001 - reported to the grader, never raised into the notebook
        return [], f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    finally:
        for n in [n for n in sys.modules if n.startswith(FRESH_PREFIXES)]:
            del sys.modules[n]
        sys.modules.update(saved)
        for n, m in saved.items():  # the package attributes the fresh import re-pointed
            parent, _, child = n.rpartition(".")
            if parent in sys.modules:
                setattr(sys.modules[parent], child, m)


def _main():
    if MODE == "baseline":  # noqa: F821
        answer = _snapshot()
    else:
        evidence = _evidence(BASELINE)  # noqa: F821
        results, error = _run_check()
        answer = {"check": CHECK, "results": results, "error": error, "evidence": evidence}  # noqa: F821
    with open(OUT, "w", encoding="utf-8") as fh:  # noqa: F821
        json.dump(answer, fh)


_main()
