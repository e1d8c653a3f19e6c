"""The kit's vLLM plugin: providers of vLLM's IR ops ``rms_norm`` and ``fused_add_rms_norm`` that run the kit's
kernels, registered only when a user asks.

vLLM reaches it through ``fastpath_vllm.register`` (the ``vllm.general_plugins`` entry point in ``pyproject.toml``),
which imports this module only with ``FASTPATH_VLLM=1`` in the environment. Then :func:`register`:

* registers :data:`PROVIDER` for both IR ops (``register_impl(PROVIDER, supported=..., supports_args=...)``, as
  vLLM's own ``vllm/kernels/triton/activation.py`` does), ``supported`` where the kit's kernels can run
  (:func:`supported`: vLLM's platform object says CUDA with compute capability 8.0 or newer, read through NVML,
  never ``torch.cuda``; the CPU under Triton's interpreter). Registered in every process, so a priority that names it
  (made by the engine process) skips it in a process where the kernels cannot run instead of failing vLLM's check
  that every provider in a priority is registered;
* where they can run, puts it first in the platform's default priority
  (``current_platform.get_default_ir_op_priority``), then logs once that it is active; elsewhere logs once that it
  declined. vLLM appends the platform's default to a priority the user sets (``--ir-op-priority``), so a user's list
  still comes first. Putting a provider other than ``native`` first also turns on vLLM's norm fusion passes
  (``enable_norm_fusion`` in ``vllm/config/vllm.py``: ``fuse_norm_quant`` at O1-O3 under Inductor);
* takes no slot another plugin may need: no ``CustomOp.register_oot``, so a hardware plugin's out-of-tree
  ``RMSNorm`` registers before or after it.

Which baseline the provider then replaces is vLLM's default for the run: under Inductor (vLLM's default compilation)
the CUDA platform's priority is ``["native"]`` (Inductor compiles the native function; the IR op stays in the graph
until vLLM's lowering pass picks a provider, so vLLM's fusion passes still see it), without Inductor
``["vllm_c", "native"]`` (vLLM's C kernel). Under Inductor the token count is symbolic where the lowering pass
asks, so the providers decline and native keeps every batch (:func:`rms_norm_supports_args`); the kit's kernels run
where sizes are known: without Inductor, or in a graph compiled for one size. A call the kit's kernel cannot take runs
what vLLM would have run without the kit: the next provider of the priority in effect that accepts it
(:func:`next_provider`; ``vllm_c`` without Inductor), chosen by vLLM's own dispatch where ``supports_args`` can tell
(an eager call: metadata, pointers, a CUDA graph capture), inside the kit's op where a compiled graph fixed the
provider at trace time (:func:`rms_norm`). :func:`register`
never raises into vLLM's start-up and never initialises CUDA; without vLLM it returns ``False``. Tested with
:data:`TESTED_VLLM_VERSIONS`.

The kit's own code (lesson 08, the host-cost bench, the tests) registers the providers without touching any priority:
:func:`register_providers`, or :func:`load_vllm_ir`.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import torch
from torch import Tensor

from fastpath_lib import routing, runtime
from fastpath_lib.fused.predicate import eligible as fused_eligible
from fastpath_lib.fused.predicate import runtime_eligible as fused_runtime_eligible
from fastpath_lib.rmsnorm import capture
from fastpath_lib.rmsnorm import op as rms_op
from fastpath_lib.rmsnorm.predicate import eligible as rms_eligible
from fastpath_lib.rmsnorm.predicate import runtime_eligible as rms_runtime_eligible

__all__ = ["PROVIDER", "TESTED_VLLM_VERSIONS", "OPT_IN", "IR_OPS", "LOGGER_NAME", "opted_in", "supported",
           "why_unsupported", "next_provider",
           "rms_norm_supports_args", "rms_norm", "fused_add_rms_norm_supports_args", "fused_add_rms_norm",
           "register_providers", "register", "vllm_site", "load_vllm_ir", "providers"]

#: vLLM releases this plugin was tested with (the kit's pin, ``constraints.txt``). Another version is tried too, with
#: a warning.
TESTED_VLLM_VERSIONS = ("0.33.0",)
#: The provider's name in vLLM's IR registry and priority lists.
PROVIDER = "fastpath_triton"
#: The environment variable that turns the plugin on (``1``): :data:`fastpath_vllm.OPT_IN`.
OPT_IN = "FASTPATH_VLLM"
#: The logger's name: under vLLM's ``vllm`` logger, so vLLM's handlers and ``VLLM_LOGGING_LEVEL`` apply to it.
LOGGER_NAME = "vllm.plugins.fastpath_kit"

_said: set[str] = set()


def _logger() -> logging.Logger:
    try:
        from vllm.logger import init_logger
    except Exception:  # a vLLM without its logger module: the standard one, same name
        return logging.getLogger(LOGGER_NAME)
    return init_logger(LOGGER_NAME)


def _say_once(key: str, level: int, msg: str, *args) -> None:
    """Log ``msg`` once per process and ``key`` (vLLM calls the entry point again in each process it starts)."""
    if key not in _said:
        _said.add(key)
        _logger().log(level, msg, *args)


def opted_in() -> bool:
    """Whether the user asked for the kit's providers: ``FASTPATH_VLLM=1``."""
    return os.environ.get(OPT_IN) == "1"


