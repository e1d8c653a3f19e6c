"""The course as a learner reads it: no project history, every lesson framed the same way, a fast track that
exists, the interpreter's blind spots named where they matter, and the claims the kit's own data can contradict.

* Learner-facing text (lessons, exercises, solutions, the README, ``docs/``, ``upstream/README.md``) speaks of the
  kit as it is: no issue numbers, no "before the rework", no "the kernel as it was", no "now", "no longer", "used
  to", "was fixed" or "a reviewer found" (unless the sentence names the commit or PR it compares with).
* Every lesson opens with what the learner will do, what it needs and how long it takes (its recorded cold run,
  ``docs/lesson_times.json``, plus its words at the record's reading rates), and ends with what to read next (links
  that resolve).
* The fast track in ``00_setup`` names sections that exist and exercises that exist, in four steps, each with its
  lesson's recorded run plus the named sections' reading time.
* Lesson 02 lists what the interpreter cannot show, with the tool for each; the exercises that grade a kernel under
  the interpreter say what they cannot grade.
* The fused op's rounding has one account: the eager pair differs from the contract because it normalizes the
  rounded sum (``F.rms_norm`` of the fp32 sum matches it), and exercise 02's spec rounds where that eager pair
  rounds (``tests/course/test_kit_claims.py`` measures how far apart the two are, per dtype).
* Lesson 07's claim that the kit's neutral and losing cases are all inside the region holds for the matrix.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

nbformat = pytest.importorskip("nbformat")

ROOT = Path(__file__).resolve().parents[2]
LESSONS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
NOTEBOOKS = [*LESSONS, *sorted((ROOT / "solutions").glob("ex*.ipynb")),
             *sorted((ROOT / "exercises").glob("ex*.ipynb"))]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "upstream" / "README.md"]


def _markdown(path: Path) -> str:
    if path.suffix == ".md":
        return path.read_text()
    nb = nbformat.read(path, as_version=4)
    return "\n\n".join(c.source for c in nb.cells if c.cell_type == "markdown")


# --- no project history -------------------------------------------------------------------------------------------

#: Phrases that speak of the kit's past, which a learner has no way to look up. A reference to another project's
#: issue (``vllm-project/vllm#39358``) is a citation, not history, and is not matched.
HISTORY = [
    (r"(?<![\w/.-])issues?\s*#?\d+", "an issue number"),
    (r"(?<![\w/.-])#\d{2,}\b", "an issue or PR number"),
    (r"\bbefore\s+(?:the|this|that|our)\s+(?:[\w-]+\s+){0,3}?(?:rework(?:ed)?|refactor(?:ing)?|redesign|fix|rewrite)\b",
     "a 'before the ... rework'"),
    (r"\b(?:was|were|been)\s+(?:re)?work(?:ed)?\b|\bthe\s+rework\b|\bafter\s+the\s+(?:rework|refactor|fix)\b",
     "a rework"),
    (r"\b(?:kernel|kit|lesson|dispatch|predicate|op|exercise|library)\s+as\s+it\s+(?:was|used\s+to\s+be)\b",
     "'the kernel as it was'"),
    (r"\ban?\s+(?:earlier|older|previous|former)\s+version\s+of\s+(?:this|the)\s+(?:lesson|kit|exercise|kernel)\b",
     "an earlier version of the kit"),
    (r"\b(?:the\s+kit|this\s+lesson|the\s+kernel|the\s+dispatch)\s+(?:used\s+to|has\s+since|no\s+longer)\b",
     "what the kit used to do"),
    (r"\b(?:which|that|what)\s+the\s+kit\s+used\s+(?:before|to)\b", "what the kit used before"),
    (r"\b(?:was|were)\s+(?:then|later|since)\s+(?:changed|revised|rewritten|reworked|fixed)\b|\bwas\s+first\s+declared\b"
     r"|\bhas\s+already\s+been\s+through\b", "the kit's past changes"),
]


#: Words of change: a sentence that uses one speaks of what changed, which in a learner's text is the kit's past,
#: unless the sentence names the change it is measured against (a commit, a PR, a patch, a refactor, an upgrade: the
#: subject of lesson 07 and exercise 11). "now" counts where it stands between a subject and its verb ("the rule now
#: refuses"), not where it starts a sentence ("Now run the cell") or ends one ("the tensors the grader builds now").
CHANGE = [
    (r"(?<=[\w`)] )(?<!\bright )(?<!\buntil )(?<!\bfor )(?<!\bby )(?<!\bfrom )(?<!\bjust )(?<!\band )(?<!\bor )"
     r"(?<!\bbut )(?<!\bthen )now (?!that\b|on\b|and\b|or\b)[a-z]+", "'now' (what changed)"),
    (r"\b[Nn]o longer\b|\b(?:not )?any ?more\b|\bany longer\b", "'no longer'"),
    (r"(?<!\bis )(?<!\bare )(?<!\bbe )(?<!\bbeen )(?<!\bbeing )(?<!\bget )(?<!\bgets )\bused to\b", "'used to'"),
    (r"\b(?:was|were|has been|have been|got)\s+(?:fixed|changed|removed|added|renamed|replaced|dropped|corrected|"
     r"updated|moved)\b", "what was fixed or changed"),
    (r"\b(?:reviewer|review|audit|reader|maintainer)s?(?:'s)?\s+(?:\w+\s+){0,2}?(?:found|noticed|caught|flagged|"
     r"spotted|reported|pointed out)\b", "what a review found"),
    (r"\b(?:previously|formerly|originally|until recently|these days)\b", "the past"),
]
#: What a sentence names when its change is the subject, not the kit's past.
NAMED_CHANGE = re.compile(r"\b(?:commit|PR|pull request|patch|refactor|diff|rebase|upgrade|after it|before it"
                          r"|(?:semantic|behaviou?r) change)\b", re.IGNORECASE)


def _sentences(text: str) -> list[str]:
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    return [s for block in re.split(r"\n\s*\n|\n(?=\s*(?:[-*|>]|\d+\.)\s)", text)
            for s in re.split(r"(?<=[.!?])\s+(?=[A-Z`*(\[])", " ".join(block.split())) if s]


def history_phrases(text: str) -> list[str]:
    found = []
    flat = " ".join(text.split())
    for pattern, what in HISTORY:
        for m in re.finditer(pattern, flat, re.IGNORECASE):
            found.append(f"{what}: ...{flat[max(0, m.start() - 40):m.end() + 20]}...")
    for sentence in _sentences(text):
        if NAMED_CHANGE.search(sentence):
            continue
        for pattern, what in CHANGE:
            if re.search(pattern, sentence, re.IGNORECASE if what != "'now' (what changed)" else 0):
                found.append(f"{what}: {sentence}")
    return found


def test_the_history_finder_catches_the_phrases_the_review_found():
    review = ["Before the dispatch rework, `jvp` of `fastpath_lib.rms_norm` returned a zero tangent",
              "every call went through the custom op (issue 8; that measurement is not kept)",
              "(the rationale above describes the kernel as it was)",
              "Before the dispatch was reworked, every call built its reasons",
              "An earlier version of this lesson timed a whole tiny model",
              "see #123 for the discussion", "Before this rework every call built its reasons",
              "It was first declared when the forward gave each row its own program. The kernel was then changed",
              "blocks as long as a time slice, which the kit used before, swung far",
              "The kernels now map any NaN to the canonical one before rounding",
              "The rule now refuses such a pair, naming both placements",
              "wrong results passed every test written with ordinary values, and a reviewer found them.",
              "the write into `h` is no longer inside the graph", "That is why the 8-byte point was added.",
              "The kit used to time a whole model.", "The kit previously timed a whole model."]
    for sentence in review:
        assert history_phrases(sentence), sentence
    fine = ["an unbacked token count (vllm-project/vllm#39358) must not be guarded",
            "Ask of each test: does it pass on the code as it was *before* the change?",
            "the predicate is checked before the kernel runs; a fix for a bug goes with its test",
            "the write into `h` is not inside the graph", "rows 8 # of 16", "Issue a warning",
            "Now run the cell below.", "Part (a) is asked about pairs of tensors the grader builds now.",
            "That is a behaviour change, not a refactor: calls that used to run `F.rms_norm` may now take the Triton "
            "route", "the tool is used to build the table", "right now the matrix has 30 cases"]
    for sentence in fine:
        assert not history_phrases(sentence), (sentence, history_phrases(sentence))


#: History in text another change owns, found and not yet reworded: (file, a fragment of the sentence). An entry the
#: finder no longer reports fails below: delete it (this list only shrinks).
KNOWN_HISTORY: list[tuple[str, str]] = []


def _unknown_history(path: Path) -> list[str]:
    known = [frag for file, frag in KNOWN_HISTORY if ROOT / file == path]
    return [f for f in history_phrases(_markdown(path)) if not any(frag in f for frag in known)]


def test_the_known_history_is_still_there_to_reword():
    for file, frag in KNOWN_HISTORY:
        assert any(frag in f for f in history_phrases(_markdown(ROOT / file))), (
            f"{file} no longer reads {frag!r} as history: delete it from KNOWN_HISTORY")


@pytest.mark.parametrize("path", NOTEBOOKS + PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_learner_text_speaks_of_the_kit_as_it_is(path):
    found = _unknown_history(path)
    assert not found, f"{path.relative_to(ROOT)}: history belongs in git, not in a learner's text:\n" + \
        "\n".join(found)


# --- every lesson: what, needs, time; read next -------------------------------------------------------------------

def _cells(path: Path):
    return nbformat.read(path, as_version=4).cells


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name)
def test_every_lesson_opens_with_what_it_asks_and_ends_with_what_to_read_next(path):
    cells = _cells(path)
    first = cells[0]
    assert first.cell_type == "markdown" and first.source.startswith(f"# {path.name[:2]} · "), first.source[:80]
    for label in ("**What you will do**: ", "**What you need**: "):
        assert label in first.source, f"{path.name}: the first cell must say {label!r}"
    m = re.search(r"\*\*Time\*\*: about (\d+) minutes\.", first.source)
    assert m, f"{path.name}: the first cell must say '**Time**: about N minutes.'"

    last = cells[-1]
    assert last.cell_type == "markdown" and last.source.startswith("## Read next"), f"{path.name}: {last.source[:80]}"
    links = re.findall(r"\]\(([^)#\s]+)[^)]*\)", last.source)
    assert links, f"{path.name}: 'Read next' links nothing"
    for link in links:
        assert (path.parent / link).resolve().exists(), f"{path.name}: 'Read next' links a missing file {link}"


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name)
def test_every_lessons_first_code_cell_opts_in_to_the_interpreter_and_says_so(path):
    """What lesson 00 says of every lesson's first cell: it imports fastpath_lib, calls use_interpreter(), prints."""
    first = next(c for c in _cells(path) if c.cell_type == "code")
    assert "import fastpath_lib" in first.source and "fastpath_lib.use_interpreter()" in first.source, path.name
    assert any(o.get("output_type") == "stream" and o.get("text", "").strip() for o in first.outputs), path.name


