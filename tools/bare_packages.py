"""Run Python as if only the GPU machine's bare package set were installed.

The GPU machine has torch, triton, numpy, pandas, matplotlib, pytest and hypothesis (and their dependencies), and
nothing else: no jupyter, nbval, nbformat, ipywidgets or playwright. This wrapper hides every other installed
distribution from ``import`` (and pytest's plugin auto-loading), then runs a module or a script, so a CPU machine can
check that a command works there:

    python tools/bare_packages.py -m pytest -m gpu tests
    python tools/bare_packages.py -m fastpath_lib evidence --dry-run

Only third-party top-level modules are hidden; the standard library and ``fastpath_lib`` stay importable.
"""

from __future__ import annotations

import importlib.abc
import importlib.metadata as md
import os
import re
import runpy
import sys

__all__ = ["BARE", "allowed_distributions", "hidden_modules", "install"]

#: What the GPU machine has (with their dependencies).
BARE = ("torch", "triton", "numpy", "pandas", "matplotlib", "pytest", "hypothesis")
_ALWAYS = ("pip", "six", "fastpath-kit")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def allowed_distributions(roots=BARE) -> set[str]:
    """The normalized names of ``roots`` and everything they require (extras excluded)."""
    dists = {_norm(d.metadata["Name"]): d for d in md.distributions()}
    seen: set[str] = set()
    stack = [*roots, *_ALWAYS]
    while stack:
        n = _norm(stack.pop())
        if n in seen or n not in dists:
            continue
        seen.add(n)
        for req in dists[n].requires or []:
            if "extra" in req.partition(";")[2]:
                continue
            m = re.match(r"[A-Za-z0-9_.\-]+", req)
            if m:
                stack.append(m.group(0))
    return seen


def hidden_modules(roots=BARE) -> set[str]:
    """Top-level module names that belong only to distributions outside the bare set."""
    allowed = allowed_distributions(roots)
    hidden = set()
    for module, owners in md.packages_distributions().items():
        if not any(_norm(o) in allowed for o in owners):
            hidden.add(module)
    return hidden - {"fastpath_lib", "tools", "tests"}


class _Hide(importlib.abc.MetaPathFinder):
    def __init__(self, names):
        self.names = frozenset(names)

    def find_spec(self, fullname, path=None, target=None):
        if fullname.partition(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {fullname!r} (hidden: not in the bare package set)",
                                      name=fullname)
        return None


def install(roots=BARE) -> set[str]:
    """Hide the non-bare modules in this process and in pytest's plugin auto-loading; returns the hidden names."""
    names = hidden_modules(roots)
    sys.meta_path.insert(0, _Hide(names))
    allowed = allowed_distributions(roots)
    blocked = [ep.name for ep in md.entry_points(group="pytest11") if ep.dist and _norm(ep.dist.name) not in allowed]
    if blocked:  # pytest would import these plugins through their entry points; tell it not to
        os.environ["PYTEST_ADDOPTS"] = " ".join([os.environ.get("PYTEST_ADDOPTS", "")]
                                                + [f"-p no:{n}" for n in blocked]).strip()
    return names


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    install()
    if argv[0] == "-m":
        sys.argv = [argv[1], *argv[2:]]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(argv)
        runpy.run_path(argv[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
