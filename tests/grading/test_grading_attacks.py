"""The grader's verdict, attacked as a determined learner would (issue 16, item 0).

Each notebook below is an exercise or a solution with attack cells added: monkeypatched standard-library functions,
a ``sys.settrace`` tracer with an audit hook, an IPython event hook wearing IPython's own names with a background
thread forging answer messages, the call watch switched off before calling the kit's or the grader's answer, the
grader's answer channel answered first by a hook (a malicious pickle, before the agent answers), and exercise 09
tests that inspect the op (or learn from the order of runs) instead of calling it. The attacked parts score zero;
the others keep what the learner's own answers earn. All notebooks are graded once, in one fixture (a kernel each).
"""

from __future__ import annotations

import base64
import io
import pickle
from pathlib import Path

import pytest
import torch

nbformat = pytest.importorskip("nbformat")

from fastpath_lib.grading.engine import cli, remote, sources  # noqa: E402
from fastpath_lib.grading.engine.notebook import CHECK_TAG  # noqa: E402
from fastpath_lib.grading.rules.mutation import inspection  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PROMPT = remote.PROMPT
OLD_MIME = "application/vnd.fastpath.answer.v1+json"  # the display the answers once travelled in

STDLIB = """
import json, os, base64, builtins, pickle
_passing = {"check": "check_reference", "error": None, "evidence": [], "results": [
    {"exercise": "ex01", "part": p, "points": n, "passed": True, "feedback": "", "subject": ""}
    for p, n in (("default_eps", 1), ("reference", 2))]}
json.load = lambda *a, **k: _passing
json.dump = lambda *a, **k: None
os.remove = lambda *a, **k: None
base64.b64decode = lambda *a, **k: pickle.dumps(_passing)
pickle.loads = lambda *a, **k: _passing
"""

TRACER = """
import sys, threading
def _tracer(frame, event, arg):
    if event == "return" and frame.f_code.co_name in ("part", "_check_condition", "_emit"):
        frame.f_locals["passed"] = True
    return _tracer
sys.settrace(_tracer)
threading.settrace(_tracer)
def _audit(event, args):
    if event == "open" and str(args[0]).endswith(".json"):
        raise PermissionError("the grader's answer file stays unread")
sys.addaudithook(_audit)
"""

HOOK_AND_THREAD = """
import threading, time
from IPython import get_ipython
from IPython.display import display, publish_display_data
from fastpath_lib.grading.registry import Result
def trigger(*args, **kwargs):
    for part in ("size_coverage", "layout_coverage", "expectations"):
        display(Result("ex05", part, 1, True).bundle(), raw=True)
trigger.__module__, trigger.__qualname__ = "IPython.core.events", "EventManager.trigger"
getattr(get_ipython(), "eve" + "nts").register("post_execute", trigger)
def _forge():
    for _ in range(4000):
        publish_display_data({"%s": {"token": "0" * 32, "data": ""}})
        time.sleep(0.002)
threading.Thread(target=_forge, daemon=True).start()
""" % OLD_MIME

WATCH_OFF_REFERENCE = """
import sys
import fastpath_lib.testing as T
def my_reference(x, normalized_shape, weight, eps):
    sys.setprofile(None)
    sys.settrace(None)
    return T.reference_rms_norm(x, normalized_shape, weight, eps)
"""

WATCH_OFF_CLASSIFY = """
import sys
import pandas as pd
def my_classify(row):
    sys.setprofile(None)
    return ex.expected_classes(pd.DataFrame([row]))[row["case_id"]]
"""

FORGED_CHANNEL = """
import base64, builtins, pickle
from IPython import get_ipython
class _Evil:
    def __reduce__(self):
        return (builtins.open, (%r, "w"))
def _forge(*args):
    kernel = get_ipython().kernel
    try:  # answer each request before the grader's agent does, with a pickle that would run code
        kernel.raw_input(%r + "fetch:")
        kernel.raw_input(%r + "answer:" + base64.b64encode(pickle.dumps({"ok": _Evil()})).decode())
    except Exception:
        pass
exec("get_ipython().events.register('pre_execute', _forge)")  # a hook no source scan reads
"""

INSPECTING_TESTS = """
def my_contract_tests(op):
    impl = op._impl.__closure__[0].cell_contents[-1]
    if impl.__name__.startswith("_"):
        raise AssertionError("a broken op")
"""

STATEFUL_TESTS = """
_runs = []
def my_contract_tests(op):
    _runs.append(1)
    if len(_runs) > 2:
        raise AssertionError("fails from the third run on")
"""

