"""Fastpath Kit's library: a Triton RMSNorm fast path behind an eligibility predicate, and the pieces to prove it.

Public API (names other parts of the kit rely on):

* :func:`rms_norm` — ``torch.nn.functional.rms_norm``'s contract, Triton kernels where eligible.
* :func:`explain` — the :class:`Decision` for a call: route and every reason it falls back.
* :func:`record_routes` — count the routes taken inside a block.
* :func:`force_fallback` — force the fallback inside a block (or set ``FASTPATH_FORCE_FALLBACK=1``).
* :class:`RMSNorm` — drop-in for ``torch.nn.RMSNorm``.

Importing this package sets ``TRITON_INTERPRET=1`` when there is no CUDA device and the variable is unset, so the
kernels run on a CPU through Triton's interpreter.
"""

from fastpath_lib import runtime as _runtime

_runtime.configure()

from fastpath_lib.eligibility import Decision  # noqa: E402
from fastpath_lib.rmsnorm.module import RMSNorm  # noqa: E402
from fastpath_lib.rmsnorm.op import explain, rms_norm  # noqa: E402
from fastpath_lib.routing import force_fallback, record_routes  # noqa: E402

__version__ = "0.1.0"
__all__ = ["Decision", "RMSNorm", "explain", "force_fallback", "record_routes", "rms_norm"]
