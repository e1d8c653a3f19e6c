"""Exercise 11: commit hygiene. Sort a change's hunks into an ordered list of reviewable commits.

``plan_commits(hunks) -> [{"kind", "message", "hunks"}, ...]``: the hunks of one piece of work (a new predicate
condition with what prepares and documents it, a simplification, a call site routed through the new op, their
tests) come as dicts ``{"id", "file", "description", "diff"}``; the learner returns the commits in order. Each
commit's ``kind`` is ``"refactor"`` (no behaviour change), ``"test"`` (tests only), ``"behaviour"`` or ``"docs"``.
The check draws the hunks' ids and their order afresh at every call (besides the notebook's fixed draw), so a list
of ids written down once does not pass. It grades the rule lesson 07 teaches, not one answer:

* ``one_change_per_commit``: a commit holds at most one behaviour change; a behaviour change lands with the tests
  of its new behaviour, in its commit (tests that pin today's behaviour may come earlier, never later); docs come
  with or after the change they describe; each commit's kind says what it holds;
* ``every_commit_green``: the suite passes after every commit: no hunk before one it uses, hunks that only work
  together (a rename and the imports it breaks, the halves of a move, a generated table and what generates it)
  in one commit, no test of a new behaviour committed before that behaviour exists;
* ``refactors_apart``: refactor commits change no behaviour (routing a call site through the new op *is* a
  behaviour change), and every hunk that changes no behaviour is in a refactor commit.

A plan earns points only when its history is reviewable at all: ``one_change_per_commit`` and ``every_commit_green``
both hold (lumping every change into one commit keeps every commit green, and splitting it so that a commit is red
keeps one change per commit; neither is the lesson's rule). Until then the parts that hold say so and earn nothing.
Feedback names the rule that is broken and how often, never which hunk: a per-hunk verdict would let a search over
plans stand in for reading the diffs.
"""

from __future__ import annotations

import dataclasses
import random

from fastpath_lib.grading import borrowed
from fastpath_lib.grading.feedback import Fail, graded
from fastpath_lib.grading.registry import Result, points_of

__all__ = ["check_commit_plan", "change_hunks", "KINDS"]

KINDS = ("refactor", "test", "behaviour", "docs")
_PARTS = ("one_change_per_commit", "every_commit_green", "refactors_apart")
#: Parts a plan must pass before any part earns points.
_GATES = ("one_change_per_commit", "every_commit_green")
_GRADER = borrowed.kit("grading", why="that is the grader's own answer")


@dataclasses.dataclass(frozen=True)
class _Hunk:
    key: str
    file: str
    description: str
    diff: str
    nature: str  # refactor / behaviour / test / pin / docs (hidden from the learner)
    uses: tuple[str, ...] = ()  # keys that must be committed no later than this one
    together: tuple[str, ...] = ()  # keys that must share this hunk's commit (apart, a commit is red)
    of: str = ""  # the behaviour hunk a test checks, or a docs hunk describes
    # test: checks the new behaviour (red before it lands); pin: checks today's behaviour (green before and after)


