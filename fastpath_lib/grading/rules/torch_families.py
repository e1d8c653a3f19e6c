"""The families of torch operators an answer must not call, read from the installed torch, not typed.

An exercise that asks for a reference (exercise 01's float64 RMSNorm, exercise 08's reference and kernel for a second
operator) forbids torch's own implementation of what it asks for. Naming that implementation is not enough: torch
computes each operator under several names (``torch.rms_norm``, ``torch._fused_rms_norm``, ``torch.ops.aten.*``,
``torch.special.softmax``, ``torch._safe_softmax``, ``torch._masked_softmax``), and one member of a family computes
another (``layer_norm`` of ``[x, -x]`` is ``rms_norm`` of ``x``; ``softmax`` is ``exp(log_softmax)``). So a check
forbids the whole *family* of what it asks for, and the family is decided by what an operator computes, read from
the operator registry of the torch that is installed (``torch._C._jit_get_all_schemas()``: every namespace, ``aten``,
``quantized``, ``prims``, ...), so that an operator a later torch adds joins its family by itself:

* **normalization**: operators that return their input rescaled by a statistic of itself. Their names carry
  ``norm`` (``rms_norm``, ``_fused_rms_norm``, ``layer_norm``, ``native_layer_norm``, ``group_norm``, ``batch_norm``
  and its ``cudnn``/``native``/``quantized`` forms, ``instance_norm``, ``_weight_norm``, ``renorm``, their backward
  operators; ``torch.nn.functional.normalize`` and ``local_response_norm`` in Python). Not in it: the *reductions*
  that return a norm (``norm``, ``linalg_vector_norm``, ``frobenius_norm``, ...: every overload-set of theirs has a
  ``keepdim`` argument, and their ``_foreach_`` forms), which an honest reference may use as it uses ``sum``; and
  ``normal`` (a random distribution).
* **softmax**: operators whose result is a softmax of their input or its logarithm (``softmax``, ``_softmax``,
  ``_safe_softmax``, ``_masked_softmax``, ``log_softmax``, ``special_softmax``, their sparse, quantized and backward
  forms; ``softmin`` and ``gumbel_softmax`` in Python), and attention (``scaled_dot_product_attention`` and its
  kernels), which returns ``softmax(q @ k.T) @ v``: the softmax itself when ``v`` is the identity. Not in it:
  ``logsumexp`` and the losses, which return a reduction, not a distribution.

Each family holds the operators' registry names and every Python name that calls one: the functions and methods of
``torch``, ``torch.Tensor``, ``torch.nn.functional``, ``torch.special``, ``torch.linalg``, ``torch.sparse``,
``torch.nested``, torch's reference and decomposition modules, and the ``torch.nn`` module classes (``LayerNorm``,
``Softmax``, ``MultiheadAttention``).

>>> {"_fused_rms_norm", "native_layer_norm", "rms_norm"} <= names("normalization")
True
>>> {"_safe_softmax", "_masked_softmax", "softmin", "scaled_dot_product_attention"} <= names("softmax")
True
>>> "linalg_vector_norm" in names("normalization") or "vector_norm" in names("normalization")
False
>>> family_of("log_softmax"), family_of("layer_norm"), family_of("normalize"), family_of("sum")
('softmax', 'normalization', 'normalization', None)
"""

from __future__ import annotations

import functools
import importlib
import inspect
import re

import torch

__all__ = ["FAMILIES", "registry_ops", "family_of", "names", "operators", "python_functions", "REDUCTIONS",
           "jit_only", "layout_entries"]

#: what each family computes, as feedback says it
FAMILIES = {
    "normalization": "an operator that normalizes its input (torch's RMSNorm, LayerNorm, GroupNorm, BatchNorm, ...)",
    "softmax": "an operator that computes a softmax (softmax, log_softmax, their private forms, attention)",
}

