"""The grader's preamble: in a process that runs a learner's code for an exercise whose checks forbid torch operator
families, the operators of those families do not exist. It runs before any of the learner's code, in the notebook's
kernel (:mod:`fastpath_lib.grading.engine.cli` executes this file's text there first) and in the grader's child that
runs the learner's Triton source (:mod:`fastpath_lib.grading.engine.kernel_run`), and imports nothing of the grader.

:func:`install` takes plain data (:func:`fastpath_lib.grading.rules.borrowed.absent` writes it from the checks'
declarations): ``ops`` (registry name without namespace or overload -> why it is forbidden), ``python`` (``(file,
qualified name)`` of torch's Python functions of those families), ``exercise`` (as feedback names it) and ``marker``
(``None``: a call raises; a number: a call that returns one tensor returns a tensor of the first tensor argument's
shape filled with it, which the exercise's checks recognise).

1. **The dispatcher.** For every overload of every operator of ``ops`` in torch's registry, in every namespace, and
   every dispatch key that has a kernel for it (``CompositeImplicitAutograd``, ``CPU``, ``Meta``, ``Autograd``, ...),
   a kernel that refuses is registered over torch's. The registration's handle is kept alive by a reference no Python
   object holds (not gc-tracked, in no module or container), so nothing in the process can deregister it. Every path
   into the operator (``torch.rms_norm``, ``F.rms_norm``, Tensor methods, ``torch.nn`` modules, ``torch.ops.aten``,
   ``map``/``functools.partial``, ``redispatch``, ``_dispatch_call_boxed``, ``torch.compile``'s tracing) reaches it.
2. **torch's Python implementations** of those operators (the decomposition tables' entries for them, ``torch._refs``,
   ``torch.nn.functional``'s, the ``torch.nn`` classes' ``forward``): their code becomes the same refusal, and
   executing their modules' code again (``importlib.reload``, ``exec`` of it) is refused.
3. **Nothing undoes it.** Where the machine allows, a seccomp filter refuses ``execve`` and ``execveat`` to every
   thread (no fresh Python without this preamble, by any path), and an audit hook (which no code can remove) refuses
   walks of the garbage collector's objects, ``ctypes`` (after this preamble's own use), opening ``/proc/*/mem``,
   starting processes, and setting the code of a refused function.
"""

import sys

#: The audit events that start a process.
_SPAWN = ("subprocess.Popen", "os.exec", "os.posix_spawn", "os.spawn", "os.system", "os.startfile", "pty.spawn",
          "cpython.PyInterpreterState_New")  # a new interpreter has no audit hook
#: Extension modules that load a library and call its functions by address with no audit event (``ctypes``'s are
#: audited and refused) or hand Python code the C API: through them a call reaches torch's kernels past the dispatcher.
_NATIVE_BRIDGES = ("_cffi_backend", "_testcapi", "_testinternalcapi", "_testmultiphase", "_testsinglephase")
_ERRNO_EPERM = 1


def _message(name, why, exercise):
    return (f"torch's {name} is not available while {exercise} is graded: {why} (the grader's kernel has no such "
            f"operator: write it yourself)")


def _first_tensor(args, kwargs):
    import torch

    for v in (*args, *kwargs.values()):
        if isinstance(v, torch.Tensor):
            return v
        if type(v) in (list, tuple):
            for x in v:
                if isinstance(x, torch.Tensor):
                    return x
    return None


def _refusal(name, why, exercise, marker, one_tensor, dtype_at=None):
    """The callable that stands for ``name``: raises, or returns the marker where ``one_tensor`` (the operator
    returns one tensor and writes none), in the dtype its ``dtype`` argument (at ``dtype_at``) asks for."""
    import torch

    text = _message(name, why, exercise)

    def refuse(*args, **kwargs):
        like = _first_tensor(args, kwargs) if marker is not None and one_tensor else None
        if like is None or not like.is_floating_point():
            raise RuntimeError(text)
        asked = args[dtype_at] if dtype_at is not None and dtype_at < len(args) else kwargs.get("dtype")
        dtype = asked if isinstance(asked, torch.dtype) else like.dtype
        return torch.full(like.shape, marker, dtype=dtype, device=like.device)
    return refuse


def _keys(full_name):
    """The dispatch keys that have a kernel of their own for the operator ``full_name`` (``ns::name.overload``)."""
    import re

    import torch

    dump = torch._C._dispatch_dump(full_name)
    keys = dict.fromkeys(m.group(1) for m in re.finditer(r"^(\w+)(?:\[alias\])?: registered at", dump, re.M))
    return [k for k in keys if k != "debug"]


