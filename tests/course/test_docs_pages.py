"""The README is a short front door, every page it leads to exists, and the commands the pages show are real.

A link that points nowhere, a ``./kit`` or ``python -m fastpath_lib`` command that no longer exists, or a flag the
command does not take fails here, not in a reader's terminal.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import pytest

from fastpath_lib.__main__ import COMMANDS

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = sorted((ROOT / "docs").glob("*.md"))
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"```(?:bash|sh|shell)\n(.*?)```", re.S)
KIT_CMD = re.compile(r"(?:^|[\s`(])\./kit\s+([a-z-]+)((?:\s+[^\s`#|;&]+)*)")
PY_CMD = re.compile(r"python -m fastpath_lib\s+([a-z]+)((?:\s+[^\s`#|;&]+)*)")


def _words(text: str) -> int:
    return len(re.findall(r"\S+", text))


def _kit_commands() -> set[str]:
    body = (ROOT / "kit").read_text().split('case "$cmd" in', 1)[1]
    return set(re.findall(r"^\s*([a-z-]+)\)", body, re.M))


def _source_of(command: str) -> str:
    module = COMMANDS[command][0]
    spec = importlib.util.find_spec(module)
    assert spec and spec.origin, module
    text = Path(spec.origin).read_text()
    if command == "bench":  # the matrix command's flags are declared beside it
        text += (ROOT / "fastpath_lib" / "bench" / "cli.py").read_text()
    return text


def test_readme_is_a_short_front_door():
    text = README.read_text()
    assert _words(text) <= 1000, f"README.md has {_words(text)} words; move detail to docs/"
    for page in PAGES:
        assert f"(docs/{page.name})" in text, f"README.md does not link docs/{page.name}"


@pytest.mark.parametrize("page", [README, *PAGES], ids=lambda p: p.name)
def test_links_resolve(page: Path):
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = (page.parent / target.split("#", 1)[0]).resolve()
        assert path.exists(), f"{page.name} links {target}, which does not exist"


def _commands(text: str) -> list[str]:
    blocks = FENCE.findall(text)
    inline = re.findall(r"`([^`\n]*(?:\./kit|python -m fastpath_lib)[^`\n]*)`", text)
    return [line for block in blocks for line in block.splitlines()] + inline


@pytest.mark.parametrize("page", [README, *PAGES], ids=lambda p: p.name)
def test_commands_shown_exist(page: Path):
    kit = _kit_commands()
    for line in _commands(page.read_text()):
        code = line.split(" # ", 1)[0]
        for sub, _ in KIT_CMD.findall(code):
            assert sub in kit, f"{page.name}: ./kit {sub} is not a ./kit command ({sorted(kit)}): {line}"
        for sub, args in PY_CMD.findall(code):
            assert sub in COMMANDS, f"{page.name}: python -m fastpath_lib {sub} does not exist: {line}"
            source = _source_of(sub)
            for flag in re.findall(r"(?<![\w-])(--[a-z][\w-]*)", args):
                assert f'"{flag}"' in source or f"'{flag}'" in source, (
                    f"{page.name}: {sub} takes no {flag}: {line}")
        for tool in re.findall(r"\b(tools/[\w]+\.py)", code):
            assert (ROOT / tool).exists(), f"{page.name}: {tool} does not exist: {line}"


def fence_problems(text: str) -> list[str]:
    """Code fences that do not pair up: each block opens with ```` ```lang ```` and closes with a bare ```` ``` ````."""
    out, open_at = [], None
    for n, line in enumerate(text.splitlines(), 1):
        m = re.match(r"\s*```(.*)$", line)
        if not m:
            continue
        info = m.group(1).strip()
        if open_at is None:
            if not info:
                out.append(f"line {n}: a block opens without a language (or its opening fence is missing)")
            open_at = n
        elif info:
            out.append(f"line {n}: ```{info} opens a block inside the one opened at line {open_at}")
        else:
            open_at = None
    if open_at is not None:
        out.append(f"line {open_at}: the block opened here never closes")
    return out


@pytest.mark.parametrize("page", [README, *PAGES, ROOT / "upstream" / "README.md"], ids=lambda p: p.name)
def test_code_fences_pair_up(page: Path):
    problems = fence_problems(page.read_text())
    assert not problems, f"{page.relative_to(ROOT)}: the page renders wrongly from here on:\n" + "\n".join(problems)


def test_the_fence_check_finds_a_missing_opening_and_closing():
    assert fence_problems("## Setting up\n\n./kit lab\n```\n\ntext\n\n```bash\n./kit test\n```\n")
    assert fence_problems("```bash\n./kit lab\n")
    assert not fence_problems("```bash\n./kit lab\n```\n\n```python\nx = 1\n```\n")


def test_the_checks_find_a_broken_command_and_link(tmp_path: Path):
    page = tmp_path / "page.md"
    page.write_text("```bash\n./kit lob\n```\nSee [x](nowhere.md).\n")
    with pytest.raises(AssertionError, match="not a ./kit command"):
        test_commands_shown_exist(page)
    with pytest.raises(AssertionError, match="nowhere.md"):
        test_links_resolve(page)
    page.write_text("`python -m fastpath_lib grade --no-such-flag x`\n")
    with pytest.raises(AssertionError, match="takes no --no-such-flag"):
        test_commands_shown_exist(page)


AUTOGRADER = ROOT / "tools" / "autograder"
SPAN = re.compile(r"`([^`\s]+)`")
KIT_PATH = re.compile(r"^(?:\./)?[\w.-]+(?:/[\w.-]+)+/?$")


def _script_command(script: Path) -> str:
    """The command a shipped shell script ends by running (its ``exec`` line, continuation lines joined)."""
    text = re.sub(r"\\\n\s*", " ", script.read_text())
    return next(" ".join(line.split()) for line in text.splitlines() if line.startswith("exec "))


def _shown_commands(text: str) -> list[str]:
    """Every command a page shows in code (fenced blocks, continuation lines joined; inline spans)."""
    blocks = [re.sub(r"\\\n\s*", " ", b) for b in re.findall(r"```(?:bash|sh|shell)\n(.*?)```", text, re.S)]
    return [" ".join(line.split()) for b in blocks for line in b.splitlines()] + re.findall(r"`([^`\n]+)`", text)


def run_autograder_problems(pages: list[Path]) -> list[str]:
    """Every command a page shows for Gradescope's run (one that names ``/autograder/`` or ``$AG/`` and runs
    ``fastpath_lib``) must be the one ``tools/autograder/run_autograder`` runs, and course-release.md must show it."""
    shipped = _script_command(AUTOGRADER / "run_autograder")
    out = []
    for page in pages:
        for cmd in _shown_commands(page.read_text()):
            if "fastpath_lib" in cmd and re.search(r"/autograder/|\$AG/", cmd) and cmd != shipped:
                out.append(f"{page.name} shows {cmd!r}; run_autograder runs {shipped!r}")
    if not any(cmd == shipped for cmd in _shown_commands((ROOT / "docs" / "course-release.md").read_text())):
        out.append(f"course-release.md does not show run_autograder's command {shipped!r}")
    return out


def test_the_run_autograder_command_the_docs_show_is_the_scripts(tmp_path: Path):
    assert not run_autograder_problems([README, *PAGES]), run_autograder_problems([README, *PAGES])
    page = tmp_path / "page.md"
    page.write_text("runs `python -m fastpath_lib grade --format gradescope /autograder/submission/`\n")
    assert run_autograder_problems([page]), "a command other than the script's is not noticed"


def missing_kit_paths(pages: list[Path]) -> list[str]:
    """Paths in code spans whose first folder is one of the kit's (its root, ``fastpath_lib/``, the autograder's
    folder) and that do not exist there. Paths the upstream notes name are another project's tree, not the kit's."""
    roots = (ROOT, ROOT / "fastpath_lib", AUTOGRADER)
    upstream = {s for note in (ROOT / "upstream").glob("*.md") for s in SPAN.findall(note.read_text())}
    out = []
    for page in pages:
        for span in SPAN.findall(page.read_text()):
            path = span.removeprefix("./")
            if not KIT_PATH.match(span) or span in upstream:
                continue
            if any((r / path.split("/")[0]).exists() for r in roots) and not any((r / path).exists() for r in roots):
                out.append(f"{page.name} names {span}, which is not in the kit")
    return out


def test_every_kit_path_the_docs_name_exists(tmp_path: Path):
    assert not missing_kit_paths([README, *PAGES]), missing_kit_paths([README, *PAGES])
    page = tmp_path / "page.md"
    page.write_text("| `grading/rules/ex04_boundary.py` | `grading/checks/ex04_boundary.py` | `OUT/student/` |\n")
    assert missing_kit_paths([page]) == ["page.md names grading/rules/ex04_boundary.py, which is not in the kit"]


def test_setup_sh_says_what_run_autograder_does_without_bubblewrap():
    """run_autograder grades only in the sandbox by default; setup.sh's message for a missing bubblewrap says so."""
    shipped = _script_command(AUTOGRADER / "run_autograder")
    default = re.search(r'--isolation "\$\{FASTPATH_ISOLATION:-(\w+)\}"', shipped)
    message = next(line for line in (AUTOGRADER / "setup.sh").read_text().splitlines() if "no bubblewrap" in line)
    assert default and default.group(1) == "bwrap"
    assert "not graded" in message and "unisolated" not in message.split("FASTPATH_ISOLATION")[0], message


