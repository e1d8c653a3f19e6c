"""The grader's side of the answer channel: the learner's functions and data, seen from the grader's process.

The grader runs each check in its own process. A check receives, in place of each argument of the check cell, what
the learner's kernel answers (:mod:`fastpath_lib.grading.runner`): a plain value (numbers, strings, tensors, dtypes,
lists, dicts, :class:`~fastpath_lib.cases.CaseSpec`) is copied; anything else (a function, a Triton kernel, a
predicate object) becomes a :class:`Proxy`, and calling it, reading an attribute of it or indexing it asks the kernel
again. The grader's arguments travel as a pickle the grader writes (in the execute request, or a file beside it when
large); the kernel's answers come back in the kernel's
message stream (a display message carrying the request's one-time token, not a file) and are read with
``torch.load(weights_only=True)``: never unpickled as code. A learner's exception comes back as its type name,
message and line, and is raised in the grader as an exception of that name.

The tensors of a call's arguments come back too and are copied into the grader's tensors (whole storage), so a
kernel that writes its outputs, or writes outside them, is seen as it would be in one process.
"""

from __future__ import annotations

import ast
import base64
import builtins
import contextlib
import io
import os
import pickle
import secrets
import tempfile
import time
from pathlib import Path

import torch

__all__ = ["Proxy", "Session", "RemoteError", "RemoteTimeout", "is_proxy", "answered_error"]

MIME = "application/vnd.fastpath.answer.v1+json"
AGENT = Path(__file__).with_name("runner.py")
#: Requests up to this many bytes travel inside the execute request; larger ones as a file the kernel reads.
_INLINE = 64 * 1024


class RemoteError(Exception):
    """An exception the learner's code raised in the kernel (its class is named as the learner's was)."""

    fastpath_where = ""


class RemoteTimeout(Exception):
    """The kernel did not answer before the notebook's deadline."""


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


def _agent_functions(*names: str) -> dict:
    """Functions of the agent's source (``runner.py``), compiled here from that one text.

    The agent runs as source text in the learner's kernel and imports nothing of the grader, and the grader must not
    import the agent (importing it registers ``sys.modules["_fastpath_grader_agent"]``); so the grader compiles just
    the definitions it shares with the agent, and both sides run the same code.
    """
    tree = ast.parse(AGENT.read_text(encoding="utf-8"), str(AGENT))
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]
    missing = set(names) - {n.name for n in defs}
    if missing:
        raise ImportError(f"{AGENT} defines no {sorted(missing)}")
    namespace: dict = {}
    exec(compile(ast.Module(body=defs, type_ignores=[]), str(AGENT), "exec"), namespace)  # noqa: S102 - the kit's file
    return {name: namespace[name] for name in names}


#: The tensors of a call's arguments, in the order the agent answers them: the agent's own walk.
_tensors = _agent_functions("_tensors")["_tensors"]


def _copy_back(mine: list[torch.Tensor], theirs) -> None:
    if not isinstance(theirs, list) or len(theirs) != len(mine):
        return
    for a, b in zip(mine, theirs):
        if isinstance(b, torch.Tensor) and b.dtype == a.dtype and b.untyped_storage().nbytes() == \
                a.untyped_storage().nbytes():
            with torch.no_grad():
                a.untyped_storage().copy_(b.untyped_storage())