def _one_tensor(schema):
    """Whether an operator's schema returns one tensor and writes into none of its arguments."""
    rets = schema.returns
    writes = any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)
    return len(rets) == 1 and str(rets[0].type) == "Tensor" and not writes


def _dispatcher(spec):
    """Register the refusing kernels; the handles are leaked (kept alive, unreachable)."""
    import ctypes
    import warnings

    import torch

    libs, done = {}, 0
    for full in torch._C._dispatch_get_all_op_names():
        ns, rest = full.split("::", 1)
        name, _, overload = rest.partition(".")
        if name not in spec["ops"]:
            continue
        try:
            schema = torch._C._get_schema(f"{ns}::{name}", overload)
            one = _one_tensor(schema)
            dtype_at = next((i for i, a in enumerate(schema.arguments) if a.name == "dtype"), None)
        except RuntimeError:  # an operator registered without a schema
            one, dtype_at = False, None
        kernel = _refusal(name, spec["ops"][name], spec["exercise"], spec.get("marker"), one, dtype_at)
        if ns not in libs:
            libs[ns] = torch._C._dispatch_library("IMPL", ns, "")
        for key in _keys(full):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "Overriding a previously registered kernel": that is the point
                libs[ns].impl(rest, key, kernel, False)
            done += 1
    incref = ctypes.PyDLL(None).Py_IncRef  # a handle of its own: ctypes.pythonapi keeps no resolved function
    for lib in libs.values():
        incref(ctypes.py_object(lib))  # alive for the process's life; no object refers to it
    libs.clear()
    return done


_REFUSAL = "_fastpath_refusal"


def _template(n):
    """A code object ``(*args, _fastpath_refusal, **kwargs) -> _fastpath_refusal(*args, **kwargs)`` with ``n`` free
    variables (a function's code can be replaced only by code with as many); each function whose code it becomes
    holds its refusal as that keyword's default."""
    names = [f"_free{i}" for i in range(n)]
    src = "def _outer():\n" + "".join(f"    {v} = None\n" for v in names)
    src += f"    def _absent(*args, {_REFUSAL}=None, **kwargs):\n"
    if names:
        src += "        (" + ", ".join(names) + ",)\n"
    src += f"        return {_REFUSAL}(*args, **kwargs)\n    return _absent\n"
    outer = next(c for c in compile(src, "<fastpath absent>", "exec").co_consts if hasattr(c, "co_code"))
    return next(c for c in outer.co_consts if hasattr(c, "co_code"))


def _python(spec):
    """Replace the code of torch's Python functions of the families (and of the decomposition tables' entries for
    their operators) by the refusal; returns their files."""
    import gc
    import importlib
    import types
    from pathlib import Path

    import torch

    root = Path(torch.__file__).resolve().parent
    for file, _ in spec["python"]:  # every module holding one, imported now: none made later, unreplaced
        try:
            rel = Path(file).resolve().relative_to(root).with_suffix("")
        except ValueError:
            continue
        importlib.import_module(".".join(["torch", *[p for p in rel.parts if p != "__init__"]]))
    import torch._decomp

    wanted = {tuple(p) for p in spec["python"]}
    found = [o for o in gc.get_objects() if type(o) is types.FunctionType
             and (o.__code__.co_filename, o.__code__.co_qualname) in wanted]
    for table in (*torch._decomp.global_decomposition_table.values(), torch._decomp.decomposition_table):
        for op, fn in list(table.items()):
            if getattr(op, "_opname", None) in spec["ops"]:
                while fn is not None:
                    if type(fn) is types.FunctionType:
                        found.append(fn)
                    fn = getattr(fn, "__wrapped__", None)
    templates, files = {}, set()
    whys = list(spec["ops"].values())
    for fn in {id(f): f for f in found}.values():
        code = fn.__code__
        owner = code.co_qualname.split(".")[0] if code.co_name == "forward" else code.co_name
        why = next((spec["ops"][o] for o in (owner, owner.lstrip("_"), "_" + owner.lstrip("_"), owner.lower())
                    if o in spec["ops"]), whys[0] if whys else "")
        refusal = _refusal(code.co_qualname, why, spec["exercise"], spec.get("marker"), True)
        n = len(code.co_freevars)
        tmpl = templates.get(n) or templates.setdefault(n, _template(n))
        fn.__code__ = tmpl.replace(co_name=code.co_name, co_qualname=code.co_qualname,
                                   co_filename=code.co_filename, co_firstlineno=code.co_firstlineno)
        fn.__kwdefaults__ = {_REFUSAL: refusal}
        files.add(code.co_filename)
    return files


