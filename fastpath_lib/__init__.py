"""Fastpath Kit's library: a Triton RMSNorm fast path behind an eligibility predicate, and the pieces to prove it.

Public API (names other parts of the kit rely on):

* :func:`rms_norm` — ``torch.nn.functional.rms_norm``'s contract, Triton kernels where eligible.
* :func:`explain` — the :class:`Decision` for a call: route and every reason it falls back.
* :func:`record_routes` — count the routes taken inside a block.
* :func:`force_fallback` — force the fallback inside a block (or start the process with ``FASTPATH_FORCE_FALLBACK=1``,
  read at import).
* :class:`RMSNorm` — drop-in for ``torch.nn.RMSNorm``.
* :func:`fused_add_rms_norm` / :func:`fused_add_rms_norm_` — residual add + RMSNorm with vLLM's contract, functional
  and in place.
* :func:`use_interpreter` — opt in to Triton's CPU interpreter on a machine without CUDA.

Importing this package registers its own operators (the ``fastpath::`` namespace) with torch's dispatcher and changes
nothing else process-wide: no torch operator, no environment variable, not Triton's mode. Without CUDA and without the
opt-in (``use_interpreter()`` or ``TRITON_INTERPRET=1`` set before the first kernel is imported) every call takes the
fallback.
"""

from fastpath_lib.eligibility import Decision
from fastpath_lib.fused.op import fused_add_rms_norm, fused_add_rms_norm_
from fastpath_lib.rmsnorm.module import RMSNorm
from fastpath_lib.rmsnorm.op import explain, rms_norm
from fastpath_lib.routing import force_fallback, record_routes
from fastpath_lib.runtime import use_interpreter

__version__ = "0.1.0"
__all__ = ["Decision", "RMSNorm", "explain", "force_fallback", "fused_add_rms_norm", "fused_add_rms_norm_",
           "record_routes", "rms_norm", "use_interpreter"]