def supported() -> bool:
    """Whether the kit's kernels can run here (:func:`why_unsupported` says why not)."""
    return why_unsupported() is None


def why_unsupported() -> str | None:
    """Why the kit's kernels cannot run here, or ``None`` where they can; decided without initialising CUDA.

    vLLM's platform object answers (``current_platform``: CUDA with compute capability 8.0 or newer, read through
    NVML); under Triton's interpreter (``TRITON_INTERPRET=1``) the CPU can.
    """
    from fastpath_lib import runtime

    if runtime.interpreter_enabled():
        return None
    try:
        from vllm.platforms import current_platform

        from fastpath_lib.rmsnorm.limits import MIN_CAPABILITY

        if not current_platform.is_cuda():
            return f"vLLM's platform is {type(current_platform).__name__}, not CUDA"
        if not current_platform.has_device_capability(MIN_CAPABILITY):
            return f"the GPU is older than compute capability {MIN_CAPABILITY / 10:.1f}"
        return None
    except Exception as e:  # a vLLM without a platform object, or one that cannot read the device
        return f"vLLM's platform cannot say ({type(e).__name__}: {e})"


# --- the providers: the kit's kernels where the kit's predicate accepts, the priority's next provider otherwise -----

def _sized(x: Tensor) -> bool:
    """Whether every size of ``x`` is known: plain ints, outside Dynamo (which hands a symbolic size over as an
    int). Under Inductor vLLM's lowering pass asks ``supports_args`` with FakeTensors whose token count is symbolic:
    the kit's row threshold cannot be decided there, so the providers decline and vLLM's next provider (Inductor's
    compiled native by default) takes every batch size."""
    return not torch.compiler.is_dynamo_compiling() and all(type(s) is int for s in x.shape)


_REAL = (torch.Tensor, torch.nn.Parameter)


def _real(*ts: Tensor | None) -> bool:
    """Whether the tensors are real ones, whose data pointers are addresses: an eager call. A FakeTensor (vLLM's
    lowering pass traces with them) reports a data pointer of 0 and knows of no capture, and what Dynamo traces runs
    later: both unknown, left to the op. (A meta tensor's pointer is its byte offset, a real alignment; the static
    conditions refuse a meta ``x``.)"""
    return not torch.compiler.is_dynamo_compiling() and all(t is None or type(t) in _REAL for t in ts)


def _capture_refused(x: Tensor) -> bool:
    """Under Triton's interpreter the CPU stands in for the CUDA device (as in :func:`why_unsupported`): a CPU call
    made while the current CUDA stream captures a graph is refused, as the kit's predicate refuses a captured CUDA
    call until the capture test passes for the device (:mod:`fastpath_lib.rmsnorm.capture`; the CPU has none). No
    capture without a CUDA context, so the capture query waits for one (on a CPU-only torch it raises, at a cost).
    On CUDA the kit's ``runtime_eligible`` decides; this is ``False`` there."""
    return (x.is_cpu and runtime.interpreter_enabled() and torch.cuda.is_initialized()
            and capture.capturing(torch.device("cuda")))


def _rms_runs_now(x: Tensor, weight: Tensor | None) -> bool:
    """What only run time knows, on real tensors: pointers aligned, no capture the kit's ``custom_op`` path has not
    passed (:func:`fastpath_lib.rmsnorm.predicate.runtime_eligible`)."""
    return rms_runtime_eligible(x, weight, op="rms_norm", path="custom_op") and not _capture_refused(x)


