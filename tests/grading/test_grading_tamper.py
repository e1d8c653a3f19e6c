"""The kernel's tamper evidence (:mod:`fastpath_lib.grading.engine.runner_evidence`): each way a learner's code can
switch off the agent's call watch, or replace the agent, gets the part it touched (or the notebook) reported
"tampered", naming what the code did and where; an honest run records nothing (test_grading_solutions.py grades the
solutions with it on: every status "ok").

Two notebooks, one grading each, show six routes: exercise 03's four check cells each follow a cell that switches the
watch off another way (``sys.setprofile`` directly, through ``map`` from C, through ``ctypes``'s
``PyEval_SetProfile``, and by rebinding the agent's ``_watched`` in its own namespace); exercise 01's first check
follows a function that runs its work in a new thread and installs a tracer, its second a cell that replaces the
agent with one that answers on the channel itself. test_grading_attacks.py grades the older attacks with the evidence
off, so the defences they prove are shown to hold alone.

The tests without a kernel install the hook in this process (an audit hook stays for the process's life; it only
records into its own closure) and run the agent's texts on a stand-in shell.
"""

from __future__ import annotations

import base64
import io
import sys
import threading
import types
from pathlib import Path

import pytest
import torch

from fastpath_lib.grading.engine import remote

ROOT = Path(__file__).resolve().parents[2]

#: exercise 03: one route per check cell (the cell before it wraps the solution's function)
EX03_ROUTES = {
    "check_dtype_condition": """
import sys
_honest_dtype = check_dtype
def check_dtype(c):
    sys.setprofile(None)
    return _honest_dtype(c)
""",
    "check_cols_condition": """
_honest_cols = check_cols
def check_cols(c):
    list(map(sys.setprofile, [None]))  # from C: no call event the watch could see
    return _honest_cols(c)
""",
    "check_alignment_condition": """
import ctypes
_honest_alignment = check_alignment
def check_alignment(c):
    ctypes.pythonapi.PyEval_SetProfile(None, None)
    return _honest_alignment(c)
""",
    "check_v2_predicate": """
from IPython import get_ipython
_namespace = get_ipython()._fastpath_agent.__globals__
_namespace["_watched"] = lambda fn, args, kwargs, forbidden: fn(*args, **kwargs)
""",
}
#: exercise 01: a thread and a tracer in the first check's calls; the agent replaced before the second check
EX01_ROUTES = {
    "check_default_eps": """
import sys, threading
_honest_eps = my_default_eps
def my_default_eps(dtype):
    got = []
    worker = threading.Thread(target=lambda: got.append(_honest_eps(dtype)))
    worker.start()
    worker.join()
    sys.settrace(lambda *a: None)
    sys.settrace(None)
    return got[0]
""",
    "check_reference": """
import base64, io, torch
from IPython import get_ipython
def _my_agent():
    kernel = get_ipython().kernel
    kernel.raw_input(%(prompt)r + "fetch:")
    buf = io.BytesIO()
    torch.save({"ok": None}, buf)
    kernel.raw_input(%(prompt)r + "answer:" + base64.b64encode(buf.getvalue()).decode())
get_ipython()._fastpath_agent = _my_agent
""" % {"prompt": remote.PROMPT},
}


def _notebook(tmp, exercise: str, cells: dict[str, str]) -> Path:
    import nbformat

    from fastpath_lib.grading.engine.notebook import CHECK_TAG

    (path,) = (ROOT / "solutions").glob(f"{exercise}_*.ipynb")
    nb = nbformat.read(path, as_version=4)
    for check, source in cells.items():
        at = next(i for i, c in enumerate(nb.cells) if CHECK_TAG in c.metadata.get("tags", []) and check in c.source)
        nb.cells.insert(at, nbformat.v4.new_code_cell(source))
    out = tmp / path.name
    nbformat.write(nb, out)
    return out


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    pytest.importorskip("nbformat")
    from fastpath_lib.grading.engine import cli

    out = {}
    for exercise, cells in (("ex03", EX03_ROUTES), ("ex01", EX01_ROUTES)):
        tmp = tmp_path_factory.mktemp(exercise)
        out[exercise] = cli.grade_notebook(_notebook(tmp, exercise, cells), timeout=240)
    return out


