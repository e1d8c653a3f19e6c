"""PyTorch's own form, tried at run time: the kit's kernels as a ``torch._native`` override of ATen's fused RMSNorm.

torch 2.13 overrides eager ATen ops with DSL kernels through ``torch/_native/registry.py``:
``register_op_override(backend, "aten", op, dispatch_key, cond, impl)``, where ``cond`` is an eligibility predicate with
the op's signature, ``impl`` the fast path, and ATen the fallthrough when ``cond`` declines. ``F.rms_norm`` reaches
``aten::_fused_rms_norm`` (and, through ATen's own autograd formula, ``aten::_fused_rms_norm_backward``), so with this
override registered, plain ``F.rms_norm`` takes the kit's kernels inside the kit's predicate and ATen outside it: no
kit call in the model. ``upstream/pytorch_native_rms_norm_triton.patch`` proposes the same override to PyTorch.

Nothing is registered at import. :func:`register` installs the override for one dispatch key and returns a
:class:`Registration` that removes it again (a context manager)::

    with native_override.register("CUDA"):
        y = F.rms_norm(x, [4096], w)          # the kit's kernel where the predicate holds

* ``cond`` is the kit's predicate (:func:`~fastpath_lib.rmsnorm.predicate.eligible` and
  :func:`~fastpath_lib.rmsnorm.predicate.runtime_eligible`) plus what the registry's convention asks at a backend
  key: copy-on-write tensors decline (reading their data pointer would materialize them), the backward's gradient
  and ``rstd`` must be the forward's shape and dtype;
* ``impl`` calls the kit's launchers (:mod:`fastpath_lib.rmsnorm.kernels`). The kit's forward kernel does not store
  ``rstd``, which ``_fused_rms_norm`` returns, so the forward computes it with torch (one more read of the input; the
  patch's kernel stores it instead). ``_fused_rms_norm_backward`` gets ``rstd``, not ``eps``; the kit's backward
  kernel recomputes ``rstd`` from ``eps``, so the backward recovers ``eps`` from the saved ``rstd`` (one row read);
* on a ``"CUDA"`` key the registry tries overrides in registration order: torch's own (quack's CuTeDSL RMSNorm on
  compute capability 9.x/10.x where its CuTeDSL packages are installed at a known-good version) run first, the
  kit's where they decline;
* on the ``"CPU"`` key (Triton's interpreter) torch 2.13 has no ``_fused_rms_norm_backward`` kernel: its CPU
  ``_fused_rms_norm`` is a composite, and an override there turns on ATen's autograd formula, which calls the
  backward. :func:`register` then installs the reference formula as that fallthrough, and removes it with the rest.

Calls the override takes are counted by :func:`fastpath_lib.record_routes` (route ``"triton"``).
"""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

import torch

from fastpath_lib import routing
from fastpath_lib.rmsnorm.layout import as_rows
from fastpath_lib.rmsnorm.predicate import PREDICATE, default_eps, eligible, runtime_eligible

__all__ = ["BACKEND", "OPS", "Registration", "register", "registered_overrides", "declared_overrides"]

#: The backend (DSL) name the override is registered under: not torch's own ``"triton"``, so switching torch's
#: Triton overrides off (``torch.backends.python_native.triton``) leaves the kit's alone, and the other way round.
BACKEND = "fastpath"
#: The ATen ops overridden, forward first.
OPS = ("_fused_rms_norm", "_fused_rms_norm_backward")
_QUIET = "Warning only once for all operators"


def _is_cow(t: torch.Tensor | None) -> bool:
    return t is not None and torch._C._is_cow_tensor(t)


def _fused_rms_norm_cond(input, normalized_shape, weight, eps) -> bool:
    """The kit's predicate, as it reads at a backend dispatch key (the op's own signature)."""
    return (eligible(input, normalized_shape, weight, routing.state.forced) and not _is_cow(input)
            and not _is_cow(weight) and runtime_eligible(input, weight))


def _eps(input: torch.Tensor, eps: float | None) -> float:
    return default_eps(input.dtype) if eps is None else float(eps)