# ``norm`` as a word part, not ``normal`` (a distribution) unless ``normalize``
_NORM = re.compile(r"norm(?!al(?!ize))", re.IGNORECASE)
_SOFTMAX = re.compile(r"softm(ax|in)|attention|scaled_dot", re.IGNORECASE)

#: the Python namespaces whose callables are read: (module name, prefix of their registry names, whether the module
#: implements registry operators under their own names; there a private helper that is no operator,
#: ``_normalize_start_end`` or ``_check_norm_dtype``, is not a member)
_PY_NAMESPACES = (("torch", "", False), ("torch.nn.functional", "", False), ("torch.special", "special_", False),
                  ("torch.linalg", "linalg_", False), ("torch.sparse", "_sparse_", False),
                  ("torch.nested", "_nested_", False), ("torch._C._nn", "", False),
                  ("torch._C._special", "special_", False), ("torch._C._linalg", "linalg_", False),
                  ("torch._C._VariableFunctions", "", False), ("torch._refs", "", True),
                  ("torch._refs.nn.functional", "", True), ("torch._refs.special", "special_", True),
                  ("torch._refs.linalg", "linalg_", True), ("torch._decomp.decompositions", "", True),
                  ("torch._prims", "", True))


@functools.cache
def registry_ops() -> dict[str, tuple]:
    """Every operator of the installed torch's registry, by name without namespace or overload, with its schemas."""
    ops: dict[str, list] = {}
    for schema in torch._C._jit_get_all_schemas():
        ops.setdefault(schema.name.split("::", 1)[-1], []).append(schema)
    for name in torch._C._dispatch_get_all_op_names():  # operators registered without a JIT schema
        ops.setdefault(name.split("::", 1)[-1].split(".")[0], [])
    return {k: tuple(v) for k, v in ops.items()}


def _is_reduction(name: str) -> bool:
    """A norm that is a reduction: some overload of it (or of the operator its ``_foreach_`` form applies per
    tensor) takes ``keepdim``."""
    base = name.removeprefix("_foreach_")
    schemas = registry_ops().get(base, ()) or registry_ops().get(name, ())
    return any(a.name == "keepdim" for s in schemas for a in s.arguments)


@functools.cache
def REDUCTIONS() -> frozenset[str]:  # noqa: N802 - a constant of the installed torch, computed once
    """The registry's norms that are reductions (returned, not applied): kept out of the normalization family."""
    return frozenset(n for n in registry_ops() if _NORM.search(n) and _is_reduction(n))


def _family_of_registry(name: str) -> str | None:
    if _SOFTMAX.search(name):
        return "softmax"
    if _NORM.search(name) and name not in REDUCTIONS():
        return "normalization"
    return None


def _candidates(name: str, prefix: str) -> tuple[str, ...]:
    """The registry names a Python function called ``name`` may implement (a decomposition of ``_safe_softmax`` is
    called ``safe_softmax``)."""
    bare = name.lstrip("_")
    return (prefix + name, name, prefix + bare, bare, "_" + bare)


def family_of(name: str, prefix: str = "") -> str | None:
    """The family of an operator or Python function called ``name`` (in a namespace whose registry names start with
    ``prefix``: ``torch.linalg.vector_norm`` is ``linalg_vector_norm``), or ``None``.

    A Python name that is a registry operator's (with or without the prefix) is that operator's; any other is
    judged by its name as an operator's would be (``softmin``, ``normalize``, ``LayerNorm``).
    """
    for candidate in _candidates(name, prefix):
        if candidate in registry_ops():
            return _family_of_registry(candidate)
    if name.lower().replace("_", "") in {r.replace("_", "") for r in REDUCTIONS()}:
        return None
    return _family_of_registry(name)


def _in_registry(name: str, prefix: str) -> bool:
    return any(c in registry_ops() for c in _candidates(name, prefix))


def _members(mod, prefix: str, internal: bool):
    """``(attribute, object, family)`` of the callables of one namespace that belong to a family."""
    for attr, obj in list(vars(mod).items()):
        if not callable(obj) or (attr.startswith("_") or internal) and not _in_registry(attr, prefix):
            continue
        fam = family_of(attr, prefix)
        if fam:
            yield attr, obj, fam