_HUNKS = (
    _Hunk("rename", "fastpath_lib/rmsnorm/predicate.py",
          "Rename the helper _stride_ok to _row_stride_aligned (the name says what it checks); every caller updated",
          "-def _stride_ok(t, align=16):\n+def _row_stride_aligned(t, align=16):\n"
          "@@ def _alignment(c):\n-    if not _stride_ok(c.input):\n+    if not _row_stride_aligned(c.input):",
          "refactor"),
    _Hunk("rename_test", "tests/test_predicate.py",
          "Update the test module's import of the renamed helper",
          "-from fastpath_lib.rmsnorm.predicate import _stride_ok\n"
          "+from fastpath_lib.rmsnorm.predicate import _row_stride_aligned", "refactor", together=("rename",)),
    _Hunk("move_out", "fastpath_lib/rmsnorm/predicate.py",
          "Move row_bytes(t) out of predicate.py (unchanged); predicate.py imports it from layout.py",
          "-def row_bytes(t):\n-    return t.shape[-1] * t.element_size()\n"
          "+from fastpath_lib.rmsnorm.layout import row_bytes", "refactor", together=("move_in",)),
    _Hunk("move_in", "fastpath_lib/rmsnorm/layout.py",
          "Add row_bytes(t) to layout.py, the same function moved from predicate.py",
          "+def row_bytes(t):\n+    return t.shape[-1] * t.element_size()", "refactor", together=("move_out",)),
    _Hunk("condition", "fastpath_lib/rmsnorm/predicate.py",
          "New condition row_width_aligned: the row width in bytes must be a multiple of 16 (a width-62 row slice "
          "in stride 64 now falls back)",
          "+def _row_width_aligned(c):\n+    if row_bytes(c.input) % 16:\n"
          "+        return f\"row width {row_bytes(c.input)} bytes is not a multiple of 16\"\n"
          "@@ PREDICATE = Predicate(\"rms_norm\", [\n+    Condition(\"row_width_aligned\", _row_width_aligned),",
          "behaviour", uses=("move_out", "move_in"), together=("readme",)),
    _Hunk("condition_test", "tests/test_predicate.py",
          "Test: a width-62 row slice in stride 64 falls back, width 64 stays eligible",
          "+def test_row_width_must_be_16_byte_multiple():\n"
          "+    assert explain(row_slice(62, stride=64)).route == \"fallback\"\n"
          "+    assert explain(row_slice(64, stride=64)).route == \"triton\"", "test", of="condition"),
    _Hunk("simplify", "fastpath_lib/rmsnorm/predicate.py",
          "Simplify _row_stride_aligned: drop the early return for 1-D inputs",
          " def _row_stride_aligned(t, align=16):\n-    if t.dim() < 2:\n-        return True\n"
          "     return row_stride(t) * t.element_size() % align == 0", "behaviour", uses=("rename",)),
    _Hunk("route", "examples/model.py",
          "Route Block.norm through fastpath_lib.rms_norm instead of F.rms_norm",
          "-        return F.rms_norm(x, (self.dim,), self.weight, self.eps)\n"
          "+        return fastpath_lib.rms_norm(x, (self.dim,), self.weight, self.eps)", "behaviour"),
    _Hunk("route_test", "tests/test_model.py",
          "Test: Block.norm takes the fast path for an eligible input and matches F.rms_norm",
          "+def test_block_norm_takes_the_fast_path():\n+    with record_routes() as routes:\n"
          "+        y = Block(64).norm(x)\n+    assert routes == {\"triton\": 1}", "test", of="route"),
    _Hunk("pin_test", "tests/test_model.py",
          "Test: Block.norm agrees with F.rms_norm for fp32, fp16 and bf16 inputs",
          "+@pytest.mark.parametrize(\"dtype\", [torch.float32, torch.float16, torch.bfloat16])\n"
          "+def test_block_norm_agrees_with_f_rms_norm(dtype):\n"
          "+    block, x = Block(64).to(dtype), torch.randn(16, 64, dtype=dtype)\n"
          "+    assert_close(block.norm(x), F.rms_norm(x, (64,), block.weight, block.eps))", "pin", of="route"),
    _Hunk("readme", "README.md",
          "README: the predicate's table of conditions gains row_width_aligned",
          "@@ <!-- predicate-table:start (PREDICATE.markdown_table(); tests/test_docs.py checks this copy) -->\n"
          " | input_alignment | alignment | input data pointer a multiple of 16 bytes | ...\n"
          "+| row_width_aligned | alignment | the row width in bytes is a multiple of 16 | ...",
          "docs", of="condition", together=("condition",)),
    _Hunk("changelog", "CHANGELOG.md",
          "CHANGELOG: calls whose row width is not a multiple of 16 bytes now take the fallback",
          "+- Calls whose row width is not a multiple of 16 bytes now take the fallback.", "docs", of="condition"),
)
_BY_KEY = {h.key: h for h in _HUNKS}


def change_hunks(seed: int | None = None) -> list[dict]:
    """The hunks of the change, as dicts ``{"id", "file", "description", "diff"}``, with ids and order drawn from
    ``seed`` (``None``: afresh)."""
    return [{k: v for k, v in h.items() if k != "_key"} for h in _draw(seed)]


def _draw(seed):
    rng = random.Random(seed) if seed is not None else random.SystemRandom()
    ids = rng.sample(range(0x1000, 0x10000), len(_HUNKS))
    out = [{"id": f"h{i:04x}", "file": h.file, "description": h.description, "diff": h.diff, "_key": h.key}
           for i, h in zip(ids, _HUNKS)]
    rng.shuffle(out)
    return out


