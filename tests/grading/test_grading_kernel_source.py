"""Exercise 02 asks for a Triton kernel: what the learner's *source* must show (grading.rules.kernel_source), and the
check that applies it. A kernel object that is not a kernel, a kernel body that calls out to Python, a launch for show
with the answer computed in torch: each scores nothing once the check reads the learner's source, as the grader
does; the solution's source keeps full marks."""

from __future__ import annotations

import linecache
import re

import pytest

jupytext = pytest.importorskip("jupytext")

from fastpath_lib import exercises as ex  # noqa: E402
from fastpath_lib.grading.engine import sources  # noqa: E402
from fastpath_lib.grading.rules.kernel_source import kernel_problem, launcher_problem, program  # noqa: E402
from tests.solved import ROOT, earned  # noqa: E402


def _solution_cells() -> list[str]:
    (path,) = (ROOT / "solutions").glob("ex02_*.py")
    return [c.source for c in jupytext.read(path).cells
            if c.cell_type == "code" and "grader-check" not in c.metadata.get("tags", [])]


SOLUTION = "\n\n".join(_solution_cells())
_N = [0]


def _run(source: str) -> dict:
    """Execute a learner's source (Triton's interpreter reads kernels back through linecache)."""
    _N[0] += 1
    name = f"<ex02 learner source {_N[0]}>"
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    ns: dict = {}
    exec(compile(source, name, "exec"), ns)
    return ns


def _with_backward(body: str) -> str:
    """The solution's source with ``my_backward``'s body replaced (the solution's kernel stays defined)."""
    start = SOLUTION.index("def my_backward(dy2d, h2d, weight, rstd):")
    end = SOLUTION.index("# END SOLUTION", start) + len("# END SOLUTION")
    return SOLUTION[:start] + "def my_backward(dy2d, h2d, weight, rstd):\n" + body + SOLUTION[end:]


_NOOP_KERNEL = '''
@triton.jit
def _noop(X_ptr):
    tl.store(X_ptr, tl.load(X_ptr))


'''

TORCH_BACKWARD = _with_backward('''    _noop[(1,)](rstd)  # a launch for show
    h, dy = h2d.float(), dy2d.float()
    n = h * rstd[:, None]
    g = dy if weight is None else dy * weight.float()
    dh = rstd[:, None] * (g - n * (g * n).sum(-1, keepdim=True) / h.shape[-1])
    return dh.to(h2d.dtype), None if weight is None else (dy * n).sum(0).to(weight.dtype)
''').replace("def my_backward", _NOOP_KERNEL + "def my_backward")

AUTOGRAD_BACKWARD = _with_backward('''    _noop[(1,)](rstd)
    h = h2d.detach().float().requires_grad_()
    w = None if weight is None else weight.detach().float().requires_grad_()
    eps = (1 / rstd.double() ** 2 - h.detach().double().pow(2).mean(-1)).float()  # the eps behind rstd
    n = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps[:, None])
    y = n if w is None else n * w
    grads = torch.autograd.grad(y, [h] + ([w] if w is not None else []), dy2d.float())
    return grads[0].to(h2d.dtype), None if w is None else grads[1].to(weight.dtype)
''').replace("def my_backward", _NOOP_KERNEL + "def my_backward")

FAKE_KERNEL = SOLUTION.replace("# %%\nimport torch", "import torch") + '''

from triton.runtime.jit import KernelInterface


class _Answers(KernelInterface):
    """Looks like a kernel, answers a launch with torch."""

    def run(self, x, r, w, h, y, rstd, *args, grid=None, warmup=False, **kwargs):
        hh = x + r
        h.copy_(hh)
        hf = hh.float()
        rstd.copy_(1 / (hf * hf).mean(-1).add(args[-1]).sqrt())
        y.copy_((hf * rstd[:, None] * w.float()).to(y.dtype))


my_add_rms_norm_fwd = _Answers()
'''


def _check(source: str, call):
    ns = _run(source)
    with sources.using([source]):
        return call(ns)


def _kernel(ns):
    return ex.check_add_rms_norm_kernel(ns["my_add_rms_norm_fwd"], show=False)


def _backward(ns):
    return ex.check_backward_with_saved_rstd(ns["my_backward"], show=False)


def test_the_solution_source_keeps_full_marks():
    results = _check(SOLUTION, lambda ns: _kernel(ns) + _backward(ns))
    assert all(r.passed for r in results), [r.feedback for r in results]