def _fused_rms_norm_impl(input, normalized_shape, weight, eps):
    from fastpath_lib.rmsnorm import kernels

    if routing.state.recorders:
        routing.record("forward", PREDICATE.fast_route)
    eps = _eps(input, eps)
    with kernels.on_device(input):
        out = kernels.forward(as_rows(input), weight, eps).view(input.shape)
    rstd = torch.rsqrt(input.float().square().mean(-1, keepdim=True) + eps)
    return out, rstd


def _fused_rms_norm_backward_cond(grad_out, input, normalized_shape, rstd, weight, output_mask) -> bool:
    return (_fused_rms_norm_cond(input, normalized_shape, weight, None) and grad_out.shape == input.shape
            and grad_out.dtype == input.dtype and grad_out.device == input.device and not _is_cow(grad_out)
            and rstd.dtype == torch.float32 and rstd.numel() == input.numel() // input.shape[-1])


def _eps_of(input: torch.Tensor, rstd: torch.Tensor) -> float:
    """The eps of the forward that saved ``rstd``, for the kit's backward kernel, which recomputes ``rstd`` from eps.

    ``rstd**-2 - mean(x**2)`` on the row with the largest ``rstd`` (the smallest ``mean(x**2) + eps``, where the
    recovered value is most precise: its error is about ``2**-23 * (mean(x**2) + eps)`` of that row, at most that
    relative to any other row's). One row of ``input`` is read, and on CUDA the value is read back to the host: one
    device synchronization per backward call, a price of trying the kit's kernels this way that the patch's kernel
    (which reads ``rstd`` itself) does not pay.
    """
    flat = rstd.reshape(-1)
    i = int(flat.argmax())
    row = input.reshape(-1, input.shape[-1])[i].double()
    return max(float(flat[i].double() ** -2 - row.square().mean()), 0.0)


def _fused_rms_norm_backward_impl(grad_out, input, normalized_shape, rstd, weight, output_mask):
    from fastpath_lib.rmsnorm import kernels

    if routing.state.recorders:
        routing.record("backward", PREDICATE.fast_route)
    n = input.shape[-1]
    with kernels.on_device(input):
        dx, dw = kernels.backward(grad_out.contiguous().view(-1, n), as_rows(input), weight, _eps_of(input, rstd))
    return (dx.view(input.shape) if output_mask[0] else None), (dw if output_mask[1] else None)


def registered_overrides(op: str = OPS[0]) -> dict[str, list[str]]:
    """What ``torch._native`` holds for ``aten::<op>`` now: dispatch key -> backends (DSLs) in the order the router
    tries them, active ones only. Reads the registry of the installed torch; empty where it has none.

    >>> sorted(registered_overrides("_fused_rms_norm")) in ([], ["CUDA"], ["CPU"], ["CPU", "CUDA"])
    True
    """
    try:
        from torch._native import registry
    except ImportError:
        return {}
    return {key: [node.dsl_name for node in nodes if node.active]
            for (name, key), nodes in sorted(registry._graphs.items()) if name == op}


def _reregister(registry, op: str, dispatch_key: str) -> None:
    """Rebuild the router of ``(op, dispatch_key)`` from its graph, keeping the registry's filters (overrides switched
    off through ``torch.backends.python_native`` stay off); no graph left: ATen's kernel again."""
    registry._register_overrides_from_graph(op, dispatch_key, registry._graphs.get((op, dispatch_key), []),
                                            filter_state=registry._filter_state)


def declared_overrides() -> list[dict[str, str]]:
    """Every ``register_op_override(...)`` call in the installed torch's ``torch/_native/ops`` sources: the file, the
    DSL it registers through, the op and the dispatch key (a variable's name where the source passes one).
    What a CUDA build with the DSL installed registers at import; a CPU-only build registers only the ``native`` ones.

    >>> any(d["op"] == "_fused_rms_norm" for d in declared_overrides())
    True
    """
    ops_dir = Path(torch.__file__).parent / "_native" / "ops"
    found = []
    for path in sorted(ops_dir.rglob("*.py")) if ops_dir.is_dir() else []:
        tree = ast.parse(path.read_text())
        alias = {a.asname or a.name: a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "register_op_override"):
                continue
            module = alias.get(getattr(node.func.value, "id", ""), "")
            args = [a.value if isinstance(a, ast.Constant) else ast.unparse(a) for a in node.args]
            if module == "registry":  # (backend, lib, op, key, ...): the backend is the DSL
                dsl, args = args[0], args[1:]
            else:  # cutedsl_utils / triton_utils: (lib, op, key, ...)
                dsl = module.removesuffix("_utils")
            found.append({"file": path.relative_to(ops_dir.parents[2]).as_posix(), "dsl": dsl, "op": args[1],
                          "dispatch_key": args[2]})
    return found


class Registration:
    """The kit's override installed at one dispatch key; :meth:`remove` (or leaving the ``with`` block) takes it out
    and leaves torch's own overrides as they were."""

    def __init__(self, dispatch_key: str) -> None:
        self.dispatch_key = dispatch_key
        self._fallback: torch.library.Library | None = None
        self.active = False

    def _install(self) -> None:
        from torch._native import registry

        impls = {OPS[0]: (_fused_rms_norm_cond, _fused_rms_norm_impl),
                 OPS[1]: (_fused_rms_norm_backward_cond, _fused_rms_norm_backward_impl)}
        try:
            torch.library.get_kernel(f"aten::{OPS[1]}", self.dispatch_key)
        except RuntimeError:  # no backward kernel at this key (torch 2.13's CPU): the reference is the fallthrough
            self._fallback = torch.library.Library("aten", "IMPL", self.dispatch_key)
            self._fallback.impl(OPS[1], _reference_backward)
        self.active = True
        try:
            with warnings.catch_warnings():  # the router replaces a kernel at the key, as torch._native's own do
                warnings.filterwarnings("ignore", message=_QUIET, category=UserWarning)
                for op, (cond, impl) in impls.items():
                    registry.register_op_override(BACKEND, "aten", op, self.dispatch_key, cond, impl)
                    _reregister(registry, op, self.dispatch_key)
        except BaseException:  # a key the registry refuses: leave nothing behind
            self.remove()
            raise

    def remove(self) -> None:
        """Take the kit's override out (idempotent): each op's router is rebuilt from the nodes that remain."""
        if not self.active:
            return
        from torch._native import registry

        for op in OPS:
            key = (op, self.dispatch_key)
            nodes = [n for n in registry._graphs.get(key, []) if n.dsl_name != BACKEND]
            if nodes:
                registry._graphs[key] = nodes
            else:
                registry._graphs.pop(key, None)
            _reregister(registry, op, self.dispatch_key)
        if self._fallback is not None:
            self._fallback._destroy()
            self._fallback = None
        self.active = False

    def __enter__(self) -> Registration:
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def register(dispatch_key: str = "CUDA") -> Registration:
    """Install the kit's kernels as a ``torch._native`` override of ``aten::_fused_rms_norm`` and its backward.

    Args:
        dispatch_key: a backend key: ``"CUDA"``, or ``"CPU"`` under Triton's interpreter
            (:func:`fastpath_lib.use_interpreter`). torch's registry refuses ``Meta`` and the composite keys.

    Returns:
        a :class:`Registration`; use it as a context manager, or call :meth:`Registration.remove`.

    Note:
        Process-wide while registered: every ``F.rms_norm`` at that key asks the kit's predicate. Importing this
        module registers nothing.

    >>> import torch, torch.nn.functional as F, fastpath_lib
    >>> with register("CPU"), fastpath_lib.record_routes() as routes:
    ...     _ = F.rms_norm(torch.randn(16, 64), [64])
    >>> routes["triton"] == (1 if fastpath_lib.runtime.interpreter_enabled() else 0)
    True
    """
    reg = Registration(dispatch_key)
    reg._install()
    return reg


def _reference_backward(grad_out, input, normalized_shape, rstd, weight, output_mask):
    """ATen's formula of ``_fused_rms_norm_backward`` in fp32, for a key that has no kernel for it."""
    dims = tuple(range(-len(normalized_shape), 0))
    x_hat = input.float() * rstd
    g = grad_out.float()
    gw = g * weight.float() if weight is not None else g
    dx = rstd * (gw - x_hat * (gw * x_hat).mean(dims, keepdim=True))
    dw = None
    if weight is not None and output_mask[1]:
        dw = (g * x_hat).sum(tuple(range(input.dim() - len(normalized_shape)))).to(weight.dtype)
    return (dx.to(input.dtype) if output_mask[0] else None), dw
