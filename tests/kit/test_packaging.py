"""Set-up files agree with each other, and the public names are exactly the documented ones."""

from __future__ import annotations

import pathlib
import re

import tomllib

import fastpath_lib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _name(req: str) -> str:
    return re.split(r"[<>=!~\[; ]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _pyproject_deps() -> set[str]:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {_name(r) for r in meta["dependencies"] + meta["optional-dependencies"]["dev"]}


def _environment_yml_deps() -> set[str]:
    text = (ROOT / "environment.yml").read_text()
    pip_block = text.split("- pip:", 1)[1]
    return {_name(line.split("- ", 1)[1]) for line in pip_block.splitlines()
            if line.strip().startswith("- ") and not line.strip().startswith("- -")}


def test_environment_yml_matches_pyproject():
    assert _environment_yml_deps() == _pyproject_deps()


def test_every_dependency_is_pinned():
    pins = {_name(line) for line in (ROOT / "constraints.txt").read_text().splitlines() if "==" in line}
    assert _pyproject_deps() <= pins, f"unpinned: {_pyproject_deps() - pins}"
    assert "torch==2.13.0\n" in (ROOT / "constraints.txt").read_text()  # the CPU build on disk, not a CUDA download


def test_the_python_floor_is_what_the_pins_need():
    """``requires-python`` is the highest floor among the pinned packages' own ``Requires-Python`` (read from the
    installed ones at their pinned versions), so pip refuses an interpreter the pins cannot install on."""
    import importlib.metadata

    floors = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if "==" not in line or line.lstrip().startswith("#"):
            continue
        name, version = _name(line), line.split("==", 1)[1].split(";")[0].strip()
        try:
            meta = importlib.metadata.metadata(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        if meta["Version"] != version:
            continue
        for floor in re.findall(r">=\s*(\d+)\.(\d+)", meta.get("Requires-Python") or ""):
            floors[name] = max(floors.get(name, (0, 0)), tuple(map(int, floor)))
    assert floors, "no pinned package installed at its pin"
    need = max(floors.values())
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert declared == f">={need[0]}.{need[1]}", (declared, {k: v for k, v in floors.items() if v == need})
    assert f"python={need[0]}.{need[1]}" in (ROOT / "environment.yml").read_text()


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    assert "./kit test" in readme and "./kit lab" in readme
    assert "./kit test" in (ROOT / ".ci" / "run").read_text()
    assert "./kit test" in (ROOT / ".github" / "workflows" / "ci.yml").read_text()


def test_public_names_are_exactly_the_documented_ones():
    assert sorted(fastpath_lib.__all__) == ["Decision", "RMSNorm", "explain", "force_fallback", "fused_add_rms_norm",
                                            "fused_add_rms_norm_", "record_routes", "rms_norm", "use_interpreter"]
    for name in fastpath_lib.__all__:
        assert getattr(fastpath_lib, name).__doc__, f"{name} has no docstring"


def test_predicate_module_has_no_gpu_imports():
    for path in ("rmsnorm/predicate.py", "rmsnorm/limits.py", "rmsnorm/layout.py", "rmsnorm/thresholds.py",
                 "eligibility.py", "boundary.py", "cases.py", "runtime.py", "routing.py"):
        src = (ROOT / "fastpath_lib" / path).read_text()
        assert not re.search(r"^\s*(import|from)\s+triton", src, re.M), path
