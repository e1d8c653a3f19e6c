"""Honest answers get full marks in the check cell and in the grader alike (issue 35, item 1).

Each notebook here is a solution notebook whose answer cells hold answers written without the solutions and unlike
them, with the cells an honest learner adds around them: ``%matplotlib inline``, ``%timeit``, a plot, a ``globals()``
listing, a ``setattr`` on an object of their own, computed ``getattr`` (in an answer too), a sentence about a
``4096 x 4096`` input in exercise 07's CPU note, and exercise 12 tests that call ``torch._dynamo.reset()`` and hand
the in-place op a leaf that requires grad. Each notebook runs twice: as the learner runs it (its check cells, in a
kernel of its own) and through the grader. Every part must pass in both, with the same verdict.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbclient")

from fastpath_lib import runtime  # noqa: E402
from fastpath_lib.grading.engine import cli  # noqa: E402
from fastpath_lib.grading.engine.notebook import CHECK_TAG  # noqa: E402
from fastpath_lib.grading.registry import EXERCISES, MIME  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

CLASSIFY = r'''
def my_classify(row) -> str:
    """Outcome of one row: the candidate's time over the baseline's, against the larger relative spread."""
    if getattr(row, "route") == "fallback":
        return "fallback"
    base, cand, base_spread, cand_spread = (getattr(row, column) for column in (
        "baseline_median_us", "candidate_median_us", "baseline_spread_us", "candidate_spread_us"))
    band = max(base_spread / base, cand_spread / cand)
    ratio = cand / base
    for name, inside in (("win", ratio < 1 - band), ("loss", ratio > 1 + band)):
        if inside:
            return name
    return "neutral"
'''

NOTE = r'''
def write_pr_note(results, env) -> str:
    """The note, written from the table: what took the fast path, what it measured, and how."""
    timed = env.get("device") == "cuda"
    columns = ("case_id", "route", "baseline_median_us", "candidate_median_us")

    def verdict(row):
        if row.route == "fallback":
            return "fallback"
        if not timed:
            return "unmeasured"
        noise = max(row.baseline_spread_us / row.baseline_median_us,
                    row.candidate_spread_us / row.candidate_median_us)
        ratio = row.candidate_median_us / row.baseline_median_us
        return "win" if ratio < 1 - noise else "loss" if ratio > 1 + noise else "neutral"

    rows = list(results.itertuples(index=False))
    kinds = {row.case_id: verdict(row) for row in rows}
    times = {row.case_id: f"{row.baseline_median_us} -> {row.candidate_median_us} us" for row in rows}
    h = env["harness"]
    out = [
        "## Summary",
        "This PR routes eligible RMSNorm calls to a Triton kernel and everything else to F.rms_norm.",
        "",
        f"**Environment:** {env['device_name'] or env['device']}, torch {env['torch']}, triton {env['triton']}"
        f", {'synthetic' if timed else 'not a GPU measurement'}",
        "",
    ]
    if timed:
        out.append("**Outcomes:** " + ", ".join(
            f"{sum(k == kind for k in kinds.values())} {kind}" for kind in ("win", "neutral", "loss", "fallback")))
    out += [
        "",
        "## Scope",
        f"Scope: fp16, bf16 and fp32 inputs of at most {MAX_COLS} columns; every other call runs F.rms_norm",
        "",
        f"Inputs in fp16, bf16 or fp32 with at most {MAX_COLS} columns, contiguous rows and 16-byte alignment take the "
        "Triton route; any other call goes to the fallback, F.rms_norm, exactly as before.",
        "",
        "## Eligibility and fallback",
        "The predicate names the first condition a call fails, and the call then runs F.rms_norm unchanged.",
        "",
        "## Semantic evidence",
        "Outputs and gradients of both routes agree with a float64 reference within the dtype tolerances.",
        "",
        "## Mechanism",
        "Each row is read once and written once by one program; a call is one launch.",
        "",
        "## Performance",
    ]
    if timed:
        out += [f"* {c}: {kinds[c]}, {times[c]}" for c in kinds if kinds[c] != "fallback"]
    else:
        out.append("These timings are not a GPU measurement; no speed-up is claimed from them. Under the CPU "
                   "interpreter a 4096 x 4096 input took about 9 s, which says how slow the interpreter is.")
        out += [f"* {row.case_id}: {kinds[row.case_id]}, {times[row.case_id]}" for row in rows]
    out += ["", "<details><summary>All cases</summary>", "",
            "| " + " | ".join(c.replace("_id", "") for c in columns[:1]) + " | route | baseline us | candidate us "
            "| class |", "|---|---|---|---|---|"]
    for row in rows:
        cells = [str(getattr(row, column)) for column in columns]  # a computed attribute name
        out.append("| " + " | ".join(cells + [kinds[row.case_id]]) + " |")
    out += ["", "</details>", "", "## Measurement method",
            "Times are read after a warm-up and a device synchronization:", "",
            f"* Timer: {h['timer']}", f"* Warm-up: {h['warmup_ms']} ms",
            f"* Synchronization: {h['sync']}",
            f"* Statistic: median of {h['samples']} samples", "* Spread: 20th to 80th percentile",
            f"* Raw samples: {h['raw_samples']}", "",
            "", "## Limitations",
            "The table is synthetic teaching data; a real GPU run has to replace it before review."]
    return "\n".join(out)
'''

OVERLAPS = r'''
def overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Byte ranges of one storage that intersect (a conservative answer for interleaved views)."""
    if a.untyped_storage().data_ptr() != b.untyped_storage().data_ptr() or 0 in (a.numel(), b.numel()):
        return False

    def byte_range(t):
        lo = hi = t.storage_offset()
        for n, step in zip(t.shape, t.stride()):
            lo, hi = (lo, hi + (n - 1) * step) if step >= 0 else (lo + (n - 1) * step, hi)
        return lo * t.element_size(), (hi + 1) * t.element_size()

    (a_lo, a_hi), (b_lo, b_hi) = byte_range(a), byte_range(b)
    return max(a_lo, b_lo) < min(a_hi, b_hi)
