"""What torch does for a learner's launcher in the grader: it allocates, views, copies and reads shapes, and computes
nothing else. The computation is the learner's Triton kernel's.

The grader's child that runs a learner's Triton source (:mod:`~fastpath_lib.grading.engine.kernel_run`) installs
:func:`install` after its own imports and before any of the learner's program runs. From then on every torch operator
outside the allow-list (:func:`operators`) refuses at the dispatcher, as :mod:`~fastpath_lib.grading.engine.absent`
refuses an exercise's forbidden families. For every overload, in every namespace, a refusing kernel is registered at
every dispatch key that has a kernel of torch's. No Python-level switch undoes it: turning the dispatch modes off
(``torch.utils._python_dispatch._disable_current_modes``), an alias of ``torch``, ``torch.ops``, ``redispatch`` and
``torch.compile`` all reach the same registrations. The handles' one reference is a default argument of an audit hook
(a function no code can remove or list; gc-tracked, so the refusal of walks of the garbage collector's objects keeps
it out of reach). While the grader grades, :mod:`~fastpath_lib.grading.engine.absent`'s preamble is already in the
process and its audit hook refuses walks of the garbage collector's objects; otherwise :func:`install` adds that
hook and the ``execve`` filter itself.

An operator is allowed when its schema or tags say it computes nothing from the values of its tensor arguments:

- **factories**: no tensor argument (``empty``, ``zeros``, ``full``, ``arange``), and the ``new_*`` and ``*_like``
  forms of a factory (``new_empty``, ``empty_like``), which read only the shape, dtype and device of their tensor;
- **views**: the result aliases an argument and writes none (``view``, ``as_strided``, ``transpose``, ``select``),
  and the ``inplace_view`` operators, which change a tensor's metadata (``set_``, ``t_``, ``as_strided_``);
- **copies**: :data:`COPIES` (a tensor's values written elsewhere as they are, or in another dtype: what Triton's
  interpreter runs to move a launch's arguments, and what ``.to``, ``.contiguous``, ``.clone`` and ``.reshape`` run)
  and the ``view_copy`` operators;
- **integers**: an operator with a kernel of its own that returns only integers (``_nnz``, ``sparse_dim``,
  ``q_zero_point``);
- **decompositions**: an operator whose only kernel of torch's is ``CompositeImplicitAutograd``
  (``reshape``, ``softmax``, ``rms_norm``, and ``sym_size``, ``stride``, ``numel``) runs as the operators it is
  written with, each refused or allowed on its own;
- and the operators an exercise's own launcher is asked to run (``allow``: exercise 02's backward sums the kernel's
  partial ``dw`` rows with ``sum``).

An operator that reads a value back (``item``, ``equal``: tagged ``data_dependent_output``) or draws at random
(``randn``, ``dropout``: tagged ``nondeterministic_seeded``) is refused whatever its kernels, a decomposition's
included, unless the exercise asks for it.
"""

import functools
import sys

#: The copy operators: a tensor's values written elsewhere unchanged (``copy_``, ``clone``), converted to another dtype
#: (``_to_copy``) or a constant written (``fill_``, ``zero_``); and ``_unsafe_view``, a view whose schema does not say
#: so (``reshape`` of a tensor it had to copy).
COPIES = frozenset({"copy_", "_copy_from", "_copy_from_and_resize", "_to_copy", "clone", "fill_", "zero_",
                    "_unsafe_view"})
#: Dispatch keys whose kernels only wrap another (autograd, tracing, batching, autocast, conjugate and negative views):
#: an operator with kernels at these and ``CompositeImplicitAutograd*`` only runs as its decomposition.
_WRAPPERS = ("debug", "Tracer", "Autograd", "ADInplaceOrView", "Functionalize", "Conjugate", "Negative",
             "ZeroTensor", "Batched", "FuncTorch", "Autocast", "BackendSelect", "Python", "PreDispatch",
             "CompositeImplicitAutograd")
_INTEGERS = {"int", "SymInt", "int[]", "SymInt[]"}


#: The feedback of a launcher that reads a tensor's values (``{why}``: what it ran), in the grader's record step and
#: wherever an operator that reads values back (``item``, ``equal``) is refused.
VALUE_READ = ("your launcher read a tensor's values ({why}): in the grader a launcher only shapes, allocates and "
              "launches; it runs on tensors that hold no values (device 'meta', with the inputs' shapes, dtypes and "
              "strides), and the grader replays what it allocated and launched on the real inputs")


def message(name: str, reads_values: bool = False) -> str:
    """The feedback of a refused operator ``name`` (``reads_values``: one that reads values back, such as ``item``)."""
    if reads_values:
        return VALUE_READ.format(why=f"torch's {name}")
    return (f"your launcher computes with torch outside your kernel (it runs torch's {name}): in the grader a "
            f"launcher only allocates, views, copies and launches; the computation is your Triton kernel's")


