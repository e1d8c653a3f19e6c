"""The kit's vLLM plugin: an out-of-tree ``RMSNorm`` layer, registered by vLLM's ``vllm.general_plugins`` entry point.

``pip install`` of the kit into a vLLM environment makes vLLM call :func:`register` in every process it starts (the
API server too, without a ``try``): ``pyproject.toml``, ``[project.entry-points."vllm.general_plugins"]``.

What it registers:

* **the mechanism vLLM keeps** (:func:`oot_rms_norm_class`): a subclass of vLLM's ``RMSNorm``, registered with
  ``CustomOp.register_oot`` under vLLM's switch name ``rms_norm``. Its ``forward_cuda`` takes the kit's kernel where
  the platform and the call's metadata allow (:func:`accepts`: a CUDA tensor of fp16/bf16/fp32, contiguous rows of at
  most 16384 columns, the weight in x's dtype, no variance override, batch invariance off), through two ops
  registered with vLLM's ``direct_register_custom_op`` (a fake implementation each; the launch itself is
  :mod:`fastpath_lib.rmsnorm.kernels` / :mod:`fastpath_lib.fused.kernels`), and otherwise calls
  ``super().forward_cuda``: exactly what vLLM would have run (its C kernel ``vllm_c``), never an eager composite.
  No row threshold (no GPU sweep measured one) and no refusal under CUDA-graph capture (vLLM's own Triton kernels
  refuse neither); the kit's kernels capture like any launch.
* **deprecated**: providers of ``vllm.ir.ops.rms_norm`` and ``vllm.ir.ops.fused_add_rms_norm`` (:data:`PROVIDER`),
  kept while the pinned vLLM (0.33) has its IR, for lesson 08 and the host-cost bench. vLLM 0.33 deprecates its IR
  ("will be removed in v0.34.0"); these go with the pin's move. They run only where a priority list names them.

When the kit's kernel runs at all: vLLM's ``RMSNorm`` is a ``CustomOp``, and with Inductor (vLLM's default
compilation) custom ops are off (``compilation_config.custom_ops == ["none"]``): the layer's ``forward_native`` is
traced and Inductor generates its own fused kernel, so neither ``vllm_c`` nor this layer's ``forward_cuda`` runs.
Turn it on with ``compilation_config={"custom_ops": ["+rms_norm"]}`` (the OOT layer answers to vLLM's name for
RMSNorm), or run eagerly (``enforce_eager=True``, where custom ops are on); then it is measured against
``vllm_c``, and with custom ops off against Inductor's compiled native.

:func:`register` never raises into vLLM's start-up and never initialises CUDA: ``supported`` asks vLLM's platform
object (``vllm.platforms.current_platform``, which reads NVML). Where something it registers into is missing or
renamed, it does nothing for that part and says why once, with vLLM's logger. Tested with :data:`TESTED_VLLM_VERSIONS`.
"""

import inspect
import logging
import os
import sys
from pathlib import Path

import torch
from torch import Tensor

import fastpath_lib.fused.op  # noqa: F401  (registers torch.ops.fastpath.fused_add_rms_norm_)
import fastpath_lib.rmsnorm.op  # noqa: F401  (registers torch.ops.fastpath.rms_norm)
from fastpath_lib import runtime
from fastpath_lib.fused.predicate import eligible as fused_eligible
from fastpath_lib.rmsnorm.layout import as_rows
from fastpath_lib.rmsnorm.limits import MAX_COLS, MIN_CAPABILITY, SUPPORTED_DTYPES
from fastpath_lib.rmsnorm.predicate import eligible as rms_eligible

__all__ = ["PROVIDER", "TESTED_VLLM_VERSIONS", "OPS_NAMESPACE", "supported", "accepts", "oot_rms_norm_class",
           "rms_norm_supports_args", "rms_norm", "fused_add_rms_norm_supports_args", "fused_add_rms_norm", "register",
           "vllm_site", "load_vllm_ir"]

#: vLLM releases this plugin was tested with (the kit's pin, ``constraints.txt``). Another version is tried too, and
#: each part that does not fit it is skipped with the reason in vLLM's log.
TESTED_VLLM_VERSIONS = ("0.33.0",)
#: The provider's name in vLLM's IR registry and priority lists (deprecated with vLLM's IR).
PROVIDER = "fastpath_triton"
#: The namespace of the two ops the out-of-tree layer calls: ``torch.ops.fastpath_vllm.rms_norm`` and
#: ``torch.ops.fastpath_vllm.fused_add_rms_norm_`` (writes the output into ``x``, the sum into ``residual``).
OPS_NAMESPACE = "fastpath_vllm"
#: The logger's name: under vLLM's ``vllm`` logger, so vLLM's handlers and ``VLLM_LOGGING_LEVEL`` apply to it.
LOGGER_NAME = "vllm.plugins.fastpath_kit"

