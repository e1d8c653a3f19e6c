"""The student release's text: what its Markdown may say, given what the release holds.

A course release (:mod:`fastpath_lib.release`) leaves folders of the checkout out (``solutions/``, ``tests/``,
``tools/``) and its ``./kit`` offers only the commands whose files it holds. The README and the exercises' Markdown
lose each clause that points a learner at something the release does not hold, decided from the release itself.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

__all__ = ["offered_commands", "without_absent", "where_checks_run", "tell_what_ships", "kit_folders", "HOW"]

#: A path in backquotes (`` `solutions/` ``, `` `tests/test_x.py` ``), a ``./kit`` command, a clause's end.
_PATH = re.compile(r"`([\w.-]+)/[^`\s]*`")
_KIT_COMMAND = re.compile(r"(?:^|`)\./kit ([a-z][\w-]*)")
_CLAUSES = re.compile(r"(;\s+|(?<=[.!?])\s+)")


def offered_commands(kit: Path) -> set[str]:
    """The commands ``kit`` (a copy of ``./kit``) lists in its help: those whose files its folder holds."""
    res = subprocess.run(["bash", str(kit), "help"], cwd=kit.parent, capture_output=True, text=True, timeout=60)
    return set(re.findall(r"^#\s+\./kit ([a-z][\w-]*)", res.stdout, re.M))


def _claims_absent(text: str, absent: set[str], commands: set[str]) -> bool:
    return any(m.group(1) in absent for m in _PATH.finditer(text)) or any(
        m.group(1) not in commands for m in _KIT_COMMAND.finditer(text))


def without_absent(text: str, absent: set[str], commands: set[str]) -> str:
    """``text`` (Markdown) less what points a learner at something the release does not hold: each clause (a
    sentence, or a part of one after a semicolon) that names a folder of ``absent`` in backquotes, and each command
    line (``./kit ...`` in a code block) or table row that names one or a ``./kit`` command not in ``commands``.

    >>> without_absent("Grade with `./kit grade`; the solved\\nversions are in `solutions/`. Next.", {"solutions"},
    ...                {"grade"})
    'Grade with `./kit grade`. Next.'
    >>> without_absent("```\\n./kit lab   # open\\n./kit test  # run\\n```", set(), {"lab"})
    '```\\n./kit lab   # open\\n```'
    """
    lines = [x for x in text.split("\n") if not (x.startswith(("./kit ", "|")) and _claims_absent(x, absent, commands))]
    out = []
    for para in "\n".join(lines).split("\n\n"):
        parts = _CLAUSES.split(para)
        clauses, seps = parts[0::2], parts[1::2] + [""]
        if any(x.lstrip().startswith(("```", "|")) for x in para.split("\n")):  # a table, code: lines only
            out.append(para)
            continue
        text_out = ""
        for clause, sep in zip(clauses, seps):
            if not _claims_absent(clause, absent, commands):
                text_out += clause + sep
            elif text_out.endswith("; "):  # "A; <dropped>." -> "A."
                text_out = text_out[:-2] + (clause.rstrip()[-1] if clause.rstrip()[-1:] in ".!?:" else ".") + sep
        out.append(text_out)
    return "\n\n".join(out)


#: The paragraph of each exercise that says what its check cells do.
HOW = "**How this works.**"


def where_checks_run(held: dict[str, bool], code: str) -> str:
    """The sentence a released exercise adds to its :data:`HOW` paragraph for the checks of ``held`` (check name ->
    whether its stand-in gives advice) that ``code`` calls; ``""`` when it calls none.

    >>> where_checks_run({"check_readiness": False, "check_boundary_cases": True}, "ex.check_readiness(fn)")
    "In this release `ex.check_readiness` runs in your course's autograder only: its cell says so, and the \
autograder does what this exercise says of that check."
    """
    called = [n for n in sorted(held) if re.search(rf"\bex\.{n}\(", code)]
    if not called:
        return ""
    names = " and ".join(f"`ex.{n}`" for n in called)
    if all(held[n] for n in called):
        return (f"In this release {names} gives advice, no points: your course's autograder grades this exercise, "
                f"as this exercise says its check does.")
    one = len(called) == 1
    return (f"In this release {names} {'runs' if one else 'run'} in your course's autograder only: "
            f"{'its cell says' if one else 'their cells say'} so, and the autograder does what this exercise says "
            f"of {'that check' if one else 'those checks'}.")


def kit_folders(root: Path) -> set[str]:
    """The top-level folders of the checkout ``root`` that are the kit's: each but a hidden one (``.git``) and one
    its ``.gitignore`` ignores, which running the kit makes (``artifacts/`` of a bench run, the ``*.egg-info/`` of an
    editable install, a ``.venv/``). The ``.gitignore`` patterns that can name a top-level folder are read: no
    ``/`` but a leading or a trailing one.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     for name in ("solutions", "artifacts", "x.egg-info", "results"):
    ...         (Path(d) / name).mkdir()
    ...     _ = (Path(d) / ".gitignore").write_text("/artifacts/\\n*.egg-info/\\n/results/quick-*\\n")
    ...     sorted(kit_folders(Path(d)))
    ['results', 'solutions']
    """
    import fnmatch

    ignore = root / ".gitignore"
    lines = ignore.read_text("utf-8").splitlines() if ignore.exists() else []
    patterns = [p.strip().strip("/") for p in lines if p.strip() and not p.startswith(("#", "!"))
                and "/" not in p.strip().strip("/")]
    return {p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))
            and not any(fnmatch.fnmatchcase(p.name, pat) for pat in patterns)}


def tell_what_ships(out: Path, root: Path, held: dict[str, bool] | None = None) -> set[str]:
    """Rewrite the Markdown cells of the student folder's exercises (:func:`without_absent`: "the solved versions
    are in `solutions/`") so that they name no folder of the checkout the release leaves out and no ``./kit``
    command its ``./kit`` does not run, and say which of their checks the autograder holds (:func:`where_checks_run`,
    ``held``: check name -> whether its stand-in gives advice). Returns the folders left out (the kit's folders
    the student folder lacks: :func:`kit_folders`, not what running the kit made). The lessons and the docs keep their
    text: where they cite a test or a tool as evidence, the README's preface says those stay with the full kit."""
    import nbformat

    absent = {name for name in kit_folders(root) if not (out / name).exists()}
    commands = offered_commands(out / "kit")
    for path in sorted(out.glob("exercises/*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        told = where_checks_run(held or {}, "\n".join(c.source for c in nb.cells if c.get("cell_type") == "code"))
        for cell in (c for c in nb.cells if c.get("cell_type") == "markdown"):
            cell.source = without_absent(cell.source, absent, commands)
            if told and HOW in cell.source:
                head, tail = cell.source.split(HOW, 1)
                para, sep, rest = tail.partition("\n\n")
                cell.source = head + HOW + para.rstrip() + " " + told + sep + rest
        nbformat.write(nb, path)
    return absent