def _fused_runs_now(x: Tensor, x_residual: Tensor, weight: Tensor | None) -> bool:
    """The same for the in-place fused form, plus no overlap of x, x_residual and weight."""
    return fused_runtime_eligible(x, x_residual, weight, True, "custom_op") and not _capture_refused(x)


def rms_norm_supports_args(x: Tensor, weight: Tensor | None, epsilon: float, variance_size: int | None = None) -> bool:
    """Per call: whole rows (``variance_size is None``), the weight in x's dtype, every size known (:func:`_sized`),
    the kit's static conditions, the row threshold included, and on real tensors (an eager call) what only run time
    knows, so that vLLM's dispatch gives a call the kernel cannot take to the next provider of the priority: pointer
    alignment, and a CUDA graph capture the kit's capture test has not passed. On FakeTensors (vLLM's lowering pass)
    pointers and capture are unknown: the op decides them when the graph runs (:func:`rms_norm`)."""
    return (variance_size is None and _sized(x) and (weight is None or weight.dtype == x.dtype)
            and rms_eligible(x, x.shape[-1:], weight, False) and (not _real(x, weight) or _rms_runs_now(x, weight)))


def next_provider(name: str, args: tuple):
    """The implementation vLLM would have run for ``args`` without the kit: the first provider after
    :data:`PROVIDER` in IR op ``name``'s priority in effect (``IrOp.get_priority()``: the list vLLM set with
    ``set_default`` at worker start, or ``set_priority``, less unsupported providers) whose ``supports_args`` accepts
    ``args``, as ``IrOp.dispatch`` picks; vLLM's ``native`` where the priority does not name the kit's provider (a
    direct call) or nothing after it accepts. Returns vLLM's ``IrOpImpl``."""
    from vllm import ir

    op = getattr(ir.ops, name)
    priority = op.get_priority()
    if PROVIDER in priority:
        for provider in priority[priority.index(PROVIDER) + 1:]:
            impl = op.impls[provider]
            if impl.supports_args(*args):
                return impl
    return op.impls["native"]


def _rms_norm_now(x: Tensor, weight: Tensor | None, epsilon: float) -> Tensor:
    """The kit's kernel where what only run time knows lets it run, else the priority's next provider."""
    if rms_op._now_eligible(x, [x.shape[-1]], weight, "custom_op") and not _capture_refused(x):
        return torch.ops.fastpath.rms_norm(x, [x.shape[-1]], weight, epsilon)
    return next_provider("rms_norm", (x, weight, epsilon)).impl_fn(x, weight, epsilon).contiguous()


@torch.library.custom_op("fastpath_vllm::rms_norm", mutates_args=())
def _rms_norm_op(x: Tensor, weight: Tensor | None, epsilon: float) -> Tensor:
    return _rms_norm_now(x, weight, epsilon)


@_rms_norm_op.register_fake
def _(x, weight, epsilon):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def rms_norm(x: Tensor, weight: Tensor | None, epsilon: float, variance_size: int | None = None) -> Tensor:
    """``torch.ops.fastpath_vllm.rms_norm``: the kit's kernel where what only run time knows (pointer alignment, a
    CUDA graph capture) lets it run, else, inside the op, the provider vLLM would have run without the kit
    (:func:`next_provider`: ``vllm_c`` without Inductor).

    An eager call the kernel cannot take never gets here: :func:`rms_norm_supports_args` declines it and vLLM's
    dispatch picks the next provider. The op decides only in a graph vLLM's lowering pass traced with FakeTensors,
    which fixed this provider for the graph's size: there the call runs the next provider's function eagerly. Under
    Inductor that provider is ``native``, so the call runs native's eager function (several kernels), not the code
    Inductor would have generated for it, which the traced graph no longer holds.

    The kit's kernel is ``F.rms_norm``'s fast path and rounds as ``F.rms_norm`` does, once: with a weight, about a
    quarter of fp16/bf16 outputs differ from native's by one unit in the last place (within vLLM's tolerance). The
    kernel with native's rounding points is the one the kit's vLLM patch proposes (``upstream/vllm/``); the plugin
    does not load it because that file is vLLM's, written to be imported as ``vllm.kernels.triton.layernorm``, and
    importing it registers vLLM's own provider name, ``"triton"``. The fused provider's kernel rounds where native
    rounds."""
    assert variance_size is None
    if _real(x, weight):  # an eager call: the op's decision without its dispatch layer (host time per call)
        return _rms_norm_now(x, weight, epsilon)
    return torch.ops.fastpath_vllm.rms_norm(x, weight, epsilon)