@pytest.mark.parametrize("source, call, words, alone", [
    (FAKE_KERNEL, _kernel, "bound 2 times", None),
    (TORCH_BACKWARD, _backward, "outside your kernel", "computes with torch outside your kernel"),
    (AUTOGRAD_BACKWARD, _backward, "outside your kernel", "computes with torch outside your kernel"),
], ids=["kernel-object-answering-with-torch", "launch-for-show-torch-formula", "launch-for-show-autograd"])
def test_a_shortcut_that_computes_right_scores_nothing(source, call, words, alone):
    (r,) = _check(source, call)
    assert earned([r]) == 0 and words in r.feedback, r.feedback
    # without the source, the behaviour alone: the numbers are right, but the backward's launcher is watched as it
    # runs (the torch operators it calls outside the kernel are counted)
    (r,) = call(_run(source))
    assert (r.passed or "expected a @triton.jit kernel" in r.feedback) if alone is None else (
        not r.passed and alone in r.feedback), r.feedback


def test_a_backward_that_launches_nothing_fails_on_behaviour_alone():
    src = TORCH_BACKWARD.replace("    _noop[(1,)](rstd)  # a launch for show\n", "")
    (r,) = _backward(_run(src))
    assert not r.passed and "launched no Triton kernel" in r.feedback, r.feedback


KERNEL_HEAD = "import triton\nimport triton.language as tl\nimport numpy as np\n\n"


@pytest.mark.parametrize("source, words", [
    ("@triton.jit\ndef k(X):\n    tl.store(X, helper(tl.load(X)))\ndef helper(v):\n    return v", "reads helper"),
    ("@triton.jit\ndef k(X):\n    tl.store(X, np.sqrt(tl.load(X)))", "reads np"),
    ("@triton.jit\ndef k(X):\n    tl.store(X, triton.testing.torch.rsqrt(tl.load(X)))", "reads triton"),
    ("@triton.jit\ndef k(X):\n    tl.store(X, tl.load(X).__class__)", "reads __class__ of tl.load(X), which no value"),
    # the interpreter's NumPy array behind a value, or the compiler's IR: Python computing in a kernel body
    ("@triton.jit\ndef k(X):\n    v = tl.load(X)\n    v.handle.data.fill(0)\n    tl.store(X, v)", "reads handle"),
    ("@triton.jit\ndef k(X):\n    if isinstance(X.handle, tl.core.ir.value):\n        pass\n    tl.store(X, 1.0)",
     "reads handle"),
    # issue 41 (attack 7, A1): modules reached under names not their own (another module's import of them), and
    # objects of triton.language's modules that are not Triton's language
    ("@triton.jit\ndef k(X):\n    v = tl.load(X)\n    tl.random.tl.builtins.eval('lambda v: v')(v)\n    tl.store(X, v)",
     "and triton.language.random.tl is not Triton's language"),
    ("@triton.jit\ndef k(X):\n    tl.extra.pkgutil.importlib.import_module('os')\n    tl.store(X, 1.0)",
     "and triton.language.extra.pkgutil is not"),
    ("@triton.jit\ndef k(X):\n    tl.store(X, tl.math.core.add(tl.load(X), 1.0))", "triton.language.math.core is not"),
    ("@triton.jit\ndef k(X):\n    tl.store(X, triton.language.core.builtins.abs(tl.load(X)))",
     "triton.language.core.builtins is not"),
    ("@triton.jit\ndef k(X):\n    tl.standard.jit(tl.abs)\n    tl.store(X, 1.0)",
     "triton.language.standard.jit is not"),
    ("@triton.jit\ndef k(X):\n    tl.extra.module_from_spec(tl.extra.spec)\n    tl.store(X, 1.0)",
     "triton.language.extra.module_from_spec is not"),
    ("from triton.language.random import tl as lang\n@triton.jit\ndef k(X):\n"
     "    tl.store(X, lang.add(tl.load(X), 1.0))", "triton.language.random.tl is not"),
    # issue 41 (attack 8, B1): a function's own attributes are Python's, past any language object but a dtype,
    # a constexpr or a published class
    ("@triton.jit\ndef k(X):\n    tl.target_info.is_cuda.get_capture_scope()['__builtins__']['eval']('0')\n"
     "    tl.store(X, 1.0)", "triton.language.target_info.is_cuda.get_capture_scope is not"),
    ("@triton.jit\ndef k(X):\n    tl.store(X, tl.sigmoid.fn(tl.load(X)))", "triton.language.sigmoid.fn is not"),
    ("@triton.jit\ndef k(X):\n    tl.store(X, tl.load(X) + len(tl.PropagateNan.name))",
     "triton.language.PropagateNan.name is not"),
    # issue 41 (attack 9, C1): past a value (what an expression gives, not only a name) only what Triton's language
    # values publish; syntax Triton's frontend does not compile (a generator expression) is refused
    ("@triton.jit\ndef k(X):\n    v = tl.load(X)\n    s = [v for c in (1,) if (g for g in range(1)).gi_frame."
     "f_builtins['eval']('0') is None]\n    tl.store(X, v)", "reads gi_frame of (g for g in range(1)), which no value"),
    ("@triton.jit\ndef k(X):\n    tl.store(X, tl.load(X).handle)", "reads handle of tl.load(X)"),
    ("@triton.jit\ndef k(X):\n    tl.store(X, tl.load(X).to(tl.float32).real)", "reads real of tl.load(X).to("),
    ("@triton.jit\ndef k(X):\n    g = (v for v in (1, 2))\n    tl.store(X, 1.0)",
     "holds (v for v in (1, 2)) (an ast.GeneratorExp, line 2 of k"),
    ("@triton.jit\ndef k(X):\n    tl.store(X, {1: tl.load(X)}[1])", "(an ast.Dict, line 2 of k"),
    ("@triton.jit\ndef k(X):\n    def f(v):\n        return v\n    tl.store(X, f(tl.load(X)))", "defines or imports"),
    ("@triton.jit\ndef k(X):\n    tl.load(X)", "stores nothing"),
    ("def k(X):\n    tl.store(X, tl.load(X))", "under @triton.jit"),
    ("@triton.jit\n@functools.cache\ndef k(X):\n    tl.store(X, tl.load(X))", "under nothing else"),
    ("@triton.jit\ndef k(X):\n    tl.store(X, tl.load(X))\nk = [k]", "bound 2 times"),
    # a module constant is read by its value (Triton's frontend refuses an annotated one: reader 18 F2-2)
    ("EPS = 1e-6\n@triton.jit\ndef k(X):\n    tl.store(X, tl.load(X) + EPS)", "constexpr by value"),
    ("EPS: tl.constexpr = 1e-6\n@triton.jit\ndef k(X):\n    tl.store(X, tl.load(X) + EPS)",
     "annotated tl.constexpr but not made one"),
])
def test_kernel_rules(source, words):
    problem = kernel_problem(KERNEL_HEAD + source, "k")
    assert problem and words in problem, problem