@pytest.mark.parametrize("exercise, part, said", [
    ("ex03", "dtype_condition", "switched off the grader's call watch (sys.setprofile) in check_dtype (line 4), "
                                "while check_dtype_condition ran"),
    ("ex03", "cols_condition", "switched off the grader's call watch (sys.setprofile) in check_cols (line 3)"),
    ("ex03", "alignment_condition", "reached into the interpreter through ctypes (ctypes.dlsym) in check_alignment"),
    ("ex03", "alignment_condition", "switched off the grader's call watch (sys.setprofile) in check_alignment "
                                    "(line 4)"),
    ("ex03", "predicate", "replaced the grader's agent's _watched"),
    ("ex01", "default_eps", "started a thread in my_default_eps (line 6), whose calls the grader's call watch does "
                            "not see, while check_default_eps ran"),
    ("ex01", "default_eps", "installed a tracer (sys.settrace) in my_default_eps (line 8)"),
    ("ex01", "reference", "an answer to the grader came from other code than the grader's agent"),
])
def test_each_way_of_switching_off_the_watch_is_reported_tampered(graded, exercise, part, said):
    g = graded[exercise]
    by = {p.part: p for p in g.parts}
    assert g.status == "tampered", (g.status, g.reason)
    assert by[part].earned == 0 and by[part].feedback.startswith("tampered: "), by[part]
    assert said in by[part].feedback, by[part].feedback


def test_a_route_in_one_check_is_reported_on_that_checks_part_only(graded):
    by = {p.part: p for p in graded["ex03"].parts}
    assert "while check_dtype_condition ran" not in by["cols_condition"].feedback, by["cols_condition"].feedback
    assert "while check_cols_condition ran" not in by["dtype_condition"].feedback, by["dtype_condition"].feedback
    # the agent's rebound _watched marks the whole notebook
    assert all("replaced the grader's agent's _watched" in p.feedback for p in by.values()), by


# --- without a kernel: the agent's texts in this process, on a stand-in shell ----------------------------------------

class _Kernel:
    """The shell's kernel as the agent sees it: answers the agent's fetch with ``request``, keeps its answers."""

    def __init__(self):
        self.request, self.nonce, self.answers = None, b"", []

    def raw_input(self, prompt):
        kind, _, data = prompt[len(remote.PROMPT):].partition(":")
        if kind == "fetch":
            return base64.b64encode(self.nonce + remote._dumps(remote.pack(self.request))).decode()
        self.answers.append(data)
        return ""


@pytest.fixture(scope="module")
def agent():
    """The agent's namespace with its tamper evidence installed, a grader's session holding its key, and ``ask``:
    one request served by the agent and read by the session (``deliver=False``: the answer never reaches it)."""
    import IPython

    ns = {"__name__": "fastpath tamper test"}
    for text in remote.AGENT_TEXTS:
        exec(compile(text.read_text(encoding="utf-8"), "<fastpath grader agent>", "exec"), ns)  # noqa: S102
    ns["_evidence"](ns)
    session, kernel = remote.Session(None, 0.0), _Kernel()
    shell = types.SimpleNamespace(user_ns={}, kernel=kernel)

    def ask(request, deliver=True):
        kernel.request, kernel.nonce = request, bytes(range(16))
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(IPython, "get_ipython", lambda: shell)
            ns["_serve"]()
        found = kernel.answers.pop()
        return remote.Session._read(session._opened(found, kernel.nonce)) if deliver else found

    ask(("key", session._key))
    return types.SimpleNamespace(ns=ns, session=session, ask=ask, shell=shell)


def _reported(agent, *calls):
    """What the session reports for ``calls`` (each watched by the agent's ``_watched``), read at the next answer."""
    agent.session.evidence.clear()
    agent.session.check = "check_x"
    for fn in calls:
        agent.ns["_watched"](fn, (), {}, ([], [], []))
    assert agent.ask(("get", "1"))["ok"]["value"] == 1
    return [what for _, what in agent.session.evidence]


def test_an_honest_watched_call_records_nothing(agent):
    def honest():
        return torch.ones(2).sum()

    assert _reported(agent, honest, honest) == []


def test_each_switch_off_is_recorded_with_its_place(agent):
    def direct():
        sys.setprofile(None)

    def via_map():
        list(map(sys.setprofile, [None]))

    def tracer():
        sys.settrace(None)

    def thread():
        t = threading.Thread(target=lambda: None)
        t.start()
        t.join()

    def heap():
        import gc

        gc.get_referrers(agent)

    got = _reported(agent, direct, via_map, tracer, thread, heap)
    assert [w.split(" (line")[0] for w in got] == [
        "your code switched off the grader's call watch (sys.setprofile) in " + direct.__qualname__,
        "your code switched off the grader's call watch (sys.setprofile) in " + via_map.__qualname__,
        "your code installed a tracer (sys.settrace) in " + tracer.__qualname__,
        "your code started a thread in " + thread.__qualname__,
        "your code walked the garbage collector's objects (gc.get_referrers) in " + heap.__qualname__], got
    assert all(w.endswith("while check_x ran") for w in got), got


