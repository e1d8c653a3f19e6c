"""Every sentence the kit says about another project carries its evidence, checked against the pinned versions.

The ledger is ``docs/claims.toml``. Each ``[[claim]]`` ties a sentence of learner-facing text (``file``, and
``says``: a short fragment quoted from it) to evidence of one or more kinds:

* ``[[claim.cites]]`` with ``package`` (``torch``, ``triton`` or ``vllm``), ``path`` (relative to the installed
  package) and ``quote``: the quoted text must be in that file of the installed package;
* ``[[claim.cites]]`` with ``url`` and ``quote``: a vendor document, checked for form only (nothing is fetched);
* ``[[claim.cites]]`` with ``test`` (``tests/test_x.py::test_name``): a kit test that asserts the sentence;
* ``[[claim.cites]]`` with ``file`` (a kit file: ``constraints.txt``, a module) and ``quote``: what the kit pins or
  does, in the file that decides it;
* ``[[claim.cites]]`` with ``printed`` (and optionally ``notebook``): text that a code cell of the notebook
  (``file`` itself when it is one) prints in its saved outputs.

Whitespace is collapsed before every comparison, so reflowing a paragraph changes nothing. A fragment the kit no
longer says, or a quote the pinned package no longer has, fails and names the sentence to reread; the pins the
ledger was checked against (``[pinned]``) must be the installed versions, so a version bump fails here first.

Coverage: a sentence of learner-facing text (every lesson's and exercise's markdown, the README, ``docs/*.md``,
``upstream/*.md``) that names another project in a version-sensitive way must be covered by a claim (its
``says`` lies inside the sentence) or be listed under ``[[unchecked]]``. A *version-sensitive* mention is what
:data:`MENTION` finds: a dotted API name (```torch.library.custom_op```, ```tl.load```, ```vllm.ir```), a path
inside one of the packages (``torch/_native/registry.py``), a version (``Triton 3.8``), a GPU architecture or part
(``sm_90``, ``H100``), or one of the projects and tools as the subject of a verb (``vLLM calls``, ``Inductor
compiles``, ``Gradescope reads``). Sentences that name a project only in passing ("the Triton kernel") are not
found; prose a code cell prints beside it is covered with a ``printed`` citation. ``[[unchecked]]`` is the explicit
list of found sentences not yet covered: an entry that no sentence matches any more, or that a claim covers, fails
(the list only shrinks), and its length may not pass :data:`UNCHECKED_CEILING`.

A sentence found wrong, in text another change owns, is listed under ``[[refuted]]`` with the evidence against it
(``cites`` of the same kinds): the evidence must hold and the sentence must still be there; once the text is fixed
the entry fails and asks to be replaced by a claim.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import re
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LEDGER = ROOT / "docs" / "claims.toml"
#: The most ``[[unchecked]]`` entries the ledger may hold; lower it as entries become claims.
UNCHECKED_CEILING = 20

#: A version-sensitive mention of another project (see the module docstring).
_SUBJECTS = r"PyTorch|vLLM|Inductor|Dynamo|ATen|nbgrader|Gradescope|JupyterLab|Jupyter|jupytext|compute-sanitizer"
_VERBS = (r"is|are|has|have|does|do|takes|calls|runs|reads|writes|gives|returns|keeps|compiles|builds|uses|"
          r"registers|loads|sets|picks|selects|traces|matches|refuses|raises|needs|expects|caches|launches|"
          r"allocates|decides|lowers|dispatches|strips|installs|imports|checks|records|hides|declares|defines|"
          r"provides|accepts|supports|requires|ships|sends|wraps|emits|warns|computes|rounds|deprecates|removes")
MENTION = re.compile(
    r"`(?:torch|triton|tl|vllm)\.[\w.]+"
    r"|\b(?:torch|triton|vllm)/[\w/.-]+"
    r"|\b(?:torch|PyTorch|Triton|vLLM|CUDA)\s+\d+\.\d+"
    r"|\bsm_\d+|\b[HAB]\d00\b"
    rf"|\b(?:{_SUBJECTS})(?:'s)?\s+(?:[a-z]+\s+){{0,2}}?(?:{_VERBS})\b"
    r"|\bTriton(?:'s\s+(?:[a-z]+\s+){0,2}?|\s+)(?:is|does|has|compiles|builds|caches|launches|runs|reads|gives|"
    r"declares|defines|provides|accepts|supports|requires|refuses|raises|calls|takes)\b")


def flat(text: str) -> str:
    """``text`` with every run of whitespace made one space."""
    return " ".join(text.split())


# --- the learner-facing text --------------------------------------------------------------------------------------

def learner_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "upstream").glob("*.md")),
            *sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")), *sorted((ROOT / "exercises").glob("ex*.ipynb"))]


@cache
def _notebook(path: Path) -> dict:
    return json.loads(path.read_text())


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def prose(path: Path) -> str:
    """What a reader reads of ``path``: a page whole, a notebook's markdown cells."""
    if path.suffix != ".ipynb":
        return path.read_text()
    return "\n\n".join(_source(c) for c in _notebook(path)["cells"] if c["cell_type"] == "markdown")


