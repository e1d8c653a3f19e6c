"""The house rules of ``fastpath_lib``, read from the source: the whiteboard of parts (README.md, "The whiteboard"
below the table of parts), no import cycle (imports inside functions included), no private name imported across
modules, no module over 500 lines, Triton imported only by the modules that run or compile Triton code, and the
grader's one deliberate copy of its agent's code (the tensor walk) kept identical to it.
"""

from __future__ import annotations

import ast
import fnmatch
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "fastpath_lib"
MAX_LINES = 500

#: part -> module patterns (dotted, relative to fastpath_lib), in the whiteboard's order.
PARTS = {
    "eligibility": ["eligibility"],
    "runtime": ["runtime"],
    "spec": ["opspec"],
    "predicate": ["rmsnorm.predicate", "rmsnorm.layout", "rmsnorm.limits", "rmsnorm.thresholds", "rmsnorm.capture",
                  "fused.predicate", "fused.reference"],
    "kernels": ["rmsnorm.kernels", "rmsnorm.launch", "rmsnorm.compiled", "fused.kernels", "fused.launch"],
    "op": ["rmsnorm.op", "rmsnorm.module", "rmsnorm.sharding", "rmsnorm", "routing", "__init__", "fused.op", "fused",
           "vllm_plugin"],
    "support": ["cases", "boundary", "testing", "selftest", "traffic", "fused.cases", "fused.spec", "rmsnorm.cost"],
    "bench": ["bench", "bench.*"],
    "specs": ["rmsnorm.spec", "fused.op_spec"],
    "grading": ["grading", "grading.*", "exercises"],
    "widgets": ["widgets"],
    "cli": ["cli", "__main__", "bench.cli", "grading.cli"],
}
#: part -> parts it may import (the whiteboard); every part may import the runtime.
MAY_IMPORT = {
    "eligibility": set(),
    "runtime": set(),
    "spec": set(),
    "predicate": {"eligibility"},
    "kernels": {"predicate"},
    "op": {"predicate", "kernels", "eligibility"},
    "support": {"predicate", "eligibility", "kernels"},
    "bench": {"op", "kernels", "predicate", "support", "eligibility", "spec"},
    # an op's spec holds its own cost model (``rmsnorm.cost``, the fused op's in its spec): from bench only the
    # outcome words, so no arrow runs back up from a spec to the timers that read it
    "specs": {"op", "kernels", "predicate", "support", "eligibility", "spec", "bench:outcome"},
    "grading": {"predicate", "support", "eligibility", "bench:outcome"},  # bench: only BENCH_OUTCOME
    "widgets": {"op", "predicate", "support", "eligibility"},
    "cli": {"*"},
}
#: the pieces of bench that grading may use: the outcome words and the GPU-run rule (schema), the outcome rule
#: (analysis) and the matrix's coverage rule (matrix), one source each.
BENCH_OUTCOME = {"bench.schema", "bench.analysis", "bench.matrix"}
#: the modules that import Triton (patterns): each operator's kernels, the ahead-of-time compiler, the self-test's
#: probe kernel, the interpreter's traffic checker, the bench timers (``triton.testing``), and the grading kernels
#: (mutants, exercise 02's check, the grader's run of a learner's kernel as data).
TRITON_IMPORTERS = {"*.kernels", "rmsnorm.compiled", "selftest", "traffic", "bench.ophost", "bench.timing",
                    "grading.mutant_kernels", "grading.ex02_kernel", "grading.kernel_run"}


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
    """The README's sentence on where Triton is imported holds: exactly :data:`TRITON_IMPORTERS` import it."""
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
    """The grader's agent (grading/runner.py) runs as source text in the learner's kernel and imports nothing of the
    grader; the grader compiles the agent's own ``_tensors`` from that file rather than keep a copy, so the tensors a
    call wrote are copied back into the same arguments on both sides."""
    import torch

    from fastpath_lib.grading import remote

    defined = {n.name for n in ast.parse(MODULES["grading.remote"].read_text()).body if isinstance(n, ast.FunctionDef)}
    assert "_tensors" not in defined and len(_body("grading.runner", "_tensors")) >= 3
    assert remote._tensors.__code__.co_filename == str(remote.AGENT)
    x, y = torch.zeros(1), torch.ones(2)
    walked = remote._tensors((x, [y, [x]], {"b": y, "a": x}), {"k": y})  # two levels deep, a dict's keys sorted
    assert len(walked) == 5 and all(t is u for t, u in zip(walked, (x, y, x, y, y)))
