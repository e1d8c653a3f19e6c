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

ROOT = Path(__file__).resolve().parents[1]


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

    sys.path.insert(0, str(ROOT / "tests"))
    from test_claims import learner_files, prose

    found = [(p, *c) for p in learner_files() for c in counted_lists(prose(p))]
    wrong = [f"{p.relative_to(ROOT)}: {said!r} is followed by {items}" for p, counts, items, said in found
             if not counts_right(counts, items)]
    assert not wrong, "\n".join(wrong)
    assert len(found) >= 5  # the finder finds the kit's counted tables and lists
