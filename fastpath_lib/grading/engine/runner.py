"""The grader's agent inside the learner's kernel: it only *answers*, never judges, and holds nothing the grader keeps.

:mod:`fastpath_lib.grading.engine.remote` executes this file's text once, before the learner's first cell, as a silent
execute request: it defines the agent in a namespace bound to no name of the notebook's and keeps :func:`_serve` on the
shell (``_fastpath_agent``, like the references it holds, :func:`_refs`). Each request is then one short silent execute
request, with ``allow_stdin``, that calls it; the request itself is not in the code the kernel runs. Every exchange
travels on the kernel's stdin channel, as input requests whose prompt starts with :data:`PROMPT`, each answered by the
grader:

* ``fetch``: the grader replies the request;
* ``op``: a call of an op that runs in the *grader's* process (the ops exercise 09's and 12's tests probe), which
  reaches the learner's tests as a stub (:mod:`~fastpath_lib.grading.engine.runner_stubs`, whose text runs with
  this one's, in one namespace: it calls :func:`_op`, and this file's requests call its ``_tests``);
* ``answer``: the agent's answer; the grader takes exactly one per request and refuses a second.

Values travel as ``torch.save`` bytes of plain values, read with ``torch.load(weights_only=True)`` on both sides:
``None``, numbers, strings, bytes, dtypes, devices, sizes, lists, tuples, dicts,
:class:`~fastpath_lib.cases.CaseSpec`, and tensors as records of their storage (:func:`_pack`: tensors that share
memory still share it on the other side). Any other object the learner's code returns stays in the kernel and is
answered as a reference (its type name, repr and code location), which the grader can call or read attributes of.
An exception is answered as its type name, message and the line that raised it.

Requests: ``("get", expr)`` evaluates an argument of the check cell in the notebook's namespace; ``("call", fn, args,
kwargs[, forbidden])`` calls a held object (watching for the check's forbidden functions, :func:`_watched`) and
answers, besides what it returned, the tensors of the arguments the call changed
(what a learner's Triton kernel launches is never reported from here: the grader measures it,
:mod:`fastpath_lib.grading.engine.kernel_run`); ``("getattr", obj, name)``, ``("getitem",
obj, key)``, ``("list", obj)``; ``("tests", fn, stub)`` calls ``fn`` on a fresh stub of the op under test.

Nothing here is trusted beyond what the learner's own code could return: code in the notebook shares this process
and can replace anything the agent runs on, but the kernel holds no expected value, no table of which op is which,
no verdict; what it could forge is an answer the learner's function could have returned itself.
"""

import base64
import dataclasses
import io
import sys
import traceback
import types

PROMPT = "\x1bfastpath:"
#: The interpreter's functions the agent runs on, taken when its text runs (before the learner's first cell): code in
#: the notebook that replaces ``sys.setprofile`` or ``sys.audit`` later does not reach the agent, and one that replaces
#: these names in the agent's namespace is seen (:func:`_evidence`).
_setprofile, _getprofile, _audit = sys.setprofile, sys.getprofile, sys.audit
_b64encode, _b64decode = base64.b64encode, base64.b64decode
#: The audit events that switch off the call watch, or run code out of its sight (a tracer's own code is unwatched).
_WATCH_EVENTS = ("sys.setprofile", "sys.settrace")
#: The audit events that reach the interpreter's memory, where the agent's record is (besides ``ctypes.*``).
_HEAP_EVENTS = ("gc.get_objects", "gc.get_referrers", "gc.get_referents")
#: Classes answered by value (all their fields are plain values).
BY_VALUE = ("fastpath_lib.cases.CaseSpec",)
_PLAIN = (bool, int, float, str, bytes, complex)


def _shell():
    return sys.modules["IPython"].get_ipython()


def _refs():
    """The objects answered by reference (the learner's own), kept on the shell between requests."""
    shell = _shell()
    refs = getattr(shell, "_fastpath_refs", None)
    if not isinstance(refs, dict):
        refs = {"n": 0}
        shell._fastpath_refs = refs
    return refs