'''

INPLACE_TESTS = r'''
def my_inplace_tests(op_) -> None:
    """Each promise of the in-place form, checked against the functional contract ``native``."""
    torch._dynamo.reset()  # test hygiene: every run compiles afresh
    gen = torch.Generator().manual_seed(1234)

    def fresh(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=gen).to(dtype)

    def close(got, want, what):
        atol, rtol = tolerance(want.dtype)
        assert torch.allclose(got.float(), want.float(), atol=atol, rtol=rtol), what

    for x_name in ("float32", "float16", "bfloat16"):  # writes, returns, and the residual for each dtype pair
        for w_name in dict.fromkeys((x_name, "bfloat16", "float32")):
            x_dtype, w_dtype = getattr(torch, x_name), getattr(torch, w_name)
            x, r = fresh(4, 64, dtype=x_dtype), fresh(4, 64, dtype=x_dtype)
            w = (1 + 0.1 * fresh(64)).to(w_dtype)
            want_out, want_r = native(x.clone(), r.clone(), w)
            got = op_(x, r, w)
            assert got[0] is x and got[1] is r, "returns: the caller's own x and residual"
            assert torch.equal(r, want_r), f"residual ({x_name} input, {w_name} weight)"
            close(x, want_out, f"output ({x_name} input, {w_name} weight)")
    ulp = 2.0 ** -10  # fp16 at 1.0: 1 + 0.7 ulp rounds to 1 + 1 ulp in the residual, not in the fp32 sum
    x, r = torch.ones(2, 32, dtype=torch.float16), torch.full((2, 32), 0.7 * ulp, dtype=torch.float16)
    op_(x, r, None, 0.0)
    assert torch.equal(x, torch.ones_like(x)), "variance: a constant row normalizes to 1 from the fp32 sum"
    w = 1 + 0.1 * fresh(64)
    same = fresh(6, 64)  # x and residual one tensor: memory ends holding the output of x + x
    want_out, _ = native(same.clone(), same.clone(), w, 1e-3)
    op_(same, same, w, 1e-3)
    close(same, want_out, "aliasing: x is residual")
    buf = fresh(7, 64)  # overlapping views: as the in-place composite leaves memory
    ref = buf.clone()
    op_(buf[1:], buf[:-1], w, 1e-3)
    native_(ref[1:], ref[:-1], w, 1e-3)
    close(buf, ref, "aliasing: x overlaps residual")
    x, r = fresh(3, 64), fresh(3, 64)
    x0, r0 = x.clone(), r.clone()
    try:
        op_(x, r, torch.ones(32))
    except RuntimeError:
        pass
    else:
        raise AssertionError("raises: a weight of the wrong width must raise")
    assert torch.equal(x, x0) and torch.equal(r, r0), "raises: nothing written before raising"
    leaf, r = fresh(3, 64).requires_grad_(), fresh(3, 64)  # autograd: an in-place write into a leaf is refused
    r0 = r.clone()
    try:
        op_(leaf, r)
    except RuntimeError:
        pass
    else:
        raise AssertionError("autograd: writing into a leaf that requires grad must raise")
    assert torch.equal(r, r0), "autograd: refused, and nothing written"
    with torch.no_grad():  # ... and allowed where autograd does not record
        op_(leaf, r)
    x, r = fresh(4, 64), fresh(4, 64)
    want_out, want_r = native(x.clone(), r.clone(), w)
    torch.compile(lambda a, b: op_(a, b, w), backend="aot_eager", fullgraph=True)(x, r)
    assert torch.equal(r, want_r), "declared mutation: under torch.compile the residual was not written"
    close(x, want_out, "declared mutation: under torch.compile, x")