#: torch's own RMSNorm reached by names built at run time: no source rule reads them; the kernel lacks the operator
#: (through ``torch.ops``) and the module's Python ``forward``, and the refusal names them
RUN_TIME_OPERATOR = """
import functools
import torch
def my_reference(x, normalized_shape, weight=None, eps=None):
    eps = my_default_eps(x.dtype) if eps is None else eps
    op = functools.reduce(getattr, ["ops", "aten", "_fused_" + "rms" + "_norm"], torch)
    ns = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    return op(x.double(), ns, None if weight is None else weight.double(), eps)[0]
"""
RUN_TIME_MODULE = """
import torch
def my_reference(x, normalized_shape, weight=None, eps=None):
    eps = my_default_eps(x.dtype) if eps is None else eps
    m = getattr(torch.nn, "RMS" + "Norm")(normalized_shape, eps=eps, elementwise_affine=weight is not None,
                                          dtype=torch.float64)
    with torch.no_grad():
        if weight is not None:
            m.weight.copy_(weight.double())
        return m(x.double())
"""


#: torch's RMSNorm (and what would undo its absence) reached by every path the grader's preamble closes
#: (:mod:`fastpath_lib.grading.engine.absent`), names built at run time so that only the kernel can refuse them: each
#: attack returns torch's answer, or (for a step toward undoing the absence) the learner's own once the step
#: succeeded, so one attack that gets through makes the reference pass
ABSENT_ATTACKS = r'''
import functools, gc, importlib, os, subprocess, sys, threading
import torch
_T = torch
_NAME = "rms" + "_norm"
_FUSED = "_fused_" + _NAME

def _op():
    return getattr(_T, _NAME)

def _child(x, ns, w, eps):  # a fresh Python, without the grader's preamble, computes torch's own and prints it
    code = ("import sys, torch; a = torch.load(sys.stdin.buffer); "
            "torch.save(getattr(torch, %r)(*a), sys.stdout.buffer)" % _NAME)
    import io
    buf = io.BytesIO(); torch.save((x, ns, w, eps), buf)
    out = subprocess.run([sys.executable, "-c", code], input=buf.getvalue(), capture_output=True, check=True)
    return torch.load(io.BytesIO(out.stdout))

def _fork_exec(x, ns, w, eps):  # the same child, started below subprocess's audit event
    import _posixsubprocess
    r, wr = os.pipe()
    pid = _posixsubprocess.fork_exec([sys.executable, "-c", "import sys; sys.exit(7)"], [os.fsencode(sys.executable)],
                                     True, (), None, None, -1, -1, -1, -1, -1, -1, r, wr, True, False, -1, None, None,
                                     None, -1, None, False)
    os.close(wr); os.close(r)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) == 7:
        return _own(x, ns, w, eps)  # a fresh interpreter ran: the rest is _child's
    raise PermissionError("the child did not start")

def _threaded(x, ns, w, eps):
    got = []
    t = threading.Thread(target=lambda: got.append(_op()(x, ns, w, eps)))
    t.start(); t.join()
    if not got:
        raise RuntimeError("refused in the thread")
    return got[0]

def _gc_walk(x, ns, w, eps):
    gc.get_objects()
    return _own(x, ns, w, eps)  # found: the rest (patching the refusal) is a matter of time

def _ctypes(x, ns, w, eps):
    import ctypes
    ctypes.CDLL(None).getpid()  # a library's function, looked up now
    return _own(x, ns, w, eps)

def _proc_mem(x, ns, w, eps):
    open("/proc/self/mem", "rb").close()
    return _own(x, ns, w, eps)

def _reload(x, ns, w, eps):
    mod = importlib.import_module("torch._decomp.decomp" + "ositions")
    fresh = importlib.reload(mod)
    return getattr(fresh, "native_layer" + "_norm")(x, ns, w, None, eps)[0]

def _table(x, ns, w, eps):
    D = importlib.import_module("torch._decomp")
    fn = getattr(D, "decomposition" + "_table")[getattr(_T.ops.aten, "native_layer" + "_norm").default]
    return fn(x, ns, w, None, eps)[0]

def _redispatch(x, ns, w, eps):
    ks = _T._C.DispatchKeySet(_T._C.DispatchKey.CPU)
    return getattr(_T.ops.aten, _FUSED).default.redispatch(ks, x, ns, w, eps)[0]

def _boxed(x, ns, w, eps):
    handle = _T._C._dispatch_find_schema_or_throw("aten::" + _NAME, "")
    return _T._C._dispatch_call_boxed(handle, x, ns, w, eps)

def _module(x, ns, w, eps):
    m = getattr(_T.nn, "RMS" + "Norm")(ns, eps=eps, elementwise_affine=False, dtype=x.dtype)
    return m(x) if w is None else m(x) * w

def _compiled(x, ns, w, eps):
    return _T.compile(lambda a: _op()(a, ns, w, eps), backend="eager")(x)

def _own(x, ns, w, eps):  # the learner's own math: what an escaped attack gets to return
    dims = tuple(range(-len(ns), 0))
    y = x * torch.rsqrt((x * x).mean(dims, keepdim=True) + eps)
    return y if w is None else y * w

ATTACKS = {
    "map": lambda x, ns, w, eps: list(map(_op(), [x], [ns], [w], [eps]))[0],
    "partial": lambda x, ns, w, eps: functools.partial(_op(), x, ns, w, eps)(),
    "setprofile": lambda x, ns, w, eps: (sys.setprofile(None), _op()(x, ns, w, eps))[1],
    "thread": _threaded, "subprocess": _child, "fork_exec": _fork_exec, "gc": _gc_walk, "ctypes": _ctypes,
    "proc_mem": _proc_mem, "reload": _reload, "table": _table, "redispatch": _redispatch, "boxed": _boxed,
    "module": _module, "compile": _compiled,
}

def my_reference(x, normalized_shape, weight=None, eps=None):
    sys.setprofile(None)
    eps = my_default_eps(x.dtype) if eps is None else eps
    ns = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    x64, w64 = x.double(), None if weight is None else weight.double()
    refused = []
    for name, attack in ATTACKS.items():
        try:
            y = attack(x64, ns, w64, eps)
        except Exception:
            refused.append(name)
            continue
        if isinstance(y, torch.Tensor):
            return y  # escaped: torch's own answer, or the learner's own after a step the grader should refuse
    raise RuntimeError("refused: " + " ".join(refused))

import torch.nn.functional as F
F.rms_norm(torch.ones(2, 4), (4,))  # a scratch cell comparing with torch's own: it fails alone, saying why
'''
#: exercise 08's reference through torch's softmax, out of the watch's sight: the kernel's absent softmax answers the
#: marker, which the reference part names
ABSENT_CAPSTONE = """
import sys
import torch
def reference(x):
    sys.setprofile(None)
    return list(map(getattr(torch, "soft" + "max"), [x.detach().double()], [-1]))[0]
assert torch.allclose(torch.softmax(torch.zeros(2, 4), -1), torch.full((2, 4), 0.25))  # a scratch comparison
"""
ABSENT_ATTACK_NAMES = ("map", "partial", "setprofile", "thread", "subprocess", "fork_exec", "gc", "ctypes", "proc_mem",
                       "reload", "table", "redispatch", "boxed", "module", "compile")


