"""Sentences of the docs about the kit's own rules, asserted against the code that applies them.

Each test reads the sentence from the page (or the exercise text) and the rule from the kit, so rewording one without
the other fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _flat(path: str) -> str:
    return " ".join((ROOT / path).read_text().split())


def _names(text: str) -> set[str]:
    return set(re.findall(r"`(\w+)`", text))


# --- the builtins a kernel may call: the grader's allow-list, out of what Triton's frontend provides -------------

def test_the_docs_builtin_lists_are_the_graders_and_the_rest_of_the_frontends():
    from triton.compiler.code_generator import CodeGenerator

    from fastpath_lib.grading.engine.compile_check import kernel_builtins

    accepted = set(kernel_builtins())
    refused = set(CodeGenerator.builtin_namespace) - accepted
    assert refused, "the grader accepts every builtin Triton's frontend provides: the docs say it refuses some"
    ref = re.search(r"of the Python builtins Triton's frontend provides a kernel, (.*?) \(the grader refuses the "
                    r"others it provides: (.*?)\);", _flat("docs/reference.md"))
    sandbox = re.search(r"one of the Python builtins the frontend provides a kernel that the grader accepts \((.*?); "
                        r"the frontend also provides (.*?), which the grader refuses\)",
                        _flat("docs/grading-sandbox.md"))
    assert ref and sandbox, "the sentences on a kernel's builtins moved: update this test"
    for m in (ref, sandbox):
        assert _names(m.group(1)) == accepted
        assert _names(m.group(2)) == refused
