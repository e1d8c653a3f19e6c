"""The grader's side of the answer channel: the learner's functions and data, seen from the grader's process.

The grader runs each check in its own process. A check receives, in place of each argument of the check cell, what
the learner's kernel answers (:mod:`fastpath_lib.grading.engine.runner`): a plain value (numbers, strings, tensors,
dtypes, lists, dicts, :class:`~fastpath_lib.cases.CaseSpec`) is copied; anything else (a function, a Triton kernel, a
predicate object) becomes a :class:`Proxy`, and calling it, reading an attribute of it or indexing it asks the kernel
again.

The agent's text runs once in the kernel, before the learner's first cell (:meth:`Session.start`); every request is then
one short silent execute request that calls it, the same every time; the request itself, the agent's answer and the
calls of ops the grader holds travel on the kernel's stdin channel (:data:`fastpath_lib.grading.engine.runner.PROMPT`),
as ``torch.save`` bytes of plain values read with ``torch.load(weights_only=True)``: never unpickled as code. The grader
takes exactly one answer per request: a second one (code in the notebook answering for the agent) makes the request
fail. A learner's exception comes back as its type name, message and line, and is raised in the grader as an exception
of that name.

The agent shares the kernel with the learner's code, which can replace anything it runs on: what it answers is
treated as the learner's own answer, nothing more. The kernel holds no secret of the grader's: ops under test run here
(:meth:`Session.run_tests`, the channel in reverse). A check that declares its outputs (:func:`outputs`) keeps its
own copies of the inputs: the kernel's writes reach only the declared tensors, and a write into any other is a
failure (:class:`InputWritten`), never a new value of the check's input; a check that declares nothing gets every
write copied back (the default, for checks that pass output buffers without saying so).
"""

from __future__ import annotations

import ast
import base64
import builtins
import contextlib
import contextvars
import hashlib
import hmac
import pickle
import secrets
import time
from pathlib import Path

import torch
from fastpath_lib.runtime import parse_source

__all__ = ["Proxy", "Session", "RemoteError", "RemoteTimeout", "InputWritten", "is_proxy", "answered_error",
           "outputs", "serve_op", "pack", "unpack", "session", "root", "code"]

AGENT = Path(__file__).with_name("runner.py")
#: The agent's texts, executed in this order in one namespace of the kernel: the ops under test's stubs, the agent,
#: which serves the request, and its tamper evidence (installed where the session asks for it).
AGENT_TEXTS = (Path(__file__).with_name("runner_stubs.py"), AGENT, Path(__file__).with_name("runner_evidence.py"))
#: The preamble that makes an exercise's forbidden torch operators absent from the kernel (:meth:`Session.prepare`).
PREAMBLE = Path(__file__).with_name("absent.py")


class RemoteError(Exception):
    """An exception the learner's code raised in the kernel (its class is named as the learner's was)."""

    fastpath_where = ""


class RemoteTimeout(Exception):
    """The kernel did not answer before the notebook's deadline."""


class InputWritten(RemoteError):
    """The learner's code wrote into a tensor the check passed as an input only."""


_CLASSES: dict[str, type] = {}


def _error(name: str, message: str, where: str, chain: str) -> Exception:
    base = getattr(builtins, name, None)
    if "NotImplementedError" in chain or "NotImplementedError" in name:
        base = NotImplementedError
    if not (isinstance(base, type) and issubclass(base, Exception)) or base is RemoteError:
        base = Exception
    key = f"{name}:{base.__name__}"
    if key not in _CLASSES:
        safe = name if name.isidentifier() else "Error"
        _CLASSES[key] = type(safe, (RemoteError,) if base is Exception else (base, RemoteError), {})
    exc = _CLASSES[key](message)
    exc.fastpath_where = where
    return exc


def answered_error(answer) -> Exception:
    """The exception a ``[type name, message]`` answer describes."""
    items = [str(a) for a in answer][:2] if isinstance(answer, (list, tuple)) else ["Exception", str(answer)]
    items += ["Exception", ""][len(items):]
    return _error(items[0], items[1], "", "")


def is_proxy(obj) -> bool:
    """Whether ``obj`` stands for an object held in the learner's kernel."""
    return type(obj) is Proxy