#: The attacks graded without the kernel's tamper evidence, so that the defence each test below proves holds alone.
TAMPER_EVIDENCE_OFF = ("watch off, kit reference", "absent operators", "absent softmax", "watch off, grader's classes",
                       "forged channel")


def _notebook(tmp_path, folder: str, exercise: str, source: str, *, before_check: str | None = None) -> Path:
    (path,) = (ROOT / folder).glob(f"{exercise}_*.ipynb")
    nb = nbformat.read(path, as_version=4)
    if before_check is None:
        at = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code") + 1
    else:
        at = next(i for i, c in enumerate(nb.cells) if CHECK_TAG in c.metadata.get("tags", [])
                  and before_check in c.source)
    nb.cells.insert(at, nbformat.v4.new_code_cell(source))
    out = tmp_path / folder / path.name
    out.parent.mkdir(exist_ok=True)
    nbformat.write(nb, out)
    return out


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("attacks")
    marker = tmp / "forged-channel-ran"
    cases = {
        "stdlib": ("exercises", "ex01", STDLIB, None),
        "tracer and audit hook": ("exercises", "ex03", TRACER, None),
        "event hook and thread": ("exercises", "ex05", HOOK_AND_THREAD, None),
        "watch off, kit reference": ("solutions", "ex01", WATCH_OFF_REFERENCE, "check_reference"),
        "torch's operator by a run-time name": ("solutions", "ex01", RUN_TIME_OPERATOR, "check_reference"),
        "torch's module by a run-time name": ("solutions", "ex01", RUN_TIME_MODULE, "check_reference"),
        "absent operators": ("solutions", "ex01", ABSENT_ATTACKS, "check_reference"),
        "absent softmax": ("exercises", "ex08", ABSENT_CAPSTONE, "check_capstone_reference"),
        "watch off, grader's classes": ("solutions", "ex06", WATCH_OFF_CLASSIFY, "check_classification"),
        "forged channel": ("exercises", "ex10", FORGED_CHANNEL % (str(marker), PROMPT, PROMPT), None),
        "tests inspect the op": ("solutions", "ex09", INSPECTING_TESTS, "check_contract_tests"),
        "tests learn the run order": ("solutions", "ex09", STATEFUL_TESTS, "check_contract_tests"),
    }
    out = {}
    for i, (name, (folder, ex, src, before)) in enumerate(cases.items()):
        (tmp / str(i)).mkdir()
        # these switch the watch off or answer for the agent: graded without the kernel's tamper evidence (which
        # reports the absent operators' attacks "tampered" first), the defence each test proves is the one that acts
        # (test_grading_tamper.py shows the evidence reports each way of switching the watch off)
        alone = name in TAMPER_EVIDENCE_OFF
        out[name] = cli.grade_notebook(_notebook(tmp / str(i), folder, ex, src, before_check=before), timeout=180,
                                       tamper_evidence=not alone)
    out["marker"] = marker
    return out


