"""The README is a short front door, every page it leads to exists, and the commands the pages show are real.

A link that points nowhere, a ``./kit`` or ``python -m fastpath_lib`` command that no longer exists, or a flag the
command does not take fails here, not in a reader's terminal.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from fastpath_lib.__main__ import COMMANDS

ROOT = Path(__file__).resolve().parents[1]
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