#: A cold run of each lesson (tools/time_lessons.py) and the reading rates the stated times assume.
TIMES = ROOT / "docs" / "lesson_times.json"
#: Lessons whose stated time another change owns and the record contradicts: each must still be off (strict xfail),
#: so the list only shrinks.
TIMES_OWNED_ELSEWHERE: set[str] = set()
#: How far a stated time (a multiple of 5 minutes) may be from the record: the nearest multiple is at most 2.5 away.
STATED_SLACK_MIN = 3.0


def _lesson_words(path: Path) -> dict[str, int]:
    """The words tools/time_lessons.py's one rule counts (a rendered Markdown output by its text in sight)."""
    return _time_lessons().words(nbformat.read(path, as_version=4))


def expected_minutes(path: Path, record: dict) -> float:
    """Minutes a lesson takes: its recorded cold run plus its words at the record's reading rates."""
    rate = record["reading_words_per_minute"]
    words = _lesson_words(path)
    return record["lessons"][path.stem]["wall_s"] / 60 + sum(words[k] / rate[k] for k in words)


def stated_minutes(path: Path) -> int:
    return int(re.search(r"\*\*Time\*\*: about (\d+) minutes\.", _cells(path)[0].source).group(1))


@pytest.mark.parametrize("path", [pytest.param(p, marks=pytest.mark.xfail(strict=True, reason="owned elsewhere"))
                                  if p.stem in TIMES_OWNED_ELSEWHERE else p for p in LESSONS], ids=lambda p: p.name)