class Proxy:
    """An object held in the learner's kernel: calls, attributes and ``[...]`` are requests to the kernel."""

    __slots__ = ("_session", "_id", "_type", "_repr", "_code", "_root", "_callable")

    def __init__(self, session, ref: dict, root: str):
        for k, v in (("_session", session), ("_id", ref["__fastpath_ref__"]), ("_type", str(ref.get("type"))),
                     ("_repr", str(ref.get("repr"))), ("_code", ref.get("code")), ("_root", root),
                     ("_callable", bool(ref.get("callable")))):
            object.__setattr__(self, k, v)

    def __call__(self, *args, **kwargs):
        return self._session.call(self, args, kwargs)

    def __getattr__(self, name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return self._session.request(("getattr", self, name), self._root)["ok"]

    def __getitem__(self, key):
        return self._session.request(("getitem", self, key), self._root)["ok"]

    def __iter__(self):
        return iter(self._session.request(("list", self), self._root)["ok"])

    def __setattr__(self, name, value):
        raise AttributeError("objects of the learner's kernel are read only in the grader")

    def __repr__(self) -> str:
        return self._repr


def session(proxy: Proxy) -> Session:
    """The session ``proxy`` belongs to."""
    return object.__getattribute__(proxy, "_session")


def root(proxy: Proxy) -> str:
    """The check cell's expression ``proxy`` was reached from (its root name, for reading the learner's source)."""
    return object.__getattribute__(proxy, "_root")


def code(proxy: Proxy) -> list | None:
    """``[file name, qualified name]`` of the code behind ``proxy``, as the kernel reported it (``None``: no code)."""
    return object.__getattribute__(proxy, "_code")


def _agent_functions(*names: str) -> dict:
    """Functions of the agent's source (``runner.py``), compiled here from that one text.

    The agent runs as source text in the learner's kernel and imports nothing of the grader, and the grader does not
    import the agent (its text runs its ``_serve`` when executed as the agent); so the grader compiles just the
    definitions it shares with the agent, and both sides run the same code.
    """
    tree = parse_source(AGENT.read_text(encoding="utf-8"), str(AGENT))
    shared = {"PROMPT", "BY_VALUE", "_PLAIN", "_setprofile", "_getprofile", "_audit"}
    keep = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom)) or (isinstance(n, ast.Assign) and all(
        isinstance(t, ast.Name) and t.id in shared for target in n.targets
        for t in (target.elts if isinstance(target, ast.Tuple) else [target])))]
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]
    missing = set(names) - {n.name for n in defs}
    if missing:
        raise ImportError(f"{AGENT} defines no {sorted(missing)}")
    namespace: dict = {}
    exec(compile(ast.Module(body=keep + defs, type_ignores=[]), str(AGENT), "exec"), namespace)  # noqa: S102 - kit file
    return {name: namespace[name] for name in names}


_SHARED = _agent_functions("_tensors", "_pack", "_unpack", "_op_result", "_dumps", "_loads", "_storage_bytes",
                           "_changed")
#: The tensors of a call's arguments, in the order the agent answers them: the agent's own walk.
_tensors = _SHARED["_tensors"]
_dumps, _loads, _changed, _storage_bytes = (_SHARED[k] for k in ("_dumps", "_loads", "_changed", "_storage_bytes"))
PROMPT = ast.literal_eval(next(n.value for n in parse_source(AGENT.read_text(encoding="utf-8")).body
                               if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "PROMPT"))


def _no_object(v):
    raise TypeError(f"the grader sends tensors, numbers, sequences and None, not {type(v).__name__}")


def pack(value, same=()) -> dict:
    """``value`` as the agent's plain data (:func:`fastpath_lib.grading.engine.runner._pack`): tensors with their
    storage, shared storage kept shared; a tensor that *is* one of ``same`` as a reference to it."""
    return _SHARED["_pack"](value, _no_object, same)


def unpack(packed, same=(), autograd=False):
    """The value :func:`pack` (or the agent) packed, its tensors new ones; with ``autograd``, with the sender's
    autograd state (a leaf that requires grad, a view of one, the result of an op)."""
    return _SHARED["_unpack"](packed, None, same, autograd)


