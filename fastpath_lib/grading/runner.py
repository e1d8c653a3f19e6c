"""The grader's agent inside the learner's kernel: it only *answers*, and never judges.

:mod:`fastpath_lib.grading.remote` executes this file's text once in the kernel, silently, before the learner's
first cell; it registers ``sys.modules["_fastpath_grader_agent"]``. Every request afterwards is one silent execute
of ``serve(token, payload)``: ``payload`` is a pickle the *grader* wrote (the arguments its check drew, references
to objects the agent holds), and the answer is displayed under :data:`MIME` with the request's one-time ``token``,
as ``torch.save`` bytes of plain values: ``None``, numbers, strings, bytes, tensors, dtypes, devices, sizes, lists,
tuples, dicts, :class:`~fastpath_lib.cases.CaseSpec`; any other object stays in the kernel and is answered as a
reference (its type name, repr and code location), which the grader can call or read attributes of. An exception
is answered as its type name, message and the line that raised it.

Requests: ``("get", expr)`` evaluates an argument of the check cell in the notebook's namespace; ``("call", fn,
args, kwargs)`` calls a held object and answers the tensors of the arguments the call changed too, so writes into
output buffers reach the grader (what a learner's Triton kernel launches is never reported from here: the grader
measures it, :mod:`fastpath_lib.grading.kernel_run`); ``("getattr", obj, name)``, ``("getitem", obj, key)``,
``("list", obj)``; ``("ops", {token: variant}[, module])`` and ``("tests", fn, token, kit_op)`` run exercise 09's
tests (with ``module``, exercise 12's) against one op object whose behaviour the token selects (``kit_op``: the check
cell's own argument, the kit's op).

Nothing here is trusted by the grader: code in the notebook can change this agent, but then it only changes the
answers the grader reads, which it judges itself (:mod:`fastpath_lib.grading.cli`).
"""

import base64
import dataclasses
import io
import pickle
import sys
import traceback
import types

MIME = "application/vnd.fastpath.answer.v1+json"
#: Classes answered by value (all their fields are plain values).
BY_VALUE = ("fastpath_lib.cases.CaseSpec",)
_PLAIN = (bool, int, float, str, bytes, complex)
_refs: dict = {}
_state = {"n": 0, "op": None, "table": {}, "current": None}


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
    _state["n"] += 1
    _refs[_state["n"]] = obj
    try:
        text = repr(obj)
    except Exception:  # noqa: BLE001
        text = f"<{type(obj).__name__}>"
    code = _code_of(obj)
    where = [code.co_filename, getattr(code, "co_qualname", code.co_name)] if code is not None else None
    return {"__fastpath_ref__": _state["n"], "type": type(obj).__name__, "repr": text[:300], "code": where,
            "callable": callable(obj)}


def _encode(v, depth=0):
    import torch

    if v is None or type(v) in _PLAIN:
        return v
    if type(v) in (torch.Tensor, torch.nn.Parameter):
        return v.detach()
    if type(v) in (torch.dtype, torch.device, torch.Size):
        return v
    if type(v).__module__ == "numpy" and getattr(v, "ndim", None) == 0 and hasattr(v, "item"):
        return _encode(v.item(), depth)
    if depth < 8:
        if type(v) in (list, tuple):
            return type(v)(_encode(x, depth + 1) for x in v)
        if type(v) is dict and all(type(k) in (str, int) for k in v):
            return {k: _encode(x, depth + 1) for k, x in v.items()}
        name = f"{type(v).__module__}.{type(v).__qualname__}"
        if name in BY_VALUE and dataclasses.is_dataclass(v):
            fields = {f.name: getattr(v, f.name) for f in dataclasses.fields(v)}
            if all(_encode(x, depth + 1) is x or type(x) in (tuple, list) for x in fields.values()):
                return v
    return _ref(v)