def _by_part(g):
    return {p.part: p for p in g.parts}


@pytest.mark.parametrize("name", ["stdlib", "tracer and audit hook", "event hook and thread", "forged channel",
                                  "tests inspect the op", "tests learn the run order"])
def test_attack_scores_zero_on_every_part(graded, name):
    g = graded[name]
    assert g.parts and all(p.earned == 0 for p in g.parts), [(p.part, p.earned, p.feedback[:80]) for p in g.parts]


def test_watch_switched_off_before_the_kit_reference_scores_zero_on_that_part(graded):
    by = _by_part(graded["watch off, kit reference"])
    assert by["reference"].earned == 0 and "reference_rms_norm" in by["reference"].feedback, by["reference"]
    assert by["default_eps"].passed, by["default_eps"].feedback  # the learner's own answer still counts


@pytest.mark.parametrize("name, called", [("torch's operator by a run-time name", "torch's _fused_rms_norm"),
                                          ("torch's module by a run-time name", "RMSNorm.forward")])
def test_torchs_rms_norm_by_a_run_time_name_scores_zero_on_the_reference(graded, name, called):
    by = _by_part(graded[name])
    assert by["reference"].earned == 0 and called in by["reference"].feedback, by["reference"]
    assert by["default_eps"].passed, by["default_eps"].feedback  # the learner's own answer still counts


def test_torchs_operator_is_absent_from_the_kernel_by_every_path(graded):
    g = graded["absent operators"]
    by = _by_part(g)
    feedback = by["reference"].feedback
    assert by["reference"].earned == 0 and "refused: " in feedback, feedback
    assert feedback.split("refused: ", 1)[1].split(" (line")[0].split() == list(ABSENT_ATTACK_NAMES), feedback
    assert by["default_eps"].passed, by["default_eps"].feedback  # the learner's own answer still counts
    # the scratch call of torch's operator failed alone, saying why
    assert "torch's rms_norm is not available while exercise 01 is graded" in g.reason, g.reason


def test_torchs_softmax_answers_the_marker_the_capstone_reference_names(graded):
    by = _by_part(graded["absent softmax"])
    assert by["reference"].earned == 0, by["reference"]
    assert "what torch's softmax returns while exercise 08 is graded" in by["reference"].feedback, by["reference"]
    # the scratch comparison failed alone, and the report says why
    reason = graded["absent softmax"].reason
    assert "AssertionError" in reason and "return -1024 in every element" in reason, reason


def test_watch_switched_off_before_the_graders_classes_scores_zero(graded):
    by = _by_part(graded["watch off, grader's classes"])
    assert by["classification"].earned == 0 and "expected_classes" in by["classification"].feedback


def test_forged_channel_never_runs_code_in_the_grader(graded):
    assert not graded["marker"].exists()
    feedback = [p.feedback for p in graded["forged channel"].parts]
    assert all("answered one request twice" in f for f in feedback), feedback


def test_inspecting_tests_are_told_why(graded):
    by = _by_part(graded["tests inspect the op"])
    assert "inspect" in by["passes_correct_ops"].feedback, by["passes_correct_ops"].feedback


# --- without a kernel ------------------------------------------------------------------------------------------------