def _plan(plan_commits, drawn) -> list[tuple[str, list[str]]]:
    """``[(kind, [hunk keys])]`` of the learner's plan; :class:`Fail` when it is not a plan of these hunks."""
    given = [{k: v for k, v in h.items() if k != "_key"} for h in drawn]
    commits = borrowed.run(plan_commits, (given,), _GRADER)
    key_of = {h["id"]: h["_key"] for h in drawn}
    if not isinstance(commits, (list, tuple)) or not commits:
        raise Fail(f"plan_commits must return a list of commits, got {type(commits).__name__}")
    out, seen = [], []
    for n, c in enumerate(commits, 1):
        if not isinstance(c, dict) or not {"kind", "message", "hunks"} <= set(c):
            raise Fail(f"commit {n}: a commit is a dict with 'kind', 'message' and 'hunks', got {c!r:.80}")
        if c["kind"] not in KINDS:
            raise Fail(f"commit {n}: kind {c['kind']!r}; one of {', '.join(KINDS)}")
        if not isinstance(c["message"], str) or len(c["message"].split()) < 2:
            raise Fail(f"commit {n}: a commit needs a message that says what it does")
        if not isinstance(c["hunks"], (list, tuple)) or not c["hunks"]:
            raise Fail(f"commit {n}: no hunks (an empty commit)")
        unknown = [h for h in c["hunks"] if h not in key_of]
        if unknown:
            raise Fail(f"commit {n}: {unknown[0]!r} is not the id of a hunk of this change (ids are drawn afresh "
                       f"at every call: build the plan from the hunks you are given)")
        seen += c["hunks"]
        out.append((c["kind"], [key_of[h] for h in c["hunks"]]))
    twice = sorted({h for h in seen if seen.count(h) > 1})
    missing = [h for h in drawn if h["id"] not in seen]
    if twice:
        raise Fail(f"{len(twice)} hunks are in more than one commit (each hunk goes in exactly one)")
    if missing:
        raise Fail(f"{len(missing)} hunks are in no commit, e.g. {missing[0]['description']!r}")
    return out


def _violations(plan) -> dict[str, list[str]]:
    """part -> the rules the plan breaks (one line per rule, with a count)."""
    at = {k: i for i, (_, keys) in enumerate(plan) for k in keys}
    kind_of = {k: kind for kind, keys in plan for k in keys}
    counts: dict[str, dict[str, int]] = {p: {} for p in _PARTS}

    def bad(p, rule):
        counts[p][rule] = counts[p].get(rule, 0) + 1

    allowed = {"refactor": {"refactor"}, "test": {"test", "pin"}, "docs": {"docs"},
               "behaviour": {"behaviour", "test", "pin", "docs"}}
    for kind, keys in plan:  # one behaviour change per commit: a hunk belongs to the change it makes, tests or
        changes = {_BY_KEY[k].of or k for k in keys if _BY_KEY[k].nature != "refactor"}  # documents
        if len(changes) > 1:
            bad("one_change_per_commit", "a commit holds more than one behaviour change")
    for h in _HUNKS:
        kind, i = kind_of[h.key], at[h.key]
        if h.nature == "refactor" and kind != "refactor":
            bad("refactors_apart", "a hunk that changes no behaviour is outside a refactor commit")
        elif h.nature != "refactor" and kind == "refactor":
            bad("refactors_apart", "a commit labelled refactor changes behaviour (or adds tests or docs of a change)")
        elif h.nature not in allowed[kind]:
            bad("one_change_per_commit", f"a {kind} commit holds a hunk that is not {kind}")
        if h.nature in ("test", "pin") and at[h.of] < i:
            bad("one_change_per_commit", "a behaviour change lands without its tests (they come in a later commit)")
        if h.nature == "test" and at[h.of] > i:
            bad("every_commit_green", "a test of a new behaviour is committed before that behaviour (it fails there)")
        if h.nature == "docs" and at[h.of] > i:
            bad("one_change_per_commit", "docs describe a change that a later commit makes")
        if any(at[u] > i for u in h.uses):
            bad("every_commit_green", "a hunk is committed before a hunk it uses")
        if any(at[t] != i for t in h.together):
            bad("every_commit_green", "hunks that only work together are split (a commit in between fails)")
    return {p: [f"{rule} ({n}x)" for rule, n in c.items()] for p, c in counts.items()}


def _grade(draws, plan_commits) -> list[Result]:
    found: dict[str, list[str]] = {p: [] for p in _PARTS}
    for name, drawn in draws:
        for p, rules in _violations(_plan(plan_commits, drawn)).items():
            found[p] += [f"{name}: {r}" for r in rules if f"{name}: {r}" not in found[p]]
    gates = [g for g in _GATES if found[g]]
    results = []
    for p in _PARTS:
        ok = not found[p] and not gates
        if found[p]:
            text = "\n".join(found[p])
        elif gates:
            text = (f"this rule holds, but a plan earns points once {' and '.join(_GATES)} hold "
                    f"(now broken: {', '.join(gates)})")
        else:
            text = "passed on every draw"
        results.append(Result("ex11", p, points_of("ex11", p), ok, text))
    return results


def check_commit_plan(plan_commits, *, show: bool = True):
    """``plan_commits(hunks) -> [{"kind", "message", "hunks"}, ...]`` on the notebook's draw and two fresh ones."""
    draws = [("the notebook's hunks", _draw(0)), ("hunks drawn now", _draw(None)), ("hunks drawn now", _draw(None))]
    return graded("ex11", _PARTS, _grade, draws, plan_commits, show=show)