_said: set[str] = set()
_lib: torch.library.Library | None = None


def _logger() -> logging.Logger:
    try:
        from vllm.logger import init_logger
    except Exception:  # a vLLM without its logger module: the standard one, same name
        return logging.getLogger(LOGGER_NAME)
    return init_logger(LOGGER_NAME)


def _say_once(key: str, level: int, msg: str, *args) -> None:
    """Log ``msg`` once per process and ``key`` (vLLM calls :func:`register` again in each process it starts)."""
    if key not in _said:
        _said.add(key)
        _logger().log(level, msg, *args)


def supported() -> bool:
    """Whether the kit's kernels can run here, decided without initialising CUDA.

    vLLM's platform object answers (``current_platform``: CUDA with compute capability 8.0 or newer, read through
    NVML); under Triton's interpreter (``TRITON_INTERPRET=1``) the CPU can. ``False`` where vLLM cannot say.
    """
    if runtime.interpreter_enabled():
        return True
    try:
        from vllm.platforms import current_platform

        return bool(current_platform.is_cuda() and current_platform.has_device_capability(MIN_CAPABILITY))
    except Exception as e:  # a vLLM without a platform object, or one that cannot read the device
        _say_once("platform", logging.INFO, "fastpath_kit: vLLM's platform cannot say whether Triton runs here "
                  "(%s: %s); the kit's kernels stay off", type(e).__name__, e)
        return False


# --- the out-of-tree RMSNorm: kit kernel where the metadata allow, vLLM's forward_cuda otherwise -----------------

def accepts(x: Tensor, residual: Tensor | None, weight: Tensor | None, variance_size: int | None = None) -> bool:
    """Whether the kit's kernel takes this call of vLLM's ``RMSNorm``: metadata only, cheapest first.

    A tensor on the kernels' device (CUDA; the CPU under the interpreter) of fp16/bf16/fp32, contiguous, with rows of
    1 to ``MAX_COLS`` columns; the weight absent or a contiguous ``[hidden]`` of x's dtype (vLLM's native rounds the
    normalized value to the weight's dtype: other weights go to vLLM); the residual, if any, x's shape, dtype and
    device, contiguous; whole rows (no ``variance_size``); nothing to record for autograd. Any token count, zero
    included, and CUDA-graph capture: vLLM's own Triton kernels refuse neither, and no GPU sweep measured a reason.
    """
    if variance_size is not None or x.dtype not in SUPPORTED_DTYPES or x.dim() == 0 or not x.is_contiguous():
        return False
    if x.device.type != ("cpu" if runtime.interpreter_enabled() else "cuda"):
        return False
    n = x.shape[-1]
    if not 0 < n <= MAX_COLS:
        return False
    if weight is not None and not (weight.dtype == x.dtype and weight.dim() == 1 and weight.shape[0] == n
                                   and weight.is_contiguous() and weight.device == x.device):
        return False
    if residual is not None and not (residual.shape == x.shape and residual.dtype == x.dtype
                                     and residual.device == x.device and residual.is_contiguous()):
        return False
    return not (torch.is_grad_enabled() and (x.requires_grad or (residual is not None and residual.requires_grad)
                                             or (weight is not None and weight.requires_grad)))


def _rms_norm_impl(x: Tensor, weight: Tensor | None, epsilon: float) -> Tensor:
    from fastpath_lib.rmsnorm.kernels import forward

    if x.numel() == 0:
        return torch.empty_like(x)
    return forward(as_rows(x), weight, epsilon).view(x.shape)


def _rms_norm_fake(x: Tensor, weight: Tensor | None, epsilon: float) -> Tensor:
    return torch.empty_like(x)


def _fused_add_rms_norm_impl(x: Tensor, residual: Tensor, weight: Tensor | None, epsilon: float) -> None:
    from fastpath_lib.fused.kernels import run_

    if x.numel():
        run_(x, residual, weight, epsilon)


def _fused_add_rms_norm_fake(x: Tensor, residual: Tensor, weight: Tensor | None, epsilon: float) -> None:
    return None