'''

#: Cells an honest learner writes around the answers: none of them is an answer.
AROUND_EX06 = [
    "%matplotlib inline",
    "import matplotlib.pyplot as plt\nax = results.plot.bar(x='case_id', y='candidate_median_us')\nplt.close('all')",
    "print(sorted(name for name in globals() if name.startswith('my_')))",
    ("class Notes:\n    pass\nnotes = Notes()\nsetattr(notes, 'rows', len(results))\ncolumn = 'route'\n"
     "print(getattr(results.iloc[0], column), getattr(torch, 'float16'))"),
]
AFTER_EX06 = ["%timeit -n 1 -r 1 my_classify(results.iloc[0])"]

#: exercise -> (answers by the name they define, cells after the imports, cells after the last answer)
NOTEBOOKS = {
    "ex06": ({"my_classify": CLASSIFY}, AROUND_EX06, AFTER_EX06),
    "ex07": ({"write_pr_note": NOTE}, ["%matplotlib inline"], ["%time note = write_pr_note(results, env)"]),
    "ex12": ({"overlaps": OVERLAPS, "my_inplace_tests": INPLACE_TESTS}, ["%matplotlib inline"], []),
}


def _honest(tmp: Path, exercise: str) -> Path:
    """The solution notebook of ``exercise`` with the honest answers and the cells around them."""
    answers, before, after = NOTEBOOKS[exercise]
    (path,) = (ROOT / "solutions").glob(f"{exercise}_*.ipynb")
    nb = nbformat.read(path, as_version=4)
    last = 0
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and "BEGIN SOLUTION" in cell.source:
            cell.source = answers[re.search(r"^def (\w+)\(", cell.source, re.MULTILINE).group(1)].strip()
            last = i
    for src in reversed(after):
        nb.cells.insert(last + 1, nbformat.v4.new_code_cell(src))
    first = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    for src in reversed(before):
        nb.cells.insert(first + 1, nbformat.v4.new_code_cell(src))
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    out = tmp / path.name
    nbformat.write(nb, out)
    return out


def _check_cells(path: Path) -> dict[str, dict]:
    """Part -> what the notebook's own check cells displayed for it, run as the learner runs them."""
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(path.parent)}}).execute(env=runtime.child_env())
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors, [(o.ename, o.evalue) for o in errors]
    return {o.data[MIME]["part"]: o.data[MIME] for c in nb.cells if CHECK_TAG in c.metadata.get("tags", [])
            for o in c.outputs if MIME in o.get("data", {})}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    out = {}
    for exercise in NOTEBOOKS:
        path = _honest(tmp_path_factory.mktemp(exercise), exercise)
        out[exercise] = (_check_cells(path), cli.grade_notebook(path, timeout=300))
    return out


@pytest.mark.parametrize("exercise", sorted(NOTEBOOKS))
def test_an_honest_answer_gets_full_marks_in_the_check_cell_and_in_the_grader(graded, exercise):
    check_cells, grade = graded[exercise]
    parts = [p for p, _ in EXERCISES[exercise]]
    assert sorted(check_cells) == sorted(parts), check_cells
    assert all(r["passed"] for r in check_cells.values()), {p: r["feedback"][:300] for p, r in check_cells.items()
                                                            if not r["passed"]}
    assert [p.part for p in grade.parts] == parts
    assert grade.earned == grade.points, [(p.part, p.feedback[:300]) for p in grade.parts if not p.passed]


def test_the_check_cell_reads_each_answer_as_last_run(monkeypatch):
    """The check cell reads the kernel's input history, which keeps every run of a cell: a first try that used
    torch's private overlap check, rewritten and run again, is not the answer any more (the grader, which reads the
    file, never saw it)."""
    import types

    import IPython
    import torch

    from fastpath_lib import exercises as ex

    first_try = "def overlaps(a, b):\n    return bool(torch._C._overlaps(a, b))"
    history = ["import torch", first_try, "overlaps(torch.ones(2), torch.ones(2))", OVERLAPS.strip(),
               "ex.check_overlaps(overlaps)"]
    kernel = types.SimpleNamespace(history_manager=types.SimpleNamespace(input_hist_raw=history), user_ns={})
    monkeypatch.setattr(IPython, "get_ipython", lambda: kernel)
    ns = {"torch": torch}
    exec(compile(OVERLAPS, "<cell>", "exec"), ns)  # noqa: S102 - the test's own answer
    (result,) = ex.check_overlaps(ns["overlaps"], show=False)
    assert result.passed, result.feedback


@pytest.mark.parametrize("around", [
    ["for i in range(3)\n    print(i)"],  # an unfinished scratch cell: a syntax error
    ["%%time\nimport math"],  # a cell magic heading the notebook, which IPython reads as taking everything after it
])
def test_the_answer_is_read_whatever_the_cells_around_it(around):
    """A cell that does not parse, or a cell magic, costs the reading of that cell only: the answer's own code is
    still read (an honest reference passes, one that calls the operator it checks is told so)."""
    from fastpath_lib.grading.engine import sources
    from fastpath_lib.grading.rules import borrowed

    honest = "def mine(x, ns, w, eps):\n    x = x.double()\n    return x * torch.rsqrt(x.pow(2).mean(-1, " \
             "keepdim=True) + eps)"
    borrowing = "def mine(x, ns, w, eps):\n    return torch.nn.functional.rms_norm(x, ns, w, eps)"
    forbidden = borrowed.KIT_REFERENCE + borrowed.TORCH_RMS_NORM
    for answer, refused in ((honest, False), (borrowing, True)):
        cells = [*around, "import torch", answer]
        assert "def mine" in sources.closure_source("mine", "\n\n".join(cells))
        with sources.using(cells):
            got = borrowed.source_problem("mine", forbidden)
        assert (got is not None and "rms_norm" in got) if refused else got is None, got


@pytest.mark.parametrize("sentence, claim", [
    ("Under the interpreter a 4096 x 4096 input took about 9 s.", False),  # a shape, not a multiplier
    ("Shapes 512x4096 and 2048 × 4096 × 2 were run.", False),
    ("Whether the kernel is faster is for a GPU run to show.", False),
    ("These timings are not a GPU measurement; no speed-up is claimed.", False),
    ("The kernel is 1.4x faster than F.rms_norm.", True),
    ("It runs 2 × quicker on 4096 x 4096 inputs.", True),
    ("The fast path speeds up every case.", True),
])
def test_a_speed_up_claim_is_a_multiplier_or_a_speed_word_and_a_shape_is_neither(sentence, claim):
    from fastpath_lib.grading.checks.ex07_note import claims_speedup

    assert claims_speedup(sentence) is claim