@pytest.mark.parametrize("other", [
    "%matplotlib inline", "%timeit k", "!ls", "setattr(k, 'note', 1)", "globals()['other'] = 1",
    "import sys\nsys._getframe()", "triton.jit = triton.jit",
])
def test_kernel_rules_read_the_kernel_not_the_notebook_around_it(other):
    """Cells that are not the answer cost nothing: the grader runs only the kernel and what it reaches
    (:func:`program`), so a magic, a plot cell or a namespace write elsewhere cannot change what it measures."""
    source = KERNEL_HEAD + "@triton.jit\ndef k(X):\n    tl.store(X, tl.load(X))\n\n" + other
    assert kernel_problem(source, "k") is None
    assert other.splitlines()[-1] not in program(source, "k")


def test_kernel_rules_accept_what_triton_language_publishes():
    """Each name ``triton.language`` publishes for kernels, in its own submodules too (``tl.math``, libdevice)."""
    src = KERNEL_HEAD + ("from triton.language.extra import libdevice\n"
                         "@triton.jit\ndef k(X, n):\n    c = tl.arange(0, 16)\n    v = tl.load(X + c, mask=c < n)\n"
                         "    v = tl.math.rsqrt(v) + tl.extra.cuda.libdevice.exp(v) + triton.language.sqrt(v)\n"
                         "    v = libdevice.exp(v) + tl.extra.libdevice.log(v) + tl.core.add(v, 1.0)\n"
                         "    v = tl.maximum(v, 0.0, propagate_nan=tl.PropagateNan.ALL).to(tl.float32)\n"
                         "    v = v + tl.float32.primitive_bitwidth + tl.float16.is_fp16()\n"
                         "    for i in tl.static_range(2):\n        v = tl.where(c < tl.cdiv(n, 2), v, v * 2)\n"
                         "    tl.store(X + c, v.to(X.dtype.element_ty), mask=c < n)")
    assert kernel_problem(src, "k") is None
    # what its values publish, past a name or an expression: a tensor's, a dtype's, a pointer type's, a constexpr's
    values = src.replace("    tl.store(X + c,", "    m = v.shape[0] + v.numel + X.dtype.element_ty.primitive_bitwidth"
                         " + (v * 2).dtype.is_fp32() + tl.load(X).to(tl.float16).T.dtype.itemsize\n"
                         "    tl.store(X + c,")
    assert "v.numel" in values and kernel_problem(values, "k") is None