def test_grade_takes_a_folders_exnn_notebooks_and_exits_2_without_the_sandbox(tmp_path: Path, monkeypatch, capsys):
    """course-release.md: given a folder, grade takes the exNN notebooks directly in it; it exits 2, grading
    nothing, when --isolation bwrap cannot start the sandbox."""
    from fastpath_lib.grading.engine import cli

    for name in ("ex01_reference.ipynb", "mine.ipynb", "sub/ex02_kernel.ipynb"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("{}")
    assert cli._expand([str(tmp_path)]) == [tmp_path / "ex01_reference.ipynb"]
    text = " ".join((ROOT / "docs" / "course-release.md").read_text().split())
    assert "whose names start `exNN` (`ex01_reference.ipynb`), not subfolders or other names" in text
    monkeypatch.setattr(cli, "_sandbox_problem", lambda isolation: (False, "bubblewrap (bwrap) is not installed"))
    monkeypatch.setattr(cli, "grade_notebooks", lambda *a, **k: pytest.fail("graded without the sandbox"))
    assert cli.main(["--isolation", "bwrap", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "grade: not graded: the sandbox could not start because" in err
    assert "2 on a usage error or when the sandbox cannot start" in text
    taken = []
    monkeypatch.setattr(cli, "grade_notebooks", lambda *a, isolation, **k: taken.append(isolation) or [])
    cli.main([str(tmp_path)])
    assert taken == ["auto"], "instructors.md: without --isolation (or --format gradescope) grade takes auto"
    assert "(or `--format gradescope`) `grade` takes `--isolation auto`" in " ".join(
        (ROOT / "docs" / "instructors.md").read_text().split())


def test_instructors_threat_model_and_grade_help_read_answers_the_same_way():
    """instructors.md gives its threat model as "also in `grade --help`": the two name the same reader of answers,
    and the grader's code reads them with it."""
    from fastpath_lib.grading.engine.cli import THREAT_MODEL

    reader = "torch's restricted unpickler (torch.load(weights_only=True))"
    page = " ".join((ROOT / "docs" / "instructors.md").read_text().replace("`", "").split())
    assert "also in grade --help" in page and reader in page
    assert reader in " ".join(THREAT_MODEL.split())
    for engine in ("runner.py", "kernel_run.py"):
        assert "weights_only=True)" in (ROOT / "fastpath_lib" / "grading" / "engine" / engine).read_text(), engine


def test_instructors_name_every_exercise_whose_kernel_source_is_read():
    """instructors.md: "Where an exercise asks for a Triton kernel (ex02, and ex08's kernel), the grader reads the
    learner's source": the exercises named are those whose checks read a kernel's source (``kernel_source``)."""
    checks = ROOT / "fastpath_lib" / "grading" / "checks"
    readers = {p.name[:4] for p in checks.glob("ex[0-9][0-9]_*.py") if "kernel_source" in p.read_text()}
    page = " ".join((ROOT / "docs" / "instructors.md").read_text().split())
    said = re.search(r"Where an exercise asks for a Triton kernel \(([^)]*)\), the grader reads the learner's", page)
    assert readers and said and set(re.findall(r"ex\d\d", said.group(1))) == readers, (readers, said)


NAME_IN_FILE = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)` (?:in|from) `((?:fastpath_lib|tools|tests)/[\w/]+\.py)`")
LEARNER_TEXT = [README, *PAGES, *sorted((ROOT / "notebooks").glob("*.py")), *sorted((ROOT / "solutions").glob("*.py"))]


def misplaced_names(pages: list[Path]) -> list[str]:
    """"`name` in `path.py`": the file defines ``name`` at its top level (a def, a class or an assignment), not
    only imports it, so a reader who opens the file finds it."""
    out = []
    for page in pages:
        for name, rel in NAME_IN_FILE.findall(page.read_text()):
            target = ROOT / rel
            tree = ast.parse(target.read_text()) if target.exists() else None
            defined = tree is not None and any(
                getattr(node, "name", None) == name
                or any(getattr(t, "id", None) == name
                       for t in getattr(node, "targets", [getattr(node, "target", None)]))
                for node in tree.body)
            if not defined:
                out.append(f"{page.name} says `{name}` is in {rel}, which does not define it")
    return out


def test_a_name_the_text_places_in_a_file_is_defined_there(tmp_path: Path):
    assert not misplaced_names(LEARNER_TEXT), misplaced_names(LEARNER_TEXT)
    page = tmp_path / "page.md"
    page.write_text("(`round_to` in `fastpath_lib/rmsnorm/kernels.py`) and "
                    "`round_to` in `fastpath_lib/triton_casts.py`\n")
    assert misplaced_names([page]) == [
        "page.md says `round_to` is in fastpath_lib/rmsnorm/kernels.py, which does not define it"]