def _register_ops() -> None:
    """The two ops, with vLLM's ``direct_register_custom_op`` (a fake implementation each) in their own library,
    for the platform's dispatch key (the CPU's under the interpreter). Idempotent."""
    global _lib
    if _lib is not None:
        return
    from vllm.utils.torch_utils import direct_register_custom_op

    key = "CPU" if runtime.interpreter_enabled() else None  # None: vLLM's current_platform.dispatch_key
    lib = torch.library.Library(OPS_NAMESPACE, "FRAGMENT")
    direct_register_custom_op("rms_norm", _rms_norm_impl, fake_impl=_rms_norm_fake, target_lib=lib,
                              dispatch_key=key)
    direct_register_custom_op("fused_add_rms_norm_", _fused_add_rms_norm_impl, mutates_args=["x", "residual"],
                              fake_impl=_fused_add_rms_norm_fake, target_lib=lib, dispatch_key=key)
    _lib = lib  # the ops live as long as the library object


#: What the out-of-tree layer reads of vLLM's ``RMSNorm`` instance (set in its ``__init__``).
LAYER_ATTRIBUTES = ("weight", "variance_epsilon", "variance_size_override", "pass_weight", "pass_weight_add")


def oot_rms_norm_class(base: type, batch_invariant=lambda: False) -> type:
    """The out-of-tree layer: a subclass of vLLM's ``RMSNorm`` (``base``) whose ``forward_cuda`` takes the kit's
    kernel where :func:`supported` and :func:`accepts` allow, and ``super().forward_cuda`` otherwise.

    Decided once per layer at construction: :func:`supported`, vLLM's batch invariance (``batch_invariant()``: its
    own path then), and that the instance has every attribute in :data:`LAYER_ATTRIBUTES` (a renamed one: the layer
    is vLLM's, with one log line). Per call: :func:`accepts`, metadata only.
    """

    class FastpathRMSNorm(base):
        _fastpath_kit = True

        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            missing = [a for a in LAYER_ATTRIBUTES if not hasattr(self, a)]
            if missing:
                _say_once("attributes", logging.WARNING, "fastpath_kit: vLLM's RMSNorm has no %s; the kit's kernel "
                          "stays off (vLLM's own path runs)", ", ".join(missing))
            self._fastpath = not missing and supported() and not batch_invariant()

        def forward_cuda(self, x: Tensor, residual: Tensor | None = None):
            if self._fastpath:
                weight = self.weight.data if (self.pass_weight if residual is None else self.pass_weight_add) \
                    else None
                if accepts(x, residual, weight, self.variance_size_override):
                    ops = getattr(torch.ops, OPS_NAMESPACE)
                    if residual is None:
                        return ops.rms_norm(x, weight, self.variance_epsilon)
                    ops.fused_add_rms_norm_(x, residual, weight, self.variance_epsilon)
                    return x, residual
            return super().forward_cuda(x, residual)

    FastpathRMSNorm.__qualname__ = FastpathRMSNorm.__name__
    return FastpathRMSNorm


class _Skip(Exception):
    """A part of :func:`register` that does not apply to this vLLM (the message says why)."""


def _register_oot() -> None:
    from vllm.model_executor.custom_op import CustomOp, op_registry_oot
    from vllm.model_executor.layers.layernorm import RMSNorm

    existing = op_registry_oot.get(RMSNorm.__name__)
    if existing is not None:
        if getattr(existing, "_fastpath_kit", False):
            return
        raise _Skip(f"another out-of-tree {RMSNorm.__name__} is registered ({existing.__module__}."
                    f"{existing.__qualname__}); it stays")
    params = list(inspect.signature(RMSNorm.forward_cuda).parameters)
    if params[:3] != ["self", "x", "residual"]:
        raise _Skip(f"vLLM's RMSNorm.forward_cuda takes {params}, not (self, x, residual)")
    import vllm.envs as envs

    _register_ops()
    cls = oot_rms_norm_class(RMSNorm, lambda: bool(envs.VLLM_BATCH_INVARIANT))
    CustomOp.register_oot(cls, name=RMSNorm.__name__)
    cls.name = RMSNorm.name  # register_oot names it "RMSNorm": answer to vLLM's switch, custom_ops "+rms_norm"


# --- deprecated: providers of vLLM's IR ops (vLLM 0.33 removes its IR in 0.34) -------------------------------------

def rms_norm_supports_args(x: Tensor, weight: Tensor | None, epsilon: float, variance_size: int | None = None) -> bool:
    """Deprecated with vLLM's IR. Per call, from metadata only: whole rows (``variance_size is None``), the weight in
    x's dtype (vLLM's native rounds the normalized value to the weight's dtype, the kernel does not), and the kit's
    static conditions."""
    return (variance_size is None and (weight is None or weight.dtype == x.dtype)
            and rms_eligible(x, x.shape[-1:], weight, False))


def rms_norm(x: Tensor, weight: Tensor | None, epsilon: float, variance_size: int | None = None) -> Tensor:
    """Deprecated with vLLM's IR. ``torch.ops.fastpath.rms_norm``: the kernel where the run-time checks pass,
    ``F.rms_norm`` inside otherwise."""
    assert variance_size is None
    return torch.ops.fastpath.rms_norm(x, [x.shape[-1]], weight, epsilon)