def test_kernel_rules_accept_helpers_that_are_kernels_and_constexpr_globals():
    src = KERNEL_HEAD + ("BLOCK = tl.constexpr(64)\nTWO: tl.constexpr = tl.constexpr(2)\n@triton.jit\n"
                         "def sq(v):\n    return v * v\n@triton.jit\n"
                         "def k(X, n):\n    c = tl.arange(0, BLOCK)\n    for i in range(TWO):\n"
                         "        tl.store(X + c, sq(tl.load(X + c, mask=c < n)), mask=c < min(n, BLOCK))")
    assert kernel_problem(src, "k") is None


LAUNCH_HEAD = KERNEL_HEAD + "import torch\n@triton.jit\ndef k(X):\n    tl.store(X, tl.load(X))\n"


@pytest.mark.parametrize("body, words", [
    ("    return x", "launches no @triton.jit kernel"),
    ("    k[(1,)](x)\n    return -x", "tensor arithmetic"),
    ("    y = torch.empty_like(x)\n    k[(1,)](y)\n    y += x\n    return y", "tensor arithmetic"),
    ("    k[(1,)](x)\n    return torch.rsqrt(x)", "calls torch.rsqrt"),
    ("    k[(1,)](x)\n    return x.rsqrt()", "tensor method rsqrt"),
    ("    k[(1,)](x)\n    return np.sqrt(x)", "calls numpy.sqrt"),
    ("    k[(1,)](x)\n    return sum([x, x])", "calls sum"),
    ("    k[(1,)](x)\n    return x.__mul__(x)", "__mul__"),
    ("    k[(1,)](x)\n    return x.__class__", "special attribute"),
    ("    k[(1,)](x)\n    return torch.autograd.grad(x, x)", "calls torch.autograd.grad"),
    ("    k[(1,)](x)\n    g = torch.rsqrt\n    return g(x)", "calls torch.rsqrt"),
    ("    k[(1,)](x)\n    return helper(x)\ndef helper(v):\n    return v * v", "helper does tensor arithmetic"),
    ("    k[(1,)](x)\n    f = torch.nn.functional\n    return f.rms_norm(x, [1])", "torch.nn.functional.rms_norm"),
    ("    k[(1,)](x)\n    return G.rsqrt(x)\nG = torch", "calls G.rsqrt"),
    ("    k[(1,)](x)\n    out = torch.empty_like(x)\n    out[0] = 1\n    return out", "writes tensor elements"),
    ("    k[(1,)](x)\n    return [a * b for a, b in zip(x, x)]", "tensor arithmetic"),
    ("    other[(1,)](x)\n    k[(1,)](x)\n    return x\nother = k", "not a @triton.jit function of yours"),
    ("    k[(1,)](x)\n    return x.item()", "tensor method item"),
])
def test_launcher_rules(body, words):
    problem = launcher_problem(LAUNCH_HEAD + "def launch(x):\n" + body, "launch")
    assert problem and words in problem, problem


def test_launcher_rules_accept_allocation_layout_and_the_final_reduction():
    body = ("    n_rows, n_cols = x.shape\n    part = torch.empty((n_rows, n_cols), dtype=torch.float32)\n"
            "    k[(triton.cdiv(n_rows, 1),)](x.contiguous(), n_rows * n_cols)\n"
            "    return part.sum(0).to(x.dtype) if x.dim() == 2 else None")
    assert launcher_problem(LAUNCH_HEAD + "def launch(x):\n" + body, "launch") is None


def test_an_object_that_only_answers_a_launch_is_not_a_kernel():
    ns = _run(FAKE_KERNEL.replace("class _Answers(KernelInterface):", "class _Answers:").replace(
        '    """Looks like a kernel, answers a launch with torch."""\n',
        '    """Looks like a kernel, answers a launch with torch."""\n\n'
        '    def __getitem__(self, grid):\n        return lambda *a, **k: self.run(*a, **k)\n'))
    (r,) = _kernel(ns)
    assert not r.passed and "expected a @triton.jit kernel, got _Answers" in r.feedback, r.feedback


_DEFINED = "import triton\nimport triton.language as tl\nimport torch\n"