#: The tensors the calls of the current check may write (``None``: any tensor argument, copied back whole).
_OUTPUTS: contextvars.ContextVar = contextvars.ContextVar("fastpath_outputs", default=None)


@contextlib.contextmanager
def outputs(*tensors: torch.Tensor):
    """Within this block, a call of the learner's code may write only into ``tensors`` (the outputs the check passes):
    those get what the kernel wrote; a write into any other tensor argument raises :class:`InputWritten`, and the
    check's own tensor keeps its value (the expected answer is computed from what the grader drew, never from what the
    learner's code left there). Outside any such block every argument gets what the kernel wrote (the default)."""
    token = _OUTPUTS.set(tuple(tensors))
    try:
        yield
    finally:
        _OUTPUTS.reset(token)


def _copy_back(mine: list[torch.Tensor], theirs) -> None:
    allowed = _OUTPUTS.get()
    if not isinstance(theirs, list) or len(theirs) != len(mine):
        return
    for i, (a, b) in enumerate(zip(mine, theirs)):
        if not isinstance(b, torch.Tensor):
            continue
        if allowed is not None and not any(a is t for t in allowed):
            raise InputWritten(f"your code wrote into its input (tensor argument {i + 1} of the call), which it must "
                               f"only read")
        if b.dtype == a.dtype and b.untyped_storage().nbytes() == a.untyped_storage().nbytes():
            with torch.no_grad():
                a.untyped_storage().copy_(b.untyped_storage())


def serve_op(message: dict, run) -> dict:
    """The grader's answer to one call of an op it holds (``message`` from the agent's stub): ``run(kind, args,
    message)`` runs the op on the grader's own tensors (rebuilt from the message, shared storage kept shared); the
    answer carries what it returned (an argument as the caller's own tensor), the arguments' tensors it changed and
    the exception it raised, and which of the arguments' tensors it wrote (their version counters moved, ``"written"``:
    the stub moves the caller's, so a test reading ``x._version`` sees the writes as it would in its own process).
    The tensors keep the caller's autograd state (a leaf that requires grad stays one, so an in-place op refuses it
    here as it would in the kernel) and the op runs in the caller's grad mode, when the stub says it
    (``message["grad"]``)."""
    args = unpack(message["args"], autograd=True)
    tensors = _tensors(args, {})
    before = [_storage_bytes(t).clone() for t in tensors]
    versions = [t._version for t in tensors]
    out, error, call = None, None, None
    grad = message.get("grad")
    try:
        with torch.set_grad_enabled(grad) if type(grad) is bool else contextlib.nullcontext():
            got = run(message.get("kind"), args, message)
        out, call = got if isinstance(got, tuple) and len(got) == 2 and isinstance(got[1], dict) else (got, None)
    except Exception as exc:  # noqa: BLE001 - the op's exception is part of its behaviour
        error = [type(exc).__name__, str(exc)]
    answer = {"ok": pack(out, same=tensors), "args": pack(_changed(tensors, before)), "error": error,
              "written": [i for i, (t, v) in enumerate(zip(tensors, versions)) if t._version != v]}
    if call is not None:
        answer["call"] = call["id"]
    return answer


