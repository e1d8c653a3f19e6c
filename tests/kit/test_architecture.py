"""The house rules of ``fastpath_lib``, read from the source: the whiteboard of parts (docs/contributing.md, "The
whiteboard" below the table of parts), no import cycle (imports inside functions included), no private name imported
across modules, no module over 500 lines, Triton imported only by the modules that run or compile Triton code, and the
grader's one deliberate copy of its agent's code (the tensor walk) kept identical to it.
"""

from __future__ import annotations

import ast
import fnmatch
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "fastpath_lib"
MAX_LINES = 500

#: part -> module patterns (dotted, relative to fastpath_lib), in the whiteboard's order.
PARTS = {
    "eligibility": ["eligibility"],
    "runtime": ["runtime"],
    "spec": ["opspec", "opparts"],
    "predicate": ["rmsnorm.predicate", "rmsnorm.layout", "rmsnorm.limits", "rmsnorm.thresholds", "rmsnorm.capture",
                  "fused.predicate", "fused.reference"],
    "kernels": ["rmsnorm.kernels", "rmsnorm.launch", "rmsnorm.compiled", "fused.kernels", "fused.launch",
                "triton_casts"],
    "op": ["rmsnorm.op", "rmsnorm.module", "rmsnorm.sharding", "rmsnorm.native_override", "rmsnorm", "routing",
           "__init__", "fused.op", "fused", "vllm_plugin"],
    "support": ["cases", "boundary", "testing", "selftest", "traffic", "traffic_records", "interpreted", "launches",
                "reading", "gradcheck",
                "fused.cases", "fused.spec", "rmsnorm.cost"],
    "bench": ["bench", "bench.*"],
    "specs": ["rmsnorm.spec", "fused.op_spec", "rmsnorm.graph_capture"],
    "grading": ["grading", "grading.*", "exercises"],
    "widgets": ["widgets"],
    "cli": ["cli", "__main__", "bench.cli", "grading.engine.cli", "grading.engine.autograde", "release",
            "release_text"],
}
#: part -> parts it may import (the whiteboard); every part may import the runtime.
MAY_IMPORT = {
    "eligibility": set(),
    "runtime": set(),
    "spec": set(),
    "predicate": {"eligibility"},
    "kernels": {"predicate"},
    "op": {"predicate", "kernels", "eligibility"},
    "support": {"predicate", "eligibility", "kernels", "spec"},
    "bench": {"op", "kernels", "predicate", "support", "eligibility", "spec"},
    # an op's spec and what it hands the pipeline (its capture test) may use bench's public API: bench imports no op
    # package (test_bench_imports_no_op_package), so no arrow runs back
    "specs": {"op", "kernels", "predicate", "support", "eligibility", "spec", "bench"},
    "grading": {"predicate", "support", "eligibility", "bench:outcome"},  # bench: only BENCH_OUTCOME
    "widgets": {"op", "predicate", "support", "eligibility"},
    "cli": {"*"},
}
#: the pieces of bench that grading may use: the outcome words and the GPU-run rule (schema), the outcome rule
#: (outcome, re-exported by analysis) and the matrix's coverage rule (matrix), one source each.
BENCH_OUTCOME = {"bench.schema", "bench.outcome", "bench.analysis", "bench.matrix"}
#: the modules that import Triton (patterns): each operator's kernels and the casts any op's kernel may use, the
#: ahead-of-time compiler, the self-test's probe kernel, the interpreter's traffic checker, the launch observer (the
#: route a call took), the bench timers (``triton.testing``), and the grading kernels (mutants, exercise 02's check,
#: the grader's allow-list of Triton's language names, its run of a learner's kernel as data, that run's compile step
#: and its launcher's record and replay), and the interpreter's bf16 arithmetic and far programs as a GPU runs them.
TRITON_IMPORTERS = {"*.kernels", "triton_casts", "interpreted", "rmsnorm.compiled", "selftest", "traffic", "launches",
                    "bench.ophost", "bench.timing", "grading.rules.mutant_kernels", "grading.rules.language_names",
                    "grading.checks.ex02_kernel", "grading.engine.kernel_run", "grading.engine.compile_check",
                    "grading.engine.replay", "grading.engine.gaps"}


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _part(mod: str) -> str:
    best = None
    for part, patterns in PARTS.items():
        for pat in patterns:
            if fnmatch.fnmatchcase(mod, pat):
                if best is None or len(pat) > len(best[1]):
                    best = (part, pat)
    assert best, f"fastpath_lib.{mod} belongs to no part of the whiteboard: add it to PARTS"
    return best[0]