def _dumps(obj) -> bytes:
    import torch

    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def _loads(raw: bytes):
    """What ``_dumps`` wrote, read without running code (``weights_only``)."""
    import torch

    allowed = []
    try:
        from fastpath_lib.cases import CaseSpec

        allowed.append(CaseSpec)
    except ImportError:
        pass
    with torch.serialization.safe_globals(allowed):
        return torch.load(io.BytesIO(raw), weights_only=True, map_location="cpu")


def _pack(value, other, same=()):
    """``value`` as plain data: each tensor becomes a record of its storage (each storage sent once, so tensors that
    share memory share it on the other side), dtype, offset, shape, strides and its autograd state (``requires_grad``
    and whether it is a leaf, a view of another tensor, packed too, or the result of an op); a tensor that *is* one
    of ``same`` becomes a reference to it; any object neither plain nor a tensor is what ``other`` makes of it."""
    import torch

    storages, keys, tensors = [], {}, []

    def enc(v, depth):
        if v is None or type(v) in _PLAIN or type(v) in (torch.dtype, torch.device, torch.Size):
            return v
        if type(v) in (torch.Tensor, torch.nn.Parameter):
            while torch._C._functorch.is_functorch_wrapped_tensor(v):  # a transform's wrapper: its values
                v = torch._C._functorch.get_unwrapped(v)
            for k, s in enumerate(same):
                if v is s:
                    return {"__fastpath_arg__": k}
            st = v.untyped_storage()
            key = (st.data_ptr(), st.nbytes(), str(v.device)) if st.nbytes() else ("empty", len(storages))
            if key not in keys:
                keys[key] = len(storages)
                storages.append([torch.empty(0, dtype=torch.uint8, device=v.device).set_(st).detach().cpu().clone(),
                                 str(v.device)])
            grad = None  # autograd's view of the tensor: what an in-place op may do to it depends on it
            if v.requires_grad and v._is_view():
                base = enc(v._base, depth)
                grad = ["view", base["__fastpath_tensor__"]] if "__fastpath_tensor__" in base else ["nonleaf"]
            elif v.requires_grad:
                grad = ["leaf"] if v.is_leaf else ["nonleaf"]
            tensors.append([keys[key], str(v.dtype).split(".")[-1], v.storage_offset(), list(v.shape),
                            list(v.stride()), bool(v.requires_grad), grad])
            return {"__fastpath_tensor__": len(tensors) - 1}
        if depth < 8 and type(v) in (list, tuple):
            return type(v)(enc(x, depth + 1) for x in v)
        if depth < 8 and type(v) is dict and all(type(k) in (str, int) for k in v):
            return {k: enc(x, depth + 1) for k, x in v.items()}
        return other(v)

    return {"value": enc(value, 0), "tensors": tensors, "storages": storages}


def _unpack(packed, ref=None, same=(), autograd=False):
    """The value :func:`_pack` packed: tensors rebuilt on their storages (new ones, never the sender's), references
    to ``same`` resolved, and each ``{"__fastpath_ref__": ...}`` record what ``ref`` makes of it. With ``autograd``,
    each tensor also gets the sender's autograd state on the same memory: a leaf that requires grad, a view of the
    tensor it was a view of, or the result of an op (not a leaf, not a view), so an op refuses or allows an in-place
    write on it as it would have on the sender's side."""
    import torch

    bases = [b.to(device).untyped_storage() for b, device in packed["storages"]]
    made = []
    for i, dtype, offset, shape, stride, *state in packed["tensors"]:
        kind = getattr(torch, str(dtype), None)
        if not isinstance(kind, torch.dtype):
            raise TypeError(f"no dtype {dtype!r}")
        t = torch.empty(0, dtype=kind, device=bases[i].device).set_(bases[i], offset, shape, stride)
        grad = state[1] if autograd and len(state) > 1 and isinstance(state[1], list) and state[1] else None
        if grad is not None and grad[0] == "leaf":
            t.requires_grad_(True)
        elif grad is not None and grad[0] == "view" and type(grad[1]) is int and 0 <= grad[1] < len(made):
            t = made[grad[1]].as_strided(shape, stride, offset)
        elif grad is not None and grad[0] == "nonleaf":
            t = _op_result(t)
        made.append(t)

    def dec(v, depth):
        if type(v) is dict and len(v) == 1 and type(v.get("__fastpath_tensor__")) is int:
            return made[v["__fastpath_tensor__"]]
        if type(v) is dict and len(v) == 1 and type(v.get("__fastpath_arg__")) is int:
            return same[v["__fastpath_arg__"]]
        if type(v) is dict and ref is not None and ("__fastpath_ref__" in v or "__fastpath_pickle__" in v):
            return ref(v)
        if depth < 8 and type(v) in (list, tuple):
            return type(v)(dec(x, depth + 1) for x in v)
        if depth < 8 and type(v) is dict:
            return {k: dec(x, depth + 1) for k, x in v.items()}
        return v

    return dec(packed["value"], 0)