def test_each_lessons_stated_time_is_its_recorded_run_plus_reading(path):
    import json

    record = json.loads(TIMES.read_text())
    assert path.stem in record["lessons"], f"{path.name} has no cold run in {TIMES.name}: run tools/time_lessons.py"
    stated, expected = stated_minutes(path), expected_minutes(path, record)
    # the nearest multiple of 5, with half a minute either side of the midpoint so that a few words do not flip it
    assert stated % 5 == 0 and abs(stated - expected) <= STATED_SLACK_MIN, (
        f"{path.name} says about {stated} minutes; its cold run and reading come to {expected:.0f}")


@functools.cache
def _time_lessons():
    import importlib.util

    spec = importlib.util.spec_from_file_location("time_lessons", ROOT / "tools" / "time_lessons.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_reading_time_counts_a_rendered_outputs_text_in_sight():
    """A rendered Markdown output (lesson 07's PR note) counts the words a learner sees, not its repr; a folded
    ``<details>`` block counts its summary only; an HTML output counts its text where its plain form is a repr."""
    count = _time_lessons().output_words
    md = "# Note\n\n| case | route |\n|---|---|\n| decode | fallback |\n\n<details><summary>Raw rows</summary>\n\n" \
         "| a | b |\n|---|---|\n| 1 | 2 |\n</details>\n"
    assert count({"output_type": "display_data",
                  "data": {"text/markdown": md, "text/plain": "<IPython.core.display.Markdown object>"}}) == 7
    assert count({"output_type": "display_data", "data": {"text/html": "<p>two <b>words</b></p>",
                                                          "text/plain": "<IPython.core.display.HTML object>"}}) == 2
    assert count({"output_type": "execute_result", "data": {"text/html": "<table/>", "text/plain": "a b c"}}) == 3
    assert count({"output_type": "stream", "text": "one two"}) == 2


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name)
def test_each_lessons_recorded_cold_run_ran_its_code_as_it_is(path):
    """A lesson's recorded run is of its code as it is: the record keeps the digest of the code cells it ran, and a
    lesson whose code changed since (a cell added, removed or edited) must be run again."""
    import json

    record = json.loads(TIMES.read_text())["lessons"].get(path.stem, {})
    digest = _time_lessons().code_digest(nbformat.read(path, as_version=4))
    assert record.get("code_digest") == digest, (
        f"{path.name}'s code is not the code its cold run in {TIMES.name} ran: run tools/time_lessons.py {path.name}")