def _resolve(name: str) -> str | None:
    """``fastpath_lib.x.y`` -> the kit module it names (longest existing prefix), else ``None``."""
    if name != "fastpath_lib" and not name.startswith("fastpath_lib."):
        return None
    parts = name.split(".")[1:]
    while parts and ".".join(parts) not in MODULES:
        parts.pop()
    return ".".join(parts) if parts else "__init__"


def _imports(mod: str) -> list[tuple[str, str, int]]:
    """``(target module, imported name or '', line)`` for every import of a kit module, at any depth."""
    tree = ast.parse(MODULES[mod].read_text())
    package = mod.split(".")[:-1] if MODULES[mod].name != "__init__.py" else mod.split(".")
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                target = _resolve(a.name)
                if target:
                    out.append((target, "", node.lineno))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                base = ".".join(["fastpath_lib", *up, *([base] if base else [])])
            for a in node.names:
                sub = _resolve(f"{base}.{a.name}")
                target = sub if sub and sub != _resolve(base) else _resolve(base)
                if target:
                    out.append((target, "" if sub == target and sub != _resolve(base) else a.name, node.lineno))
    return [(t, n, line) for t, n, line in out if t != mod]


GRAPH = {m: _imports(m) for m in MODULES}


@pytest.mark.parametrize("mod", sorted(MODULES))
def test_part_imports_only_what_the_whiteboard_allows(mod):
    part = _part(mod)
    allowed = MAY_IMPORT[part]
    for target, _, line in GRAPH[mod]:
        tpart = _part(target)
        if "*" in allowed or tpart in (part, "runtime") or tpart in allowed:
            continue
        if tpart == "bench" and "bench:outcome" in allowed and target in BENCH_OUTCOME:
            continue
        pytest.fail(f"fastpath_lib/{MODULES[mod].relative_to(PKG)}:{line}: the {part} part imports "
                    f"fastpath_lib.{target} ({tpart}); the whiteboard allows {sorted(allowed) or 'nothing'}")


def _defines_a_spec(path: Path) -> bool:
    """Whether a module binds a module-level name to ``OpSpec(...)`` (an op's registered spec)."""
    for node in ast.parse(path.read_text()).body:
        call = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if isinstance(call, ast.Call) and getattr(call.func, "id", getattr(call.func, "attr", None)) == "OpSpec":
            return True
    return False


#: The op packages: the subpackages of fastpath_lib holding a module that defines an op's spec (read from the source,
#: so a new op package is covered without being listed here).
OP_PACKAGES = sorted({m.split(".")[0] for m, p in MODULES.items() if "." in m and _defines_a_spec(p)})