def reads_values(full_name: str) -> bool:
    """Whether ``ns::name.overload`` reads its tensors' values back (torch tags it ``data_dependent_output``)."""
    import torch

    ns, rest = full_name.split("::", 1)
    name, _, overload = rest.partition(".")
    try:
        found = torch._C._get_operation_overload(f"{ns}::{name}", overload)
    except RuntimeError:
        return False
    return bool(found) and torch.Tag.data_dependent_output in found[-1]


def _keys(full_name):
    """The dispatch keys with a kernel of their own for ``full_name`` (``ns::name.overload``)."""
    import re

    import torch

    dump = torch._C._dispatch_dump(full_name)
    keys = dict.fromkeys(m.group(1) for m in re.finditer(r"^(\w+)(?:\[alias\])?: registered at", dump, re.M))
    return [k for k in keys if k != "debug"]


def _is_tensor(type_) -> bool:
    return "Tensor" in str(type_)


def _factories(schemas) -> set:
    """The names of the operators with an overload that takes no tensor and returns one (seeded ones included: their
    ``_like`` forms draw, and are refused for their tag)."""
    return {name for (_, name, _), s in schemas.items()
            if s is not None and any(_is_tensor(r.type) for r in s.returns)
            and not any(_is_tensor(a.type) for a in s.arguments)}


def _kind(ns, name, overload, schema, keys, factories, allow) -> str | None:
    """Why ``ns::name.overload`` is allowed (see the module's docstring), or ``None``: it is refused."""
    import torch

    if name in allow:
        return "asked for"
    found = torch._C._get_operation_overload(f"{ns}::{name}", overload) if schema is not None else None
    tags = found[-1] if found else ()
    if torch.Tag.data_dependent_output in tags or torch.Tag.nondeterministic_seeded in tags:
        return None  # a value read back or a random draw, whatever kernel it has (``item``, ``dropout``)
    if keys and all(k.startswith(_WRAPPERS) for k in keys):
        return "decomposition"
    if schema is None:
        return None
    rets = schema.returns
    if rets and any(_is_tensor(r.type) for r in rets):
        if not any(_is_tensor(a.type) for a in schema.arguments):
            return "factory"
        base = name.removeprefix("new_").removesuffix("_like")
        if base != name and base in factories:
            return "factory"
    writes = any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)
    if rets and not writes and all(r.alias_info is not None and not r.alias_info.is_write for r in rets):
        return "view"
    if torch.Tag.inplace_view in tags:
        return "view"
    if name in COPIES or torch.Tag.view_copy in tags:
        return "copy"
    if rets and all(str(r.type) in _INTEGERS for r in rets):
        return "integers"
    return None


def operators(allow=()) -> dict:
    """``ns::name.overload`` -> ``(why it is allowed or None, its dispatch keys)``, for every operator in torch's
    registry."""
    import torch

    allow = frozenset(allow)
    schemas = {}
    for full in torch._C._dispatch_get_all_op_names():
        ns, rest = full.split("::", 1)
        name, _, overload = rest.partition(".")
        try:
            schemas[(ns, name, overload)] = torch._C._get_schema(f"{ns}::{name}", overload)
        except RuntimeError:  # an operator registered without a schema
            schemas[(ns, name, overload)] = None
    factories = _factories(schemas)
    out = {}
    for (ns, name, overload), schema in schemas.items():
        full = f"{ns}::{name}" + (f".{overload}" if overload else "")
        keys = _keys(full)
        out[full] = (_kind(ns, name, overload, schema, keys, factories, allow), keys)
    return out


@functools.cache
def allowed_names(allow=()) -> frozenset:
    """The ``aten`` operators (without overload: ``"view"``) with an allowed overload: what a recording dispatch
    mode (:func:`fastpath_lib.grading.engine.kernel_run.torch_ops`) may see a launcher run."""
    return frozenset(full.split("::", 1)[1].partition(".")[0] for full, (why, _) in operators(allow).items()
                     if why is not None and full.startswith("aten::"))


def _refusal(name, reads: bool = False):
    text = message(name, reads)

    def refuse(*args, **kwargs):
        raise RuntimeError(text)
    return refuse


def install(allow=(), guarded: bool = False) -> int:
    """Refuse every operator outside the allow-list (:func:`operators`) in this process (see the module's docstring).
    ``guarded``: the preamble of :mod:`~fastpath_lib.grading.engine.absent` is already installed here. Returns the
    number of registrations."""
    import warnings

    import torch

    libs, done = {}, 0
    for full, (why, keys) in operators(allow).items():
        if why is not None or not keys:
            continue
        ns, rest = full.split("::", 1)
        kernel = _refusal(rest.partition(".")[0], reads_values(full))
        if ns not in libs:
            libs[ns] = torch._C._dispatch_library("IMPL", ns, "")
        for key in keys:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "Overriding a previously registered kernel": that is the point
                libs[ns].impl(rest, key, kernel, False)
            done += 1
    if not guarded:
        from fastpath_lib.grading.engine import absent

        absent.guard()  # no walk of the garbage collector's objects reaches the handles
    held = tuple(libs.values())
    libs.clear()
    sys.addaudithook(lambda event, args, _held=held: None)  # the handles' one reference, beyond every code's reach
    del held
    return done