def _tensors(args, kwargs):
    """The tensors of a call's arguments, walked into lists, tuples and dicts two levels deep. The grader runs this
    same definition (:func:`fastpath_lib.grading.remote._agent_functions` compiles it from this file), so both sides
    list a call's tensors in one order."""
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


class _Loader(pickle.Unpickler):
    def persistent_load(self, pid):
        return _refs[pid]


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


def _call(fn, args, kwargs):
    tensors = _tensors(args, kwargs)
    before = [_storage_bytes(t).clone() for t in tensors]
    out = fn(*args, **kwargs)
    changed = [None if torch_equal(_storage_bytes(t), b) else t.detach() for t, b in zip(tensors, before)]
    return {"ok": _encode(out), "args": changed}


def torch_equal(a, b):
    import torch

    return a.shape == b.shape and torch.equal(a, b)


def _install_ops(table, module=None):
    """One op object for every variant of exercise 09: its behaviour is chosen by the token of the run. With
    ``module`` (exercise 12), that module's ``kernel_ops(table)`` builds the op and its runner."""
    if module is not None:
        import importlib

        _state["op"], _state["run"] = importlib.import_module(module).kernel_ops(table)
        return True
    import torch.nn.functional as F

    from fastpath_lib.grading import ex09_contract as C

    impls = {"torch": F.rms_norm}
    for category, fns in C.BROKEN.items():
        for i, fn in enumerate(fns):
            impls[f"{category}:{i}"] = fn
    chosen = {token: impls.get(variant, variant) for token, variant in table.items()}
    current = []

    def rms_norm(input, normalized_shape, weight=None, eps=None):
        return current[-1](input, normalized_shape, weight, eps)

    def run(tests, token, kit_op):
        impl = chosen[token]
        current.append(kit_op if impl == "kit" else impl)
        try:
            tests(_state["op"])
            return None
        except Exception as exc:  # noqa: BLE001 - a failing test is an answer
            return [type(exc).__name__, str(exc)[:300]]
        finally:
            current.clear()
    _state["op"], _state["run"] = C._Op(rms_norm), run
    return True


def _answer(request):
    kind = request[0]
    if kind == "get":
        ip = sys.modules["IPython"].get_ipython()
        return {"ok": _encode(eval(request[1], ip.user_ns))}  # noqa: S307 - the check cell's own argument
    if kind == "call":
        return _call(*request[1:])
    if kind == "getattr":
        return {"ok": _encode(getattr(request[1], request[2]))}
    if kind == "getitem":
        return {"ok": _encode(request[1][request[2]])}
    if kind == "list":
        return {"ok": _encode(list(request[1]))}
    if kind == "ops":
        return {"ok": _install_ops(*request[1:3])}
    if kind == "tests":
        return {"ok": _state["run"](request[1], request[2], request[3])}
    raise ValueError(f"unknown request {kind!r}")


def serve(token, payload):
    """Answer one request of the grader; never raises into the notebook."""
    import torch
    from IPython.display import publish_display_data

    try:
        if payload.startswith("@"):  # a large request: a file the grader wrote
            with open(payload[1:], "rb") as fh:
                raw = fh.read()
        else:
            raw = base64.b64decode(payload)
        answer = _answer(_Loader(io.BytesIO(raw)).load())
    except BaseException as exc:  # noqa: BLE001 - the learner's exception is an answer
        chain = f"{exc!r} {exc.__cause__!r} {exc.__context__!r}"
        answer = {"error": [type(exc).__name__, str(exc).strip()[:2000], _where(exc), chain[:2000]]}
    buf = io.BytesIO()
    try:
        torch.save(answer, buf)
    except Exception as exc:  # noqa: BLE001
        buf = io.BytesIO()
        torch.save({"error": ["TypeError", f"the grader could not read your answer back: {exc}", "", ""]}, buf)
    publish_display_data({MIME: {"token": token, "data": base64.b64encode(buf.getvalue()).decode("ascii")}})


_agent = types.ModuleType("_fastpath_grader_agent")
_agent.serve = serve
sys.modules["_fastpath_grader_agent"] = _agent
