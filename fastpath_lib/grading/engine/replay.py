"""A launcher's record, made on tensors that hold no values, and its replay on the real ones
(:mod:`~fastpath_lib.grading.engine.kernel_run`'s steps 1 and 3).

:class:`Recorder` records what a launcher does on ``meta`` tensors (:func:`meta`, from :func:`shapes_only`'s
descriptions): each torch operator it runs and each kernel it launches, every tensor named by its number.
:class:`Replay` runs a record's operators (:func:`operator`: torch operator overloads only) and launches on the real
tensors. A launcher that reads a value fails while it is recorded, with :data:`VALUE_READ`. The processes the steps
run in, which hold no value, are made by :mod:`~fastpath_lib.grading.engine.forks`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from fastpath_lib.grading.engine.host_ops import VALUE_READ

__all__ = ["VALUE_READ", "Refused", "Recorder", "Replay", "Recorded", "TRITON_TYPES", "describe", "bound", "leaves",
           "shapes_only", "operator", "definitions", "node_paths", "compiled_only", "NOT_COMPILED", "MESSAGE", "meta",
           "recorded"]

#: Triton's name of each torch dtype's element type (a tensor argument's pointer type, for the compile step).
TRITON_TYPES = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32", torch.float64: "fp64",
                torch.int8: "i8", torch.int16: "i16", torch.int32: "i32", torch.int64: "i64", torch.uint8: "u8",
                torch.bool: "i1"}

_TENSOR = "__fastpath_tensor__"


class Refused(Exception):
    """What a launcher did that its record cannot hold (a tensor made from Python values, an argument of another
    kind than tensors, numbers, strings, dtypes and None)."""


#: What a kernel's argument that is not a tensor may be, by its exact type: each is described as itself.
_PLAIN = {bool: "bool", int: "int", float: "float", str: "value", type(None): "value"}


def describe(v):
    """A kernel launch's argument as the compile step needs it: a tensor's Triton pointer type, else a description
    from which :func:`bound` makes a value equal to ``v`` (of its type), the value the replay passes: a bool, an
    int, a float, a string, ``None`` or a ``triton.language`` dtype (by its name). Raises :class:`Refused` for any
    other value (a torch dtype, a tuple, ...): the compile step would compile with another value than the replay
    runs with."""
    if isinstance(v, torch.Tensor):
        return ["tensor", "*" + TRITON_TYPES.get(v.dtype, "fp32")]
    import triton.language as tl

    said = [_PLAIN[type(v)], v] if type(v) in _PLAIN else ["dtype", v.name] if type(v) is tl.dtype else None
    try:
        same = said is not None and type(bound(said)) is type(v) and (bound(said) == v or v != v)
    except (ValueError, TypeError, AssertionError):
        same = False
    if not same:
        raise Refused(f"it passes {v!r} ({type(v).__name__}) to a kernel: a kernel's argument is a tensor, a bool, "
                      f"an int, a float, a string, None or a triton.language dtype (tl.float32), values the "
                      f"grader's compile step and its replay both take as themselves")
    return said


def bound(described):
    """The value :func:`describe` described (a tensor's description stays its pointer type)."""
    kind, value = described
    if kind == "dtype":
        import triton.language as tl

        return tl.dtype(value)
    return value


def leaves(v, out: list) -> list:
    """The tensors of a call's arguments, in the order both the record and the replay number them."""
    if isinstance(v, torch.Tensor):
        out.append(v)
    elif type(v) in (list, tuple):
        for x in v:
            leaves(x, out)
    elif type(v) is dict:
        for x in v.values():
            leaves(x, out)
    return out


def shapes_only(args, kwargs) -> tuple:
    """``(args, kwargs)`` with each tensor replaced by what a tensor with no values keeps of it: its number in
    :func:`leaves` order, its storage (shared storages share a number) and size in bytes, dtype, size, stride and
    offset."""
    storages: dict = {}
    count = [0]

    def shape(v):
        if isinstance(v, torch.Tensor):
            st = v.untyped_storage()
            count[0] += 1
            return {_TENSOR: count[0] - 1, "storage": storages.setdefault(st._cdata, len(storages)),
                    "nbytes": int(st.nbytes()), "dtype": str(v.dtype), "size": list(v.shape),
                    "stride": list(v.stride()), "offset": int(v.storage_offset())}
        if type(v) in (list, tuple):
            return type(v)(shape(x) for x in v)
        if type(v) is dict:
            return {k: shape(x) for k, x in v.items()}
        return v
    return shape(args), {k: shape(v) for k, v in kwargs.items()}


def _torch_value(name: str, kind):
    """``torch.float32`` from ``"torch.float32"`` (a dtype, layout or memory format), checked to be one."""
    value = getattr(torch, name.removeprefix("torch."), None)
    if not isinstance(value, kind):
        raise ValueError(f"not a torch {kind.__name__}: {name!r}")
    return value


class Recorder:
    """What a launcher does on tensors that hold no values: each torch operator it runs (every one reaches torch's
    dispatcher, where :mod:`~fastpath_lib.grading.engine.host_ops` refuses all but allocating, viewing and copying)
    and each kernel it launches, with every tensor named by its number (the call's inputs first)."""

    def __init__(self):
        self.refs: dict[int, int] = {}  # id(tensor) -> its number
        self.kept: list = []  # the tensors numbered: alive while the record is made, so no id is reused
        self.storages: dict[int, int] = {}  # a storage (its StorageImpl) -> the number of a tensor viewing it
        self.steps: list = []

    def number(self, t: torch.Tensor) -> int:
        self.refs[id(t)] = len(self.kept)
        self.kept.append(t)
        self.storages.setdefault(t.untyped_storage()._cdata, self.refs[id(t)])
        return self.refs[id(t)]

    def ref(self, t: torch.Tensor) -> int:
        """The number of ``t``; a tensor the record has not seen made is a view of one it has (a ``.data`` or a
        ``set_``), recorded as ``as_strided`` of it, or refused."""
        if id(t) in self.refs:
            return self.refs[id(t)]
        base = self.storages.get(t.untyped_storage()._cdata)
        if base is None or self.kept[base].dtype != t.dtype:
            raise Refused(f"it used a {t.device.type} tensor the grader did not see it receive or make (made from "
                          f"Python values, or with the recording switched off): a launcher's tensors are its inputs, "
                          f"what it allocates and views of them")
        self.steps.append({"op": "aten::as_strided", "overload": "default",
                           "args": [{"t": base}, list(t.shape), list(t.stride()), int(t.storage_offset())],
                           "kwargs": {}, "out": {"t": len(self.kept)}})
        return self.number(t)

    def encode(self, v, new: bool = False):
        """``v`` as plain data: tensors by number (``new``: an operator's result, numbered when not seen yet)."""
        if isinstance(v, torch.Tensor):
            return {"t": self.number(v) if new and id(v) not in self.refs else self.ref(v)}
        if isinstance(v, torch.UntypedStorage):
            found = self.storages.get(v._cdata)
            if found is None:
                raise Refused("it used a storage of no tensor the grader saw")
            return {"storage": found}
        if isinstance(v, torch.device):
            return {"device": str(v)}
        if isinstance(v, torch.dtype):
            return {"dtype": str(v)}
        if isinstance(v, torch.layout):
            return {"layout": str(v)}
        if isinstance(v, torch.memory_format):
            return {"memory_format": str(v)}
        if v is None or type(v) in (bool, int, float, str):
            return v
        if type(v) in (list, torch.Size):
            return [self.encode(x, new) for x in v]
        if type(v) is tuple:
            return {"tuple": [self.encode(x, new) for x in v]}
        import triton.language as tl

        if isinstance(v, tl.dtype):
            return {"tl": v.name}
        raise Refused(f"it passed a {type(v).__name__}, which the grader does not replay: a launcher passes "
                      f"tensors, numbers, strings, dtypes and None")

    def mode(self):
        from torch.utils._python_dispatch import TorchDispatchMode

        recorder = self

        class _Record(TorchDispatchMode):
            @classmethod
            def _should_skip_dynamo(cls):  # nothing here runs under torch.compile: its import is not paid for
                return False

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                step = {"op": func._schema.name, "overload": func._overloadname,
                        "args": recorder.encode(list(args)), "kwargs": {k: recorder.encode(v) for k, v in
                                                                       kwargs.items()}}
                out = func(*args, **kwargs)
                step["out"] = recorder.encode(out, new=True)
                recorder.steps.append(step)
                return out
        return _Record()

    def launch(self, name: str, kernel, grid, args, kwargs) -> None:
        import inspect

        if callable(grid):  # as Triton's launcher calls it: the launch's arguments by name, defaults included
            grid = grid(inspect.getcallargs(kernel.fn, *args, **kwargs))
        if type(grid) not in (tuple, list) or not 1 <= len(grid) <= 3 or \
                not all(type(g) is int and g >= 0 for g in grid):
            raise Refused(f"its grid for {name} is {grid!r}, not up to three numbers")
        bound = dict(zip(kernel.arg_names, args)) | kwargs
        self.steps.append({"launch": name, "grid": list(grid), "args": self.encode(list(args)),
                           "kwargs": {k: self.encode(v) for k, v in kwargs.items()},
                           "described": {k: describe(v) for k, v in bound.items()}})


class Replay:
    """A record (:class:`Recorder`) run on the real inputs: its operators and launches, and nothing else."""

    def __init__(self, inputs: list, device: str, kernels: dict):
        self.table: dict[int, torch.Tensor] = dict(enumerate(inputs))
        self.device, self.kernels = device, kernels

    def decode(self, v):
        if type(v) is list:
            return [self.decode(x) for x in v]
        if type(v) is not dict:
            if v is None or type(v) in (bool, int, float, str):
                return v
            raise ValueError(f"the record holds a {type(v).__name__}")
        (key, value), = v.items()
        if key == "t":
            return self.table[value]
        if key == "storage":
            return self.table[value].untyped_storage()
        if key == "tuple":
            return tuple(self.decode(x) for x in value)
        if key == "device":
            return torch.device(self.device if value == "meta" else value)
        if key == "dtype":
            return _torch_value(value, torch.dtype)
        if key == "layout":
            return _torch_value(value, torch.layout)
        if key == "memory_format":
            return _torch_value(value, torch.memory_format)
        if key == "tl":
            import triton.language as tl

            return tl.dtype(value)
        raise ValueError(f"the record holds {key!r}")

    def bind(self, pattern, value) -> None:
        """Number the tensors of an operator's result as the record numbered them."""
        if type(pattern) is dict and "t" in pattern:
            if not isinstance(value, torch.Tensor):
                raise ValueError("the replay's result differs from the record's")
            self.table[pattern["t"]] = value
        elif type(pattern) is dict and "tuple" in pattern or type(pattern) is list:
            items = pattern["tuple"] if type(pattern) is dict else pattern
            if not isinstance(value, (list, tuple)) or len(items) != len(value):
                raise ValueError("the replay's result differs from the record's")
            for p, x in zip(items, value):
                self.bind(p, x)

    def step(self, s: dict) -> None:
        if "launch" in s:
            kernel, grid = self.kernels[s["launch"]], tuple(s["grid"])
            if not 1 <= len(grid) <= 3 or not all(type(g) is int and g >= 0 for g in grid):
                raise ValueError(f"the record's grid is {grid!r}")
            kernel[grid](*self.decode(s["args"]), **{k: self.decode(v) for k, v in s["kwargs"].items()})
            return
        self.bind(s["out"], operator(s["op"], s["overload"])(*self.decode(s["args"]),
                                                               **{k: self.decode(v) for k, v in s["kwargs"].items()}))


def operator(full: str, overload: str):
    """The torch operator overload ``ns::name.overload``, and nothing else a record could name."""
    import re

    ns, _, name = full.partition("::")
    if not all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", w) and not w.startswith("__") for w in (ns, name, overload)):
        raise ValueError(f"the record names no operator: {full!r}.{overload!r}")
    space = getattr(torch.ops, ns)
    func = getattr(getattr(space, name), overload) if isinstance(space, torch._ops._OpNamespace) else None
    if not isinstance(func, torch._ops.OpOverload):
        raise ValueError(f"the record names no operator: {full!r}.{overload!r}")
    return func


class Recorded:
    """A kernel of the program, launched through ``kernel[grid](...)``: ``on_launch(name, kernel, grid, args,
    kwargs)`` takes each launch (records it, or launches it)."""

    def __init__(self, kernel, name: str, on_launch: Callable):
        self._kernel, self._name, self._on_launch = kernel, name, on_launch

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            return self._on_launch(self._name, self._kernel, grid, args, kwargs)
        return launch

    def __call__(self, *args, **kwargs):  # a jit function called from another one
        return self._kernel(*args, **kwargs)


#: What the replay raises where a kernel runs code (a statement, or any expression in it) that Triton's GPU frontend
#: never visited while the compile step compiled it.
NOT_COMPILED = ("your kernel runs code under the interpreter that Triton's GPU compiler never compiled (line {line} of "
                "{name}, its def the first): the grader runs only what the compile step compiled for a GPU")


#: What marks, among the paths the compile step visited, the message of a ``tl.static_assert`` that held (the
#: frontend never evaluates it): the replay passes the message's text instead (:func:`compiled_only`).
MESSAGE = "message:"


def node_paths(fn) -> dict:
    """``id(node) -> path`` for every node of the function definition ``fn`` (an ``ast.FunctionDef``), the path its
    fields and indices from ``fn`` (``"body/3/orelse/0"``): the same in any parse of the same function's text, so
    the compile step's parse and the replay's agree on which node is which."""
    import ast

    out: dict = {}

    def walk(node, path: str) -> None:
        out[id(node)] = path
        for field, value in ast.iter_fields(node):
            if isinstance(value, list):
                for i, item in enumerate(value):
                    if isinstance(item, ast.AST):
                        walk(item, f"{path}/{field}/{i}")
            elif isinstance(value, ast.AST):
                walk(value, f"{path}/{field}")
    walk(fn, "")
    return out


def compiled_only(fn, visited: set):
    """``fn`` (an ``ast.FunctionDef`` of a ``@triton.jit`` function) as the replay runs it: what Triton's GPU frontend
    compiled, at every level. Each statement of its body whose path (:func:`node_paths`) is not in ``visited`` (the
    nodes the frontend visited, in every compilation of it) raises :data:`NOT_COMPILED` instead, and so does each
    expression the frontend neither visited nor took apart (visited none of its parts): the ``if`` of a
    comprehension, the branch of ``a if C else b`` or ``a and b`` a constexpr decides, an expression in a branch it
    never reached. The parts of an expression the frontend reads itself count as compiled: a compiled f-string's
    constant text, the call of a ``for`` loop's ``range`` and of a ``with`` whose callee and arguments it visited.
    The message of a ``tl.static_assert`` that held (:data:`MESSAGE`), which the frontend never evaluates, is its
    text, a constant; a statement that is a constant (a docstring) is ``pass``. Each raise fires only where the
    interpreter evaluates it: what the frontend left out on a constexpr decision the interpreter leaves out too, so
    an honest kernel runs as compiled, and code only the interpreter would run fails the launch."""
    import ast

    paths, originals = node_paths(fn), list(ast.walk(fn))  # the originals kept alive: their ids stay theirs
    messages = {p.removeprefix(MESSAGE) for p in visited if p.startswith(MESSAGE)}
    # an operator or a context (Load, Store) is one object shared by every node of its kind: never a node's own part
    shared = (ast.expr_context, ast.operator, ast.boolop, ast.cmpop, ast.unaryop)
    compiled = {id(n) for n in originals if paths[id(n)] in visited and not isinstance(n, shared)}
    for node in ast.walk(fn):  # the constant text of a compiled f-string: the frontend reads it, never visits it
        if isinstance(node, ast.JoinedStr) and id(node) in compiled:
            compiled |= {id(v) for v in node.values if isinstance(v, ast.Constant)}
    reached = set(compiled)  # the nodes the frontend visited, or one of whose parts it visited

    def mark(node) -> bool:
        inside = [mark(child) for child in ast.iter_child_nodes(node) if not isinstance(child, shared)]
        if any(inside):
            reached.add(id(node))
        return id(node) in reached
    mark(fn)

    def message(node) -> ast.Constant:
        return ast.Constant(NOT_COMPILED.format(line=node.lineno - fn.lineno + 1, name=fn.name))

    def fails(node):
        if isinstance(node, ast.stmt):
            return ast.Raise(exc=ast.Call(ast.Name("RuntimeError", ast.Load()), [message(node)], []), cause=None)
        throw = ast.parse("(_ for _ in ()).throw", mode="eval").body
        return ast.Call(throw, [ast.Call(ast.Name("RuntimeError", ast.Load()), [message(node)], [])], [])

    class _Compiled(ast.NodeTransformer):
        def visit(self, node):
            if node is fn:
                node.body = [self.visit(stmt) for stmt in node.body]
                return node
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                return ast.Pass()
            if isinstance(node, ast.stmt) and id(node) not in compiled:
                return fails(node)
            if isinstance(node, ast.expr) and paths.get(id(node)) in messages:
                return ast.Constant(ast.unparse(node))
            if isinstance(node, ast.expr) and id(node) not in reached and not isinstance(
                    getattr(node, "ctx", None), (ast.Store, ast.Del)):
                return fails(node)
            return self.generic_visit(node)
    out = ast.fix_missing_locations(_Compiled().visit(fn))
    del originals
    return out


def definitions(text: str, visited: dict | None = None) -> str:
    """The part of the program's text that defines its kernels: its imports, its constants written as literals and
    its decorated (``@triton.jit``) functions; the host functions are left out, and nothing else of it runs. With
    ``visited`` (function name -> the paths of the nodes Triton's GPU frontend visited, from the compile step), each
    decorated function is :func:`compiled_only`. Raises ``ValueError`` where a function's text holds another line
    than its own that starts with ``def `` (Triton's interpreter runs a function from the last such line of its
    source)."""
    import ast

    def literal(node) -> bool:
        try:
            ast.literal_eval(node)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return False
        return True

    def literal_or_constexpr(node) -> bool:  # the same constants kernel_source.program writes: tl.constexpr(lit) too
        if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords and \
                ast.unparse(node.func) in ("tl.constexpr", "triton.language.constexpr", "constexpr"):
            return literal(node.args[0])
        return literal(node)

    kept = []
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef) and node.decorator_list:
            if visited is not None:
                node = compiled_only(node, set(visited.get(node.name, ())))
            written = ast.unparse(node)
            if sum(line.strip().startswith("def ") for line in written.splitlines()) != 1:
                raise ValueError(f"your kernel {node.name}'s text holds a line starting with 'def ' besides its own "
                                 f"def line (in a string): Triton's interpreter would run another function than the "
                                 f"one compiled; write no line break inside a kernel's strings")
            kept.append(written)
        elif isinstance(node, (ast.Import, ast.ImportFrom)) or isinstance(node, (ast.Assign, ast.AnnAssign)) and \
                node.value is not None and literal_or_constexpr(node.value):
            kept.append(ast.unparse(node))
    return "\n".join(kept) + "\n"