class Session:
    """The grader's connection to one notebook's kernel (an nbclient client with a started kernel)."""

    def __init__(self, client, deadline: float, kit_ops: dict | None = None, *, tamper_evidence: bool = True):
        self.client, self.deadline = client, deadline
        self.kit_ops = dict(kit_ops or {})  # the grader's own kit ops (the kernel's may be patched): name -> op
        self.timed_out = False
        self.requests = 0
        self.forged = 0  # answers refused: a second answer to one request
        # the tamper evidence (:mod:`~fastpath_lib.grading.engine.runner_evidence`): the key of its seal, the number
        # of the last sealed answer, and what it reported: ``(check or None, what)``, ``None`` for the whole notebook
        self.tamper_evidence = tamper_evidence
        self._key, self._sealed, self.evidence = secrets.token_bytes(32), 0, []
        self._forbidden: list[str] = []  # the forbidden calls the watch saw in the current request (sealed)
        self.check: str | None = None  # the check now running (:mod:`~fastpath_lib.grading.engine.cli` sets it)
        # installed once (:meth:`start`): the agent's texts in one namespace, bound to no name of the notebook's;
        # each request is then a short execute request that calls the agent's ``_serve`` kept on the shell
        self._install = ("(lambda ns: [exec(compile(t, '<fastpath grader agent>', 'exec'), ns) for t in "
                         f"{tuple(p.read_text(encoding='utf-8') for p in AGENT_TEXTS)!r}] and None)"
                         f"({{'__name__': '<fastpath grader agent>', '_FASTPATH_TAMPER': {bool(tamper_evidence)}}})")
        self._agent = ("exec(compile('import sys; sys.modules[\"IPython\"].get_ipython()._fastpath_agent()', "
                       "'<fastpath grader agent>', 'exec'), {'__name__': '<fastpath grader request>'})")

    def prepare(self, spec: dict) -> str | None:
        """Before the learner's first cell: run the preamble (:mod:`~fastpath_lib.grading.engine.absent`) in the
        kernel, one silent execute request, so that the operators ``spec`` names are absent from it; returns why
        the kernel could not install it, or ``None``."""
        from jupyter_core.utils import run_sync

        name = "<fastpath grader preamble>"
        code = (f"exec(compile({PREAMBLE.read_text(encoding='utf-8')!r}, {name!r}, 'exec'), "
                f"{{'__name__': {name!r}, '_FASTPATH_SPEC': {spec!r}}})")
        left = max(1.0, self.deadline - time.monotonic())
        reply = run_sync(self.client.kc.execute_interactive)(code, silent=True, store_history=False,
                                                             allow_stdin=False, timeout=left)
        content = reply.get("content", {})
        if content.get("status") != "ok":
            return f"the grader could not prepare the kernel: {content.get('ename')}: {content.get('evalue')!s:.300}"
        return None

    def start(self) -> None:
        """Install the agent and check that it answers (before the learner's first cell)."""
        from jupyter_core.utils import run_sync

        left = max(1.0, self.deadline - time.monotonic())
        reply = run_sync(self.client.kc.execute_interactive)(self._install, silent=True, store_history=False,
                                                             allow_stdin=False, timeout=left)
        if reply.get("content", {}).get("status") != "ok":
            content = reply.get("content", {})
            raise RemoteError(f"the grader's agent could not be installed: {content.get('ename')}: "
                              f"{content.get('evalue')!s:.300}")
        self.request(("key", self._key) if self.tamper_evidence else ("get", "None"), "")

    def _reply(self, value: str) -> None:
        self.client.kc.input(value)

    def _execute(self, payload: bytes, on_op=None) -> bytes | None:
        """Run the agent once: it fetches ``payload``, may call ops (``on_op(message) -> answer``), answers once."""
        from jupyter_core.utils import run_sync

        if self.timed_out or time.monotonic() >= self.deadline:
            self.timed_out = True
            raise RemoteTimeout("the notebook ran past its time limit")
        kc = self.client.kc
        msg_id = kc.execute(self._agent, silent=True, store_history=False, allow_stdin=True)
        nonce = secrets.token_bytes(16)  # the seal of this request's answer covers it
        state = {"fetched": False, "answer": None, "answers": 0, "idle": False}
        run_sync(self._exchange)(msg_id, nonce + payload, on_op, state)
        if state["answers"] > 1:
            self.forged += 1
            raise RemoteError("the kernel answered one request twice: code in the notebook answered for the grader's "
                              "agent, and the request is refused")
        return self._opened(state["answer"], nonce)

    def _opened(self, found, nonce: bytes):
        """The answer of ``found`` (``data[:number:record:mac]``), its seal checked and its record of tampering kept
        (:attr:`evidence`); without tamper evidence, the answer as it came."""
        if not isinstance(found, str):
            return found
        data, *seal = found.split(":")
        if not self.tamper_evidence:
            return data
        try:
            number, record, mac = int(seal[0]), base64.b64decode(seal[1], validate=True), seal[2]
            raw = base64.b64decode(data, validate=True)
        except (ValueError, IndexError):
            number, record, mac, raw = 0, b"", "", b""
        message = number.to_bytes(8, "big") + nonce + len(raw).to_bytes(8, "big") + raw + record
        good = hashlib.blake2b(message, key=self._key, digest_size=32).hexdigest()
        if len(seal) != 3 or number <= self._sealed or not hmac.compare_digest(good, mac):
            self._report(None, "an answer to the grader came from other code than the grader's agent (the agent, "
                               "a function it runs on or the channel it answers on was replaced)")
            return data
        if number != self._sealed + 1:
            self._report(None, f"code in the notebook ran the grader's agent itself ({number - self._sealed - 1} "
                               f"answer(s) it sealed never reached the grader)")
        self._sealed = number
        for line in record.decode("utf-8", "replace").splitlines():
            if line[:1] == "F":
                self._forbidden.append(line[1:])
            else:
                self._report(self.check if line[:1] == "W" else None, line[1:])
        return data

    def _report(self, check, what: str) -> None:
        what = f"{what}, while {check} ran" if check else what
        if (check, what) not in self.evidence:
            self.evidence.append((check, what))

    async def _exchange(self, msg_id, payload, on_op, state) -> None:
        import zmq
        import zmq.asyncio

        kc = self.client.kc
        poller = zmq.asyncio.Poller()
        poller.register(kc.iopub_channel.socket, zmq.POLLIN)
        poller.register(kc.stdin_channel.socket, zmq.POLLIN)
        while not state["idle"]:
            left = self.deadline - time.monotonic()
            if left <= 0:
                self.timed_out = True
                with contextlib.suppress(Exception):
                    await self.client.km.interrupt_kernel()
                raise RemoteTimeout("the notebook ran past its time limit while the grader waited for an answer")
            ready = dict(await poller.poll(int(min(left, 5.0) * 1000)))
            if not ready:
                if not await self.client.km.is_alive():
                    self.timed_out = True
                    raise RemoteTimeout("the kernel died")
                continue
            if kc.stdin_channel.socket in ready:
                msg = await kc.stdin_channel.get_msg(timeout=0)
                self._on_stdin(msg, msg_id, payload, on_op, state)
            if kc.iopub_channel.socket in ready:
                msg = await kc.iopub_channel.get_msg(timeout=0)
                if msg.get("parent_header", {}).get("msg_id") == msg_id and msg.get("msg_type") == "status" and \
                        msg.get("content", {}).get("execution_state") == "idle":
                    state["idle"] = True

    def _on_stdin(self, msg, msg_id, payload, on_op, state) -> None:
        prompt = str(msg.get("content", {}).get("prompt", ""))
        ours = msg.get("parent_header", {}).get("msg_id") == msg_id and prompt.startswith(PROMPT)
        kind, _, data = prompt[len(PROMPT):].partition(":") if ours else ("", "", "")
        if kind == "fetch" and not state["fetched"]:
            state["fetched"] = True
            return self._reply(base64.b64encode(payload).decode("ascii"))
        if kind == "answer":
            state["answers"] += 1
            if state["answers"] == 1:
                state["answer"] = data
            return self._reply("")
        if kind == "op" and on_op is not None and state["answers"] == 0:
            try:
                answer = on_op(self._read(data))
            except Exception as exc:  # noqa: BLE001 - a malformed call is the caller's error
                answer = {"ok": pack(None), "args": pack([]), "error": [type(exc).__name__, str(exc)]}
            return self._reply(base64.b64encode(_dumps(answer)).decode("ascii"))
        if kind == "op":
            answer = {"ok": pack(None), "args": pack([]), "error": ["RuntimeError", "no op under test now"]}
            return self._reply(base64.b64encode(_dumps(answer)).decode("ascii"))
        return self._reply("")  # the learner's own input(), or a second fetch: an empty line

    @staticmethod
    def _read(data: str):
        try:
            return _loads(base64.b64decode(data, validate=True))
        except Exception as exc:  # noqa: BLE001 - a forged or unreadable message
            raise RemoteError(f"the kernel's answer could not be read safely ({type(exc).__name__})") from None

    @staticmethod
    def _load(data: str):
        """An answer of the kernel (base64 of ``torch.save`` bytes), read without running code."""
        return Session._read(data)

    def request(self, request: tuple, root: str, *, on_op=None) -> dict:
        """Send one request; returns ``{"ok": value, ...}`` or raises the learner's exception. ``on_op(message)``
        answers the calls of the op under test the request makes (:meth:`run_tests`)."""
        self.requests += 1
        packed = _SHARED["_pack"](request, self._ref_of, ())
        found = self._execute(_dumps(packed), on_op)
        if not isinstance(found, str):
            raise RemoteError("the kernel gave no answer (the grader's agent did not run)")
        answer = self._read(found)
        if not isinstance(answer, dict):
            raise RemoteError("the kernel's answer is not one the grader reads")
        if "error" in answer:
            err = list(answer["error"]) + ["", "", "", ""]
            raise _error(*(str(e) for e in err[:4]))
        return {k: self._unwrap(v, root) for k, v in answer.items()}

    def _ref_of(self, obj):
        if is_proxy(obj) and obj._session is self:
            return {"__fastpath_ref__": obj._id}
        if type(obj).__module__ == "fastpath_lib.cases" and type(obj).__name__ == "CaseSpec":
            return obj
        if is_proxy(obj):
            raise TypeError("an object of another notebook's kernel cannot be sent to this one")
        return {"__fastpath_pickle__": pickle.dumps(obj, protocol=4)}  # the grader's own object, e.g. a call context

    def _unwrap(self, v, root: str):
        if type(v) is dict and {"value", "tensors", "storages"} <= set(v):
            return _SHARED["_unpack"](v, lambda ref: self._proxy(ref, root), ())
        return v

    def _proxy(self, ref: dict, root: str):
        if isinstance(ref.get("__fastpath_ref__"), int):
            return Proxy(self, ref, root)
        return ref

    def get(self, expr: str):
        """The value of one argument of a check cell, evaluated in the notebook's namespace."""
        return self.request(("get", expr), expr.strip())["ok"]

    def call(self, fn: Proxy, args: tuple, kwargs: dict, forbidden: tuple | None = None):
        """``fn(*args, **kwargs)`` in the kernel; the argument tensors the check declared as outputs (:func:`outputs`)
        are updated as the call left them. ``forbidden``: ``(targets, builtins, given)`` the kernel's agent watches the
        call for (:func:`fastpath_lib.grading.engine.runner._watched`)."""
        request = ("call", fn, tuple(args), dict(kwargs)) + ((forbidden,) if forbidden else ())
        self.requests += 1
        packed = _SHARED["_pack"](request, self._ref_of, ())
        self._forbidden = []
        found = self._execute(_dumps(packed))
        answer = self._read(found) if isinstance(found, str) else None
        if not isinstance(answer, dict):
            raise RemoteError("the kernel gave no answer (the grader's agent did not run)")
        if "error" in answer:
            err = list(answer["error"]) + ["", "", "", ""]
            raise _error(*(str(e) for e in err[:4]))
        if self._forbidden:  # the watch saw one (sealed), though the answer says it returned
            raise _error("PermissionError", f"your code calls {self._forbidden[0]}: write it yourself", "", "")
        mine = _tensors(args, kwargs)
        _copy_back(mine, self._unwrap(answer.get("args"), fn._root))
        ok = answer.get("ok")
        if type(ok) is dict and {"value", "tensors", "storages"} <= set(ok):
            return _SHARED["_unpack"](ok, lambda ref: self._proxy(ref, fn._root), tuple(mine))
        return ok

    def kit_op(self, name: str):
        """The grader's own copy of the kit's op ``name`` (given by :mod:`fastpath_lib.grading.engine.cli`)."""
        if name not in self.kit_ops:
            raise RemoteError(f"the grader holds no kit op {name!r}")
        return self.kit_ops[name]

    def run_tests(self, tests: Proxy, stub: str, on_op) -> Exception | None:
        """``tests(op)`` in the kernel, ``op`` a fresh stub (:mod:`fastpath_lib.grading.engine.runner`: ``"rms_norm"``
        or ``"fused_add_rms_norm_"``) whose every call runs here: ``on_op(message) -> answer`` (see :func:`serve_op`).
        Returns the exception the tests raised (``None``: they returned)."""
        got = self.request(("tests", tests, stub), tests._root, on_op=on_op)["ok"]
        return None if got is None else answered_error(got)