def fused_add_rms_norm_supports_args(x: Tensor, x_residual: Tensor, weight: Tensor | None, epsilon: float,
                                     variance_size: int | None = None) -> bool:
    """Deprecated with vLLM's IR. Per call, from metadata only: whole rows and the kit's static conditions of the
    in-place form."""
    return variance_size is None and fused_eligible(x, x_residual, weight, False, True)


def fused_add_rms_norm(x: Tensor, x_residual: Tensor, weight: Tensor | None, epsilon: float,
                       variance_size: int | None = None) -> tuple[Tensor, Tensor]:
    """Deprecated with vLLM's IR. ``torch.ops.fastpath.fused_add_rms_norm_`` writes the output into ``x`` and the sum
    into ``x_residual`` (the kernel where the run-time checks pass, the composite inside otherwise); returns
    ``(x, x_residual)``."""
    assert variance_size is None
    torch.ops.fastpath.fused_add_rms_norm_(x, x_residual, weight, epsilon)
    return x, x_residual


def _register_ir() -> None:
    try:
        from vllm import ir
    except ImportError as e:
        raise _Skip(f"this vLLM has no IR ({e}): the deprecated providers are not needed") from None
    ok = supported()
    for name, fn, check, inplace in (("rms_norm", rms_norm, rms_norm_supports_args, False),
                                     ("fused_add_rms_norm", fused_add_rms_norm, fused_add_rms_norm_supports_args,
                                      True)):
        op = getattr(ir.ops, name, None)
        if op is None:
            raise _Skip(f"vllm.ir.ops has no {name}")
        if PROVIDER not in op.impls:
            op.register_impl(PROVIDER, supported=ok, supports_args=check, inplace=inplace)(fn)


#: The parts of :func:`register`, in order: (what, function).
PARTS = (("out-of-tree RMSNorm (CustomOp.register_oot)", _register_oot),
         ("vllm.ir providers (deprecated)", _register_ir))


def register() -> bool:
    """vLLM's ``vllm.general_plugins`` entry point: register each part of :data:`PARTS` that fits this vLLM.

    Never raises: a part that does not fit (no IR, a renamed layer or op, another plugin's out-of-tree RMSNorm, a vLLM
    missing a module) is skipped, and why is logged once per process with vLLM's logger; without vLLM at all nothing
    happens. Never initialises CUDA. Idempotent (vLLM calls it in every process it starts).

    Returns:
        whether any part is registered (``False`` without vLLM).
    """
    try:
        import vllm
    except ImportError:
        return False
    done = []
    try:
        version = getattr(vllm, "__version__", "unknown")
        if version not in TESTED_VLLM_VERSIONS:
            _say_once("version", logging.WARNING, "fastpath_kit: tested with vLLM %s, this is %s; each part that does "
                      "not fit is skipped", ", ".join(TESTED_VLLM_VERSIONS), version)
        for what, part in PARTS:
            try:
                part()
                done.append(what)
            except _Skip as e:
                _say_once(what, logging.INFO, "fastpath_kit: %s not registered: %s", what, e)
            except Exception as e:
                _say_once(what, logging.WARNING, "fastpath_kit: %s not registered: %s: %s", what,
                          type(e).__name__, e)
    except Exception as e:  # the logger itself failing: stay silent rather than stop vLLM
        print(f"fastpath_kit: vLLM plugin not registered: {type(e).__name__}: {e}", file=sys.stderr)
    return bool(done)


def vllm_site() -> Path:
    """Where ``./kit setup`` installs vLLM's wheel without its dependencies: ``<venv>/vllm-site``
    (``FASTPATH_VLLM_SITE`` overrides)."""
    return Path(os.environ.get("FASTPATH_VLLM_SITE") or Path(sys.prefix) / "vllm-site")


def load_vllm_ir():
    """``vllm.ir`` with this plugin registered, from an installed vLLM or else from :func:`vllm_site` (appended to
    ``sys.path``; importing vLLM sets a few environment variables and patches Inductor for vLLM's own ops).

    Raises:
        ModuleNotFoundError: neither has it (the message says where the kit looked).
    """
    site = vllm_site()
    if site.is_dir() and str(site) not in sys.path:
        sys.path.append(str(site))
    try:
        from vllm import ir
    except ModuleNotFoundError as e:
        raise ModuleNotFoundError(f"{e}; vLLM is not installed, nor in {site} (./kit setup puts its wheel there)",
                                  name=e.name) from None
    register()
    return ir