def _op_result(t):
    """``t`` (a leaf that does not require grad) as the result of an op that requires grad: same memory, not a leaf,
    not a view (an in-place write into it is recorded, not refused)."""
    import torch

    class _Result(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t, anchor):
            ctx.mark_dirty(t)
            return t

        @staticmethod
        def backward(ctx, grad):
            return grad, None

    return _Result.apply(t, torch.zeros((), dtype=t.dtype, device=t.device, requires_grad=True))


def _code_of(obj):
    for attr in ("__wrapped__", "__func__", "func", "fn"):
        inner = getattr(obj, attr, None) if not isinstance(obj, type) else None
        if inner is not None and inner is not obj:
            got = _code_of(inner)
            if got is not None:
                return got
    code = getattr(obj, "__code__", None)
    return code if isinstance(code, types.CodeType) else None


def _ref(obj):
    refs = _refs()
    refs["n"] += 1
    refs[refs["n"]] = obj
    try:
        text = repr(obj)
    except Exception:  # noqa: BLE001
        text = f"<{type(obj).__name__}>"
    code = _code_of(obj)
    where = [code.co_filename, getattr(code, "co_qualname", code.co_name)] if code is not None else None
    return {"__fastpath_ref__": refs["n"], "type": type(obj).__name__, "repr": text[:300], "code": where,
            "callable": callable(obj)}


def _by_value_or_ref(v):
    """How the agent answers an object that is neither plain nor a tensor."""
    if type(v).__module__ == "numpy" and getattr(v, "ndim", None) == 0 and hasattr(v, "item"):
        return v.item()
    name = f"{type(v).__module__}.{type(v).__qualname__}"
    if name in BY_VALUE and dataclasses.is_dataclass(v):
        fields = [getattr(v, f.name) for f in dataclasses.fields(v)]
        if all(x is None or type(x) in _PLAIN + (tuple, list) or type(x).__name__ == "dtype" for x in fields):
            return v
    return _ref(v)


def _tensors(args, kwargs):
    """The tensors of a call's arguments, walked into lists, tuples and dicts two levels deep. The grader runs this
    same definition (:func:`fastpath_lib.grading.engine.remote._agent_functions` compiles it from this file), so both
    sides list a call's tensors in one order."""
    import torch

    out = []

    def walk(v, depth):
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif depth < 2 and type(v) in (list, tuple):
            for x in v:
                walk(x, depth + 1)
        elif depth < 2 and type(v) is dict:
            for k in sorted(v, key=str):
                walk(v[k], depth + 1)
    walk(list(args), 0)
    walk(dict(kwargs), 0)
    return out


def _where(exc):
    frames = traceback.extract_tb(exc.__traceback__)
    for frame in reversed(frames):
        name = frame.filename.replace("\\", "/")
        if "fastpath_lib" not in name and "<fastpath" not in name:
            return f" (line {frame.lineno}: {frame.line})" if frame.line else f" (line {frame.lineno})"
    return ""


def _storage_bytes(t):
    import torch

    return torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())


def _changed(tensors, before):
    """Each tensor whose storage differs from its copy in ``before`` (``None`` for one that does not)."""
    return [None if (b.shape == _storage_bytes(t).shape and __import__("torch").equal(_storage_bytes(t), b))
            else t.detach() for t, b in zip(tensors, before)]