#: TorchScript's graph executors besides its interpreter, which run torch's kernels without the dispatcher: Static
#: Runtime (its out variants call ``at::cpu``/``at::native`` directly), the TensorExpr compiler (NNC: its own IR
#: evaluator and code generators) and the fusers that hand a graph's nodes to one (TensorExpr, nvFuser, oneDNN
#: Graph, and the pass that rewrites frozen graphs to oneDNN operators of the JIT's own). Each is recognised by its
#: family's words in the name of an attribute of ``torch._C`` or of one of its submodules: a submodule of the words
#: goes whole; of the JIT's switches and passes (``_jit_set_*``, ``_jit_override_*``, ``_jit_pass_*``), those whose
#: name has the words.
_EXECUTORS = {"Static Runtime": ("staticmodule", "staticruntime"), "TensorExpr": ("te", "texpr", "tensorexpr"),
              "fusers": ("fuse", "fuser", "fusion", "nvfuser", "llga", "onednn", "mkldnn")}
_JIT_SWITCHES = ("_jit_set_", "_jit_override_", "_jit_pass_", "_jit_texpr_set_")


def executors(root=None) -> list[tuple[object, str]]:
    """``(module, attribute)`` for every executor entry point (:data:`_EXECUTORS`) under ``root`` (``torch._C``)
    and its submodules."""
    import types

    if root is None:
        import torch

        root = torch._C
    words = [w for family in _EXECUTORS.values() for w in family]
    found, todo, seen = [], [root], set()
    while todo:
        module = todo.pop()
        if id(module) in seen:
            continue
        seen.add(id(module))
        for name in list(vars(module)):
            value = vars(module)[name]
            squeezed = name.lower().replace("_", "")
            parts = name.lower().strip("_").split("_")
            if isinstance(value, types.ModuleType):
                if any(w in parts for w in words):
                    found.append((module, name))
                elif value.__name__.startswith(root.__name__ + "."):
                    todo.append(value)
            elif any(w in squeezed for w in _EXECUTORS["Static Runtime"]) or (
                    name.startswith(_JIT_SWITCHES) and any(w in parts for w in words)):
                found.append((module, name))
    return found


def _no_executors() -> int:
    """Remove every executor entry point (:func:`executors`) from ``torch._C``, its submodules and ``sys.modules``:
    no Python reference to one remains (walks of the garbage collector's objects are refused, :func:`_hook`).
    Returns how many."""
    gone = executors()
    for module, name in gone:
        value = vars(module)[name]
        delattr(module, name)
        if getattr(value, "__name__", None) in sys.modules and sys.modules[value.__name__] is value:
            del sys.modules[value.__name__]
    return len(gone)


#: seccomp: ``(audit arch, seccomp syscall, execve, execveat)`` per machine
_SECCOMP = {"x86_64": (0xC000003E, 317, 59, 322), "aarch64": (0xC00000B7, 277, 221, 281)}


def _no_exec():
    """A seccomp filter on every thread of the process, inherited by its forks: ``execve`` and ``execveat`` fail
    with EPERM. Returns why not where the machine refuses it (then the audit hook alone refuses starting processes)."""
    import ctypes
    import os
    import struct

    machine = os.uname().machine
    if machine not in _SECCOMP:
        return f"no seccomp filter for {machine}"
    arch, sys_seccomp, execve, execveat = _SECCOMP[machine]
    ld, jeq, ret, jge = 0x20, 0x15, 0x06, 0x35
    allow, refuse = 0x7FFF0000, 0x00050000 | _ERRNO_EPERM
    prog = [(ld, 0, 0, 4),  # the architecture
            (jeq, 1, 0, arch),
            (ret, 0, 0, refuse),  # another ABI's calls: refused
            (ld, 0, 0, 0),  # the call's number
            (jge, 3, 0, 0x40000000),  # x32 calls: refused
            (jeq, 2, 0, execve),
            (jeq, 1, 0, execveat),
            (ret, 0, 0, allow),
            (ret, 0, 0, refuse)]
    raw = b"".join(struct.pack("HBBI", *f) for f in prog)
    buf = ctypes.create_string_buffer(raw, len(raw))

    class _Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = _Prog(len(prog), ctypes.addressof(buf))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        return f"prctl(PR_SET_NO_NEW_PRIVS) failed: {os.strerror(ctypes.get_errno())}"
    # SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC: every thread, the kernel's own threads included
    if libc.syscall(sys_seccomp, 1, 1, ctypes.byref(fprog)) != 0:
        return f"seccomp failed: {os.strerror(ctypes.get_errno())}"
    return None