def test_answers_are_read_without_unpickling_code(tmp_path):
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    for raw in (_saved({"ok": Evil()}), pickle.dumps({"ok": Evil()}), _saved({"ok": torch.ones(2)})[:-7], b"junk"):
        with pytest.raises(remote.RemoteError, match="could not be read safely"):
            remote.Session._load(base64.b64encode(raw).decode())
    assert not marker.exists()
    got = remote.Session._load(base64.b64encode(_saved({"ok": [torch.ones(2), torch.float16, "x"]})).decode())
    assert torch.equal(got["ok"][0], torch.ones(2)) and got["ok"][1:] == [torch.float16, "x"]


def _saved(obj) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def test_learner_exceptions_keep_their_name_and_kind():
    exc = remote.answered_error(["NotImplementedError", "stub"])
    assert isinstance(exc, NotImplementedError) and type(exc).__name__ == "NotImplementedError"
    exc = remote.answered_error(["MyError", "boom"])
    assert type(exc).__name__ == "MyError" and isinstance(exc, remote.RemoteError)


def test_source_of_an_answer_follows_its_names_not_its_locals():
    src = ("import fastpath_lib.testing as T\nref = T.reference_rms_norm\nhunks = T.compare\n"
           "def mine(x, hunks):\n    return ref(x) if hunks else None\ndef other(x):\n    return hunks")
    reach = sources.closure_source("mine", src)
    assert "ref = T.reference_rms_norm" in reach and "hunks = T.compare" not in reach
    assert "fastpath_lib.testing.reference_rms_norm" in sources.names_used(reach)
    with sources.using(["x = 1"]):
        assert sources.learner_source() == "x = 1"
    assert sources.learner_source() == ""


@pytest.mark.parametrize("source", [
    "def t(op):\n    assert op.__name__ == 'op'",
    "def t(op):\n    assert op.__code__ is not None",
    "def t(op):\n    import inspect\n    inspect.getsource(op)",
    "def t(op):\n    seen.add(str(dir(op)))",
])
def test_inspection_is_found(source):
    assert inspection(source)


@pytest.mark.parametrize("cells, problem", [
    (["import fastpath_lib.testing as T", "def mine(x, ns, w, eps):\n    return T.reference_rms_norm(x, ns, w, eps)"],
     "reference_rms_norm"),
    (["from fastpath_lib import testing", "ref = testing.reference_rms_norm", "def mine(*a):\n    return ref(*a)"],
     "reference_rms_norm"),
    (["import sys\ndef mine(x, ns, w, eps):\n    sys.setprofile(None)\n    return x.rms_norm(ns)"], "rms_norm"),
    (["import torch.nn.functional as F\nmine = lambda x, ns, w, eps: F.rms_norm(x, ns, w, eps)"], "rms_norm"),
    (["import torch", "def mine(x, ns, w, eps):\n    x = x.double()\n    return x * torch.rsqrt(x.pow(2).mean(-1, "
      "keepdim=True) + eps)"], None),
    (["import fastpath_lib.testing as T\nunused = T.reference_rms_norm",
      "def mine(x, ns, w, eps):\n    return x * 2"], None),
    # an object the answer reads, filled in place in another cell
    (["import torch.nn.functional as F", "box = [None]\nbox[0] = F.rms_norm", "def mine(*a):\n    return box[0](*a)"],
     "rms_norm"),
    # a table of torch's functions the answer indexes: the feedback names the table it reads
    (["import torch.nn.functional as F", "def mine(*a):\n    return F.__dict__['rms_norm'](*a)"],
     "reads torch.nn.functional.__dict__, which holds"),
    (["import torch, torch._decomp as D", "def mine(x, ns, w, eps):\n    aten = torch.ops.aten\n"
      "    return D.decomposition_table[aten.native_layer_norm.default](x, ns, w, None, eps)[0]"],
     "reads torch._decomp.decomposition_table, which holds"),
    # a module's functions called in other cells are not the answer's
    (["import torch", "def mine(x, ns, w, eps):\n    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)",
      "y = torch.nn.functional.rms_norm(torch.ones(2, 4), [4])"], None),
])
def test_borrowed_answers_are_found_in_the_source(cells, problem):
    from fastpath_lib.grading.rules import borrowed

    forbidden = borrowed.KIT_REFERENCE + borrowed.TORCH_RMS_NORM
    with sources.using(cells):
        got = borrowed.source_problem("mine", forbidden)
    assert (got is None) if problem is None else (got is not None and problem in got), got
