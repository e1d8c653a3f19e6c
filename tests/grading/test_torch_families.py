"""The forbidden torch operators are read from the installed torch's registry (issue 41, "Forbidden computations are
a typed list"): every operator of the registry that normalizes or computes a softmax is refused in the answers that
must write one, under every name an answer can call it by, so a later torch cannot open a hole."""

from __future__ import annotations

import pytest
import torch

from fastpath_lib.grading.checks import ex01_reference, ex08_capstone
from fastpath_lib.grading.engine import sources
from fastpath_lib.grading.rules import borrowed, torch_families

_EX01 = ex01_reference._REFERENCE
_EX08 = {op: ex08_capstone._op(op)[1] for op in ("softmax", "log_softmax", "layer_norm")}


def _refused(body: str, forbidden, root: str = "mine") -> str | None:
    with sources.using(["import torch\nimport torch.nn.functional as F", f"def {root}(x):\n    return {body}"]):
        return borrowed.source_problem(root, forbidden)


def _net(name: str) -> str | None:
    """A wider net than the families' rule, independent of it: any registry name that mentions a norm or a softmax
    or attention."""
    low = name.lower()
    if "softm" in low or "attention" in low:
        return "softmax"
    return "normalization" if "norm" in low else None


def test_every_registry_operator_of_a_family_is_refused_in_its_exercises():
    """Walk the installed torch's registry: each operator the net catches is refused, as ``torch.ops.<namespace>``
    and as ``torch.<name>`` where torch has it, by the check that asks for its family (ex01 for a norm, ex08's
    softmax for a softmax), unless it is one of the two kinds an honest reference may use: a reduction that returns
    a norm (it takes ``keepdim``) or a random sampler (``normal``: it takes a ``generator``, or a mean and std)."""
    import torch._inductor.inductor_prims  # noqa: F401  (what an answer may load first: Inductor's prims, torch.onnx's ops)
    import torch.onnx  # noqa: F401

    from fastpath_lib.rmsnorm import native_override

    forbid = {"normalization": _EX01, "softmax": _EX08["softmax"]}
    holes, spared = [], []
    with native_override.register("CPU"):  # a torch/_native override registers operators of its own
        names = {s.name for s in torch._C._jit_get_all_schemas()}
        assert {"onnx::Attention", "prims::prepare_softmax_online"} <= names and any("_native::" in n for n in names)
        for schema in torch._C._jit_get_all_schemas():
            ns, name = schema.name.split("::", 1)
            fam = _net(name)
            if fam is None:
                continue
            args = {a.name for a in schema.arguments}
            if fam == "normalization" and ("keepdim" in args or "generator" in args or {"mean", "std"} <= args
                                          or name in torch_families.REDUCTIONS()):
                spared.append(name)
                continue
            if not _refused(f"torch.ops.{ns}.{name}(x)", forbid[fam]):
                holes.append(f"torch.ops.{ns}.{name}")
            if hasattr(torch, name) and not _refused(f"torch.{name}(x)", forbid[fam]):
                holes.append(f"torch.{name}")
    assert not holes, f"operators of a forbidden family an answer may call: {sorted(set(holes))}"
    assert {"linalg_vector_norm", "norm", "normal"} <= set(spared)  # the net reached the spared kinds


@pytest.mark.parametrize("body, forbidden", [
    ("torch._fused_rms_norm(x.double(), [x.shape[-1]], None, 1e-6)[0]", _EX01),  # the issue's ex01 answer
    ("torch.native_layer_norm(torch.cat([x, -x], -1), [2 * x.shape[-1]], None, None, 1e-6)[0]", _EX01),
    ("torch.nn.RMSNorm(x.shape[-1])(x)", _EX01),
    ("torch._safe_softmax(x.double(), -1)", _EX08["softmax"]),  # the issue's ex08 answer
    ("torch._masked_softmax(x, torch.zeros_like(x, dtype=torch.bool), -1, None)", _EX08["log_softmax"]),
    ("F.scaled_dot_product_attention(x[..., None], torch.ones_like(x)[..., None], torch.eye(x.shape[-1]))",
     _EX08["softmax"]),
    ("torch.rms_norm(x - x.mean(-1, keepdim=True), [x.shape[-1]])", _EX08["layer_norm"]),
])
def test_the_issues_answers_are_refused(body, forbidden):
    assert _refused(body, forbidden), body


@pytest.mark.parametrize("body, forbidden", [
    ("x.double() * torch.rsqrt(x.double().pow(2).mean(-1, keepdim=True) + 1e-6)", _EX01),
    ("x / torch.sqrt(torch.linalg.vector_norm(x, dim=-1, keepdim=True) ** 2 / x.shape[-1] + 1e-6)", _EX01),
    ("(x - torch.logsumexp(x, -1, keepdim=True)).exp()", _EX08["softmax"]),
])
def test_an_answer_written_out_is_not_refused(body, forbidden):
    """Building blocks stay allowed: a norm that is a reduction, ``logsumexp``."""
    assert _refused(body, forbidden) is None


def test_in_a_notebook_the_watch_catches_the_family_under_any_name():
    x = torch.randn(3, 8, dtype=torch.float64)
    for fn in (lambda x: torch._fused_rms_norm(x, [8], None, 1e-6)[0],
               lambda x: torch.ops.aten._fused_rms_norm.default(x, [8], None, 1e-6)[0]):
        with pytest.raises(borrowed.Fail, match="_fused_rms_norm"):
            borrowed.run(fn, (x,), _EX01)
    with pytest.raises(borrowed.Fail, match="_safe_softmax"):
        borrowed.run(lambda x: torch.ops.aten._safe_softmax(x, -1), (x,), _EX08["softmax"])
    assert borrowed.run(lambda x: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6), (x,), _EX01) is not None