def _call(fn, args, kwargs, forbidden=None):
    tensors = _tensors(args, kwargs)
    before = [_storage_bytes(t).clone() for t in tensors]
    out = _watched(fn, args, kwargs, forbidden) if forbidden else fn(*args, **kwargs)
    return {"ok": _pack(out, _by_value_or_ref, same=tensors), "args": _pack(_changed(tensors, before), _ref)}


def _watched(fn, args, kwargs, forbidden):
    """``fn(*args, **kwargs)``, watched here as the grader watches a call in its own process, so a name built at run
    time is the same call: ``forbidden`` is ``(targets, builtins, given)``: ``(file, qualified name or "*")`` of
    Python functions, names of torch's C functions, Tensor methods and ``torch.ops`` operators, and the handed-out
    helpers whose own calls are not watched. The first forbidden one called raises, naming it."""
    import os

    import torch

    def table(pairs):  # file -> qualified names; a folder's names hold for every file under it, as in the grader
        exact = {f: {q for g, q in pairs if g == f} for f, _ in pairs}
        folders = tuple((f.rstrip("/") + "/", q) for f, q in exact.items() if os.path.isdir(f))
        return exact, folders, {}

    def holds(table, code):  # built once, each file's names looked up once (the watch sees every call)
        exact, folders, known = table
        file = code.co_filename
        quals = known.get(file)
        if quals is None:
            quals = known[file] = exact.get(file) or next((q for f, q in folders if file.startswith(f)), ())
        return getattr(code, "co_qualname", code.co_name) in quals or "*" in quals

    files, given = (table(pairs) for pairs in (forbidden[0], forbidden[2]))
    names, seen, inside = set(forbidden[1]), [], [0]

    def saw(what):  # the tamper evidence seals it too: emptying ``seen`` hides nothing from the grader
        seen.append(what)
        _audit("fastpath.forbidden", what)

    def watch(frame, event, arg):
        if event == "c_call" and getattr(arg, "__name__", None) in ("start_new_thread", "start_joinable_thread") \
                and getattr(arg, "__module__", None) == "_thread":  # a new thread's calls are unwatched: evidence
            _audit("fastpath.tamper", "started a thread", frame, ", whose calls the grader's call watch does not see")
        if event in ("call", "return") and given[0] and holds(given, frame.f_code):
            inside[0] += 1 if event == "call" else -1  # what a handed-out helper calls is not the answer's
            return
        if seen or inside[0]:
            return
        if event == "c_call":
            owner, name = getattr(arg, "__self__", None), getattr(arg, "__name__", None)
            if name in names and (isinstance(owner, torch.Tensor) or str(getattr(arg, "__module__", "")).startswith(
                    "torch") or str(getattr(owner, "__name__", "")).startswith("torch")):
                saw(f"torch {name}")
        elif event == "call":
            code = frame.f_code
            if holds(files, code):
                saw(getattr(code, "co_qualname", code.co_name))
            elif code.co_name == "__call__" and code.co_filename == torch._ops.__file__:
                op = frame.f_locals.get("self")
                name = getattr(op, "_opname", None) or str(getattr(op, "_qualified_op_name", "")).split("::")[-1]
                if name in names:
                    saw(f"torch.ops {name}")

    _audit("fastpath.watch", 1)  # the tamper evidence (:func:`_evidence`) knows a call is watched
    previous = _getprofile()
    _setprofile(watch)
    try:
        out = fn(*args, **kwargs)
    finally:
        _setprofile(previous)
        _audit("fastpath.watch", -1)
    if seen:
        raise PermissionError(f"your code calls {seen[0]}: write it yourself")
    return out


def _error(name, message):
    """An exception of the builtin class called ``name`` (else a new class of that name), for an op's answer."""
    import builtins

    base = getattr(builtins, str(name), None)
    if isinstance(base, type) and issubclass(base, Exception):
        return base(message)
    return type(str(name) if str(name).isidentifier() else "Error", (Exception,), {})(message)


def _no_object(v):
    raise TypeError(f"the op under test takes tensors, numbers, sequences and None, not {type(v).__name__}")