def _hook(files, refused_codes):
    """The audit hook (it cannot be removed) that keeps the preamble from being undone or sidestepped."""
    import os
    import re

    import sysconfig
    from importlib.machinery import EXTENSION_SUFFIXES

    mem = re.compile(r"^/proc/[^/]+/(task/[^/]+/)?mem$")
    suffixes = tuple(EXTENSION_SUFFIXES)  # extension modules load only from the interpreter's installed folders
    installed = tuple(os.path.join(os.path.realpath(sysconfig.get_path(k)), "") for k in
                      ("stdlib", "platstdlib", "purelib", "platlib"))

    def hook(event, args):
        if event.startswith("ctypes.") or event in ("gc.get_objects", "gc.get_referrers", "gc.get_referents") \
                or event in _SPAWN:
            raise PermissionError(f"{event} is not available while this exercise is graded (the grader's kernel "
                                  f"lacks torch's operators the exercise forbids, and keeps lacking them)")
        if event == "import" and len(args) > 1 and isinstance(args[1], str) and args[1].endswith(suffixes) and (
                str(args[0]).split(".")[-1] in _NATIVE_BRIDGES or not os.path.realpath(args[1]).startswith(installed)):
            raise PermissionError(f"importing {args[0]} ({args[1]}) is not available while this exercise is graded: "
                                  "native code from it reaches torch's kernels past the grader's refusals")
        if event == "open" and args and isinstance(args[0], (str, bytes)):
            path = os.fsdecode(args[0])
            if "mem" in path and mem.match(os.path.realpath(path)):
                raise PermissionError(f"opening {path} is not available while this exercise is graded")
        elif event == "exec" and args and getattr(args[0], "co_filename", None) in files:
            raise PermissionError(f"executing {args[0].co_filename} again is not available while this exercise is "
                                  f"graded (its operators are absent from the grader's kernel)")
        elif event == "object.__setattr__" and len(args) > 1 and args[1] == "__code__" \
                and id(args[0]) in refused_codes:
            raise PermissionError("replacing the code of an absent torch function is not available while this "
                                  "exercise is graded")

    sys.addaudithook(hook)


def merge(specs):
    """One spec for several (the check modules of one exercise each declare theirs; ``None``: none declared), or
    ``None``."""
    specs = [s for s in specs if s]
    if not specs:
        return None
    out = {"ops": {}, "python": [], "exercise": specs[0]["exercise"], "marker": None}
    for spec in specs:
        out["ops"] = {**spec["ops"], **out["ops"]}
        out["python"] += [p for p in spec["python"] if p not in out["python"]]
        out["marker"] = out["marker"] if out["marker"] is not None else spec.get("marker")
    return out


def note(spec):
    """What the report adds to a notebook's first error where the absent operators answer a marker (their calls do
    not raise there, so a cell that compares with one fails without saying why); else ``""``."""
    if not spec or spec.get("marker") is None:
        return ""
    return (f" (while {spec['exercise']} is graded, torch's operators its checks forbid are absent from the kernel: "
            f"those that return one tensor return {spec['marker']:g} in every element, so a cell that compares with "
            f"one fails there)")


def guard():
    """Step 3 alone (the ``execve`` filter and the audit hook), for a process that declares no operator absent and
    keeps other refusals from being undone (:mod:`~fastpath_lib.grading.engine.host_ops`). Returns why no seccomp
    filter, or ``None``."""
    _no_executors()
    no_exec = _no_exec()
    _hook(frozenset(), frozenset())
    return no_exec


def install(spec):
    """Make the operators of ``spec`` absent from this process (see the module's docstring). Returns
    ``{"kernels": registrations, "functions": Python functions replaced, "no_exec": why no seccomp filter or None}``."""
    import gc
    import types

    import torch  # noqa: F401 - the operators' registry

    kernels = _dispatcher(spec)
    files = _python(spec)
    refused = {id(o) for o in gc.get_objects() if type(o) is types.FunctionType
               and _REFUSAL in (o.__kwdefaults__ or {})}
    executors_gone = _no_executors()
    no_exec = _no_exec()
    _hook(frozenset(files), frozenset(refused))
    return {"kernels": kernels, "functions": len(refused), "executors": executors_gone, "no_exec": no_exec}


if __name__ == "<fastpath grader preamble>":
    _FASTPATH_INSTALLED = install(_FASTPATH_SPEC)  # noqa: F821 - the grader's spec, in the namespace it runs in