def meta(described, recorder: Recorder, storages: dict):
    """The request's description of an argument (:func:`shapes_only`) as a tensor with no values, numbered."""
    if type(described) is dict and _TENSOR in described:
        d = described
        if d["storage"] not in storages:
            storages[d["storage"]] = torch.UntypedStorage(d["nbytes"], device="meta")
        t = torch.empty(0, dtype=_torch_value(d["dtype"], torch.dtype), device="meta")
        t.set_(storages[d["storage"]], d["offset"], d["size"], d["stride"])
        recorder.number(t)
        return t
    if type(described) in (list, tuple):
        return type(described)(meta(x, recorder, storages) for x in described)
    if type(described) is dict:
        return {k: meta(x, recorder, storages) for k, x in described.items()}
    return described


def recorded(recorder: Recorder, target, grid, args, kwargs) -> dict:
    """One call's record: ``{"steps": [...], "out": ...}``, or ``{"error": [type, message]}``."""
    storages: dict = {}
    args, kwargs = meta(args, recorder, storages), {k: meta(v, recorder, storages) for k, v in kwargs.items()}
    try:
        with recorder.mode():
            out = target[tuple(grid)](*args, **kwargs) if grid is not None else target(*args, **kwargs)
        return {"steps": recorder.steps, "out": recorder.encode(out)}
    except Refused as exc:
        return {"error": ["Refused", f"the grader cannot replay your launcher: {exc}"]}
    except Exception as exc:  # noqa: BLE001 - the learner's exception is an answer
        text = str(exc).strip()
        # a value read on a tensor with no values: torch says it is on "meta"; its data_ptr() is near NULL
        if "meta" in text.lower() or "null" in text.lower():
            return {"error": ["Refused", VALUE_READ.format(why=f"{type(exc).__name__}: {text[:200]}")]}
        return {"error": [type(exc).__name__, text[:500]]}