def test_the_learners_page_gives_the_recorded_cold_runs():
    import json

    runs = {k: v["wall_s"] for k, v in json.loads(TIMES.read_text())["lessons"].items()}
    text = " ".join((ROOT / "docs" / "learners.md").read_text().split())
    m = re.search(r"took from (\d+) s \(lesson (\d\d)\) to (\d+) minutes \(lesson (\d\d)\b", text)
    assert m, "docs/learners.md must give the fastest and slowest recorded cold run"
    fastest, slowest = min(runs, key=runs.get), max(runs, key=runs.get)
    assert (int(m.group(1)), m.group(2)) == (round(runs[fastest]), fastest[:2]), (m.group(0), fastest, runs[fastest])
    assert (int(m.group(3)), m.group(4)) == (round(runs[slowest] / 60), slowest[:2]), (m.group(0), slowest)


def course_length(minutes: int) -> str:
    """``minutes`` as the front door words it: the nearest half hour, ``"about four and a half hours"``."""
    halves = round(minutes / 30)
    words = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
    return f"about {words[halves // 2]}{' and a half' if halves % 2 else ''} hours"


def test_lesson_times_add_up_to_the_course_length_the_front_door_gives():
    total = sum(stated_minutes(p) for p in LESSONS)
    said = course_length(total)
    for page in (ROOT / "README.md", ROOT / "notebooks" / "00_setup.py"):
        text = " ".join(page.read_text().replace("# ", " ").split())
        found = re.findall(r"about \w+(?: and a half)? hours", text)
        assert found and set(found) == {said}, f"{page.name} says {found}; the lessons take {total} minutes: {said}"