def _modules():
    for mod_name, prefix, internal in _PY_NAMESPACES:
        try:
            yield importlib.import_module(mod_name), prefix, internal
        except ImportError:  # a namespace this torch does not have
            continue


@functools.cache
def _python_members() -> dict[str, tuple[tuple[str, str], ...]]:
    """family -> ``(file, qualified name)`` of torch's Python functions in it (the ``forward`` of a module class)."""
    out: dict[str, set] = {f: set() for f in FAMILIES}
    classes = [c for c in vars(torch.nn).values() if isinstance(c, type) and issubclass(c, torch.nn.Module)]
    for cls in classes:
        fam = family_of(cls.__name__)
        if fam and inspect.isfunction(cls.__dict__.get("forward")):
            out[fam].add((inspect.getsourcefile(cls.forward), f"{cls.__name__}.forward"))
    for mod, prefix, internal in _modules():
        for _attr, obj, fam in _members(mod, prefix, internal):
            fn = inspect.unwrap(obj) if not isinstance(obj, type) else None
            code = getattr(fn, "__code__", None)  # torch.ops packets answer any attribute
            if inspect.iscode(code):
                out[fam].add((code.co_filename, getattr(code, "co_qualname", code.co_name)))
    return {f: tuple(sorted(v)) for f, v in out.items()}


@functools.cache
def names(family: str) -> frozenset[str]:
    """Every name under which the installed torch computes ``family``: its registry operators and the Python
    functions, Tensor methods and ``torch.nn`` classes that compute it."""
    if family not in FAMILIES:
        raise KeyError(f"{family!r}: one of {sorted(FAMILIES)}")
    found = {n for n in registry_ops() if _family_of_registry(n) == family}
    for mod, prefix, internal in (*_modules(), (torch.Tensor, "", False)):
        found |= {a for a, _obj, fam in _members(mod, prefix, internal) if fam == family}
    found |= {c.__name__ for c in vars(torch.nn).values()
              if isinstance(c, type) and issubclass(c, torch.nn.Module) and family_of(c.__name__) == family}
    return frozenset(found)


def operators(family: str) -> frozenset[str]:
    """The registry names (no namespace, no overload) of the installed torch's operators in ``family``."""
    return frozenset(n for n in registry_ops() if _family_of_registry(n) == family)


def python_functions(family: str) -> tuple[tuple[str, str], ...]:
    """``(file, qualified name)`` of the Python functions of the installed torch in ``family``."""
    return _python_members()[family]


def jit_only(family: str) -> frozenset[str]:
    """The operators of ``family`` that TorchScript registers outside the dispatcher (``prim::MKLDNNLayerNorm``): a
    refusal registered at the dispatcher does not reach them."""
    dispatched = {n.split("::", 1)[-1].split(".")[0] for n in torch._C._dispatch_get_all_op_names()}
    return frozenset(n for n in operators(family) if n not in dispatched)


#: the tensor layouts whose name an operator's name carries (``MKLDNNLayerNorm`` computes on oneDNN tensors)
_LAYOUT_WORDS = ("mkldnn",)


def layout_entries(names) -> frozenset[str]:
    """The dispatcher operators that bring data into the tensor layouts ``names`` compute on (each operator named
    for the layout: ``to_mkldnn``, ``mkldnn_linear``, ...; not the queries ``_is_mkldnn_*``): with them absent, an
    operator past the dispatcher that takes only such tensors has nothing to compute on."""
    words = {w for n in names for w in _LAYOUT_WORDS if w in n.lower()}
    dispatched = {n.split("::", 1)[-1].split(".")[0] for n in torch._C._dispatch_get_all_op_names()}
    return frozenset(n for n in dispatched if any(w in n.lower() for w in words) and not n.startswith("_is_"))