def _op(kind, args, **extra):
    """One call of the op under test, run by the grader: the argument tensors are sent, the grader's writes into them
    copied back (the version counters of those it wrote moved, as a write moves them), its exception raised here;
    returns what it returned (an argument tensor as the caller's own)."""
    import torch

    tensors = _tensors(args, {})
    with torch._C._DisableFuncTorch():  # plain copies of the values, outside any torch.func transform
        message = _dumps({"kind": kind, "args": _pack(tuple(args), _no_object), **extra})
    answer = _loads(_ask("op", message))
    with torch._C._DisableFuncTorch():
        changed = _unpack(answer["args"]) if answer.get("args") else []
        got = _unpack(answer["ok"], same=tensors)
    for t, new in zip(tensors, changed):
        if new is not None and t.untyped_storage().nbytes() == new.untyped_storage().nbytes():
            with torch.no_grad():
                t.untyped_storage().copy_(new.untyped_storage())
    for i in answer.get("written") or ():
        if isinstance(i, int) and 0 <= i < len(tensors) and not tensors[i].is_inference():
            torch.autograd.graph.increment_version(tensors[i])
    if answer.get("error"):
        raise _error(*answer["error"][:2])
    return got, answer.get("call")


def _answer(request):
    kind = request[0]
    if kind == "get":
        return {"ok": _pack(eval(request[1], _shell().user_ns), _by_value_or_ref)}  # noqa: S307 - the check cell's
    if kind == "call":
        return _call(*request[1:])
    if kind == "getattr":
        return {"ok": _pack(getattr(request[1], request[2]), _by_value_or_ref)}
    if kind == "getitem":
        return {"ok": _pack(request[1][request[2]], _by_value_or_ref)}
    if kind == "list":
        return {"ok": _pack(list(request[1]), _by_value_or_ref)}
    if kind == "key":  # the grader's key of the seal, sent once, before the learner's first cell
        _audit("fastpath.key", request[1])
        return {"ok": _pack(None, _by_value_or_ref)}
    if kind == "tests":
        return {"ok": _pack(_tests(request[1], request[2]), _by_value_or_ref)}  # noqa: F821 - runner_stubs.py
    raise ValueError(f"unknown request {kind!r}")


def _ask(kind, data=b"", seal=None):
    """One exchange with the grader on the stdin channel; ``seal``: ``(number, record, mac)`` of :func:`_evidence`."""
    extra = "" if seal is None else f":{seal[0]}:{_b64encode(seal[1]).decode('ascii')}:{seal[2]}"
    reply = _shell().kernel.raw_input(PROMPT + kind + ":" + _b64encode(data).decode("ascii") + extra)
    return _b64decode(reply)


def _held(refs, record):
    """An object of the request: one the agent holds, or one the grader pickled (the grader's own, e.g. a predicate
    context: the kernel reads the grader's pickles, the grader never reads the kernel's)."""
    import pickle

    if "__fastpath_pickle__" in record:
        return pickle.loads(record["__fastpath_pickle__"])  # noqa: S301 - written by the grader
    return refs[record["__fastpath_ref__"]]


def _serve():
    """Fetch this execute request's request, answer it; never raises into the notebook."""
    nonce = b""
    try:
        refs = _refs()
        fetched = _ask("fetch")
        nonce, fetched = fetched[:16], fetched[16:]  # the grader's number for this request, which the seal covers
        request = _unpack(_loads(fetched), lambda r: _held(refs, r))
        answer = _answer(request)
    except BaseException as exc:  # noqa: BLE001 - the learner's exception is an answer
        chain = f"{exc!r} {exc.__cause__!r} {exc.__context__!r}"
        answer = {"error": [type(exc).__name__, str(exc).strip()[:2000], _where(exc), chain[:2000]]}
    try:
        data = _dumps(answer)
    except Exception as exc:  # noqa: BLE001
        data = _dumps({"error": ["TypeError", f"the grader could not read your answer back: {exc}", "", ""]})
    sealed = []
    _audit("fastpath.seal", nonce, data, sealed)  # :func:`_evidence`: the record so far, sealed with the answer
    _ask("answer", data, sealed[0] if sealed else None)


if __name__ == "<fastpath grader agent>":
    _shell()._fastpath_agent = _serve
