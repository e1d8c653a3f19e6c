"""The static rules read every binding form (issue 28, item 6): each answer below borrows the kit's reference, or
torch's operator, through a form the grader's source reading used to miss, and is refused; a plain answer is not."""

from __future__ import annotations

import pytest

from fastpath_lib.grading.engine import sources
from fastpath_lib.grading.rules import borrowed

_MINE = "def mine(x, ns, w, eps):\n    return f(x, ns, w, eps)"
_F = "import torch.nn.functional as F\n"


@pytest.mark.parametrize("cells, problem", [
    ([_F + "for f in [F.rms_norm]:\n    pass", _MINE], "rms_norm"),
    ([_F + "import contextlib\nwith contextlib.nullcontext(F.rms_norm) as f:\n    pass", _MINE], "rms_norm"),
    ([_F + "(f := F.rms_norm)", _MINE], "rms_norm"),
    ([_F + "if True:\n    f = F.rms_norm", _MINE], "rms_norm"),
    ([_F + "f: object = F.rms_norm", _MINE], "rms_norm"),
    ([_F + "g = F.rms_norm\nf = g\ndel g", _MINE], "rms_norm"),
    ([_F + "def setup():\n    global f\n    f = F.rms_norm\nsetup()", _MINE], "rms_norm"),
    ([_F + "try:\n    raise ValueError(F.rms_norm)\nexcept ValueError as e:\n    f = e.args[0]", _MINE], "rms_norm"),
    # a module or the namespace filled elsewhere, in any binding form: the statement that filled it is the answer's
    (["import json", _F + "setattr(json, 'f', F.rms_norm)", "def mine(*a):\n    return json.f(*a)"], "rms_norm"),
    ([_F + "globals()['f'] = F.rms_norm", _MINE], "rms_norm"),
    ([_F + "import json\nfor json.f in [F.rms_norm]:\n    pass", "def mine(*a):\n    return json.f(*a)"],
     "rms_norm"),
    ([_F + "import json as j\nj.__dict__['f'] = F.rms_norm", "def mine(*a):\n    return j.f(*a)"], "rms_norm"),
    ([_F + "import json\nm = json\nm.f = F.rms_norm", "def mine(*a):\n    return json.f(*a)"], "rms_norm"),
    # a cell IPython reads: parsed as what IPython runs
    ([_F + "F.rms_norm?\nf = F.rms_norm", _MINE], "rms_norm"),
    # imports under another name, modules under another name, star imports, names looked up by string
    (["import fastpath_lib.testing as T\nR = T", "def mine(*a):\n    return R.reference_rms_norm(*a)"],
     "reference_rms_norm"),
    (["from fastpath_lib.testing import *", "def mine(*a):\n    return reference_rms_norm(*a)"], "reference_rms_norm"),
    (["import fastpath_lib.testing as T", "def mine(*a):\n    return getattr(T, 'reference_rms_norm')(*a)"],
     "reference_rms_norm"),
    # plain answers, and a module's function used elsewhere, still pass
    (["import torch", "def mine(x, ns, w, eps):\n    x = x.double()\n    return x * torch.rsqrt(x.pow(2).mean(-1, "
      "keepdim=True) + eps)", "for k in range(2):\n    y = torch.nn.functional.rms_norm(torch.ones(2, 4), [4])"], None),
])
def test_every_binding_form_is_read(cells, problem):
    with sources.using(cells):
        got = borrowed.source_problem("mine", borrowed.KIT_REFERENCE + borrowed.TORCH_RMS_NORM)
    assert (got is None) if problem is None else (got is not None and problem in got), got


def test_a_table_of_the_graders_oracles_is_refused():
    """ex08's reference point given to the checker's own oracle, read out of its table."""
    cells = ["from fastpath_lib.grading.checks import ex08_capstone as C",
             "def mine(x):\n    return C._REFERENCES['softmax'][0](x)"]
    with sources.using(cells):
        got = borrowed.source_problem("mine", borrowed.kit("grading", why="that is the grader's own answer"))
    assert got and "grading.checks.ex08_capstone" in got, got
    from fastpath_lib import exercises

    assert all(isinstance(n, str) for n in exercises.KNOWN_OPS)  # the facade hands out names, not oracles


_ANALYSIS = "def mine(row):\n    return A.outcome(row['c'] / row['b'], 0.05)"


@pytest.mark.parametrize("cells, stray", [
    # the kit's own bench/analysis.py, a second copy under a top-level name the grader's resolution cannot see
    (["import os, sys\nimport fastpath_lib as fl\nsys.path.insert(0, os.path.join(os.path.dirname(fl.__file__), "
      "'bench'))\nimport analysis as A", _ANALYSIS], "analysis"),
    (["import os\nimport fastpath_lib as fl\nos.chdir(os.path.join(os.path.dirname(fl.__file__), 'bench'))",
      "import analysis as A", _ANALYSIS], "analysis"),
    (["from vocabulary import outcome\nA = None", "def mine(row):\n    return outcome(1.0, 0.05)"], "vocabulary"),
    # a module the learner's code wrote, and a relative import
    (["open('/tmp/mine_rule.py', 'w').write('x = 1')\nimport mine_rule as A", _ANALYSIS], "mine_rule"),
    (["from . import analysis as A", _ANALYSIS], "."),
    # a top-level package of the checkout that is not the kit's library
    (["import tools as A", _ANALYSIS], "tools"),
    # installed modules, the kit's own under its name, and the standard library pass
    (["import math, json, xml.etree.ElementTree as ET\nimport torch\nfrom fastpath_lib.bench import analysis as A",
      _ANALYSIS], None),
])
def test_a_module_that_is_not_installed_is_refused(cells, stray):
    """Red-team finding: ``sys.path``/``chdir`` plus ``import analysis`` gave ex06 3/3 with the kit's own rule, since
    names are resolved in the grader's process, where that module does not exist. Such an import is refused."""
    with sources.using(cells):
        got = borrowed.source_problem("mine", borrowed.kit("bench/sweep.py", why="that is the kit's rule"))
    assert (got is None) if stray is None else (got is not None and f"imports {stray}," in got), got


_SOFTMAX_REF = "def reference(x):\n    return {}"


@pytest.mark.parametrize("body", [
    "torch.log_softmax(x.double(), dim=-1).exp()",  # the sibling op, turned back
    "torch.nn.Softmax(dim=-1)(x.double())",  # torch's module class: its forward calls F.softmax
    "Softmax(dim=-1)(x.double())",
    "torch._softmax(x.double(), -1, False)",  # the private alias
    "(-torch.nn.functional.softmin(x.double(), dim=-1)).neg()",
])
def test_ex08s_softmax_reference_refuses_torchs_softmax_family(body):
    """Red-team finding: ex08's softmax reference scored with torch's softmax under another name. Each form is now
    refused; a reference written out still passes (last assertion)."""
    from fastpath_lib.grading.checks import ex08_capstone

    forbidden = borrowed.torch_op(*ex08_capstone._REFERENCES["softmax"][1], why="that is torch's own softmax")
    with sources.using(["import torch\nfrom torch.nn import Softmax", _SOFTMAX_REF.format(body)]):
        got = borrowed.source_problem("reference", forbidden)
    assert got is not None and ("softmax" in got.lower() or "softmin" in got), got
    own = "e = (x.double() - x.double().amax(-1, keepdim=True)).exp()\n    return e / e.sum(-1, keepdim=True)"
    with sources.using(["import torch", "def reference(x):\n    " + own]):
        assert borrowed.source_problem("reference", forbidden) is None