# --- the one-hour fast track --------------------------------------------------------------------------------------

def _fast_track_rows():
    setup = next(p for p in LESSONS if p.name.startswith("00_"))
    cell = next(c.source for c in _cells(setup) if c.cell_type == "markdown"
                and c.source.startswith("## The fast track"))
    return setup, [line for line in cell.splitlines() if re.match(r"\| \d\. ", line)]


def _section_words(path: Path, headings: list[str]) -> dict[str, int]:
    """The words of a lesson's ``## `` sections named ``headings``: markdown, code and printed output, as
    :func:`_lesson_words` counts them, from each heading to the next."""
    out, current = {"markdown": 0, "code": 0, "output": 0}, None
    for cell in _cells(path):
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                current = line[3:].strip() if line.startswith("## ") else current
                out["markdown"] += len(line.split()) if current in headings else 0
        elif current in headings:
            out["code"] += len(cell.source.split())
            out["output"] += sum(_time_lessons().output_words(o) for o in cell.get("outputs", []))
    return out


def test_the_fast_track_names_sections_and_exercises_that_exist_and_gives_their_recorded_times():
    """Each step's *run and read* minutes are its lesson's recorded cold run plus the words of the sections it
    names at the record's reading rates, to the nearest 5 as a lesson's stated time is; no exercise time is stated."""
    import json

    record = json.loads(TIMES.read_text())
    rate = record["reading_words_per_minute"]
    setup, rows = _fast_track_rows()
    steps = ["declare the region", "test its edges", "run the predeclared matrix", "write the note"]
    assert len(rows) == len(steps), rows
    for row, step in zip(rows, steps):
        _, what, read, do, time, _ = (c.strip() for c in row.split("|"))
        assert step in what.lower(), (step, what)
        lesson = setup.parent / re.search(r"\]\(([^)]+\.ipynb)\)", read).group(1)
        assert lesson.exists(), lesson
        headings = {line[3:].strip() for c in _cells(lesson) if c.cell_type == "markdown"
                    for line in c.source.splitlines() if line.startswith("## ")}
        named = re.findall(r'"([^"]+)"', read)
        assert named, row
        for section in named:
            assert section in headings, f"{lesson.name} has no section {section!r}"
        exercise = (setup.parent / re.search(r"\]\(([^)]+\.ipynb)\)", do).group(1)).resolve()
        assert exercise.exists() and exercise.parent.name == "exercises", exercise
        words = _section_words(lesson, named)
        expected = record["lessons"][lesson.stem]["wall_s"] / 60 + sum(words[k] / rate[k] for k in words)
        stated = int(re.fullmatch(r"(\d+) min", time).group(1))
        assert stated % 5 == 0 and abs(stated - expected) <= STATED_SLACK_MIN, (step, stated, round(expected, 1))
    header = next(c.source for c in _cells(setup) if c.source.startswith("## The fast track")).split("| step |")[1]
    assert header.split("\n")[0].split("|")[-2].strip() == "run and read", header.split("\n")[0]


def fast_track_times_outside_lesson_00(readme: str) -> list[str]:
    """The times the README's fast-track passage (from "**The fast track**" to "**The full course**") states: lesson
    00 owns the fast track's times, and the README links to it rather than repeat them."""
    passage = readme.split("**The fast track**", 1)[1].split("**The full course**", 1)[0]
    return re.findall(r"\b\d+(?:\.\d+)?\s*(?:min(?:ute)?s?|h(?:ours?)?)\b", passage)


