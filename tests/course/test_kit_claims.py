"""Sentences of the learner-facing text about the kit's own behaviour, asserted against what the kit does.

Each test that asserts a sentence is cited by a ``[[claim]]`` of ``docs/claims.toml`` (a ``test`` citation), so
rewording the sentence or changing the behaviour fails one of the two; the count rule covers every sentence that
counts the table or list after it.
"""

from __future__ import annotations

import re
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[2]


# --- exercise 02: the spec rounds where the eager pair rounds ------------------------------------------------------

def ex02_spec() -> str:
    """The plain-torch spec exercise 02 shows (its ``## The spec`` cell), as code."""
    text = (ROOT / "solutions" / "ex02_forward_kernel.py").read_text()
    block = re.search(r"^# ## The spec.*?^# ```python\n(.*?)^# ```", text, flags=re.S | re.M).group(1)
    return "\n".join(line.removeprefix("# ").split("  #")[0] for line in block.splitlines())


def spec_against_eager_pair(dtype: torch.dtype, cols: int, rows: int = 64) -> tuple[bool, int, float]:
    """Run exercise 02's spec row by row and ``F.rms_norm(x + r)``: (``h`` equal to ``x + r``, the number of
    ``y`` elements that differ, the largest relative difference in units of ``dtype``'s epsilon)."""
    g = torch.Generator().manual_seed(cols)
    x, r = (torch.randn(rows, cols, generator=g).to(dtype) for _ in range(2))
    w = (torch.rand(cols, generator=g) + 0.5).to(dtype)
    eps = torch.finfo(torch.float32).eps
    code = compile(ex02_spec(), "ex02 spec", "exec")
    hs, ys = [], []
    for i in range(rows):
        scope = {"torch": torch, "x_row": x[i], "r_row": r[i], "w": w, "eps": eps}
        exec(code, scope)
        hs.append(scope["h"])
        ys.append(scope["y_row"])
    h, y = torch.stack(hs), torch.stack(ys)
    want = F.rms_norm(x + r, [cols], w, eps)
    rel = ((y.float() - want.float()).abs() / want.float().abs().clamp_min(1e-30)).max().item()
    return torch.equal(h, x + r), int((y != want).sum()), rel / torch.finfo(dtype).eps


def test_exercise_02s_spec_differs_from_the_eager_pair_only_in_the_last_bits_of_rstd():
    """ex02: "its `h` is `x + r` bit for bit ... In fp16 and bf16 that moves a rare element by one rounding step
    (at most 1 in 10,000); in fp32 it moves about one element in ten, each by less than 4 fp32 epsilons relative"."""
    assert "1 / torch.sqrt" in ex02_spec() and ".to(x_row.dtype)" in ex02_spec()
    for cols in (33, 781, 4096):
        for dtype in (torch.float16, torch.bfloat16):
            same_h, differ, rel = spec_against_eager_pair(dtype, cols)
            assert same_h, (dtype, cols)
            assert differ <= 64 * cols / 10_000 and rel <= 1.0, (dtype, cols, differ, rel)
        same_h, differ, rel = spec_against_eager_pair(torch.float32, cols)
        assert same_h and 0.05 < differ / (64 * cols) < 0.2 and rel < 4.0, (cols, differ, rel)


# --- lesson 03: where the predicate leaves for the host family's fallback calls --------------------------------------

def _return_line(fn, *args) -> int:
    """The line of ``fn``'s source (1 = its ``def``) from which ``fn(*args)`` returned."""
    import sys

    code, seen = fn.__code__, []

    def trace(frame, event, arg):
        if frame.f_code is code:
            if event == "return":
                seen.append(frame.f_lineno)
            return trace
        return None

    sys.settrace(trace)
    try:
        fn(*args)
    finally:
        sys.settrace(None)
    return seen[-1] - code.co_firstlineno + 1


def _line_after(fn, text: str) -> int:
    """The line (1 = the ``def``) after the first one of ``fn``'s source that contains ``text``."""
    import inspect

    lines = inspect.getsource(fn).splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line) + 1