def fused_add_rms_norm_supports_args(x: Tensor, x_residual: Tensor, weight: Tensor | None, epsilon: float,
                                     variance_size: int | None = None) -> bool:
    """Per call: whole rows, every size known (:func:`_sized`), the kit's static conditions of the in-place form, and
    on real tensors what only run time knows (pointer alignment, a capture the kit's test has not passed, x,
    x_residual and weight sharing memory), as :func:`rms_norm_supports_args`."""
    return (variance_size is None and _sized(x) and fused_eligible(x, x_residual, weight, False, True)
            and (not _real(x, x_residual, weight) or _fused_runs_now(x, x_residual, weight)))


def _fused_now(x: Tensor, x_residual: Tensor, weight: Tensor | None, epsilon: float) -> None:
    """The kit's kernel where what only run time knows lets it run, else the priority's next provider, in place."""
    if fused_eligible(x, x_residual, weight, routing.state.forced, True) and _fused_runs_now(x, x_residual, weight):
        torch.ops.fastpath.fused_add_rms_norm_(x, x_residual, weight, epsilon)
        return
    impl = next_provider("fused_add_rms_norm", (x, x_residual, weight, epsilon))
    if impl.inplace:
        impl.impl_fn(x, x_residual, weight, epsilon)
        return
    out, residual = impl.impl_fn(x, x_residual, weight, epsilon)  # both computed before either is written
    x_residual.copy_(residual)
    x.copy_(out)


@torch.library.custom_op("fastpath_vllm::fused_add_rms_norm_", mutates_args=("x", "x_residual"))
def _fused_op(x: Tensor, x_residual: Tensor, weight: Tensor | None, epsilon: float) -> None:
    _fused_now(x, x_residual, weight, epsilon)


@_fused_op.register_fake
def _(x, x_residual, weight, epsilon):
    return None


def fused_add_rms_norm(x: Tensor, x_residual: Tensor, weight: Tensor | None, epsilon: float,
                       variance_size: int | None = None) -> tuple[Tensor, Tensor]:
    """``torch.ops.fastpath_vllm.fused_add_rms_norm_`` writes the output into ``x`` and the sum into ``x_residual``:
    the kit's kernel (``torch.ops.fastpath.fused_add_rms_norm_``, which rounds where native rounds) where the run-time
    checks pass, else, inside the op, the provider vLLM would have run without the kit (:func:`next_provider`; a
    functional one's results copied into ``x`` and ``x_residual``, as vLLM's ``vllm_c`` does on ROCm), as in
    :func:`rms_norm`; returns ``(x, x_residual)``."""
    assert variance_size is None
    if _real(x, x_residual, weight):  # an eager call: the op's decision without its dispatch layer (host time)
        _fused_now(x, x_residual, weight, epsilon)
    else:
        torch.ops.fastpath_vllm.fused_add_rms_norm_(x, x_residual, weight, epsilon)
    return x, x_residual


class _Skip(Exception):
    """Registration does not fit this vLLM (the message says why)."""


def providers() -> dict:
    """The vLLM IR ops the kit provides: IR op name -> ``(provider function, supports_args, inplace)``."""
    return {"rms_norm": (rms_norm, rms_norm_supports_args, False),
            "fused_add_rms_norm": (fused_add_rms_norm, fused_add_rms_norm_supports_args, True)}


#: The names of the IR ops the kit provides (:func:`providers`).
IR_OPS = tuple(providers())


def _register_providers() -> None:
    try:
        from vllm import ir
    except ImportError as e:
        raise _Skip(f"this vLLM has no IR ({e})") from None
    import fastpath_lib.fused.op  # noqa: F401  (registers torch.ops.fastpath.fused_add_rms_norm_)
    import fastpath_lib.rmsnorm.op  # noqa: F401  (registers torch.ops.fastpath.rms_norm)

    ok = supported()
    for name, (fn, check, inplace) in providers().items():
        op = getattr(ir.ops, name, None)
        if op is None:
            raise _Skip(f"vllm.ir.ops has no {name}")
        if PROVIDER not in op.impls:
            op.register_impl(PROVIDER, supported=ok, supports_args=check, inplace=inplace)(fn)