class Session:
    """The grader's connection to one notebook's kernel (an nbclient client with a started kernel)."""

    def __init__(self, client, deadline: float):
        self.client, self.deadline = client, deadline
        self.timed_out = False
        self.requests = 0

    def start(self) -> None:
        """Install the agent (before the learner's first cell)."""
        code = (f"import builtins as __fp_b\n__fp_b.exec(__fp_b.compile({AGENT.read_text(encoding='utf-8')!r}, "
                f"'<fastpath grader agent>', 'exec'), {{'__name__': '_fastpath_grader_agent'}})\ndel __fp_b")
        self._execute(code, None)

    def _execute(self, code: str, token: str | None):
        from jupyter_core.utils import run_sync

        if self.timed_out or time.monotonic() >= self.deadline:
            self.timed_out = True
            raise RemoteTimeout("the notebook ran past its time limit")
        kc = self.client.kc
        msg_id = kc.execute(code, silent=True, store_history=False, allow_stdin=False)
        found, idle = None, False
        get = run_sync(kc.get_iopub_msg)
        while not idle:
            left = self.deadline - time.monotonic()
            if left <= 0:
                self.timed_out = True
                try:
                    run_sync(self.client.km.interrupt_kernel)()
                except Exception:  # noqa: BLE001 - best effort
                    pass
                raise RemoteTimeout("the notebook ran past its time limit while the grader waited for an answer")
            try:
                msg = get(timeout=min(left, 5.0))
            except Exception:  # noqa: BLE001 - queue.Empty: keep waiting until the deadline, unless it died
                if not run_sync(self.client.km.is_alive)():
                    self.timed_out = True
                    raise RemoteTimeout("the kernel died") from None
                continue
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind, content = msg.get("msg_type"), msg.get("content", {})
            if kind == "status" and content.get("execution_state") == "idle":
                idle = True
            elif kind == "display_data" and token is not None and found is None:
                data = content.get("data", {}).get(MIME)
                if isinstance(data, dict) and data.get("token") == token:
                    found = data.get("data")
        return found

    def request(self, request: tuple, root: str) -> dict:
        """Send one request; returns ``{"ok": value, ...}`` or raises the learner's exception."""
        self.requests += 1
        token = secrets.token_hex(16)
        buf = io.BytesIO()
        pickler = pickle.Pickler(buf, protocol=4)
        pickler.persistent_id = lambda obj: obj._id if is_proxy(obj) and obj._session is self else None
        pickler.dump(request)
        if buf.tell() > _INLINE:  # a large request travels as a file: the kernel parses no multi-megabyte cell
            fd, path = tempfile.mkstemp(prefix="fastpath-request-", suffix=".pickle")
            with os.fdopen(fd, "wb") as fh:
                fh.write(buf.getvalue())
            payload = "@" + path
        else:
            payload = base64.b64encode(buf.getvalue()).decode("ascii")
        try:
            found = self._execute(f"__import__('sys').modules['_fastpath_grader_agent'].serve({token!r}, "
                                  f"{payload!r})", token)
        finally:
            if payload.startswith("@"):
                with contextlib.suppress(OSError):
                    os.remove(payload[1:])
        if not isinstance(found, str):
            raise RemoteError("the kernel gave no answer (the grader's agent is gone or was replaced)")
        answer = self._load(found)
        if not isinstance(answer, dict):
            raise RemoteError("the kernel's answer is not one the grader reads")
        if "error" in answer:
            err = list(answer["error"]) + ["", "", "", ""]
            raise _error(*(str(e) for e in err[:4]))
        return {k: self._wrap(v, root) for k, v in answer.items()}

    @staticmethod
    def _load(data: str):
        from fastpath_lib.cases import CaseSpec

        try:
            raw = base64.b64decode(data, validate=True)
            with torch.serialization.safe_globals([CaseSpec]):
                return torch.load(io.BytesIO(raw), weights_only=True, map_location="cpu")
        except Exception as exc:  # noqa: BLE001 - a forged or unreadable answer
            raise RemoteError(f"the kernel's answer could not be read safely ({type(exc).__name__})") from None

    def _wrap(self, v, root: str, depth: int = 0):
        if depth > 8:
            return v
        if type(v) is dict and "__fastpath_ref__" in v and isinstance(v.get("__fastpath_ref__"), int):
            return Proxy(self, v, root)
        if type(v) in (list, tuple):
            return type(v)(self._wrap(x, root, depth + 1) for x in v)
        if type(v) is dict:
            return {k: self._wrap(x, root, depth + 1) for k, x in v.items()}
        return v

    def get(self, expr: str):
        """The value of one argument of a check cell, evaluated in the notebook's namespace."""
        return self.request(("get", expr), expr.strip())["ok"]

    def call(self, fn: Proxy, args: tuple, kwargs: dict):
        """``fn(*args, **kwargs)`` in the kernel; the argument tensors are updated as the call left them."""
        answer = self.request(("call", fn, tuple(args), dict(kwargs)), fn._root)
        _copy_back(_tensors(args, kwargs), answer.get("args"))
        return answer["ok"]