def test_lesson_03_fallback_calls_leave_at_the_size_tests_and_without_the_interpreter_at_the_first_line():
    """03: "Under the interpreter a CPU call gets past the predicate's first line, and each fallback call timed here
    and in the host family leaves at its size tests ...; a CPU tensor without the interpreter leaves at the first
    line"."""
    from fastpath_lib import runtime
    from fastpath_lib.bench import host
    from fastpath_lib.rmsnorm.predicate import eligible

    size_tests = _line_after(eligible, "if sized and (numel < LEAST_MIN_ROWS")
    first = _line_after(eligible, "if forced or type(input) not in PLAIN_TYPES")
    cases = host.fallback_cases()
    assert len(cases) == 4
    kept = runtime.interpreter_enabled()
    try:
        for interpreted, line in ((True, size_tests), (False, first)):
            runtime._reset_for_tests(interpreted)
            for case in cases:
                x, ns, w = case.build("cpu").args()
                assert _return_line(eligible, x, ns, w, False) == line, (case.id, interpreted)
    finally:
        runtime._reset_for_tests(kept)


# --- a count the text gives is the count of what follows it -------------------------------------------------------

#: A count a sentence gives: a number word or a digit (not "four and a half", which measures).
#: A digit counts only outside a name ("lesson 07", "exercise 12"); a count is followed by what it counts, and a
#: quantity of a unit ("five hours", "four and a half hours", "8 GiB") measures rather than counts.
COUNT = re.compile(r"(?<![Ll]esson )(?<![Ee]xercise )\b(one|two|three|four|five|six|seven|eight|nine|ten|eleven|"
                   r"twelve|\d+)\b(?!\s+(?:and a half\s+)?(?:hours?|minutes?|seconds?|days?|bytes?|[KMG]i?B)\b)"
                   r"(?=\s+[\w*`])", re.IGNORECASE)
