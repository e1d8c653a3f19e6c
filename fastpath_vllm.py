"""vLLM's entry point into Fastpath Kit (``vllm.general_plugins`` in ``pyproject.toml``): nothing unless asked.

vLLM calls :func:`register` in every process it starts (the API server too), without a ``try``. Without
``FASTPATH_VLLM=1`` in the environment it returns ``False`` and has imported nothing of the kit: this module stands
outside the ``fastpath_lib`` package, whose import (17 modules, their ``torch.library`` registrations) a vLLM that did
not ask for the kit should not pay. With it, :func:`fastpath_lib.vllm_plugin.register` decides and logs what it did.
"""

import os
import sys

#: The environment variable that turns the plugin on (``1``); any other value or none: off.
OPT_IN = "FASTPATH_VLLM"


def register() -> bool:
    """The ``vllm.general_plugins`` entry point. Never raises.

    Returns:
        whether the kit's providers are registered and first in the priority (``False`` without
        ``FASTPATH_VLLM=1``, importing nothing).
    """
    if os.environ.get(OPT_IN) != "1":
        return False
    try:
        from fastpath_lib import vllm_plugin

        return vllm_plugin.register()
    except Exception as e:  # the kit itself broken: vLLM starts without it
        print(f"fastpath_kit: vLLM plugin not registered: {type(e).__name__}: {e}", file=sys.stderr)
        return False