def test_a_thread_started_before_the_call_that_works_for_it_is_recorded(agent):
    import queue

    jobs, done = queue.Queue(), queue.Queue()

    def worker():
        while (job := jobs.get()) is not None:
            done.put(job())

    t = threading.Thread(target=worker)
    t.start()
    try:
        got = _reported(agent, lambda: (jobs.put(lambda: 1), done.get())[1])
    finally:
        jobs.put(None)
        t.join()
    assert [w.split(" (line")[0] for w in got] == ["your code runs a thread beside the grader's call in " +
                                                   worker.__qualname__], got


def test_outside_a_watched_call_only_a_tracer_left_on_counts(agent):
    def quiet():
        return 1

    sys.setprofile(None)  # a profiler in a scratch cell: each watched call sets its watch anew
    sys.settrace(lambda *a: None)
    sys.settrace(None)  # a debugger that is done
    assert _reported(agent, quiet) == []

    def tracer(frame, event, arg):
        return None

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        got = _reported(agent, quiet)
    finally:
        sys.settrace(previous)
    assert len(got) == 1 and got[0].startswith("your code installed a tracer (sys.settrace) in " + _qualname() +
                                               " (line "), got
    assert "which is on when the grader's call starts" in got[0], got


def _qualname():
    return test_outside_a_watched_call_only_a_tracer_left_on_counts.__qualname__


def test_ctypes_is_recorded_from_the_notebooks_code_not_from_a_librarys(agent):
    import sysconfig

    ctypes = pytest.importorskip("ctypes")
    library = compile("import ctypes\nctypes.CDLL(None)", str(Path(sysconfig.get_path("purelib")) / "lib.py"), "exec")
    agent.session.evidence.clear()
    exec(library, {})  # noqa: S102 - a library's own use (triton loads its driver so)
    ctypes.CDLL(None)
    agent.ask(("get", "1"))
    got = [what for _, what in agent.session.evidence]
    assert len(got) == 1 and "through ctypes (ctypes.dlopen) in " in got[0], got


def test_a_replaced_name_of_the_agent_and_an_imitated_event_are_recorded(agent):
    agent.session.evidence.clear()
    original = agent.ns["_tensors"]
    agent.ns["_tensors"] = lambda args, kwargs: []
    try:
        agent.ask(("get", "1"))
    finally:
        agent.ns["_tensors"] = original
    sys.audit("fastpath.seal", b"", b"", [])
    agent.ask(("get", "1"))
    got = [what for _, what in agent.session.evidence]
    assert "replaced the grader's agent's _tensors" in got[0] and "imitates the grader's agent (fastpath.seal)" in \
        got[1], got


def test_answers_without_the_agents_seal_or_with_a_gap_are_reported(agent):
    session = agent.session
    session.evidence.clear()
    buf = io.BytesIO()
    torch.save({"ok": 1}, buf)
    forged = base64.b64encode(buf.getvalue()).decode()
    assert session._opened(forged, b"0" * 16) == forged  # read as it came, reported
    sealed = agent.ask(("get", "1"), deliver=False)
    assert session._opened(sealed, b"1" * 16) == sealed.split(":")[0]  # sealed for another request
    agent.ask(("get", "1"), deliver=False)  # an answer the agent sealed, that never reached the grader
    agent.ask(("get", "1"))
    got = [what for _, what in session.evidence]
    assert got == ["an answer to the grader came from other code than the grader's agent (the agent, a function it "
                   "runs on or the channel it answers on was replaced)",
                   "code in the notebook ran the grader's agent itself (2 answer(s) it sealed never reached the "
                   "grader)"], got


def test_without_tamper_evidence_answers_are_read_as_they_came():
    session = remote.Session(None, 0.0, tamper_evidence=False)
    assert session._opened("abc", b"") == "abc" and session.evidence == []
    assert "'_FASTPATH_TAMPER': False" in session._install


def _forbidden():
    return 1


def test_a_forbidden_call_is_sealed_even_where_the_watchs_list_is_emptied(agent):
    code = _forbidden.__code__
    targets = ([(code.co_filename, code.co_qualname)], [], [])

    def hides():
        _forbidden()
        sys._getframe(1).f_locals["seen"].clear()  # the watch's own list, reached through the frames
        return 2

    session = agent.session

    def execute(payload, on_op=None):  # the kernel: the call watched, its answer "returned 1", sealed
        assert agent.ns["_watched"](hides, (), {}, targets) == 2
        return session._opened(agent.ask(("get", "1"), deliver=False), bytes(range(16)))

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(session, "_execute", execute)
        with pytest.raises(PermissionError, match=f"your code calls {_forbidden.__qualname__}: write it yourself"):
            session.call(remote.Proxy(session, {"__fastpath_ref__": 1}, "hides"), (), {})