def test_the_readme_leaves_the_fast_tracks_times_to_lesson_00():
    readme = (ROOT / "README.md").read_text()
    assert not fast_track_times_outside_lesson_00(readme), fast_track_times_outside_lesson_00(readme)
    assert "(notebooks/00_setup.ipynb)" in readme.split("**The full course**", 1)[0], "link lesson 00's fast track"
    assert fast_track_times_outside_lesson_00("**The fast track** ... 15 minutes a step ... **The full course**")


def test_the_fast_track_grades_the_exercises_it_names():
    setup, rows = _fast_track_rows()
    named = {Path(re.search(r"\]\(([^)]+\.ipynb)\)", row.split("|")[3]).group(1)).name for row in rows}
    cell = next(c.source for c in _cells(setup) if c.cell_type == "markdown"
                and c.source.startswith("## The fast track"))
    graded = set(re.findall(r"exercises/(ex\d\d_\w+\.ipynb)", cell.split("```bash")[1]))
    assert graded == named, (graded, named)


# --- what the interpreter cannot show -----------------------------------------------------------------------------

def test_lesson_02_lists_what_the_interpreter_cannot_show_with_the_tool_for_each():
    lesson = next(p for p in LESSONS if p.name.startswith("02_"))
    cell = next(c.source for c in _cells(lesson) if c.cell_type == "markdown"
                and "## What the interpreter cannot show" in c.source)
    section = cell[cell.index("## What the interpreter cannot show"):]
    rows = {line.split("|")[1].strip(): line.split("|")[3] for line in section.splitlines()
            if line.startswith("| ") and not line.startswith("| property")}
    want = {"races": "compute-sanitizer", "offset overflow": "compute-sanitizer", "timing": "profiler",
            "occupancy": "compiled-facts check", "spills": "compiled-facts check"}
    for prop, tool in want.items():
        row = next((v for k, v in rows.items() if prop in k), None)
        assert row is not None, f"lesson 02 does not list {prop}"
        assert tool in row, f"lesson 02: {prop} without {tool}: {row}"
    assert "2³¹" in next(k for k in rows if "overflow" in k)


@pytest.mark.parametrize("name", ["ex02_forward_kernel", "ex08_capstone", "ex12_fused_inplace_contract"])
def test_exercises_that_grade_under_the_interpreter_say_what_they_cannot_grade(name):
    for folder in ("solutions", "exercises"):
        text = " ".join(_markdown(ROOT / folder / f"{name}.ipynb").split())
        m = re.search(r"\*\*What (?:this|these) (?:check|checks|exercise) cannot grade\.\*\*([^*]+)", text)
        assert m, f"{folder}/{name}: no 'What this check cannot grade'"
        assert "races" in m.group(1).lower() and "What the interpreter cannot show" in m.group(1), m.group(1)


# --- one account of the fused op's rounding -----------------------------------------------------------------------