def _code_strings(mod: str) -> list[tuple[str, int]]:
    """Imports inside string constants that are Python code (a probe a child process runs): ``(module, line)``."""
    out = []
    for node in ast.walk(ast.parse(MODULES[mod].read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "import" in node.value:
            try:
                tree = ast.parse(node.value)
            except SyntaxError:
                continue
            for sub in ast.walk(tree):
                names = [a.name for a in sub.names] if isinstance(sub, ast.Import) else \
                    [f"{sub.module}.{a.name}" for a in sub.names] if isinstance(sub, ast.ImportFrom) and sub.module \
                    else []
                out += [(t, node.lineno) for n in names if (t := _resolve(n))]
    return out


def _op_package_imports(mod: str, graph=None) -> list[str]:
    """Where a module imports an op package (a module inside one, or the package ``fastpath_lib`` itself, whose
    ``__init__`` imports them), at module level, inside a function, or in a probe's code string."""
    edges = [(t, line) for t, _, line in (graph or GRAPH)[mod]] + _code_strings(mod)
    return [f"line {line}: fastpath_lib.{t}" for t, line in edges
            if t == "__init__" or t.split(".")[0] in OP_PACKAGES]


@pytest.mark.parametrize("mod", sorted(m for m in MODULES if _part(m) == "bench"))
def test_bench_imports_no_op_package(mod):
    """The bench knows ops only through their registered specs (the whiteboard's bench row): no bench module imports
    an op package, not even inside a function or in the code a child process runs."""
    found = _op_package_imports(mod)
    assert not found, f"fastpath_lib/{MODULES[mod].relative_to(PKG)} imports an op package: " + "; ".join(found)


def test_the_op_package_rule_can_fail():
    """The op packages are found from the source, and a planted import of one (or of the package) is reported."""
    assert {"rmsnorm", "fused"} <= set(OP_PACKAGES), OP_PACKAGES
    planted = dict(GRAPH, **{"bench.report": [("rmsnorm.limits", "MAX_COLS", 3), ("__init__", "", 4)]})
    assert _op_package_imports("bench.report", planted) == ["line 3: fastpath_lib.rmsnorm.limits",
                                                             "line 4: fastpath_lib.__init__"]


def test_no_import_cycle():
    """Depth-first search over every import (module level and inside functions)."""
    edges = {m: sorted({t for t, _, _ in GRAPH[m]}) for m in MODULES}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for t in edges[m]:
            if state.get(t) == 1:
                cycle = stack[stack.index(t):] + [t]
                pytest.fail("import cycle: " + " -> ".join(f"fastpath_lib.{c}" for c in cycle))
            if t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in edges:
        if m not in state:
            visit(m)


@pytest.mark.parametrize("mod", sorted(MODULES))
def test_no_private_name_imported_from_another_module(mod):
    for target, name, line in GRAPH[mod]:
        assert not name.startswith("_"), \
            f"fastpath_lib/{MODULES[mod].relative_to(PKG)}:{line} imports {name} from fastpath_lib.{target}"


@pytest.mark.parametrize("mod", sorted(MODULES))
def test_module_size(mod):
    n = len(MODULES[mod].read_text().splitlines())
    assert n <= MAX_LINES, f"fastpath_lib/{MODULES[mod].relative_to(PKG)} has {n} lines (at most {MAX_LINES})"


def test_the_rules_can_fail(tmp_path, monkeypatch):
    """A planted cycle and a planted forbidden import are found (the checks are not vacuous)."""
    monkeypatch.setitem(GRAPH, "eligibility", [("bench.harness", "", 1)])
    with pytest.raises(pytest.fail.Exception, match="the eligibility part imports"):
        test_part_imports_only_what_the_whiteboard_allows("eligibility")
    monkeypatch.setitem(GRAPH, "runtime", [("routing", "", 1)])
    monkeypatch.setitem(GRAPH, "routing", [("runtime", "", 1)])
    with pytest.raises(pytest.fail.Exception, match="import cycle"):
        test_no_import_cycle()


def test_the_whiteboard_names_only_modules_that_exist():
    """Every pattern of :data:`PARTS` and every module of :data:`BENCH_OUTCOME` names a module of the package."""
    for part, patterns in PARTS.items():
        for pat in patterns:
            assert any(fnmatch.fnmatchcase(m, pat) for m in MODULES), f"PARTS[{part!r}] names {pat!r}: no such module"
    assert BENCH_OUTCOME <= set(MODULES), sorted(BENCH_OUTCOME - set(MODULES))
    assert all(any(fnmatch.fnmatchcase(m, p) for m in MODULES) for p in TRITON_IMPORTERS), TRITON_IMPORTERS


def _imports_triton(mod: str) -> bool:
    for node in ast.walk(ast.parse(MODULES[mod].read_text())):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
        if any(n == "triton" or n.startswith("triton.") for n in names):
            return True
    return False


def test_triton_is_imported_only_where_the_whiteboard_says():
    """The contributors' page's sentence on where Triton is imported holds: :data:`TRITON_IMPORTERS`, exactly."""
    found = {m for m in MODULES if _imports_triton(m)}
    unlisted = sorted(m for m in found if not any(fnmatch.fnmatchcase(m, p) for p in TRITON_IMPORTERS))
    stale = sorted(p for p in TRITON_IMPORTERS if not any(fnmatch.fnmatchcase(m, p) for m in found))
    assert not unlisted and not stale, f"import Triton but are not listed: {unlisted}; listed, no Triton: {stale}"


def _body(mod: str, name: str) -> list[str]:
    """The statements of a module-level function, its docstring and imports left out, as AST dumps."""
    fn = next(n for n in ast.parse(MODULES[mod].read_text()).body if isinstance(n, ast.FunctionDef) and n.name == name)
    return [ast.dump(s) for s in fn.body if not isinstance(s, (ast.Import, ast.ImportFrom))
            and not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]


def test_the_grader_lists_a_calls_tensors_with_its_agents_walk():
    """The grader's agent (grading/engine/runner.py) runs as source text in the learner's kernel and imports nothing of
    the grader; the grader compiles the agent's own ``_tensors`` from that file rather than keep a copy, so the tensors
    a call wrote are copied back into the same arguments on both sides."""
    import torch

    from fastpath_lib.grading.engine import remote

    defined = {n.name for n in ast.parse(MODULES["grading.engine.remote"].read_text()).body
               if isinstance(n, ast.FunctionDef)}
    assert "_tensors" not in defined and len(_body("grading.engine.runner", "_tensors")) >= 3
    assert remote._tensors.__code__.co_filename == str(remote.AGENT)
    x, y = torch.zeros(1), torch.ones(2)
    walked = remote._tensors((x, [y, [x]], {"b": y, "a": x}), {"k": y})  # two levels deep, a dict's keys sorted
    assert len(walked) == 5 and all(t is u for t, u in zip(walked, (x, y, x, y, y)))


# --- the grader's one scoring path (issue 28 item 7) ------------------------------------------------------------------

#: check modules that do not score through ``graded`` yet (none: a module put here must fail the rule, so the entry
#: goes as soon as the module follows it).
NOT_YET_GRADED: set[str] = set()
#: what only :mod:`fastpath_lib.grading.report.feedback` may name: the display of results and the copy of every part
# failed.
SCORING_INTERNALS = {"emit", "_emit", "failed_parts", "_failed_parts"}
CHECK_MODULES = sorted(m for m in MODULES if m.startswith("grading.checks.ex")
                       and any(isinstance(n, ast.FunctionDef) and n.name.startswith("check_")
                               for n in ast.parse(MODULES[m].read_text()).body))


def _scoring_problems(source: str) -> list[str]:
    """How a check module's source strays from the one scoring path: each public ``check_*`` ends in ``return
    graded(...)`` and defines no function of its own (no closure handed to a display helper) and catches nothing
    (no copy of ``graded``'s fallback); the module names none of :data:`SCORING_INTERNALS`."""
    tree, out = ast.parse(source), []
    for node in ast.walk(tree):
        name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
        names = [a.asname or a.name for a in node.names] if isinstance(node, ast.ImportFrom) else [name]
        out += [f"line {node.lineno}: names {n}" for n in names if n in SCORING_INTERNALS]
    for fn in tree.body:
        if not (isinstance(fn, ast.FunctionDef) and fn.name.startswith("check_")):
            continue
        inner = [n for n in ast.walk(fn) if n is not fn and isinstance(n, (ast.FunctionDef, ast.Lambda, ast.Try))]
        out += [f"{fn.name} defines a {type(n).__name__.lower()} (line {n.lineno})" for n in inner]
        last = fn.body[-1]
        call = last.value if isinstance(last, ast.Return) else None
        callee = getattr(call, "func", None)
        if not (isinstance(call, ast.Call) and getattr(callee, "id", getattr(callee, "attr", None)) == "graded"):
            out.append(f"{fn.name} does not end in return graded(...)")
    return out


@pytest.mark.parametrize("mod", CHECK_MODULES)
def test_every_check_scores_through_graded(mod):
    """Every check builds its parts through ``feedback.graded``: one place turns a learner's exception into the
    feedback of every part, and one place shows the results (issue 28 item 7)."""
    problems = _scoring_problems(MODULES[mod].read_text())
    if mod in NOT_YET_GRADED:
        assert problems, f"{mod} scores through graded now: take it out of NOT_YET_GRADED"
    else:
        assert not problems, f"fastpath_lib/{MODULES[mod].relative_to(PKG)}: " + "; ".join(problems)


def _proxy_slots() -> set[str]:
    cls = next(n for n in ast.parse(MODULES["grading.engine.remote"].read_text()).body
               if isinstance(n, ast.ClassDef) and n.name == "Proxy")
    slots = next(s.value for s in cls.body if isinstance(s, ast.Assign) and s.targets[0].id == "__slots__")
    return set(ast.literal_eval(slots))


def _proxy_reads(source: str, slots: set[str]) -> list[str]:
    """Where ``source`` reads a Proxy's slot (``x._root``, ``getattr(x, "_root")``) or tells a Proxy by its class
    name instead of ``remote.is_proxy``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in slots:
            out.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Constant) and node.value in slots | {"Proxy"}:
            out.append(f"line {node.lineno}: {node.value!r}")
    return out


def test_only_remote_reads_a_proxys_slots():
    """A Proxy's slots are read by :mod:`fastpath_lib.grading.engine.remote` alone; every other module asks it
    (``remote.is_proxy``, ``remote.session``, ``remote.root``, ``remote.code``)."""
    slots = _proxy_slots()
    assert {"_session", "_root", "_code"} <= slots
    found = {m: _proxy_reads(p.read_text(), slots) for m, p in MODULES.items() if m != "grading.engine.remote"}
    assert not any(found.values()), {m: f for m, f in found.items() if f}


def test_the_runner_and_the_cli_import_no_check_module():
    """The agent in the learner's kernel (grading/engine/runner.py) imports nothing of the grader; the CLI reaches a
    check only through the registry (``registry.CHECKS``, imported by name), never by importing a check module."""
    runner = sorted({t for t, _, _ in GRAPH["grading.engine.runner"] if t.startswith("grading")})
    assert not runner, f"grading/engine/runner.py imports {runner}"
    cli = sorted({t for t, _, _ in GRAPH["grading.engine.cli"] if t in CHECK_MODULES or t == "exercises"})
    assert not cli, f"grading/engine/cli.py imports the check modules {cli}: find them through registry.CHECKS"
    assert any(t == "grading.registry" and n == "CHECKS" for t, n, _ in GRAPH["grading.engine.cli"])


def _private_reads(mod: str, source: str) -> list[str]:
    """``module._name`` reads in ``source`` of a module bound to another kit module (dunder names aside)."""
    tree, bound = ast.parse(source), {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname and _resolve(a.name):
                    bound[a.asname] = _resolve(a.name)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                target = _resolve(f"{node.module}.{a.name}")
                if target and target != _resolve(node.module):
                    bound[a.asname or a.name] = target
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            base, attr = node.value, node.attr
        elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "getattr" and len(node.args) >= 2 \
                and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
            base, attr = node.args[0], node.args[1].value
        else:
            continue
        if attr.startswith("_") and not attr.startswith("__") and isinstance(base, ast.Name) \
                and bound.get(base.id, mod) != mod:
            out.append(f"line {node.lineno}: {base.id}.{attr} (fastpath_lib.{bound[base.id]})")
    return out


@pytest.mark.parametrize("mod", sorted(m for m in MODULES if m.startswith("grading")))
def test_no_private_name_read_from_another_module(mod):
    """Inside the grader, no module reads another's private names, by import (the test above) or as an attribute
    (``borrowed._code_of``, ``getattr(remote, "_tensors")``)."""
    found = _private_reads(mod, MODULES[mod].read_text())
    assert not found, f"fastpath_lib/{MODULES[mod].relative_to(PKG)}: " + "; ".join(found)


def test_the_grader_rules_can_fail():
    """Planted breaks of each rule above are found."""
    closure = ("def check_x(f, *, show=True):\n    def run():\n        f()\n"
               "    return emit([part('ex', 'p', run)], show)\n")
    inline = ("from fastpath_lib.grading.report.feedback import graded, failed_parts\n"
              "def check_x(f, *, show=True):\n    try:\n        r = f()\n    except Exception as e:\n"
              "        r = failed_parts('ex', ['p'], e)\n    return graded('ex', ['p'], lambda: r, show=show)\n")
    assert _scoring_problems(closure) == ["line 4: names emit", "check_x defines a functiondef (line 2)",
                                          "check_x does not end in return graded(...)"]
    assert _scoring_problems(inline)[:2] == ["line 1: names failed_parts", "line 6: names failed_parts"]
    assert {"check_x defines a try (line 3)", "check_x defines a lambda (line 7)"} <= set(_scoring_problems(inline))
    assert not _scoring_problems("def check_x(f, *, show=True):\n    return graded('ex', ('p',), _grade, f, show=show)")
    assert len(_proxy_reads("r = fn._root\ns = getattr(fn, '_session')\nb = type(fn).__name__ == 'Proxy'",
                            _proxy_slots())) == 3
    planted = ("from fastpath_lib.grading.rules import borrowed\nfrom fastpath_lib.grading.engine import sources as S\n"
               "S._x\ngetattr(borrowed, '_code_of')(f)\nx._y")
    assert len(_private_reads("grading.checks.ex01_reference", planted)) == 2


#: The grading package's rooms, top to bottom: a module imports its own room, the rooms below it and the floor
#: (``grading`` itself: registry, vocabulary, materials, given), never a room above it, but for the seams named here.
ROOMS = ("checks", "rules", "engine", "report")
#: (importing module, imported module): each an upward arrow kept on purpose, with why.
ROOM_SEAMS = {
    ("grading.report.feedback", "grading.engine.remote"): "feedback words the answer channel's error",
    ("grading.registry", "grading.rules.mutants"): "exercise 04's parts are its mutant categories",
}


def _room(mod: str) -> int:
    """0..3 for the rooms of :data:`ROOMS`, 4 for the floor."""
    parts = mod.split(".")
    return ROOMS.index(parts[1]) if len(parts) > 1 and parts[1] in ROOMS else len(ROOMS)


def _upward(graph) -> dict[tuple[str, str], int]:
    return {(m, t): line for m, edges in graph.items() if m.startswith("grading")
            for t, _, line in edges if t.startswith("grading") and _room(t) < _room(m)}


def test_grading_rooms_import_downward_only():
    """checks over rules over engine over report over the floor (the package docstring draws it)."""
    grading = sorted(p.parent.name for p in (PKG / "grading").glob("*/__init__.py"))
    assert grading == sorted(ROOMS), grading
    up = _upward(GRAPH)
    unexplained = {k: v for k, v in up.items() if k not in ROOM_SEAMS}
    assert not unexplained, f"upward imports in the grading package (module, target): line {unexplained}"
    assert set(ROOM_SEAMS) <= set(up), f"seams no longer used: {set(ROOM_SEAMS) - set(up)}"
    planted = dict(GRAPH, **{"grading.report.gradescope": [("grading.checks.ex01_reference", "", 1)]})
    assert ("grading.report.gradescope", "grading.checks.ex01_reference") in _upward(planted)
