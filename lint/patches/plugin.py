"""vLLM general plugin: `MTPLINT_PATCHES=id,id vllm serve ...` applies mtplint's runtime
patches in every vLLM process (engine core, workers), before models are built.

A patch that does not apply to the running vLLM raises: the server must not start with a
fix the user believes is active but is not.
"""

from __future__ import annotations

import logging
import os

logger = logging.getLogger("mtplint.patches")


def register() -> None:
    ids = [p.strip() for p in os.environ.get("MTPLINT_PATCHES", "").split(",") if p.strip()]
    if not ids:
        return
    from .catalog import apply

    for result in apply(ids):
        logger.warning("mtplint patch %s: %s", result["id"], result.get("status"))