def _pair_inputs(dtype):
    g = torch.Generator().manual_seed(4)
    x, r = (torch.randn(16, 256, generator=g).to(dtype) for _ in range(2))
    return x, r, torch.ones(256, dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_the_eager_pair_differs_from_the_contract_because_it_normalizes_the_rounded_sum(dtype):
    from fastpath_lib.fused import reference
    from fastpath_lib.rmsnorm.limits import default_eps

    x, r, w = _pair_inputs(dtype)
    eps = default_eps(dtype)
    want, _ = reference.native(x, r, w)
    of_fp32_sum = F.rms_norm(x.float() + r.float(), [256], w.float(), eps).to(dtype)
    of_rounded_sum = F.rms_norm(x + r, [256], w, eps)
    assert torch.equal(of_fp32_sum, want)  # F.rms_norm's arithmetic is not the cause
    assert (of_rounded_sum != want).float().mean() > 0.05  # which sum is normalized is


def test_lesson_08_prints_the_rounding_account_it_gives():
    lesson = next(p for p in LESSONS if p.name.startswith("08_"))
    cell = next(c for c in _cells(lesson) if c.cell_type == "code" and "prec = pd.DataFrame" in c.source)
    out = "".join(o.get("data", {}).get("text/plain", "") for o in cell.outputs)
    lines = out.splitlines()

    def first_column(header: str) -> list[str]:  # pandas wraps wide frames: the block whose header starts with it
        at = next(i for i, line in enumerate(lines) if line.strip().startswith(header))
        return [line.split()[1] for line in lines[at + 1:at + 4]]

    assert first_column("F.rms_norm(fp32 sum): differ") == ["0.0%"] * 3, out
    assert "0.0%" not in first_column("add, F.rms_norm: differ")[:2], out  # the random rows
    prose = " ".join(_markdown(lesson).split())
    assert "*which sum it normalizes*" in prose and "also multiplies by the weight in fp32" not in prose
    from fastpath_lib.fused import reference
    x, r, w = _pair_inputs(torch.bfloat16)
    assert torch.equal(F.rms_norm(x.float() + r.float(), [256], w.float(), 1e-6).to(x.dtype),
                       reference.native(x, r, w, 1e-6)[0])


# --- lesson 07: the kit's non-improving cases are inside the region -----------------------------------------------

def test_the_kits_neutral_and_losing_cases_are_all_inside_the_region():
    import fastpath_lib
    from fastpath_lib import bench
    from fastpath_lib.rmsnorm.predicate import DEFAULT_CUDA_MIN_ROWS, MAX_COLS

    fastpath_lib.use_interpreter()
    cases = [c for c in bench.load_cases() if c.expected in ("neutral", "loss")]
    assert len(cases) >= 2
    for c in cases:
        assert c.shape[0] >= DEFAULT_CUDA_MIN_ROWS and c.shape[-1] <= MAX_COLS, c.id
        x, ns, w = c.spec(quick=True).build(seed=0, device="cpu").args()
        assert fastpath_lib.explain(x, ns, w).route == "triton", c.id
    prose = " ".join(_markdown(next(p for p in LESSONS if p.name.startswith("07_"))).split())
    assert "The kit's own neutral and losing cases are all inside the region" in prose


# --- lesson 01: what the tolerances are, in units of the last place -----------------------------------------------

def test_lesson_01s_tolerance_sentence_matches_the_table():
    from fastpath_lib import testing

    ulps = {d: rtol / torch.finfo(d).eps for d, (_, rtol) in testing.TOLERANCES.items()}
    assert ulps[torch.float16] == 1 and ulps[torch.bfloat16] == 1 and ulps[torch.float32] > 1, ulps
    prose = " ".join(_markdown(next(p for p in LESSONS if p.name.startswith("01_"))).split())
    assert "one unit in the last place (the dtype's machine epsilon) for fp16 and bf16. For fp32 it is wider" in prose


# --- lesson 00: which lessons give evidence for which claim ------------------------------------------------------

def test_lesson_00s_sentence_on_the_three_claims_says_what_its_table_shows():
    prose = " ".join(_markdown(next(p for p in LESSONS if p.name.startswith("00_"))).split())
    rows = re.findall(r"\| \*\*(\w+)\*\* \|[^|]*\| ([\d, ]+) \|", prose)
    assert [claim for claim, _ in rows] == ["Semantic", "Mechanism", "Performance"], rows
    claims_of = {p.name[:2]: [c for c, lessons in rows if p.name[:2] in lessons.split(", ")] for p in LESSONS}
    by_count = {k: [n for n, c in claims_of.items() if len(c) == k] for k in (0, 2, 3)}
    said = re.search(r"[Ll]essons ([\d and,]+?) serve two claims, lessons? (.+?) all three, and lessons? (.+?) none of "
                     r"the three", prose)
    assert said, "the sentence before the table names the lessons that serve two claims, all three, and none"
    named = {2: re.findall(r"\d\d", said[1]), 3: re.findall(r"\b\d\d\b", said[2]), 0: re.findall(r"\b\d\d\b", said[3])}
    assert named == by_count, (said[0], by_count)


# --- lesson 05: what the peer's CSV shows -------------------------------------------------------------------------

def test_lesson_05s_reading_of_the_peers_forward_holds_in_the_csv():
    import pandas as pd

    raw = pd.read_csv(ROOT / "data" / "liger_rms_norm_a100.csv")
    fwd = raw[(raw.metric_name == "speed") & (raw.kernel_operation_mode == "forward")]
    liger = fwd[fwd.kernel_provider == "liger"].set_index("x_value")
    hf = fwd[fwd.kernel_provider == "huggingface"].set_index("x_value")
    # "20-80 % bands that never overlap"
    assert (liger.y_value_80 < hf.y_value_20).all()
    # "faster per byte as rows widen, reaching its highest GB/s at 32768 columns" (bytes grow with the width)
    per_column = (liger.y_value_50 / liger.index).sort_index()
    assert per_column.is_monotonic_decreasing and per_column.idxmin() == 32768
    prose = " ".join(_markdown(next(p for p in LESSONS if p.name.startswith("05_"))).split())
    assert "20-80 % bands that never overlap" in prose and "reaching its highest GB/s at 32768 columns" in prose


def test_lesson_05s_reading_of_the_peers_full_mode_holds_in_the_csv():
    from fastpath_lib.bench import peer

    liger_us = peer.peer_speedups(peer.load_peer()).set_index(["mode", "cols"])["liger_us"]
    flat = liger_us.loc["full"].loc[:8192]
    alone = liger_us["forward", 1024] + liger_us["backward", 1024]
    # "stays flat from 1024 to 8192 columns, at about 2.7 times what its forward and backward timed alone add up to"
    assert flat.max() / flat.min() < 1.1 and 2.65 <= flat.min() / alone and flat.max() / alone < 2.75, (flat, alone)
    prose = " ".join(_markdown(next(p for p in LESSONS if p.name.startswith("05_"))).split())
    assert "stays flat from 1024 to 8192 columns, at about 2.7 times what its forward and backward" in prose


# --- "N of the M cases": counts the lessons type, against the matrix ----------------------------------------------

def test_case_counts_in_the_lessons_prose_are_the_matrix_s():
    from fastpath_lib import bench

    total = len(bench.load_cases())
    seen = 0
    for path in LESSONS:
        prose = " ".join(_markdown(path).split())
        for n, m in re.findall(r"\b(\d+) of the (\d+) cases\b", prose):
            seen += 1
            assert int(m) == total, f"{path.name}: '{n} of the {m} cases', but the matrix has {total}"
            picks = [c.source for c in _cells(path) if c.cell_type == "code" and "bench.run_matrix(" in c.source]
            ids = {i for src in picks for i in re.findall(r'"(\w+)"', src) if i in {c.id for c in bench.load_cases()}}
            assert int(n) == len(ids), f"{path.name}: '{n} of the {m} cases', but its quick run picks {len(ids)}"
            # "N of the M cases, at least one of each expected outcome (win, ...)": the picks cover every outcome the
            # matrix declares, and the list names exactly those
            for named in re.findall(rf"\b{n} of the {m} cases, at least one of each expected outcome \(([^)]*)\)",
                                    prose):
                declared = {c.expected for c in bench.load_cases()}
                picked = {c.expected for c in bench.load_cases() if c.id in ids}
                assert set(re.split(r",\s*", named)) == declared, f"{path.name}: names {named}, matrix has {declared}"
                assert picked == declared, f"{path.name}: its quick run picks no {sorted(declared - picked)} case"
    assert seen >= 2


# --- lesson 06: the request's call counts, from the trace --------------------------------------------------------

def test_lesson_06s_call_counts_are_the_traces():
    from fastpath_lib.bench import trace

    lesson = next(p for p in LESSONS if p.name.startswith("06_"))
    source = next(c.source for c in _cells(lesson) if c.cell_type == "code" and "serving_trace(" in c.source)
    args = dict(re.findall(r"(\w+)=(\d+)", source[source.index("serving_trace("):]))
    calls = trace.serving_trace(**{k: int(v) for k, v in args.items()})
    decode = sum(c.count for c in calls if c.phase == "decode" and c.rows == 1)
    total = sum(c.count for c in calls)
    prose = " ".join(_markdown(lesson).split())
    assert f"every one of the {decode} decode calls" in prose, decode
    assert f"{round(100 * decode / total)} % of the calls are decode calls of one row" in prose, (decode, total)