def register_providers() -> bool:
    """Register :data:`PROVIDER` for each op of :data:`IR_OPS` in ``vllm.ir``, changing no priority (vLLM calls it
    only where a priority list names it). Idempotent; never raises (why it did not register is logged once).

    Returns:
        whether the providers are registered (``False`` without vLLM or its IR).
    """
    try:
        import vllm  # noqa: F401
    except ImportError:
        return False
    try:
        _register_providers()
        return True
    except _Skip as e:
        _say_once("providers", logging.INFO, "fastpath_kit: providers not registered: %s", e)
    except Exception as e:
        _say_once("providers", logging.WARNING, "fastpath_kit: providers not registered: %s: %s", type(e).__name__, e)
    return False


def _put_first() -> None:
    """Wrap the platform's ``get_default_ir_op_priority`` so that each list of :data:`IR_OPS` starts with
    :data:`PROVIDER`. Idempotent."""
    from vllm.platforms import current_platform

    default = getattr(current_platform, "get_default_ir_op_priority", None)
    if default is None:
        raise _Skip("vLLM's platform has no get_default_ir_op_priority")
    if getattr(default, "_fastpath_kit", False):
        return

    def get_default_ir_op_priority(vllm_config):
        priority = default(vllm_config)
        for name in IR_OPS:
            setattr(priority, name, [PROVIDER, *(p for p in getattr(priority, name) if p != PROVIDER)])
        return priority

    get_default_ir_op_priority._fastpath_kit = True
    current_platform.get_default_ir_op_priority = get_default_ir_op_priority


def register() -> bool:
    """What ``fastpath_vllm.register`` (vLLM's entry point) runs: with ``FASTPATH_VLLM=1``, where the kit's kernels
    can run, :func:`register_providers` and the providers first in the platform's default priority.

    Never raises; never initialises CUDA; idempotent (vLLM calls it in every process it starts). Logs once per process
    that the path is active, or that it declined and why.

    Returns:
        whether the kit's providers are registered and first in the platform's priority.
    """
    if not opted_in():
        return False
    try:
        import vllm
    except ImportError:
        return False
    try:
        version = getattr(vllm, "__version__", "unknown")
        if version not in TESTED_VLLM_VERSIONS:
            _say_once("version", logging.WARNING, "fastpath_kit: tested with vLLM %s, this is %s",
                      ", ".join(TESTED_VLLM_VERSIONS), version)
        # Registered in every process, supported or not: a priority that names the provider (the engine's, where
        # the kernels can run) then skips it in a process where they cannot, as vLLM skips any unsupported provider,
        # where an unregistered name would fail vLLM's assertion that every provider in a priority is registered.
        registered = register_providers()
        why = why_unsupported()
        if why is not None:
            _say_once("declined", logging.INFO, "fastpath_kit: %s=1, but the kit's kernels cannot run here (%s): "
                      "%s, not in the priority", OPT_IN, why,
                      "providers registered as unsupported" if registered else "nothing registered")
            return False
        if not registered:
            return False
        try:
            _put_first()
        except _Skip as e:
            _say_once("declined", logging.INFO, "fastpath_kit: %s=1, providers registered but not first: %s", OPT_IN,
                      e)
            return False
        _say_once("active", logging.INFO, "fastpath_kit: %s=1: provider %s first in the platform's default priority "
                  "for vllm.ir %s", OPT_IN, PROVIDER, ", ".join(IR_OPS))
        return True
    except Exception as e:  # the logger itself failing: stay silent rather than stop vLLM
        print(f"fastpath_kit: vLLM plugin not registered: {type(e).__name__}: {e}", file=sys.stderr)
        return False


def vllm_site() -> Path:
    """Where ``./kit setup`` installs vLLM's wheel without its dependencies: ``<venv>/vllm-site``
    (``FASTPATH_VLLM_SITE`` overrides)."""
    return Path(os.environ.get("FASTPATH_VLLM_SITE") or Path(sys.prefix) / "vllm-site")


def load_vllm_ir():
    """``vllm.ir`` with the kit's providers registered (no priority changed), from an installed vLLM or else from
    :func:`vllm_site` (appended to ``sys.path``; importing vLLM sets a few environment variables and patches
    Inductor for vLLM's own ops).

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
    register_providers()
    return ir