NUMBERS = {w: i for i, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve".split())}
#: A sentence that ends in a colon, then a table or a list.
INTRODUCED = re.compile(r"([^\n.:]*):\s*\n(?:\s*\n)?((?:\|.*\n)+|(?:(?:[-*]|\d+\.) .*\n(?:(?: {2,}|\t).*\n)*)+)")


def counted_lists(text: str) -> list[tuple[tuple[int, ...], int, str]]:
    """Each sentence that counts what the table or list right after it holds: (its counts, the rows or items, the
    sentence). The sentence counts right when its first count, or all its counts together ("three honest ways out,
    and one dishonest one"), are the rows or items; a sentence whose counts start at one does not count the list."""
    out = []
    for m in INTRODUCED.finditer(text + "\n"):
        counts = tuple(int(c) if c.isdigit() else NUMBERS[c.lower()] for c in COUNT.findall(m.group(1)))
        if not counts or counts[0] < 2:
            continue
        block = m.group(2)
        if block.lstrip().startswith("|"):
            rows = [line for line in block.splitlines() if not re.fullmatch(r"\s*\|[\s|:-]*\|\s*", line)]
            items = len(rows) - 1  # the header row
        else:
            items = len(re.findall(r"^(?:[-*]|\d+\.) ", block, re.M))
        out.append((counts, items, " ".join(m.group(1).split())))
    return out


def counts_right(counts: tuple[int, ...], items: int) -> bool:
    return items in (counts[0], sum(counts))


def test_the_count_finder_reads_tables_and_lists():
    table = "It writes three things:\n\n| path | who |\n|---|---|\n| a | b |\n| c | d |\n| e | f |\n| g | h |\n"
    assert counted_lists(table) == [((3,), 4, "It writes three things")]
    assert not counts_right((3,), 4)
    (found,) = counted_lists("There are three honest ways, and one dishonest one:\n- a\n  more of a\n- b\n- c\n- d\n")
    assert found[:2] == ((3, 1), 4) and counts_right(*found[:2])
    assert counted_lists("one of them:\n- a\n- b\n") == []
    assert counted_lists("about four and a half hours, in order:\n1. a\n2. b\n") == []
    assert counted_lists("about five hours, in order:\n1. a\n2. b\n") == []


def test_every_count_before_a_table_or_list_in_the_learner_text_is_its_length():
    import sys

    sys.path.insert(0, str(ROOT / "tests" / "course"))
    from test_claims import learner_files, prose

    found = [(p, *c) for p in learner_files() for c in counted_lists(prose(p))]
    wrong = [f"{p.relative_to(ROOT)}: {said!r} is followed by {items}" for p, counts, items, said in found
             if not counts_right(counts, items)]
    assert not wrong, "\n".join(wrong)
    assert len(found) >= 5  # the finder finds the kit's counted tables and lists


# --- lesson 00: what the first cell prints, and what the fast track leaves out ------------------------------------

def _lesson_source(nn: str) -> str:
    """Lesson ``nn``'s text source with the comment marks of its markdown lines taken off."""
    return re.sub(r"^# ?", "", next((ROOT / "notebooks").glob(f"{nn}_*.py")).read_text(), flags=re.M)


def test_every_lessons_first_cell_prints_the_mode_the_versions_and_where_the_tensors_run_a_line_each(capsys):
    """00: "prints the mode, the versions and where the tensors run, a line each (`runtime.lesson_device()`: more
    lines where the versions or the GPU are older than the kit's tested ones)"."""
    import json

    from fastpath_lib import runtime

    said = " ".join(_lesson_source("00").split())
    assert "prints the mode, the versions and where the tensors run, a line each" in said
    kinds = ("mode: ", "versions: ", "tensors on the ")
    kept = runtime.interpreter_enabled()
    try:
        for interpreted in (True, False):
            runtime._reset_for_tests(interpreted)
            assert runtime.lesson_device() == "cpu"
            lines = capsys.readouterr().out.splitlines()
            assert len(lines) == len(kinds) and all(map(str.startswith, lines, kinds)), lines
    finally:
        runtime._reset_for_tests(kept)
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):  # as saved, on this kit's CPU run
        first = next(c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code")
        assert "runtime.lesson_device()" in "".join(first["source"]), path.name
        lines = "".join("".join(o.get("text", "")) for o in first["outputs"]).splitlines()
        assert len(lines) == len(kinds) and all(map(str.startswith, lines, kinds)), (path.name, lines)


def test_lesson_00s_fast_track_and_the_lessons_it_says_it_leaves_out_are_every_lesson():
    """00: "the fast track leaves out lessons 01, 02, 06, 08 and 09 (...)": with the lessons its table links, every
    lesson after 00, each once."""
    text = " ".join(_lesson_source("00").split())
    track = text.split("## The fast track", 1)[1].split("## ", 1)[0]
    left_out = re.search(r"the fast track leaves out lessons ([\d, and]+)", track).group(1)
    named = re.findall(r"\d\d", left_out)
    linked = re.findall(r"\[lesson (\d\d)\]\(\1_", track)
    every = sorted(p.name[:2] for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.py") if not p.name.startswith("00"))
    assert sorted(named + linked) == every, (named, linked)


def _imports(source: str, *, top_level: bool) -> set[str]:
    """The absolute module names ``source`` imports: anywhere (a lesson's cells all run), or at module level only."""
    import ast

    tree = ast.parse(source)
    nodes = tree.body if top_level else list(ast.walk(tree))
    return {a.name for n in nodes if isinstance(n, ast.Import) for a in n.names} | {
        n.module for n in nodes if isinstance(n, ast.ImportFrom) and n.level == 0 and n.module}


def lesson_distributions() -> dict[str, set[str]]:
    """Distribution -> the lessons or kit modules importing it: what the lessons' code imports outside the standard
    library, directly or through the module-level imports of the ``fastpath_lib`` modules it imports."""
    import importlib.metadata
    import importlib.util
    import sys

    dist_of = importlib.metadata.packages_distributions()
    todo = [(m, p.name) for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
            for m in _imports(p.read_text(), top_level=False)]
    seen, out = set(), {}
    while todo:
        name, by = todo.pop()
        top = name.split(".")[0]
        if top == "fastpath_lib":
            parts = name.split(".")
            for i in range(1, len(parts) + 1):
                mod = ".".join(parts[:i])
                spec = None if mod in seen else importlib.util.find_spec(mod)
                seen.add(mod)
                if spec and spec.origin and spec.origin.endswith(".py"):
                    todo += [(m, mod) for m in _imports(Path(spec.origin).read_text(), top_level=True)]
        elif top not in sys.stdlib_module_names and top != "__future__":
            for dist in dist_of.get(top, [top]):
                out.setdefault(dist.lower(), set()).add(by)
    return out


def test_the_hosted_install_lines_install_what_the_lessons_import():
    """00: "install the kit alone (`--no-deps`: the notebook keeps its own torch, triton, numpy, pandas and
    matplotlib ...), and the packages the lessons import beyond those": the second line names exactly the
    distributions the lessons import that are neither the kit's dependencies nor the notebook kernel's own
    (ipykernel's requirements), and the kit's ``dev`` extra installs each of them too."""
    import importlib.metadata
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    name = re.compile(r"[A-Za-z0-9_.-]+")
    deps = {name.match(r)[0].lower() for r in project["dependencies"]}
    dev = {name.match(r)[0].lower() for r in project["optional-dependencies"]["dev"]}
    kernel = {name.match(r)[0].lower() for r in importlib.metadata.requires("ipykernel") or [] if "extra ==" not in r}
    imported = lesson_distributions()
    assert {"torch", "hypothesis"} <= set(imported), imported  # the finder reads the lessons
    need = set(imported) - deps - kernel
    text = " ".join(_lesson_source("00").split())
    lines = re.search(r"``` %pip install --no-deps -e \. %pip install ([\w -]+?) ```", text)
    assert lines, "lesson 00 gives the hosted install as two %pip lines"
    assert set(lines[1].split()) == need, ({k: sorted(imported[k]) for k in need}, lines[1])
    assert need <= dev, f"not in pyproject's dev extra: {need - dev}"
    kept = re.search(r"the notebook keeps its own ([\w, ]+?), whose", text)
    assert kept and set(re.findall(r"\w+", kept[1])) - {"and"} == deps, (kept and kept[1], deps)


# --- a part of another lesson that the text names is in that lesson -----------------------------------------------

#: "the access watch of lesson 04", "lesson 02's compiled code": a named part of another lesson.
XREF = re.compile(r"\b((?:[\w`.-]+\s+)?[\w`.-]+)\s+of\s+lesson\s+(\d\d)\b(?!'s)"
                  r"|\blesson\s+(\d\d)'s\s+([\w`.-]+(?:\s+[\w`.-]+)?)")
_XREF_STOP = {"the", "that", "this", "what", "which", "with", "from", "their", "under", "into"}


def xref_misses(text: str, lesson_text) -> list[str]:
    """Each cross-reference in ``text`` that names a part (two words or more, such as "access watch") whose words
    ``lesson_text(NN)`` does not contain; a single word ("the style of lesson 03") names no part and is skipped."""
    out = []
    for m in XREF.finditer(" ".join(text.split())):
        phrase, nn = (m.group(1), m.group(2)) if m.group(2) else (m.group(4), m.group(3))
        words = [w.strip("`.").lower() for w in re.split(r"[\s-]+", phrase)]
        words = [w for w in words if len(w) > 3 and w not in _XREF_STOP]
        if len(words) >= 2:
            target = " ".join(lesson_text(nn).lower().split())
            missing = [w for w in words if w.rstrip("s") not in target]
            if missing:
                out.append(f"{phrase!r} of lesson {nn}: lesson {nn} never says {missing}")
    return out


def test_the_cross_reference_finder_reads_both_forms():
    lessons = {"04": "guard bands around each input", "02": "the compiled code shows"}.__getitem__
    assert xref_misses("through the access watch of lesson 04, and", lessons) == [
        "'access watch' of lesson 04: lesson 04 never says ['access', 'watch']"]
    assert xref_misses("the guard bands of lesson 04 and lesson 02's compiled code", lessons) == []
    assert len(xref_misses("lesson 02's register table", lessons)) == 1
    assert xref_misses("in the style of lesson 04", lessons) == []


def test_every_part_of_a_lesson_the_learner_text_names_is_in_that_lesson():
    import sys

    sys.path.insert(0, str(ROOT / "tests" / "course"))
    from test_claims import learner_files, prose

    bad = [f"{p.relative_to(ROOT)}: {m}" for p in learner_files() for m in xref_misses(prose(p), _lesson_source)]
    assert not bad, "\n".join(bad)


# --- what CI runs: ci.yml's jobs, each named where the text says what ./kit test is -------------------------------

def test_the_ci_jobs_the_text_names_are_ci_ymls_and_kit_test_is_its_test_job():
    """docs/learners.md, docs/contributing.md and ``kit``: "`./kit test` ... CI's `test` job"; contributing
    names every other job of ci.yml, which `./kit test` does not run."""
    import sys

    import yaml

    sys.path.insert(0, str(ROOT / "tests" / "course"))
    from test_claims import learner_files, prose

    jobs = yaml.safe_load((ROOT / ".github" / "workflows" / "ci.yml").read_text())["jobs"]
    runs = {job: " ".join(s.get("run", "") for s in spec["steps"]) for job, spec in jobs.items()}
    texts = {str(p.relative_to(ROOT)): prose(p) for p in learner_files()} | {"kit": (ROOT / "kit").read_text()}
    named = {(f, j) for f, t in texts.items() for j in re.findall(r"CI's `?([\w-]+)`? job", t)}
    assert {f for f, _ in named} >= {"docs/learners.md", "docs/contributing.md", "kit"}, named  # README links there
    assert all(j in jobs for _, j in named), named
    kit_test = {j for t in texts.values() for j in re.findall(r"\./kit test\b[^\n]*?CI's `?([\w-]+)`? job", t)}
    assert kit_test == {"test"} and "./kit test" in runs["test"], kit_test
    assert "./kit test" in (ROOT / ".ci" / "run").read_text()
    assert not [f for f, t in texts.items() if re.search(r"what CI runs|which is what CI runs", t)]
    contributing = " ".join(texts["docs/contributing.md"].split())
    assert all(f"`{job}`" in contributing for job in jobs), list(jobs)
    assert all("./kit test" not in run for job, run in runs.items() if job != "test")


# --- lesson 06: the replay's blocks against the host table's ------------------------------------------------------

def test_lesson_06s_replay_times_blocks_as_many_and_as_short_as_the_host_tables(monkeypatch):
    """06: "each time here is the fastest of as many blocks as the host table's, each about as long as its block of
    decode calls"."""
    from fastpath_lib.bench import hostmethod, trace

    seen = {}

    def fake(fns, **kw):
        seen.update(kw)
        return {k: {"best_us": 1.0} for k in fns}

    monkeypatch.setattr(trace, "fastest_blocks", fake)
    trace.replay_trace([trace.TraceCall("decode", 1, 4096, torch.bfloat16, 1)])
    blocks, calls = hostmethod.host_blocks(False, None)
    assert seen["blocks"] == blocks and seen["number"] is None, seen
    assert abs(seen["block_s"] - calls * 15e-6) < 1e-12, seen  # ~100 decode calls of ~15 us: a host-table block
    prose = " ".join(_lesson_source("06").split())
    assert "as many blocks as the host table's, each about as long as its block of decode calls" in prose


def test_lesson_06s_saved_decode_times_agree_with_lesson_05s_host_table():
    """06 tells the reader to compare its decode row with lesson 05's host table: the saved runs of both are taken on
    a machine quiet enough that the two agree (within a factor of two), so neither shows a load outlier as the
    dispatch's cost. Re-execute the lesson that disagrees when the machine is quiet."""
    import json

    def printed(nn: str) -> str:
        path = next((ROOT / "notebooks").glob(f"{nn}_*.ipynb"))
        return "".join("".join(o.get("text", "")) for c in json.loads(path.read_text())["cells"]
                       for o in c.get("outputs", []))

    five, six = printed("05"), printed("06")
    calls = int(re.search(r"(\d+) norm calls per decoded token", five).group(1))
    base5 = float(re.search(r"F\.rms_norm directly\s*:\s*([\d.]+) us", five).group(1)) / calls
    extra5 = float(re.search(r"the dispatch's extra\s*:\s*\+?([\d.]+) us", five).group(1)) / calls
    base6, extra6 = map(float, re.search(r"decode, per call: F\.rms_norm ([\d.]+) us, dispatched [\d.]+ us, "
                                         r"the dispatch's extra ([\d.]+) us", six).groups())
    for name, a, b in (("F.rms_norm", base5, base6), ("the dispatch's extra", extra5, extra6)):
        assert 0.5 <= b / a <= 2.0, f"{name}: {a:.1f} us per call in lesson 05, {b:.1f} us in lesson 06"


# --- docs/grading-sandbox.md: host accessors read a tensor past torch's dispatcher ---------------------------------

def test_host_accessors_read_a_tensors_values_without_a_dispatched_op_that_reads_them():
    """grading-sandbox.md: "`Tensor.numpy`, `Tensor.tolist`, `__array__`, `__dlpack__` and pickling (or
    `torch.save`) of a tensor read its memory directly", without torch's dispatcher: under a dispatch mode that records
    every op, each gives back the tensor's values and the dispatcher sees at most ``detach`` (a view, no read)."""
    import io
    import pickle

    import numpy as np
    from torch.utils._python_dispatch import TorchDispatchMode

    class Seen(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops: set[str] = set()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.add(str(func))
            return func(*args, **(kwargs or {}))

    t = torch.arange(6.0).reshape(2, 3)

    def saved():
        buf = io.BytesIO()
        torch.save(t, buf)
        return buf.getvalue()

    reads = {"numpy": lambda: t.numpy(), "tolist": lambda: t.tolist(), "__array__": lambda: t.__array__(),
             "__dlpack__": lambda: t.__dlpack__(), "pickle": lambda: pickle.dumps(t), "torch.save": saved}
    back = {"numpy": np.asarray, "tolist": np.asarray, "__array__": np.asarray, "__dlpack__": torch.from_dlpack,
            "pickle": pickle.loads, "torch.save": lambda b: torch.load(io.BytesIO(b), weights_only=True)}
    for name, read in reads.items():
        with Seen() as seen:
            got = read()
        assert seen.ops <= {"aten.detach.default"}, (name, seen.ops)
        assert torch.equal(torch.as_tensor(np.asarray(back[name](got))), t), name

# --- lesson 05 and exercise 05: the rules that grade a learner's matrix --------------------------------------------

def test_exercise_05_grades_with_the_benchmarks_rules_less_the_passes_one_and_two_of_its_own():
    """05: "Exercise 05 grades your forward-only matrix with this list less its rule on forward and backward cases,
    and two rules of its own"; ex05: "less the one on forward and backward cases ... and two of its own"."""
    import sys

    from fastpath_lib import bench
    from fastpath_lib.grading.checks import ex05_matrix

    sys.path.insert(0, str(ROOT / "tests"))
    from solved import solved

    said = " ".join(_lesson_source("05").split())
    assert "with this list less its rule on forward and backward cases, and two rules of its own" in said
    full = bench.matrix.coverage_rules(bench.load_cases())
    forward = bench.matrix.coverage_rules(bench.load_cases(), passes=False)
    assert [r.topic for r in full if r not in forward] == ["passes"] and len(full) == len(forward) + 1
    results = ex05_matrix._grade(solved("ex05")["my_matrix"])
    lines = [line for r in results for line in r.feedback.splitlines() if not line.startswith(" ")]
    assert all(r.passed for r in results) and len(lines) == len(forward) + 2, lines


# --- lesson 02: which backward rows get one row per program --------------------------------------------------------

def test_lesson_02s_one_row_per_program_is_every_fp32_row_wider_than_8192_columns():
    """02: "except fp32 rows wider than 8192 columns (`BLOCK_SIZE` 16384, 32 warps), which get one row per program"."""
    from fastpath_lib.rmsnorm import launch
    from fastpath_lib.rmsnorm.predicate import MAX_COLS

    said = " ".join(_lesson_source("02").split())
    assert "except fp32 rows wider than 8192 columns (`BLOCK_SIZE` 16384, 32 warps), which get **one row per" in said
    for cols in range(1, MAX_COLS + 1):
        one_row = {size for size in (2, 4) if launch.backward_max_rows(cols, size) == 1}
        assert one_row == ({4} if cols > 8192 else set()), (cols, one_row)
        if cols > 8192:
            assert launch.launch_settings(cols, "backward") == (16384, 32), cols
