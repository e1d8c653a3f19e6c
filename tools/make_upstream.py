"""Generate the kit's vLLM patch (``upstream/vllm_rms_norm_triton.patch``) from the files under ``upstream/vllm/``.

    python tools/make_upstream.py           # (re)write the patch
    python tools/make_upstream.py --check   # exit 1 with a diff when the patch is out of date

The patch is a unified diff (``git apply`` / ``patch -p1``) against the files of the vLLM release the kit pins
(``constraints.txt``), read from its wheel in ``<venv>/vllm-site`` (``./kit setup`` installs it). It changes:

* ``vllm/kernels/triton/layernorm.py`` (new): ``"triton"`` providers of vLLM's IR ops ``rms_norm`` and
  ``fused_add_rms_norm`` in the form of ``vllm/kernels/triton/activation.py`` (``register_impl("triton",
  supported=..., supports_args=...)``, a ``torch.library.triton_op`` launching the kernel through ``wrap_triton``);
* ``vllm/kernels/triton/__init__.py``: imports it beside ``activation``, as vLLM imports every provider
  (``current_platform.import_ir_kernels()`` imports ``vllm.kernels``);
* ``tests/kernels/core/test_rms_norm_triton.py`` (new): vLLM-style tests of the providers.

No config field and no change to a layer: the platform's priority (``get_default_ir_op_priority``) or the
``ir_op_priority`` option chooses the provider, and under Inductor the IR op stays in the graph for vLLM's fusion
passes. The new files are written as vLLM would ship them, under ``upstream/vllm/`` at vLLM's paths; nothing in them
names the kit. ``tests/upstream/test_vllm_upstream.py`` checks that the patch is current, applies, passes ruff and mypy
with vLLM's settings, and runs its tests under Triton's interpreter on the CPU.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "upstream" / "vllm_rms_norm_triton.patch"
#: The new files, at their paths in vLLM's tree.
SOURCES = ROOT / "upstream" / "vllm"
WIDTH = 88
#: vLLM's ruff rules (its pyproject.toml, ``[tool.ruff.lint] select``), checked on every patched file.
RUFF_SELECT = "E,F,UP,B,ISC,SIM,I,G"

NEW_FILE = "vllm/kernels/triton/layernorm.py"
TEST_FILE = "tests/kernels/core/test_rms_norm_triton.py"
#: The wheel's files the patch changes, and the new files, in the patch's order.
CHANGED = ("vllm/kernels/triton/__init__.py", NEW_FILE, TEST_FILE)

#: Edits of the wheel's files: (file, anchor that must occur once, replacement).
EDITS = (
    ("vllm/kernels/triton/__init__.py", '''from . import activation

__all__ = ["activation"]
''', '''from . import activation, layernorm

__all__ = ["activation", "layernorm"]
'''),
)


def vllm_site() -> Path:
    """The pinned vLLM wheel's files (as :func:`fastpath_lib.vllm_plugin.vllm_site`, without importing the kit)."""
    return Path(os.environ.get("FASTPATH_VLLM_SITE") or Path(sys.prefix) / "vllm-site")


def patched_files(site: Path | None = None) -> dict[str, tuple[str, str]]:
    """Each file of :data:`CHANGED`: ``(text in the wheel or "" for a new file, text after the patch)``."""
    site = site or vllm_site()
    if not (site / "vllm").is_dir():
        raise SystemExit(f"vLLM's wheel is not in {site}: ./kit setup installs it (the patch is made against it)")
    files = {}
    for rel in CHANGED:
        new = rel in (NEW_FILE, TEST_FILE)
        old = "" if new else (site / rel).read_text()
        files[rel] = [old, (SOURCES / rel).read_text() if new else old]
    for rel, anchor, replacement in EDITS:
        count = files[rel][1].count(anchor)
        if count != 1:
            raise SystemExit(f"{rel} of the pinned vLLM has the anchor {count} times, not once: update "
                             f"tools/make_upstream.py\n{anchor}")
        files[rel][1] = files[rel][1].replace(anchor, replacement)
    return {rel: (old, new) for rel, (old, new) in files.items()}


def render(site: Path | None = None) -> str:
    """The whole patch, in git's format (``git apply`` and ``patch -p1`` take it)."""
    return git_diff(patched_files(site))


def git_diff(files: dict[str, tuple[str, str]]) -> str:
    """``{path: (old text, new text)}`` as a diff in git's format (an empty old text: a new file); the PyTorch
    patch's generator writes its diff with it too."""
    out = []
    for rel, (old, new) in files.items():
        out.append(f"diff --git a/{rel} b/{rel}\n")
        if not old:
            out.append("new file mode 100644\n")
        body = list(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                         "/dev/null" if not old else f"a/{rel}", f"b/{rel}", n=3))
        out += [line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in body]
    return "".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 with a diff when the patch is out of date")
    args = ap.parse_args(argv)
    new = render()
    if args.check:
        old = TARGET.read_text() if TARGET.exists() else ""
        if old != new:
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True), str(TARGET),
                                                       "generated"))
            return 1
        return 0
    TARGET.parent.mkdir(exist_ok=True)
    TARGET.write_text(new)
    print(f"wrote {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