@pytest.mark.parametrize("definition, words", [
    ("@triton.jit\ndef k(X, B: tl.constexpr = (lambda: 0)()):\n    tl.store(X, 0)", "parameter B of k has the default"),
    ("@triton.jit\ndef k(X, *, B=torch.zeros(1)):\n    tl.store(X, 0)", "parameter B of k has the default"),
    ("@triton.jit\ndef k(X, B: print('hi') = 0):\n    tl.store(X, 0)", "parameter B of k has the annotation"),
    ("@triton.jit\ndef k(X) -> [0 for _ in ()]:\n    tl.store(X, 0)", "return of k has the annotation"),
    ("@triton.jit\ndef k(X: tuple[print('hi')]):\n    tl.store(X, 0)", "parameter X of k has the annotation"),
    ("@triton.jit(debug=print('hi'))\ndef k(X):\n    tl.store(X, 0)", "decorated with triton.jit(debug=print"),
    # an uncalled helper reached by name: its default is defined with the program all the same
    ("@triton.jit\ndef k(X, B: tl.constexpr):\n    if B < 0:\n        h(X)\n    tl.store(X, 0)\n"
     "@triton.jit\ndef h(X, D: tl.constexpr = (lambda: 0)()):\n    tl.store(X, 0)", "parameter D of h has the default"),
])
def test_defining_a_kernel_runs_nothing_of_the_learners(definition, words):
    """The grader's child runs the program's text (:func:`program`) before any check: a default, an annotation or a
    decorator argument of a copied function would be the learner's host code running there."""
    problem = kernel_problem(_DEFINED + definition, "k")
    assert problem and words in problem, problem
    with pytest.raises(ValueError, match=re.escape(words.split(" has")[0])):
        program(_DEFINED + definition, "k")


@pytest.mark.parametrize("definition, words", [
    ("def launch(x, d=(lambda: torch)()):\n    k[(1,)](x)\n    return x", "parameter d of launch has the default"),
    ("def launch(x):\n    k[(1,)](x)\n    return h(x)\n@staticmethod\ndef h(x):\n    return x", "decorated"),
])
def test_defining_a_launcher_runs_nothing_of_the_learners(definition, words):
    src = _DEFINED + "@triton.jit\ndef k(X):\n    tl.store(X, 0)\n" + definition
    problem = launcher_problem(src, "launch")
    assert problem and words in problem, problem


def test_definitions_keep_literal_defaults_constexpr_annotations_and_jit_options():
    src = _DEFINED + ("N: tl.constexpr = 64\nM: print('hi') = 3\n"
                      "@triton.jit(do_not_specialize=['n'])\ndef k(X, n, B: tl.constexpr = 128, F: 'hint' = -1.5,"
                      " *, G=(1, None, True)):\n    tl.store(X, 0)\n"
                      "def launch(x: torch.Tensor | None, scale: float = 1.0) -> tuple[torch.Tensor, int]:\n"
                      "    k[(1,)](x, 1)\n    return x")
    assert kernel_problem(src, "k") is None and launcher_problem(src, "launch") is None
    text = program(src, "launch")
    assert "N: tl.constexpr = 64" in text and "print" not in text, text  # a constant's annotation is defined too


def test_the_replays_kernels_keep_only_what_the_frontend_visited():
    """Issue 41 (attack 8): :func:`replay.definitions` with the compile step's visited nodes: an unvisited statement
    or conditional-expression branch raises, a docstring is ``pass``; a kernel text with a second ``def`` line (which
    Triton's interpreter would run instead) is refused. In process."""
    import ast

    from fastpath_lib.grading.engine import replay

    src = ("import triton\n@triton.jit\ndef k(X, B: tl.constexpr):\n    '''doc\ndef k(X):'''\n    x = 1 if B else 2\n"
           "    if B:\n        tl.store(X, x)\n    else:\n        tl.store(X, 0)\n")
    fn = ast.parse(src).body[1]
    paths = replay.node_paths(fn)
    skipped = {id(fn.body[1].value.orelse), id(fn.body[2].orelse[0])}
    visited = {p for n, p in paths.items() if n not in skipped}
    text = replay.definitions(src, {"k": sorted(visited)})
    body = ast.parse(text).body[1].body
    assert isinstance(body[0], ast.Pass) and "tl.store(X, x)" in text, text
    assert "never compiled (line 4 of k" in ast.unparse(body[1]) and ast.unparse(body[1]).startswith("x = 1 if B"), text
    assert isinstance(body[2].orelse[0], ast.Raise) and "line 8 of k" in ast.unparse(body[2].orelse[0]), text
    with pytest.raises(ValueError, match="besides its own def line"):
        replay.definitions(src)