def whole_text(path: Path) -> str:
    """Everything written in ``path``: a page whole, every cell of a notebook (code comments included)."""
    if path.suffix != ".ipynb":
        return path.read_text()
    return "\n\n".join(_source(c) for c in _notebook(path)["cells"])


def printed(path: Path) -> str:
    """What ``path``'s code cells printed, as saved: streams, and text results."""
    out = []
    for cell in _notebook(path)["cells"]:
        for o in cell.get("outputs", []):
            if "text" in o:
                out.append(_source({"source": o["text"]}))
            for kind in ("text/plain", "text/markdown", "text/html"):
                if kind in o.get("data", {}):
                    out.append(_source({"source": o["data"][kind]}))
    return "\n".join(out)


def sentences(text: str) -> list[str]:
    """``text``'s sentences, whitespace collapsed: fenced code and headings left out (a heading names a topic, it
    states nothing), list items and table rows apart."""
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    text = re.sub(r"^\s*#{1,6} .*$", " ", text, flags=re.M)
    out = []
    for block in re.split(r"\n\s*\n|\n(?=\s*(?:[-*|>]|\d+\.)\s)", text):
        out += [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z`*(\[])", flat(block)) if s]
    return out


def mentions(path: Path) -> list[str]:
    """The sentences of ``path`` that name another project in a version-sensitive way and state something (a
    question, ending in ``?``, asks rather than states)."""
    return [s for s in sentences(prose(path)) if MENTION.search(s) and not re.search(r"\?(?:\*\*)?$", s)]


# --- the ledger ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Claim:
    file: str
    says: str
    cites: tuple[dict, ...]

    @property
    def id(self) -> str:
        return f"{self.file}: {self.says[:60]}"


@cache
def ledger() -> dict:
    return tomllib.loads(LEDGER.read_text())


#: The keys of a citation, one set per kind of evidence (the module docstring): a citation carries exactly one.
CITE_KEYS = (frozenset({"package", "path", "quote"}), frozenset({"url", "quote"}), frozenset({"file", "quote"}),
             frozenset({"test"}), frozenset({"printed"}), frozenset({"printed", "notebook"}))
#: The keys of each kind of entry: a sentence (``file`` and ``says``) and, for claims and refuted ones, its evidence.
ENTRY_KEYS = {"claim": frozenset({"file", "says", "cites"}), "refuted": frozenset({"file", "says", "cites"}),
              "unchecked": frozenset({"file", "says"})}


def shape_problems(entries: dict) -> list[str]:
    """Entries of the parsed ledger ``entries`` whose keys are not those of their kind: a ``[[claim]]`` header left
    out makes TOML add the next sentence's ``file`` and ``says`` to the citation above it, which then names a
    sentence it is not evidence for, and that sentence goes unchecked."""
    out = [f"unknown table [{k}]" for k in entries if k not in ENTRY_KEYS and k != "pinned"]
    for kind, keys in ENTRY_KEYS.items():
        for entry in entries.get(kind, []):
            name = f"[[{kind}]] {entry.get('file')}: {str(entry.get('says'))[:60]!r}"
            if set(entry) != keys:
                out.append(f"{name} has keys {sorted(entry)}, a [[{kind}]] has {sorted(keys)}")
            out += [f"{name} cites {cite}: its keys are none of a citation's {[sorted(k) for k in CITE_KEYS]} (a "
                    f"missing [[claim]] header puts the next entry's file and says here)"
                    for cite in entry.get("cites", []) if frozenset(cite) not in CITE_KEYS]
    return out


def claims() -> list[Claim]:
    return [Claim(c["file"], c["says"], tuple(c.get("cites", ()))) for c in ledger().get("claim", [])]


def _installed_version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        pass
    if package == "vllm":
        from fastpath_lib.vllm_plugin import vllm_site
        found = sorted(vllm_site().glob("vllm-*.dist-info"))
        return found[0].name.removesuffix(".dist-info").split("-")[1] if found else None
    return None


def package_root(package: str) -> Path | None:
    """Where ``package`` is installed (vLLM: an installed one, else ``<venv>/vllm-site``), or ``None``."""
    spec = importlib.util.find_spec(package)
    if spec and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    if package == "vllm":
        from fastpath_lib.vllm_plugin import vllm_site
        if (vllm_site() / "vllm" / "__init__.py").exists():
            return vllm_site() / "vllm"
    return None


def evidence_problems(claim: Claim, root_of=package_root) -> list[str]:
    """Why ``claim`` does not hold as cited (empty when every citation checks out)."""
    kit_file = ROOT / claim.file
    if not kit_file.exists():
        return [f"{claim.file} does not exist"]
    if flat(claim.says) not in flat(whole_text(kit_file)):
        return [f"{claim.file} no longer says {claim.says!r}: update the ledger to the sentence as it reads now"]
    if not claim.cites:
        return [f"{claim.id}: no evidence"]
    out = []
    for cite in claim.cites:
        quote = flat(cite.get("quote", cite.get("printed", "")))
        if "package" in cite:
            root = root_of(cite["package"])
            if root is None:
                pytest.skip(f"{cite['package']} is not installed")
            source = root / cite["path"]
            if not source.is_file():
                out.append(f"{cite['package']}/{cite['path']} does not exist: reread {claim.id!r}")
            elif not quote or quote not in flat(source.read_text(errors="replace")):
                out.append(f"{cite['package']}/{cite['path']} no longer has {quote!r}: reread {claim.id!r}")
        elif "url" in cite:
            if not re.fullmatch(r"https://[\w.-]+\.[a-z]{2,}/\S*", cite["url"]) or len(quote) < 12:
                out.append(f"{claim.id}: a vendor citation needs an https URL and a quote of a few words")
        elif "file" in cite:
            kit_source = ROOT / cite["file"]
            if not kit_source.is_file() or not quote or quote not in flat(kit_source.read_text()):
                out.append(f"{cite['file']} does not say {quote!r}: reread {claim.id!r}")
        elif "test" in cite:
            path, _, name = cite["test"].partition("::")
            test_file = ROOT / path
            if not (test_file.is_file() and re.search(rf"^(?:async )?def {re.escape(name)}\(", test_file.read_text(),
                                                      re.M)):
                out.append(f"{cite['test']} does not exist: {claim.id!r} has no test behind it")
        elif "printed" in cite:
            notebook = ROOT / cite.get("notebook", claim.file)
            if notebook.suffix != ".ipynb" or not notebook.exists():
                out.append(f"{claim.id}: {notebook.name} is not a notebook with saved outputs")
            elif not quote or quote not in flat(printed(notebook)):
                out.append(f"{notebook.name} no longer prints {quote!r}: reread {claim.id!r}")
        else:
            out.append(f"{claim.id}: a citation names a package, a url, a kit file, a test or printed text ({cite})")
    return out


# --- the tests ----------------------------------------------------------------------------------------------------

def test_the_ledger_was_checked_against_the_installed_versions():
    for package, version in ledger()["pinned"].items():
        installed = _installed_version(package)
        if installed is None:
            continue
        assert installed.split("+")[0] == version, (
            f"{package} {installed} is installed; the ledger's quotes were checked against {version}: run "
            f"tests/course/test_claims.py, reread every sentence whose quote fails, then set [pinned] {package}")


def test_each_entry_has_the_keys_of_its_kind():
    problems = shape_problems(ledger())
    assert not problems, "\n".join(problems)


def test_a_missing_claim_header_is_found():
    whole = ('[[claim]]\nfile = "a.md"\nsays = "one"\n[[claim.cites]]\ntest = "tests/t.py::t"\n\n'
             '[[claim]]\nfile = "b.md"\nsays = "two"\n[[claim.cites]]\npackage = "torch"\npath = "p.py"\nquote = "q"\n')
    assert shape_problems(tomllib.loads(whole)) == []
    headless = tomllib.loads(whole.replace('\n\n[[claim]]\nfile = "b.md"', '\n\nfile = "b.md"'))
    (problem,) = shape_problems(headless)
    assert "a.md" in problem and "'file'" in problem and "'says'" in problem, problem
    assert shape_problems({"claim": [{"file": "a", "says": "b"}], "unchecked": [{"file": "a", "says": "b", "x": 1}]})


@pytest.mark.parametrize("claim", claims(), ids=lambda c: c.id)
def test_each_claim_still_holds_in_the_kit_and_the_pinned_source(claim: Claim):
    problems = evidence_problems(claim)
    assert not problems, "\n".join(problems)


def _covered(sentence: str, file: str, says: list[tuple[str, str]]) -> bool:
    return any(f == file and flat(s) in sentence for f, s in says)


def refuted() -> list[Claim]:
    return [Claim(c["file"], c["says"], tuple(c.get("cites", ()))) for c in ledger().get("refuted", [])]


@pytest.mark.parametrize("wrong", refuted(), ids=lambda c: c.id)
def test_each_refuted_sentence_is_still_there_and_its_counter_evidence_holds(wrong: Claim):
    problems = evidence_problems(wrong)
    assert not any("no longer says" in p for p in problems), (
        f"{wrong.file} no longer says {wrong.says!r}: delete its [[refuted]] entry (and cite what it says now)")
    assert not problems, "\n".join(problems)


def test_every_mention_of_another_project_is_covered_or_listed_unchecked():
    says = [(c.file, c.says) for c in claims()]
    unchecked = [(u["file"], u["says"]) for u in ledger().get("unchecked", [])]
    wrong = [(r.file, r.says) for r in refuted()]
    found, stale, redundant = [], list(unchecked), []
    for path in learner_files():
        file = str(path.relative_to(ROOT))
        for sentence in mentions(path):
            listed = [u for u in unchecked + wrong if u[0] == file and flat(u[1]) in sentence]
            if _covered(sentence, file, says):
                redundant += listed
            elif not listed:
                found.append(f"{file}: {sentence}")
            stale = [u for u in stale if u not in listed]
    assert not found, ("sentences naming another project with no evidence in docs/claims.toml (add a [[claim]] "
                       "with a citation, or reword):\n" + "\n".join(found))
    assert not redundant, "[[unchecked]] entries a claim covers (delete them):\n" + "\n".join(map(str, redundant))
    assert not stale, "[[unchecked]] entries no sentence matches (delete them):\n" + "\n".join(map(str, stale))
    assert len(unchecked) <= UNCHECKED_CEILING, f"{len(unchecked)} unchecked; the ceiling is {UNCHECKED_CEILING}"


def test_the_finder_finds_version_sensitive_mentions_and_not_passing_names(tmp_path: Path):
    found = ["Each call became `auto_functionalized_v2(fused_add_rms_norm_, ...)` under `torch.compile`.",
             "Triton builds a C launcher at first launch (3.6 does, 3.8 does not).",
             "torch 2.13's `torch/_native` overrides eager ATen ops.",
             "PyTorch's eager ATen takes no Triton kernel.",
             "On sm_90 the kernel is eligible.", "Gradescope reads one results.json.",
             "vLLM declares fp16 `atol=1e-2, rtol=2e-3`.", "Triton's frontend provides `getattr` to a kernel."]
    for sentence in found:
        assert MENTION.search(sentence), sentence
    passing = ["The kit's Triton kernel is tested under the interpreter.", "Run the lesson top to bottom.",
               "the torch reference in plain code"]
    for sentence in passing:
        assert not MENTION.search(sentence), sentence
    page = tmp_path / "page.md"
    page.write_text("## Promise 7: `torch.compile`\n\nWhy does `torch.compile` drop the call?\n"
                    "**Which test of `torch.library.opcheck` reports it?**\n\n`torch.compile` traces the op. Done.\n")
    assert mentions(page) == ["`torch.compile` traces the op."], mentions(page)


def test_a_changed_quote_or_sentence_fails_and_names_what_to_reread(tmp_path: Path):
    page = ROOT / "docs" / "claims.toml"  # a file the kit has, and a fragment it says
    fake_pkg = tmp_path / "pkg"
    fake_pkg.mkdir()
    (fake_pkg / "mod.py").write_text("def f():\n    '''the launcher is\n    compiled once'''\n")
    cite = {"package": "fake", "path": "mod.py", "quote": "the launcher is compiled once"}
    claim = Claim(str(page.relative_to(ROOT)), "[pinned]", (cite,))
    assert evidence_problems(claim, lambda _: fake_pkg) == []
    (fake_pkg / "mod.py").write_text("def f():\n    '''the launcher is cached'''\n")
    (problem,) = evidence_problems(claim, lambda _: fake_pkg)
    assert "no longer has" in problem and "reread" in problem and "[pinned]" in problem
    gone = Claim(claim.file, "a sentence the kit never wrote", (cite,))
    assert "no longer says" in evidence_problems(gone, lambda _: fake_pkg)[0]
    for bad in ({"url": "http://example.com", "quote": "twelve chars long"},
                {"test": "tests/course/test_claims.py::nope"}, {"printed": "x"},
                {"file": "constraints.txt", "quote": "torch==0.1"}, {"nothing": "x"}):
        assert evidence_problems(Claim(claim.file, "[pinned]", (bad,))), bad


# --- commands that must carry their environment ----------------------------------------------------------------

#: A compute-sanitizer check of memory addresses or initialisation sees PyTorch's cached blocks as allocated and
#: initialised: an access past a tensor's end lands in its neighbour. Every such command shown runs with caching off.
SANITIZER = re.compile(r"compute-sanitizer\s+--tool\s+(?:memcheck|initcheck)")
NO_CACHING = "PYTORCH_NO_CUDA_MEMORY_CACHING=1"


def sanitizer_commands_without_no_caching(text: str) -> list[str]:
    """Code lines and sentences of ``text`` that show a memcheck/initcheck run without :data:`NO_CACHING`."""
    code = [line for block in re.findall(r"```.*?```", text, flags=re.S) for line in block.splitlines()]
    return [s for s in code + sentences(text) if SANITIZER.search(s) and NO_CACHING not in s]


@pytest.mark.parametrize("path", learner_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_memcheck_commands_turn_pytorchs_caching_allocator_off(path: Path):
    found = sanitizer_commands_without_no_caching(prose(path))
    assert not found, f"{path.relative_to(ROOT)}: memcheck without {NO_CACHING}:\n" + "\n".join(found)


def test_the_memcheck_rule_finds_a_bare_command():
    assert sanitizer_commands_without_no_caching("```bash\ncompute-sanitizer --tool memcheck python -m pytest\n```")
    assert sanitizer_commands_without_no_caching("Run `compute-sanitizer --tool initcheck python x.py` first.")
    assert not sanitizer_commands_without_no_caching(f"```bash\n{NO_CACHING} compute-sanitizer --tool memcheck x\n```")
    assert not sanitizer_commands_without_no_caching("```bash\ncompute-sanitizer --tool racecheck python x.py\n```")
